"""The cell's hardware addresses when none is given: placeholders a real cell overrides.

``DEFAULT_ROBOT_IP`` is URSim's (the UR simulator's) address, ``DEFAULT_FT_SENSOR_IP`` empty (the
driver then refuses to start with ``ft_backend: netft`` and names the parameter). The driver's
parameter schema and the node graph's description both take them from here.
"""

DEFAULT_ROBOT_IP = "192.168.56.101"
DEFAULT_FT_SENSOR_IP = ""

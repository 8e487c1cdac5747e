"""robot_grinding_sim: simulated and physical robotic grinding.

The package splits into a ROS-free core (``core``, ``hardware``) and thin ROS 2 adapters
(``ros``, ``nodes``). Importing this package imports nothing heavy and nothing from ROS.
"""

__version__ = "0.1.0"

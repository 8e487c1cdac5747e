"""robot_grinding_sim: simulated and physical robotic grinding.

The package splits into a ROS-free core (``core``, ``hardware``) and thin ROS 2 adapters
(``ros``, ``nodes``). Importing this package imports nothing heavy and nothing from ROS; in a node
process it first takes over SIGINT/SIGTERM (:mod:`robot_grinding_sim.ros.early_signals`: the
earliest point a node's console script reaches, so a Ctrl-C during its imports ends it with 0).
"""

from robot_grinding_sim.ros.early_signals import install_if_node_process as _install_if_node_process

_install_if_node_process()

__version__ = "0.1.0"

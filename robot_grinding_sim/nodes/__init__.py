"""One thin rclpy node per ``ros2 run`` executable: convert messages, call the core, convert back.

In a node process, SIGINT/SIGTERM are recorded from this import on (before the node's heavy
imports) and honoured by run_node: :mod:`robot_grinding_sim.ros.early_signals`.
"""

from robot_grinding_sim.ros.early_signals import install_if_node_process

install_if_node_process()

"""One thin rclpy node per ``ros2 run`` executable: convert messages, call the core, convert back.

In a node process, SIGINT/SIGTERM end the process from the package's import on (before the node's
heavy imports), until run_node takes over: :mod:`robot_grinding_sim.ros.early_signals`.
"""

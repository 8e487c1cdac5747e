"""The ROS-free core: every computation of the package lives here.

Nothing under ``core`` imports rclpy, a message package or launch; ``test/unit/test_core_is_ros_free.py``
enforces it. Positions are metres, angles radians, forces newtons (REP-103).
"""

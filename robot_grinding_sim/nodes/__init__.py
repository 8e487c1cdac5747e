"""One thin rclpy node per ``ros2 run`` executable: convert messages, call the core, convert back."""

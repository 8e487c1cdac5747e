"""Protocols to real devices (force-torque sensors, robot controllers) and their emulators; no ROS."""

"""Shared ROS adapters: message conversions, parameter declaration, environment set-up."""

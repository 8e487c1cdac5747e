"""Grinding cell with the real arm and force-torque sensor.

    ros2 launch robot_grinding_sim real.launch.py robot_ip:=<arm> ft_sensor_ip:=<sensor> [rviz:=true]

Starts the nodes robot_grinding_sim/bringup.py lists for mode "real" (hardware_driver forwards the
commands to the robot's ros2_control controllers and publishes the measured /ft_sensor/wrench;
collision_node and contact_solver_node predict the contact force). ``grinding bringup real``
starts the same nodes on a pip install. ``ros2 launch ... --show-args`` lists the arguments.
"""

from robot_grinding_sim.bringup import launch_description


def generate_launch_description():
    return launch_description("real")

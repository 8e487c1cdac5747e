"""Simulated grinding cell.

    ros2 launch robot_grinding_sim sim.launch.py [rviz:=true] [params_file:=my.yaml] [record:=bag_dir]

Starts the nodes robot_grinding_sim/bringup.py lists for mode "sim" (dynamics_node simulates the
arm and publishes /clock; the other nodes follow sim time). ``grinding bringup sim`` starts the
same nodes on a pip install. ``ros2 launch ... --show-args`` lists the arguments.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction

from launch import LaunchDescription
from robot_grinding_sim.bringup import LAUNCH_ARGUMENTS, launch_actions

MODE = "sim"


def _nodes(context, *args, **kwargs):
    return launch_actions(MODE, context)


def generate_launch_description():
    arguments = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in LAUNCH_ARGUMENTS[MODE].items()
    ]
    return LaunchDescription([*arguments, OpaqueFunction(function=_nodes)])

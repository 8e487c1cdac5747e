"""Simulated grinding cell.

    ros2 launch robot_grinding_sim sim.launch.py [rviz:=true] [params_file:=my.yaml] [record:=bag_dir]

Starts the nodes robot_grinding_sim/bringup.py lists for mode "sim" (dynamics_node simulates the
arm and publishes /clock; the other nodes follow sim time). ``grinding bringup sim`` starts the
same nodes on a pip install. ``ros2 launch ... --show-args`` lists the arguments.
"""

from robot_grinding_sim.bringup import launch_description


def generate_launch_description():
    return launch_description("sim")

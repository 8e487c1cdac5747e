"""Running a plan on an arm, ROS-free: the executive's job state machine (executive: start, pause,
resume, stop, tracking and done) and the driver's force control along the surface normal
(force_control).
"""

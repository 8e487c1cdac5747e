"""The grinding job: the configuration (every physical parameter once, with units and ranges),
the coupled arm + contact step shared by the in-process job and the ROS nodes, the force-target
optimisation, and the job's outputs (bag, plot, summary).
"""

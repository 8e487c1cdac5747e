"""The coupled arm + contact step, one physics for the in-process job and the node graph: the
contact side and the arm side of a step (coupled_step), the step compiled whole (compiled_step),
and the simulated F/T sensor of a cell (ft).
The scheduler (scheduler) says when a simulated arm takes its steps against the wall clock, how it
waits for a contact side that answers over a transport (lockstep), and how its stamps map to its sim
time; ROS-free: the clocks are callables handed in.
"""

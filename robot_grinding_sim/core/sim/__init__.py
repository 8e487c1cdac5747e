"""The coupled arm + contact step, one physics for the in-process job and the node graph: the
contact side and the arm side of a step (coupled_step), the step compiled whole (compiled_step),
and the simulated F/T sensor of a cell (ft).
"""

"""Closing the loop with measured data: the cell's parameters identified from a recorded run
(calibrate: F/T bias, tool mass and centre of mass, contact stiffness and damping).
"""

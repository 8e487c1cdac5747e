"""The arm: URDF model, spatial algebra, dynamics kernels (FK, Jacobians, RNEA, CRBA, forward
dynamics, effective mass), inverse kinematics, and the servo-controlled arm simulator.

Everything in the robot's root frame (``base_link``), SI units. Nothing here knows about
contact, parts or plans.
"""

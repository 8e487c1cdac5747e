"""Contact along a normal: force laws (Kelvin-Voigt with its closed form, the Hunt-Crossley
family), restitution, the variable-step engine, the tangential grinding force, the contact patch
and the force-torque sensor model.

Scalar physics only: geometry (where the contact is) comes from :mod:`..geometry`, the arm's
effective mass from :mod:`..robot`.
"""

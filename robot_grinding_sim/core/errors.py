"""Exceptions of the core. Every message names the input and says what is wrong with it."""


class GrindingSimError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(GrindingSimError, ValueError):
    """Bad input: wrong shape, NaN, out of range, unknown name, malformed file."""


class ModelError(InputError):
    """A robot model (URDF) that cannot be used: missing inertials, loops, missing parents."""


class GeometryError(InputError):
    """Bad geometry: empty or degenerate meshes, NaN vertices, unusable CAD."""


class PlanningError(GrindingSimError):
    """A plan that cannot be made: unreachable or colliding waypoints."""

"""Analytic surfaces (plane, cylinder, cone, sphere, torus) evaluated compiled (numba): S(u, v) and its
first derivatives from the surface's placement and radii, as OpenCascade parametrises them.

One evaluator serves :class:`~robot_grinding_sim.core.geometry.cad_face.CadFace` (vectorised,
:class:`AnalyticEval`) and the compiled closest-point projection
(:func:`~robot_grinding_sim.core.geometry.projector.face_project`, which the compiled coupled step
calls). Positions in metres, part frame.

Surfaces (o the location, X, Y, Z the placement's axes, rows of ``frame`` (4, 3); radial(u) =
cos u X + sin u Y):

- plane: o + u X + v Y;
- cylinder (prm R): o + R radial + v Z;
- cone (prm R, semi-angle a): o + (R + v sin a) radial + v cos a Z;
- sphere (prm R): o + R cos v radial + R sin v Z;
- torus (prm R, r): o + (R + r cos v) radial + r sin v Z.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: surface kinds of the compiled evaluators (0: B-spline, :mod:`~robot_grinding_sim.core.geometry.bspline`)
BSPLINE, PLANE, CYLINDER, CONE, SPHERE, TORUS = range(6)
KINDS = {"plane": PLANE, "cylinder": CYLINDER, "cone": CONE, "sphere": SPHERE, "torus": TORUS}


@njit(cache=True, nogil=True)
def analytic_point(kind, frame, prm, u, v, out):  # pragma: no cover - numba
    """S, S_u, S_v (rows of out (3, 3)) of an analytic surface at (u, v) (module docstring)."""
    o, X, Y, Z = frame[0], frame[1], frame[2], frame[3]
    if kind == PLANE:
        for c in range(3):
            out[0, c] = o[c] + u * X[c] + v * Y[c]
            out[1, c] = X[c]
            out[2, c] = Y[c]
        return
    cu, su = math.cos(u), math.sin(u)
    R = prm[0]
    if kind == CYLINDER:
        for c in range(3):
            rad, drad = cu * X[c] + su * Y[c], -su * X[c] + cu * Y[c]
            out[0, c] = o[c] + R * rad + v * Z[c]
            out[1, c] = R * drad
            out[2, c] = Z[c]
    elif kind == CONE:
        sa, ca = math.sin(prm[1]), math.cos(prm[1])
        rho = R + v * sa
        for c in range(3):
            rad, drad = cu * X[c] + su * Y[c], -su * X[c] + cu * Y[c]
            out[0, c] = o[c] + rho * rad + v * ca * Z[c]
            out[1, c] = rho * drad
            out[2, c] = sa * rad + ca * Z[c]
    elif kind == SPHERE:
        cv, sv = math.cos(v), math.sin(v)
        for c in range(3):
            rad, drad = cu * X[c] + su * Y[c], -su * X[c] + cu * Y[c]
            out[0, c] = o[c] + R * cv * rad + R * sv * Z[c]
            out[1, c] = R * cv * drad
            out[2, c] = -R * sv * rad + R * cv * Z[c]
    else:  # torus
        r = prm[1]
        cv, sv = math.cos(v), math.sin(v)
        rho = R + r * cv
        for c in range(3):
            rad, drad = cu * X[c] + su * Y[c], -su * X[c] + cu * Y[c]
            out[0, c] = o[c] + rho * rad + r * sv * Z[c]
            out[1, c] = rho * drad
            out[2, c] = -r * sv * rad + r * cv * Z[c]


@njit(cache=True, nogil=True)
def analytic_kernel(kind, frame, prm, u, v, S, Su, Sv):  # pragma: no cover - numba
    """:func:`analytic_point` at u, v (K,) into S, Su, Sv (K, 3)."""
    out = np.empty((3, 3))
    for k in range(u.shape[0]):
        analytic_point(kind, frame, prm, u[k], v[k], out)
        for c in range(3):
            S[k, c] = out[0, c]
            Su[k, c] = out[1, c]
            Sv[k, c] = out[2, c]


class AnalyticEval:
    """Evaluation of an analytic surface S(u, v) and its first derivatives (numba kernel).

    Args:
        kind: ``plane``, ``cylinder``, ``cone``, ``sphere`` or ``torus``.
        origin, x, y, z: (3,) the placement (location and axes), m.
        params: R (cylinder, sphere), (R, semi-angle) (cone), (major R, minor r) (torus), m / rad.
    """

    def __init__(self, kind: str, origin: FloatArray, x: FloatArray, y: FloatArray, z: FloatArray,
                 params: tuple[float, ...] = ()) -> None:
        self.name = kind
        self.kind = KINDS[kind]
        self.frame = np.ascontiguousarray(np.array([origin, x, y, z], dtype=float).reshape(4, 3))
        self.prm = np.zeros(2)
        self.prm[:len(params)] = params

    def __call__(self, u: FloatArray, v: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        K = len(u)
        S, Su, Sv = np.empty((K, 3)), np.empty((K, 3)), np.empty((K, 3))
        analytic_kernel(self.kind, self.frame, self.prm, np.ascontiguousarray(u, dtype=float),
                        np.ascontiguousarray(v, dtype=float), S, Su, Sv)
        return S, Su, Sv

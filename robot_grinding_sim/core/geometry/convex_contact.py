"""A box or cylinder (a grinding wheel) against a mesh: the deepest point by support-point iteration.

With n the mesh's outward normal at the contact, the deepest point of a convex primitive P is its
support point s(-n); the closest point of s on the mesh gives a new n, until n is stationary (a
point of P deepest along the surface normal: exact against a flat region, and the unique answer
against a convex one when the support point is unique). A wheel side-on to a curved part is a
1-D problem along its side line, solved by root finding (:func:`refine_side_line`).

The mesh is reached only through a :data:`MeshQuery` (the scene's exact closest-point query of a
world point, warm-started and using the mesh's exact surface when it has one), so the algorithm
is independent of how the scene stores its objects.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robot_grinding_sim.core.geometry.collision_objects import CYLINDER, FloatArray, SceneObject, support_point

#: ``query(x_w, exact_surface) -> (sd, p_w, n_w, exact)`` of the world point x_w against the mesh
#: (signed distance, closest point, unit outward normal there, exact?), or None when the answer
#: is cut off (an open mesh with the point far behind it). ``exact_surface``: use the mesh's exact
#: surface even when the point is not within its tolerance of the mesh.
MeshQuery = Callable[[FloatArray, bool], tuple[float, FloatArray, FloatArray, bool] | None]

#: (point on the mesh, normal from the mesh towards P, depth m, deepest point of P, exact)
ConvexContact = tuple[FloatArray, FloatArray, float, FloatArray, bool]


class _Unsettled(Exception):
    """A refinement that cannot finish (an open mesh query cut off)."""


def deepest_in_mesh(P: SceneObject, query: MeshQuery, overlaps: Callable[[], bool]) -> ConvexContact | list | None:
    """Deepest point of a box/cylinder P in a mesh (reached through ``query``).

    When the support point lies on a face or edge of P normal to n (a tie: a wheel face-on or
    side-on), the depth is exact only if the surface is flat over that face/edge, checked at its
    extreme points; if not, the deepest of those points is reported with ``exact=False`` (a
    lower bound).

    Args:
        P: the box or cylinder (world pose ``P.T``).
        query: the mesh's closest-point query (see :data:`MeshQuery`); the mesh must be orientable.
        overlaps: python-fcl's boolean test of P against the mesh, asked only when the deepest
            point along the normal lies outside.

    Returns:
        None to fall back to python-fcl's contacts (a query cut off, or a support point outside
        while ``overlaps()``, e.g. P straddling an edge of the part); [] for no contact; else a
        :data:`ConvexContact`.
    """
    q = query(P.T[:3, 3], False)
    if q is None or q[0] > P.rot_radius:
        return []  # P lies inside a ball around its centre that does not reach the mesh
    n = q[2]
    converged = False
    best = None
    seen: list[FloatArray] = []
    for _ in range(30):
        s_deep, ties = support_point(P, -n)
        if any(float(np.abs(s_deep - x).max()) < 1e-15 for x in seen[:-1]):
            break  # a cycle between support points (a flat face on a curved region)
        seen.append(s_deep)
        q = query(s_deep, True)
        if q is None:
            return None
        sd, p, n_new, exact = q
        if best is None or sd < best[0]:
            best = (sd, p, n_new, s_deep, ties, n)
        converged = float(n_new @ n) > 1.0 - 1e-15
        n = n_new
        if converged:
            best = (sd, p, n_new, s_deep, ties, n_new)
            break
    assert best is not None
    sd, p, n, s_deep, ties, n_used = best
    exact = converged and exact
    flat = True
    for x in ties:  # a tie: flat over the face/edge, or report its deepest extreme point
        qx = query(x, True)
        if qx is None:
            continue
        if abs(qx[0] - (sd + float(n_used @ (x - s_deep)))) > 1e-10:
            flat = False
        if qx[0] < sd:
            sd, p, n, s_deep = qx[0], qx[1], qx[2], x
    if not flat:
        exact = False
    if P.kind == CYLINDER and (not flat or not converged) and len(ties) != 8:
        # side-on (or oscillating between the ends of the side line): a 1-D problem, solved
        refined = refine_side_line(P, n_used, query)
        if refined is not None and refined[0] <= sd + 1e-12:
            sd, p, n, s_deep = refined
            exact = True
    if sd >= 0.0:
        # the deepest point along the normal is outside: no contact, unless P straddles an
        # edge of the part elsewhere, which python-fcl's boolean test detects (then its
        # inexact contacts are used)
        return None if overlaps() else []
    return p, n, float(-sd), s_deep, exact


def refine_side_line(P: SceneObject, n: FloatArray, query: MeshQuery
                     ) -> tuple[float, FloatArray, FloatArray, FloatArray] | None:
    """Deepest point of a cylinder's side line on a curved surface (a wheel side-on).

    The side line facing the surface is the support of -n with n's axial part removed; along
    it, x(t) = e0 + t (e1 - e0) and d sd / dt = n(x) . (e1 - e0): the deepest point is a root
    of that (brentq) or an end. The line is then recomputed from the normal there until it
    no longer moves.

    Returns:
        (sd, point on the mesh, normal, point of the line), or None if it does not settle
        (the contact stays flagged) or P is face-on.
    """
    from scipy.optimize import brentq

    axis = P.T[:3, 2]
    line = None
    best: tuple | None = None
    for _ in range(10):
        nperp = n - float(n @ axis) * axis
        norm = float(np.linalg.norm(nperp))
        if norm < 1e-9:
            return None  # face-on: not a line contact
        nperp /= norm
        _, ends = support_point(P, -nperp)
        if len(ends) != 2:
            return None
        e0, e1 = ends
        seg = e1 - e0
        if best is not None and line is not None and float(np.linalg.norm(e0 - line)) < 1e-13:
            return best
        line = e0

        def along(t: float, e0: FloatArray = e0, seg: FloatArray = seg) -> tuple:
            x = e0 + t * seg
            q = query(x, True)
            if q is None:
                raise _Unsettled
            return q[0], q[1], q[2], x

        try:
            q0, q1 = along(0.0), along(1.0)
            g0, g1 = float(q0[2] @ seg), float(q1[2] @ seg)
            if g0 < 0.0 < g1:
                t = brentq(lambda t, seg=seg: float(along(t)[2] @ seg), 0.0, 1.0, xtol=1e-15, rtol=1e-15)
                best = along(t)
            else:
                best = min(q0, q1, key=lambda q: q[0])
        except _Unsettled:
            return None
        n = best[2]
    return None

"""Exact closest point on a CAD face's surface, for the tool's contact query.

:class:`FaceProjector` is the callback that ``CollisionScene.set_exact_surface``
(:mod:`~robot_grinding_sim.core.geometry.collision`) takes: given points (k, 3) in the part frame
it returns the closest points on the face's surface, the outward unit normals there and whether
each lies on the face (within its parameter range and its trim: beside the face, or over a hole,
the scene takes the mesh's closest point, on the face's boundary, instead) (Gauss-Newton in
(u, v), warm-started from the previous answer, so one or two surface evaluations per query while
the tool moves smoothly).
Depth and normal are exact to the tolerance below (1e-12 m tangentially), not limited by a
tessellation.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from robot_grinding_sim.core.geometry.analytic import BSPLINE, AnalyticEval, analytic_point
from robot_grinding_sim.core.geometry.bspline import BSplineEval, bspline_point
from robot_grinding_sim.core.geometry.collision import FOOT_TOLERANCE
from robot_grinding_sim.core.robot.spatial import cross3

FloatArray = NDArray[np.float64]

#: slack of the on-face test in parameter units (the Gauss-Newton answer at an edge lands on it)
UV_SLACK = 1e-9
#: largest gap, m, between a surface's opposite edges for the face to count as closed on itself
#: (its parameter then wraps like an angle); CAD files close such seams to ~1e-8 m
CLOSED_TOLERANCE = 1e-6


@njit(cache=True)
def gn_step(px, py, pz, S, Su, Sv):
    """One Gauss-Newton step (du, dv) towards the foot of the perpendicular from p on the surface
    at S, Su, Sv (3,), and whether the step is below 1e-12 m (converged)."""
    r0, r1, r2 = px - S[0], py - S[1], pz - S[2]
    a11 = Su[0] * Su[0] + Su[1] * Su[1] + Su[2] * Su[2]
    a12 = Su[0] * Sv[0] + Su[1] * Sv[1] + Su[2] * Sv[2]
    a22 = Sv[0] * Sv[0] + Sv[1] * Sv[1] + Sv[2] * Sv[2]
    g1 = Su[0] * r0 + Su[1] * r1 + Su[2] * r2
    g2 = Sv[0] * r0 + Sv[1] * r1 + Sv[2] * r2
    det = a11 * a22 - a12 * a12
    if det <= 1e-12 * (a11 + a22) ** 2:
        # a degenerate parametrisation (a pole: S_u or S_v vanishes there): damped
        # (Levenberg-Marquardt) step, which leaves the collapsed parameter alone
        damp = 1e-9 * (a11 + a22) + 1e-300
        a11, a22 = a11 + damp, a22 + damp
        det = a11 * a22 - a12 * a12
    du = (a22 * g1 - a12 * g2) / det
    dv = (a11 * g2 - a12 * g1) / det
    # a tangential error e moves the distance by ~e^2/(2 |p - S|) and the normal by e/rho.
    # 1e-12 m: far below the tolerances (1 um, 0.01 deg), and the answer no longer depends
    # on the seed, so two processes asking from different histories (the in-process job,
    # collision_node) agree to 1e-12; Gauss-Newton converges quadratically, so this costs
    # at most one more evaluation than 1e-9 would
    return du, dv, math.sqrt(max(a11 * du * du + 2 * a12 * du * dv + a22 * dv * dv, 0.0)) < 1e-12


@njit(cache=True)
def normal_ok(Su, Sv):
    """(S_u x S_v (3-tuple), whether it is long enough to be the normal (not at a pole))."""
    nx, ny, nz = Su[1] * Sv[2] - Su[2] * Sv[1], Su[2] * Sv[0] - Su[0] * Sv[2], Su[0] * Sv[1] - Su[1] * Sv[0]
    ok = math.sqrt(nx * nx + ny * ny + nz * nz) > 1e-9 * (Su[0] ** 2 + Su[1] ** 2 + Su[2] ** 2
                                                          + Sv[0] ** 2 + Sv[1] ** 2 + Sv[2] ** 2)
    return (nx, ny, nz), ok


@njit(cache=True)
def wrap_period(x, lo, period):
    """x back into [lo, lo + period) on a periodic parameter (period 0: not periodic)."""
    return lo + (x - lo) % period if period > 0.0 else x


@njit(cache=True)
def extrapolate(x, x_prev, period):
    """The warm start's next guess 2 x - x_prev, the step taken the short way round a periodic
    parameter (period 0: not periodic)."""
    if period > 0.0:
        d = x - x_prev
        return x + d - period * round(d / period)
    return 2.0 * x - x_prev


@njit(cache=True)
def in_range(u, v, box):
    """(u, v) (wrapped into their periods) within the face's parameter range: box rows lo, hi and
    period (row 4) as :func:`face_project` takes them. A periodic parameter of a face that spans
    its whole period always is; of a face that spans part of it (half a cylinder), the part. A face
    trimmed inside its box (a hole, a trimmed edge) carries its trim as a bitmap below row 4
    (:func:`trim_rows`): (u, v) must also fall in a cell of the face."""
    for k in range(2):
        x, lo, hi, per = (u, v)[k], box[0, k], box[1, k], box[4, k]
        if per > 0.0 and hi - lo >= per - UV_SLACK:
            continue
        if not lo - UV_SLACK <= x <= hi + UV_SLACK and not (per > 0.0 and x >= lo + per - UV_SLACK):
            return False
    if box.shape[0] > 5:
        return in_trim(u, v, box)
    return True


@njit(cache=True)
def in_trim(u, v, box):
    """Whether (u, v) falls in a cell of the trim bitmap that box rows 5.. hold (:func:`trim_rows`)."""
    n = (int(box[5, 0]), int(box[5, 1]))
    idx = 0
    for k in range(2):
        x, lo, hi, per = (u, v)[k], box[0, k], box[1, k], box[4, k]
        if per > 0.0:
            x = lo + (x - lo) % per
        i = int(math.floor((x - lo) / (hi - lo) * n[k]))
        idx = idx * n[k] + min(max(i, 0), n[k] - 1)
    return box[6 + idx // 2, idx % 2] > 0.5


#: cells of the trim bitmap along u and along v
TRIM_CELLS = 256


def trim_rows(face: Any, box: FloatArray, cells: int = TRIM_CELLS) -> FloatArray | None:
    """The rows appended to the projector's box for a face trimmed inside its parameter box (None
    for a face that is its whole box): row (cells, cells), then the cells' flags (1: on the face,
    by the face's wires; u-major), two per row. The compiled query keeps its
    signature; where the bitmap says "off the face" the scene and the compiled query take the
    mesh's closest point, on the trimmed boundary (a ball over a plate's hole touches the rim,
    not the plane across the hole)."""
    trims = getattr(face, "trims_its_box", None)
    if trims is None or not trims():
        return None
    lo, hi = box[0], box[1]
    # a cell is on the face when its centre and its four corners are: the cells the trim crosses
    # are left to the mesh, exact on the boundary to its tolerance
    ticks = [lo[k] + np.arange(2 * cells + 1) * (hi[k] - lo[k]) / (2 * cells) for k in range(2)]
    U, V = np.meshgrid(ticks[0], ticks[1], indexing="ij")
    ins = face.contains(np.column_stack([U.ravel(), V.ravel()])).reshape(U.shape)
    inside = ins[1::2, 1::2] & ins[:-1:2, :-1:2] & ins[2::2, :-1:2] & ins[:-1:2, 2::2] & ins[2::2, 2::2]
    return np.vstack([[cells, cells], inside.astype(float).reshape(-1, 2)])


@njit(cache=True)
def surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v, work, ev):
    """S, S_u, S_v (rows of ev (3, 3)) at (u, v) of a B-spline (kind 0: tu, tv, pu, pv, hom) or an
    analytic surface (:mod:`~robot_grinding_sim.core.geometry.analytic`: kind, frame, prm)."""
    if kind == BSPLINE:
        bspline_point(tu, tv, pu, pv, hom, u, v, work, ev)
    else:
        analytic_point(kind, frame, prm, u, v, ev)


@njit(cache=True)
def dist2(p, S):
    return (S[0] - p[0]) ** 2 + (S[1] - p[1]) ** 2 + (S[2] - p[2]) ** 2


@njit(cache=True)
def fd_step(x, h, hi_ext):
    """The step of a difference in a parameter at x: forward by h, backward where x + h would
    leave the extended box (its high end hi_ext)."""
    return h if x + h <= hi_ext else -h


@njit(cache=True)
def newton_step(p, ev, evu, evv, hu, hv):
    """Newton step (du, dv) on the gradient of |p - S|^2 / 2, its Hessian's curvature terms
    r . S_uu, r . S_uv, r . S_vv from the first derivatives at (u + hu, v) and (u, v + hv) (evu,
    evv); ok False where that Hessian is not positive definite (no minimum nearby)."""
    r0, r1, r2 = p[0] - ev[0, 0], p[1] - ev[0, 1], p[2] - ev[0, 2]
    Su, Sv = ev[1], ev[2]
    g1 = Su[0] * r0 + Su[1] * r1 + Su[2] * r2
    g2 = Sv[0] * r0 + Sv[1] * r1 + Sv[2] * r2
    ruu = (r0 * (evu[1, 0] - Su[0]) + r1 * (evu[1, 1] - Su[1]) + r2 * (evu[1, 2] - Su[2])) / hu
    rvv = (r0 * (evv[2, 0] - Sv[0]) + r1 * (evv[2, 1] - Sv[1]) + r2 * (evv[2, 2] - Sv[2])) / hv
    ruv = 0.5 * ((r0 * (evu[2, 0] - Sv[0]) + r1 * (evu[2, 1] - Sv[1]) + r2 * (evu[2, 2] - Sv[2])) / hu
                 + (r0 * (evv[1, 0] - Su[0]) + r1 * (evv[1, 1] - Su[1]) + r2 * (evv[1, 2] - Su[2])) / hv)
    h11 = Su[0] * Su[0] + Su[1] * Su[1] + Su[2] * Su[2] - ruu
    h22 = Sv[0] * Sv[0] + Sv[1] * Sv[1] + Sv[2] * Sv[2] - rvv
    h12 = Su[0] * Sv[0] + Su[1] * Sv[1] + Su[2] * Sv[2] - ruv
    det = h11 * h22 - h12 * h12
    if not (h11 > 0.0 and det > 1e-12 * (h11 + h22) ** 2):
        return 0.0, 0.0, False
    return (h22 * g1 - h12 * g2) / det, (h11 * g2 - h12 * g1) / det, True


@njit(cache=True)
def blocked_at_edge(u, v, du, dv, box):
    """Which parameters a step (du, dv) from (u, v) would push out of the extended box (not a
    periodic one): 0 none, 1 u, 2 v, 3 both. Clamping such a step cuts its outward part and
    leaves an inward part that no line search accepts (60 iterations of 30 halvings, 1,800
    evaluations: a millisecond a query in the collision node while the tool passed beside the
    face); the projection moves along the edge instead (:func:`edge_step`)."""
    lo_ext, hi_ext, per = box[2], box[3], box[4]
    out_u = per[0] == 0.0 and ((u <= lo_ext[0] and du < 0.0) or (u >= hi_ext[0] and du > 0.0))
    out_v = per[1] == 0.0 and ((v <= lo_ext[1] and dv < 0.0) or (v >= hi_ext[1] and dv > 0.0))
    return (1 if out_u else 0) + (2 if out_v else 0)


@njit(cache=True)
def edge_step(p, S, Sf, Sf_h, h):
    """Newton's step along an edge of the box for the closest point of p (3,): S (3,) the surface
    point, Sf (3,) its derivative by the free parameter, Sf_h (3,) that derivative h further along
    (its second derivative by differences; Gauss-Newton where the distance is not convex there).
    Returns (step, whether it is below 1e-12 m)."""
    r0, r1, r2 = p[0] - S[0], p[1] - S[1], p[2] - S[2]
    g = Sf[0] * r0 + Sf[1] * r1 + Sf[2] * r2
    a = Sf[0] * Sf[0] + Sf[1] * Sf[1] + Sf[2] * Sf[2]
    curv = ((Sf_h[0] - Sf[0]) * r0 + (Sf_h[1] - Sf[1]) * r1 + (Sf_h[2] - Sf[2]) * r2) / h
    hess = a - curv if a - curv > 0.0 else a
    step = g / hess if hess > 0.0 else 0.0
    return step, math.sqrt(a) * abs(step) < 1e-12


@njit(cache=True)
def descend(p, u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, work, ev, evu, evv):
    """Closest point of p (3,) on the surface from (u, v), ev holding S, S_u, S_v there; returns
    the (u, v) reached (ev at it) and whether the step fell below 1e-12 m.

    Gauss-Newton steps (one evaluation each, quadratic where |p - S| is small against the radius of
    curvature: the warm-started tool, a point on the surface); from the fifth step on, Newton's
    (its curvature terms by differences of the exact first derivatives, so the answer is as exact):
    Gauss-Newton alone converges at the rate |p - S| / rho and diverges past rho, as a 20 mm ball
    over a 25 mm concave fillet is. Each step shortens |p - S| or is halved (a descent method:
    it ends at a minimum, not a saddle or a maximum of the distance)."""
    lo, hi, lo_ext, hi_ext, per = box[0], box[1], box[2], box[3], box[4]
    hu, hv = 1e-7 * (hi[0] - lo[0]), 1e-7 * (hi[1] - lo[1])
    f = dist2(p, ev[0])
    for it in range(60):
        du, dv, done = gn_step(p[0], p[1], p[2], ev[0], ev[1], ev[2])
        if done:  # the last step (< 1e-12 m) taken too: the answer to rounding, whatever the seed
            u = wrap_period(min(max(u + du, lo_ext[0]), hi_ext[0]), lo[0], per[0])
            v = wrap_period(min(max(v + dv, lo_ext[1]), hi_ext[1]), lo[1], per[1])
            surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v, work, ev)
            return u, v, True
        if it >= 4:
            su, sv = fd_step(u, hu, hi_ext[0]), fd_step(v, hv, hi_ext[1])
            surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u + su, v, work, evu)
            surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v + sv, work, evv)
            nu, nv, ok = newton_step(p, ev, evu, evv, su, sv)
            if ok:
                du, dv = nu, nv
        blocked = blocked_at_edge(u, v, du, dv, box)
        if blocked == 3:  # in a corner
            return u, v, False
        if blocked != 0:  # along the edge: the free parameter's second derivative by differences
            if blocked == 2:
                su = fd_step(u, hu, hi_ext[0])
                surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u + su, v, work, evu)
                step, done = edge_step(p, ev[0], ev[1], evu[1], su)
                du, dv = step, 0.0
            else:
                sv = fd_step(v, hv, hi_ext[1])
                surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v + sv, work, evv)
                step, done = edge_step(p, ev[0], ev[2], evv[2], sv)
                du, dv = 0.0, step
            if done:
                return u, v, True
        f_new = f
        for _ in range(30):
            un = wrap_period(min(max(u + du, lo_ext[0]), hi_ext[0]), lo[0], per[0])
            vn = wrap_period(min(max(v + dv, lo_ext[1]), hi_ext[1]), lo[1], per[1])
            surface_point(kind, frame, prm, tu, tv, pu, pv, hom, un, vn, work, evu)
            f_new = dist2(p, evu[0])
            if f_new <= f * (1.0 + 1e-12) + 1e-26:
                break
            du, dv = 0.5 * du, 0.5 * dv
        if f_new > f * (1.0 + 1e-12) + 1e-26:  # no step shortens the distance: a minimum
            return u, v, True
        u, v, f = un, vn, f_new
        ev[:, :] = evu
    return u, v, False


@njit(cache=True)
def grid_seed(x, grid_uv, grid_p):
    """The seed grid's (u, v) nearest to x (3,)."""
    best, kb = np.inf, 0
    for k in range(grid_p.shape[0]):
        e = (grid_p[k, 0] - x[0]) ** 2 + (grid_p[k, 1] - x[1]) ** 2 + (grid_p[k, 2] - x[2]) ** 2
        if e < best:
            best, kb = e, k
    return grid_uv[kb, 0], grid_uv[kb, 1]


@njit(cache=True)
def write_answer(u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, sign, work, ev, out):
    """out (7,) of the answer at (u, v) (ev: S, S_u, S_v there): closest point, outward unit
    normal (its limit just inside the face at a pole), on_face."""
    lo, hi, per = box[0], box[1], box[4]
    for k in range(3):
        out[k] = ev[0, k]
    nv, ok = normal_ok(ev[1], ev[2])
    if not ok:  # S_u x S_v a little way into the face: the normal's limit at a pole
        # towards the middle of the face the short way round (a sphere's pole wrapped to 3 pi / 2)
        mu = extrapolate(u, 0.5 * (lo[0] + hi[0]), per[0]) - u
        mv = extrapolate(v, 0.5 * (lo[1] + hi[1]), per[1]) - v
        nv = (0.0, 0.0, 1.0)
        for t in (1e-7, 1e-5, 1e-3):
            surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u - t * mu, v - t * mv, work, ev)
            nt, ok = normal_ok(ev[1], ev[2])
            if ok:
                nv = nt
                break
    nn = math.sqrt(nv[0] ** 2 + nv[1] ** 2 + nv[2] ** 2)
    for k in range(3):
        out[3 + k] = sign * nv[k] / nn
    out[6] = 1.0 if in_range(u, v, box) else 0.0


@njit(cache=True)
def face_project(p, st, box, grid_uv, grid_p, kind, frame, prm, tu, tv, pu, pv, hom, sign, out):
    """:meth:`FaceProjector.__call__` for one point p (3,) on a B-spline or analytic face, compiled.

    st (4,): the warm start (u, v, previous u, previous v), updated; box (5, 2): rows lo, hi,
    extended lo, extended hi and period (0: not periodic) of (u, v); grid_uv (G, 2), grid_p (G, 3)
    the seeds; the surface (:func:`surface_point`): kind, frame, prm of an analytic surface
    (:class:`~robot_grinding_sim.core.geometry.analytic.AnalyticEval`), tu, tv, pu, pv, hom of a
    B-spline (:class:`BSplineEval`); sign the outward sign.
    out (7,): closest point (3,), outward unit normal (3,), on_face (1.0 / 0.0)."""
    work = np.zeros((12, max(pu, pv, 7) + 1))
    ev, evu, evv = np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3))
    lo, lo_ext, hi_ext, per = box[0], box[2], box[3], box[4]
    u = min(max(extrapolate(st[0], st[2], per[0]), lo_ext[0]), hi_ext[0])
    v = min(max(extrapolate(st[1], st[3], per[1]), lo_ext[1]), hi_ext[1])
    u, v = wrap_period(u, lo[0], per[0]), wrap_period(v, lo[1], per[1])
    surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v, work, ev)
    if math.sqrt(dist2(p, ev[0])) > 0.05:  # far from the last answer: seed from a grid
        u, v = grid_seed(p, grid_uv, grid_p)
        surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v, work, ev)
        st[0], st[1] = u, v
    u, v, _ = descend(p, u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, work, ev, evu, evv)
    st[2], st[3] = st[0], st[1]
    st[0], st[1] = u, v
    write_answer(u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, sign, work, ev, out)


@njit(cache=True)
def face_closest(p, hint, sd_mesh, tol, st, box, grid_uv, grid_p, kind, frame, prm, tu, tv, pu, pv, hom, sign,
                 out):
    """:func:`face_project` of p (3,) checked against the face's tessellation, whose closest point
    to p is ``hint`` (3,) at signed distance ``sd_mesh`` (m; the mesh within ``tol`` m of the
    surface). The warm-started answer stands where it is a foot of the perpendicular on the face,
    its signed distance within tol of the mesh's and its point near the mesh's; otherwise (the warm
    start led to another sheet of a face that wraps round, or to a local minimum) the projection
    starts again from the hint (its nearest grid seed, the hint itself projected, then p), and the
    nearer of the two feet answers. out as :func:`face_project`'s."""
    face_project(p, st, box, grid_uv, grid_p, kind, frame, prm, tu, tv, pu, pv, hom, sign, out)
    near = 10.0 * tol + 0.1 * abs(sd_mesh)
    sd1, ok1 = foot_check(p, out, sd_mesh, tol)
    if ok1 and math.sqrt(dist2(hint, out)) <= near:
        return
    work = np.zeros((12, max(pu, pv, 7) + 1))
    ev, evu, evv = np.empty((3, 3)), np.empty((3, 3)), np.empty((3, 3))
    u, v = grid_seed(hint, grid_uv, grid_p)
    surface_point(kind, frame, prm, tu, tv, pu, pv, hom, u, v, work, ev)
    u, v, _ = descend(hint, u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, work, ev, evu, evv)
    u, v, _ = descend(p, u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, work, ev, evu, evv)
    second = np.empty(7)
    write_answer(u, v, box, kind, frame, prm, tu, tv, pu, pv, hom, sign, work, ev, second)
    sd2, ok2 = foot_check(p, second, sd_mesh, tol)
    if ok2 and (not ok1 or sd2 < sd1):
        out[:] = second
        st[2], st[3] = u, v  # a fresh start: no extrapolation from the rejected answer
        st[0], st[1] = u, v


@njit(cache=True)
def foot_check(p, ans, sd_mesh, tol):
    """(signed distance of p along the answer's normal, whether the answer (7,) is a foot of the
    perpendicular from p on the face within tol of the mesh's signed distance)."""
    r0, r1, r2 = p[0] - ans[0], p[1] - ans[1], p[2] - ans[2]
    sd = ans[3] * r0 + ans[4] * r1 + ans[5] * r2
    foot = math.sqrt(max(r0 * r0 + r1 * r1 + r2 * r2 - sd * sd, 0.0))
    return sd, bool(ans[6] > 0.5 and foot <= FOOT_TOLERANCE and abs(sd - sd_mesh) <= tol)


class FaceProjector:
    """Exact closest point on a CAD face's surface: Gauss-Newton in (u, v), warm-started.

    Called by the collision scene with points (k, 3) in the part frame; returns the closest points
    on the (untrimmed) surface and the outward unit normals there. Converges to 1e-12 m in a few
    iterations from the previous answer (the tool moves little between steps). A B-spline or
    analytic face (plane, cylinder, cone, sphere, torus) runs compiled (:func:`face_project`, also
    called by the compiled coupled step with :meth:`arrays`); other faces run the same steps
    (:func:`gn_step`) on their own evaluator.
    """

    def __init__(self, face: Any) -> None:
        self.face = face
        u0, u1, v0, v1 = face.uv_bounds
        # rows: lo, hi, extended lo, extended hi, period (0: none) of (u, v)
        self.box = np.zeros((5, 2))
        self.box[0], self.box[1] = (u0, v0), (u1, v1)
        pad = 0.05 * (self.box[1] - self.box[0])
        self.box[2], self.box[3] = self.box[0] - pad, self.box[1] + pad
        mid = 0.5 * (self.box[0] + self.box[1])
        self.st = np.array([mid[0], mid[1], mid[0], mid[1]])  # warm start: (u, v), the previous (u, v)
        self._st0 = self.st.copy()
        g = 25  # seeds every 1/24 of the range: the sheets of a face that wraps round stay apart
        uu, vv = np.meshgrid(np.linspace(u0, u1, g), np.linspace(v0, v1, g), indexing="ij")
        self.grid_uv = np.column_stack([uu.ravel(), vv.ravel()])
        self.grid_p = np.ascontiguousarray(face.derivatives(self.grid_uv[:, 0], self.grid_uv[:, 1]).points)
        # the face's own numba/numpy evaluator (S, Su, Sv) when it has one: ~10x less overhead
        # than CadFace.derivatives per call; the outward sign as CadFace applies it
        self._fast = getattr(face, "surface_eval", None)  # CadFace has one; a mesh face has none
        self.sign = float(getattr(face, "orientation_sign", 1.0))
        self._u, self._v = np.zeros(1), np.zeros(1)
        # the surface as face_project takes it: (kind, frame, prm, tu, tv, pu, pv, hom), or None
        f = self._fast
        if isinstance(f, BSplineEval):
            self.surface: tuple | None = (BSPLINE, np.zeros((4, 3)), np.zeros(2), f.tu, f.tv, f.pu, f.pv, f.hom)
        elif isinstance(f, AnalyticEval):
            self.surface = (f.kind, f.frame, f.prm, np.zeros(1), np.zeros(1), 0, 0, np.zeros((1, 1, 4)))
        else:
            self.surface = None
        if self._fast is not None:  # check the sign convention once against CadFace itself
            self.sign = self._outward_sign(face)
        # angular parameters (cylinders, cones, spheres, tori) wrap at 2 pi, and a face closed on
        # itself (a B-spline sheet wrapped all the way round: S(lo) = S(hi) along the whole edge)
        # wraps at its range: a point across the seam must not be clamped to the bounds
        s_mid = self._eval(float(mid[0]), float(mid[1]))[0]
        for k in range(2):
            shifted = mid.copy()
            shifted[k] += 2.0 * math.pi
            if float(np.linalg.norm(self._eval(float(shifted[0]), float(shifted[1]))[0] - s_mid)) < 1e-12:
                self.box[4, k] = 2.0 * math.pi
            elif self._closed(k):
                self.box[4, k] = self.box[1, k] - self.box[0, k]
            if self.box[4, k] > 0.0:
                self.box[2, k], self.box[3, k] = -math.inf, math.inf
        trim = trim_rows(face, self.box)
        if trim is not None:
            self.box = np.ascontiguousarray(np.vstack([self.box, trim]))
        self._out = np.empty(7)

    def _outward_sign(self, face: Any) -> float:
        """+1 if S_u x S_v of the fast evaluator points out of the part (as CadFace's normal), else
        -1; taken where S_u x S_v is largest on the seed grid (a corner of the parameter box can be
        a pole, where it vanishes and CadFace's normal is NaN: surf114.igs's face 3)."""
        S, Su, Sv = self._fast(self.grid_uv[:, 0].copy(), self.grid_uv[:, 1].copy())
        n = np.cross(Su, Sv)
        k = int(np.argmax(np.linalg.norm(n, axis=1) / (np.sum(Su * Su + Sv * Sv, axis=1) + 1e-300)))
        s = face.derivatives(self.grid_uv[k: k + 1, 0], self.grid_uv[k: k + 1, 1])
        dot = float(cross3(Su[k], Sv[k]) @ s.normals[0])
        if not math.isfinite(dot) or dot == 0.0:
            return float(getattr(face, "orientation_sign", 1.0))
        return 1.0 if dot > 0 else -1.0

    def _closed(self, k: int, tol: float = CLOSED_TOLERANCE) -> bool:
        """The surface meets itself across parameter k's range: S at its low and high ends agree
        (to ``tol`` m) all along the other parameter."""
        lo, hi = self.box[0], self.box[1]
        t = np.linspace(lo[1 - k], hi[1 - k], 17)
        a, b = np.empty((len(t), 2)), np.empty((len(t), 2))
        a[:, k], b[:, k], a[:, 1 - k], b[:, 1 - k] = lo[k], hi[k], t, t
        pa = np.array([self._eval(float(x), float(y))[0] for x, y in a])
        pb = np.array([self._eval(float(x), float(y))[0] for x, y in b])
        span = float(np.linalg.norm(pa[:, None] - pa[None], axis=2).max())
        return span > tol and float(np.linalg.norm(pa - pb, axis=1).max()) <= tol

    @property
    def uv(self) -> FloatArray:
        """The last answer's parameters (2,)."""
        return self.st[:2].copy()

    def reset_warm_start(self) -> None:
        """Forget the last answer: the next projection starts where the first did (the answer then
        depends on the point alone, not on the projections before, to the last bit)."""
        self.st[:] = self._st0

    def arrays(self) -> tuple | None:
        """The compiled projection's arguments after the point (:func:`face_project`: st, box,
        grid_uv, grid_p, kind, frame, prm, tu, tv, pu, pv, hom, sign); None for a face with no
        compiled evaluator (neither a B-spline nor an analytic surface)."""
        if self.surface is None:
            return None
        return (self.st, self.box, self.grid_uv, self.grid_p, *self.surface, self.sign)

    def _eval(self, u: float, v: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        if self._fast is not None:
            self._u[0], self._v[0] = u, v
            S, Su, Sv = self._fast(self._u, self._v)
            return S[0], Su[0], Sv[0]
        s = self.face.derivatives(u, v)
        return s.points[0], s.du[0], s.dv[0]

    def _one(self, p: FloatArray) -> None:
        """:func:`face_project`'s steps on a face without a compiled evaluator, into self._out."""
        st, box = self.st, self.box
        per = box[4]
        u = wrap_period(min(max(extrapolate(st[0], st[2], per[0]), box[2, 0]), box[3, 0]), box[0, 0], per[0])
        v = wrap_period(min(max(extrapolate(st[1], st[3], per[1]), box[2, 1]), box[3, 1]), box[0, 1], per[1])
        S, Su, Sv = self._eval(u, v)
        if float(np.linalg.norm(S - p)) > 0.05:  # far from the last answer: seed from a grid
            u, v = (float(z) for z in self.grid_uv[int(np.argmin(np.sum((self.grid_p - p) ** 2, axis=1)))])
            S, Su, Sv = self._eval(u, v)
            st[0], st[1] = u, v
        for _ in range(50):
            du, dv, done = gn_step(float(p[0]), float(p[1]), float(p[2]), S, Su, Sv)
            if done:
                break
            blocked = blocked_at_edge(u, v, du, dv, box)
            if blocked == 3:  # in a corner
                break
            if blocked != 0:  # along the edge (descend's steps)
                pf = np.asarray(p, dtype=float)
                if blocked == 2:
                    h = fd_step(u, 1e-7 * (box[1, 0] - box[0, 0]), box[3, 0])
                    step, done = edge_step(pf, S, Su, self._eval(u + h, v)[1], h)
                    du, dv = step, 0.0
                else:
                    h = fd_step(v, 1e-7 * (box[1, 1] - box[0, 1]), box[3, 1])
                    step, done = edge_step(pf, S, Sv, self._eval(u, v + h)[2], h)
                    du, dv = 0.0, step
                if done:
                    break
            u = wrap_period(min(max(u + du, box[2, 0]), box[3, 0]), box[0, 0], per[0])
            v = wrap_period(min(max(v + dv, box[2, 1]), box[3, 1]), box[0, 1], per[1])
            S, Su, Sv = self._eval(u, v)
        st[2], st[3], st[0], st[1] = st[0], st[1], u, v
        nv, ok = normal_ok(Su, Sv)
        if not ok:
            nv = (0.0, 0.0, 1.0)  # a collapsed face: no normal anywhere
            mu, mv = (extrapolate(x, 0.5 * (box[0, k] + box[1, k]), per[k]) - x for k, x in enumerate((u, v)))
            for t in (1e-7, 1e-5, 1e-3):
                _, Su, Sv = self._eval(u - t * mu, v - t * mv)
                nt, ok = normal_ok(Su, Sv)
                if ok:
                    nv = nt
                    break
        n = np.array(nv)
        self._out[:3], self._out[3:6] = S, self.sign * n / float(np.linalg.norm(n))
        self._out[6] = 1.0 if self.on_face(u, v) else 0.0

    def on_face(self, u: float, v: float) -> bool:
        """(u, v) within the face's parameter range (a periodic parameter always is) and, for a
        face trimmed inside its box (a hole, a slanted edge), on the face (:func:`trim_rows`)."""
        return bool(in_range(float(u), float(v), self.box))

    #: the collision scene may pass the mesh's closest points and signed distances (:func:`face_closest`)
    takes_hints = True

    def __call__(self, points: FloatArray, hints: FloatArray | None = None, sd_mesh: FloatArray | None = None,
                 tol: float = 0.0) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
        """Closest points (k, 3) and outward normals (k, 3) of ``points`` (k, 3), part frame, m; and
        on_face (k,): the closest point within the face's parameter range (not beside the face).
        With ``hints`` (k, 3), the face's tessellation's closest points to ``points``, at signed
        distances ``sd_mesh`` (k,), the tessellation within ``tol`` m of the surface: each answer
        is checked against them (:func:`face_closest`)."""
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        out_p = np.empty_like(pts)
        out_n = np.empty_like(pts)
        on = np.empty(len(pts), dtype=bool)
        a = self.arrays()
        out = self._out
        for k, p in enumerate(pts):
            if a is not None and hints is not None and sd_mesh is not None:
                face_closest(np.ascontiguousarray(p), np.ascontiguousarray(hints[k], dtype=float),
                             float(sd_mesh[k]), float(tol), *a, out)
            elif a is not None:
                face_project(np.ascontiguousarray(p), *a, out)
            else:
                self._one(p)
            out_p[k], out_n[k], on[k] = out[:3], out[3:6], out[6] > 0.5
        return out_p, out_n, on

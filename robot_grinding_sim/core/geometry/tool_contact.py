"""Where the ball tool touches the part: the workpiece scene and the tool's contact query.

One query serves the in-process job and ``collision_node``: the tool is a sphere of radius R
centred on the tool centre point (the URDF's ``tcp``); the workpiece is

- a CAD part with one ground face: that face's tessellation in a
  :class:`~robot_grinding_sim.core.geometry.collision.CollisionScene` (broad phase) with the
  face's exact surface (:class:`~robot_grinding_sim.core.geometry.projector.FaceProjector`)
  answering the closest-point query, so gap and normal are exact (not limited by the mesh);
- a mesh part, or several faces: the tessellated part, closest point on the triangles. A wheel,
  pad or disc runs the same compiled query there with no exact surface (:data:`NO_SURFACE`): the
  triangles are the surface (a mesh part's own; several CAD faces' tessellation, as for the ball).

:meth:`ToolContactQuery.query` returns a :class:`ContactGeometry`: the signed gap between the
tool's surface and the part (m, < 0: penetration d = -gap), the part's outward unit normal at
the closest point and that point, in the frame of the scene (the robot's ``base_link``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.collision import FOOT_TOLERANCE, CollisionScene
from robot_grinding_sim.core.geometry.meshquery import signed_closest_world
from robot_grinding_sim.core.geometry.projector import FaceProjector, face_closest
from robot_grinding_sim.core.layout import Layout

FloatArray = NDArray[np.float64]

#: the exact surface of each scene :func:`workpiece_scene` made (the compiled query reads it)
_PROJECTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: the surface kind of a workpiece with no exact surface: the compiled query answers from the mesh
NO_SURFACE = -1


def no_surface_arrays() -> tuple:
    """The arguments of a projector (:meth:`FaceProjector.arrays`, an analytic surface's types, so the
    compiled query is the same specialisation) whose kind is :data:`NO_SURFACE`: :func:`surface_gap`
    then answers from the mesh alone."""
    return (np.zeros(4), np.zeros((5, 2)), np.zeros((1, 2)), np.zeros((1, 3)), NO_SURFACE, np.zeros((4, 3)),
            np.zeros(2), np.zeros(1), np.zeros(1), 0, 0, np.zeros((1, 1, 4)), 1.0)

TOOL = "tool"
WORKPIECE = "workpiece"
#: A contact row (a point of the /contact/points cloud, collision_node -> contact_solver_node): the
#: point on the part (m), the part's outward unit normal, the penetration depth (m; negative: the
#: gap of a near contact) and the contact's stiffness (a tool with a patch: k_w A_c, N/m, its depth
#: then the equivalent penetration F / K; -1: the law's own, a point contact such as the ball's).
CONTACT_ROW = Layout("contact_row", (
    ("x", 1, "m", "closest point on the part"), ("y", 1, "m", ""), ("z", 1, "m", ""),
    ("normal", 3, "", "outward unit normal of the part"),
    ("depth", 1, "m", "penetration (negative: the gap of a near contact)"),
    ("stiffness", 1, "N/m", "patch stiffness k_w A_c of a tool with a patch; -1: the law's own"),
))
#: Columns of a contact row, in order (:data:`CONTACT_ROW`'s element names: the cloud's fields)
ROW_FIELDS = CONTACT_ROW.names
#: a row without its last column (stiffness): a point contact (clouds of the ball before the column)
POINT_ROW_LEN = CONTACT_ROW.index.stiffness


@dataclass(frozen=True)
class ContactGeometry:
    """The tool against the part at one tool position (frame of the scene, base_link).

    Attributes:
        gap: signed distance from the tool's surface to the part, m (< 0: penetration).
        normal: (3,) unit normal of the part at ``point``, pointing out of the part (to the tool).
        point: (3,) closest point on the part's surface, m.
        centre: (3,) the tool centre the query was made for, m.
        stiffness: a tool with a patch: its patch stiffness k_w A_c, N/m (the gap is then the
            equivalent penetration -F / K); -1: the law's own (a point contact).
    """

    gap: float
    normal: FloatArray
    point: FloatArray
    centre: FloatArray
    stiffness: float = -1.0

    @property
    def depth(self) -> float:
        """Penetration d = -gap, m (negative while apart)."""
        return -self.gap

    def row(self) -> FloatArray:
        """The contact as a row of :data:`ROW_FIELDS` (:data:`CONTACT_ROW`, (8,))."""
        return np.array([*self.point, *self.normal, self.depth, self.stiffness])

    @classmethod
    def from_rows(cls, rows: FloatArray, centre: FloatArray) -> ContactGeometry | None:
        """The contact of rows (k, 8) of :data:`ROW_FIELDS` for the tool at ``centre`` (3,): the
        deepest row (one point of a ball, one patch of a wheel, pad or disc) with its stiffness;
        None for no rows. Rows (k, 7) without the stiffness column are point contacts (stiffness
        -1: the law's own).

        Raises:
            InputError: rows of another width, NaN or inf, a normal that is not a unit vector, a
                stiffness that is neither > 0 nor -1.
        """
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] not in (CONTACT_ROW.size, POINT_ROW_LEN):
            raise InputError(f"contact rows: expected (k, {CONTACT_ROW.size}) values ({', '.join(ROW_FIELDS)}), "
                             f"got shape {rows.shape}")
        if len(rows) == 0:
            return None
        if not np.isfinite(rows).all():
            raise InputError("contact rows: NaN or inf values")
        i = CONTACT_ROW.index
        r = rows[int(np.argmax(rows[:, i.depth]))]
        n = r[CONTACT_ROW.slice("normal")]
        norm = float(np.linalg.norm(n))
        if not 0.9 < norm < 1.1:
            raise InputError(f"contact rows: normal {n.tolist()} is not a unit vector")
        k = float(r[i.stiffness]) if len(r) > i.stiffness else -1.0
        if not (k > 0.0 or k == -1.0):
            raise InputError(f"contact rows: stiffness {k} is neither > 0 (a patch's, N/m) nor -1 (the law's own)")
        return cls(-float(r[i.depth]), n / norm, r[:3].copy(), np.asarray(centre, dtype=np.float64).copy(), k)


def tool_sphere_radius(model: Any, tcp_link: str, tool_link: str | None = None) -> float:
    """Radius (m) of the sphere collision geometry centred on ``tcp_link`` (of ``tool_link`` if given).

    Raises:
        InputError: naming the URDF and links when there is no such sphere.
    """
    model = getattr(model, "robot", model)  # a held part's robot (sim/held_part.py): the tool where it stands
    q0 = np.zeros(model.nq)
    if tcp_link not in model.link_names:
        raise InputError(f"{model.source}: no link {tcp_link!r} (links: {', '.join(model.link_names)})")
    tcp = model.fk(q0, tcp_link)[:3, 3]
    for g in model.collision_geometry:
        if g.kind != "sphere" or (tool_link is not None and g.link != tool_link) or g.link not in model.link_names:
            continue
        centre = (model.fk(q0, g.link) @ g.origin)[:3, 3]
        if np.linalg.norm(centre - tcp) < 1e-6:
            return float(g.params["radius"])
    which = f"of link {tool_link!r} " if tool_link else ""
    raise InputError(f"{model.source}: no sphere collision geometry {which}centred on the tool centre point "
                     f"{tcp_link!r} (this needs a ball tool)")


def workpiece_scene(part: Any, faces: Sequence[int], X_BP: FloatArray, tool_radius: float,
                    deflection: float = 2e-4, closed: bool | None = None) -> tuple[CollisionScene, bool]:
    """Collision scene with ``tool`` (sphere of ``tool_radius``) and ``workpiece`` at X_BP (4, 4).

    Returns:
        (scene, exact): exact is True when the contact geometry comes from the CAD surface (one
        face of a CAD part), False for the tessellated part (meshes, several faces).
    """
    scene = CollisionScene()
    scene.add_sphere(TOOL, tool_radius)
    if not getattr(part, "is_mesh", True) and len(faces) == 1:
        face = part.face(int(faces[0]))
        mesh = face.tessellate(deflection=deflection)
        scene.add_mesh(WORKPIECE, np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=False)
        proj = FaceProjector(face)
        scene.set_exact_surface(WORKPIECE, proj, surface_tolerance(proj, mesh, deflection))
        _PROJECTORS[scene] = proj
        return scene, True
    mesh = part.tessellate(deflection=deflection)
    scene.add_mesh(WORKPIECE, np.asarray(mesh.vertices), np.asarray(mesh.faces), pose=X_BP, closed=closed)
    return scene, False


def surface_tolerance(proj: FaceProjector, mesh: Any, deflection: float) -> float:
    """Largest distance, m, between the face's tessellation and its surface, doubled: the
    vertices' and triangle centroids' distances to their closest points on the surface, each
    checked against the point itself (a warm start on another sheet of a face that wraps round
    would read centimetres; :func:`~robot_grinding_sim.core.geometry.projector.face_closest`)."""
    pts = np.vstack([np.asarray(mesh.vertices)[np.asarray(mesh.faces)].mean(axis=1), np.asarray(mesh.vertices)])
    closest, _, _ = proj(pts, pts, np.zeros(len(pts)), 10.0 * deflection)
    return 2.0 * float(np.linalg.norm(closest - pts, axis=1).max()) + 1e-9


@njit(cache=True)
def surface_gap(c, T, mesh, warm, tiny, back, closed, tol, proj, out):
    """Signed distance, m, of the point c (3,) from a CAD face's mesh at pose T (4, 4) with its exact
    (B-spline or analytic) surface, compiled (> 0 outside, < 0 under the surface): the mesh's signed
    closest point; the surface's where it is on the face and the foot of the perpendicular; behind
    an open surface by more than ``back`` (m), the distance to its back side (positive).

    mesh: the mesh's ``query_arrays``; warm (1,) int64 the last closest triangle (updated); tol the
    largest distance, m, of the mesh from the surface; proj the projector's
    :meth:`FaceProjector.arrays`: the surface's answer is checked against the mesh's closest point
    (:func:`~robot_grinding_sim.core.geometry.projector.face_closest`). Writes out (6,): outward unit
    normal, closest point on the part (base frame)."""
    buf = np.empty(9)
    sd, tri = signed_closest_world(c, T, *mesh, warm[0], tiny, buf)
    warm[0] = tri
    if proj[4] != NO_SURFACE:
        cl = buf[6:9].copy()
        hint = np.empty(3)  # the mesh's closest point in the part frame
        for i in range(3):
            hint[i] = ((buf[0] - T[0, 3]) * T[0, i] + (buf[1] - T[1, 3]) * T[1, i] + (buf[2] - T[2, 3]) * T[2, i])
        pr = np.empty(7)
        face_closest(cl, hint, sd, tol, *proj, pr)
        r0, r1, r2 = cl[0] - pr[0], cl[1] - pr[1], cl[2] - pr[2]
        sde = pr[3] * r0 + pr[4] * r1 + pr[5] * r2
        if pr[6] > 0.5 and math.sqrt(max(r0 * r0 + r1 * r1 + r2 * r2 - sde * sde, 0.0)) <= FOOT_TOLERANCE:
            for i in range(3):
                out[3 + i] = T[i, 0] * pr[0] + T[i, 1] * pr[1] + T[i, 2] * pr[2] + T[i, 3]
                out[i] = T[i, 0] * pr[3] + T[i, 1] * pr[4] + T[i, 2] * pr[5]
            return sde
    for i in range(6):
        out[i] = buf[3 + i] if i < 3 else buf[i - 3]
    if not closed and sd <= -back:  # behind an open surface: the gap to its back side
        d = math.sqrt((c[0] - buf[0]) ** 2 + (c[1] - buf[1]) ** 2 + (c[2] - buf[2]) ** 2)
        for i in range(3):
            out[i] = (c[i] - buf[i]) / d
        sd = d
    return sd


@njit(cache=True)
def ball_contact(c, T, mesh, warm, tiny, radius, closed, tol, proj, out):
    """The ball tool centred at c (3,) against a CAD face's mesh at pose T (4, 4) with its exact
    surface, compiled: :meth:`CollisionScene.distance` of a sphere and a mesh with an exact surface
    (:func:`surface_gap` of the centre less the radius; the back side of an open surface when the
    centre is more than the radius behind it). Writes out (6,): outward unit normal, closest point
    on the part (base frame); returns the gap, m (< 0: penetration)."""
    return surface_gap(c, T, mesh, warm, tiny, radius, closed, tol, proj, out) - radius


#: kernel codes of the shapes (:func:`tool_contact`)
BALL, WHEEL, PAD, DISC = 0, 1, 2, 3
#: the tool kernel's parameters tp: [radius (m), k_w (N/m^3), back (m), floor area (m^2), a disc's
#: working face normal (3, tcp frame), the elements' largest distance from the tcp (m)], then its
#: state: the tcp pose (3, 4) of the last query of every element and their gaps then (k,)
TP_LEN = 20
#: elements whose gap at the last full query, less how far they can have moved since, is above this
#: (m) are not queried again (the far rim of a disc, a pad's edge over a curved part)
SKIP_GAP = 0.002
#: every element is queried again once the tool may have moved this far (m) since the last time
REFRESH_MOVE = 0.001


@njit(cache=True)
def segment_area(R: float, d: float) -> float:
    """Area (m^2) of the circular segment of a disc of radius R (m) cut d (m) deep by a line:
    R^2 acos((R - d)/R) - (R - d) sqrt(2 R d - d^2); 0 for d <= 0, pi R^2 for d >= 2 R."""
    if d <= 0.0:
        return 0.0
    if d >= 2.0 * R:
        return math.pi * R * R
    return R * R * math.acos((R - d) / R) - (R - d) * math.sqrt(max(2.0 * R * d - d * d, 0.0))


@njit(cache=True)
def chord(R: float, d: float) -> float:
    """Chord length (m) of a disc of radius R (m) cut d (m) deep: 2 sqrt(2 R d - d^2)."""
    if d <= 0.0:
        return 0.0
    if d >= R:
        return 2.0 * R
    return 2.0 * math.sqrt(max(2.0 * R * d - d * d, 0.0))


@njit(cache=True)
def tool_contact(Tt, geo, kind, elems, wts, warms, tp, out):
    """The tool at tcp pose Tt (4, 4) against the workpiece (geo: the arguments of
    :func:`~robot_grinding_sim.core.geometry.tool_contact.ball_contact` after the centre). Writes
    out (6,): the part's outward unit normal and the contact point (base frame).

    ball: the ball centred at the tcp (elems unused); returns (gap, -1): the law's own stiffness.
    wheel: elems (k, 6) the slice centres on the axis and the axis (tcp frame), wts (k,) the slice
    widths (m); each slice is the disc of radius tp[0] on the surface's tangent line at the slice's
    closest point: force k_w w seg(R, d_i), area w chord(R, d_i).
    pad: elems (k, 6) points of the working face and its outward normal (tcp frame), wts (k,) their
    areas (m^2); each presses k_w a_i |n_i . n| d_i, d_i its depth under the surface (tp[2]: deeper
    than this is the back side of an open surface).
    disc: elems (k, 6) points of the working face's rim (both ends of each strip) and the face's inward
    direction there (perpendicular to the chord, tcp frame), wts (k,) the strips' widths (m), tp[4:7]
    the face's normal: each strip of the face from its rim inward, its rim d deep and the face
    leaving the surface's tangent plane at slope s = e . n, presses k_w w |n_f . n| d^2 / (2 s)
    over w |n_f . n| d / s (the triangle of depth under a tilted face).

    Returns (gap, K): in contact, gap = -F / K (the equivalent penetration, m) and K = k_w A_c
    (N/m, A_c the area in contact, at least tp[3]); out of contact the smallest gap of the elements
    and K = k_w tp[3]; normal and point are the pressure-weighted mean (in contact) or the nearest
    element's. warms (k,) int64: each element's last closest triangle (updated); tp's state
    (:data:`TP_LEN`): elements far from the part at the last full query are skipped until the tool
    may have come near (:data:`SKIP_GAP`, :data:`REFRESH_MOVE`)."""
    T, mesh, warm, tiny, radius, closed, tol, proj = geo
    if kind == BALL:
        c = Tt[:3, 3].copy()
        return ball_contact(c, T, mesh, warm, tiny, radius, closed, tol, proj, out), -1.0
    R, kw, back, floor = tp[0], tp[1], tp[2], tp[3]
    k = elems.shape[0]
    # how far any element can have moved since every element was last queried: the tcp's move plus
    # the rotation's (Frobenius norm) times the elements' reach
    dp, dr = 0.0, 0.0
    for r in range(3):
        dp += (Tt[r, 3] - tp[8 + 4 * r + 3]) ** 2
        for c in range(3):
            dr += (Tt[r, c] - tp[8 + 4 * r + c]) ** 2
    move = math.sqrt(dp) + math.sqrt(dr) * tp[7]
    refresh = not move <= REFRESH_MOVE
    if not refresh:
        refresh = True
        for i in range(k):
            if tp[TP_LEN + i] - move <= SKIP_GAP:
                refresh = False  # some element near enough to query
                break
    if refresh:
        for r in range(3):
            for c in range(4):
                tp[8 + 4 * r + c] = Tt[r, c]
    o = np.empty(6)
    ci = np.empty(3)
    force = 0.0
    area = 0.0
    nrm = np.zeros(3)
    pnt = np.zeros(3)
    gmin = np.inf
    for i in range(k):
        if not refresh and tp[TP_LEN + i] - move > SKIP_GAP:
            continue  # cannot be near the part: its gap is at least that
        for r in range(3):
            ci[r] = Tt[r, 0] * elems[i, 0] + Tt[r, 1] * elems[i, 1] + Tt[r, 2] * elems[i, 2] + Tt[r, 3]
        if kind == WHEEL:
            g = ball_contact(ci, T, mesh, warms[i:i + 1], tiny, R, closed, tol, proj, o)
        else:
            g = surface_gap(ci, T, mesh, warms[i:i + 1], tiny, back, closed, tol, proj, o)
        if refresh:
            tp[TP_LEN + i] = g
        if g < gmin:
            gmin = g
            for r in range(6):
                out[r] = o[r]
        if g >= 0.0:
            continue
        d = -g
        if kind == WHEEL:
            f = wts[i] * segment_area(R, d)
            a = wts[i] * chord(R, d)
        elif kind == DISC:
            slope = 0.0
            nf = 0.0
            for r in range(3):
                slope += (Tt[r, 0] * elems[i, 3] + Tt[r, 1] * elems[i, 4] + Tt[r, 2] * elems[i, 5]) * o[r]
                nf += (Tt[r, 0] * tp[4] + Tt[r, 1] * tp[5] + Tt[r, 2] * tp[6]) * o[r]
            slope = max(slope, 1e-3)  # a face (nearly) flat on the surface: its strip, at most 1000 d long
            a = wts[i] * abs(nf) * d / slope
            f = 0.5 * a * d
        else:
            en = 0.0
            for r in range(3):
                en += (Tt[r, 0] * elems[i, 3] + Tt[r, 1] * elems[i, 4] + Tt[r, 2] * elems[i, 5]) * o[r]
            a = wts[i] * abs(en)  # the element's area projected on the surface
            f = a * d
        force += f
        area += a
        for r in range(3):
            nrm[r] += f * o[r]
            pnt[r] += f * o[3 + r]
    if force <= 0.0:
        return gmin, kw * floor
    nn = math.sqrt(nrm[0] ** 2 + nrm[1] ** 2 + nrm[2] ** 2)
    for r in range(3):
        out[r] = nrm[r] / nn
        out[3 + r] = pnt[r] / force
    area = max(area, floor)
    return -force / area, kw * area


class ToolContactQuery:
    """The tool's gap, normal and contact point against the workpiece of a scene.

    Args:
        scene: a scene holding a sphere ``tool`` and the ``workpiece`` (:func:`workpiece_scene`).
        shape: the tool (:class:`~robot_grinding_sim.core.geometry.tools.Tool`); None: the scene's
            sphere, a ball centred on the tcp.
        pressure_stiffness: k_w, N/m^3, of a tool with a patch (the Winkler law).
        floor_area: the smallest area (m^2) its patch stiffness k_w A is taken at (the onset).
        mesh_surface: the ball too answers from the triangles through the compiled query when the
            workpiece has no exact surface (else the scene answers); a wheel, pad or disc always does.
    """

    def __init__(self, scene: CollisionScene, tool: str = TOOL, workpiece: str = WORKPIECE, shape: Any = None,
                 pressure_stiffness: float = 0.0, floor_area: float = 0.0, mesh_surface: bool = False) -> None:
        kind, params = scene.shape(tool)
        if kind != "sphere":
            raise InputError(f"tool object {tool!r} is a {kind}: the contact query needs a sphere")
        scene.shape(workpiece)
        self.scene = scene
        self.tool, self.workpiece = tool, workpiece
        self.radius = float(params[0])
        self.shape = shape
        if shape is not None and shape.kind != BALL:
            self.tool_arrays = shape.kernel_arrays(pressure_stiffness, floor_area)
        else:
            self.tool_arrays = (BALL, np.zeros((0, 6)), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(TP_LEN))
        self._pose = np.eye(4)
        self.compiled = self._compiled_arrays(mesh_surface=mesh_surface or self.tool_arrays[0] != BALL)
        if self.compiled is None and self.tool_arrays[0] != BALL:
            why = scene.mesh(workpiece).problem or "no exact surface"
            raise InputError(f"the {shape.shape} tool needs a workpiece whose surface has an outside, and this "
                             f"mesh has none ({why}): repair the mesh (its triangles wound consistently, no edge "
                             "shared by more than two)")
        self._out = np.empty(6)

    def reset_warm_start(self) -> None:
        """Forget the warm starts of the compiled query (the last closest triangle, the surface
        projection's last (u, v)): a simulation that starts with this gives the same answers to the
        last bit whatever ran before it (the optimisation's passes, in any order, on any worker)."""
        if self.compiled is not None:
            self.compiled[2][0] = -1
        proj = _PROJECTORS.get(self.scene)
        if proj is not None:
            proj.reset_warm_start()

    def _compiled_arrays(self, mesh_surface: bool = False) -> tuple | None:
        """The arguments of :func:`ball_contact` after c (pose, mesh, warm, tiny, radius, closed,
        tolerance, projector), or None when the part is not one CAD face with a compiled surface
        (B-spline, plane, cylinder, cone, sphere, torus): then the scene answers. With
        ``mesh_surface`` (a wheel, pad or disc) such a part's mesh is the surface
        (:func:`no_surface_arrays`) when its triangles have an outside; else None."""
        proj = _PROJECTORS.get(self.scene)
        arrays = proj.arrays() if proj is not None else None
        mesh = self.scene.mesh(self.workpiece)
        if arrays is None and mesh_surface:
            arrays = no_surface_arrays()
        if arrays is None or not mesh.orientable:
            return None
        return (self.scene.pose(self.workpiece), mesh.query_arrays, np.array([-1], dtype=np.int64),
                float(self.scene.tiny), self.radius, bool(mesh.closed),
                float(self.scene.exact_surface_tolerance(self.workpiece)), arrays)

    def query(self, pose: FloatArray) -> ContactGeometry:
        """Contact geometry of the tool at the tcp pose ``pose`` (4, 4) (base frame), or of the ball
        centred at ``pose`` (3,) m. A tool with a patch gives its patch stiffness (``stiffness``)."""
        X = np.asarray(pose, dtype=np.float64)
        c = (X[:3, 3] if X.shape == (4, 4) else X).reshape(3).copy()
        if not np.isfinite(X).all():
            raise InputError(f"tool pose {X.tolist()} is not finite")
        if self.compiled is not None:
            out = self._out
            self.compiled[0][:] = self.scene.pose(self.workpiece)  # the workpiece may have moved
            if X.shape != (4, 4):
                if self.tool_arrays[0] != BALL:
                    raise InputError(f"the {self.shape.shape} tool's contact needs the tcp pose (4, 4), not its centre")
                X = np.eye(4)
                X[:3, 3] = c
            gap, kp = tool_contact(np.ascontiguousarray(X), self.compiled, *self.tool_arrays, out)
            return ContactGeometry(float(gap), out[:3].copy(), out[3:6].copy(), c, float(kp))
        self._pose[:3, 3] = c
        self.scene.set_pose(self.tool, self._pose)
        dist, p_tool, p_part = self.scene.distance(self.tool, self.workpiece)
        n = (c - p_tool) / self.radius
        return ContactGeometry(float(dist), n, np.asarray(p_part, dtype=np.float64), c.copy())

    def rows(self, pose: FloatArray, margin: float) -> FloatArray:
        """Contact rows (k, 8) of :data:`ROW_FIELDS`: one while the gap is below ``margin`` (m), else none
        (``pose``: as :meth:`query`; a tool with a patch needs the tcp pose (4, 4))."""
        geom = self.query(pose)
        return geom.row()[None] if geom.gap < margin else np.zeros((0, CONTACT_ROW.size))

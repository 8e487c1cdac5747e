"""The tool shapes: what a grinding or finishing tool is, defined once each, and its contact kernel.

A tool is its geometry (the URDF collision primitive of ``tool.link``, placed relative to the
tool centre point ``tool.tcp_link``), and from it, in this module only:

- its **contact** with the exact surface (:func:`tool_contact`, compiled; the coupled step calls it
  at every step): the gap, the part's normal, the contact point and, for a tool with a patch, the
  patch stiffness K = k_w A_c and the equivalent penetration d_eq = integral d dA / A_c of the
  Winkler law (:mod:`~robot_grinding_sim.core.contact.winkler`);
- its **patch on a plane** in closed form (:meth:`Tool.plane_force`, :meth:`Tool.plane_area`): the
  planner's penetration for the target force and the tests' reference;
- its **orientation rule** (:attr:`Tool.rule`, the tcp's axes in the planner's pass frame) and the
  TCP's **standoff** from the surface (:meth:`Tool.standoff`: the support of the geometry along
  the inward normal), so the planner puts the TCP where the tool touches the surface;
- its **footprint** for removal: the penetration of surface points under the tool
  (:meth:`Tool.penetration_at`), the pressure of the Winkler law there.

The planner's pass frame F0 at a waypoint: x along the travel, z the inward normal -n (into the
part), y = z x x. The shapes (:data:`SHAPES`, ``tool.shape``):

========  ===========  ==============================================================================
shape     URDF         contact, orientation rule
========  ===========  ==============================================================================
ball      sphere       the point law on the exact surface (any ``contact.model``); free about the
                       normal: tcp axes = F0 (then lead, tilt)
wheel     cylinder     periphery (straight grinder, flap wheel): line contact across its width, the
                       Winkler law over slices across the width (each slice a disc on the surface's
                       tangent line: the circular segment under it); axis across the feed (F0 y)
pad       box          the face whose outward normal is nearest the tcp z axis, flat on the surface
                       (sanding, polishing): the Winkler law over a grid of the face; that face's
                       normal along F0 z
disc      cylinder     its face (the one along the tcp z) at ``tool.face_angle`` to the surface,
                       leaning toward the feed (an angle grinder, a cup wheel): strips of the face
                       from its low rim inward, each a triangle of depth under the tilted face; the
                       face normal Ry(-angle) F0 z, the low rim ahead of the tcp
========  ===========  ==============================================================================

``tool.shape: auto`` takes ball for a sphere, pad for a box and wheel for a cylinder (a disc is
asked for by name). Lead and
tilt (``process.lead``, ``process.tilt``) turn every tool about F0's y and x axes after its rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import (
    BALL,
    DISC,
    PAD,
    TP_LEN,
    WHEEL,
    chord,
    segment_area,
    tool_contact,
)

FloatArray = NDArray[np.float64]

# --------------------------------------------------------------------------------------------------
# the tool


def _frame(primary: FloatArray, secondary: FloatArray) -> FloatArray:
    """Orthonormal (3, 3) columns: primary, the part of secondary across it, their cross product."""
    e1 = primary / np.linalg.norm(primary)
    e2 = secondary - (secondary @ e1) * e1
    e2 /= np.linalg.norm(e2)
    return np.column_stack([e1, e2, np.cross(e1, e2)])


def _align(a_tcp: FloatArray, f0: FloatArray, x_tcp: FloatArray, g0: FloatArray) -> FloatArray:
    """The rotation (3, 3) taking a_tcp to f0 and the part of x_tcp across a_tcp to g0 (across f0)."""
    if abs(float(x_tcp @ a_tcp)) > 0.99 * float(np.linalg.norm(x_tcp) * np.linalg.norm(a_tcp)):
        x_tcp = np.array([0.0, 1.0, 0.0]) if abs(a_tcp[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    return _frame(f0, g0) @ _frame(a_tcp, x_tcp).T


@dataclass(frozen=True)
class Tool:
    """One tool (module docstring). Lengths m, frames: the tcp's unless said.

    Attributes:
        shape: the registry's name (:data:`SHAPES`).
        kind: kernel code (:data:`BALL`, :data:`WHEEL`, :data:`PAD`, :data:`DISC`).
        geometry: the URDF primitive ("sphere", "cylinder", "box") and dims its parameters.
        X_TG: (4, 4) the primitive's frame in the tcp frame.
        radius: the ball's, the wheel's; the pad's half width (the smaller): the ball of the planner's
            reach and gouge checks.
        bounding_radius: a ball about the tcp holding the tool.
        rule: (3, 3) the tcp's axes in the pass frame F0 at zero lead and tilt.
        elements: (k, 6) the kernel's elements (points and directions, tcp frame); weights (k,).
        spindle_axis: (3,) the axis the abrasive turns about (tcp frame).
    """

    shape: str
    kind: int
    geometry: str
    dims: dict[str, Any]
    X_TG: FloatArray
    radius: float
    bounding_radius: float
    rule: FloatArray
    elements: FloatArray = field(default_factory=lambda: np.zeros((0, 6)))
    weights: FloatArray = field(default_factory=lambda: np.zeros(0))
    spindle_axis: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    #: a disc: its working face's normal (tcp frame) and its angle to the surface (rad)
    face_normal: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    face_angle: float = 0.0

    @property
    def distributed(self) -> bool:
        """True for a tool with a patch (the Winkler law), False for the ball (a point law)."""
        return self.kind != BALL

    def support(self, u: FloatArray) -> float:
        """max over the tool of p . u (m) for a unit direction u (3,) in the tcp frame."""
        u = np.asarray(u, dtype=float)
        R, c = self.X_TG[:3, :3], self.X_TG[:3, 3]
        ul = R.T @ u
        if self.geometry == "sphere":
            return float(c @ u + self.dims["radius"])
        if self.geometry == "cylinder":
            az = abs(float(ul[2]))
            return float(c @ u + self.dims["radius"] * math.sqrt(max(1.0 - az * az, 0.0))
                         + 0.5 * self.dims["length"] * az)
        return float(c @ u + 0.5 * np.abs(ul) @ np.asarray(self.dims["size"], dtype=float))

    def support_point(self, u: FloatArray) -> FloatArray:
        """A point (3,) of the tool where :meth:`support` is reached (tcp frame): the point that
        touches a plane normal to u first (the middle of a face or an edge in a tie)."""
        u = np.asarray(u, dtype=float)
        Rg, c = self.X_TG[:3, :3], self.X_TG[:3, 3]
        ul = Rg.T @ u
        if self.geometry == "sphere":
            return c + self.dims["radius"] * u
        if self.geometry == "cylinder":
            radial = ul.copy()
            radial[2] = 0.0
            nr = float(np.linalg.norm(radial))
            loc = (self.dims["radius"] * radial / nr if nr > 1e-9 else np.zeros(3))
            loc[2] = 0.5 * self.dims["length"] * (np.sign(ul[2]) if abs(ul[2]) > 1e-9 else 0.0)
            return c + Rg @ loc
        half = 0.5 * np.asarray(self.dims["size"], dtype=float)
        return c + Rg @ np.where(np.abs(ul) > 1e-9, np.sign(ul) * half, 0.0)

    def contact_offset(self, R_F0_tcp: FloatArray | None = None) -> tuple[float, float]:
        """(x, y) in F0 (m) of the point the tool touches a plane first, from the tcp: the planner
        moves the tcp by minus this so that point lands on the waypoint (a disc's low rim; 0 for the
        ball, the wheel and the pad)."""
        Rm = self.rule if R_F0_tcp is None else np.asarray(R_F0_tcp, dtype=float)
        p = Rm @ self.support_point(Rm.T @ np.array([0.0, 0.0, 1.0]))
        return float(p[0]), float(p[1])

    def standoff(self, R_F0_tcp: FloatArray | None = None) -> float:
        """Height (m) of the tcp above the surface, along the normal, when the tool touches it (zero
        penetration) with the tcp's axes R_F0_tcp (3, 3) in F0 (default :attr:`rule`): the support
        of the tool along F0's z axis (the inward normal)."""
        Rm = self.rule if R_F0_tcp is None else np.asarray(R_F0_tcp, dtype=float)
        return self.support(Rm.T @ np.array([0.0, 0.0, 1.0]))

    def edge_margin(self, R_F0_tcp: FloatArray | None = None, depth: float | None = None) -> float:
        """How far (m) the tool's patch reaches along the surface from the contact centre (along the
        travel or across it, the tcp's axes R_F0_tcp (3, 3) in F0, default :attr:`rule`): the
        planner keeps passes at least this far inside the face's boundary, so the whole patch
        presses on the face (a wheel's half width, a pad's half side, a disc's patch at ``depth``
        (m); 0 for the ball)."""
        if not self.distributed or len(self.elements) == 0:
            return 0.0
        if self.kind == DISC:  # the patch at the rim: its half chord at twice the planned depth
            return self.footprint_radius(depth if depth is not None else 0.0)
        Rm = self.rule if R_F0_tcp is None else np.asarray(R_F0_tcp, dtype=float)
        p = self.elements[:, :3] @ Rm.T  # the elements in F0
        half = 0.5 * float(self.dims.get("spacing", 0.0))
        return float(np.abs(p[:, :2]).max()) + half

    def plan_parameters(self, lead: float, tilt: float, force: float, k_w: float) -> dict[str, Any]:
        """What the planner needs of a tool with a patch (its ToolParameters fields): shape, standoff
        at lead and tilt (rad), rule (quaternion x, y, z, w), the penetration for ``force`` (N) on a
        plane with pressure stiffness ``k_w`` (N/m^3) and the edge margin (m)."""
        from scipy.spatial.transform import Rotation

        Rm = Rotation.from_euler("YX", [lead, tilt]).as_matrix() @ self.rule
        pen = self.static_penetration(None, force, k_w)
        return {"shape": self.shape, "standoff": self.standoff(Rm), "offset": self.contact_offset(Rm),
                "rule": tuple(float(v) for v in Rotation.from_matrix(self.rule).as_quat()),
                "static_penetration": pen, "edge_margin": self.edge_margin(Rm, pen)}

    def footprint_radius(self, depth: float) -> float:
        """A radius (m) about the contact point holding the tool's patch at the (equivalent)
        penetration ``depth`` (m): the ball's sqrt(2 R d); a wheel's half width and chord (at twice
        the depth: the deepest point is deeper than the mean); a pad's half diagonal."""
        d = max(float(depth), 0.0)
        if self.kind == WHEEL:
            return float(math.hypot(0.5 * self.dims["length"], 0.5 * chord(self.radius, 2.0 * d)))
        if self.kind == PAD:
            return float(math.sqrt(2.0) * self.edge_margin())
        if self.kind == DISC:
            h = 2.0 * d / math.sin(self.face_angle)  # the segment's height in the face at twice the depth
            return float(math.hypot(0.5 * chord(self.radius, h), h))
        return float(math.sqrt(2.0 * self.radius * d))

    def plane_area(self, d: float) -> float:
        """Area in contact (m^2) at penetration d (m) on a plane, the tool at its rule."""
        if d <= 0.0:
            return 0.0
        if self.kind == WHEEL:
            return float(self.dims["length"] * chord(self.radius, d))
        if self.kind == PAD:
            return float(self.pad_area)
        if self.kind == DISC:
            return float(math.cos(self.face_angle) * segment_area(self.radius, d / math.sin(self.face_angle)))
        return float(math.pi * (2.0 * self.radius * d - d * d))

    def plane_force(self, d: float, k_w: float) -> float:
        """Winkler force (N) at penetration d (m) on a plane, pressure k_w (N/m^3) per metre of depth:
        wheel k_w L seg(R, d); pad k_w A d; ball k_w pi d^2 (R - d/3) (the spherical cap's volume)."""
        if d <= 0.0:
            return 0.0
        if self.kind == WHEEL:
            return float(k_w * self.dims["length"] * segment_area(self.radius, d))
        if self.kind == PAD:
            return float(k_w * self.pad_area * d)
        if self.kind == DISC:  # the segment h = d / sin(a) high, its depth s sin(a) at s beyond the chord
            a, R = self.face_angle, self.radius
            h = min(d / math.sin(a), 2.0 * R)
            u = R - h
            first_moment = 2.0 / 3.0 * max(R * R - u * u, 0.0) ** 1.5 - u * segment_area(R, h)
            return float(k_w * math.sin(a) * math.cos(a) * first_moment)
        return float(k_w * math.pi * d * d * (self.radius - d / 3.0))

    @property
    def pad_area(self) -> float:
        """The pad's working face area, m^2 (pads only)."""
        return float(self.weights.sum())

    def static_penetration(self, law: Any, force: float, k_w: float | None = None) -> float:
        """The penetration (m) that holds ``force`` (N) at rest on a plane: the point law's (ball) or
        the inverse of :meth:`plane_force` (the Winkler law of pressure stiffness ``k_w``)."""
        if not self.distributed:
            return float(law.static_penetration(force))
        if k_w is None:
            raise InputError(f"the {self.shape} needs the pressure stiffness k_w (contact.model winkler)")
        if force <= 0.0:
            return 0.0
        top = {WHEEL: self.radius, DISC: 2.0 * self.radius * math.sin(self.face_angle)}.get(
            self.kind, 0.5 * self.bounding_radius)
        if self.plane_force(top, k_w) < force:
            raise InputError(f"process.target_force {force} N needs more than {top * 1e3:.3g} mm of penetration of "
                             f"the {self.shape} with contact.stiffness {k_w} N/m^3 (k_w): raise the stiffness")
        return float(brentq(lambda d: self.plane_force(d, k_w) - force, 0.0, top, xtol=1e-15, rtol=1e-12))

    def kernel_arrays(self, k_w: float, floor_area: float) -> tuple:
        """(kind, elements, weights, warms, tp) of :func:`tool_contact`."""
        back = self.radius if self.kind == WHEEL else max(0.5 * self.bounding_radius, 1e-3)
        tp = np.zeros(TP_LEN + len(self.elements))
        tp[:4] = self.radius, float(k_w), back, float(floor_area)
        tp[4:7] = self.face_normal
        tp[7] = float(np.linalg.norm(self.elements[:, :3], axis=1).max(initial=0.0))
        tp[8:TP_LEN] = 1e9  # no query yet: the first queries every element
        return (self.kind, np.ascontiguousarray(self.elements, dtype=np.float64),
                np.ascontiguousarray(self.weights, dtype=np.float64),
                np.full(len(self.elements), -1, dtype=np.int64), tp)

    def penetration_at(self, points: FloatArray, X_tcp: FloatArray, normal: FloatArray | None = None) -> FloatArray:
        """Depth (m, >= 0) of the points (k, 3) (base frame; on the surface) inside the tool at tcp
        pose X_tcp (4, 4): the footprint whose Winkler pressure is k_w times it. The ball's, the
        wheel's: the radius less the distance from the centre or the axis (within the width); the
        pad's: the height of the working face above the point (within the face); the disc's: how far
        the working face is below the point along the surface's outward unit ``normal`` (3,) (base
        frame; needed for the disc, whose face is at an angle to the surface), where that point of
        the face is within the radius (the face's segment under the surface, seen along the normal:
        its length along the travel is cos a of the segment's height in the face)."""
        X = np.asarray(X_tcp, dtype=float) @ self.X_TG
        local = (np.asarray(points, dtype=float) - X[:3, 3]) @ X[:3, :3]
        if self.geometry == "sphere":
            return np.maximum(self.radius - np.linalg.norm(local, axis=1), 0.0)
        if self.kind == DISC:
            if normal is None:
                raise ValueError("Tool.penetration_at: the disc's depth is along the surface normal; give normal")
            sign = float(self.dims["face_sign"])
            face = 0.5 * self.dims["length"] * sign  # the working face at local z = face
            n = X[:3, :3].T @ np.asarray(normal, dtype=float)  # the outward normal in the disc's frame
            c = -sign * float(n[2])  # cos of the face's angle to the surface (the face looks into the part)
            if c <= 1e-9:
                return np.zeros(len(local))
            depth = sign * (face - local[:, 2]) / c  # along -normal from the point down to the face
            foot = local[:, :2] - depth[:, None] * n[None, :2]  # the face's point under it
            return np.where((depth > 0.0) & (np.hypot(foot[:, 0], foot[:, 1]) <= self.radius), depth, 0.0)
        if self.geometry == "cylinder":
            inside = np.abs(local[:, 2]) <= 0.5 * self.dims["length"]
            return np.where(inside, np.maximum(self.radius - np.hypot(local[:, 0], local[:, 1]), 0.0), 0.0)
        half = 0.5 * np.asarray(self.dims["size"], dtype=float)
        k = int(self.dims["face_axis"])
        sign = float(self.dims["face_sign"])
        i, j = [a for a in range(3) if a != k]
        inside = (np.abs(local[:, i]) <= half[i]) & (np.abs(local[:, j]) <= half[j])
        return np.where(inside, np.maximum(half[k] - sign * local[:, k], 0.0), 0.0)


# --------------------------------------------------------------------------------------------------
# the shapes


def _ball(X_TG: FloatArray, dims: dict[str, Any], spacing: float) -> Tool:
    r = float(dims["radius"])
    if np.linalg.norm(X_TG[:3, 3]) > 1e-6:
        raise InputError("the ball's sphere must be centred on the tool centre point")
    return Tool("ball", BALL, "sphere", dims, X_TG, r, r, np.eye(3))


def _wheel(X_TG: FloatArray, dims: dict[str, Any], spacing: float) -> Tool:
    R, L = float(dims["radius"]), float(dims["length"])
    a = X_TG[:3, 2].copy()  # the cylinder's axis in the tcp frame
    c = X_TG[:3, 3]
    n = max(4, int(math.ceil(L / spacing)))
    s = (np.arange(n) + 0.5) / n * L - 0.5 * L
    elems = np.hstack([c + s[:, None] * a, np.tile(a, (n, 1))])
    # the axis across the feed (F0 y), the tcp's x as near the travel as it can be
    rule = _align(a, np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0]))
    bound = float(np.linalg.norm(c) + math.hypot(R, 0.5 * L))
    return Tool("wheel", WHEEL, "cylinder", dims, X_TG, R, bound, rule, elems, np.full(n, L / n), a)


def _pad(X_TG: FloatArray, dims: dict[str, Any], spacing: float) -> Tool:
    size = np.asarray(dims["size"], dtype=float)
    Rg, c = X_TG[:3, :3], X_TG[:3, 3]
    zl = Rg.T @ np.array([0.0, 0.0, 1.0])  # the tcp z axis in the box frame
    k = int(np.argmax(np.abs(zl)))
    sign = 1.0 if zl[k] > 0 else -1.0
    i, j = [a for a in range(3) if a != k]
    ni, nj = (max(2, int(math.ceil(size[m] / spacing))) for m in (i, j))
    ui = (np.arange(ni) + 0.5) / ni * size[i] - 0.5 * size[i]
    uj = (np.arange(nj) + 0.5) / nj * size[j] - 0.5 * size[j]
    U, V = np.meshgrid(ui, uj, indexing="ij")
    loc = np.zeros((ni * nj, 3))
    loc[:, i], loc[:, j], loc[:, k] = U.ravel(), V.ravel(), sign * 0.5 * size[k]
    normal = sign * Rg[:, k]
    pts = loc @ Rg.T + c
    elems = np.hstack([pts, np.tile(normal, (len(pts), 1))])
    weights = np.full(len(pts), size[i] * size[j] / (ni * nj))
    rule = _align(normal, np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0]))
    d = dict(dims, face_axis=k, face_sign=sign, spacing=max(size[i] / ni, size[j] / nj))
    bound = float(np.linalg.norm(c) + 0.5 * np.linalg.norm(size))
    return Tool("pad", PAD, "box", d, X_TG, 0.5 * float(min(size[i], size[j])), bound, rule, elems, weights,
                normal.copy())


def _disc(X_TG: FloatArray, dims: dict[str, Any], spacing: float, angle: float = 0.2) -> Tool:
    R, L = float(dims["radius"]), float(dims["length"])
    if not 0.02 <= angle <= 1.2:
        raise InputError(f"tool.face_angle {angle} rad: a disc is worked at 0.02 to 1.2 rad to the surface")
    a, c = X_TG[:3, 2].copy(), X_TG[:3, 3]
    sign = 1.0 if a[2] >= 0 else -1.0  # the face looking along the tcp z (into the part)
    nf = sign * a
    centre = c + 0.5 * L * nf
    e1 = np.array([1.0, 0.0, 0.0]) - nf[0] * nf  # toward the tcp x: the low rim ahead along the travel
    if np.linalg.norm(e1) < 1e-6:
        e1 = np.array([0.0, 1.0, 0.0]) - nf[1] * nf
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(nf, e1)
    n = max(8, int(math.ceil(2.0 * R / spacing)))
    y = (np.arange(n) + 0.5) / n * 2.0 * R - R
    # both ends of each strip (the disc works at any roll about its axis: the planner may turn it)
    x = np.sqrt(R * R - y * y)[:, None]
    rim = np.vstack([centre + x * e1 + y[:, None] * e2, centre - x * e1 + y[:, None] * e2])
    elems = np.hstack([rim, np.vstack([np.tile(-e1, (n, 1)), np.tile(e1, (n, 1))])])
    # the face leaning forward by the angle: its normal Ry(-angle) z0, the low rim ahead (+x0)
    n0 = np.array([-math.sin(angle), 0.0, math.cos(angle)])
    e0 = np.array([math.cos(angle), 0.0, math.sin(angle)])
    rule = _frame(n0, e0) @ _frame(nf, e1).T
    bound = float(np.linalg.norm(c) + math.hypot(R, 0.5 * L))
    d = dict(dims, face_sign=sign)
    return Tool("disc", DISC, "cylinder", d, X_TG, R, bound, rule, elems, np.full(2 * n, 2.0 * R / n), nf.copy(),
                nf.copy(), float(angle))


@dataclass(frozen=True)
class ToolShape:
    """One entry of the shape registry: the URDF primitive it is made of and how."""

    name: str
    geometry: str
    build: Callable[[FloatArray, dict[str, Any], float], Tool]
    description: str


#: the shapes by name (``tool.shape``); a new shape: its builder (elements, rule) and a kernel branch
SHAPES: dict[str, ToolShape] = {
    s.name: s for s in (
        ToolShape("ball", "sphere", _ball, "a ball on the exact surface (point law)"),
        ToolShape("wheel", "cylinder", _wheel, "a wheel on its periphery: line contact across its width, "
                  "axis across the feed (Winkler law)"),
        ToolShape("pad", "box", _pad, "a compliant flat pad on its face, flat on the surface (Winkler law)"),
        ToolShape("disc", "cylinder", _disc, "a disc or cup wheel worked on its face at tool.face_angle to the "
                  "surface, leaning toward the feed (an angle grinder; Winkler law)"),
    )
}
#: ``tool.shape: auto`` by URDF primitive
AUTO = {"sphere": "ball", "cylinder": "wheel", "box": "pad"}


def cell_tool(model: Any, tcp_link: str, tool_link: str | None = None, shape: str = "auto",
              spacing: float = 0.002, face_angle: float = 0.2) -> Tool:
    """The tool of a robot: the sphere, cylinder or box collision geometry of ``tool_link`` (None:
    any link's primitive centred nearest the tcp), placed in the tcp frame, as ``shape`` (auto: by
    primitive, :data:`AUTO`); ``spacing`` (m) the element spacing of a patch; ``face_angle`` (rad)
    a disc's angle to the surface.

    Raises:
        InputError: naming the URDF, the links and the parameters when there is no such geometry.
    """
    model = getattr(model, "robot", model)  # a held part's robot (sim/held_part.py): the tool where it stands
    if tcp_link not in model.link_names:
        raise InputError(f"{model.source}: no link {tcp_link!r} (tool.tcp_link; links: {', '.join(model.link_names)})")
    if shape != "auto" and shape not in SHAPES:
        raise InputError(f"tool.shape {shape!r}: one of auto, {', '.join(SHAPES)}")
    q0 = np.zeros(model.nq)
    X_tcp = model.fk(q0, tcp_link)
    X_inv = np.linalg.inv(X_tcp)
    found = []
    for g in model.collision_geometry:
        if g.kind not in AUTO or (tool_link is not None and g.link != tool_link) or g.link not in model.link_names:
            continue
        X_TG = X_inv @ model.fk(q0, g.link) @ g.origin
        found.append((float(np.linalg.norm(X_TG[:3, 3])), g, X_TG))
    if shape != "auto":
        found = [f for f in found if f[1].kind == SHAPES[shape].geometry]
    if not found:
        which = f"of link {tool_link!r} (tool.link) " if tool_link else ""
        prim = SHAPES[shape].geometry if shape != "auto" else "sphere, cylinder or box"
        raise InputError(f"{model.source}: no {prim} collision geometry {which}for the tool "
                         f"(tool.shape {shape}); add one to the tool link")
    _, g, X_TG = min(found, key=lambda f: f[0])
    name = AUTO[g.kind] if shape == "auto" else shape
    if not (spacing > 0 and math.isfinite(spacing)):
        raise InputError(f"tool.patch_spacing must be > 0 m, got {spacing}")
    if name == "disc":
        return _disc(X_TG, dict(g.params), float(spacing), float(face_angle))
    return SHAPES[name].build(X_TG, dict(g.params), float(spacing))


__all__ = ["AUTO", "BALL", "DISC", "PAD", "SHAPES", "WHEEL", "Tool", "ToolShape", "cell_tool", "chord", "segment_area",
           "tool_contact"]

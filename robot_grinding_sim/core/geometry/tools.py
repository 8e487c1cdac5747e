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
========  ===========  ==============================================================================

``tool.shape: auto`` takes ball for a sphere, pad for a box and wheel for a cylinder. Lead and
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
from robot_grinding_sim.core.geometry.tool_contact import BALL, PAD, WHEEL, chord, segment_area, tool_contact

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
        kind: kernel code (:data:`BALL`, :data:`WHEEL`, :data:`PAD`).
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

    def standoff(self, R_F0_tcp: FloatArray | None = None) -> float:
        """Height (m) of the tcp above the surface, along the normal, when the tool touches it (zero
        penetration) with the tcp's axes R_F0_tcp (3, 3) in F0 (default :attr:`rule`): the support
        of the tool along F0's z axis (the inward normal)."""
        Rm = self.rule if R_F0_tcp is None else np.asarray(R_F0_tcp, dtype=float)
        return self.support(Rm.T @ np.array([0.0, 0.0, 1.0]))

    def edge_margin(self, R_F0_tcp: FloatArray | None = None) -> float:
        """How far (m) the tool's patch reaches along the surface from the contact centre (along the
        travel or across it, the tcp's axes R_F0_tcp (3, 3) in F0, default :attr:`rule`): the
        planner keeps passes at least this far inside the face's boundary, so the whole patch
        presses on the face (a wheel's half width, a pad's half side; 0 for the ball)."""
        if not self.distributed or len(self.elements) == 0:
            return 0.0
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
        return {"shape": self.shape, "standoff": self.standoff(Rm),
                "rule": tuple(float(v) for v in Rotation.from_matrix(self.rule).as_quat()),
                "static_penetration": self.static_penetration(None, force, k_w), "edge_margin": self.edge_margin(Rm)}

    def plane_area(self, d: float) -> float:
        """Area in contact (m^2) at penetration d (m) on a plane, the tool at its rule."""
        if d <= 0.0:
            return 0.0
        if self.kind == WHEEL:
            return float(self.dims["length"] * chord(self.radius, d))
        if self.kind == PAD:
            return float(self.pad_area)
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
        top = self.radius if self.kind == WHEEL else 0.5 * self.bounding_radius
        if self.plane_force(top, k_w) < force:
            raise InputError(f"process.target_force {force} N needs more than {top * 1e3:.3g} mm of penetration of "
                             f"the {self.shape} with contact.stiffness {k_w} N/m^3 (k_w): raise the stiffness")
        return float(brentq(lambda d: self.plane_force(d, k_w) - force, 0.0, top, xtol=1e-15, rtol=1e-12))

    def kernel_arrays(self, k_w: float, floor_area: float) -> tuple:
        """(kind, elements, weights, warms, tp) of :func:`tool_contact`."""
        back = self.radius if self.kind == WHEEL else max(0.5 * self.bounding_radius, 1e-3)
        tp = np.array([self.radius, float(k_w), back, float(floor_area)])
        return (self.kind, np.ascontiguousarray(self.elements, dtype=np.float64),
                np.ascontiguousarray(self.weights, dtype=np.float64),
                np.full(len(self.elements), -1, dtype=np.int64), tp)

    def penetration_at(self, points: FloatArray, X_tcp: FloatArray) -> FloatArray:
        """Depth (m, >= 0) of the points (k, 3) (base frame; on the surface) inside the tool at tcp
        pose X_tcp (4, 4): the footprint whose Winkler pressure is k_w times it. The ball's, the
        wheel's: the radius less the distance from the centre or the axis (within the width); the
        pad's: the height of the working face above the point (within the face)."""
        X = np.asarray(X_tcp, dtype=float) @ self.X_TG
        local = (np.asarray(points, dtype=float) - X[:3, 3]) @ X[:3, :3]
        if self.geometry == "sphere":
            return np.maximum(self.radius - np.linalg.norm(local, axis=1), 0.0)
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
    )
}
#: ``tool.shape: auto`` by URDF primitive
AUTO = {"sphere": "ball", "cylinder": "wheel", "box": "pad"}


def cell_tool(model: Any, tcp_link: str, tool_link: str | None = None, shape: str = "auto",
              spacing: float = 0.002) -> Tool:
    """The tool of a robot: the sphere, cylinder or box collision geometry of ``tool_link`` (None:
    any link's primitive centred nearest the tcp), placed in the tcp frame, as ``shape`` (auto: by
    primitive, :data:`AUTO`); ``spacing`` (m) the element spacing of a patch.

    Raises:
        InputError: naming the URDF, the links and the parameters when there is no such geometry.
    """
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
    return SHAPES[name].build(X_TG, dict(g.params), float(spacing))


__all__ = ["AUTO", "BALL", "PAD", "SHAPES", "WHEEL", "Tool", "ToolShape", "cell_tool", "chord", "segment_area",
           "tool_contact"]

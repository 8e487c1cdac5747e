"""The depth planner's footprint of a tool with a patch (wheel, pad, disc): Preston's law over the
patch the Winkler law presses (:class:`ToolFootprint`; the ball's closed form is
:class:`~robot_grinding_sim.core.planning.depth.BallFootprint`). See docs/contact.md "Planning for a
depth". Units: m, N, s, rad/s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

#: the plane's outward normal in the pass frame F0 (whose z is into the part)
NORMAL = np.array([0.0, 0.0, -1.0])


class ToolFootprint:
    """A tool with a patch (wheel, pad, disc: a :class:`~robot_grinding_sim.core.geometry.tools.Tool`
    whose ``distributed`` is True) pressed into a plane by the Winkler law and ground about its tcp z.

    The tool is placed as the planner places it on a waypoint (:func:`~.planner.tcp_frames`): the tcp's
    axes ``Ry(lead) Rx(tilt) rule`` in the pass frame F0 (x the travel, z into the part), its point of
    first touch (:meth:`Tool.contact_offset`) on the waypoint, pressed in by the penetration ``d`` that
    holds ``F`` on a plane (:meth:`Tool.static_penetration`). The pressure at a surface point is
    proportional to the point's depth inside the tool (:meth:`Tool.penetration_at`, what the removal
    map of the simulation weighs its nodes by) and sums to F over the patch (as the map scales it);
    the abrasive slides at the feed plus the spindle's
    ``w`` about the tcp z through the tcp (what the map uses). The groove is then
    ``h(y) = (k_p / v_f) integral p(x, y) |v(x, y)| dx``, ``p = F d / integral d dA`` (``k_w d`` where
    the depths hold F: the wheel and the pad), by the trapezoid rule over the patch's extent along the
    travel (``samples`` points; the pressure is cached per force).

    Frame of ``y``: the depth planner's, ``y = n x x`` (to the left of the travel): F0's -y.
    Units: m, N, s, rad/s; ``pressure_stiffness`` k_w in N/m^3.
    """

    def __init__(self, tool: Any, pressure_stiffness: float, spindle_speed: float = 0.0,
                 preston_coefficient: float = 9.5e-12, lead: float = 0.0, tilt: float = 0.0,
                 samples: int = 401) -> None:
        from scipy.spatial.transform import Rotation

        if not getattr(tool, "distributed", False):
            raise InputError("ToolFootprint is for a tool with a patch (wheel, pad, disc); the ball's is BallFootprint")
        self.tool = tool
        self.pressure_stiffness = float(pressure_stiffness)
        self.spindle_speed = float(spindle_speed)
        self.preston_coefficient = float(preston_coefficient)
        self.samples = int(samples)
        self.rotation = Rotation.from_euler("YX", [lead, tilt]).as_matrix() @ tool.rule  # tcp axes in F0
        self._patches: dict[float, tuple[FloatArray, tuple[float, float, float, float]]] = {}
        self._pressure: dict[tuple[float, int, float, float], tuple[FloatArray, FloatArray, FloatArray]] = {}
        self._scales: dict[tuple[str, float], float] = {}

    def penetration(self, force: float) -> float:
        """d (m) with the tool's Winkler force on a plane equal to ``force`` N."""
        return self.tool.static_penetration(None, max(force, 0.0), self.pressure_stiffness)

    def pose(self, force: float) -> FloatArray:
        """The tcp pose (4, 4) in F0 at ``force`` N: the planner's, the waypoint at F0's origin."""
        X = np.eye(4)
        X[:3, :3] = self.rotation
        ox, oy = self.tool.contact_offset(self.rotation)
        X[:3, 3] = (-ox, -oy, self.penetration(force) - self.tool.standoff(self.rotation))
        return X

    def extent(self, force: float) -> tuple[float, float, float, float]:
        """(x0, x1, y0, y1) m in F0: a box holding the patch in contact at ``force`` N (found on an
        801 x 801 grid about the waypoint, then on one over the box found and 10 % round it: the ends
        of a thin patch, a disc's chord, thinner than the first grid's cells; two cells of margin)."""
        key = float(force)
        if key not in self._patches:
            X = self.pose(force)
            r = 1.2 * self.tool.footprint_radius(self.penetration(force)) + 1e-6
            box = (-r, r, -r, r)
            for k in range(2):  # the whole neighbourhood, then the box found and 10 % round it (a thin patch's ends)
                if k:
                    mx, my = 0.1 * (box[1] - box[0]), 0.1 * (box[3] - box[2])
                    box = (box[0] - mx, box[1] + mx, box[2] - my, box[3] + my)
                gx, gy = np.linspace(box[0], box[1], 801), np.linspace(box[2], box[3], 801)
                Xg, Yg = np.meshgrid(gx, gy, indexing="ij")
                P = np.column_stack([Xg.ravel(), Yg.ravel(), np.zeros(Xg.size)])
                hit = (self.tool.penetration_at(P, X, NORMAL) > 0.0).reshape(Xg.shape)
                if not hit.any():
                    box = (0.0, 0.0, 0.0, 0.0)
                    break
                ix, iy = np.flatnonzero(hit.any(axis=1)), np.flatnonzero(hit.any(axis=0))
                cx, cy = gx[1] - gx[0], gy[1] - gy[0]
                box = (gx[ix[0]] - 2 * cx, gx[ix[-1]] + 2 * cx, gy[iy[0]] - 2 * cy, gy[iy[-1]] + 2 * cy)
            self._patches[key] = (X, box)
        return self._patches[key][1]

    def half_width(self, force: float) -> float:
        """Half the groove's width across the travel (m): the patch's farthest reach from the pass line."""
        x0, x1, y0, y1 = self.extent(force)
        return float(max(abs(y0), abs(y1))) if x1 > x0 else 0.0

    def half_length(self, force: float) -> float:
        """The patch's farthest reach along the travel from the waypoint (m)."""
        x0, x1, _, _ = self.extent(force)
        return float(max(abs(x0), abs(x1)))

    def _scale(self, force: float) -> float:
        """F / integral d dA (1/m^2 x N/m): the pressure per metre of depth that sums to ``force`` over
        the patch, as the removal map scales its nodes' (k_w where the tool's depths hold F exactly:
        the wheel, the pad, the disc, their depths along the surface normal)."""
        key = ("scale", float(force))
        if key not in self._scales:
            x0, x1, y0, y1 = self.extent(force)
            x, y = np.linspace(x0, x1, self.samples), np.linspace(y0, y1, 801)
            Xg, Yg = np.meshgrid(x, y, indexing="ij")
            P = np.column_stack([Xg.ravel(), Yg.ravel(), np.zeros(Xg.size)])
            d = self.tool.penetration_at(P, self._patches[float(force)][0], NORMAL).reshape(Xg.shape)
            total = float(np.trapezoid(np.trapezoid(d, y, axis=1), x))
            self._scales[key] = force / total if total > 0 else 0.0
        return self._scales[key]

    def _pressure_at(self, y: FloatArray, force: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(x (X,), the points (K, X, 3) in F0, the pressure k_w d there (K, X)) for offsets y (K,)."""
        key = (float(force), len(y), float(y[0]), float(y[-1]))
        if key not in self._pressure:
            x0, x1, _, _ = self.extent(force)
            X = self._patches[float(force)][0]
            x = np.linspace(x0, x1, self.samples)
            P = np.zeros((len(y), len(x), 3))
            P[..., 0] = x[None, :]
            P[..., 1] = -y[:, None]  # F0's y is the planner's -y
            p = self.tool.penetration_at(P.reshape(-1, 3), X, NORMAL).reshape(len(y), len(x)) * self._scale(force)
            if len(self._pressure) > 64:
                self._pressure.clear()
            self._pressure[key] = (x, P, p)
        return self._pressure[key]

    def groove(self, y: FloatArray, force: float, feed: float) -> FloatArray:
        """h(y) = (k_p / v_f) integral p(x, y) |v(x, y)| dx over the patch (class docstring)."""
        y = np.atleast_1d(np.asarray(y, dtype=float))
        if feed <= 0.0 or force <= 0.0 or self.half_width(force) <= 0.0:
            return np.zeros_like(y)
        x, P, p = self._pressure_at(y, force)
        X = self._patches[float(force)][0]
        w = self.spindle_speed * X[:3, 2]
        r = P - X[:3, 3]
        vx = feed + w[1] * r[..., 2] - w[2] * r[..., 1]  # v_f e_x + w x r, its part in the surface plane
        vy = w[2] * r[..., 0] - w[0] * r[..., 2]
        return self.preston_coefficient / feed * np.trapezoid(p * np.hypot(vx, vy), x, axis=1)


__all__ = ["ToolFootprint"]

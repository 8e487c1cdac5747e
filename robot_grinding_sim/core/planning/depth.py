"""Planning for a removal depth: stepover, feed, force and layers so the passes remove an even D.

Preston's law (``dh/dt = k_p p v``, :mod:`~robot_grinding_sim.core.contact.preston`) gives the
groove one straight pass cuts at constant force ``F`` and feed ``v_f``: across the pass, at ``y``
(m, positive to the left of the travel), ``h(y) = (1 / v_f) integral rate(x, y) dx`` over the
tool's footprint, ``rate = k_p p |v|`` the depth rate at the footprint point (x along the
travel). A tool enters here only through its :class:`Footprint` (``half_width(F)`` and
``groove(y, F, v_f)``): :class:`BallFootprint` is the ball ground about its axis along the normal
(Hertz or uniform pressure over the disc of radius ``a = sqrt(2 R d)``, ``d`` the contact law's
penetration for F); another tool plugs in with its own groove (:func:`groove_of_rate` turns a
depth-rate map into one).

Parallel passes ``s`` apart add up to ``S(y) = sum_k h(y - k s)``, periodic in ``s`` with mean
``A / s`` (``A = integral h dy``, the volume per unit length of pass). :func:`choose_stepover`
takes the largest ``s`` below which the ripple ``(max S - min S) / (max S + min S)`` stays under
the tolerance; the feed then follows from ``A(F, v_f) / s = D`` (``A`` is ``k_p F v_bar / v_f``,
``v_bar`` the pressure-weighted sliding speed, nearly independent of the feed under a spinning
tool). When the feed needed lies outside the user's range, the force moves within its range
(unless the user fixed it), then the depth is split into layers (each ``D / n`` at ``n`` times
the feed, layer ``j`` shifted across by ``j s / n``); what still prevents D is named
(:attr:`DepthPlan.limiting`).

Units: m, s, N, rad/s; ``y`` across the pass in the tangent plane of the surface.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

#: Gauss-Legendre nodes of the integrals along the travel
_GL_X, _GL_W = np.polynomial.legendre.leggauss(96)
#: the same on [-1, 0] and [0, 1] (the spindle's speed w |r| has a kink at x = 0 on the centre line)
_GL_H, _GL_HW = np.polynomial.legendre.leggauss(64)
_GL_X2 = np.r_[0.5 * (_GL_H - 1.0), 0.5 * (_GL_H + 1.0)]
_GL_W2 = np.r_[0.5 * _GL_HW, 0.5 * _GL_HW]
#: samples of a groove across its width (stepover search, volume per length)
GROOVE_SAMPLES = 801
#: feeds above this (m/s) are taken as "no feed removes as little"
MAX_FEED = 1e3
#: feeds below this (m/s) are taken as "no feed removes as much" (a tool whose sliding is the feed's
#: alone, a pad that does not turn: each pass removes k_p F / W whatever the feed)
MIN_FEED = 1e-9
#: the most layers a depth plan makes (more: D is named as not reached)
MAX_LAYERS = 100
#: the stepover's ripple tolerance: (max - min) / (max + min) of the sum of grooves
DEFAULT_RIPPLE = 0.02


class Footprint(Protocol):
    """What the depth planner needs of a tool: the groove of one straight pass."""

    def half_width(self, force: float) -> float:
        """Half the groove's width across the travel at normal force ``force`` (N), m."""
        ...

    def half_length(self, force: float) -> float:
        """The patch's reach along the travel from the contact point (m): the lead-in's unit."""
        ...

    def groove(self, y: FloatArray, force: float, feed: float) -> FloatArray:
        """Depth removed (m) at offsets ``y`` (m, across the travel) by one pass at ``force`` N, ``feed`` m/s."""
        ...


@dataclass(frozen=True)
class BallFootprint:
    """The ball tool ground about its own axis.

    Frame: the pass's local frame at the contact point, x along the travel, y = n x x (to the left),
    z = n the outward normal; the ball's centre at (0, 0, R - d).

    Attributes:
        radius: ball radius R, m. stiffness, exponent: the contact law at rest, F = K d^exponent.
        spindle_speed: w about ``axis``, rad/s.
        preston_coefficient: k_p, m^2/N. pressure: ``hertz`` or ``uniform`` over the patch.
        axis: (3,) the spindle's unit axis in the local frame: (0, 0, 1) along the normal (the
            cell's tool points into the part: (0, 0, -1) with its spindle speed, the same groove
            mirrored); a lead or tilt turns it (:func:`tool_axis`), and the abrasive at the contact
            point then slides at w R sin(angle): the groove fills in at its centre.
    """

    radius: float
    stiffness: float
    exponent: float = 1.0
    spindle_speed: float = 0.0
    preston_coefficient: float = 9.5e-12
    pressure: str = "hertz"
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)

    def penetration(self, force: float) -> float:
        """d with K d^exponent = F, m."""
        return (max(force, 0.0) / self.stiffness) ** (1.0 / self.exponent)

    def half_width(self, force: float) -> float:
        """The patch radius a = sqrt(2 R d), m (the removal map's, :func:`~.preston.patch_radius`)."""
        return math.sqrt(2.0 * self.radius * self.penetration(force))

    def half_length(self, force: float) -> float:
        """The patch's reach along the travel (m): its radius."""
        return self.half_width(force)

    def groove(self, y: FloatArray, force: float, feed: float) -> FloatArray:
        """h(y) = (k_p / v_f) integral p(x, y) |v(x, y)| dx over the chord |x| < s, s^2 = a^2 - y^2,
        with x = s sin(t) (the Hertz pressure's square root then integrates smoothly); v the
        tangential part of v_f e_x + w x (p - c), p = (x, y, 0), c = (0, 0, R - d): along the
        normal axis (v_f - w y, w x)."""
        y = np.asarray(y, dtype=float)
        a = self.half_width(force)
        if a <= 0.0 or feed <= 0.0:
            return np.zeros_like(y)
        s = np.sqrt(np.clip(a * a - y * y, 0.0, None))[..., None]
        t = 0.5 * math.pi * _GL_X2
        x = s * np.sin(t)
        c = np.cos(t)
        wx, wy, wz = (self.spindle_speed * float(k) for k in self.axis)
        h = self.radius - self.penetration(force)
        yy = y[..., None]
        speed = np.hypot(feed - wy * h - wz * yy, wz * x + wx * h)
        if self.pressure == "hertz":
            p0 = 3.0 * force / (2.0 * math.pi * a * a)
            integrand = p0 * (s * c / a) * speed * s * c  # p = p0 sqrt(s^2 - x^2) / a, dx = s cos t dt
        else:
            integrand = force / (math.pi * a * a) * speed * s * c
        return self.preston_coefficient / feed * (integrand @ _GL_W2) * 0.5 * math.pi


def tool_axis(lead: float, tilt: float) -> tuple[float, float, float]:
    """The cell's tool z axis (into the part, turned by ``lead`` about the tool y axis and ``tilt``
    about the travel, rad: :func:`~robot_grinding_sim.core.planning.planner.tcp_frames`) in the pass's
    local frame (x travel, y = n x travel, z = n): the tool frame is (x, -y, -z) of it."""
    from scipy.spatial.transform import Rotation

    z = np.diag([1.0, -1.0, -1.0]) @ Rotation.from_euler("YX", [lead, tilt]).as_matrix() @ np.array([0.0, 0.0, 1.0])
    return (float(z[0]), float(z[1]), float(z[2]))


def groove_of_rate(rate: Any, half_length: float, y: FloatArray, feed: float) -> FloatArray:
    """A groove from a depth-rate map: ``h(y) = (1 / v_f) integral rate(x, y) dx`` over
    ``|x| < half_length`` (Gauss-Legendre); ``rate(x, y)`` (broadcasting arrays, m) -> m/s: for tools
    whose footprint is given as a rate map."""
    y = np.asarray(y, dtype=float)[..., None]
    x = half_length * _GL_X
    return (np.asarray(rate(x, y), dtype=float) @ _GL_W) * half_length / feed


def groove_volume(footprint: Footprint, force: float, feed: float) -> float:
    """A = integral h(y) dy, m^2 (the volume removed per metre of pass)."""
    hw = footprint.half_width(force)
    y = np.linspace(-hw, hw, GROOVE_SAMPLES)
    return float(np.trapezoid(footprint.groove(y, force, feed), y))


def summed_grooves(y: FloatArray, h: FloatArray, stepover: float, shifts: int = 1) -> tuple[FloatArray, FloatArray]:
    """The sum of the groove (samples ``h`` at ``y``, zero outside) repeated every ``stepover``:
    (offsets over one period [0, stepover / shifts), depth there). ``shifts`` > 1 adds the layers'
    copies shifted by stepover / shifts (then the period is stepover / shifts)."""
    period = stepover / shifts
    n = max(int(round(period / max(y[1] - y[0], 1e-12))), 8)
    yy = np.linspace(0.0, period, n, endpoint=False)
    hw = float(max(abs(y[0]), abs(y[-1])))
    total = np.zeros(n)
    k = int(math.ceil(hw / period)) + 1
    for j in range(-k, k + 1):
        total += np.interp(yy - j * period, y, h, left=0.0, right=0.0)
    return yy, total


def ripple(total: FloatArray) -> float:
    """(max - min) / (max + min): the half-range of a depth about its middle, as a fraction."""
    hi, lo = float(total.max()), float(total.min())
    return (hi - lo) / (hi + lo) if hi + lo > 0 else math.inf


def choose_stepover(y: FloatArray, h: FloatArray, tolerance: float = DEFAULT_RIPPLE) -> float:
    """The largest stepover (m) below which the sum of the grooves ``h(y)`` ripples by at most
    ``tolerance`` for every smaller stepover too (scanned from small to large in 1 % steps: a
    stepover that happens to be smooth between rough ones would not survive the plan's real
    spacing)."""
    hw = float(max(abs(y[0]), abs(y[-1])))
    s = 0.05 * hw
    best = s
    while s <= 2.0 * hw:
        if ripple(summed_grooves(y, h, s)[1]) > tolerance:
            break
        best = s
        s *= 1.01
    return best


@dataclass(frozen=True)
class DepthLimits:
    """The user's limits: force range (N), feed range (m/s), the longest cycle (s, inf: none)."""

    force_min: float = 0.5
    force_max: float = 50.0
    feed_min: float = 1e-3
    feed_max: float = 0.1
    cycle_time: float = math.inf

    def validate(self) -> DepthLimits:
        if not 0.0 < self.force_min <= self.force_max:
            raise InputError(f"removal force range [{self.force_min}, {self.force_max}] N: needs 0 < min <= max")
        if not 0.0 < self.feed_min <= self.feed_max:
            raise InputError(f"removal feed range [{self.feed_min}, {self.feed_max}] m/s: needs 0 < min <= max")
        if not self.cycle_time > 0.0:
            raise InputError(f"removal cycle time limit {self.cycle_time} s: must be > 0")
        return self


@dataclass
class DepthPlan:
    """The depth planner's choice (see the module docstring); lengths m, force N, feed m/s."""

    target_depth: float
    force: float
    feed: float
    stepover: float
    layers: int
    half_width: float
    ripple: float  # of the summed grooves (all layers), fraction
    depth_per_layer: float  # predicted mean depth of one layer, m
    lead_in: float  # the lead-in and lead-out length at each pass end, m
    half_length: float = 0.0  # the patch's reach along the travel, m (the ball's: half_width)
    limiting: str | None = None  # what prevents D (None: D is planned)
    notes: list[str] = field(default_factory=list)
    #: per face target depths: {face: {target_depth, feed, feed_scale (over ``feed``), depth_per_layer, limiting}}
    faces: dict[str, dict[str, Any]] = field(default_factory=dict)
    groove_y: FloatArray | None = None  # (K,) the groove of one pass, m
    groove_h: FloatArray | None = None  # (K,) m

    @property
    def predicted_depth(self) -> float:
        return self.layers * self.depth_per_layer

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("groove_y", "groove_h")}
        out["predicted_depth_m"] = self.predicted_depth
        if self.groove_y is not None and self.groove_h is not None:
            every = max(1, len(self.groove_y) // 100)
            out["groove"] = {"y_m": self.groove_y[::every].tolist(), "depth_m": self.groove_h[::every].tolist()}
        return out


def feed_for_depth(footprint: Footprint, force: float, stepover: float, depth: float, feed0: float = 0.01) -> float:
    """The feed (m/s) at which grooves ``stepover`` apart average ``depth`` (fixed point of
    v = v A(v) / (s D): A is nearly proportional to 1 / v)."""
    v = feed0 if math.isfinite(feed0) and feed0 > 0 else 0.01
    for _ in range(40):
        v_new = v * groove_volume(footprint, force, v) / (stepover * depth)
        if not v_new < MAX_FEED:  # the feed's own sliding removes more than D however fast: no feed does
            return math.inf
        if not v_new > MIN_FEED:  # the removal does not grow as the feed slows: no feed removes D
            return 0.0
        if abs(v_new - v) <= 1e-9 * v:
            return v_new
        v = v_new
    return v


def _stepover(footprint: Footprint, force: float, tolerance: float) -> tuple[float, FloatArray, FloatArray]:
    hw = footprint.half_width(force)
    if not hw > 0.0:
        raise InputError(f"removal: the tool has no footprint at {force} N")
    y = np.linspace(-hw, hw, GROOVE_SAMPLES)
    h = footprint.groove(y, force, 0.01)
    return choose_stepover(y, h, tolerance), y, h


def plan_depth(footprint: Footprint, depth: float, force: float, limits: DepthLimits | None = None,
               force_fixed: bool = False, ripple_tolerance: float = DEFAULT_RIPPLE,
               lead_in: float | None = None) -> DepthPlan:
    """Stepover, feed, force and layers for an even ``depth`` D (m) (see the module docstring).

    Args:
        force: the force wanted (N): kept if ``force_fixed`` (the user gave force and depth: the
            feed is what is left), else the first choice within ``limits``.
        lead_in: the length of each pass's lead-in and lead-out, m (default: 4 times the patch's
            reach along the travel, :meth:`Footprint.half_length`: the ball's 4 a).
    """
    if not (math.isfinite(depth) and depth > 0):
        raise InputError(f"target-depth must be a positive depth in metres, got {depth!r}")
    lim = (limits or DepthLimits()).validate()
    notes: list[str] = []
    limiting = None
    if force_fixed and not lim.force_min <= force <= lim.force_max:
        limiting = f"force {force:g} N outside the force range [{lim.force_min:g}, {lim.force_max:g}] N"
    F = force if force_fixed else min(max(force, lim.force_min), lim.force_max)

    def feed_at(f: float) -> float:
        s_f = _stepover(footprint, f, ripple_tolerance)[0]
        return feed_for_depth(footprint, f, s_f, depth)

    v = feed_at(F)
    if v > lim.feed_max and not force_fixed and F > lim.force_min:
        lo, hi = lim.force_min, F  # less force until the fastest feed removes D
        if feed_at(lo) > lim.feed_max:
            F = lo
        else:
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if feed_at(mid) <= lim.feed_max else (lo, mid)
            F = lo
        notes.append(f"force lowered to {F:.3g} N: at {force:g} N the feed for D would exceed {lim.feed_max:g} m/s")
        v = feed_at(F)
    if v < lim.feed_min and not force_fixed and F < lim.force_max:
        lo, hi = F, lim.force_max  # more force until the slowest feed allowed removes D
        if feed_at(hi) < lim.feed_min:
            F = hi
        else:
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if feed_at(mid) >= lim.feed_min else (mid, hi)
            F = hi
        notes.append(f"force raised to {F:.3g} N: at {force:g} N the feed for D would be under {lim.feed_min:g} m/s")
        v = feed_at(F)
    s, y, h = _stepover(footprint, F, ripple_tolerance)
    layers = 1
    if v < lim.feed_min:  # D needs more than one layer at the slowest feed
        layers = int(math.ceil(lim.feed_min / v * (1.0 + 1e-9))) if v > 0 else MAX_LAYERS + 1
        if layers > MAX_LAYERS:
            one = groove_volume(footprint, F, lim.feed_min) / s
            limiting = limiting or (f"layers: D = {depth:g} m needs more than {MAX_LAYERS} layers at {F:.3g} N (one "
                                    f"layer at the slowest feed {lim.feed_min:g} m/s removes {one:.3g} m; a tool "
                                    f"sliding at the feed alone removes the same at any feed): more force, a "
                                    f"turning tool or a less deep D")
            layers = MAX_LAYERS
        notes.append(f"{layers} layers of D/{layers}: one layer would need {v:.3g} m/s, under {lim.feed_min:g} m/s")
    # the most each layer removes when D is out of the layers' reach; else the feed for D / layers
    capped = layers == MAX_LAYERS and limiting is not None
    v = lim.feed_min if capped else feed_for_depth(footprint, F, s, depth / layers, v * layers)
    if v > lim.feed_max * (1.0 + 1e-9):
        need = (f"needs {v:.3g} m/s" if math.isfinite(v) else
                "cannot be removed at any feed (the feed's own sliding removes more)")
        limiting = limiting or (f"feed range: D = {depth:g} m {need} at {F:.3g} N, over the feed limit "
                                f"{lim.feed_max:g} m/s (less force or a faster feed would reach it)")
        v = lim.feed_max
    per_layer = groove_volume(footprint, F, v) / s
    hg = footprint.groove(y, F, v)
    rip = ripple(summed_grooves(y, hg, s, layers)[1])
    hw = footprint.half_width(F)
    hl = footprint.half_length(F)
    return DepthPlan(depth, F, v, s, layers, hw, rip, per_layer, 4.0 * hl if lead_in is None else lead_in,
                     hl, limiting, notes, groove_y=y, groove_h=hg)


def plan_face_depths(footprint: Footprint, dp: DepthPlan, depths: dict[int, float],
                     limits: DepthLimits | None = None) -> dict[str, dict[str, Any]]:
    """Per face target depths on the job's plan ``dp`` (its force, stepover and layers: one groove
    shape for the job): each face's feed for its depth ``depths[face]`` (m) (:func:`feed_for_depth`),
    kept within the feed range, the range named in the face's ``limiting`` when its D needs more.
    Sets and returns ``dp.faces``."""
    lim = (limits or DepthLimits()).validate()
    out: dict[str, dict[str, Any]] = {}
    for face, D in sorted(depths.items()):
        v = feed_for_depth(footprint, dp.force, dp.stepover, D / dp.layers, dp.feed)
        limiting = None
        if not lim.feed_min * (1 - 1e-9) <= v <= lim.feed_max * (1 + 1e-9):
            edge = lim.feed_max if v > lim.feed_max else lim.feed_min
            need = f"needs {v:.3g} m/s" if math.isfinite(v) and v > 0 else "is out of reach of any feed"
            limiting = (f"feed range: face {face}'s D = {D:g} m {need} at the job's {dp.force:.3g} N and "
                        f"{dp.layers} layer(s), outside [{lim.feed_min:g}, {lim.feed_max:g}] m/s")
            v = edge
        out[str(face)] = {"target_depth": D, "feed": v, "feed_scale": v / dp.feed,
                          "depth_per_layer": groove_volume(footprint, dp.force, v) / dp.stepover,
                          "limiting": limiting}
    dp.faces = out
    return out


def face_feed_scales(removal_plan: dict[str, Any] | None) -> dict[int, float]:
    """{face: its feed over the job's} of a plan with per face depths (plan.json ``removal_plan.faces``)."""
    faces = (removal_plan or {}).get("faces") or {}
    return {int(k): float(v["feed_scale"]) for k, v in faces.items()}


def set_face_feeds(plan: Any, paths: list[Any]) -> None:
    """Each pass path's ``feed_scale`` (the trajectory's :class:`~.trajectory.PassPath`, samples at
    ``arc`` on the TCP path) from its waypoints' faces (linear between waypoints), for a plan with
    per face depths; nothing without."""
    scales = face_feed_scales(getattr(plan, "removal_plan", None))
    if scales:
        for g, p, pos in zip(paths, plan.passes, plan.tcp_positions, strict=True):
            a = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(np.asarray(pos), axis=0), axis=1))]  # pass_path's arc
            g.feed_scale = np.interp(g.arc, a, np.array([scales.get(int(f), 1.0) for f in p.face]))


def stretched_arc(along: FloatArray, feed_scale: FloatArray | None) -> tuple[FloatArray, FloatArray]:
    """(sigma, scale) of a pass whose feed is ``feed_scale`` (N,) times the job's at arc lengths ``along``
    (N,) m (None: 1): sigma = integral ds / scale (trapezoid), the length the pass is timed on at the job's feed."""
    scale = np.ones(len(along)) if feed_scale is None else np.asarray(feed_scale, dtype=float)
    return along[0] + np.r_[0.0, np.cumsum(np.diff(along) * 0.5 * (1.0 / scale[1:] + 1.0 / scale[:-1]))], scale


def check_cycle_time(dp: DepthPlan, pass_length: float, passes: int, overhead: float, limit: float) -> float:
    """The cycle time (s) of ``passes`` passes of total length ``pass_length`` m per layer at the
    plan's feed plus ``overhead`` s per pass (approach, retreat, link); names the cycle time
    limit in ``dp.limiting`` when it is over ``limit`` s."""
    t = dp.layers * (pass_length / dp.feed + passes * overhead)
    if t > limit and dp.limiting is None:
        dp.limiting = (f"cycle time: D = {dp.target_depth:g} m takes {t:.0f} s ({dp.layers} layer(s) of {passes} "
                       f"passes at {dp.feed:.3g} m/s), over the limit of {limit:g} s")
    return t


@dataclass
class PassLine:
    """A pass as the uniformity figures see it: its row (the passes' order across), contact points
    (M, 3) m in the removal grid's frame and their arc length (M,) m along the surface."""

    index: int
    row: int
    points: FloatArray
    arc: FloatArray


def _resampled(p: PassLine, step: float) -> tuple[FloatArray, FloatArray]:
    n = max(2, int(math.ceil(float(p.arc[-1] - p.arc[0]) / step)) + 1)
    s = np.linspace(float(p.arc[0]), float(p.arc[-1]), n)
    return np.column_stack([np.interp(s, p.arc, p.points[:, j]) for j in range(3)]), s


def uniformity(points: FloatArray, depth: FloatArray, inside: NDArray[np.bool_], passes: list[PassLine],
               target: float, band: float, stepover: float, half_width: float, lead_in: float,
               half_length: float | None = None) -> dict[str, Any]:
    """How even a removal map is against the target depth (m; or (N,) one per node: per face depths).

    The region is the ground area the passes remove D from: the nodes (``points`` (N, 3) m, their
    ``depth`` (N,) m, ``inside`` (N,) on the face) whose nearest pass point is at most a stepover
    away, on a pass that has neighbours over the whole groove width on both sides (the outermost
    ``ceil(half_width / stepover)`` rows left out: their outer side is the region's edge), and
    between the lead-in and the lead-out (arc length at least ``lead_in + half_length`` from both
    pass ends: the force ramps over the lead-in, and the patch reaches ``half_length`` (m, along the
    travel; default half_width: the ball's) beyond it).

    The end of a pass is everything within the lead-in plus half_length of its ends, and beyond
    them within half_width: the end-of-pass depth is the deepest node there over the region's
    median (a tool at rest in contact there shows as a ratio well above 1).

    Returns: ``within_band`` (fraction of the region within ``band`` x target of it), ``band``,
    ``region_nodes``, ``region_area_m2`` (nodes x mean node area are not known here: nodes x
    spacing^2 by the caller), ``mean_depth_m``, ``median_depth_m``, ``deepest`` / ``shallowest``
    ({``depth_m``, ``point_m`` (3,), ``pass``, ``arc_m``}), ``end_of_pass_depth_m``,
    ``end_of_pass_ratio``, ``end_of_pass`` (where it is), and ``in_region`` / ``out_of_band``
    masks (N,) for plots (not JSON: the caller drops them).
    """
    from scipy.spatial import cKDTree

    P = np.asarray(points, dtype=float)
    step = 0.25 * max(min(stepover, half_width), 1e-5)
    samples, arcs, owner, ends = [], [], [], []
    for k, p in enumerate(passes):
        pts, s = _resampled(p, step)
        samples.append(pts)
        arcs.append(s - float(p.arc[0]))
        owner.append(np.full(len(s), k))
        ends.append(np.full(len(s), float(p.arc[-1] - p.arc[0])))
    S, A, O, L = np.vstack(samples), np.concatenate(arcs), np.concatenate(owner), np.concatenate(ends)
    dist, j = cKDTree(S).query(P)
    arc, length, k_pass = A[j], L[j], O[j]
    rows = sorted({p.row for p in passes})
    edge = int(math.ceil(half_width / stepover - 1e-9))
    inner_rows = set(rows[edge:len(rows) - edge]) if len(rows) > 2 * edge else set()
    row_of = np.array([p.row for p in passes])[k_pass]
    margin = lead_in + (half_width if half_length is None else half_length)
    in_rows = np.isin(row_of, list(inner_rows))
    region = inside & in_rows & (dist <= stepover) & (arc >= margin) & (arc <= length - margin)
    at_end = inside & in_rows & (((dist <= stepover) & ((arc < margin) | (arc > length - margin)))
                                 | (((arc <= 1e-9) | (arc >= length - 1e-9)) & (dist <= half_width + stepover)))
    job_target = float(target) if np.ndim(target) == 0 else float(np.max(target))
    out: dict[str, Any] = {"target_depth_m": job_target, "band": band, "region_nodes": int(region.sum()),
                           "rows": len(rows), "rows_in_region": len(inner_rows)}
    if not region.any():
        out.update({"within_band": 0.0, "note": "no region: too few passes for the groove width or too short"})
        out["in_region"], out["out_of_band"] = region, np.zeros_like(region)
        return out
    d = np.asarray(depth, dtype=float)
    T = np.broadcast_to(np.asarray(target, dtype=float), d.shape)  # a depth per node (per face targets)
    dr = d[region]
    ok = np.abs(dr - T[region]) <= band * T[region]
    idx = np.flatnonzero(region)

    def where(i: int) -> dict[str, Any]:
        return {"depth_m": float(d[i]), "point_m": P[i].tolist(), "pass": int(passes[int(k_pass[i])].index),
                "arc_m": float(arc[i])}

    med = float(np.median(dr))
    out.update({"within_band": float(ok.mean()), "mean_depth_m": float(dr.mean()), "median_depth_m": med,
                "std_depth_m": float(dr.std()),
                "deepest": where(int(idx[int(np.argmax(dr))])), "shallowest": where(int(idx[int(np.argmin(dr))]))})
    if at_end.any():
        e = int(np.flatnonzero(at_end)[int(np.argmax(d[at_end]))])
        out.update({"end_of_pass_depth_m": float(d[e]), "end_of_pass_ratio": float(d[e] / med) if med > 0 else None,
                    "end_of_pass": where(e)})
    out["in_region"] = region
    out["out_of_band"] = region & ~(np.abs(d - T) <= band * T)
    return out


def public(figures: dict[str, Any]) -> dict[str, Any]:
    """:func:`uniformity`'s figures without the masks (for JSON)."""
    return {k: v for k, v in figures.items() if k not in ("in_region", "out_of_band")}


def uniformity_text(fig: dict[str, Any] | None, what: str = "removal") -> list[str]:
    """The lines a command prints of :func:`uniformity`'s figures (None: none)."""
    if not fig:
        return []
    D, band = fig["target_depth_m"], fig["band"]
    if not fig.get("region_nodes"):
        return [f"{what}: {fig.get('note', 'no region')}"]
    out = [f"{what}: {fig['within_band']:.1%} of the region ({fig['region_nodes']} nodes, {fig['rows_in_region']} of "
           f"{fig['rows']} rows) within +-{band:.0%} of {D * 1e6:g} um; mean {fig['mean_depth_m'] * 1e6:.3f} um, "
           f"std {fig['std_depth_m'] * 1e6:.3f} um"]
    for key in ("deepest", "shallowest"):
        w = fig[key]
        out.append(f"  {key} {w['depth_m'] * 1e6:.3f} um at pass {w['pass']}, {w['arc_m'] * 1e3:.1f} mm along it "
                   f"({', '.join(f'{c:.4f}' for c in w['point_m'])} m)")
    if fig.get("end_of_pass_ratio") is not None:
        w = fig["end_of_pass"]
        out.append(f"  end of pass: deepest {fig['end_of_pass_depth_m'] * 1e6:.3f} um = "
                   f"{fig['end_of_pass_ratio']:.3f} x the pass depth (pass {w['pass']}, "
                   f"{w['arc_m'] * 1e3:.1f} mm along it)")
    for face, ff in (fig.get("faces") or {}).items():  # per face target depths: each face against its own D
        out += ["  " + line for line in uniformity_text(ff, f"face {face}")]
    return out


def depth_plan_text(rp: dict[str, Any]) -> list[str]:
    """The lines ``grinding plan`` prints of plan.json's ``removal_plan``."""
    out = [f"depth plan {rp['target_depth'] * 1e6:g} um: force {rp['force']:.3g} N, feed {rp['feed'] * 1e3:.2f} mm/s "
           f"on the surface, stepover {rp['stepover'] * 1e3:.3f} mm x {rp['layers']} layer(s), lead-in and lead-out "
           f"{rp['lead_in'] * 1e3:.1f} mm; summed grooves +-{rp['ripple']:.1%}; "
           f"about {rp.get('cycle_time_s', 0):.0f} s"]
    out += [f"  {n}" for n in rp.get("notes", [])]
    for face, f in (rp.get("faces") or {}).items():
        out.append(f"  face {face}: {f['target_depth'] * 1e6:g} um at feed {f['feed'] * 1e3:.2f} mm/s"
                   + (f"; not reached: {f['limiting']}" if f.get("limiting") else ""))
    if rp.get("limiting"):
        out.append(f"  D is not reached: {rp['limiting']}")
    pred = (rp.get("predicted") or {}).get("uniformity")
    return out + uniformity_text(pred, "predicted removal")


@dataclass
class PrestonFit:
    """The Preston coefficient fitted to one measured groove (:func:`fit_preston`)."""

    preston_coefficient: float  # k_p, m^2/N
    standard_error: float  # of k_p, m^2/N (least squares, from the residuals)
    offset: float  # the groove's centre in the measurement's y, m
    rms_residual: float  # m
    peak_depth: float  # the measured groove's deepest point, m
    samples: int

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["relative_error"] = self.standard_error / self.preston_coefficient if self.preston_coefficient else None
        out["rms_residual_of_peak"] = self.rms_residual / self.peak_depth if self.peak_depth > 0 else None
        return out


def fit_preston(y: FloatArray, depth: FloatArray, footprint: Footprint, force: float, feed: float) -> PrestonFit:
    """k_p from one measured groove: depths ``depth`` (K,) m at offsets ``y`` (K,) m across a straight
    pass made at ``force`` N and ``feed`` m/s. The model is ``k_p g(y - y0)``, g the footprint's groove
    per unit k_p (``footprint.groove`` at k_p = 1: its ``preston_coefficient`` must be 1); k_p by
    linear least squares at each centre y0, y0 by a scan then golden-section refinement over the
    measured span. The standard error is ``sqrt(sum r^2 / (K - 2) / sum g^2)``."""
    y = np.asarray(y, dtype=float).reshape(-1)
    h = np.asarray(depth, dtype=float).reshape(-1)
    if y.shape != h.shape or len(y) < 5:
        raise InputError(f"groove: needs at least 5 (offset, depth) pairs, got {len(y)}")
    if not (np.isfinite(y).all() and np.isfinite(h).all()):
        raise InputError("groove: NaN or inf in the measurement")
    if not h.max() > 0:
        raise InputError("groove: no depth above 0 m in the measurement (depths are metres, positive into the part)")
    if not (force > 0 and feed > 0):
        raise InputError(f"groove: the pass's force {force} N and feed {feed} m/s must be > 0")
    hw = footprint.half_width(force)

    def solve(y0: float) -> tuple[float, float]:
        g = footprint.groove(y - y0, force, feed)
        gg = float(g @ g)
        if gg <= 0:
            return 0.0, math.inf
        k = float(g @ h) / gg
        return k, float(np.sum((h - k * g) ** 2))

    centre = float(y[int(np.argmax(h))])
    grid = np.linspace(centre - hw, centre + hw, 81)
    y0 = float(grid[int(np.argmin([solve(c)[1] for c in grid]))])
    lo, hi = y0 - 2 * hw / 80, y0 + 2 * hw / 80
    phi = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
        lo, hi = (lo, b) if solve(a)[1] < solve(b)[1] else (a, hi)
    y0 = 0.5 * (lo + hi)
    k, ss = solve(y0)
    g = footprint.groove(y - y0, force, feed)
    se = math.sqrt(ss / max(len(y) - 2, 1) / float(g @ g))
    return PrestonFit(k, se, y0, math.sqrt(ss / len(y)), float(h.max()), len(y))

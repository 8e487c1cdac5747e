"""The job trajectory: one builder for the plan, the simulation and the real arm.

From a plan (passes with TCP poses, linking moves, the workpiece pose) and the process parameters,
:func:`build_job_trajectory` makes the timed joint trajectory of the whole job, per pass:

- ``approach``: from rest ``approach`` m out along the first normal, quintic rest-to-rest, fast
  down to ``engage_gap`` above the surface, then slowly (``engage_time``) onto the commanded
  penetration (so the damper's share D d' of the onset force stays small: no overshoot);
- ``dwell``: ``dwell`` s at rest on the surface (the force settles);
- ``pass``: the TCP path through the pass's waypoints, resampled every ``step`` (0.5 mm) by a
  cubic spline (waypoints kept as samples), at the feed with smoothstep velocity ramps (0.1 s);
- ``retreat``: quintic rest-to-rest ``approach`` m out along the last normal;
- ``link`` (between passes): the plan's linking move (straight, or up and over the part with
  the clearance), timed by the joint velocity and acceleration limits (time-optimal path
  parameterisation by forward/backward integration of the path speed).

Each pass's TCP is moved by its commanded offset (m, along -n: deeper) from the planned one (the
force-target optimisation sets the offsets). Joint knots come from damped-least-squares IK held
to 1e-9 m (the job commands micrometre penetrations), each seeded from the previous one; a
target far from its seed (e.g. a large reorientation) is reached by continuation.

The result, :class:`JointTrajectory`, is what plan.json stores and what both the in-process job
and a ros2_control ``joint_trajectory_controller`` follow: positions and velocities at the knots,
interpolated by cubic Hermite segments (the controller's rule for position + velocity points).
Frames: the robot's root (``base_link``); units rad, rad/s, s, m.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.interpolate import CubicSpline
from scipy.spatial.transform import Rotation, Slerp

from robot_grinding_sim.core.config import ProcessConfig
from robot_grinding_sim.core.errors import GrindingSimError, PlanningError
from robot_grinding_sim.core.planning.depth import set_face_feeds, stretched_arc
from robot_grinding_sim.core.planning.links import bridged_path, ik_branches
from robot_grinding_sim.core.planning.path_ik import first_configuration, solve_ik, targets
from robot_grinding_sim.core.robot.ik import IKSolver

FloatArray = NDArray[np.float64]

#: joint acceleration limit when the robot description has none (UR publishes none), rad/s^2
DEFAULT_ACCELERATION_LIMIT = 4.0
#: knots of each quintic approach / retreat phase
LINE_KNOTS = 31
#: spacing of the pass samples along the TCP path, m
PASS_STEP = 5e-4
#: duration of the feed ramps at the pass ends, s
FEED_RAMP = 0.1


@dataclass
class JointTrajectory:
    """A timed joint trajectory in the robot's root frame.

    Attributes:
        joint_names: (n,) names. tip_link: the link the Cartesian targets were for (``tcp``).
        times: (M,) s from the start, strictly increasing.
        positions, velocities: (M, n) rad, rad/s (cubic Hermite between knots).
        segments: one dict per move: ``kind`` (approach, dwell, pass, retreat, link),
            ``pass_index``, ``start``, ``stop`` (knot indices, stop exclusive; consecutive moves
            share their boundary knot, where the arm is at rest).
        arc: (M,) arc length along the pass at pass knots, m; NaN elsewhere.
        frame: the robot's root link the joint values and any Cartesian pose refer to.
    """

    joint_names: list[str]
    tip_link: str
    times: FloatArray
    positions: FloatArray
    velocities: FloatArray
    segments: list[dict[str, Any]] = field(default_factory=list)
    arc: FloatArray | None = None
    frame: str = "base_link"

    @property
    def duration(self) -> float:
        return float(self.times[-1]) if len(self.times) else 0.0

    def pass_windows(self, lead_in: float = 0.0) -> list[tuple[int, float, float]]:
        """(pass index, start time, end time) of every pass segment, s; with ``lead_in`` > 0 (m,
        ``process.lead_in``) its knots at full force, between lead-in and lead-out (:func:`full_force_knots`)."""
        out = []
        for s in (g for g in self.segments if g["kind"] == "pass"):
            arc = np.zeros(s["stop"] - s["start"]) if self.arc is None else np.asarray(self.arc[s["start"]:s["stop"]])
            a, b = full_force_knots(arc.astype(float), lead_in if self.arc is not None else 0.0)
            out.append((s["pass_index"], float(self.times[s["start"] + a]), float(self.times[s["start"] + b])))
        return out

    def interpolator(self, model: Any) -> Any:
        """The reference this trajectory gives a position-controlled arm (cubic Hermite knots):
        a :class:`~robot_grinding_sim.core.robot.joint_trajectory.TrajectoryInterpolator` from t = 0."""
        from robot_grinding_sim.core.robot.joint_trajectory import JointLimits, TrajectoryInterpolator

        return TrajectoryInterpolator.build(JointLimits.from_model(model), self.joint_names, self.times,
                                            self.positions, self.velocities, what="job trajectory")


# --------------------------------------------------------------------------------------------------
# Cartesian profiles


def smooth_profile(length: float, speed: float, ramp: float) -> tuple[Callable[[FloatArray], FloatArray], float]:
    """Arc length s(t) of a rest-to-rest motion over ``length`` m at ``speed`` m/s with smoothstep
    velocity ramps of ``ramp`` s (shortened for short motions). Returns (s(t), duration s)."""
    ramp = min(ramp, length / speed) if speed > 0 else ramp
    ramp = max(ramp, 1e-6)
    d_ramp = 0.5 * speed * ramp  # distance covered by one ramp
    cruise = max(0.0, length - 2.0 * d_ramp) / speed
    vmax = speed if cruise > 0 else length / ramp
    T = 2.0 * ramp + cruise

    def s_of_t(t: FloatArray) -> FloatArray:
        t = np.clip(np.asarray(t, dtype=float), 0.0, T)
        x1 = np.clip(t / ramp, 0.0, 1.0)
        s = vmax * ramp * (x1**3 - 0.5 * x1**4)  # integral of smoothstep
        s = s + vmax * np.clip(t - ramp, 0.0, cruise)
        x2 = np.clip((t - ramp - cruise) / ramp, 0.0, 1.0)
        s = s + vmax * ramp * (x2 - x2**3 + 0.5 * x2**4)
        return np.minimum(s, length)

    return s_of_t, T


def quintic_line(p0: FloatArray, p1: FloatArray, duration: float, n: int = LINE_KNOTS
                 ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Quintic rest-to-rest along p0 -> p1: times (n,) s, positions (n, 3), arc s (n,), ds/dt (n,)."""
    tau = np.linspace(0.0, 1.0, n)
    L = float(np.linalg.norm(p1 - p0))
    s = L * (10 * tau**3 - 15 * tau**4 + 6 * tau**5)
    sd = L * (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / duration
    return tau * duration, p0 + np.outer(s / max(L, 1e-300), p1 - p0), s, sd


@dataclass
class PassPath:
    """A pass's TCP path in the root frame, resampled for the trajectory.

    Arrays (N, ...): positions (N, 3) m (the planned TCP), rotations (N, 3, 3), normals (N, 3)
    outward unit, arc (N,) m from the pass start.
    """

    index: int
    positions: FloatArray
    rotations: FloatArray
    normals: FloatArray
    arc: FloatArray
    waypoint_arc: FloatArray | None = None  # (W,) arc length of each plan waypoint, m
    #: lengths, m, of the approach and the retreat along the normal (the plan's; None: process.approach)
    approach: float | None = None
    retreat: float | None = None
    #: (N,) arc length of the contact point along the surface at each sample, m (None: not known)
    surface_arc: FloatArray | None = None
    #: (N,) feed / process.feed per sample (per face depths): the pass timed on sigma = integral ds / scale
    feed_scale: FloatArray | None = None

    def lengths(self, process: ProcessConfig) -> tuple[float, float]:
        """(approach, retreat) lengths along the normal, m."""
        return (process.approach if self.approach is None else self.approach,
                process.approach if self.retreat is None else self.retreat)

    def waypoint(self, arc: float) -> str:
        """'waypoint k (arc a mm)': the plan waypoint at or just before arc length ``arc`` (m)."""
        if self.waypoint_arc is None:
            return f"arc {arc * 1e3:.1f} mm"
        k = int(np.searchsorted(self.waypoint_arc, arc + 1e-9, side="right") - 1)
        return f"waypoint {max(k, 0)} (arc {arc * 1e3:.1f} mm)"


def pass_path(index: int, tcp_pos: FloatArray, tcp_quat: FloatArray, normals: FloatArray, X_BP: FloatArray,
              step: float = PASS_STEP, surface_arc: FloatArray | None = None) -> PassPath:
    """A pass's planned TCP path (part frame: positions (N, 3), xyzw quaternions (N, 4), normals
    (N, 3)) in the root frame, every waypoint kept and each interval split into pieces of at most
    ``step`` m on a cubic spline through the waypoints (so chords between IK knots do not cut
    into a curved surface). ``surface_arc``: (N,) the contact points' arc length on the surface at
    the waypoints, m (interpolated onto the samples: a feed on the surface)."""
    pos = np.asarray(tcp_pos, dtype=float)
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(pos, axis=0), axis=1))]
    keep = np.r_[True, np.diff(arc) > 1e-12]
    pos, arc = pos[keep], arc[keep]
    quat = np.asarray(tcp_quat, dtype=float)[keep]
    nrm = np.asarray(normals, dtype=float)[keep]
    if len(pos) < 2:
        raise PlanningError(f"pass {index}: fewer than 2 distinct waypoints")
    pieces = np.maximum(1, np.ceil(np.diff(arc) / step).astype(int))
    s = np.concatenate([np.linspace(a, b, k, endpoint=False) for a, b, k in zip(arc[:-1], arc[1:], pieces,
                                                                               strict=True)] + [arc[-1:]])
    if len(pos) >= 3:
        P = CubicSpline(arc, pos, axis=0)(s)
        N = CubicSpline(arc, nrm, axis=0)(s)
    else:
        P = np.column_stack([np.interp(s, arc, pos[:, j]) for j in range(3)])
        N = np.column_stack([np.interp(s, arc, nrm[:, j]) for j in range(3)])
    N /= np.linalg.norm(N, axis=1, keepdims=True)
    R = Slerp(arc, Rotation.from_quat(quat))(s).as_matrix()
    Rb, pb = X_BP[:3, :3], X_BP[:3, 3]
    out = PassPath(index, P @ Rb.T + pb, Rb @ R, N @ Rb.T, s, arc)
    if surface_arc is not None:
        out.surface_arc = np.interp(s, arc, np.asarray(surface_arc, dtype=float)[keep])
    return out


# --------------------------------------------------------------------------------------------------
# segments


@dataclass
class Segment:
    """A move of the trajectory: kind, its pass, knot times t (K,) s (absolute), joint knots q
    (K, n) and qd (K, n), and on passes the arc length of each knot (K,) m."""

    kind: str
    pass_index: int
    t: FloatArray
    q: FloatArray
    qd: FloatArray
    arc: FloatArray | None = None

    @property
    def t0(self) -> float:
        return float(self.t[0])

    @property
    def t1(self) -> float:
        return float(self.t[-1])


def _joint_velocities(q: FloatArray, s: FloatArray, sdot: FloatArray) -> FloatArray:
    """dq/ds * ds/dt at the knots (rest where sdot = 0)."""
    dqds = np.gradient(q, s, axis=0) if len(s) > 2 else np.tile((q[-1] - q[0]) / (s[-1] - s[0]), (len(s), 1))
    return dqds * sdot[:, None]


def _limits(model: Any, acceleration_limits: Any) -> tuple[FloatArray, FloatArray]:
    vmax = np.where(np.isfinite(model.velocity_limits) & (model.velocity_limits > 0), model.velocity_limits, 1.0)
    amax = (np.full(model.nq, DEFAULT_ACCELERATION_LIMIT) if acceleration_limits is None
            else np.broadcast_to(np.asarray(acceleration_limits, dtype=float), (model.nq,)).copy())
    return np.asarray(vmax, dtype=float), amax


def quintic_time(distance: float, duration: float, max_tcp_speed: float) -> float:
    """``duration`` s, or longer so that a rest-to-rest quintic over ``distance`` m peaks (15/8 d / T)
    under 98 % of ``max_tcp_speed`` (m/s, the arm driver's limit)."""
    return max(duration, 1.875 * distance / (0.98 * max_tcp_speed))


def lead_lift(along: FloatArray, lead_in: float, penetration: float, gap: float) -> FloatArray:
    """Lift of the commanded TCP along the normal (m, >= 0) at arc lengths ``along`` (N,) m of a pass
    with lead-in and lead-out ``lead_in`` m long: over the first quarter of the lead-in the tool comes
    down (smoothstep) by ``gap`` m to touching, over the other three quarters the penetration grows
    (smoothstep) from 0 to ``penetration`` m, so the force ramps up while the tool moves at the feed;
    the lead-out the same backwards. Zero between them (the pass at full force)."""
    along = np.asarray(along, dtype=float)
    length = float(along[-1] - along[0])
    lead = min(lead_in, 0.45 * length)

    def ramp(x: FloatArray) -> FloatArray:
        x1 = np.clip(x / (0.25 * lead), 0.0, 1.0)
        x2 = np.clip((x - 0.25 * lead) / (0.75 * lead), 0.0, 1.0)
        return penetration * (1.0 - x2 * x2 * (3.0 - 2.0 * x2)) + gap * (1.0 - x1 * x1 * (3.0 - 2.0 * x1))

    return np.maximum(ramp(along - along[0]), ramp(along[-1] - along))


def pass_episode(model: Any, g: PassPath, process: ProcessConfig, offset: float, penetration: float,
                 t_start: float, q_seed: FloatArray, vmax: FloatArray) -> list[Segment]:
    """Approach (with the engagement), dwell, pass and retreat of one pass from ``t_start``.

    ``offset``: the commanded TCP moved by this (m) along -n from the planned one;
    ``penetration``: the planned penetration of the tool centre placement (m), so the engagement
    phase starts ``engage_gap`` above the commanded contact. ``q_seed``: IK seed near the approach.

    With ``process.lead_in`` > 0 the tool is never at rest in contact: the approach ends
    ``engage_gap`` above the surface, there is no dwell, and the pass engages and releases while
    moving at the feed (:func:`lead_lift`). With ``process.feed_on_surface`` the feed is the contact
    point's speed on the surface (the pass's surface arc length, when known) rather than the TCP's:
    on a convex face the TCP moves faster by (1 + R k), so the removal along the pass stays even.
    """
    P = g.positions - offset * g.normals
    n0, n1 = g.normals[0], g.normals[-1]
    a_len, r_len = g.lengths(process)
    a_top = P[0] + a_len * n0
    pen0 = offset + penetration
    along = g.surface_arc if process.feed_on_surface and g.surface_arc is not None else g.arc
    lead = process.lead_in > 0.0
    if lead:
        P = P + lead_lift(along, process.lead_in, max(pen0, 0.0), process.engage_gap)[:, None] * g.normals
        ta, pa, sa, sda = quintic_line(a_top, P[0], quintic_time(float(np.linalg.norm(P[0] - a_top)),
                                                                 process.approach_time, process.max_tcp_speed))
    else:
        a_mid = P[0] + (min(process.engage_gap, 0.5 * a_len) + max(pen0, 0.0)) * n0
        t_fast = quintic_time(float(np.linalg.norm(a_mid - a_top)),
                              max(process.approach_time - process.engage_time, 0.5 * process.approach_time),
                              process.max_tcp_speed)
        t_engage = quintic_time(float(np.linalg.norm(P[0] - a_mid)), process.engage_time, process.max_tcp_speed)
        ta, pa, sa, sda = quintic_line(a_top, a_mid, t_fast)
        tb, pb, sb, sdb = quintic_line(a_mid, P[0], t_engage)
        ta = np.r_[ta, t_fast + tb[1:]]
        pa = np.vstack([pa, pb[1:]])
        sa = np.r_[sa, sa[-1] + sb[1:]]
        sda = np.r_[sda, sdb[1:]]
    qa = solve_ik(model, targets(pa, np.repeat(g.rotations[:1], len(pa), axis=0)), q_seed,
                  what=f"pass {g.index} approach (above waypoint 0)")
    segs = [Segment("approach", g.index, t_start + ta, qa, _joint_velocities(qa, sa, sda))]
    t = segs[-1].t1
    if process.dwell > 0 and not lead:
        segs.append(Segment("dwell", g.index, np.array([t, t + process.dwell]), np.vstack([qa[-1], qa[-1]]),
                            np.zeros((2, model.nq))))
        t += process.dwell
    sigma, scale = stretched_arc(along, g.feed_scale)
    s_of_t, T = smooth_profile(float(sigma[-1] - sigma[0]), process.feed, FEED_RAMP)
    tt = np.linspace(0.0, T, 4001)
    ss = np.r_[s_of_t(tt[:-1]) + sigma[0], sigma[-1]]  # the pass at the feed, knots at the resampled path
    t_knots = np.interp(sigma, ss, tt)
    keep = np.r_[True, np.diff(t_knots) > 1e-9]
    keep[-1] = True
    t_knots, arc, along_k = t_knots[keep], g.arc[keep], along[keep]
    t_knots[-1] = T
    sd_knots = np.interp(t_knots, tt, np.gradient(ss, tt)) * scale[keep]
    sd_knots[0] = sd_knots[-1] = 0.0
    qp = solve_ik(model, targets(P[keep], g.rotations[keep]), qa[-1], what=f"pass {g.index}",
                  label=lambda k: g.waypoint(float(arc[k])))
    qdp = _joint_velocities(qp, along_k, sd_knots)
    need = np.max(np.abs(qdp) / vmax, axis=1)
    if need.max() > 1.0:
        w = int(np.argmax(need))
        # 90 % of the feed the joint allows, rounded down to two significant digits: a suggestion
        # that works when tried
        ok = 0.9 * process.feed / need[w]
        step = 10.0 ** (math.floor(math.log10(ok)) - 1)
        raise PlanningError(f"pass {g.index}, {g.waypoint(float(arc[w]))}: the feed {process.feed} m/s needs "
                            f"{need[w]:.2f}x a joint's velocity limit; reduce the feed to "
                            f"{math.floor(ok / step) * step:.2g} m/s (process.feed) or move the workpiece")
    segs.append(Segment("pass", g.index, t + t_knots, qp, qdp, arc))
    t += T
    # retreat
    tr, pr, sr, sdr = quintic_line(P[-1], P[-1] + r_len * n1,
                                   quintic_time(r_len, process.approach_time, process.max_tcp_speed))
    qr = solve_ik(model, targets(pr, np.repeat(g.rotations[-1:], len(pr), axis=0)), qp[-1],
                  what=f"pass {g.index} retreat (above its last waypoint)")
    segs.append(Segment("retreat", g.index, t + tr, qr, _joint_velocities(qr, sr, sdr)))
    return segs


def _densify(positions: FloatArray, rotations: FloatArray, max_step: float, max_angle: float
             ) -> tuple[FloatArray, FloatArray]:
    """Insert samples so consecutive poses differ by <= max_step m and <= max_angle rad."""
    pos_out, rot_out = [positions[:1]], [rotations[:1]]
    for k in range(1, len(positions)):
        d = float(np.linalg.norm(positions[k] - positions[k - 1]))
        r = Rotation.from_matrix(rotations[k - 1 : k + 1])
        ang = float((r[0].inv() * r[1]).magnitude())
        n = max(1, int(math.ceil(d / max_step)), int(math.ceil(ang / max_angle)))
        s = np.linspace(0.0, 1.0, n + 1)[1:]
        pos_out.append(positions[k - 1] + s[:, None] * (positions[k] - positions[k - 1]))
        rot_out.append(Slerp([0.0, 1.0], r)(s).as_matrix())
    return np.vstack(pos_out), np.concatenate(rot_out)


def path_speed_profile(q: FloatArray, s: FloatArray, vmax: FloatArray, amax: FloatArray, cap: float = math.inf
                       ) -> FloatArray:
    """Largest path speeds ds/dt (N,) at the samples of a path q(s) (N, n), at rest at both ends,
    within the joint velocity and acceleration limits: forward/backward integration of the
    path acceleration bounds |q'_j s'' + q''_j s'^2| <= a_max_j (time-optimal path parameterisation)."""
    N = len(s)
    if N < 2:
        return np.zeros(N)
    ds = np.diff(s)
    qs = np.gradient(q, s, axis=0)
    qss = np.gradient(qs, s, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        vcap = np.min(np.where(np.abs(qs) > 1e-12, vmax / np.abs(qs), np.inf), axis=1)
        vcap = np.minimum(vcap, np.sqrt(np.min(np.where(np.abs(qss) > 1e-12, amax / np.abs(qss), np.inf), axis=1)))
    vcap = np.minimum(vcap, cap)
    vcap[0] = vcap[-1] = 0.0

    def acc_range(i: int, sd: float) -> tuple[float, float]:
        lo, hi = -np.inf, np.inf
        for j in range(q.shape[1]):
            a, b = qs[i, j], qss[i, j] * sd * sd
            if abs(a) < 1e-12:
                continue
            l1, l2 = (-amax[j] - b) / a, (amax[j] - b) / a
            lo, hi = max(lo, min(l1, l2)), min(hi, max(l1, l2))
        return lo, hi

    fwd = np.zeros(N)
    for i in range(N - 1):
        _, hi = acc_range(i, fwd[i])
        hi = max(hi, 0.0) if np.isfinite(hi) else 1e6
        fwd[i + 1] = min(vcap[i + 1], math.sqrt(max(fwd[i] ** 2 + 2.0 * hi * ds[i], 0.0)))
    bwd = fwd.copy()
    bwd[-1] = 0.0
    for i in range(N - 1, 0, -1):
        lo, _ = acc_range(i, bwd[i])
        dec = -min(lo, 0.0) if np.isfinite(lo) else 1e6
        bwd[i - 1] = min(bwd[i - 1], math.sqrt(max(bwd[i] ** 2 + 2.0 * dec * ds[i - 1], 0.0)))
    return bwd


def link_segment(model: Any, positions: FloatArray, rotations: FloatArray, q_from: FloatArray, t_start: float,
                 next_pass: int, vmax: FloatArray, amax: FloatArray, max_step: float = 0.002,
                 max_angle: float = 0.05, max_tcp_speed: float = math.inf, joint_path: FloatArray | None = None
                 ) -> Segment:
    """The linking move through TCP poses (positions (M, 3), rotations (M, 3, 3), root frame) from
    rest at ``q_from`` to rest, timed by the joint limits and ``max_tcp_speed`` (m/s: the path
    parameter grows at least as fast as the TCP's arc length, so capping its rate caps the TCP's
    speed between knots, which hardware_driver's guard checks). ``joint_path``: the joint knots
    (M, n) of the TCP positions, when already made (:func:`~.links.bridged_path`)."""
    if joint_path is not None:
        P, q = np.asarray(positions, dtype=float), np.array(joint_path, dtype=float)
    else:
        P, R = _densify(positions, rotations, max_step, max_angle)
        q = solve_ik(model, targets(P, R), q_from, what=f"link to pass {next_pass}")
    q[0] = q_from
    s = np.r_[0.0, np.cumsum(np.maximum(np.max(np.abs(np.diff(q, axis=0)) / vmax, axis=1),
                                        np.linalg.norm(np.diff(P, axis=0), axis=1)))]
    keep = np.r_[True, np.diff(s) > 1e-12]
    q, s = q[keep], s[keep]
    if len(s) < 2:
        return Segment("link", next_pass, np.array([t_start, t_start + 1e-3]), np.vstack([q_from, q_from]),
                       np.zeros((2, model.nq)))
    # 2 % below the limit: the knots' velocities (central differences) may point slightly off the chords
    sd = path_speed_profile(q, s, vmax, amax, cap=0.98 * max_tcp_speed)
    avg = 0.5 * (sd[1:] + sd[:-1])
    dt = np.empty(len(avg))
    moving = avg > 0
    with np.errstate(divide="ignore"):
        dt[moving] = np.diff(s)[moving] / avg[moving]
    if not moving.all():
        # an interval with the arm at rest at both knots (a two-knot link, a joint reversing on the spot):
        # rest to rest, the cubic Hermite's peaks 1.5 dq / T and 6 dq / T^2 within the limits
        dq = np.abs(np.diff(q, axis=0))[~moving]
        dt[~moving] = np.maximum(np.max(1.5 * dq / vmax, axis=1), np.sqrt(np.max(6.0 * dq / amax, axis=1)))
        dt[~moving] = np.maximum(dt[~moving], np.maximum(1.5 * np.diff(s)[~moving] / max_tcp_speed, 1e-3))
    if not np.all(np.isfinite(dt)):
        k = int(np.argmax(~np.isfinite(dt)))
        raise PlanningError(f"link to pass {next_pass}, point {k}: no time law within the joint limits (path speed "
                            f"{avg[k]:.3g}); change the clearance or the workpiece pose (grinding plan --place auto)")
    t = np.r_[0.0, np.cumsum(dt)]
    return Segment("link", next_pass, t_start + t, q, _joint_velocities(q, s, sd))


def join_segments(model: Any, segments: Sequence[Segment]) -> JointTrajectory:
    """The segments as one :class:`JointTrajectory` (consecutive segments share their end knot)."""
    t, q, qd, arc, table = [], [], [], [], []
    n_done = 0
    for s in segments:
        first = 0 if not t else 1
        if t and abs(s.t[0] - t[-1][-1]) > 1e-9:
            raise GrindingSimError(f"segments do not join: {t[-1][-1]} s vs {s.t[0]} s")
        t.append(s.t[first:])
        q.append(s.q[first:])
        qd.append(s.qd[first:])
        if s.arc is not None and first:
            arc[-1] = arc[-1].copy()
            arc[-1][-1] = s.arc[0]  # the shared knot starts the pass: its arc length is the pass's
        arc.append(s.arc[first:] if s.arc is not None else np.full(len(s.t) - first, np.nan))
        start = n_done - 1 if first else 0
        n_done += len(s.t) - first
        table.append({"kind": s.kind, "pass_index": int(s.pass_index), "start": start, "stop": n_done})
    return JointTrajectory(list(model.joint_names), model.tip_link, np.concatenate(t), np.vstack(q), np.vstack(qd),
                           table, np.concatenate(arc), str(getattr(model, "root_link", "base_link")))


@dataclass
class JobPaths:
    """What the builder needs of a plan, in the robot's root frame: the pass paths and, between
    consecutive passes, the linking move's TCP poses (positions (M, 3), rotations (M, 3, 3)) and its
    way over the part (the same, or None: the link goes over the part already, or the plan has none),
    taken where the arm changes configuration there."""

    passes: list[PassPath]
    links: list[tuple[FloatArray, FloatArray]]
    detours: list[tuple[FloatArray, FloatArray] | None] = field(default_factory=list)


def job_paths(plan: Any) -> JobPaths:
    """The root-frame pass paths and links of a :class:`~robot_grinding_sim.core.planning.planner.Plan`."""
    X_BP = plan.workpiece_pose
    passes = [pass_path(p.index, pos, quat, p.normals, X_BP, surface_arc=p.arc)
              for p, pos, quat in zip(plan.passes, plan.tcp_positions, plan.tcp_quaternions, strict=True)]
    Rb, pb = X_BP[:3, :3], X_BP[:3, 3]
    ends = {(m.kind, m.pass_index): float(np.linalg.norm(m.positions[-1] - m.positions[0])) for m in plan.moves
            if m.kind in ("approach", "retreat")}
    for g in passes:  # the plan's approach and retreat lengths (longer where the part is near)
        g.approach, g.retreat = ends.get(("approach", g.index)), ends.get(("retreat", g.index))
    set_face_feeds(plan, passes)  # per face target depths: each waypoint at its face's feed
    links = [(m.positions @ Rb.T + pb, Rb @ Rotation.from_quat(m.quaternions).as_matrix())
             for m in plan.moves if m.kind == "link"]
    if len(links) != max(len(passes) - 1, 0):
        raise PlanningError(f"the plan has {len(links)} linking moves for {len(passes)} passes")
    detours = [None if m.detour is None else
               (m.detour[0] @ Rb.T + pb, Rb @ Rotation.from_quat(m.detour[1]).as_matrix())
               for m in plan.moves if m.kind == "link"]
    return JobPaths(passes, links, detours)


def build_job_trajectory(model: Any, paths: JobPaths, process: ProcessConfig, offsets: Sequence[float],
                         penetration: float, q_home: FloatArray, acceleration_limits: Any = None
                         ) -> JointTrajectory:
    """The whole job: every pass episode with its offset, joined by the linking moves, from t = 0
    at rest at the first approach point.

    Args:
        model: RobotModel whose tip link is the tcp.
        paths: :func:`job_paths` of the plan.
        process: feed, approach, engagement and dwell.
        offsets: (passes,) commanded offsets along -n, m.
        penetration: the planned penetration of the TCP placement, m.
        q_home: seed of the first IK.

    Raises:
        PlanningError: naming the pass and point that cannot be reached or timed.
    """
    if len(offsets) != len(paths.passes):
        raise PlanningError(f"{len(offsets)} offsets for {len(paths.passes)} passes")

    vmax, amax = _limits(model, acceleration_limits)
    if process.feed > process.max_tcp_speed:
        raise PlanningError(f"the feed {process.feed:g} m/s (process.feed) exceeds the TCP speed limit "
                            f"{process.max_tcp_speed:g} m/s (process.max_tcp_speed)")
    segs: list[Segment] = []
    q = None
    for k, g in enumerate(paths.passes):
        top = targets((g.positions[:1] - offsets[k] * g.normals[:1]) + g.lengths(process)[0] * g.normals[:1],
                      g.rotations[:1])
        if segs:
            P, R = paths.links[k - 1]
            P, R = P.copy(), R.copy()
            # the link joins the actual retreat end and approach start (offsets move them slightly)
            P[0] = model.fk(segs[-1].q[-1])[:3, 3]
            P[-1] = top[0, :3, 3]
            R[-1] = top[0, :3, :3]
            try:
                link = link_segment(model, P, R, segs[-1].q[-1], segs[-1].t1, g.index, vmax, amax,
                                    max_tcp_speed=process.max_tcp_speed)
                ep = pass_episode(model, g, process, offsets[k], penetration, link.t1, link.q[-1], vmax)
                segs.extend([link, *ep])
            except PlanningError as exc:  # a singularity on the way: another configuration of the arm
                if k - 1 < len(paths.detours) and paths.detours[k - 1] is not None:
                    # over the part, not beside it: the wrist and the tool swing round at the top
                    P0, P1 = P[0], P[-1]
                    P, R = (a.copy() for a in paths.detours[k - 1])
                    P[0], P[-1], R[-1] = P0, P1, top[0, :3, :3]
                segs.extend(reconfigured_episode(model, (P, R), segs[-1].q[-1], segs[-1].t1, g, process,
                                                 offsets[k], penetration, vmax, amax, exc))
            continue
        q = first_configuration(model, top[0], q_home, f"pass {g.index} approach, point 0")
        segs.extend(pass_episode(model, g, process, offsets[k], penetration, 0.0, q, vmax))
    return join_segments(model, segs)


def pass_start_configurations(traj: JointTrajectory) -> dict[int, FloatArray]:
    """The arm's configuration (n,) rad where each pass's episode starts (the first knot of its
    approach, at rest), by pass index: the configuration the job actually has there, after any
    change of configuration on the links before it (:mod:`~robot_grinding_sim.core.planning.links`)."""
    return {int(s["pass_index"]): traj.positions[s["start"]].copy() for s in traj.segments if s["kind"] == "approach"}


def episode_trajectory(model: Any, g: PassPath, process: ProcessConfig, offset: float, penetration: float,
                       q_seed: FloatArray, acceleration_limits: Any = None) -> JointTrajectory:
    """One pass alone (approach, dwell, pass, retreat) from rest at its approach point, t = 0:
    what the force-target optimisation simulates."""
    vmax, _ = _limits(model, acceleration_limits)
    top = targets((g.positions[:1] - offset * g.normals[:1]) + g.lengths(process)[0] * g.normals[:1], g.rotations[:1])
    q = solve_ik(model, top, q_seed, what=f"pass {g.index} approach")[0]
    return join_segments(model, pass_episode(model, g, process, offset, penetration, 0.0, q, vmax))


def reachability(model: Any, traj: JointTrajectory, acceleration_limits: Any = None) -> dict[str, Any]:
    """Figures of the trajectory: knots, smallest manipulability and joint-limit margin, largest
    joint step between knots, duration, the limits used."""
    vmax, amax = _limits(model, acceleration_limits)
    solver = IKSolver(model)
    man = min(solver.manipulability(q) for q in traj.positions[:: max(1, len(traj.positions) // 400)])
    margin = float(np.min(np.minimum(traj.positions - solver.lower, solver.upper - traj.positions)))
    jumps = np.max(np.abs(np.diff(traj.positions, axis=0)), axis=1) if len(traj.times) > 1 else np.zeros(1)
    return {
        "knots": int(len(traj.times)),
        "min_manipulability": float(man),
        "min_joint_limit_margin_rad": margin,
        "max_joint_step_rad": float(jumps.max()),
        "duration_s": traj.duration,
        "velocity_limits": vmax.tolist(),
        "acceleration_limits": amax.tolist(),
    }


def full_force_knots(arc: FloatArray, lead_in: float) -> tuple[int, int]:
    """(first, last) index of a pass's knots at full force: arc length ``arc`` (K,) m at least
    ``lead_in`` m from both ends; the whole pass (0, K - 1) when ``lead_in`` is 0 or none is."""
    full = np.flatnonzero((arc >= lead_in) & (arc <= np.nanmax(arc) - lead_in)) if lead_in > 0.0 else []
    return (int(full[0]), int(full[-1])) if len(full) else (0, len(arc) - 1)


def progress_samples(traj: JointTrajectory, rate: float = 100.0) -> FloatArray:
    """The ``/grinding/progress`` samples (docs/compare.md): rows [t, pass_index, arc_length_m] at
    ``rate`` Hz during passes, one -1 sample just after each pass end, and -1 every 0.1 s during
    the other moves."""
    rows = []
    for s in traj.segments:
        t = traj.times[s["start"]:s["stop"]]
        if s["kind"] == "pass":
            arc = traj.arc[s["start"]:s["stop"]]
            ts = np.arange(t[0], t[-1], 1.0 / rate)
            rows.extend([(ti, float(s["pass_index"]), a) for ti, a in zip(ts, np.interp(ts, t, arc), strict=True)])
            rows.append((float(t[-1]), float(s["pass_index"]), float(arc[-1])))
            rows.append((float(t[-1]) + 1e-3, -1.0, 0.0))
        else:
            rows.extend([(ti, -1.0, 0.0) for ti in np.arange(t[0], t[-1], 0.1)])
    rows.sort(key=lambda r: r[0])
    return np.array(rows, dtype=float).reshape(-1, 3)


def reconfigured_episode(model: Any, link_poses: tuple[FloatArray, FloatArray], q_from: FloatArray, t_start: float,
                         g: Any, process: Any, offset: float, penetration: float, vmax: FloatArray,
                         amax: FloatArray, failure: PlanningError) -> list[Any]:
    """The link to pass ``g`` and its episode (approach, dwell, pass, retreat: a list of
    :class:`~robot_grinding_sim.core.planning.trajectory.Segment`) from another configuration of the
    arm at the pass's first pose, when following the link's TCP path from ``q_from`` failed with
    ``failure``. Raises ``failure``, with the number of configurations tried, when none works."""
    P, R = link_poses
    top = np.eye(4)
    top[:3, :3], top[:3, 3] = R[-1], P[-1]
    branches = ik_branches(model, top, [q_from])
    errors = []
    for q_to in branches:
        try:
            q_to = solve_ik(model, top[None], q_to, what=f"pass {g.index} approach")[0]
            episode = pass_episode(model, g, process, offset, penetration, 0.0, q_to, vmax)
            q, tcp = bridged_path(model, P, R, q_from, q_to, f"link to pass {g.index}")
            link = link_segment(model, tcp, np.repeat(R[:1], len(tcp), axis=0), q_from, t_start, g.index, vmax,
                                amax, joint_path=q, max_tcp_speed=process.max_tcp_speed)
        except PlanningError as exc:
            errors.append(str(exc))
            continue
        for seg in episode:
            seg.t = seg.t + link.t1
        return [link, *episode]
    first = f" (the best: {errors[0]})" if errors else ""
    raise PlanningError(f"{failure}; none of the arm's {len(branches)} configurations at pass {g.index}'s first pose "
                        f"works either{first}; change the workpiece pose (grinding plan --place auto)") from None

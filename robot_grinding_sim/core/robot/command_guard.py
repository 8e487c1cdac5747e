"""Checks a joint trajectory before it goes to a real arm: joint limits, speeds, TCP box.

A trajectory is knots ``(times (N,), positions (N, n), velocities (N, n) or None)`` for the named
joints. It passes when, at every knot and between consecutive knots:

- position: ``lower + position_margin <= q <= upper - position_margin`` (URDF limits, rad or m;
  joints without limits, such as continuous ones, are not checked);
- joint velocity: ``|qd| <= velocity_factor * velocity_limit`` (URDF), for the given velocities
  and for the velocity implied between consecutive knots, ``|q[k+1] - q[k]| / (t[k+1] - t[k])``;
- TCP position: the origin of ``tcp_link`` (forward kinematics) inside the box
  ``[workspace_min, workspace_max]`` in the model's root frame (``base_link``), m;
- TCP speed: ``|v_tcp| <= max_tcp_speed`` (m/s), with ``v_tcp = J_v(q) qd`` at knots with
  velocities, and the straight-line speed between consecutive knots' TCP positions.

With a part the robot holds (a :class:`~robot_grinding_sim.core.sim.held_part.HeldPartModel`:
the tool stands in the cell), what the arm carries through the cell is the part: the box bounds
the origin of the part's frame (``workpiece.grasp`` on ``workpiece.link``) in ``base_link``, named
"part" in the reasons. The TCP speed is the tool centre's speed relative to the part, which is
the speed in ``base_link`` of the part's point passing the standing tool (the feed the planner
limits with ``process.max_tcp_speed``).

The checks see the knots, the chords between them and, where velocities are given, the joint
velocity of the interpolated motion between knots; not the TCP path between knots (planners here
sample the path densely enough that the difference is small compared with the margins). With the
arm's current configuration ``q_current``, joints the trajectory does not name hold their position
and the move from ``q_current`` (and ``qd_current``, at t = 0) to the first knot is checked as one
more segment (a first knot at t = 0 must then be the current configuration, within
``start_tolerance``).

The trajectory is judged as ros2_control's joint_trajectory_controller (JTC) executes it, from its
``header.stamp`` (``late``: how far in the past the stamp lies at the check):

- stamp 0 ("start now") or ahead: its knots' times count from when it starts (the move to the
  first knot from the current state is checked over the first knot's time: for a stamp ahead the
  controller takes longer, so this is on the safe side);
- stamp in the past by ``late``: the controller samples it at ``now - stamp``. Before the first
  knot (``late < t_0``) it moves from the current state to the first knot in ``t_0 - late``
  instead of ``t_0``; past it, the state due now (the segment in progress interpolated at
  ``late``: linear between positions, cubic Hermite with velocities, as JTC does) replaces the
  current state *at once*, a step, refused as a ``start`` jump beyond ``start_tolerance`` (the
  arm would run it as fast as its drives allow); ending before now (``late > t_last``), it is
  refused (JTC rejects such a trajectory; a controller that took it would jump to its last point).
  The reasons then say how late the stamp is, and knot 0 is the point due now.

Interpolation (JTC's): between knots with positions and velocities the motion is the cubic Hermite
segment, whose velocity peaks inside the segment (``1.5 x`` the chord for a rest-to-rest segment):
the peak is checked ("interpolated velocity"). Without velocities JTC interpolates linearly: the
chord velocity is the velocity. Accelerations are not checked (the URDF gives no limit).

The result lists one reason per check and joint (or the TCP), at the first knot where it fails,
with the value, the limit and how many knots or segments fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.arm_kernels import cubic_hermite, hermite_sample
from robot_grinding_sim.core.robot.dynamics import RobotModel

__all__ = ["CommandGuard", "GuardParams", "GuardResult", "Violation", "peak_tcp_speed", "tcp_speeds"]


def tcp_speeds(model: RobotModel, tcp_link: str, times: FloatArray, q: FloatArray, qd: FloatArray | None = None
               ) -> tuple[FloatArray | None, FloatArray]:
    """The TCP speeds the guard checks, m/s: at the knots ``|J_v(q_k) qd_k|`` ((N,), None without
    velocities) and along the chords between consecutive knots' TCP positions ((N - 1,)); ``times``
    (N,) s, ``q`` and ``qd`` (N, n) in the model's joint order."""
    q = np.asarray(q, dtype=float)
    knots = None
    if qd is not None:
        knots = np.array([np.linalg.norm(model.jacobian(q[k], tcp_link)[:3] @ qd[k]) for k in range(len(q))])
    pos = model.fk(q, tcp_link)[:, :3, 3]
    chords = np.linalg.norm(np.diff(pos, axis=0), axis=1) / np.diff(np.asarray(times, dtype=float))
    return knots, chords


def peak_tcp_speed(model: RobotModel, tcp_link: str, times: FloatArray, q: FloatArray,
                   qd: FloatArray | None = None) -> float:
    """The largest of :func:`tcp_speeds`, m/s (0 for a single knot)."""
    knots, chords = tcp_speeds(model, tcp_link, times, q, qd)
    return float(max(np.max(chords, initial=0.0), 0.0 if knots is None else np.max(knots, initial=0.0)))

FloatArray = npt.NDArray[np.float64]


def _due_from(t: FloatArray, q: FloatArray, qd: FloatArray | None, late: float
              ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    """The knots as JTC executes them ``late`` s after their start (0 <= late <= t[-1]): times from
    now; past the first knot, the state due now (linear without velocities, cubic Hermite with
    them) is knot 0 at t = 0."""
    if late < t[0]:
        return t - late, q, qd
    i = min(int(np.searchsorted(t, late, side="right")) - 1, t.size - 1)
    if i == t.size - 1:
        return np.zeros(1), q[-1:], None if qd is None else qd[-1:]
    h = t[i + 1] - t[i]
    s = (late - t[i]) / h
    if qd is None:
        q_due, v_due = q[i] + s * (q[i + 1] - q[i]), None
    else:  # the cubic Hermite segment (the arm's, as JTC's)
        q_due, v_due = np.empty(q.shape[1]), np.empty(q.shape[1])
        hermite_sample(t[i:i + 2], q[i:i + 2], qd[i:i + 2], late, q_due, v_due)
    t_new = np.r_[0.0, t[i + 1:] - late]
    q_new = np.vstack([q_due, q[i + 1:]])
    return t_new, q_new, None if qd is None else np.vstack([v_due, qd[i + 1:]])


def _cubic_interior_peak(q: FloatArray, qd: FloatArray, dt: FloatArray) -> FloatArray:
    """(S, n) the velocity at the interior extremum of each cubic Hermite segment between
    consecutive knots ``q``, ``qd`` ((S + 1, n)) over ``dt`` ((S,)), 0 where it has none inside.

    ``v(tau) = v0 + 2 c2 tau + 3 c3 tau^2`` with ``c2 = (3 h - (2 v0 + v1) T) / T^2`` and
    ``c3 = (-2 h + (v0 + v1) T) / T^3``: extremum ``v0 - c2^2 / (3 c3)`` at ``tau = -c2 / (3 c3)``."""
    T = dt[:, None]
    v0 = qd[:-1]
    c2, c3 = cubic_hermite(q[:-1], v0, q[1:], qd[1:], T)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = -c2 / (3.0 * c3)
        peak = v0 - c2**2 / (3.0 * c3)
    inside = (c3 != 0.0) & (tau > 0.0) & (tau < T)
    return np.where(inside, peak, 0.0)


def _vec3(value: Any, name: str) -> FloatArray:
    try:
        a = np.array(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"GuardParams {name} must be 3 numbers (m), got {value!r}") from None
    if a.shape != (3,) or not np.isfinite(a).all():
        raise InputError(f"GuardParams {name} must be 3 finite numbers (m), got {value!r}")
    return a


@dataclass(frozen=True)
class GuardParams:
    """Limits of :class:`CommandGuard` (SI).

    Attributes:
        position_margin: kept from each URDF position limit, rad (or m for prismatic), >= 0.
        velocity_factor: fraction of each URDF velocity limit allowed, (0, 1].
        max_tcp_speed: TCP speed allowed, m/s (> 0).
        workspace_min: (3,) lower corner of the TCP box in the root frame, m.
        workspace_max: (3,) upper corner, m (each > the lower).
        tcp_link: the link whose origin is the TCP.
        start_tolerance: how far (rad or m, per joint) a first knot at t = 0 may be from the
            current configuration, >= 0.
        tracking_tolerance: how far (m) the measured TCP may be from its reference while the arm
            follows one, >= 0: the chord from where the arm is to a first knot later than 0 may be
            longer than the planned motion by this much, so its speed may exceed ``max_tcp_speed``
            by ``tracking_tolerance / t[0]`` (a stream of points 50 ms ahead of an arm that lags its
            reference by a tracking error, at a planned speed near the limit).
    """

    position_margin: float = 0.01
    velocity_factor: float = 0.9
    max_tcp_speed: float = 0.25
    workspace_min: FloatArray = field(default_factory=lambda: np.array([-1.5, -1.5, -0.5]))
    workspace_max: FloatArray = field(default_factory=lambda: np.array([1.5, 1.5, 1.5]))
    tcp_link: str = "tcp"
    start_tolerance: float = 1e-3
    tracking_tolerance: float = 1e-3

    def __post_init__(self) -> None:
        checks = (
            ("position_margin", lambda v: v >= 0.0, ">= 0 rad"),
            ("velocity_factor", lambda v: 0.0 < v <= 1.0, "in (0, 1]"),
            ("max_tcp_speed", lambda v: v > 0.0, "> 0 m/s"),
            ("start_tolerance", lambda v: v >= 0.0, ">= 0 rad"),
            ("tracking_tolerance", lambda v: v >= 0.0, ">= 0 m"),
        )
        for name, ok, what in checks:
            raw = getattr(self, name)
            try:
                v = float(raw)
            except (TypeError, ValueError):
                v = math.nan
            if not math.isfinite(v) or not ok(v):
                raise InputError(f"GuardParams {name} must be {what}, got {raw!r}")
            object.__setattr__(self, name, v)
        lo, hi = _vec3(self.workspace_min, "workspace_min"), _vec3(self.workspace_max, "workspace_max")
        if not (hi > lo).all():
            raise InputError(f"GuardParams workspace_max {hi.tolist()} must exceed workspace_min {lo.tolist()} "
                             "on every axis")
        object.__setattr__(self, "workspace_min", lo)
        object.__setattr__(self, "workspace_max", hi)
        if not isinstance(self.tcp_link, str) or not self.tcp_link:
            raise InputError(f"GuardParams tcp_link must be a link name, got {self.tcp_link!r}")


@dataclass(frozen=True)
class Violation:
    """One failed check (the first knot where it fails).

    Attributes:
        check: "position", "velocity", "implied velocity", "start", "workspace", "tcp speed" or
            "implied tcp speed".
        subject: the joint name, or "TCP" (with the axis for the workspace, e.g. "TCP z"; "part z" for a
            held part's box).
        knot: index of the knot (for a segment, the knot it ends at; -1 is q_current).
        time: that knot's time, s.
        value: the offending value (rad, m, rad/s, m/s).
        limit: the limit it crosses, same unit.
        count: how many knots (or segments) fail this check for this subject.
        unit: the unit of value and limit.
        note: what the knots and times refer to when not the trajectory as sent (e.g. a stamp in
            the past), or "".
    """

    check: str
    subject: str
    knot: int
    time: float
    value: float
    limit: float
    count: int
    unit: str
    note: str = ""

    def __str__(self) -> str:
        more = f" ({self.count} knots in all)" if self.count > 1 else ""
        note = f" [{self.note}]" if self.note else ""
        return (f"knot {self.knot} (t = {self.time:.4f} s): {self.subject} {self.check} {self.value:.6g} {self.unit} "
                f"beyond the limit {self.limit:.6g} {self.unit}{more}{note}")


@dataclass(frozen=True)
class GuardResult:
    """Outcome of :meth:`CommandGuard.check`: ``ok`` and, if not, why (``reasons``, one string per
    :class:`Violation`)."""

    ok: bool
    violations: tuple[Violation, ...] = ()

    @property
    def reasons(self) -> list[str]:
        return [str(v) for v in self.violations]


class CommandGuard:
    """Checks joint trajectories against a robot model's limits (see the module docstring).

    Args:
        model: the arm (joint limits, forward kinematics, Jacobian).
        params: the guard's limits (default :class:`GuardParams`).

    Raises:
        InputError: the TCP link is not in the model, or a margin leaves a joint no range.
    """

    def __init__(self, model: RobotModel, params: GuardParams | None = None) -> None:
        self.model = model
        self.params = params if params is not None else GuardParams()
        p = self.params
        if p.tcp_link not in model.link_names:
            raise InputError(f"GuardParams tcp_link {p.tcp_link!r} is not a link of {model.source}")
        self.lower = model.lower + p.position_margin
        self.upper = model.upper - p.position_margin
        narrow = [j for j, lo, hi in zip(model.joint_names, self.lower, self.upper, strict=True) if lo > hi]
        if narrow:
            raise InputError(f"GuardParams position_margin {p.position_margin} leaves no range for {narrow}")
        self.max_velocity = model.velocity_limits * p.velocity_factor

    # ---------------------------------------------------------------------------------------
    def _inputs(
        self, joint_names: Sequence[str], times: Any, positions: Any, velocities: Any, q_current: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray | None, FloatArray | None]:
        """Validated times (N,), positions and velocities (N, nq) in model joint order, q_current."""
        m = self.model
        names = list(joint_names)
        unknown = [j for j in names if j not in m.joint_names]
        if unknown:
            raise InputError(f"trajectory joint_names {unknown} are not joints of {m.source} ({m.joint_names})")
        if len(set(names)) != len(names):
            raise InputError(f"trajectory joint_names repeat a joint: {names}")
        cur = None
        if q_current is not None:
            cur = np.array(q_current, dtype=np.float64)
            if cur.shape != (m.nq,) or not np.isfinite(cur).all():
                raise InputError(f"q_current must be {m.nq} finite joint positions in the order "
                                 f"{m.joint_names}, got {q_current!r}")
        missing = [j for j in m.joint_names if j not in names]
        if missing and cur is None:
            raise InputError(f"trajectory does not command joints {missing}: give q_current to hold them")
        t = np.array(times, dtype=np.float64).reshape(-1)
        n_knots = t.size
        if n_knots == 0:
            raise InputError("trajectory times is empty: no knots to check")
        if not np.isfinite(t).all() or t[0] < 0.0 or (np.diff(t) <= 0.0).any():
            raise InputError("trajectory times must be finite, >= 0 and strictly increasing (s)")
        cols = [m.joint_names.index(j) for j in names]

        def full(arr: Any, what: str, fill: FloatArray | None) -> FloatArray:
            a = np.array(arr, dtype=np.float64)
            if a.shape != (n_knots, len(names)):
                raise InputError(f"trajectory {what} must have shape ({n_knots}, {len(names)}), got {a.shape}")
            if not np.isfinite(a).all():
                raise InputError(f"trajectory {what} holds NaN or infinite values")
            out = np.empty((n_knots, m.nq)) if fill is None else np.tile(fill, (n_knots, 1))
            out[:, cols] = a
            return out

        q = full(positions, "positions", cur)
        qd = None if velocities is None else full(velocities, "velocities", np.zeros(m.nq))
        return t, q, qd, cur

    def check(
        self,
        joint_names: Sequence[str],
        times: Any,
        positions: Any,
        velocities: Any = None,
        q_current: Any = None,
        late: float = 0.0,
        qd_current: Any = None,
    ) -> GuardResult:
        """Check one trajectory, as the controller will execute it (see the module docstring).

        Args:
            joint_names: (n,) names of the trajectory's columns (any order, a subset if
                q_current is given).
            times: (N,) time from the start of each knot, s, strictly increasing.
            positions: (N, n) rad (or m).
            velocities: (N, n) rad/s, or None (only the implied velocities are checked).
            q_current: (nq,) the arm's configuration now, in the model's joint order, or None.
            late: how far in the past the trajectory's start (``header.stamp``) lies now, s (>= 0;
                0 for a zero stamp or one ahead). Needs q_current when > 0.
            qd_current: (nq,) the arm's joint velocities now (model order), rad/s; default at rest.

        Returns:
            GuardResult; ``ok`` False lists every failed check.

        Raises:
            InputError: malformed input (shapes, NaN, times, unknown or missing joints, late).
        """
        t, q, qd, cur = self._inputs(joint_names, times, positions, velocities, q_current)
        m, p = self.model, self.params
        try:
            late = float(late)
        except (TypeError, ValueError):
            late = math.nan
        if not math.isfinite(late) or late < 0.0:
            raise InputError(f"late must be a finite time >= 0 s (how far in the past the stamp lies), got {late!r}")
        vcur = np.zeros(m.nq)
        if qd_current is not None:
            vcur = np.array(qd_current, dtype=np.float64).reshape(-1)
            if vcur.shape != (m.nq,) or not np.isfinite(vcur).all():
                raise InputError(f"qd_current must be {m.nq} finite joint velocities in the order {m.joint_names}, "
                                 f"got {qd_current!r}")
        note = ""
        if late > 0.0:
            if cur is None:
                raise InputError("a trajectory stamped in the past needs q_current: it starts from where the arm is")
            note = (f"header.stamp {late:.4f} s in the past: judged from now, {late:.4f} s into the trajectory; "
                    "knot 0 is the point due now")
            if late > t[-1]:
                jump = np.abs(q[-1] - cur)
                j = int(np.argmax(jump))
                return GuardResult(False, (Violation(
                    "start", m.joint_names[j], 0, 0.0, float(q[-1, j] - cur[j]), p.start_tolerance, 1,
                    "rad" if m.chain.joint_kinds[j] != "prismatic" else "m",
                    f"header.stamp {late:.4f} s in the past: the trajectory ended {late - t[-1]:.4f} s ago (the "
                    "controller rejects it; one that took it would jump to its last point)"),))
            t, q, qd = _due_from(t, q, qd, late)
        found: list[Violation] = []

        def per_joint(check: str, values: FloatArray, limit: FloatArray, bad: npt.NDArray[np.bool_],
                      knots: npt.NDArray[np.int64], unit: str) -> None:
            for j in np.flatnonzero(bad.any(axis=0)):
                rows = np.flatnonzero(bad[:, j])
                k = int(rows[0])
                found.append(Violation(check, m.joint_names[j], int(knots[k]), float(t_of(knots[k])),
                                       float(values[k, j]), float(limit[k, j]), rows.size, unit, note))

        def t_of(knot: int) -> float:
            return 0.0 if knot < 0 else float(t[knot])

        unit = ["m" if kind == "prismatic" else "rad" for kind in m.chain.joint_kinds]
        ang = unit[0] if len(set(unit)) == 1 else "rad or m"
        all_knots = np.arange(t.size)

        # positions
        over, under = q > self.upper, q < self.lower
        lim = np.where(over, self.upper, self.lower)
        per_joint("position", q, lim, over | under, all_knots, ang)

        # velocities at the knots
        vmax = np.broadcast_to(self.max_velocity, q.shape)
        if qd is not None:
            per_joint("velocity", qd, np.sign(qd) * vmax, np.abs(qd) > vmax, all_knots, f"{ang}/s")

        # segments: between knots, and from q_current to the first knot
        seg_q = q if cur is None else np.vstack([cur, q])
        seg_qd = None if qd is None else (qd if cur is None else np.vstack([vcur, qd]))
        seg_t = t if cur is None else np.r_[0.0, t]
        seg_end = all_knots[1:] if cur is None else all_knots
        if cur is not None and t[0] == 0.0:
            # a first knot at t = 0 is where the controller starts: it must be where the arm is
            jump = np.abs(q[0] - cur)
            bad = (jump > p.start_tolerance)[None, :]
            per_joint("start", (q[0] - cur)[None, :], np.full((1, m.nq), p.start_tolerance), bad,
                      np.array([0]), ang)
            seg_q, seg_qd, seg_t, seg_end = q, qd, t, all_knots[1:]
        dt = np.diff(seg_t)
        if dt.size:
            v_seg = np.diff(seg_q, axis=0) / dt[:, None]
            vmax_s = np.broadcast_to(self.max_velocity, v_seg.shape)
            per_joint("implied velocity", v_seg, np.sign(v_seg) * vmax_s, np.abs(v_seg) > vmax_s, seg_end,
                      f"{ang}/s")
            if seg_qd is not None:
                v_in = _cubic_interior_peak(seg_q, seg_qd, dt)
                per_joint("interpolated velocity", v_in, np.sign(v_in) * vmax_s, np.abs(v_in) > vmax_s, seg_end,
                          f"{ang}/s")

        # TCP: workspace box and speed
        pos, boxed = self.boxed_positions(q)
        for axis, name in enumerate("xyz"):
            hi, lo = pos[:, axis] > p.workspace_max[axis], pos[:, axis] < p.workspace_min[axis]
            rows = np.flatnonzero(hi | lo)
            if rows.size:
                k = int(rows[0])
                limit = p.workspace_max[axis] if hi[k] else p.workspace_min[axis]
                found.append(Violation("workspace", f"{boxed} {name}", k, float(t[k]), float(pos[k, axis]),
                                       float(limit), rows.size, "m", note))
        if qd is not None:
            knot_speed, _ = tcp_speeds(m, p.tcp_link, t, q, qd)
            self._tcp_speed(found, "tcp speed", knot_speed, all_knots, t_of, note)
        if dt.size:
            _, chord_speed = tcp_speeds(m, p.tcp_link, seg_t, seg_q)
            limit = np.full(dt.size, p.max_tcp_speed)
            if cur is not None and t[0] > 0.0:  # the chord from where the arm is: its tracking error
                limit[0] += p.tracking_tolerance / dt[0]
            self._tcp_speed(found, "implied tcp speed", chord_speed, seg_end, t_of, note, limit)
        return GuardResult(not found, tuple(found))

    def boxed_positions(self, q: FloatArray) -> tuple[FloatArray, str]:
        """The points the workspace box bounds at the configurations ``q`` (N, nq): (N, 3) m in the
        root frame, and their name in the reasons: the TCP's, or with a held part the part frame's
        origin (module docstring)."""
        m = self.model
        holder = getattr(m, "holder_link", None)
        if holder is None:
            return m.fk(q, self.params.tcp_link)[:, :3, 3], "TCP"
        return (m.fk(q, holder) @ m.X_hP)[:, :3, 3], "part"

    def _tcp_speed(self, found: list[Violation], check: str, speed: FloatArray, knots: npt.NDArray[np.int64],
                   t_of: Any, note: str, limit: FloatArray | None = None) -> None:
        limit = np.full(speed.shape, self.params.max_tcp_speed) if limit is None else limit
        rows = np.flatnonzero(speed > limit)
        if rows.size:
            k = int(rows[0])
            found.append(Violation(check, "TCP", int(knots[k]), t_of(int(knots[k])), float(speed[k]),
                                   float(limit[k]), rows.size, "m/s", note))

    def check_trajectory(self, trajectory: Any, q_current: Any = None) -> GuardResult:
        """:meth:`check` for an object with ``joint_names``, ``times``, ``positions`` and
        ``velocities`` (e.g. :class:`~robot_grinding_sim.core.planning.trajectory.JointTrajectory`)."""
        return self.check(trajectory.joint_names, trajectory.times, trajectory.positions,
                          getattr(trajectory, "velocities", None), q_current)

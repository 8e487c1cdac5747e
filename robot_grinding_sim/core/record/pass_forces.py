"""Per-pass contact force read back from a bag: what two runs of one plan are compared on.

Both the in-process job's bag and a node graph's recording carry ``/contact/wrench`` (the contact
wrench on the tool, frame ``tcp``) and ``/grinding/progress`` (``[pass_index, arc_length_m,
stamp_s]``, docs/compare.md). :func:`pass_force_means` takes each pass's window from the bag's own
progress samples and averages the force along the tool's pressing axis over it. With the plan's
timing (:func:`plan_pass_timing`) the window is the plan's pass segment, placed on the bag's clock
by the progress samples (each sample's time less the time the plan reaches its arc length, the
median over the pass): a publisher or recorder that lost samples under load (the executive's timer
starved: 101 of 139 samples, the last 90 ms of the pass gone) then still gives the whole pass,
where first-to-last sample cut off its zero-force end and read 7 % high. Without it, the window is
first to last sample. The mean is by default ``-F_z`` in ``tcp`` (a ball's or a pad's z points into the
surface; with lead and tilt 0 it is the surface normal); a wheel or a disc presses along another
axis of the tcp, each pass's from the plan (:func:`plan_pressing_axes`). The same code reads both
bags, so the comparison is like with like.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.planning.trajectory import full_force_knots
from robot_grinding_sim.core.record.bag import read_progress, read_wrench

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class PassForce:
    """One pass: index, window (s, the bag's clock), mean force along the pressing axis (N), samples."""

    index: int
    t0: float
    t1: float
    mean_n: float
    samples: int


def plan_pass_timing(plan: Mapping[str, Any]) -> dict[int, tuple[FloatArray, FloatArray]]:
    """Per pass of a plan.json (its parsed dict) with a trajectory: the pass segment's knot times
    (K,) s from the trajectory's start and arc lengths (K,) m along the pass, what the executive's
    progress (``[pass_index, arc_length_m, stamp_s]``) is interpolated from.

    Raises:
        InputError: the plan has no trajectory, or its pass segments are malformed.
    """
    traj = plan.get("trajectory") or {}
    try:
        times = np.asarray(traj["times"], dtype=float)
        arc = np.asarray(traj["arc_length"], dtype=float)
        out = {}
        for seg in traj["segments"]:
            if seg["kind"] == "pass":
                a, b = int(seg["start"]), int(seg["stop"])
                out[int(seg["pass_index"])] = (times[a:b], arc[a:b])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"plan trajectory: no pass timing ({type(exc).__name__}: {exc})") from None
    if not out or any(len(t) < 2 or not (np.isfinite(t).all() and np.isfinite(s).all()) for t, s in out.values()):
        raise InputError("plan trajectory: no pass segment with two finite knots")
    return out


def _placed_window(t: FloatArray, arc: FloatArray, timing: tuple[FloatArray, FloatArray],
                   lead_in: float = 0.0) -> tuple[float, float] | None:
    """The plan's pass window (its first and last knot) on a bag's clock: progress samples at times
    ``t`` (M,) s with arc lengths ``arc`` (M,) m, each less the plan's time at that arc, median over
    the samples where the arc moves (inside the pass's arc range: at its ends the tool is at rest and
    the arc does not say when). ``lead_in`` > 0 (m): from the first to the last knot at least that far
    along the arc from both ends (the pass at full force, between its lead-in and lead-out, as
    ``Trajectory.pass_windows``). None when no sample is inside."""
    tau, s = timing
    lo, hi = float(s[0]), float(s[-1])
    tol = 1e-6 * max(hi - lo, 1e-9)
    moving = np.r_[True, np.diff(s) > tol]  # the first knot of each run of equal arcs: tau(arc) single-valued
    inside = (arc > lo + tol) & (arc < hi - tol)
    if not inside.any() or moving.sum() < 2:
        return None
    offset = float(np.median(t[inside] - np.interp(arc[inside], s[moving], tau[moving])))
    a, b = full_force_knots(s, lead_in)
    return offset + float(tau[a]), offset + float(tau[b])


def pass_force_means(bag: str | os.PathLike[str], wrench_topic: str = "/contact/wrench",
                     progress_topic: str = "/grinding/progress",
                     axes: Mapping[int, Any] | None = None,
                     timing: Mapping[int, tuple[FloatArray, FloatArray]] | None = None,
                     lead_in: float = 0.0) -> list[PassForce]:
    """Mean force along the tool's pressing axis over every pass of the bag, in pass order: the mean
    of -F . a, a the pass's axis in ``axes`` (pass index -> unit (3,) in the wrench's frame, tcp,
    pointing into the surface: :func:`plan_pressing_axes`); None: tcp z for every pass (-F_z).
    ``timing``: the plan's pass segments (:func:`plan_pass_timing`): each window is the pass's
    segment placed by the bag's progress samples; None (or a pass without a sample inside its arc
    range): first to last progress sample of the pass. ``lead_in`` (m, the plan's ``process.lead_in``;
    with ``timing``): only the pass at full force, between its lead-in and lead-out, the window the
    in-process job's per-pass table and the force-target optimisation average over.

    Raises:
        InputError: the bag lacks a topic, a pass has no wrench sample in its window or no axis.
    """
    w = read_wrench(bag, wrench_topic)
    p = read_progress(bag, progress_topic)
    out = []
    for idx in sorted({int(i) for i in p.pass_index if i >= 0}):
        mine = p.pass_index == idx
        tp = p.t[mine]
        t0, t1 = float(tp.min()), float(tp.max())
        if timing is not None and idx in timing:
            placed = _placed_window(tp, p.arc_length[mine], timing[idx], lead_in)
            if placed is not None:
                t0, t1 = placed
        sel = (w.t >= t0) & (w.t <= t1)
        if not sel.any():
            raise InputError(f"{bag}: no {wrench_topic} sample inside pass {idx} ({t0:.3f} .. {t1:.3f} s)")
        if axes is not None and idx not in axes:
            raise InputError(f"{bag}: pass {idx} has no pressing axis (the plan has passes {sorted(axes)})")
        a = np.array([0.0, 0.0, 1.0]) if axes is None else np.asarray(axes[idx], dtype=float)
        out.append(PassForce(idx, t0, t1, float(-(w.force[sel] @ a).mean()), int(sel.sum())))
    return out


def plan_pressing_axes(plan: Mapping[str, Any]) -> dict[int, FloatArray]:
    """Per pass of a plan.json (its parsed dict): the direction (3,) in the tcp frame that points into
    the surface, the waypoints' inward normal -n turned into the tcp's axes (R^T (-n), R the
    waypoint's tcp orientation, both in the part frame), averaged over the pass and normalised. The
    ball's and the pad's tcp z; a wheel presses across its axis, on the side the planner turned it
    to (a symmetric tool keeps the previous pass's roll: half a turn about its axis on the way back).

    Raises:
        InputError: a pass without waypoints, or with normals or orientations that are not finite.
    """
    from scipy.spatial.transform import Rotation

    out: dict[int, FloatArray] = {}
    for ps in plan.get("passes", []):
        wps = ps.get("waypoints") or []
        try:
            n = np.array([w["normal"] for w in wps], dtype=float).reshape(-1, 3)
            quat = np.array([w["tcp"]["orientation"] for w in wps], dtype=float).reshape(-1, 4)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"plan pass {ps.get('index')}: waypoints without normal and tcp orientation "
                             f"({exc})") from None
        if len(n) == 0 or not (np.isfinite(n).all() and np.isfinite(quat).all()):
            raise InputError(f"plan pass {ps.get('index')}: no finite waypoint normals and tcp orientations")
        a = np.einsum("kji,kj->i", Rotation.from_quat(quat).as_matrix(), -n / np.linalg.norm(n, axis=1)[:, None])
        out[int(ps["index"])] = a / np.linalg.norm(a)
    return out


def compare_pass_forces(reference: list[PassForce], other: list[PassForce]) -> list[dict[str, float]]:
    """Per pass: both means and ``relative_difference`` = (other - reference) / reference."""
    by_index = {p.index: p for p in other}
    rows = []
    for r in reference:
        o = by_index.get(r.index)
        if o is None:
            raise InputError(f"pass {r.index} is missing from the second run")
        rows.append({"pass": r.index, "inprocess_mean_n": r.mean_n, "graph_mean_n": o.mean_n,
                     "relative_difference": (o.mean_n - r.mean_n) / r.mean_n if r.mean_n else float(np.nan),
                     "inprocess_samples": r.samples, "graph_samples": o.samples})
    return rows

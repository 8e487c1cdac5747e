"""Per-pass contact force read back from a bag: what two runs of one plan are compared on.

Both the in-process job's bag and a node graph's recording carry ``/contact/wrench`` (the contact
wrench on the tool, frame ``tcp``) and ``/grinding/progress`` (``[pass_index, arc_length_m,
stamp_s]``, docs/compare.md). :func:`pass_force_means` takes each pass's window from the bag's own
progress samples (first to last sample of that pass) and averages the force along the tool's
pressing axis over it: by default ``-F_z`` in ``tcp`` (a ball's or a pad's z points into the
surface; with lead and tilt 0 it is the surface normal); a wheel or a disc presses along another
axis of the tcp (:meth:`~robot_grinding_sim.core.geometry.tools.Tool.pressing_axis`). The same code
reads both bags, so the comparison is like with like.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import read_progress, read_wrench


@dataclass(frozen=True)
class PassForce:
    """One pass: index, window (s, the bag's clock), mean force along the pressing axis (N), samples."""

    index: int
    t0: float
    t1: float
    mean_n: float
    samples: int


def pass_force_means(bag: str | os.PathLike[str], wrench_topic: str = "/contact/wrench",
                     progress_topic: str = "/grinding/progress", axis: Any = (0.0, 0.0, 1.0)) -> list[PassForce]:
    """Mean force along the tool's pressing ``axis`` (3,) (a unit vector in the wrench's frame, tcp,
    pointing into the surface: the mean of -F . axis) over every pass of the bag, in pass order.

    Raises:
        InputError: the bag lacks a topic, a pass has no wrench sample in its window, or the axis is
            not a unit vector.
    """
    a = np.asarray(axis, dtype=float).reshape(-1)
    if a.shape != (3,) or not abs(float(np.linalg.norm(a)) - 1.0) < 1e-6:
        raise InputError(f"pressing axis {a.tolist()} is not a unit 3-vector")
    w = read_wrench(bag, wrench_topic)
    p = read_progress(bag, progress_topic)
    out = []
    for idx in sorted({int(i) for i in p.pass_index if i >= 0}):
        tp = p.t[p.pass_index == idx]
        t0, t1 = float(tp.min()), float(tp.max())
        sel = (w.t >= t0) & (w.t <= t1)
        if not sel.any():
            raise InputError(f"{bag}: no {wrench_topic} sample inside pass {idx} ({t0:.3f} .. {t1:.3f} s)")
        out.append(PassForce(idx, t0, t1, float(-(w.force[sel] @ a).mean()), int(sel.sum())))
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

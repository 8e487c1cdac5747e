"""Each pass's force window when progress samples are lost (core/record/pass_forces.py).

The executive publishes ``[pass_index, arc_length_m, stamp_s]`` on a timer; on a loaded machine
its timer is starved and whole stretches of samples never exist (the 24-pass demo through the graph
at load 9: pass 19 had 101 of 139 samples, the last 90 ms gone, and its first-to-last window read
6.9 % high). The plan says when each pass runs and how far along it the tool is at each moment, so
the window is the plan's pass segment placed on the bag's clock by whatever samples arrived.

Checked on a pass built here analytically: the arc length follows an accelerate-cruise-decelerate
profile, the force is zero while the tool runs up and down at the ends and F inside, so the exact
window mean is known in closed form. The bag readers are replaced by these series.
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.record import pass_forces as pf
from robot_grinding_sim.core.record.bag import ProgressSeries, WrenchSeries

T_PASS, T_RAMP, V, F, T_ON = 1.4, 0.2, 0.025, 4.0, 0.15  # s, s, m/s, N, s without force at each end


def arc_of(tau: np.ndarray) -> np.ndarray:
    """Arc length (m) of the trapezoidal speed profile at pass times ``tau`` (s)."""
    a = V / T_RAMP
    tau = np.clip(tau, 0.0, T_PASS)
    up = 0.5 * a * np.minimum(tau, T_RAMP) ** 2
    mid = V * np.clip(tau - T_RAMP, 0.0, T_PASS - 2 * T_RAMP)
    down_t = np.clip(tau - (T_PASS - T_RAMP), 0.0, T_RAMP)
    down = V * down_t - 0.5 * a * down_t**2
    return up + mid + down


def series(offset: float, keep) -> tuple[WrenchSeries, ProgressSeries, dict]:
    """Wrench at 1 kHz over the pass and a margin (force F between T_ON and T_PASS - T_ON), the
    executive's progress at 100 Hz where ``keep(tau)`` is true; the plan's timing at 50 knots."""
    t = np.arange(-0.3, T_PASS + 0.3, 1e-3) + offset
    tau = t - offset
    fz = np.where((tau >= T_ON) & (tau <= T_PASS - T_ON), -F, 0.0)
    force = np.column_stack([np.zeros_like(t), np.zeros_like(t), fz])
    w = WrenchSeries(t, force, np.zeros_like(force), "tcp", t, "bag", "/contact/wrench", "WrenchStamped")
    tp = np.arange(0.0, T_PASS, 0.01)
    tp = tp[keep(tp)]
    p = ProgressSeries(tp + offset, np.zeros(len(tp), dtype=int), arc_of(tp), "bag", "/grinding/progress")
    knots = np.linspace(0.0, T_PASS, 50)
    return w, p, {0: (knots + 7.0, arc_of(knots))}  # the plan's clock starts elsewhere: only the offset is found


EXACT = F * (T_PASS - 2 * T_ON) / T_PASS  # the mean over the whole pass window


@pytest.mark.parametrize("lost", ["none", "the last 30 % and a gap", "the first 20 %", "every other"])
def test_the_window_is_the_plans_pass_whatever_samples_were_lost(monkeypatch, lost: str) -> None:
    keep = {"none": lambda tp: np.ones(len(tp), bool),
            "the last 30 % and a gap": lambda tp: (tp < 0.7 * T_PASS) & ~((tp > 0.3) & (tp < 0.45)),
            "the first 20 %": lambda tp: tp > 0.2 * T_PASS,
            "every other": lambda tp: np.arange(len(tp)) % 2 == 0}[lost]
    w, p, timing = series(123.456, keep)
    monkeypatch.setattr(pf, "read_wrench", lambda bag, topic: w)
    monkeypatch.setattr(pf, "read_progress", lambda bag, topic: p)
    (got,) = pf.pass_force_means("bag", timing=timing)
    assert got.mean_n == pytest.approx(EXACT, rel=2e-3)
    assert got.t0 == pytest.approx(123.456, abs=2e-3) and got.t1 == pytest.approx(123.456 + T_PASS, abs=2e-3)
    if lost != "none" and lost != "every other":  # first to last sample: the lost end's zero force is cut off
        (plain,) = pf.pass_force_means("bag")
        assert abs(plain.mean_n - EXACT) > 0.02 * EXACT


def test_plan_pass_timing_reads_the_pass_segments_and_refuses_a_plan_without_them() -> None:
    plan = {"trajectory": {"times": [0.0, 1.0, 2.0, 3.0, 4.0], "arc_length": [0.0, 0.0, 0.01, 0.02, 0.0],
                           "segments": [{"kind": "approach", "pass_index": 0, "start": 0, "stop": 2},
                                        {"kind": "pass", "pass_index": 0, "start": 1, "stop": 4},
                                        {"kind": "retreat", "pass_index": 0, "start": 3, "stop": 5}]}}
    (tau, arc), = pf.plan_pass_timing(plan).values()
    assert tau.tolist() == [1.0, 2.0, 3.0] and arc.tolist() == [0.0, 0.01, 0.02]
    with pytest.raises(pf.InputError, match="no pass timing"):
        pf.plan_pass_timing({"passes": []})


def test_the_full_force_window_leaves_out_the_lead_in_and_lead_out(monkeypatch) -> None:
    """With ``lead_in`` (the plan's process.lead_in, m) the window is the pass between its lead-in and
    lead-out (the knots at least that far from both ends of the pass's arc, as the in-process job's
    table averages: Trajectory.pass_windows), placed the same way: here the force is F over the whole
    of it, exactly, also with samples lost; without it the ends' zero force is in the mean."""
    lead = float(arc_of(np.array([T_ON]))[0])
    w, p, timing = series(123.456, lambda tp: tp < 0.7 * T_PASS)
    monkeypatch.setattr(pf, "read_wrench", lambda bag, topic: w)
    monkeypatch.setattr(pf, "read_progress", lambda bag, topic: p)
    (got,) = pf.pass_force_means("bag", timing=timing, lead_in=lead)
    assert got.mean_n == pytest.approx(F, rel=1e-12)
    knots = np.linspace(0.0, T_PASS, 50)
    inside = knots[(arc_of(knots) >= lead) & (arc_of(knots) <= arc_of(knots).max() - lead)]
    assert got.t0 == pytest.approx(123.456 + inside[0], abs=2e-3)
    assert got.t1 == pytest.approx(123.456 + inside[-1], abs=2e-3)
    (whole,) = pf.pass_force_means("bag", timing=timing)
    assert whole.mean_n == pytest.approx(EXACT, rel=2e-3) and EXACT < 0.9 * F

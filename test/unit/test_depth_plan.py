"""The depth planner (core.planning.depth) against closed forms.

- The groove of one straight pass of a ball at constant force (Hertz pressure over the disc of
  radius a): without spindle ``h(y) = k_p p0 (pi/2)(a^2 - y^2) / a`` (the parabola of
  docs/contact.md); under the spindle's speed alone ``h(y) = (k_p p0 w / v_f) 2 s^2 J(s/a)``,
  ``s^2 = a^2 - y^2``, J by complete elliptic integrals (scipy); its volume per length
  ``k_p F v_bar / v_f`` with ``v_bar = 3 pi w a / 16``.
- Shifted grooves add up by Poisson's summation: ``S(y) = (1/s) sum_m H(2 pi m / s) exp(i 2 pi m y / s)``
  with H the groove's Fourier transform, for the parabola ``4 c (sin ka - ka cos ka) / k^3``: the
  mean ``A / s`` and every harmonic of the summed grooves are known without summing them.
- The plan's feed gives the target depth as the mean of the summed grooves; limits move the force,
  add layers or are named.
- The uniformity figures on a map made of the closed-form grooves: all of the region in band, the
  end ratio 1; a spot of 2.8 x the depth at a pass end (the gouge of a tool at rest) is found.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ellipe, ellipk

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.planning.depth import (
    BallFootprint,
    DepthLimits,
    PassLine,
    choose_stepover,
    groove_of_rate,
    groove_volume,
    plan_depth,
    ripple,
    summed_grooves,
    uniformity,
)
from robot_grinding_sim.core.planning.trajectory import lead_lift

R, K, F, KP = 0.02, 1e5, 5.0, 9.5e-12
W = 10000 * 2 * math.pi / 60
A = math.sqrt(2 * R * F / K)  # 1.41 mm
P0 = 3 * F / (2 * math.pi * A * A)


def test_groove_without_spindle_is_the_parabola() -> None:
    fp = BallFootprint(R, K, 1.0, 0.0, KP)
    y = np.linspace(-A, A, 41)
    ref = KP * P0 * (math.pi / 2) * (A * A - y * y) / A  # h = (k_p / v_f) integral p v_f dx
    np.testing.assert_allclose(fp.groove(y, F, 0.01), ref, rtol=1e-9, atol=1e-18)


def test_groove_under_the_spindle_alone_matches_the_elliptic_closed_form() -> None:
    feed = 1e-9  # the feed's share of the sliding speed vanishes; h v_f is the integral of p w r
    fp = BallFootprint(R, K, 1.0, W, KP)
    y = np.linspace(-0.999 * A, 0.999 * A, 60)  # not 0: J(1) is the limit there
    s2 = A * A - y * y
    m = s2 / (A * A)  # k^2
    J = ((2 * m - 1) * ellipe(m) + (1 - m) * ellipk(m)) / (3 * m)
    ref = KP * P0 * W * 2 * s2 * J
    np.testing.assert_allclose(fp.groove(y, F, feed) * feed, ref, rtol=1e-6)
    # the centre line: k_p F w / (pi v_f), and the deepest point 0.417 a off it, 16 % deeper
    assert fp.groove(np.array([0.0]), F, feed)[0] * feed == pytest.approx(KP * F * W / math.pi, rel=1e-6)


def test_groove_volume_is_preston_with_the_mean_sliding_speed() -> None:
    fp = BallFootprint(R, K, 1.0, W, KP)
    v = 0.01
    # v_bar = 3 pi w a / 16 for the spinning Hertz patch (the feed adds a few 1e-5)
    assert groove_volume(fp, F, v) == pytest.approx(KP * F * (3 * math.pi * W * A / 16) / v, rel=2e-4)


def test_groove_of_a_rate_map_is_the_ball_groove_when_given_the_balls_rate() -> None:
    """The plug-in for other tools: a depth-rate map integrated along the travel."""
    fp = BallFootprint(R, K, 1.0, 0.0, KP)
    v = 0.01

    def rate(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # k_p p v, no spindle
        r2 = x * x + y * y
        return KP * P0 * np.sqrt(np.clip(1 - r2 / (A * A), 0, None)) * v

    y = np.linspace(-0.9 * A, 0.9 * A, 19)
    ref = fp.groove(y, F, v)
    np.testing.assert_allclose(groove_of_rate(rate, A, y, v), ref, rtol=0, atol=1e-3 * ref.max())


def parabola_fourier(k: np.ndarray, c: float, a: float) -> np.ndarray:
    """Fourier transform of c (a^2 - y^2) on |y| < a."""
    return 4 * c * (np.sin(k * a) - k * a * np.cos(k * a)) / k**3


@pytest.mark.parametrize("stepover", [0.3e-3, 0.55e-3, 0.9e-3, 1.7e-3])
def test_summed_grooves_match_poisson_summation(stepover: float) -> None:
    c = 1e-6 / (A * A)
    y = np.linspace(-A, A, 4001)
    h = c * (A * A - y * y)
    yy, S = summed_grooves(y, h, stepover)
    m = np.arange(1, 400)
    k = 2 * math.pi * m / stepover
    ref = (4 * c * A**3 / 3) / stepover + (2 / stepover) * (parabola_fourier(k, c, A)[None, :]
                                                            * np.cos(np.outer(yy, k))).sum(axis=1)
    assert np.max(np.abs(S - ref)) <= 2e-3 * ref.mean()
    assert S.mean() == pytest.approx(4 * c * A**3 / 3 / stepover, rel=2e-3)


def test_the_chosen_stepover_keeps_the_ripple_for_every_smaller_one() -> None:
    fp = BallFootprint(R, K, 1.0, -W, KP)
    y = np.linspace(-A, A, 801)
    h = fp.groove(y, F, 0.01)
    s = choose_stepover(y, h, 0.02)
    assert 0.1 * A < s < 2 * A
    for t in np.linspace(0.05 * A, s, 25):
        assert ripple(summed_grooves(y, h, t)[1]) <= 0.02 + 1e-12
    assert ripple(summed_grooves(y, h, s * 1.01)[1]) > 0.02  # the next one up is over


def test_the_plan_removes_the_target_depth_on_average() -> None:
    fp = BallFootprint(R, K, 1.0, -W, KP)
    dp = plan_depth(fp, 5e-6, F)
    assert dp.limiting is None and dp.layers == 1 and dp.force == F
    y = np.linspace(-dp.half_width, dp.half_width, 2001)
    _, S = summed_grooves(y, fp.groove(y, F, dp.feed), dp.stepover)
    assert S.mean() == pytest.approx(5e-6, rel=2e-3)
    assert np.all(np.abs(S - 5e-6) <= 0.03 * 5e-6)


def test_limits_move_the_force_then_add_layers_then_are_named() -> None:
    fp = BallFootprint(R, K, 1.0, -W, KP)
    # the feed for 5 um at 5 N is about 24 mm/s: capped at 10 mm/s the force comes down
    dp = plan_depth(fp, 5e-6, F, DepthLimits(feed_max=0.01))
    assert dp.force < F and dp.feed == pytest.approx(0.01, rel=1e-3) and dp.limiting is None
    # a slowest feed of 0.1 m/s with the force held: layers, each D / n at n x the feed of one
    dp = plan_depth(fp, 5e-6, F, DepthLimits(feed_min=0.1, feed_max=1.0), force_fixed=True)
    assert dp.layers >= 4 and dp.feed >= 0.1 and dp.predicted_depth == pytest.approx(5e-6, rel=1e-3)
    # the force held, the fastest feed too slow to remove as little as asked: named
    dp = plan_depth(fp, 1e-8, F, DepthLimits(feed_max=0.05), force_fixed=True)
    assert dp.limiting is not None and "feed" in dp.limiting
    dp = plan_depth(fp, 5e-6, 60.0, DepthLimits(force_max=50.0), force_fixed=True)
    assert "force" in (dp.limiting or "")
    with pytest.raises(InputError, match="target-depth"):
        plan_depth(fp, -1.0, F)
    with pytest.raises(InputError, match="force range"):
        plan_depth(fp, 5e-6, F, DepthLimits(force_min=5.0, force_max=1.0))


def test_lead_lift_engages_while_moving() -> None:
    s = np.linspace(0.0, 0.03, 3001)
    lift = lead_lift(s, 0.006, 5e-5, 5e-4)
    assert lift[0] == pytest.approx(5.5e-4) and lift[-1] == pytest.approx(5.5e-4)
    mid = (s >= 0.006) & (s <= 0.024)
    assert np.all(lift[mid] == 0.0)
    first = s <= 0.006
    assert np.all(np.diff(lift[first]) <= 1e-15)  # down monotonically, no step
    # no step: at 10 um the lift changes by at most its largest slope, 1.5 gap / (lead / 4) + 1.5 pen / (3 lead / 4)
    assert np.max(np.abs(np.diff(lift))) <= 1e-5 * (1.5 * 5e-4 / 0.0015 + 1.5 * 5e-5 / 0.0045) * 1.001
    # the penetration ramps over the last three quarters of the lead-in: touching at a quarter of it
    assert lead_lift(np.array([0.0, 0.0015, 0.03]), 0.006, 5e-5, 5e-4)[1] == pytest.approx(5e-5, rel=1e-9)


def flat_map(n_rows: int, stepover: float, length: float, gouge: float = 0.0, spacing: float = 1e-4
             ) -> tuple[np.ndarray, np.ndarray, list[PassLine]]:
    """A plane map of parallel passes along x (rows along y), each the parabola groove whose sum
    averages 5 um, ramped over the lead-in as a force ramp would (the depth proportional to it);
    ``gouge`` x 5 um added at the end of the middle pass."""
    c_groove = 5e-6 * stepover / (4 * A**3 / 3)
    xs = np.arange(-0.005, length + 0.005, spacing)
    ys = np.arange(-0.004, (n_rows - 1) * stepover + 0.004, spacing)
    Y, X = np.meshgrid(ys, xs, indexing="ij")
    depth = np.zeros_like(X)
    lead = 4 * A
    ramp = np.clip(X / lead, 0, 1) * np.clip((length - X) / lead, 0, 1)
    passes = []
    for r in range(n_rows):
        y0 = r * stepover
        depth += c_groove * np.clip(A * A - (Y - y0) ** 2, 0, None) * ramp
        pts = np.column_stack([np.linspace(0, length, 50), np.full(50, y0), np.zeros(50)])
        passes.append(PassLine(r, r, pts, np.linspace(0, length, 50)))
    if gouge:
        mid = (n_rows // 2) * stepover
        depth += gouge * 5e-6 * np.exp(-((X - length) ** 2 + (Y - mid) ** 2) / (0.5e-3) ** 2)
    P = np.column_stack([X.ravel(), Y.ravel(), np.zeros(X.size)])
    return P, depth.ravel(), passes


def test_uniformity_of_even_grooves_and_of_a_gouge() -> None:
    s = 0.4e-3
    P, d, passes = flat_map(20, s, 0.03)
    fig = uniformity(P, d, np.ones(len(d), bool), passes, 5e-6, 0.1, s, A, 4 * A)
    assert fig["within_band"] == 1.0 and fig["rows_in_region"] == 20 - 2 * math.ceil(A / s)
    assert fig["median_depth_m"] == pytest.approx(5e-6, rel=0.02)
    assert fig["end_of_pass_ratio"] == pytest.approx(1.0, abs=0.05)
    # the deepest and shallowest points lie in the region, with their pass and arc length
    for key in ("deepest", "shallowest"):
        assert 4 * A + A - 1e-9 <= fig[key]["arc_m"] <= 0.03 - 5 * A + 1e-9
    P, d, passes = flat_map(20, s, 0.03, gouge=2.8)
    fig = uniformity(P, d, np.ones(len(d), bool), passes, 5e-6, 0.1, s, A, 4 * A)
    assert fig["end_of_pass_ratio"] > 2.0 and fig["end_of_pass"]["pass"] == 10
    assert fig["within_band"] == 1.0  # the gouge is at the end, not in the region


def test_too_few_passes_leave_no_region() -> None:
    P, d, passes = flat_map(3, 1e-3, 0.03)
    fig = uniformity(P, d, np.ones(len(d), bool), passes, 5e-6, 0.1, 1e-3, A, 4 * A)
    assert fig["within_band"] == 0.0 and fig["region_nodes"] == 0 and "note" in fig


def parabola_groove(y: np.ndarray, kp: float) -> np.ndarray:
    """The closed-form groove of a ball without spindle (written here, not by the package)."""
    return kp * P0 * (math.pi / 2) * np.clip(A * A - y * y, 0, None) / A


def test_preston_fit_recovers_the_coefficient_of_a_closed_form_groove() -> None:
    from robot_grinding_sim.core.planning.depth import fit_preston

    rng = np.random.default_rng(4)
    kp_true, y0 = 7.3e-12, 0.21e-3
    y = np.linspace(-3e-3, 3e-3, 121)
    h = parabola_groove(y - y0, kp_true)
    noisy = h + rng.normal(0.0, 0.01 * h.max(), len(y))
    fit = fit_preston(y, noisy, BallFootprint(R, K, 1.0, 0.0, 1.0), F, 0.01)
    assert fit.preston_coefficient == pytest.approx(kp_true, rel=0.01)
    assert fit.offset == pytest.approx(y0, abs=0.02e-3)
    assert fit.rms_residual == pytest.approx(0.01 * h.max(), rel=0.2)
    # the error bar covers the truth (at 3 sigma) and is about 1 % noise / sqrt(points on the groove)
    assert abs(fit.preston_coefficient - kp_true) <= 3 * fit.standard_error
    assert 1e-4 < fit.standard_error / kp_true < 1e-2
    with pytest.raises(InputError, match="no depth above 0"):
        fit_preston(y, -h, BallFootprint(R, K, 1.0, 0.0, 1.0), F, 0.01)


def test_calibrate_removal_command_reads_a_profile_in_um_and_writes_the_parameter(tmp_path) -> None:
    from cli_runner import run

    from robot_grinding_sim.core.parameters import load_params_file

    y = np.linspace(-3e-3, 3e-3, 61)
    h = parabola_groove(y, 6.1e-12)
    (tmp_path / "groove.csv").write_text("offset_mm,depth_um\n" + "\n".join(f"{a * 1e3:.6f},{b * 1e6:.6f}"
                                                                            for a, b in zip(y, h, strict=True)))
    out = run("calibrate-removal", "groove.csv", "--offset-unit", "mm", "--depth-unit", "um", "--tool-radius",
              str(R), "--set", "tool.spindle_speed=0", "--force", str(F), "--feed", "0.01", "--out", "kp.yaml",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "k_p = 6.1e-12" in out.stdout
    assert load_params_file(tmp_path / "kp.yaml")["removal.preston_coefficient"] == pytest.approx(6.1e-12, rel=1e-4)
    bad = run("calibrate-removal", "nothere.csv", "--tool-radius", "0.02", cwd=tmp_path)
    assert bad.returncode != 0 and "nothere.csv" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_tilted_spindle_axis_removes_by_its_sliding_speed() -> None:
    """A tool axis turned off the normal: the volume per length is k_p F v_bar / v_f with v_bar the
    Hertz-weighted mean of |tangential part of v_f e_x + w x (p - c)| over the patch (scipy's dblquad
    here), and the groove's centre fills in (the abrasive there slides at w R sin(angle))."""
    from scipy.integrate import dblquad

    from robot_grinding_sim.core.planning.depth import tool_axis

    tilt, lead, v = math.radians(10.0), math.radians(5.0), 0.01
    axis = np.array(tool_axis(lead, tilt))
    assert np.linalg.norm(axis) == pytest.approx(1.0) and axis[2] < -0.9  # into the part
    assert tool_axis(0.0, 0.0) == pytest.approx((0.0, 0.0, -1.0))
    fp = BallFootprint(R, K, 1.0, W, KP, "hertz", tuple(axis))
    w = W * axis
    c = np.array([0.0, 0.0, R - F / K])

    def integrand(r: float, phi: float) -> float:
        p = np.array([r * math.cos(phi), r * math.sin(phi), 0.0])
        vel = np.array([v, 0.0, 0.0]) + np.cross(w, p - c)
        return P0 * math.sqrt(max(1 - r * r / (A * A), 0.0)) * math.hypot(vel[0], vel[1]) * r

    v_bar = dblquad(integrand, 0.0, 2 * math.pi, 0.0, A, epsabs=0, epsrel=1e-7)[0] / F
    assert groove_volume(fp, F, v) == pytest.approx(KP * F * v_bar / v, rel=5e-4)
    upright = BallFootprint(R, K, 1.0, W, KP, "hertz", (0.0, 0.0, -1.0))
    centre = np.array([0.0])
    assert fp.groove(centre, F, v)[0] > 3 * upright.groove(centre, F, v)[0]
    # the upright tool about -n is the one about +n turning the other way
    y = np.linspace(-A, A, 21)
    np.testing.assert_allclose(upright.groove(y, F, v), BallFootprint(R, K, 1.0, -W, KP).groove(y, F, v), rtol=1e-12)


def test_the_cycle_time_limit_is_named_when_it_is_over() -> None:
    from robot_grinding_sim.core.planning.depth import check_cycle_time

    fp = BallFootprint(R, K, 1.0, -W, KP)
    dp = plan_depth(fp, 5e-6, F)
    t = check_cycle_time(dp, 1.0, 30, 2.5, math.inf)
    assert t == pytest.approx(1.0 / dp.feed + 75.0) and dp.limiting is None
    check_cycle_time(dp, 1.0, 30, 2.5, 60.0)
    assert dp.limiting is not None and "cycle time" in dp.limiting and "60 s" in dp.limiting


def test_plan_without_a_robot_takes_the_depth_plans_stepover_and_feed(tmp_path) -> None:
    import json

    from cli_runner import run

    out = run("plan", "flat_plate", "--robot", "none", "--target-depth", "5e-6", "--max-passes", "3",
              "--pass-length", "0.02", "--out", "plan.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "plan.json").read_text())
    rp = data["removal_plan"]
    assert rp["target_depth"] == 5e-6 and rp["limiting"] is None
    assert data["parameters"]["passes"]["stepover"] == pytest.approx(rp["stepover"] / rp["layers"])
    assert data["parameters"]["tool"]["feed"] == pytest.approx(rp["feed"])
    assert "depth plan 5 um" in out.stdout

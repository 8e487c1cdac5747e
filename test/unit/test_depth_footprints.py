"""The depth planner's footprints of the tools with a patch (core.planning.depth.ToolFootprint: wheel,
pad, disc from the shipped URDFs) against closed forms and scipy quadrature written here, from the
geometry alone (not from Tool.penetration_at, which the footprint and the removal map share).

A straight pass at feed v_f and force F over a plane, Winkler pressure p = k_w d, Preston
``h(y) = (k_p / v_f) integral p |v| dx`` along the travel:

- wheel on its periphery (radius R, width L, spindle w about its axis across the feed): every point
  of the chord slides at |v_f +- w (R - d)| (the axis R - d above the plane), so across the width
  ``h = k_p |v_f +- w (R - d)| F / (v_f L)``, F = k_w L seg(R, d) (seg by quad of the chord's depth);
- pad flat on the plane (side a along the travel, b across): without spindle ``h = k_p F / b``; turned
  at w about its normal through its centre ``h(y) = (k_p F / (A v_f)) integral sqrt((v_f -+ w y)^2 +
  (w x)^2) dx`` over |x| < a / 2 (the closed form of that integral);
- disc on its face at angle a: the face under the plane is the segment h_s = d / sin a high; at a
  lateral offset y it reaches u(y) = sqrt(R^2 - y^2) - (R - h_s) beyond the chord, each point s beyond
  it s sin a deep and s cos a along the travel: without spindle ``h(y) = k_p k_w sin a cos a u^2 / 2``;
  with the spindle about the face normal, quad over s of k_w s sin a |v_f e_x + w n x rho| cos a ds,
  rho the point from the face's centre in the face plane.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad

from robot_grinding_sim.core.geometry.tools import cell_tool
from robot_grinding_sim.core.job.setup import load_robot_model
from robot_grinding_sim.core.planning.depth import groove_volume, plan_depth
from robot_grinding_sim.core.planning.footprints import ToolFootprint

URDF = Path(__file__).resolve().parents[2] / "urdf"
KP, F, V = 9.5e-12, 5.0, 0.01


def tool_of(name: str, shape: str, spacing: float, angle: float = 0.2):
    return cell_tool(load_robot_model(str(URDF / name), "tcp"), "tcp", "abrasive_head", shape, spacing, angle)


@pytest.fixture(scope="module")
def wheel():
    return tool_of("ur10e_flap_wheel.urdf", "wheel", 0.001)


@pytest.fixture(scope="module")
def pad():
    return tool_of("ur10e_sanding_pad.urdf", "pad", 0.0025)


def either(got: np.ndarray, refs: list[np.ndarray], rtol: float, atol: float) -> None:
    """got matches one of refs (the spindle's sense in F0 is the URDF's, not fixed here)."""
    errs = [float(np.max(np.abs(got - r) / np.abs(r))) - rtol for r in refs]
    assert min(errs) <= atol, errs


@pytest.mark.parametrize("w", [0.0, 300.0, 628.3])
def test_wheel_groove_is_flat_across_its_width_at_the_rim_speed(wheel, w: float) -> None:
    k_w = 2e8
    R, L = wheel.dims["radius"], wheel.dims["length"]
    fp = ToolFootprint(wheel, k_w, w, KP)
    d = fp.penetration(F)
    seg, _ = quad(lambda x: d - (R - math.sqrt(R * R - x * x)), -math.sqrt(2 * R * d - d * d),
                  math.sqrt(2 * R * d - d * d), epsabs=1e-16, epsrel=1e-12)
    assert k_w * L * seg == pytest.approx(F, rel=1e-9)  # the penetration holds F
    assert fp.half_width(F) == pytest.approx(L / 2, rel=6e-3)  # found on a grid: two cells of 1.2 x the span / 800
    y = np.linspace(-0.45 * L, 0.45 * L, 31)
    h = fp.groove(y, F, V)
    refs = [np.full_like(y, KP * abs(V + s * w * (R - d)) * F / (V * L)) for s in (1.0, -1.0)]
    either(h, refs, 2e-3, 0.0)
    assert np.all(fp.groove(np.array([-0.52 * L, 0.52 * L]), F, V) == 0.0)


@pytest.mark.parametrize("w", [0.0, 50.0])
def test_pad_groove_is_kp_F_over_its_width_and_the_turning_pads_closed_form(pad, w: float) -> None:
    k_w = 2e7
    a, b = sorted(pad.dims["size"])[1:]  # the shipped pad's face: 50 x 50 mm (square: along = across)
    fp = ToolFootprint(pad, k_w, w, KP)
    assert k_w * a * b * fp.penetration(F) == pytest.approx(F, rel=1e-9)
    y = np.linspace(-0.45 * b, 0.45 * b, 25)
    h = fp.groove(y, F, V)
    if w == 0.0:
        np.testing.assert_allclose(h, KP * F / b, rtol=3e-3)
        return

    def closed(yy: np.ndarray, sense: float) -> np.ndarray:
        c = np.abs(V - sense * w * yy)  # the speed on the line x = 0

        def prim(x: float) -> np.ndarray:  # integral of sqrt(c^2 + w^2 x^2) dx
            return 0.5 * x * np.sqrt(c * c + (w * x) ** 2) + c * c / (2 * w) * np.arcsinh(w * x / np.maximum(c, 1e-300))

        return KP * F / (a * b * V) * (prim(a / 2) - prim(-a / 2))

    either(h, [closed(y, 1.0), closed(y, -1.0)], 3e-3, 0.0)


def disc_reference(R: float, angle: float, d: float, k_w: float, w: float, sense: float, y: float) -> float:
    """h(y) of the disc by quad over the segment's depth along the face (module docstring)."""
    hs = d / math.sin(angle)
    u = math.sqrt(max(R * R - y * y, 0.0)) - (R - hs)
    if u <= 0:
        return 0.0
    n = np.array([-math.sin(angle), 0.0, math.cos(angle)])  # face normal into the part, F0
    e = np.array([math.cos(angle), 0.0, math.sin(angle)])  # from the centre toward the low rim, down
    lat = np.array([0.0, 1.0, 0.0])

    def integrand(s: float) -> float:
        rho = (R - hs + s) * e + y * lat  # from the face centre, s beyond the chord
        v = np.array([V, 0.0, 0.0]) + sense * w * np.cross(n, rho)
        return k_w * s * math.sin(angle) * math.hypot(v[0], v[1]) * math.cos(angle)

    val, _ = quad(integrand, 0.0, u, epsabs=1e-20, epsrel=1e-10)
    return KP / V * val


@pytest.mark.parametrize("angle, w", [(0.2, 0.0), (0.2, 837.8), (0.5, 300.0)])
def test_disc_groove_against_quadrature_over_its_segment(angle: float, w: float) -> None:
    k_w = 1e10
    disc = tool_of("ur10e_disc_grinder.urdf", "disc", 0.0005, angle)
    R = disc.dims["radius"]
    # the pressure steps from its largest to 0 at the rim: the trapezoid rule along the travel is off by
    # about half a sample there, and the patch near its ends across the travel is a fifth of its middle's
    fp = ToolFootprint(disc, k_w, w, KP, samples=1601)
    d = fp.penetration(F)
    hw = math.sqrt(R * R - (R - d / math.sin(angle)) ** 2)  # half the chord
    assert fp.half_width(F) == pytest.approx(hw, rel=6e-3)  # found on a grid: two cells of 1.2 x the span / 800
    y = np.linspace(-0.9 * hw, 0.9 * hw, 19)
    h = fp.groove(y, F, V)
    if w == 0.0:
        u = np.sqrt(R * R - y * y) - (R - d / math.sin(angle))
        np.testing.assert_allclose(h, KP * k_w * math.sin(angle) * math.cos(angle) * u * u / 2, rtol=5e-3)
        return
    refs = [np.array([disc_reference(R, angle, d, k_w, w, s, float(t)) for t in y]) for s in (1.0, -1.0)]
    either(h, refs, 5e-3, 0.0)


@pytest.mark.parametrize("which", ["wheel", "pad"])
def test_a_patch_tools_depth_plan_removes_the_target_on_average(which: str, wheel, pad) -> None:
    """The plan with a patch tool: mean of the summed grooves at its stepover and feed is D; the
    volume per length is Preston's k_p F v_bar / v_f (no spindle: v_bar = v_f, A = k_p F)."""
    tool, k_w = (wheel, 2e8) if which == "wheel" else (pad, 2e7)
    fp0 = ToolFootprint(tool, k_w, 0.0, KP)
    assert groove_volume(fp0, F, V) == pytest.approx(KP * F, rel=3e-3)
    fp = ToolFootprint(tool, k_w, 100.0 if which == "wheel" else 50.0, KP)  # the pad: a rotary polisher
    dp = plan_depth(fp, 5e-6, F, force_fixed=True)
    assert dp.limiting is None
    assert dp.depth_per_layer * dp.layers == pytest.approx(5e-6, rel=1e-3)
    assert groove_volume(fp, dp.force, dp.feed) / dp.stepover * dp.layers == pytest.approx(5e-6, rel=1e-3)
    assert dp.ripple <= 0.02 + 1e-9
    assert dp.half_length == pytest.approx(fp.half_length(dp.force))
    assert dp.lead_in == pytest.approx(4 * dp.half_length)


def test_a_pad_that_does_not_turn_names_the_layers_it_would_need(pad) -> None:
    """Sliding at the feed alone, each pass removes k_p F / W whatever the feed (24 nm at 5 N over
    passes 2 mm apart): 5 um would take thousands of layers; the plan names that limit."""
    dp = plan_depth(ToolFootprint(pad, 2e7, 0.0, KP), 5e-6, F, force_fixed=True)
    assert dp.limiting is not None and dp.limiting.startswith("layers: ") and "100 layers" in dp.limiting
    assert dp.layers == 100 and dp.feed >= 1e-3


def test_the_maps_check_takes_the_plans_groove_width(wheel) -> None:
    """depth_figures (the check simulate and the plan's prediction report) leaves out the rows within
    the plan's groove half-width of the region's edge (plan.json removal_plan ``half_width``) and
    the patch's reach along the travel (``half_length``) past the lead-in; before, it read keys the
    plan never writes (``half_width_m``) and took the ball's sqrt(2 R d) of the wheel's radius."""
    from types import SimpleNamespace

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.contact.preston import RemovalGrid
    from robot_grinding_sim.core.job.removal import depth_figures
    from robot_grinding_sim.core.planning.waypoints import Pass

    s, n, length, hw, hl = 1e-3, 40, 0.06, 0.0125, 0.002
    cell = CellConfig().replace(**{"removal.target_depth": 5e-6, "passes.stepover": s, "process.lead_in": 0.008})
    passes = []
    for k in range(n):
        x = np.linspace(0.0, length, 61)
        pts = np.column_stack([x, np.full_like(x, k * s), np.zeros_like(x)])
        passes.append(Pass(k, k, 0, pts, np.tile([0.0, 0.0, 1.0], (61, 1)), np.tile([1.0, 0.0, 0.0], (61, 1)), x,
                           np.zeros((61, 2)), np.zeros(61, dtype=np.int64)))
    plan = SimpleNamespace(passes=passes, removal_plan={"stepover": s, "half_width": hw, "half_length": hl})
    g = np.arange(-0.005, 0.065, 5e-4)
    X, Y = np.meshgrid(g, np.arange(-0.005, n * s + 0.005, 5e-4), indexing="ij")
    grid = RemovalGrid(np.column_stack([X.ravel(), Y.ravel(), np.zeros(X.size)]), np.full(X.size, 2.5e-7))
    grid.depth[:] = 5e-6
    setup = SimpleNamespace(cell=cell, plan=plan, X_BP=np.eye(4), tool=wheel, tool_radius=wheel.radius,
                            penetration=1e-4)
    fig = depth_figures(setup, grid)
    assert fig["rows_in_region"] == n - 2 * math.ceil(hw / s)  # 14 of 40
    along = grid.points[fig["in_region"], 0]
    assert along.min() >= 0.008 + hl - 1e-9 and along.max() <= length - 0.008 - hl + 1e-9
    assert along.min() < 0.008 + hl + 1e-3  # not the wheel's half width (12.5 mm) past the lead-in
    assert fig["within_band"] == 1.0


@pytest.mark.parametrize("angle", [0.2, 0.5])
def test_disc_patch_is_its_face_segment_seen_along_the_normal(angle: float) -> None:
    """The disc pressed d into a plane at angle a: its face under the plane is the segment h_s = d / sin a
    high; seen along the plane's normal each point s beyond the chord is s sin a deep and s cos a along
    the travel, so the patch reaches d cot a behind the low rim (the waypoint) and on the pass line the
    depth is d - |x| tan a. (Measured along the disc's axis the patch was 1 / cos^2 a longer: 4.1 % at
    0.2 rad.)"""
    disc = tool_of("ur10e_disc_grinder.urdf", "disc", 0.0005, angle)
    fp = ToolFootprint(disc, 1e10, 0.0, KP, samples=801)
    d = fp.penetration(F)
    length = d / math.tan(angle)
    x0, x1, _, _ = fp.extent(F)
    assert x1 <= 0.01 * length  # nothing ahead of the low rim (two grid cells of margin)
    assert fp.half_length(F) == pytest.approx(length, rel=6e-3)  # found on a grid: two cells of margin
    x = np.linspace(-1.2 * length, 0.0, 241)
    P = np.column_stack([x, np.zeros_like(x), np.zeros_like(x)])
    depth = disc.penetration_at(P, fp.pose(F), np.array([0.0, 0.0, -1.0]))
    np.testing.assert_allclose(depth, np.maximum(d - np.abs(x) * math.tan(angle), 0.0), rtol=0, atol=1e-3 * d)
    # and the Winkler pressure k_w times that depth holds F over the patch: the footprint's scale is k_w
    assert fp._scale(F) == pytest.approx(1e10, rel=5e-3)


def wheel_groove(y: np.ndarray, kp: float, k_w: float, R: float, L: float, w: float) -> np.ndarray:
    """The wheel's flat groove k_p |v_f + w (R - d)| F / (v_f L) over its width, d from F = k_w L seg(R, d)
    (the segment by quad, d by brentq)."""
    from scipy.optimize import brentq

    def seg(d: float) -> float:
        c = math.sqrt(2 * R * d - d * d)
        return quad(lambda x: d - (R - math.sqrt(R * R - x * x)), -c, c, epsabs=1e-16, epsrel=1e-12)[0]

    d = brentq(lambda d: k_w * L * seg(d) - F, 1e-9, R, xtol=1e-15)
    return np.where(np.abs(y) < L / 2, kp * abs(V + w * (R - d)) * F / (V * L), 0.0)


def disc_groove(y: np.ndarray, kp: float, k_w: float, R: float, angle: float, force: float = F) -> np.ndarray:
    """The disc's groove without spindle, k_p k_w sin a cos a u(y)^2 / 2 (module docstring), its rim's
    depth d from ``force`` = k_w sin a cos a integral u^2 / 2 dy (quad, brentq)."""
    from scipy.optimize import brentq

    def u(t: np.ndarray, d: float) -> np.ndarray:
        return np.maximum(np.sqrt(np.maximum(R * R - t * t, 0.0)) - (R - d / math.sin(angle)), 0.0)

    def holds(d: float) -> float:
        c = math.sqrt(R * R - (R - d / math.sin(angle)) ** 2)
        return k_w * math.sin(angle) * math.cos(angle) * quad(lambda t: float(u(np.array(t), d)) ** 2 / 2, -c, c,
                                                               epsabs=1e-18, epsrel=1e-12)[0]

    d = brentq(lambda d: holds(d) - force, 1e-9, 0.5 * R * math.sin(angle), xtol=1e-15)
    return kp * k_w * math.sin(angle) * math.cos(angle) * u(y, d) ** 2 / 2


@pytest.mark.parametrize("tool", ["flap_wheel", "sanding_pad", "disc_grinder"])
def test_calibrate_removal_recovers_kp_from_a_patch_tools_groove(tool: str, tmp_path: Path) -> None:
    """``grinding calibrate-removal`` with the wheel, the pad or the disc (config/tools/*.yaml): a groove
    computed here from the closed forms above (k_p = 7.3e-12, 1 % noise, 2.07 mm off centre, offsets in
    mm and depths in um as a profilometer gives them) gives back k_p within 1 % and three standard
    errors, and its centre within two samples. The wheel's and the pad's grooves are flat with sharp
    edges: a fit places an edge to within a sample, so their profiles are sampled at 0.25 % of the
    groove's width (at 1 % the wheel's k_p came out 1.05 % low). (It refused every tool but the ball:
    "no sphere collision geometry".)"""
    import yaml
    from cli_runner import run

    kp, y0 = 7.3e-12, 0.00207
    cfg = yaml.safe_load((URDF.parent / "config" / "tools" / f"{tool}.yaml").read_text())["/**"]["ros__parameters"]
    k_w = float(cfg["contact"]["stiffness"])
    urdf = URDF / cfg["robot"]["description_file"].rsplit("/", 1)[-1]
    extra: list[str] = []
    if tool == "flap_wheel":
        t = tool_of(urdf.name, "wheel", 0.001)
        R, L = t.dims["radius"], t.dims["length"]
        y = np.linspace(-0.8 * L, 0.8 * L, 641)
        h = wheel_groove(y, kp, k_w, R, L, float(cfg["tool"]["spindle_speed"]))
    elif tool == "sanding_pad":
        t = tool_of(urdf.name, "pad", 0.0025)
        b = sorted(t.dims["size"])[2]
        assert float(cfg["tool"].get("spindle_speed", 0.0)) == 0.0  # the shipped pad does not turn
        y = np.linspace(-0.8 * b, 0.8 * b, 641)
        h = np.where(np.abs(y) < b / 2, kp * F / b, 0.0)
    else:
        t = tool_of(urdf.name, "disc", 0.0005, float(cfg["tool"]["face_angle"]))
        hw = 0.012  # more than the patch's half width at 5 N (8.5 mm)
        y = np.linspace(-hw, hw, 121)
        h = disc_groove(y, kp, k_w, t.dims["radius"], float(cfg["tool"]["face_angle"]))
        extra = ["--set", "tool.spindle_speed=0"]
    h = h + 0.01 * h.max() * np.random.default_rng(3).standard_normal(len(y))
    (tmp_path / "groove.csv").write_text("offset_mm,depth_um\n" + "\n".join(
        f"{(a + y0) * 1e3:.6f},{b * 1e6:.6f}" for a, b in zip(y, h, strict=True)))
    config = URDF.parent / "config"
    out = run("calibrate-removal", "groove.csv", "--offset-unit", "mm", "--depth-unit", "um", "--params",
              str(config / "cell.yaml"), "--params", str(config / "tools" / f"{tool}.yaml"), "--force", str(F),
              "--feed", str(V), *extra, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import json

    fit = json.loads(out.stdout)
    print(f"{tool}: k_p {fit['preston_coefficient']:.5g} +- {fit['standard_error']:.2g} (true {kp:g}), "
          f"centre {fit['offset'] * 1e3:.3f} mm")
    assert fit["tool"] == t.shape
    assert fit["preston_coefficient"] == pytest.approx(kp, rel=0.01)
    assert abs(fit["preston_coefficient"] - kp) <= 3 * fit["standard_error"]
    assert fit["offset"] == pytest.approx(y0, abs=2 * (y[1] - y[0]))


@pytest.mark.parametrize("force", [0.05, 0.3])
def test_the_removal_map_of_a_disc_thinner_than_its_grid_is_the_closed_form_groove(force: float) -> None:
    """The disc at 0.2 rad swept along a plane at a force whose patch is shorter along the travel than
    the map's 0.3 mm nodes (0.05 N: 0.12 mm, 0.3 N: 0.24 mm: how each pass engages), one step every
    20 um, through :func:`~robot_grinding_sim.core.job.removal.accumulate_tool` (what the job's map,
    the graph's replay and the plan's prediction call): across the pass the map is :func:`disc_groove`
    (the closed form) within 10 % of its peak (8.9 % at both: the grid's rows along the travel, the
    patch a row's cells or between them), no node deeper than 1.05 x its peak, and the volume is
    k_p F per metre. (Before, the patch fell between the nodes most steps and the whole force went
    on the node nearest the contact: 8.4 x and 5.3 x the groove's peak; issue 26, the disc's 3.5 x
    spikes where each pass engaged.)"""
    from robot_grinding_sim.core.job.removal import accumulate_tool, plane_grid

    angle, k_w, spacing = 0.2, 1e10, 3e-4
    disc = tool_of("ur10e_disc_grinder.urdf", "disc", 0.0005, angle)
    fp = ToolFootprint(disc, k_w, 0.0, KP, samples=801)
    d = fp.penetration(force)
    assert d / math.tan(angle) < spacing  # the patch along the travel, shorter than a node's cell
    line = np.array([[x, y, 0.0] for x in (-0.008, 0.008) for y in (-0.004, 0.004)])
    normal = np.array([0.0, 0.0, -1.0])  # F0: z into the part
    grid = plane_grid(line, np.tile(normal, (len(line), 1)), spacing, np.eye(4), preston_coefficient=KP)
    X0, ds = fp.pose(force), 2e-5
    for s in np.arange(-0.006, 0.006, ds):
        X = X0.copy()
        X[0, 3] += s
        accumulate_tool(grid, disc, X, np.array([s, 0.0, 0.0]), normal, force, d, 0.0, np.array([V, 0.0, 0.0]), ds / V)
    P = grid.points
    mid = np.abs(P[:, 0]) < 0.003  # full passes over these nodes
    h = disc_groove(-P[mid, 1], KP, k_w, disc.dims["radius"], angle, force)  # the planner's y: F0's -y
    peak = float(h.max())
    assert float(np.max(np.abs(grid.depth[mid] - h))) <= 0.1 * peak
    assert float(grid.depth.max()) <= 1.05 * peak
    # the volume: F k_p / v_f per metre of pass (the Winkler force holds F), whatever the grid
    assert grid.volume() == pytest.approx(KP * force * 0.012, rel=0.01)

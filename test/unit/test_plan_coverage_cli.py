"""grinding plan with the geodesic generator: coverage printed and written (plan.json minor >= 1), the
geodesic cell round trip, the workpiece pose search and failures that name the place and the fix."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import surface_coverage as sc
from cli_runner import run

from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.geometry import cad
from robot_grinding_sim.core.planning import placement, plan_io, planner
from robot_grinding_sim.core.planning.passes import PassParameters

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wrapped_step(tmp_path_factory) -> Path:
    shape, _ = sc.freeform_wrap()
    path = tmp_path_factory.mktemp("wrap") / "wrap.step"
    cad.CadPart(shape).write(path, unit="mm")
    return path


def test_plan_prints_and_writes_the_coverage(tmp_path: Path, wrapped_step: Path) -> None:
    out = run("plan", str(wrapped_step), "--robot", "none", "--out", "plan.json", "--plot", "plan.png", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("coverage"))
    assert "uncovered" in line and "worst gap" in line
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["version"] == 2 and data["minor"] == 3
    assert data["parameters"]["passes"]["generator"] == "geodesic"  # the default of grinding plan
    cov = data["coverage"]
    assert f"{cov['coverage'] * 100:.2f} %" in line
    # the figure written agrees with the independent measurement on the same file's face
    part = cad.read_cad(wrapped_step)
    pts = [np.array([w["surface_point"] for w in p["waypoints"]]) for p in data["passes"]]
    m = sc.measure(part.shape, data["part"]["faces"], pts, 0.005, 0.005, n=150)
    assert m.coverage >= 0.98 and abs(m.coverage - cov["coverage"]) < 0.015
    assert cov["worst_gap_m"] < 0.005 and cov["uncovered_area_m2"] < 0.02 * cov["area_m2"]  # slivers at most
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the raster on the same face leaves most of it: the figures say so, and the plot draws the gaps
    out = run("plan", str(wrapped_step), "--robot", "none", "--generator", "raster", "--out", "raster.json",
              "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    raster = json.loads((tmp_path / "raster.json").read_text())["coverage"]
    assert summary["coverage"]["coverage"] == pytest.approx(raster["coverage"])
    assert raster["coverage"] < 0.9 and len(raster["uncovered_points"]) > 0


def test_geodesic_cell_reads_back() -> None:
    from robot_grinding_sim.core.config import CellConfig

    values = CellConfig().values()
    values["passes.generator"] = "geodesic"
    cell = plan_io.cell_of({"cell": values})
    assert cell.passes.generator == "geodesic" and cell.passes.validate() is cell.passes
    values["passes.generator"] = "spiral"
    with pytest.raises(Exception, match="passes.generator"):
        plan_io.cell_of({"cell": values})


def _small_plan(pose: tuple[float, ...]) -> planner.Plan:
    shape, faces = sc.full_cylinder()
    part = cad.CadPart(shape)
    p = planner.plan(part, faces, PassParameters(stepover=0.01, generator="geodesic"),
                     planner.ToolParameters(radius=0.02), robot=None, workpiece_pose=pose)
    return planner.crop_plan(p, part, 3, 0.02)


def test_unreachable_names_the_waypoint_and_placement_finds_a_pose() -> None:
    """At 1.6 m the arm cannot reach: the error names pass and point; the search returns the nearest
    pose that works, and the job built there independently (robot_stage) is reachable and clear."""
    import dataclasses

    from robot_grinding_sim.core.config import CellConfig, WorkpieceConfig
    from robot_grinding_sim.core.robot.ik import load_robot

    far = (1.6, 0.2, 0.0, 0.0, 0.0, 0.0)
    plan = _small_plan(far)
    model = load_robot("default")
    with pytest.raises(PlanningError, match=r"pass \d+ approach.*unreachable") as err:
        planner.robot_stage(plan, None, model, check_collisions=False)
    cell = dataclasses.replace(CellConfig(), workpiece=WorkpieceConfig(pose=far))
    found = placement.search_pose(plan, model, cell)
    assert found.pose != far and found.configured == far
    assert math.hypot(found.pose[0], found.pose[1]) < math.hypot(*far[:2])
    assert found.min_clearance_m is not None and found.min_clearance_m >= cell.process.clearance
    ok = dataclasses.replace(plan, workpiece_pose=planner.pose_matrix(found.pose), trajectory=None)
    part = cad.CadPart(sc.full_cylinder()[0])
    planner.robot_stage(ok, part, model)  # raises if unreachable or colliding
    assert ok.reachability is not None and ok.collision["min_clearance_m"] > 0
    hint = placement.suggestion(err.value, plan, None, None, cell)
    assert hint is not None and f"--workpiece-pose '{placement.pose_text(found.pose)}'" in hint


def test_two_knot_link_is_timed_rest_to_rest() -> None:
    """A link of two knots used to fail with 'the path speed vanishes inside the move'."""
    from robot_grinding_sim.core.planning import trajectory as tr
    from robot_grinding_sim.core.robot.ik import load_robot

    model = load_robot("default")
    q0 = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])
    X0 = model.fk(q0)
    P = np.vstack([X0[:3, 3], X0[:3, 3] + [0.0, 0.001, 0.0]])
    R = np.stack([X0[:3, :3], X0[:3, :3]])
    vmax = np.asarray(model.velocity_limits, dtype=float)
    amax = np.full(model.nq, 4.0)
    seg = tr.link_segment(model, P, R, q0, 0.0, 1, vmax, amax)
    assert seg.t[-1] > seg.t[0] and np.all(np.diff(seg.t) > 0)
    assert np.allclose(seg.qd[0], 0.0) and np.allclose(seg.qd[-1], 0.0)
    assert np.linalg.norm(model.fk(seg.q[-1])[:3, 3] - P[-1]) < 1e-6
    # cubic Hermite rest to rest over T: peak speed 1.5 dq / T within the limits
    dq = np.abs(seg.q[-1] - seg.q[0])
    assert np.all(1.5 * dq / (seg.t[-1] - seg.t[0]) <= vmax + 1e-12)


def test_geodesic_plan_runs_in_simulate(tmp_path: Path, wrapped_step: Path) -> None:
    """A geodesic plan with the default robot: the IGES-like wrapped face reaches, the plan records the
    generator, and `grinding simulate --plan` (which validates the plan's cell) runs it."""
    out = run("plan", str(wrapped_step), "--max-passes", "1", "--pass-length", "0.01", "--no-optimise",
              "--out", "plan.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["parameters"]["passes"]["generator"] == "geodesic" and data["trajectory"] is not None
    out = run("simulate", "--plan", "plan.json", "--out", "sim", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert len(summary["passes"]) == 1 and summary["passes"][0]["mean_n"] > 0


def test_link_changes_the_arm_configuration_in_joint_space() -> None:
    """links.py: the pose's IK branches are distinct solutions of it (checked by yourdfpy's FK, not the
    planner's), and a bridged link rises and descends on the planned TCP path with the planned
    orientations, changing configuration in joint steps of at most 0.05 rad at the top."""
    import yourdfpy

    from robot_grinding_sim.core.planning import links
    from robot_grinding_sim.core.resources import default_urdf
    from robot_grinding_sim.core.robot.ik import load_robot

    model = load_robot("default")
    urdf = yourdfpy.URDF.load(str(default_urdf()), load_meshes=False)

    def fk(q: np.ndarray) -> np.ndarray:
        urdf.update_cfg(dict(zip(model.joint_names, q, strict=True)))
        return urdf.get_transform("tcp", "base_link")

    q_a = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])
    X_a = fk(q_a)
    X_b = X_a.copy()
    X_b[:3, 3] += [0.0, 0.1, 0.0]
    X_b[:3, :3] = X_a[:3, :3] @ np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # turned about z
    branches = links.ik_branches(model, X_b, [q_a])
    assert len(branches) >= 2
    for q in branches:
        assert np.linalg.norm(fk(q)[:3, 3] - X_b[:3, 3]) < 1e-5
    q_b = branches[-1]
    # rise 5 cm with X_a's orientation, over to above X_b, down with X_b's
    up = np.array([0.0, 0.0, 0.05])
    P = np.vstack([X_a[:3, 3] + s * up for s in np.linspace(0, 1, 6)]
                  + [X_b[:3, 3] + s * up for s in np.linspace(1, 0, 6)])
    R = np.stack([X_a[:3, :3]] * 6 + [X_b[:3, :3]] * 6)
    q, tcp = links.bridged_path(model, P, R, q_a, q_b, "link to pass 1")
    assert np.allclose(q[0], q_a) and np.allclose(q[-1], q_b)
    for k in (0, 5, -6, -1):
        assert np.linalg.norm(fk(q[k])[:3, 3] - P[k]) < 1e-6
    assert len(q) > 12 and np.max(np.abs(np.diff(q[5:-5], axis=0))) <= links.JOINT_STEP + 1e-9
    assert np.allclose(tcp[3], fk(q[3])[:3, 3], atol=1e-9)

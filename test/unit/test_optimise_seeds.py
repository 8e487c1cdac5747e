"""The force-target optimisation simulates each pass from the arm's configuration the job has at that
pass (issue 12): after the job changes configuration between passes (links.py), a pass is not
simulated in the configuration of the first pass.

The job trajectory here changes configuration on purpose: pass 1 is approached in another IK branch
of its approach pose than the one the arm reaches by following the link. The simulation is replaced
by a recorder of each episode's first knot; the checks are against that trajectory's knots and
yourdfpy's forward kinematics (not the planner's)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from robot_grinding_sim.core.config import CellConfig, PassParameters
from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.job import optimise
from robot_grinding_sim.core.planning import links, planner
from robot_grinding_sim.core.planning import trajectory as tr
from robot_grinding_sim.core.robot.ik import load_robot


@pytest.fixture(scope="module")
def two_passes():
    cell = CellConfig()
    part = parts.load_part("flat_plate")
    plan = planner.plan(part, None, PassParameters(stepover=0.03, spacing=0.004),
                        planner.tool_parameters(cell, 0.02), robot=None, workpiece_pose=cell.workpiece.pose)
    plan = planner.crop_plan(plan, part, max_passes=2, pass_length=0.01)
    return cell, load_robot("default"), plan


def _fk(model, q: np.ndarray) -> np.ndarray:
    """The tcp in base_link by yourdfpy's forward kinematics of the URDF."""
    import yourdfpy

    from robot_grinding_sim.core.resources import default_urdf

    urdf = _fk.__dict__.setdefault("urdf", yourdfpy.URDF.load(str(default_urdf()), load_meshes=False))
    urdf.update_cfg(dict(zip(model.joint_names, q, strict=True)))
    return urdf.get_transform("tcp", "base_link")


def test_pass_start_configurations_are_the_approach_knots(two_passes) -> None:
    cell, model, plan = two_passes
    paths = tr.job_paths(plan)
    traj = tr.build_job_trajectory(model, paths, cell.process, [0.0, 0.0], plan.tool.penetration,
                                   np.asarray(cell.robot.home, dtype=float))
    starts = tr.pass_start_configurations(traj)
    assert sorted(starts) == [g.index for g in paths.passes]
    for g in paths.passes:
        seg = next(s for s in traj.segments if s["kind"] == "approach" and s["pass_index"] == g.index)
        np.testing.assert_array_equal(starts[g.index], traj.positions[seg["start"]])
        top = g.positions[0] + cell.process.approach * g.normals[0]
        assert np.linalg.norm(_fk(model, starts[g.index])[:3, 3] - top) < 1e-6  # the approach starts out along n


def test_each_pass_is_optimised_in_the_configuration_the_job_has_there(two_passes, monkeypatch) -> None:
    cell, model, plan = two_passes
    process, pen = cell.process, plan.tool.penetration
    paths = tr.job_paths(plan)
    q_home = np.asarray(cell.robot.home, dtype=float)
    followed = tr.build_job_trajectory(model, paths, process, [0.0, 0.0], pen, q_home)
    q_follow = tr.pass_start_configurations(followed)
    g0, g1 = paths.passes
    # pass 1 from another configuration of the arm at its approach pose
    top1 = tr.targets(g1.positions[:1] + process.approach * g1.normals[:1], g1.rotations[:1])[0]
    vmax = np.asarray(model.velocity_limits, dtype=float)
    ep0 = tr.pass_episode(model, g0, process, 0.0, pen, 0.0, q_follow[g0.index], vmax)
    other = None
    for q_b in links.ik_branches(model, top1, [q_follow[g1.index]]):
        if np.max(np.abs(q_b - q_follow[g1.index])) < 0.5:
            continue
        try:
            link_t = ep0[-1].t1 + np.array([0.0, 5.0])
            link = tr.Segment("link", g1.index, link_t, np.vstack([ep0[-1].q[-1], q_b]), np.zeros((2, model.nq)))
            other = (q_b, [link, *tr.pass_episode(model, g1, process, 0.0, pen, link.t1, q_b, vmax)])
            break
        except PlanningError:  # a branch whose pass does not work: the next
            continue
    assert other is not None, "no other configuration of the arm grinds pass 1"
    q_b, tail = other
    reconfigured = tr.join_segments(model, [*ep0, *tail])
    assert np.max(np.abs(tr.pass_start_configurations(reconfigured)[g1.index] - q_b)) < 1e-12

    seen: list[np.ndarray] = []
    monkeypatch.setattr(optimise, "build_job_trajectory", lambda *a, **k: reconfigured)
    monkeypatch.setattr(optimise, "simulate_trajectory",
                        lambda setup, traj, on_step=None, t_end=None: seen.append(traj.positions[0].copy())
                        or SimpleNamespace(simulated_s=0.0, record=None))
    monkeypatch.setattr(optimise, "pass_statistics", lambda rec, windows: [SimpleNamespace(mean=process.target_force)])
    setup = SimpleNamespace(cell=cell, model=model, paths=paths, penetration=pen, q_home=q_home)
    opt = optimise.optimise_offsets(setup)
    assert opt.iterations == [1, 1] and len(seen) == 2
    # pass 0 as the job starts it; pass 1 in the configuration the job changed to, not pass 0's branch
    assert np.max(np.abs(seen[0] - q_follow[g0.index])) < 1e-6
    assert np.max(np.abs(seen[1] - q_b)) < 1e-6
    assert np.max(np.abs(seen[1] - q_follow[g1.index])) >= 0.5
    X = _fk(model, seen[1])
    assert np.linalg.norm(X[:3, 3] - top1[:3, 3]) < 1e-6
    assert np.linalg.norm(X[:3, :3] - top1[:3, :3]) < 1e-6

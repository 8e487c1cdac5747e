"""The simulated grinding job (core.grinding_job): physics checked against independent references.

- steady force of a held tool = series compliance of contact K and servo Kp m, with m from
  Pinocchio (not our dynamics), within 1 %; also beyond the explicit stability limit K dt^2/m > 4;
- force direction = the plate normal; on the curved panel = OpenCascade's own normal at its own
  projection of the tool centre (not this module's projector), within 1 deg;
- no force above the part; contact onset without overshoot; optimisation brings passes within 5 %;
- bad input raises InputError.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError, PlanningError
from robot_grinding_sim.core.job.grinding_job import (
    ContactArmSimulation,
    JobConfig,
    make_contact_model,
    run_job,
    setup_job,
    simulate_pass,
    solve_ik,
)
from robot_grinding_sim.core.robot.arm_sim import TrajectoryInterpolator

R_TOOL = 0.02


@pytest.fixture(scope="module")
def plate():
    cfg = JobConfig(part="flat_plate", max_passes=1, pass_length=0.01, stepover=0.05, optimise=False, dwell=0.3)
    return setup_job(cfg)


def _hold_pose(setup, height: float) -> np.ndarray:
    """TCP pose over the plate centre (part frame (0, 0, 0.01), top face) with the tool pointing
    down, its centre ``height`` above the surface (negative: inside)."""
    X = setup.X_BP
    n = X[:3, :3] @ np.array([0.0, 0.0, 1.0])
    p = X[:3, :3] @ np.array([0.0, 0.0, 0.01]) + X[:3, 3]
    T = np.eye(4)
    T[:3, :3] = X[:3, :3] @ np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = p + (R_TOOL + height) * n
    return T, n


def _pinocchio_effective_mass(urdf: str, q: np.ndarray, n: np.ndarray) -> float:
    pin = pytest.importorskip("pinocchio")
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    fid = model.getFrameId("tcp")
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    J = pin.getFrameJacobian(model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3]
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    return 1.0 / float(n @ J @ np.linalg.solve(M, J.T @ n))


def _hold(setup, d_cmd: float, stiffness: float, duration: float = 0.4, dt: float = 1e-3, project: bool = True,
          omega: float = 200.0):
    T, n = _hold_pose(setup, -d_cmd)
    q = solve_ik(setup.model, T[None], np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0]))[0]
    cfg = JobConfig(stiffness=stiffness)
    sim = ContactArmSimulation(setup.model, setup.scene, make_contact_model(cfg), q, dt=dt, output_dt=1e-3,
                               servo_omega=omega, project=project)
    sim.set_trajectory(TrajectoryInterpolator.hold(q), 0.0)
    sim.run_until(duration)
    return sim, sim.rec.arrays(sim.radius), q, n


@pytest.mark.parametrize("stiffness,d_cmd,dt", [(1.0e5, 5e-5, 1e-3), (1.0e5, 5e-5, 2e-3), (1.0e8, 2e-5, 1e-3)])
def test_held_tool_force_is_the_series_compliance(plate, stiffness, d_cmd, dt):
    sim, rec, q, n = _hold(plate, d_cmd, stiffness, dt=dt)
    m = _pinocchio_effective_mass(str(plate.model.source), q, n)
    k_arm = 200.0**2 * m
    expected = d_cmd / (1.0 / stiffness + 1.0 / k_arm)
    steady = rec["fn"][rec["t"] > 0.3]
    assert steady.size > 50
    assert np.all(np.abs(steady - expected) < 0.01 * expected), (steady.min(), steady.max(), expected)
    # the force acts along the plate normal (the normal of every contact step)
    contact = rec["fn_mean"] > 0
    assert np.allclose(rec["normal"][contact], n, atol=1e-9)
    if stiffness == 1.0e8:
        assert stiffness * dt**2 / m > 4.0  # beyond the explicit-coupling limit


def test_explicit_coupling_fails_where_the_closed_form_holds(plate):
    # the same stiff contact with the closed-form end state NOT imposed on the arm (mean force only)
    sim, rec, q, n = _hold(plate, 2e-5, 1.0e8, duration=0.2, project=False)
    m = _pinocchio_effective_mass(str(plate.model.source), q, n)
    expected = 2e-5 / (1.0 / 1.0e8 + 1.0 / (200.0**2 * m))
    late = rec["fn"][rec["t"] > 0.1]
    assert np.max(np.abs(late - expected)) > 0.05 * expected


def test_no_force_above_the_part(plate):
    T, n = _hold_pose(plate, 1e-3)
    q = solve_ik(plate.model, T[None], np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0]))[0]
    sim = ContactArmSimulation(plate.model, plate.scene, plate.contact, q)
    sim.set_trajectory(TrajectoryInterpolator.hold(q), 0.0)
    sim.run_until(0.2)
    rec = sim.rec.arrays(sim.radius)
    assert rec["fn"].size == 200 and np.all(rec["fn"] == 0.0)
    assert np.all(rec["force"] == 0.0)
    assert sim.contact_steps == 0


def test_contact_onset_without_overshoot(plate):
    res, segs, info = simulate_pass(plate, 0, 0.0, plate.q_home)
    rec = info["sim"].rec.arrays(info["sim"].radius)
    dwell = next(s for s in segs if s.kind == "dwell")
    sel = rec["t"] <= dwell.t1
    f = rec["fn"][sel]
    steady = f[-1]
    assert steady > 3.0
    assert f.max() <= steady * 1.005, (f.max(), steady)
    # from the first touch the force rises to 99 % of its steady value and then stays in [99 %, 100.5 %]
    on = np.flatnonzero(f > 0)
    rise = f[on[0]:]
    k99 = int(np.argmax(rise >= 0.99 * steady))
    assert np.all(np.diff(rise[: k99 + 1]) > 0.0)
    assert np.all((rise[k99:] >= 0.99 * steady) & (rise[k99:] <= 1.005 * steady))
    # the first contact sample is the touch itself, not a jump into the part (time of impact)
    assert rec["depth"][sel][on[0]] < 2e-5


def test_curved_panel_force_direction_is_the_cad_normal():
    cfg = JobConfig(part="curved_panel", max_passes=1, pass_length=0.006, stepover=0.03, optimise=False,
                    dwell=0.1)
    setup = setup_job(cfg)
    assert setup.exact_surface
    res, segs, info = simulate_pass(setup, 0, 0.0, setup.q_home)
    sim = info["sim"]
    rec = sim.rec.arrays(sim.radius)
    assert 3.0 < res.mean < 6.0
    face = setup.part.face(setup.faces[0])
    X = setup.X_BP
    steps = np.flatnonzero(rec["fn_mean"] > 1.0)
    assert steps.size > 100
    worst = 0.0
    for k in steps[:: max(1, steps.size // 8)]:
        # the tool centre at the start of step k (the end of step k - 1), in the part frame
        c = setup.model.fk(rec["q"][k - 1])[:3, 3]
        c_part = X[:3, :3].T @ (c - X[:3, 3])
        uv, p, dist = face.project(c_part[None])  # OpenCascade's projection
        _, n_occ = face.occ_point_normal(*uv[0])  # OpenCascade's normal
        n_sim = X[:3, :3].T @ rec["normal"][k]
        worst = max(worst, math.degrees(math.acos(min(1.0, float(n_sim @ n_occ)))))
        assert abs((R_TOOL - dist[0]) - (R_TOOL - np.linalg.norm(c_part - p[0]))) < 1e-9
    assert worst < 1.0


def test_optimisation_brings_each_pass_within_tolerance():
    cfg = JobConfig(part="flat_plate", max_passes=1, pass_length=0.01, stepover=0.05, dwell=0.1)
    result = run_job(cfg)
    s = result.summary()
    assert s["optimisation"]["iterations"][0] >= 2  # the planner's d = F/K alone is not enough
    first = s["passes"][0]["means_per_iteration_n"][0]
    assert abs(first - 5.0) > 0.05 * 5.0
    for p in s["passes"]:
        assert abs(p["mean_n"] - 5.0) <= 0.05 * 5.0
        assert p["within_tolerance"]
    assert s["all_within_tolerance"]


@pytest.mark.parametrize("kw,match", [
    ({"stiffness": -1.0}, "stiffness"),
    ({"dt": 0.01}, "too long for the servo"),
    ({"model": "rubber"}, "model must be one of"),
    ({"cr": 0.0}, "cr must be"),
    ({"target_force": float("nan")}, "target-force"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(InputError, match=match):
        JobConfig(**kw).validate()


def test_bad_files(tmp_path):
    with pytest.raises(InputError):
        setup_job(JobConfig(part=str(tmp_path / "missing.step")))
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="plan.json"):
        setup_job(JobConfig(plan_file=str(bad)))
    with pytest.raises((InputError, PlanningError)):
        setup_job(JobConfig(part="flat_plate", workpiece_pose=(0.7, 0.0, 0.0, 0.0)))

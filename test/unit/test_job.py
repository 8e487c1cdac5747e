"""The grinding job in one process (core.job), checked against independent references.

- steady force of a held tool = series compliance of contact K and servo Kp m, with m from
  Pinocchio (not our dynamics), within 1 %; also beyond the explicit stability limit K dt^2/m > 4;
  the same stiff contact coupled explicitly (mean force only) does not hold;
- no force above the part; contact onset without overshoot;
- the optimisation brings a pass within 5 %; the plan it writes (plan.json, read back with the
  json module) runs again with ``--plan`` and reproduces the predicted mean force;
- the F/T sensor model's tool mass is the URDF's mass below the sensor (read with ElementTree);
- bad input raises InputError naming it.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from pinocchio_oracle import effective_mass

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import InputError, PlanningError
from robot_grinding_sim.core.job.plan_job import plan_job
from robot_grinding_sim.core.job.run import run_job
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.job.simulation import simulate
from robot_grinding_sim.core.planning import plan_io
from robot_grinding_sim.core.planning.path_ik import solve_ik
from robot_grinding_sim.core.planning.trajectory import episode_trajectory
from robot_grinding_sim.core.robot.joint_trajectory import TrajectoryInterpolator
from robot_grinding_sim.core.sim.ft import ft_sensor_model

R_TOOL = 0.02
HOME = np.array(CellConfig().robot.home)


def _cell(**values: object) -> CellConfig:
    return CellConfig().replace(**{"workpiece.part": "flat_plate", "passes.stepover": 0.05, **values})


@pytest.fixture(scope="module")
def plate():
    return setup_job(JobConfig(cell=_cell(**{"process.dwell": 0.3}), max_passes=1, pass_length=0.01,
                               optimise=False))


def _with(setup, **values: object):
    """The same set-up with other cell values (the contact side reads them at every run)."""
    return dataclasses.replace(setup, cfg=dataclasses.replace(setup.cfg, cell=setup.cell.replace(**values)))


def _hold_pose(setup, height: float) -> tuple[np.ndarray, np.ndarray]:
    """TCP pose over the plate centre (part frame (0, 0, 0.01), top face) with the tool pointing
    down, its centre ``height`` above the surface (negative: inside)."""
    X = setup.X_BP
    n = X[:3, :3] @ np.array([0.0, 0.0, 1.0])
    p = X[:3, :3] @ np.array([0.0, 0.0, 0.01]) + X[:3, 3]
    T = np.eye(4)
    T[:3, :3] = X[:3, :3] @ np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = p + (R_TOOL + height) * n
    return T, n


def _hold(setup, d_cmd: float, stiffness: float, duration: float = 0.4, dt: float = 1e-3, project: bool = True):
    T, n = _hold_pose(setup, -d_cmd)
    q = solve_ik(setup.model, T[None], HOME, "hold pose")[0]
    # the spindle off: a held, spinning ball whose axis the contact force tilts by ~1e-5 rad would
    # slide on the part and add a tangential force (not what the series-compliance formula models)
    s = _with(setup, **{"contact.stiffness": stiffness, "sim.dt": dt, "tool.spindle_speed": 0.0})
    run = simulate(s, TrajectoryInterpolator.hold(q), q, duration, project=project)
    return run, run.record, q, n


@pytest.mark.parametrize("stiffness,d_cmd,dt", [(1.0e5, 5e-5, 1e-3), (1.0e5, 5e-5, 2e-3), (1.0e8, 2e-5, 1e-3)])
def test_held_tool_force_is_the_series_compliance(plate, stiffness, d_cmd, dt):
    run, rec, q, n = _hold(plate, d_cmd, stiffness, dt=dt)
    m = effective_mass(str(plate.model.source), q, n)
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
    run, rec, q, n = _hold(plate, 2e-5, 1.0e8, duration=0.2, project=False)
    m = effective_mass(str(plate.model.source), q, n)
    expected = 2e-5 / (1.0 / 1.0e8 + 1.0 / (200.0**2 * m))
    late = rec["fn"][rec["t"] > 0.1]
    assert np.max(np.abs(late - expected)) > 0.05 * expected


def test_no_force_above_the_part(plate):
    T, _ = _hold_pose(plate, 1e-3)
    q = solve_ik(plate.model, T[None], HOME, "hold pose")[0]
    run = simulate(plate, TrajectoryInterpolator.hold(q), q, 0.2)
    rec = run.record
    assert rec["fn"].size == 200 and np.all(rec["fn"] == 0.0)
    assert np.all(rec["force"] == 0.0)
    assert run.contact_steps == 0


def test_contact_onset_without_overshoot(plate):
    g = plate.paths.passes[0]
    traj = episode_trajectory(plate.model, g, plate.cell.process, 0.0, plate.penetration, HOME)
    run = simulate(plate, traj.interpolator(plate.model), traj.positions[0], traj.duration)
    rec = run.record
    dwell = next(s for s in traj.segments if s["kind"] == "dwell")
    sel = rec["t"] <= traj.times[dwell["stop"] - 1]
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


def test_optimisation_and_the_plan_it_writes_run_again_with_its_predicted_force(tmp_path):
    cell = _cell(**{"process.dwell": 0.1})
    plan = plan_job(cell, max_passes=2, pass_length=0.01, check_collisions=False)
    ft = plan.force_target
    assert ft["iterations"][0] >= 2  # the planner's d = F/K alone is not enough (arm compliance in series)
    for mean in ft["predicted_mean_force_n"]:
        assert abs(mean - 5.0) <= 0.05 * 5.0
    path = plan_io.write_plan(plan, tmp_path / "plan.json")
    data = json.loads(path.read_text())  # plain json, not our reader
    assert data["version"] == 2 and data["trajectory"]["interpolation"] == "cubic_hermite"
    assert data["force_target"]["offsets_m"] == pytest.approx(ft["offsets_m"], abs=1e-12)
    kinds = [s["kind"] for s in data["trajectory"]["segments"]]
    assert kinds == ["approach", "dwell", "pass", "retreat", "link", "approach", "dwell", "pass", "retreat"]
    # the plan's own cell, its trajectory, no re-optimisation: the predicted forces again
    again = run_job(JobConfig(cell=plan_io.cell_of(data), plan_file=str(path)))
    assert again.optimisation is None
    np.testing.assert_allclose(again.offsets, ft["offsets_m"], atol=1e-15)
    for p, predicted in zip(again.passes, ft["predicted_mean_force_n"], strict=True):
        assert abs(p.mean - predicted) <= 0.005 * predicted


def test_ft_sensor_tool_mass_is_the_urdf_mass_below_the_sensor(plate):
    root = ET.parse(plate.model.source).getroot()
    children: dict[str, list[str]] = {}
    for j in root.iter("joint"):
        children.setdefault(j.find("parent").get("link"), []).append(j.find("child").get("link"))
    mass, stack = 0.0, list(children.get("ft_sensor", []))
    while stack:
        link = stack.pop()
        stack += children.get(link, [])
        inertial = root.find(f"link[@name='{link}']/inertial/mass")
        mass += float(inertial.get("value")) if inertial is not None else 0.0
    ft = ft_sensor_model(plate.cell, plate.model)
    assert mass > 0.5 and ft.params.tool_mass == pytest.approx(mass, rel=1e-12)
    fixed = ft_sensor_model(plate.cell.replace(**{"ft_sensor.tool_mass": 1.25}), plate.model)
    assert fixed.params.tool_mass == 1.25


@pytest.mark.parametrize("name,value,match", [
    ("contact.stiffness", -1.0, r"'contact.stiffness': -1.0 is below"),
    ("sim.dt", 0.01, "too long for the servo"),
    ("contact.model", "rubber", r"'contact.model': 'rubber' is not one of"),
    ("contact.cr", 0.0, r"'contact.cr': 0.0 is below"),
    ("process.target_force", float("nan"), r"'process.target_force': must be finite"),
])
def test_bad_parameters(name, value, match):
    with pytest.raises(InputError, match=match):
        CellConfig().replace(**{name: value})


def test_bad_files(tmp_path):
    with pytest.raises(InputError, match="missing.step"):
        setup_job(JobConfig(cell=CellConfig().replace(**{"workpiece.part": str(tmp_path / "missing.step")})))
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="plan.json"):
        setup_job(JobConfig(plan_file=str(bad)))
    with pytest.raises(PlanningError, match="unreachable"):
        run_job(JobConfig(cell=_cell(**{"workpiece.pose": [2.5, 0.0, 0.0, 0.0, 0.0, 0.0]}), max_passes=1,
                          optimise=False))


def test_a_plan_file_is_parsed_once_and_its_trajectory_checked_against_the_robot(tmp_path, monkeypatch):
    """setup_job read the plan's content three times (the check, the plan, the job trajectory again for
    the run) and the trajectory four: now once, the trajectory checked against the robot in that parse,
    and the run gets the file's trajectory as written."""
    path = plan_io.write_plan(plan_job(_cell(), optimise=False, max_passes=1, pass_length=0.01,
                                       check_collisions=False), tmp_path / "plan.json")
    calls = {"plan": 0, "trajectory": 0}

    def counted(f, key):
        def call(*a, **k):
            calls[key] += 1
            return f(*a, **k)
        return call

    for name, key in (("plan_from_dict", "plan"), ("trajectory_from_dict", "trajectory")):
        monkeypatch.setattr(plan_io, name, counted(getattr(plan_io, name), key))
    setup = setup_job(JobConfig(cell=_cell(), plan_file=str(path)))
    traj, offsets = setup.planned_trajectory()
    assert calls == {"plan": 1, "trajectory": 1}
    written = json.loads(path.read_text())["trajectory"]  # plain json, not our reader
    np.testing.assert_array_equal(traj.times, written["times"])
    np.testing.assert_array_equal(traj.positions, written["positions"])
    assert offsets == [0.0] and setup.plan.trajectory is traj
    # the one parse refuses a trajectory for another robot, naming the file
    data = json.loads(path.read_text())
    data["trajectory"]["joint_names"] = data["trajectory"]["joint_names"][::-1]
    with pytest.raises(InputError, match=r"^other.json: plan trajectory: joints \['wrist_3_joint'"):
        plan_io.check_plan(data, setup.model, "other.json")

"""The admittance along the normal (core/robot/admittance.py) and the driver's force control
(core/execution/force_control.py), without ROS.

References: the closed loop with a spring contact K in series, ``M x'' + D x' + K x = K d0 - F_t``,
solved in closed form (steady state ``x = d0 - F_t / K``, i.e. the target force; the step response
of a damped second-order system); the bounds as stated; yourdfpy's forward kinematics (not the
package's kernels) for the joint correction; and a geometric spring contact on the plan's own
surface (planned TCP path and normals) for the whole control period, arm and contact in a loop.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from robot_grinding_sim.core.config import AdmittanceConfig, CellConfig
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.admittance import NormalAdmittance, joint_correction

URDF = Path(__file__).resolve().parents[2] / "urdf" / "ur10e_grinding.urdf"
#: wide bounds: the law alone, nothing clipped
FREE = dataclasses.replace(AdmittanceConfig(), max_correction=1.0, max_speed=1e3)


def _spring_loop(params: AdmittanceConfig, K: float, d0: float, target: float, T: float, dt: float,
                 on_pass: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The admittance with a spring contact F = K max(0, d0 - x) in series (an ideal arm): x(t), F(t)."""
    adm = NormalAdmittance(params)
    xs, fs = [], []
    for _ in range(int(round(T / dt))):
        f = K * max(0.0, d0 - adm.x)
        adm.step(dt, f, target, on_pass)
        xs.append(adm.x)
        fs.append(K * max(0.0, d0 - adm.x))
    return np.array(xs), np.array(fs)


@pytest.mark.parametrize("K", [3e4, 1e5, 3e5, 1e6])
def test_the_closed_loop_with_a_spring_contact_reaches_the_target_whatever_its_stiffness(K: float) -> None:
    d0, target = 9.0 / 3e5, 5.0  # the depth that gives 9 N at 3e5 N/m
    T = 20.0 * FREE.damping / K + 1.0  # many closed-loop time constants D/K
    x, f = _spring_loop(FREE, K, d0, target, T, 1e-3)
    assert f[-1] == pytest.approx(target, rel=1e-6)
    assert x[-1] == pytest.approx(d0 - target / K, rel=1e-6)


def test_the_step_response_is_the_analytic_second_order_one() -> None:
    # an underdamped choice, so that overshoot and period are checked too
    M, D, K = 300.0, 6.0e3, 1.0e5
    params = dataclasses.replace(FREE, mass=M, damping=D)
    d0, target = 1e-4, 4.0
    dt = 1e-5
    x, _ = _spring_loop(params, K, d0, target, 1.0, dt)
    t = dt * np.arange(1, len(x) + 1)
    w, zeta = math.sqrt(K / M), D / (2.0 * math.sqrt(K * M))
    assert 0.3 < zeta < 0.8
    wd = w * math.sqrt(1.0 - zeta**2)
    x_ss = d0 - target / K
    exact = x_ss * (1.0 - np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta / math.sqrt(1.0 - zeta**2) * np.sin(wd * t)))
    # the force is held over each step: an O(dt) error against the continuous solution
    assert np.max(np.abs(x - exact)) < 2e-3 * abs(x_ss)
    overshoot = (x.max() - x_ss) / x_ss
    assert overshoot == pytest.approx(math.exp(-zeta * math.pi / math.sqrt(1.0 - zeta**2)), abs=2e-3)


def test_first_order_without_mass_is_an_integral_force_controller() -> None:
    params = dataclasses.replace(FREE, mass=0.0)
    K, d0, target = 1e5, 1e-4, 4.0
    dt = 1e-4
    x, _ = _spring_loop(params, K, d0, target, 1.0, dt)
    t = dt * np.arange(1, len(x) + 1)
    # D x' = K (d0 - x) - F_t: x = x_ss (1 - exp(-K t / D)); explicit Euler's error is O(K dt / D)
    x_ss = d0 - target / K
    exact = x_ss * (1.0 - np.exp(-K * t / params.damping))
    assert np.max(np.abs(x - exact)) < 2e-3 * abs(x_ss)


def test_the_correction_and_its_rate_stay_within_their_bounds() -> None:
    p = dataclasses.replace(AdmittanceConfig(), max_correction=1e-3, max_speed=2e-3, mass=10.0, damping=10.0)
    dt = 2e-3
    for force, side in ((500.0, 1.0), (0.0, -1.0)):  # far too much force; on a pass in the air
        adm = NormalAdmittance(p)
        xs = [0.0]
        for _ in range(2000):
            state = adm.step(dt, force, 5.0, on_pass=True)
            xs.append(state.x)
        xs_a = np.array(xs)
        assert np.max(np.abs(xs_a)) <= p.max_correction
        assert xs_a[-1] == pytest.approx(side * p.max_correction)
        assert np.max(np.abs(np.diff(xs_a))) <= p.max_speed * dt * (1 + 1e-12)
        assert state.limited and state.v == 0.0


def test_no_wind_up_in_the_air_or_against_a_bound() -> None:
    p = dataclasses.replace(AdmittanceConfig(), max_correction=1e-3, max_speed=2e-3, mass=10.0, damping=1e3)
    dt = 2e-3
    # off a pass in the air: nothing integrates, for as long as it lasts
    adm = NormalAdmittance(p)
    for _ in range(5000):
        state = adm.step(dt, 0.0, 5.0, on_pass=False)
        assert not state.active and adm.x == 0.0 and adm.v == 0.0
    # on a pass, held at the inner bound for 10 s; then the force exceeds the target: the correction
    # moves out at once, exactly as a fresh admittance started at that bound at rest
    for _ in range(5000):
        adm.step(dt, 0.0, 5.0, on_pass=True)
    assert adm.x == -p.max_correction
    fresh = NormalAdmittance(p)
    fresh.x = -p.max_correction
    for _ in range(50):
        a, b = adm.step(dt, 8.0, 5.0, True), fresh.step(dt, 8.0, 5.0, True)
        assert a.x == b.x and a.v == b.v
    assert adm.x > -p.max_correction


def test_off_a_pass_it_only_lowers_the_force_and_releases_at_the_rate_limit() -> None:
    p = dataclasses.replace(AdmittanceConfig(), max_correction=1e-3, max_speed=2e-3, mass=10.0, damping=1e3)
    dt = 2e-3
    adm = NormalAdmittance(p)
    for _ in range(1000):  # in contact below the target, off a pass: never pushes in
        state = adm.step(dt, 3.0, 5.0, on_pass=False)
        assert state.active and adm.x == 0.0
    for _ in range(2000):  # on a pass, too little force: pushed in to the bound
        adm.step(dt, 3.0, 5.0, on_pass=True)
    assert adm.x == -p.max_correction
    xs = [adm.x]
    for _ in range(1000):  # the pass ends in contact: back to x >= 0 at max_speed, no jump
        xs.append(adm.step(dt, 3.0, 5.0, on_pass=False).x)
    steps = np.diff(xs)
    assert np.all(steps >= 0.0) and np.max(steps) <= p.max_speed * dt * (1 + 1e-12)
    assert xs[-1] == 0.0
    adm.x = 5e-4  # in the air off a pass: returns to 0 at max_speed
    xs = [adm.x] + [adm.step(dt, 0.0, 5.0, on_pass=False).x for _ in range(500)]
    assert np.max(np.abs(np.diff(xs))) <= p.max_speed * dt * (1 + 1e-12) and xs[-1] == 0.0


def test_bad_gains_are_refused_naming_them() -> None:
    with pytest.raises(InputError, match="admittance.damping"):
        NormalAdmittance(dataclasses.replace(AdmittanceConfig(), damping=0.0))
    with pytest.raises(InputError, match="admittance.max_speed"):
        NormalAdmittance(dataclasses.replace(AdmittanceConfig(), max_speed=-1.0))


@pytest.fixture(scope="module")
def model():
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    return RobotModel.from_urdf(URDF, tip_link="tcp")


def test_the_joint_correction_moves_the_tcp_along_the_normal_without_turning_it(model) -> None:
    import yourdfpy

    robot = yourdfpy.URDF.load(str(URDF), load_meshes=False, build_collision_scene_graph=False)
    q = np.array([0.1, -1.3, 1.8, -2.1, -1.57, 0.2])

    def tcp(qq: np.ndarray) -> np.ndarray:
        robot.update_cfg(dict(zip(model.joint_names, qq, strict=True)))
        return robot.get_transform("tcp", robot.base_link)

    n = np.array([0.2, -0.1, 1.0]) / np.linalg.norm([0.2, -0.1, 1.0])
    x = 2e-4
    dq, dqd = joint_correction(model, q, n, x, v=1e-3)
    X0, X1 = tcp(q), tcp(q + dq)
    # within 0.1 % of x: the linearisation's second-order term and the least-squares damping
    assert np.linalg.norm(X1[:3, 3] - X0[:3, 3] - x * n) < 1e-3 * x
    assert np.linalg.norm(X1[:3, :3] - X0[:3, :3]) < 1e-3 * x
    J = model.jacobian(q)
    assert np.linalg.norm(J @ dqd - np.r_[1e-3 * n, np.zeros(3)]) < 1e-3 * 1e-3  # the same 0.1 %


# --------------------------------------------------------------------------------------------------
# the driver's control period on a plan, in a loop with an arm and a contact


@pytest.fixture(scope="module")
def plan_data() -> dict:
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    cell = CellConfig().replace(**{"process.dwell": 1.0})
    plan = plan_job(cell, optimise=False, max_passes=1, pass_length=0.01, check_collisions=False)
    return plan_io.parse_plan(plan_io.plan_text(plan), "plan.json")


def _surface(data: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """The plan's surface points and outward normals in base_link, 10 um apart along each pass (a
    cubic spline through plan.json's waypoints by arc length, moved by its workpiece pose: not the
    code under test's path), and the tool radius."""
    from scipy.interpolate import CubicSpline
    from scipy.spatial.transform import Rotation

    wp = data["part"]["workpiece_pose"]
    R, p = Rotation.from_quat(wp["orientation"]).as_matrix(), np.array(wp["position"])
    pts, nrm = [], []
    for ps in data["passes"]:
        w = ps["waypoints"]
        s = np.array([x["arc_length"] for x in w])
        fine = np.arange(s[0], s[-1], 1e-5)
        pts.append(CubicSpline(s, np.array([x["surface_point"] for x in w]))(fine))
        n = CubicSpline(s, np.array([x["normal"] for x in w]))(fine)
        nrm.append(n / np.linalg.norm(n, axis=1, keepdims=True))
    return np.vstack(pts) @ R.T + p, np.vstack(nrm) @ R.T, float(data["tool"]["radius"])


def _run(model, data: dict, K: float, control: bool, dt: float = 2e-3) -> dict[str, np.ndarray]:
    """The plan's job through NormalForceControl at 1/dt Hz: the arm reaches each streamed point at
    its time (an ideal position-controlled arm, the horizon a pure delay), the ball touches the
    plan's surface (the nearest waypoint's tangent plane) with a spring of stiffness K."""
    from robot_grinding_sim.core.execution.force_control import NormalForceControl
    from robot_grinding_sim.core.planning import plan_io

    traj = plan_io.trajectory_from_dict(data["trajectory"], model)
    params = AdmittanceConfig() if control else dataclasses.replace(AdmittanceConfig(), max_correction=0.0)
    fc = NormalForceControl(model, params)
    fc.set_plan(data)
    stamp = 0.5
    fc.command(0.0, stamp, list(traj.joint_names), traj.times, traj.positions, traj.velocities)
    pass_seg = next(s for s in traj.segments if s["kind"] == "pass")
    t_in, t_out = traj.times[pass_seg["start"]], traj.times[pass_seg["stop"] - 1]
    surf, normals, radius = _surface(data)
    arrivals: list[tuple[float, np.ndarray]] = []
    q_arm = traj.positions[0].copy()
    out: dict[str, list] = {"t": [], "force": [], "x": [], "on_pass": []}
    for k in range(int((stamp + traj.duration + 1.0) / dt)):
        now = k * dt
        while arrivals and arrivals[0][0] <= now + 1e-12:
            q_arm = arrivals.pop(0)[1]
        p = model.fk(q_arm)[:3, 3]
        i = int(np.argmin(np.linalg.norm(surf - p, axis=1)))
        depth = radius - float(np.dot(normals[i], p - surf[i]))
        f = K * max(0.0, depth) * normals[i]
        on_pass = t_in <= now - stamp <= t_out
        fc.progress(now, 0 if on_pass else -1)
        point = fc.update(now, f)
        if point is not None:
            arrivals.append((point.time, point.positions))
        out["t"].append(now)
        out["force"].append(float(np.dot(normals[i], f)))
        out["x"].append(fc.admittance.x)
        out["on_pass"].append(on_pass)
    return {key: np.array(v) for key, v in out.items()}


def test_the_control_period_holds_the_target_on_a_contact_three_times_stiffer_than_planned(model, plan_data) -> None:
    K = 3.0 * CellConfig().contact.stiffness
    target = CellConfig().process.target_force
    free = _run(model, plan_data, K, control=False)
    held = _run(model, plan_data, K, control=True)
    on = held["on_pass"]
    assert on.sum() > 100
    # uncorrected: the planned penetration (5 N at 1e5 N/m) gives 3x the force
    assert np.median(free["force"][on]) == pytest.approx(3.0 * target, rel=0.02)
    assert np.max(np.abs(free["x"])) == 0.0
    # corrected: the target on the whole pass (the dwell before it let the force settle)
    assert np.max(np.abs(held["force"][on] - target)) < 0.02 * target
    # the correction is the analytic one, d0 - F/K outward, within its bound
    d0 = target / CellConfig().contact.stiffness
    assert np.median(held["x"][on]) == pytest.approx(d0 - target / K, rel=0.02)
    assert np.max(np.abs(held["x"])) <= AdmittanceConfig().max_correction
    # after the retreat the correction is back at 0 (released in the air)
    assert held["x"][-1] == 0.0 and held["force"][-1] == 0.0

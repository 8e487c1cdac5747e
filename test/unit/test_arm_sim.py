"""The simulated arm (core.arm_sim): interpolation, computed-torque tracking, dynamics, wrenches, end stops.

Checks against independent facts: polynomial end conditions, finite differences of the
interpolant, the closed-loop error equation, energy conservation of the free arm, the virtual-work
principle (finite differences of forward kinematics) for the wrench torque, and static equilibrium.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.arm_sim import (
    ArmSimulator,
    ComputedTorqueController,
    parse_initial_positions,
    wrench_to_root,
)
from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.core.robot.joint_trajectory import JointLimits, TrajectoryInterpolator
from robot_grinding_sim.core.robot.velocity_limits import VelocityClamp

URDF = Path(__file__).resolve().parents[2] / "urdf" / "ur10e_grinding.urdf"
Q0 = np.array([0.0, -1.2, 1.4, -1.6, -1.57, 0.3])


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_urdf(URDF)


@pytest.fixture(scope="module")
def limits(model: RobotModel) -> JointLimits:
    return JointLimits.from_model(model)


def _fd(traj: TrajectoryInterpolator, t: float, h: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Central differences of q and qd at t."""
    qa, qda, _ = traj.sample(t - h)
    qb, qdb, _ = traj.sample(t + h)
    return (qb - qa) / (2 * h), (qdb - qda) / (2 * h)


# -- interpolation ------------------------------------------------------------------------------


def test_cubic_hermite_hits_points_and_velocities(limits: JointLimits) -> None:
    names = list(limits.names)
    P = np.array([Q0 + 0.1, Q0 + 0.3, Q0 - 0.2])
    V = np.array([np.full(6, 0.2), np.full(6, -0.1), np.zeros(6)])
    rest = (Q0, np.zeros(6), np.zeros(6))
    traj = TrajectoryInterpolator.build(limits, names, [0.5, 1.0, 2.0], P, V, start=rest)
    np.testing.assert_allclose(traj.knots, [0.0, 0.5, 1.0, 2.0])
    for t, p, v in zip([0.5, 1.0], P[:2], V[:2], strict=True):
        q, qd, _ = traj.sample(t)
        np.testing.assert_allclose(q, p, atol=1e-12)
        np.testing.assert_allclose(qd, v, atol=1e-12)
    q, qd, _ = traj.sample(0.0)
    np.testing.assert_allclose(q, Q0, atol=1e-12)  # starts from the current state
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    for t in (0.2, 0.7, 1.5):
        dq, dqd = _fd(traj, t)
        _, qd, qdd = traj.sample(t)
        np.testing.assert_allclose(dq, qd, atol=1e-6)
        np.testing.assert_allclose(dqd, qdd, atol=1e-5)
    # between the knots: scipy's cubic Hermite through the same knots (the start state prepended)
    spline = CubicHermiteSpline(traj.knots, np.vstack([Q0, P]), np.vstack([np.zeros(6), V]))
    for t in np.linspace(0.0, 2.0, 41)[:-1]:  # (at the last knot the arm holds: qdd = 0)
        q, qd, qdd = traj.sample(t)
        np.testing.assert_allclose(q, spline(t), rtol=0, atol=1e-12)
        np.testing.assert_allclose(qd, spline(t, 1), rtol=0, atol=1e-12)
        np.testing.assert_allclose(qdd, spline(t, 2), rtol=0, atol=1e-10)


def test_quintic_hits_accelerations(limits: JointLimits) -> None:
    names = list(limits.names)
    P = np.array([Q0, Q0 + 0.2, Q0 + 0.5])
    V = np.array([np.zeros(6), np.full(6, 0.3), np.zeros(6)])
    A = np.array([np.zeros(6), np.full(6, -0.5), np.zeros(6)])
    traj = TrajectoryInterpolator.build(limits, names, [0.0, 1.0, 2.0], P, V, A)
    q, qd, qdd = traj.sample(1.0)
    np.testing.assert_allclose([q, qd, qdd], [P[1], V[1], A[1]], atol=1e-12)
    _, _, qdd_left = traj.sample(1.0 - 1e-9)
    np.testing.assert_allclose(qdd_left, A[1], atol=1e-6)  # continuous acceleration at the knot


def test_positions_only_spline_is_c2_and_ends_at_rest(limits: JointLimits) -> None:
    names = list(limits.names)
    P = np.array([Q0 + 0.1, Q0 + 0.4, Q0 + 0.2])
    rest = (Q0, np.zeros(6), np.zeros(6))
    traj = TrajectoryInterpolator.build(limits, names, [1.0, 2.0, 3.0], P, start=rest)
    for t in (1.0, 2.0):
        left, right = traj.sample(t - 1e-9), traj.sample(t + 1e-9)
        for a, b in zip(left, right, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-6)
    q, qd, qdd = traj.sample(3.0)
    np.testing.assert_allclose(q, P[-1], atol=1e-12)
    np.testing.assert_allclose(qd, 0.0, atol=1e-12)
    # after the end: hold at rest
    q, qd, qdd = traj.sample(10.0)
    np.testing.assert_allclose(q, P[-1])
    assert not qd.any() and not qdd.any()


def test_partial_joint_set_holds_the_others(limits: JointLimits) -> None:
    traj = TrajectoryInterpolator.build(
        limits, ["elbow_joint"], [1.0], [[0.5]], start=(Q0, np.zeros(6), np.zeros(6))
    )
    q, _, _ = traj.sample(1.0)
    expected = Q0.copy()
    expected[2] = 0.5
    np.testing.assert_allclose(q, expected)
    for t in np.linspace(0, 1, 7):
        q, _, _ = traj.sample(t)
        np.testing.assert_allclose(np.delete(q, 2), np.delete(Q0, 2))


@pytest.mark.parametrize(
    ("names", "times", "pos", "vel", "text"),
    [
        (["shoulder_pan_joint", "foo"], [1.0], [[0.0, 0.0]], None, r"unknown joint names \['foo'\]"),
        (["elbow_joint", "elbow_joint"], [1.0], [[0.0, 0.0]], None, "duplicate"),
        (["elbow_joint"], [1.0], [[np.nan]], None, "positions of elbow_joint is nan"),
        (["elbow_joint"], [1.0], [[4.0]], None, r"elbow_joint = 4 is outside its limits \[-3.14159, 3.1"),
        (["elbow_joint"], [1.0, 1.0], [[0.0], [0.1]], None, "point 1: time_from_start 1.0 s is not after"),
        (["elbow_joint"], [-1.0], [[0.0]], None, "negative"),
        (["elbow_joint"], [1.0], [[0.0]], [[100.0]], "velocity of elbow_joint 100 exceeds its limit"),
        (["elbow_joint"], [1.0], [[0.0, 1.0]], None, r"positions must have shape \(1, 1\)"),
        (["elbow_joint"], [], np.zeros((0, 1)), None, "no points"),
    ],
)
def test_bad_trajectories_are_rejected(
    limits: JointLimits, names: list[str], times: list[float], pos: list, vel: list | None, text: str
) -> None:
    with pytest.raises(InputError, match=text):
        TrajectoryInterpolator.build(limits, names, times, pos, vel, start=(Q0, np.zeros(6), np.zeros(6)))


def test_to_target_respects_velocity_scale(limits: JointLimits) -> None:
    target = Q0 + np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    rest = (Q0, np.zeros(6), np.zeros(6))
    traj = TrajectoryInterpolator.to_target(limits, target, rest, velocity_scale=0.5)
    peak = max(np.abs(traj.sample(t)[1]).max() for t in np.linspace(0, traj.duration, 201))
    assert peak <= 0.5 * limits.velocity[2] * (1 + 1e-9)
    assert peak > 0.49 * limits.velocity[2]  # and not needlessly slow
    np.testing.assert_allclose(traj.sample(traj.duration)[0], target)
    with pytest.raises(InputError, match="expected 6 positions"):
        TrajectoryInterpolator.to_target(limits, Q0[:5], (Q0, np.zeros(6), np.zeros(6)))
    with pytest.raises(InputError, match="wrist_1_joint = 7"):
        TrajectoryInterpolator.to_target(limits, [0, 0, 0, 7, 0, 0], (Q0, np.zeros(6), np.zeros(6)))


def test_initial_positions_parsing() -> None:
    names = ["a", "b"]
    np.testing.assert_array_equal(parse_initial_positions(names, [1, 2]), [1, 2])
    np.testing.assert_array_equal(parse_initial_positions(names, {"b": 3.0}), [0, 3])
    with pytest.raises(InputError, match="expected 2 values"):
        parse_initial_positions(names, [1.0])
    with pytest.raises(InputError, match="unknown"):
        parse_initial_positions(names, {"c": 1.0})


# -- control and dynamics -----------------------------------------------------------------------


@pytest.mark.parametrize("quintic", [False, True])
def test_peak_velocity_is_the_densely_sampled_maximum(limits: JointLimits, quintic: bool) -> None:
    """Against the interpolant sampled every 10 us (exact for cubic segments: their extremum in
    closed form; quintic ones sampled at 64 points a segment)."""
    names = list(limits.names)
    rng = np.random.default_rng(5)
    P = Q0 + rng.uniform(-0.15, 0.15, (4, 6))  # chords within the velocity limits (build refuses others)
    V = rng.uniform(-0.5, 0.5, (4, 6))
    A = rng.uniform(-2, 2, (4, 6)) if quintic else None
    traj = TrajectoryInterpolator.build(limits, names, [0.3, 0.5, 0.9, 1.2], P, V, A,
                                        start=(Q0, np.full(6, 0.1), np.zeros(6)))
    ts = np.arange(0.0, traj.duration, 1e-5)
    dense = np.abs(np.array([traj.sample(t)[1] for t in ts])).max(axis=0)
    peak, when = traj.peak_velocity()
    np.testing.assert_allclose(peak, dense, rtol=1e-3 if quintic else 1e-6)
    for j in range(6):
        assert abs(abs(traj.sample(when[j])[1][j]) - peak[j]) < 1e-9


def test_a_step_command_is_slowed_down_to_the_velocity_limits(model: RobotModel) -> None:
    """Issue 22: 3 rad in 10 ms (a rest-to-rest cubic peaking at 450 rad/s) was followed as it came
    and the arm swung at 600-2,100 rad/s. With limit_velocity the simulator stretches it until the
    interpolated velocity is within the limit (a drive's speed limit) and says by how much; the arm
    then moves within its limits and arrives."""
    sim = ArmSimulator(model, Q0)
    goal = Q0.copy()
    goal[0] += 3.0
    traj = sim.command_trajectory(model.joint_names, [0.01], goal[None], limit_velocity=True)
    clamp = sim.last_clamp
    limit = float(model.velocity_limits[0])
    assert isinstance(clamp, VelocityClamp) and clamp.joint == "shoulder_pan_joint"
    assert clamp.peak == pytest.approx(1.5 * 3.0 / 0.01, rel=1e-9) and clamp.limit == limit
    # a rest-to-rest cubic (positions only: C2 spline from rest to rest) peaks at 1.5 x the chord
    assert clamp.factor == pytest.approx(1.5 * 3.0 / limit / 0.01, rel=1e-5)
    assert traj.peak_velocity()[0][0] <= limit * (1 + 1e-9)
    assert "450 rad/s" in str(clamp) and "slowed down" in str(clamp)
    worst = 0.0
    while sim.state.t < traj.duration + 1.0:
        worst = max(worst, float(np.abs(sim.step(1e-3).qd).max()))
    np.testing.assert_allclose(sim.state.q, goal, atol=1e-4)
    assert worst <= 1.05 * limit, worst  # the servo tracks the reference (its lag: a few %)
    # within the limits: followed as it is
    sim.command_trajectory(model.joint_names, [4.0], Q0[None], limit_velocity=True)  # 3 rad: 1.125 rad/s
    assert sim.last_clamp is None


def test_a_command_faster_than_the_limits_cannot_be_slowed_from_a_faster_reference(model: RobotModel) -> None:
    sim = ArmSimulator(model, Q0)
    sim.trajectory = TrajectoryInterpolator(np.array([0.0, 1.0]), np.zeros((1, 6, 6)), np.vstack([Q0, Q0]))
    sim.trajectory._coeffs[0, 1, 0] = 10.0  # a reference already at 10 rad/s: beyond the limit 2.09
    sim.trajectory._coeffs[0, 0] = Q0
    goal = Q0 + 0.01
    with pytest.raises(InputError, match="shoulder_pan_joint would reach .* no slow-down"):
        sim.command_trajectory(model.joint_names, [0.5], goal[None], limit_velocity=True)


def test_tracks_trajectory_to_goal(model: RobotModel) -> None:
    sim = ArmSimulator(model, Q0)
    goal = Q0 + np.array([0.5, -0.3, 0.4, 0.2, -0.3, 0.6])
    mid = Q0 + 0.5 * (goal - Q0) + 0.05
    sim.command_trajectory(model.joint_names, [0.8, 1.6], np.array([mid, goal]))
    worst = 0.0
    for _ in range(2000):
        st = sim.step(1e-3)
        worst = max(worst, float(np.abs(st.q_ref - st.q).max()))
    np.testing.assert_allclose(sim.state.q, goal, atol=1e-6)
    np.testing.assert_allclose(sim.state.qd, 0.0, atol=1e-5)
    # exact model: the error equation starts at zero and stays there up to the ZOH discretisation
    assert worst < 1e-3


def test_a_trajectory_stamped_ahead_waits_while_the_current_one_goes_on(model: RobotModel) -> None:
    """As a joint_trajectory_controller gets a trajectory stamped ahead: no jump to its first point."""
    sim = ArmSimulator(model, Q0)
    goal = Q0 + np.array([0.4, -0.2, 0.3, 0.1, -0.2, 0.5])
    first = sim.command_trajectory(model.joint_names, [0.0, 2.0], np.array([Q0, goal]),
                                   np.zeros((2, 6)))
    for _ in range(300):
        sim.step(1e-3)
    # the next one starts at t = 0.8 s from where the first will be then
    t_next = 0.8
    q_then, qd_then, _ = first.sample(t_next)
    second = sim.command_trajectory(model.joint_names, [0.0, 1.0], np.array([q_then, Q0]),
                                    np.array([qd_then, np.zeros(6)]), start_time=t_next)
    while sim.state.t < 1.5:
        t = sim.state.t
        q_ref = sim.reference(t)[0]
        expect = first.sample(t)[0] if t < t_next else second.sample(t - t_next)[0]
        np.testing.assert_allclose(q_ref, expect, atol=1e-12)
        st = sim.step(1e-3)
        np.testing.assert_allclose(st.q_ref, expect, atol=1e-12)
    # a command for now replaces both
    sim.command_positions(Q0, 0.1)
    assert np.abs(sim.reference(sim.state.t + 10.0)[0] - Q0).max() < 1e-12


def test_closed_loop_error_decays_like_the_design(model: RobotModel) -> None:
    """An initial error e0 on one joint decays as the critically damped e(t) = e0 (1 + w t) e^(-w t)."""
    w = 20.0
    ctrl = ComputedTorqueController(model, w**2, 2 * w, limit_effort=False)
    sim = ArmSimulator(model, Q0, controller=ctrl)
    sim.set_trajectory(TrajectoryInterpolator.hold(Q0 + np.array([0, 0, 0, 0, 0, 0.01])))
    dt = 1e-4
    for _ in range(1000):
        sim.step(dt)
    t = 0.1
    expected = 0.01 * (1 + w * t) * np.exp(-w * t)
    assert abs((sim.state.q_ref[5] - sim.state.q[5]) - expected) < 2e-2 * expected
    np.testing.assert_allclose(sim.state.q[:5], Q0[:5], atol=1e-9)  # decoupled


def test_free_arm_conserves_energy(model: RobotModel) -> None:
    """No control, gravity only: the total energy stays put (RK4) and bounded (symplectic Euler)."""
    for integrator, dt, tol in (("rk4", 1e-3, 1e-5), ("semi_implicit_euler", 2e-4, 5e-3)):
        sim = ArmSimulator(model, Q0, integrator=integrator)
        e0 = sim.energy()
        scale = abs(model.potential_energy(Q0) - model.potential_energy(np.zeros(6))) + 1.0
        drift = 0.0
        for _ in range(int(0.4 / dt)):
            sim.step(dt, control=False)
            drift = max(drift, abs(sim.energy() - e0))
        assert np.abs(sim.state.q - Q0).max() > 0.05, "the arm should have fallen noticeably"
        assert drift < tol * scale, f"{integrator}: energy drift {drift:.3g} J (scale {scale:.3g} J)"


def test_wrench_torque_is_jacobian_transpose(model: RobotModel) -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = Q0 + rng.uniform(-0.5, 0.5, 6)
        w_tcp = rng.normal(size=6) * [30, 30, 30, 2, 2, 2]
        sim = ArmSimulator(model, q)
        sim.set_wrench(w_tcp, "tcp")
        tau_ext = sim.external_torque(q)
        # (1) the dynamics contract: rnea with f_ext subtracts J^T w
        w_root, link = wrench_to_root(model, q, w_tcp, "tcp")
        z = np.zeros(6)
        tau_rnea = model.rnea(q, z, z) - model.rnea(q, z, z, f_ext={link: w_root})
        np.testing.assert_allclose(tau_ext, tau_rnea, atol=1e-9)
        # (2) virtual work, from forward kinematics alone: tau_i = f . dp/dq_i + t . dtheta/dq_i
        X = model.fk(q, "tcp")
        f = X[:3, :3] @ w_tcp[:3]
        m = X[:3, :3] @ w_tcp[3:]
        h = 1e-6
        tau_vw = np.empty(6)
        for i in range(6):
            dq = np.zeros(6)
            dq[i] = h
            Xp, Xm = model.fk(q + dq, "tcp"), model.fk(q - dq, "tcp")
            dp = (Xp[:3, 3] - Xm[:3, 3]) / (2 * h)
            dR = (Xp[:3, :3] - Xm[:3, :3]) / (2 * h) @ X[:3, :3].T  # skew(omega)
            omega = np.array([dR[2, 1], dR[0, 2], dR[1, 0]])
            tau_vw[i] = f @ dp + m @ omega
        np.testing.assert_allclose(tau_ext, tau_vw, atol=1e-6 * (1 + np.abs(tau_vw).max()))


def test_root_frame_wrench_and_unknown_frame(model: RobotModel) -> None:
    w = np.array([0.0, 0.0, -20.0, 0.0, 0.0, 0.0])
    w_root, link = wrench_to_root(model, Q0, w, "base_link")
    assert link == model.tip_link
    np.testing.assert_array_equal(w_root, w)
    with pytest.raises(InputError, match="unknown frame 'nowhere'"):
        wrench_to_root(model, Q0, w, "nowhere")
    with pytest.raises(InputError, match="6 finite values"):
        wrench_to_root(model, Q0, [0, np.nan, 0, 0, 0, 0], "tcp")


def test_static_wrench_equilibrium(model: RobotModel) -> None:
    """Holding against a constant push, the arm settles where motor + wrench torque balance gravity."""
    sim = ArmSimulator(model, Q0)
    sim.set_wrench([0.0, 0.0, 40.0, 0.0, 0.0, 0.0], "base_link")  # push the tool up with 40 N
    for _ in range(3000):
        st = sim.step(1e-3)
    np.testing.assert_allclose(st.qd, 0.0, atol=1e-6)
    np.testing.assert_allclose(st.tau + st.tau_ext, model.gravity_torques(st.q), atol=1e-6)
    # the arm yields to the push: the tool moved up
    assert model.fk(st.q)[2, 3] > model.fk(Q0)[2, 3]


def test_end_stop_and_effort_clip(model: RobotModel) -> None:
    q = Q0.copy()
    q[2] = model.upper[2] - 1e-3
    sim = ArmSimulator(model, q)
    sim.state.qd[2] = 2.0  # driving into the elbow's end stop
    peak = []
    for _ in range(5):
        st = sim.step(1e-3, control=False)
        peak.append(st.q[2])
        if st.q[2] == model.upper[2]:
            assert st.qd[2] <= 0.0  # no velocity into the stop
    assert max(peak) == model.upper[2]  # reached the stop, never beyond
    ctrl = ComputedTorqueController(model, 1e9, 0.0)
    tau = ctrl.torque(Q0, np.zeros(6), Q0 + 1.0, np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(np.abs(tau), model.effort_limits)


def test_bad_simulator_input(model: RobotModel) -> None:
    with pytest.raises(InputError, match="expected 6 values"):
        ArmSimulator(model, [0.0] * 5)
    with pytest.raises(InputError, match="outside its limits"):
        ArmSimulator(model, [0, 0, 4.0, 0, 0, 0])
    sim = ArmSimulator(model, Q0)
    with pytest.raises(InputError, match="dt"):
        sim.step(0.0)
    before = sim.trajectory
    with pytest.raises(InputError):
        sim.command_positions([0, 0, 9, 0, 0, 0])
    assert sim.trajectory is before  # the goal is kept


def test_shift_commands_moves_the_followed_and_the_pending_trajectory_earlier(model: RobotModel) -> None:
    """Skipped sim time (a wall-clock arm catching up): the commands keep their times, so in sim
    time each starts ``delta`` earlier; the reference at t + delta after the shift is what it was at t."""
    sim = ArmSimulator(model, Q0)
    goal = Q0 + np.array([0.4, -0.2, 0.3, 0.1, -0.2, 0.5])
    sim.command_trajectory(model.joint_names, [0.0, 2.0], np.array([Q0, goal]), np.zeros((2, 6)))
    sim.command_trajectory(model.joint_names, [0.0, 1.0], np.array([goal, Q0]), np.zeros((2, 6)), start_time=1.5)
    before = [sim.reference(t)[0] for t in (0.3, 1.2, 1.7, 2.4)]
    sim.shift_commands(0.25)
    after = [sim.reference(t - 0.25)[0] for t in (0.3, 1.2, 1.7, 2.4)]
    np.testing.assert_allclose(after, before, atol=1e-12)

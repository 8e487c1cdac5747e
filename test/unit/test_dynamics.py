"""Dynamics identities and textbook oracles (no Pinocchio here: see test_dynamics_pinocchio.py)."""

# ruff: noqa: E501  (URDF snippets read better on one line)

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.dynamics import RobotModel

REPO = Path(__file__).resolve().parents[2]
G = 9.81


def _inertial(m: float, xyz: str, ixx: float, iyy: float, izz: float) -> str:
    return (f'<inertial><origin xyz="{xyz}"/><mass value="{m}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>')


def two_link_planar(m1=2.0, m2=1.5, l1=0.8, lc1=0.35, lc2=0.3, I1=0.07, I2=0.04) -> str:
    """Planar 2R arm in the x-y plane, joints about z, gravity along -y when passed (0, -g, 0)."""
    return f"""<robot name="planar2r">
  <link name="base"/>
  <link name="l1">{_inertial(m1, f"{lc1} 0 0", 0.01, 0.01, I1)}</link>
  <link name="l2">{_inertial(m2, f"{lc2} 0 0", 0.01, 0.01, I2)}</link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="100" velocity="5"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="{l1} 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="100" velocity="5"/></joint>
</robot>"""


def rod(mass: float = 1.0, length: float = 1.0) -> str:
    """Uniform thin rod along x pinned at the origin, rotating about z; tip frame at x = L."""
    izz = mass * length**2 / 12.0
    return f"""<robot name="rod">
  <link name="base"/>
  <link name="rod">{_inertial(mass, f"{length / 2} 0 0", 1e-12, izz, izz)}</link>
  <link name="tip"/>
  <joint name="pin" type="continuous"><parent link="base"/><child link="rod"/><axis xyz="0 0 1"/></joint>
  <joint name="tip_joint" type="fixed"><parent link="rod"/><child link="tip"/><origin xyz="{length} 0 0"/></joint>
</robot>"""


SLIDER_PENDULUM = """<robot name="slider_pendulum">
  <link name="base"/>
  <link name="cart"><inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="bob"><inertial><origin xyz="0 0 -0.5"/><mass value="0.7"/><inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.01"/></inertial></link>
  <link name="tcp"/>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="cart"/><origin xyz="0 0 1" rpy="0 0 0.3"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="100" velocity="2"/></joint>
  <joint name="swing" type="revolute"><parent link="cart"/><child link="bob"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="100" velocity="5"/></joint>
  <joint name="t" type="fixed"><parent link="bob"/><child link="tcp"/><origin xyz="0 0 -0.6"/></joint>
</robot>"""


@pytest.fixture(scope="module")
def ur10e() -> RobotModel:
    return RobotModel.from_urdf(REPO / "urdf" / "ur10e_grinding.urdf")


@pytest.fixture(scope="module", params=["ur10e", "slider_pendulum"])
def robot(request, ur10e) -> RobotModel:
    return ur10e if request.param == "ur10e" else RobotModel.from_urdf_string(SLIDER_PENDULUM)


def _state(m: RobotModel, seed: int):
    rng = np.random.default_rng(seed)
    lo = np.where(np.isfinite(m.lower), m.lower, -np.pi)
    hi = np.where(np.isfinite(m.upper), m.upper, np.pi)
    return rng.uniform(lo, hi), rng.normal(0, 1.0, m.nq), rng.normal(0, 2.0, m.nq)


# ------------------------------------------------------------------------------------------------
# textbook oracles


def test_two_link_planar_arm_closed_form() -> None:
    m1, m2, l1, lc1, lc2, I1, I2 = 2.0, 1.5, 0.8, 0.35, 0.3, 0.07, 0.04
    m = RobotModel.from_urdf_string(two_link_planar(m1, m2, l1, lc1, lc2, I1, I2))
    rng = np.random.default_rng(0)
    gvec = (0.0, -G, 0.0)
    for _ in range(5):
        q, qd, qdd = rng.normal(size=(3, 2))
        c2, s2 = np.cos(q[1]), np.sin(q[1])
        M = np.array([
            [I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c2), I2 + m2 * (lc2**2 + l1 * lc2 * c2)],
            [I2 + m2 * (lc2**2 + l1 * lc2 * c2), I2 + m2 * lc2**2],
        ])
        h = m2 * l1 * lc2 * s2
        cor = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
        grav = np.array([
            (m1 * lc1 + m2 * l1) * G * np.cos(q[0]) + m2 * lc2 * G * np.cos(q[0] + q[1]),
            m2 * lc2 * G * np.cos(q[0] + q[1]),
        ])
        np.testing.assert_allclose(m.mass_matrix(q), M, rtol=1e-13)
        np.testing.assert_allclose(m.rnea(q, qd, qdd, gravity=gvec), M @ qdd + cor + grav, rtol=1e-12, atol=1e-12)


def test_pinned_rod_effective_mass_oracle() -> None:
    """Uniform rod m=1, L=1 pinned at one end: I_pin = m L^2 / 3, so a push at distance r
    perpendicular to the rod meets m_eff = I_pin / r^2 (1/3 kg at the tip, 4/3 kg at the middle);
    along the rod the pin takes the push (infinite effective mass)."""
    m = RobotModel.from_urdf_string(rod(1.0, 1.0), tip_link="tip")
    for theta in (0.0, 0.7, -2.0):
        c, s = np.cos(theta), np.sin(theta)
        tip, mid, perp = np.array([c, s, 0.0]), np.array([c, s, 0.0]) / 2, np.array([-s, c, 0.0])
        assert m.effective_mass([theta], "tip", tip, perp) == pytest.approx(1.0 / 3.0, rel=1e-9)
        assert m.effective_mass([theta], "rod", mid, -perp) == pytest.approx(4.0 / 3.0, rel=1e-9)
        assert m.effective_mass([theta], "tip", tip, tip) == np.inf
        # 45 degrees off the normal: only the normal component moves, m = (1/3) / cos^2(45 deg)
        oblique = (perp + tip) / np.sqrt(2.0)
        assert m.effective_mass([theta], "tip", tip, oblique) == pytest.approx(2.0 / 3.0, rel=1e-9)


def test_prismatic_and_pendulum_oracle() -> None:
    """Cart (slide along a rotated x) carrying a pendulum: check against Lagrange by hand."""
    m = RobotModel.from_urdf_string(SLIDER_PENDULUM)
    mc, mb, lb, Iyy = 2.0, 0.7, 0.5, 0.03
    q, qd, qdd = np.array([0.3, 0.4]), np.array([0.5, -1.2]), np.array([0.7, 0.9])
    th = q[1]
    # bob centre in the cart frame: Ry(th) @ (0, 0, -lb) = (-lb sin th, 0, -lb cos th)
    M = np.array([[mc + mb, -mb * lb * np.cos(th)], [-mb * lb * np.cos(th), Iyy + mb * lb**2]])
    cor = np.array([mb * lb * np.sin(th) * qd[1] ** 2, 0.0])
    grav = np.array([0.0, mb * G * lb * np.sin(th)])
    np.testing.assert_allclose(m.mass_matrix(q), M, rtol=1e-13)
    np.testing.assert_allclose(m.rnea(q, qd, qdd), M @ qdd + cor + grav, rtol=1e-12)


# ------------------------------------------------------------------------------------------------
# identities


def test_mass_matrix_is_the_derivative_of_tau_in_qdd(robot: RobotModel) -> None:
    q, qd, qdd = _state(robot, 1)
    wrench = {robot.tip_link: np.array([3.0, -2.0, 5.0, 0.4, 0.1, -0.3])}
    base = robot.rnea(q, qd, qdd, f_ext=wrench)
    M = robot.mass_matrix(q)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-12)
    assert np.linalg.eigvalsh(M).min() > 0
    for i in range(robot.nq):
        e = np.zeros(robot.nq)
        e[i] = 1.0
        col = robot.rnea(q, qd, qdd + e, f_ext=wrench) - base  # tau is affine in qdd
        np.testing.assert_allclose(col, M[:, i], rtol=1e-9, atol=1e-9)


def test_gravity_is_rnea_at_rest_and_the_gradient_of_potential(robot: RobotModel) -> None:
    q, qd, _ = _state(robot, 2)
    z = np.zeros(robot.nq)
    g = robot.gravity_torques(q)
    np.testing.assert_array_equal(g, robot.rnea(q, z, z))
    np.testing.assert_array_equal(g, robot.bias_forces(q, z))
    h = 1e-6
    grad = np.array([(robot.potential_energy(q + h * e) - robot.potential_energy(q - h * e)) / (2 * h)
                     for e in np.eye(robot.nq)])
    np.testing.assert_allclose(g, grad, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(robot.rnea(q, z, z, gravity=(0, 0, 0)), z, atol=1e-15)
    # Coriolis/centrifugal: bias minus gravity is quadratic in qd
    c1 = robot.bias_forces(q, qd) - g
    c2 = robot.bias_forces(q, 2 * qd) - g
    np.testing.assert_allclose(c2, 4 * c1, rtol=1e-9, atol=1e-12)


def test_forward_and_inverse_dynamics_invert_each_other(robot: RobotModel) -> None:
    q, qd, qdd = _state(robot, 3)
    wrench = {robot.link_names[-1]: np.array([1.0, 2.0, -3.0, 0.2, -0.1, 0.05])}
    tau = robot.rnea(q, qd, qdd, f_ext=wrench)
    np.testing.assert_allclose(robot.forward_dynamics(q, qd, tau, f_ext=wrench), qdd, rtol=1e-9, atol=1e-9)
    tau2 = np.random.default_rng(4).normal(size=robot.nq)
    back = robot.rnea(q, qd, robot.forward_dynamics(q, qd, tau2))
    np.testing.assert_allclose(back, tau2, rtol=1e-9, atol=1e-9)


def test_external_wrench_acts_through_the_jacobian_transpose(robot: RobotModel) -> None:
    q, qd, qdd = _state(robot, 5)
    rng = np.random.default_rng(6)
    wrenches = {name: rng.normal(size=6) for name in robot.link_names[1:]}
    expected = robot.rnea(q, qd, qdd)
    for name, w in wrenches.items():
        expected -= robot.jacobian(q, name).T @ w
    np.testing.assert_allclose(robot.rnea(q, qd, qdd, f_ext=wrenches), expected, rtol=1e-10, atol=1e-10)
    # array form, indexed like link_names (the root link's entry moves nothing)
    arr = np.zeros((len(robot.link_names), 6))
    for name, w in wrenches.items():
        arr[robot.link_names.index(name)] = w
    arr[0] = 100.0
    np.testing.assert_allclose(robot.rnea(q, qd, qdd, f_ext=arr), expected, rtol=1e-10, atol=1e-10)
    # a force at a point: its torque about the link origin gives the same as J(point)^T f
    link = robot.tip_link
    point = robot.fk(q, link)[:3, 3] + np.array([0.03, -0.02, 0.05])
    f = np.array([10.0, -4.0, 7.0])
    w = np.concatenate([f, np.cross(point - robot.fk(q, link)[:3, 3], f)])
    np.testing.assert_allclose(robot.rnea(q, qd, qdd, f_ext={link: w}),
                               robot.rnea(q, qd, qdd) - robot.jacobian(q, link, point)[:3].T @ f, rtol=1e-10, atol=1e-10)


def test_batch_equals_single_calls(robot: RobotModel) -> None:
    rng = np.random.default_rng(8)
    B = 7
    Q = np.array([_state(robot, s)[0] for s in range(B)])
    QD, QDD = rng.normal(size=(2, B, robot.nq))
    W = rng.normal(size=(B, 6))
    tau = robot.rnea(Q, QD, QDD, f_ext={robot.tip_link: W})
    assert tau.shape == (B, robot.nq)
    Ms, fd, T = robot.mass_matrix(Q), robot.forward_dynamics(Q, QD, tau, f_ext={robot.tip_link: W}), robot.fk(Q)
    for b in range(B):
        np.testing.assert_array_equal(tau[b], robot.rnea(Q[b], QD[b], QDD[b], f_ext={robot.tip_link: W[b]}))
        np.testing.assert_array_equal(Ms[b], robot.mass_matrix(Q[b]))
        np.testing.assert_array_equal(T[b], robot.fk(Q[b]))
        np.testing.assert_allclose(fd[b], QDD[b], rtol=1e-9, atol=1e-9)
    empty = np.zeros((0, robot.nq))
    assert robot.rnea(empty, empty, empty, f_ext={robot.tip_link: np.zeros(6)}).shape == (0, robot.nq)
    assert robot.forward_dynamics(empty, empty, empty).shape == (0, robot.nq)
    assert robot.mass_matrix(empty).shape == (0, robot.nq, robot.nq)


def test_jacobian_is_the_derivative_of_fk(robot: RobotModel) -> None:
    q, qd, _ = _state(robot, 9)
    h = 1e-7
    T0, T1 = robot.fk(q - h * qd), robot.fk(q + h * qd)
    v = (T1[:3, 3] - T0[:3, 3]) / (2 * h)
    dR = (T1[:3, :3] - T0[:3, :3]) / (2 * h)
    W = dR @ robot.fk(q)[:3, :3].T
    omega = np.array([W[2, 1], W[0, 2], W[1, 0]])
    np.testing.assert_allclose(robot.jacobian(q) @ qd, np.concatenate([v, omega]), rtol=1e-6, atol=1e-7)


def _rk4(model: RobotModel, q, qd, dt, steps, gravity):
    def f(x, v):
        return v, model.forward_dynamics(x, v, np.zeros(model.nq), gravity=gravity)

    for _ in range(steps):
        k1q, k1v = f(q, qd)
        k2q, k2v = f(q + 0.5 * dt * k1q, qd + 0.5 * dt * k1v)
        k3q, k3v = f(q + 0.5 * dt * k2q, qd + 0.5 * dt * k2v)
        k4q, k4v = f(q + dt * k3q, qd + dt * k3v)
        q = q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        qd = qd + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return q, qd


@pytest.mark.parametrize("gravity", [(0.0, 0.0, -G), (0.0, 0.0, 0.0)], ids=["gravity", "no_gravity"])
def test_free_swing_conserves_energy(robot: RobotModel, gravity) -> None:
    q0, qd0, _ = _state(robot, 10)
    qd0 = qd0 * 0.5

    def energy(q, qd):
        return robot.kinetic_energy(q, qd) + robot.potential_energy(q, gravity=gravity)

    e0 = energy(q0, qd0)
    q, qd = _rk4(robot, q0, qd0, 2e-4, 2000, gravity)  # 0.4 s of free motion
    assert np.linalg.norm(q - q0) > 0.05  # it did move
    scale = robot.kinetic_energy(q0, qd0) + abs(robot.potential_energy(q0, gravity=gravity)) + 1.0
    assert abs(energy(q, qd) - e0) / scale < 1e-8


def test_effective_mass_equals_impulse_response(ur10e: RobotModel) -> None:
    """An impulse P along n at a point changes the point's normal velocity by P / m_eff."""
    m = ur10e
    q, qd, _ = _state(m, 12)
    tcp = m.fk(q, "tcp")
    point = tcp[:3, 3] + tcp[:3, :3] @ np.array([0.0, 0.0, 0.02])  # on the abrasive head's surface
    n = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    meff = m.effective_mass(q, "tcp", point, n)
    assert 0 < meff < np.inf
    # the impulse as a force F = P / dt during dt through f_ext, the torque taken about tcp's origin
    P, dt = 1.0, 1e-3
    F = P / dt * n
    w = np.concatenate([F, np.cross(point - tcp[:3, 3], F)])
    dqd = (m.forward_dynamics(q, qd, m.rnea(q, qd, np.zeros(m.nq)), f_ext={"tcp": w})
           - m.forward_dynamics(q, qd, m.rnea(q, qd, np.zeros(m.nq)))) * dt
    dv = n @ m.jacobian(q, "tcp", point)[:3] @ dqd
    assert dv == pytest.approx(P / meff, rel=1e-9)


def test_default_robot_loads_with_tcp_tip(ur10e: RobotModel) -> None:
    assert ur10e.tip_link == "tcp" and ur10e.nq == 6
    np.testing.assert_allclose(ur10e.fk(np.zeros(6), "tcp"), ur10e.fk(np.zeros(6)))


# ------------------------------------------------------------------------------------------------
# bad input


def test_bad_input_names_the_argument(ur10e: RobotModel) -> None:
    m = ur10e
    q = np.zeros(6)
    cases = [
        (lambda: m.rnea(np.zeros(5), q, q), "q must have shape"),
        (lambda: m.rnea(q, np.zeros(7), q), "qd"),
        (lambda: m.rnea(q, q, np.zeros((2, 6))), "qdd"),
        (lambda: m.rnea(np.full(6, np.nan), q, q), "q holds NaN"),
        (lambda: m.rnea(q, np.array([0, 0, np.inf, 0, 0, 0]), q), "qd holds NaN"),
        (lambda: m.rnea(q, q, q, gravity=(0, 0, np.nan)), "gravity holds NaN"),
        (lambda: m.rnea(q, q, q, gravity=(0, 9.81)), "gravity must be a 3-vector"),
        (lambda: m.rnea(q, q, q, f_ext={"tcp": [np.nan] * 6}), "f_ext holds NaN"),
        (lambda: m.rnea(q, q, q, f_ext={"nowhere": np.zeros(6)}), "unknown link 'nowhere'"),
        (lambda: m.rnea(q, q, q, f_ext={"tcp": np.zeros(3)}), "f_ext['tcp']"),
        (lambda: m.rnea(q, q, q, f_ext=np.zeros((3, 6))), "f_ext must be"),
        (lambda: m.forward_dynamics(q, q, np.full(6, np.nan)), "tau holds NaN"),
        (lambda: m.mass_matrix([0, 0, 0, 0, 0, np.nan]), "q holds NaN"),
        (lambda: m.mass_matrix(np.zeros((2, 3))), "q must have shape"),
        (lambda: m.fk(q, "nowhere"), "unknown link"),
        (lambda: m.fk(np.full(6, np.nan)), "q holds NaN"),
        (lambda: m.jacobian(q, "tcp", point=[0, 0]), "point"),
        (lambda: m.jacobian(np.zeros((2, 6))), "one configuration"),
        (lambda: m.effective_mass(q, "tcp", np.zeros(3), np.zeros(3)), "direction"),
        (lambda: m.rnea("abc", q, q), "q"),
    ]
    for call, fragment in cases:
        with pytest.raises(InputError) as exc:
            call()
        assert fragment in str(exc.value), (fragment, str(exc.value))


# ------------------------------------------------------------------------------------------------
# grinding dynamics (the CLI prints what the model computes)


def test_cli_dynamics_json_matches_the_model(ur10e: RobotModel, capsys) -> None:
    import json

    from robot_grinding_sim.cli import main

    q = [0.1, -1.2, 1.4, -1.7, -1.5, 0.3]
    qd = [0.2, 0.1, -0.3, 0.0, 0.5, 0.0]
    args = ["dynamics", "--json", "--q", ",".join(map(str, q)), "--qd", ",".join(map(str, qd))]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tip_link"] == "tcp" and out["joint_names"] == ur10e.joint_names
    np.testing.assert_allclose(out["torques"], ur10e.rnea(q, qd, np.zeros(6)), rtol=1e-12)
    np.testing.assert_allclose(out["gravity_torques"], ur10e.gravity_torques(q), rtol=1e-12)
    np.testing.assert_allclose(out["mass_matrix"], ur10e.mass_matrix(q), rtol=1e-12)
    T = ur10e.fk(q, "tcp")
    np.testing.assert_allclose(out["tip_pose"]["matrix"], T, atol=1e-14)
    assert out["effective_mass_along_tool_axis"] == pytest.approx(
        ur10e.effective_mass(q, "tcp", T[:3, 3], T[:3, 2]), rel=1e-12)


@pytest.mark.parametrize("args, fragment", [
    (["--q", "1,2"], "--q must have 6 values"),
    (["--qd", "a,b,c,d,e,f"], "--qd must be 6 comma-separated numbers"),
    (["--qdd", "0,0,0,0,0,nan"], "--qdd holds NaN"),
    (["--urdf", "/nonexistent/robot.urdf"], "does not exist"),
    (["--tip", "ghost"], "tip link 'ghost'"),
])
def test_cli_dynamics_bad_input_exits_2_with_one_line(args, fragment, capsys) -> None:
    from robot_grinding_sim.cli import main

    assert main(["dynamics", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grinding dynamics: error:") and fragment in err
    assert err.count("\n") == 1


def test_strided_integer_and_list_inputs_give_the_same_answer(ur10e: RobotModel) -> None:
    A = np.random.default_rng(13).normal(size=(6, 3))
    q, qd, qdd = A[:, 0], A[:, 1], A[:, 2]  # non-contiguous views
    ref = ur10e.rnea(q.copy(), qd.copy(), qdd.copy())
    np.testing.assert_array_equal(ur10e.rnea(q, qd, qdd), ref)
    np.testing.assert_array_equal(ur10e.rnea(list(q), tuple(qd), qdd), ref)
    np.testing.assert_array_equal(ur10e.mass_matrix(q), ur10e.mass_matrix(q.copy()))
    np.testing.assert_array_equal(ur10e.forward_dynamics(q, qd, qdd), ur10e.forward_dynamics(q.copy(), qd.copy(), qdd.copy()))
    Q = np.random.default_rng(14).normal(size=(4, 12))[:, ::2]  # strided batch
    np.testing.assert_array_equal(ur10e.mass_matrix(Q), ur10e.mass_matrix(Q.copy()))
    zi = np.zeros(6, dtype=int)
    np.testing.assert_array_equal(ur10e.gravity_torques(zi), ur10e.gravity_torques(np.zeros(6)))


def test_effective_mass_matches_the_dense_formula(ur10e: RobotModel) -> None:
    rng = np.random.default_rng(21)
    for s in range(5):
        q = _state(ur10e, 30 + s)[0]
        link = ur10e.link_names[rng.integers(2, len(ur10e.link_names))]
        point = ur10e.fk(q, link)[:3, 3] + rng.normal(0, 0.1, 3)
        n = rng.normal(size=3)
        J = ur10e.jacobian(q, link, point)[:3]
        x = J.T @ (n / np.linalg.norm(n))
        dense = 1.0 / (x @ np.linalg.solve(ur10e.mass_matrix(q), x))
        assert ur10e.effective_mass(q, link, point, n) == pytest.approx(dense, rel=1e-10)
    # a link fixed to the root cannot be moved by any joint
    assert ur10e.effective_mass(np.zeros(6), ur10e.root_link, np.zeros(3), [0, 0, 1]) == np.inf
    with pytest.raises(InputError, match="q holds NaN"):
        ur10e.effective_mass(np.full(6, np.nan), "tcp", np.zeros(3), [0, 0, 1])
    with pytest.raises(InputError, match="point holds NaN"):
        ur10e.effective_mass(np.zeros(6), "tcp", [np.nan, 0, 0], [0, 0, 1])
    with pytest.raises(InputError, match="unknown link"):
        ur10e.effective_mass(np.zeros(6), "nowhere", np.zeros(3), [0, 0, 1])

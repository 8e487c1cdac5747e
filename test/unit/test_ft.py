"""core.ft: the F/T sensor model against Pinocchio (wrench transport), statics, the analytic
response of a first-order filter, noise statistics, tare and bad parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams, transform_wrench
from robot_grinding_sim.core.errors import InputError


def X(p, rotvec):
    T = np.eye(4)
    T[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    T[:3, 3] = p
    return T


def test_wrench_transport_agrees_with_pinocchio():
    import pinocchio as pin
    rng = np.random.default_rng(0)
    for _ in range(20):
        T = X(rng.normal(size=3) * 0.2, rng.normal(size=3))
        w = rng.normal(size=6) * 10
        ref = pin.SE3(T[:3, :3], T[:3, 3]).act(pin.Force(w[:3], w[3:]))
        got = transform_wrench(w, T)
        np.testing.assert_allclose(got[:3], ref.linear, atol=1e-12)
        np.testing.assert_allclose(got[3:], ref.angular, atol=1e-12)


def test_contact_force_below_the_sensor_statics():
    """A 10 N push up at a tcp 0.2 m below the sensor and 0.05 m off-axis: F and the lever arm."""
    ft = FTSensorModel(FTSensorParams(X_S_tcp=X([0.05, 0.0, 0.2], [0, 0, 0])))
    r = ft.measure([0, 0, -10.0, 0, 0, 0], np.eye(3), 0.0)
    np.testing.assert_allclose(r, [0, 0, -10.0, 0.0, 0.05 * 10.0, 0.0], atol=1e-12)


def test_tool_gravity_in_any_orientation():
    m, com = 2.18, np.array([0.01, -0.02, 0.08])
    ft = FTSensorModel(FTSensorParams(tool_mass=m, tool_com=com))
    # tool pointing down (sensor z along world -z): the weight pulls along sensor +z
    R_down = Rotation.from_rotvec([math.pi, 0, 0]).as_matrix()
    w = ft.gravity_wrench(R_down)
    np.testing.assert_allclose(w[:3], [0, 0, m * 9.81], atol=1e-12)
    np.testing.assert_allclose(w[3:], np.cross(com, [0, 0, m * 9.81]), atol=1e-12)
    # any orientation: |F| = m g and the world-frame force is m g
    rng = np.random.default_rng(1)
    for _ in range(10):
        R = Rotation.random(random_state=rng).as_matrix()
        w = ft.gravity_wrench(R)
        np.testing.assert_allclose(R @ w[:3], [0, 0, -m * 9.81], atol=1e-12)


def test_first_order_filter_step_response_at_irregular_samples():
    fc = 50.0
    tau = 1 / (2 * math.pi * fc)
    ft = FTSensorModel(FTSensorParams(cutoff_hz=fc))
    ft.measure(np.zeros(6), np.eye(3), 0.0)
    rng = np.random.default_rng(2)
    t = 0.0
    for _ in range(200):
        t += rng.uniform(1e-4, 3e-3)
        y = ft.measure([1.0, 2.0, 0, 0, 0, 0], np.eye(3), t)
        # input held at 1 from the sample at t = 0 on (zero-order hold): y = 1 - exp(-t / tau)
        expected = -math.expm1(-t / tau)
        assert y[0] == pytest.approx(expected, abs=1e-12)
        assert y[1] == pytest.approx(2 * expected, abs=1e-12)


def test_filter_attenuates_at_cutoff():
    fc, dt = 20.0, 1e-4
    ft = FTSensorModel(FTSensorParams(cutoff_hz=fc))
    ts = np.arange(0, 1.0, dt)
    out = np.array([ft.measure([math.sin(2 * math.pi * fc * t), 0, 0, 0, 0, 0], np.eye(3), t)[0] for t in ts])
    amplitude = np.abs(out[ts > 0.5]).max()
    assert amplitude == pytest.approx(1 / math.sqrt(2), rel=0.01)


def test_noise_and_bias_statistics_and_repeatability():
    std = np.array([0.5, 0.5, 1.0, 0.01, 0.01, 0.02])
    bias = np.array([1.0, -2.0, 3.0, 0.1, -0.1, 0.05])
    p = FTSensorParams(bias=bias, noise_std=std, seed=7)
    ft = FTSensorModel(p)
    samples = np.array([ft.measure(np.zeros(6), np.eye(3), k * 1e-3) for k in range(20000)])
    assert (np.abs(samples.mean(axis=0) - bias) < 4 * std / math.sqrt(20000)).all()  # 4 sigma of the mean
    np.testing.assert_allclose(samples.std(axis=0), std, rtol=0.03)
    again = FTSensorModel(p)
    np.testing.assert_array_equal(again.measure(np.zeros(6), np.eye(3), 0.0), samples[0])


def test_tare_zeroes_the_current_reading():
    m, com = 2.0, np.array([0, 0, 0.1])
    ft = FTSensorModel(FTSensorParams(tool_mass=m, tool_com=com, bias=[1, 2, 3, 0.1, 0.2, 0.3]))
    R0 = np.eye(3)
    ft.measure(np.zeros(6), R0, 0.0)
    offset = ft.tare()
    np.testing.assert_allclose(offset, [1, 2, 3 - m * 9.81, 0.1, 0.2, 0.3], atol=1e-12)
    np.testing.assert_allclose(ft.measure(np.zeros(6), R0, 0.001), 0.0, atol=1e-12)
    # after the tare a contact force reads as itself; a new orientation reads the weight change
    np.testing.assert_allclose(ft.measure([0, 0, 5.0, 0, 0, 0], R0, 0.002)[:3], [0, 0, 5.0], atol=1e-12)
    R1 = Rotation.from_rotvec([math.pi / 2, 0, 0]).as_matrix()
    r = ft.measure(np.zeros(6), R1, 0.003)
    np.testing.assert_allclose(r[:3], m * (R1.T @ [0, 0, -9.81]) - [0, 0, -m * 9.81], atol=1e-12)


def test_time_going_backwards_restarts_the_filter():
    ft = FTSensorModel(FTSensorParams(cutoff_hz=1.0))
    ft.measure(np.zeros(6), np.eye(3), 5.0)
    y = ft.measure(np.ones(6), np.eye(3), 0.0)
    np.testing.assert_allclose(y, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tool_mass": -1.0}, "tool_mass must be >= 0"),
        ({"tool_com": [0, 0]}, "tool_com must have 3 elements"),
        ({"bias": [0, 0, np.nan, 0, 0, 0]}, "bias contains NaN"),
        ({"noise_std": [-1, 0, 0, 0, 0, 0]}, "noise_std must be >= 0"),
        ({"cutoff_hz": 0.0}, "cutoff_hz must be > 0"),
        ({"X_S_tcp": np.diag([1.0, 1.0, 2.0, 1.0])}, "not a rotation"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(InputError, match=match):
        FTSensorParams(**kwargs)


def test_bad_samples():
    ft = FTSensorModel()
    with pytest.raises(InputError, match="wrench must have 6 elements"):
        ft.measure([1, 2, 3], np.eye(3), 0.0)
    with pytest.raises(InputError, match="NaN"):
        ft.measure([np.nan] * 6, np.eye(3), 0.0)
    with pytest.raises(InputError, match="not a rotation"):
        ft.measure(np.zeros(6), 2 * np.eye(3), 0.0)
    with pytest.raises(InputError, match="sample time"):
        ft.measure(np.zeros(6), np.eye(3), float("nan"))


def test_sensor_orientation_from_the_tcp_is_pinocchios_sensor_frame(tmp_path):
    """contact_solver_node and the in-process outputs take the sensor's orientation from the tcp's
    (the two are rigidly mounted): Pinocchio's own frames agree at random q, on the package URDF
    with the spindle turned on the sensor (so that the tcp's axes are not the sensor's)."""
    import pinocchio as pin

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.resources import default_urdf
    from robot_grinding_sim.core.robot.dynamics import RobotModel
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    text = default_urdf().read_text()
    mount = '<child link="spindle"/>\n    <origin xyz="0 0 0" rpy="0 0 0"/>'
    assert mount in text
    urdf = tmp_path / "turned.urdf"
    urdf.write_text(text.replace(mount, '<child link="spindle"/>\n    <origin xyz="0.01 0 0" rpy="0.4 -0.7 1.2"/>'))
    cell = CellConfig()
    ft = ft_sensor_model(cell, RobotModel.from_urdf(urdf, tip_link=cell.tool.tcp_link))
    assert np.abs(ft.params.X_S_tcp[:3, :3] - np.eye(3)).max() > 0.5
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    f_tcp, f_ft = pm.getFrameId(cell.tool.tcp_link), pm.getFrameId(cell.ft_sensor.frame)
    rng = np.random.default_rng(3)
    R_tcp, R_ft = [], []
    for _ in range(20):
        pin.framesForwardKinematics(pm, data, rng.uniform(-3, 3, pm.nq))
        R_tcp.append(data.oMf[f_tcp].rotation.copy())
        R_ft.append(data.oMf[f_ft].rotation.copy())
        np.testing.assert_allclose(ft.sensor_orientation(R_tcp[-1]), R_ft[-1], atol=1e-12)
    np.testing.assert_allclose(ft.sensor_orientation(np.array(R_tcp)), np.array(R_ft), atol=1e-12)

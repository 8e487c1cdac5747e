"""FTProcessor undoes the simulated sensor (ft_sensor.FTSensorModel, its forward direction).

References: the contact wrench fed to the model (round trip), the model's true bias (tare), the
analytic first-order step response, scipy's Butterworth design and filter (order 2), and the
continuous second-order Butterworth step response.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import signal
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.contact.ft_processing import FTProcessor, LowPassFilter
from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams
from robot_grinding_sim.core.errors import InputError


def _pose(rotvec: list[float], p: list[float]) -> np.ndarray:
    X = np.eye(4)
    X[:3, :3] = Rotation.from_rotvec(rotvec).as_matrix()
    X[:3, 3] = p
    return X


TRUE = FTSensorParams(
    X_S_tcp=_pose([0.1, -0.3, 0.7], [0.01, -0.02, 0.185]),
    tool_mass=2.18,
    tool_com=[0.004, -0.006, 0.08],
    bias=[1.2, -0.7, 3.1, 0.05, -0.02, 0.011],
)


def _known(**changes: object) -> FTSensorParams:
    """The processing's parameters: the truth's tool and geometry, with changes."""
    fields = dict(X_S_tcp=TRUE.X_S_tcp, tool_mass=TRUE.tool_mass, tool_com=TRUE.tool_com, bias=TRUE.bias)
    fields.update(changes)
    return FTSensorParams(**fields)  # type: ignore[arg-type]


def _cases(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    R = Rotation.random(n, random_state=seed).as_matrix()
    W = rng.normal(size=(n, 6)) * [20, 20, 40, 1, 1, 0.5]
    return list(zip(W, R, strict=True))


def test_round_trip_returns_the_contact_wrench() -> None:
    sensor = FTSensorModel(TRUE)
    proc = FTProcessor(_known())
    for k, (w, R) in enumerate(_cases(50, seed=1)):
        out = proc.process(sensor.measure(w, R, 0.001 * k), R)
        np.testing.assert_allclose(out.tcp, w, rtol=0, atol=1e-9)
        np.testing.assert_allclose(out.sensor, sensor.contact_wrench(w), rtol=0, atol=1e-9)


def test_the_tool_weight_is_what_is_removed() -> None:
    # a negative control: without the tool's mass, the answer is off by the tool's weight
    sensor = FTSensorModel(TRUE)
    w, R = np.zeros(6), Rotation.from_rotvec([0.4, 0.2, 0.0]).as_matrix()
    out = FTProcessor(_known(tool_mass=0.0)).process(sensor.measure(w, R, 0.0), R)
    assert np.linalg.norm(out.sensor[:3]) == pytest.approx(2.18 * 9.81, rel=1e-12)


def test_gravity_is_along_minus_z_of_the_base() -> None:
    proc = FTProcessor(FTSensorParams(tool_mass=2.0, tool_com=[0.0, 0.0, 0.1]))
    # sensor z up: the weight pulls along -z of the sensor, no torque about its origin
    np.testing.assert_allclose(proc.gravity_wrench(np.eye(3)), [0, 0, -19.62, 0, 0, 0], atol=1e-12)
    # sensor turned -90 deg about x: its y axis points down, the weight is +y in S; torque c x F
    R = Rotation.from_rotvec([-math.pi / 2, 0, 0]).as_matrix()
    np.testing.assert_allclose(proc.gravity_wrench(R), [0, 19.62, 0, -0.1 * 19.62, 0, 0], atol=1e-12)


def test_tare_at_one_orientation_then_contact_at_others() -> None:
    sensor = FTSensorModel(TRUE)
    proc = FTProcessor(_known(bias=np.zeros(6)))  # bias unknown: to be found by the tare
    R0 = Rotation.from_rotvec([0.3, -1.1, 0.4]).as_matrix()
    bias = proc.tare(sensor.measure(np.zeros(6), R0, 0.0), R0)
    np.testing.assert_allclose(bias, TRUE.bias, rtol=0, atol=1e-9)
    for k, (w, R) in enumerate(_cases(30, seed=2)):
        np.testing.assert_allclose(proc.process(sensor.measure(w, R, 0.001 * (k + 1)), R).tcp, w, rtol=0, atol=1e-9)


def test_tare_averages_noisy_readings() -> None:
    noisy = FTSensorModel(_known(noise_std=[0.5] * 3 + [0.01] * 3, seed=4))
    proc = FTProcessor(_known(bias=np.zeros(6)))
    R0 = Rotation.from_rotvec([0.0, 0.6, 0.0]).as_matrix()
    readings = np.array([noisy.measure(np.zeros(6), R0, 0.001 * k) for k in range(4000)])
    bias = proc.tare(readings, R0)
    # the mean of 4000 samples: within 5 standard errors of the truth
    tol = 5 * np.array([0.5] * 3 + [0.01] * 3) / math.sqrt(4000)
    assert (np.abs(bias - TRUE.bias) < tol).all()


def test_first_order_step_response_is_the_analytic_one() -> None:
    fc, fs = 25.0, 1000.0
    f = LowPassFilter(fc, fs, order=1)
    assert f(np.zeros(6)).tolist() == [0.0] * 6  # starts at the first sample
    step = np.array([1.0, -2.0, 0.5, 0.1, 0.0, 3.0])
    for k in range(1, 400):
        expected = step * (1.0 - math.exp(-2.0 * math.pi * fc * k / fs))
        np.testing.assert_allclose(f(step), expected, rtol=0, atol=1e-12)


def test_butterworth_matches_scipy_and_the_continuous_response() -> None:
    fc, fs = 10.0, 5000.0
    f = LowPassFilter(fc, fs, order=2)
    f(np.zeros(6))
    n = 2000
    ours = np.array([f(np.ones(6))[0] for _ in range(n)])
    b, a = signal.butter(2, fc, btype="low", fs=fs)
    x = np.r_[0.0, np.ones(n)]
    ref = signal.lfilter(b, a, x)[1:]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-10)  # poles near 1: roundoff
    # continuous Butterworth (zeta = 1/sqrt 2): 1 - e^(-zeta w t) (cos w_d t + zeta / sqrt(1 - zeta^2) sin w_d t)
    w = 2 * math.pi * fc
    zeta = 1 / math.sqrt(2)
    wd = w * math.sqrt(1 - zeta**2)
    t = np.arange(1, n + 1) / fs
    cont = 1 - np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta / math.sqrt(1 - zeta**2) * np.sin(wd * t))
    # bilinear transform: close to the continuous response when fc << fs (a half-sample shift)
    assert np.abs(ours - cont).max() < 0.01
    assert ours.max() == pytest.approx(1 + math.exp(-math.pi * zeta / math.sqrt(1 - zeta**2)), abs=1e-3)


@pytest.mark.parametrize("order", [1, 2])
def test_a_backlog_filtered_at_once_is_the_same_as_one_by_one(order: int) -> None:
    """A reader's backlog (k readings in one read) goes through the filter in one call: the same
    outputs as k calls, in any split (the state carries over), and the same as scipy's filter of
    the whole stream started at rest at the first sample."""
    fc, fs = 30.0, 1000.0
    x = np.random.default_rng(3).normal(size=(500, 6))
    one = LowPassFilter(fc, fs, order)
    by_one = np.array([one(xi) for xi in x])
    split = LowPassFilter(fc, fs, order)
    parts = np.vstack([split.many(x[:1]), split.many(x[1:7]), split.many(x[7:300]), split.many(x[300:])])
    np.testing.assert_allclose(parts, by_one, rtol=0, atol=1e-12)
    if order == 1:
        a = 1 - math.exp(-2 * math.pi * fc / fs)
        b, den = [a], [1.0, a - 1.0]
    else:
        b, den = signal.butter(2, fc, btype="low", fs=fs)
    ref, _ = signal.lfilter(b, den, x[1:], axis=0, zi=signal.lfilter_zi(b, den)[:, None] * x[0])
    np.testing.assert_allclose(by_one[1:], ref, rtol=0, atol=1e-10)


def test_process_many_is_process_one_by_one() -> None:
    proc_a = FTProcessor(_known(cutoff_hz=50.0), sample_rate_hz=1000.0)
    proc_b = FTProcessor(_known(cutoff_hz=50.0), sample_rate_hz=1000.0)
    R = Rotation.from_rotvec([0.3, -0.2, 0.4]).as_matrix()
    y = np.random.default_rng(4).normal(size=(40, 6)) * 5
    many = proc_a.process_many(y, R)
    np.testing.assert_allclose(many, [proc_b.process(yi, R).sensor for yi in y], rtol=0, atol=1e-12)
    with pytest.raises(InputError, match="readings"):
        proc_a.process_many(np.zeros(6), R)


def test_processing_filters_a_contact_step_at_the_tcp() -> None:
    fc, fs = 40.0, 2000.0
    sensor = FTSensorModel(TRUE)
    proc = FTProcessor(_known(cutoff_hz=fc), sample_rate_hz=fs)
    R = Rotation.from_rotvec([0.2, 0.1, -0.5]).as_matrix()
    proc.tare(sensor.measure(np.zeros(6), R, 0.0), R)
    w = np.array([0.0, 0.0, 10.0, 0.0, 0.2, 0.0])
    for k in range(1, 200):
        out = proc.process(sensor.measure(w, R, k / fs), R)
        np.testing.assert_allclose(out.tcp, w * (1 - math.exp(-2 * math.pi * fc * k / fs)), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda p: p.process([1, 2, 3], np.eye(3)), "reading"),
        (lambda p: p.process([np.nan] * 6, np.eye(3)), "reading"),
        (lambda p: p.process(np.zeros((2, 6)), np.eye(3)), "reading"),
        (lambda p: p.process(np.zeros(6), np.ones((3, 3))), "R_WS"),
        (lambda p: p.tare("zero", np.eye(3)), "tare reading"),
    ],
)
def test_bad_readings(call: object, named: str) -> None:
    with pytest.raises(InputError, match=named):
        call(FTProcessor(_known()))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: FTProcessor(_known(cutoff_hz=10.0)), "sample_rate_hz"),
        (lambda: FTProcessor(_known(cutoff_hz=10.0), sample_rate_hz=0.0), "sample_rate_hz"),
        (lambda: FTProcessor(_known(cutoff_hz=10.0), sample_rate_hz=100.0, filter_order=3), "order"),
        (lambda: LowPassFilter(60.0, 100.0, order=2), "Nyquist"),
        (lambda: LowPassFilter(-1.0, 100.0), "cutoff_hz"),
    ],
)
def test_bad_settings(make: object, named: str) -> None:
    with pytest.raises(InputError, match=named):
        make()  # type: ignore[operator]

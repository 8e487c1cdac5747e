"""Measured F/T wrench processing: the inverse of the sensor model in ``ft_sensor``.

A reading ``y`` (6,) [Fx Fy Fz Tx Ty Tz] in the sensor frame S (N, N m, torque about S's origin)
is what :mod:`robot_grinding_sim.core.contact.ft_sensor` models:

    y = Ad*_{S<-C} w_contact + w_gravity(R_WS) + bias (+ noise)

The processing undoes it, in this order:

1. gravity and bias: ``w_S = y - bias - w_gravity(R_WS)``, with the tool's weight from its mass
   (kg) and centre of mass (m, in S) at the sensor's current orientation ``R_WS`` (3, 3) in the
   base frame, gravity given in that frame (default (0, 0, -9.81) m/s^2, i.e. along -z of
   ``base_link``). The weight is computed by
   :meth:`~robot_grinding_sim.core.contact.ft_sensor.FTSensorModel.gravity_wrench`, the model's
   own code, so the two directions cannot disagree.
2. a low-pass filter on ``w_S`` (optional): first order (``y_k = y_{k-1} + a (x_k - y_{k-1})``,
   ``a = 1 - exp(-2 pi f_c / f_s)``, exact at the samples for an input held between them) or
   second-order Butterworth (bilinear transform, cut-off pre-warped). The filter starts at the
   first sample (no ramp up from zero). Filtering after compensation means the gravity term
   follows the orientation without lag.
3. to the tool centre point: ``w_C = Ad*_{C<-S} w_S`` (force and torque about C, in C), with
   :func:`~robot_grinding_sim.core.contact.ft_sensor.transform_wrench` and the inverse of
   ``X_S_tcp``; for a sensor that carries a held part (``part_side``) at the tcp's pose of the
   moment, negated (the sensor reads the wrench on the part, the opposite of the one on the tool).

``tare(y, R_WS)`` is the driver's ``~/tare``: with nothing touching the tool, the reading minus
the tool's weight at the current orientation becomes the bias (averaged when several readings
are given). The parameters are the model's :class:`FTSensorParams`: ``X_S_tcp``, ``tool_mass``,
``tool_com``, ``gravity``, ``cutoff_hz``, and ``bias`` as the starting estimate of the bias
(e.g. identified; ``tare`` replaces it). ``noise_std`` and ``seed`` play no part here.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams, transform_wrench
from robot_grinding_sim.core.errors import InputError

__all__ = ["FTProcessed", "FTProcessor", "LowPassFilter"]

FloatArray = npt.NDArray[np.float64]


def _wrenches(value: npt.ArrayLike, what: str) -> FloatArray:
    """``value`` as float (6,) or (K, 6), finite; InputError naming ``what`` otherwise."""
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be 6 numbers [Fx Fy Fz Tx Ty Tz], got {value!r}") from None
    if a.shape[-1:] != (6,) or a.ndim > 2 or a.size == 0:
        raise InputError(f"{what} must have shape (6,) or (K, 6), got {a.shape}")
    if not np.isfinite(a).all():
        raise InputError(f"{what} contains NaN or infinite values")
    return a


class LowPassFilter:
    """A low-pass filter applied channel by channel to a stream of (n,) samples.

    Args:
        cutoff_hz: -3 dB cut-off, Hz (> 0; below the Nyquist frequency for order 2).
        sample_rate_hz: the stream's sample rate, Hz (> 0).
        order: 1 (first order, exact discretisation) or 2 (Butterworth, bilinear transform).
    """

    def __init__(self, cutoff_hz: float, sample_rate_hz: float, order: int = 1) -> None:
        fc, fs = float(cutoff_hz), float(sample_rate_hz)
        if not math.isfinite(fs) or fs <= 0.0:
            raise InputError(f"low-pass sample_rate_hz must be > 0 Hz, got {sample_rate_hz!r}")
        if not math.isfinite(fc) or fc <= 0.0:
            raise InputError(f"low-pass cutoff_hz must be > 0 Hz, got {cutoff_hz!r}")
        if order not in (1, 2):
            raise InputError(f"low-pass order must be 1 or 2, got {order!r}")
        if order == 2 and fc >= 0.5 * fs:
            raise InputError(f"low-pass cutoff_hz {fc} must be below the Nyquist frequency {0.5 * fs} Hz")
        self.cutoff_hz, self.sample_rate_hz, self.order = fc, fs, order
        if order == 1:
            self._a = -math.expm1(-2.0 * math.pi * fc / fs)
        else:
            k = math.tan(math.pi * fc / fs)
            norm = 1.0 / (1.0 + math.sqrt(2.0) * k + k * k)
            b0 = k * k * norm
            self._b = (b0, 2.0 * b0, b0)
            self._a12 = (2.0 * (k * k - 1.0) * norm, (1.0 - math.sqrt(2.0) * k + k * k) * norm)
        self._y: FloatArray | None = None
        self._z: tuple[FloatArray, FloatArray] | None = None

    def reset(self, value: npt.ArrayLike | None = None) -> None:
        """Forget the state; with ``value``, start at rest there (as if it had been the input for
        ever)."""
        self._y, self._z = None, None
        if value is not None:
            self._start(np.array(value, dtype=np.float64))

    def _start(self, x: FloatArray) -> None:
        self._y = x.copy()
        if self.order == 2:
            _, b1, b2 = self._b
            a1, a2 = self._a12
            # direct form II transposed at rest with output = input = x (unit DC gain)
            z2 = (b2 - a2) * x
            self._z = ((b1 - a1) * x + z2, z2)

    def __call__(self, x: npt.ArrayLike) -> FloatArray:
        """Filter one sample (n,); returns the filtered sample (n,)."""
        return self.many(np.array(x, dtype=np.float64)[None])[0]

    def many(self, xs: npt.ArrayLike) -> FloatArray:
        """Filter consecutive samples (k, n) in one call (a reader's backlog); returns (k, n), the
        same as k calls (``scipy.signal.lfilter`` with this filter's state, direct form II
        transposed for both orders)."""
        from scipy.signal import lfilter

        x = np.array(xs, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0:
            raise InputError(f"low-pass samples must have shape (k, n) with k >= 1, got {x.shape}")
        out = np.empty_like(x)
        if self._y is None:
            self._start(x[0])
            out[0], x = x[0], x[1:]
            if not len(x):
                return out
        if x.shape[1:] != self._y.shape:  # type: ignore[union-attr]
            raise InputError(f"low-pass sample has shape {x.shape[1:]}, the stream's is {self._y.shape}")  # type: ignore[union-attr]
        if self.order == 1:
            # y_k = (1 - a) y_{k-1} + a x_k; DF2T state z = (1 - a) y_{k-1}
            a = self._a
            y, _ = lfilter([a], [1.0, a - 1.0], x, axis=0, zi=((1.0 - a) * self._y)[None])
        else:
            (a1, a2) = self._a12
            y, zf = lfilter(self._b, (1.0, a1, a2), x, axis=0, zi=np.stack(self._z))  # type: ignore[arg-type]
            self._z = (zf[0], zf[1])
        out[len(out) - len(y):] = y
        self._y = y[-1].copy()
        return out


class FTProcessed(NamedTuple):
    """One processed reading: ``sensor`` (6,) compensated and filtered in the sensor frame, and
    ``tcp`` (6,) the same wrench at the tool centre point in the tcp frame (N, N m)."""

    sensor: FloatArray
    tcp: FloatArray


class FTProcessor:
    """Bias, gravity compensation, low-pass and the move to the tcp (see the module docstring).

    Example::

        proc = FTProcessor(FTSensorParams(X_S_tcp=X, tool_mass=2.18, tool_com=[0, 0, 0.08],
                                          cutoff_hz=50.0), sample_rate_hz=1000.0)
        proc.tare(reading, R_WS)              # nothing touching the tool
        w = proc.process(reading, R_WS).tcp   # contact wrench at the tcp, tcp frame

    Args:
        params: the sensor's parameters (tool mass, centre of mass, X_S_tcp, gravity, cut-off,
            starting bias); default: no tool, no filter, identity X_S_tcp.
        sample_rate_hz: the readings' rate, Hz; needed when ``params.cutoff_hz`` is set.
        filter_order: 1 (first order) or 2 (Butterworth).
    """

    def __init__(
        self, params: FTSensorParams | None = None, sample_rate_hz: float | None = None, filter_order: int = 1
    ) -> None:
        self.params = params if params is not None else FTSensorParams()
        # the model's gravity_wrench is the one definition of the tool's weight
        self._model = FTSensorModel(self.params)
        self.X_tcp_S = np.linalg.inv(self.params.X_S_tcp)
        self.X_tcp_S[3] = (0.0, 0.0, 0.0, 1.0)
        self.bias = self.params.bias.copy()
        self.filter: LowPassFilter | None = None
        if self.params.cutoff_hz is not None:
            if sample_rate_hz is None:
                raise InputError("FTProcessor sample_rate_hz is needed with a cutoff_hz (the filter's rate)")
            self.filter = LowPassFilter(self.params.cutoff_hz, sample_rate_hz, filter_order)
        elif filter_order not in (1, 2):
            raise InputError(f"FTProcessor filter_order must be 1 or 2, got {filter_order!r}")

    def gravity_wrench(self, R_WS: npt.ArrayLike) -> FloatArray:
        """(6,) the tool's weight in the sensor frame at orientation R_WS (3, 3) in the base frame."""
        return self._model.gravity_wrench(R_WS)

    def compensate(self, reading: npt.ArrayLike, R_WS: npt.ArrayLike) -> FloatArray:
        """(6,) ``reading - bias - weight(R_WS)`` in the sensor frame (not filtered)."""
        y = _wrenches(reading, "F/T reading")
        if y.shape != (6,):
            raise InputError(f"F/T reading must have shape (6,), got {y.shape}")
        return y - self.bias - self.gravity_wrench(R_WS)

    @property
    def model(self) -> FTSensorModel:
        """The sensor model these parameters describe (its weight, its kinematics)."""
        return self._model

    def to_tcp(self, wrench_S: npt.ArrayLike, X_S_tcp: npt.ArrayLike | None = None) -> FloatArray:
        """(6,) a sensor-frame wrench moved to the tcp (torque about the tcp, in the tcp frame): the
        contact wrench on the tool. A sensor that carries a held part (``params.part_side``) reads the
        opposite (the wrench on the part) and needs the tcp's pose in the sensor frame now,
        ``X_S_tcp`` (4, 4) (:func:`~robot_grinding_sim.core.sim.ft.sensor_inputs`)."""
        if X_S_tcp is None:
            if self.params.part_side:
                raise InputError("F/T sensor carrying the part: the tool centre's pose in the sensor frame "
                                 "(X_S_tcp) is needed to move its reading to the tool centre")
            return transform_wrench(wrench_S, self.X_tcp_S)
        X = np.asarray(X_S_tcp, dtype=np.float64)
        X_tcp_S = np.eye(4)
        X_tcp_S[:3, :3] = X[:3, :3].T
        X_tcp_S[:3, 3] = -X[:3, :3].T @ X[:3, 3]
        w = transform_wrench(wrench_S, X_tcp_S)
        return -w if self.params.part_side else w

    def tare(self, reading: npt.ArrayLike, R_WS: npt.ArrayLike) -> FloatArray:
        """Take the bias from readings with nothing touching the tool.

        Args:
            reading: (6,) one reading, or (K, 6) readings averaged, sensor frame, N and N m.
            R_WS: (3, 3) the sensor's orientation in the base frame while they were taken.

        Returns:
            (6,) the new bias. The filter restarts at rest at zero (the compensated value of the
            tare reading).
        """
        y = _wrenches(reading, "F/T tare reading")
        mean = y if y.ndim == 1 else y.mean(axis=0)
        self.bias = mean - self.gravity_wrench(R_WS)
        if self.filter is not None:
            self.filter.reset(np.zeros(6))
        return self.bias.copy()

    def process(self, reading: npt.ArrayLike, R_WS: npt.ArrayLike) -> FTProcessed:
        """One reading (6,) in the sensor frame at orientation R_WS (3, 3) -> the contact wrench,
        compensated and filtered, in the sensor frame and at the tcp."""
        y = _wrenches(reading, "F/T reading")
        if y.shape != (6,):
            raise InputError(f"F/T reading must have shape (6,), got {y.shape}")
        w = self.process_many(y[None], R_WS)[0]
        return FTProcessed(w, self.to_tcp(w))

    def process_many(self, readings: npt.ArrayLike, R_WS: npt.ArrayLike) -> FloatArray:
        """Consecutive readings (k, 6) at one orientation R_WS (3, 3) -> (k, 6) compensated and
        filtered in the sensor frame (the same as k calls of :meth:`process`)."""
        y = _wrenches(readings, "F/T readings")
        if y.ndim != 2:
            raise InputError(f"F/T readings must have shape (k, 6), got {y.shape}")
        w = y - self.bias - self.gravity_wrench(R_WS)
        return self.filter.many(w) if self.filter is not None else w

    def reset(self) -> None:
        """Restart the filter (the bias stays)."""
        if self.filter is not None:
            self.filter.reset()

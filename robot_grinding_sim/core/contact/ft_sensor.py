"""Force-torque sensor model: what a 6-axis F/T sensor between flange and tool would read.

Reading, in the sensor frame ``ft_sensor`` (S), wrench order [Fx Fy Fz Tx Ty Tz] (N, N m),
torque about S's origin; the sensor reports the load applied to its tool side (ATI convention),
so a tool pushed up by the part reads +F along the push:

    raw(t)     = Ad*_{S<-C} w_contact  +  w_gravity(R_WS)  +  bias  +  noise(t)
    y(t_k)     = y(t_{k-1}) + (1 - exp(-(t_k - t_{k-1}) / tau)) (raw(t_k) - y(t_{k-1}))
    reading    = y(t_k) - tare_offset

- ``Ad*_{S<-C}``: the contact wrench, given at the tool centre point C (force and torque about C,
  expressed in C), moved to S: ``F_S = R_SC F_C``, ``T_S = R_SC T_C + p_SC x F_S`` with
  ``X_SC = (R_SC, p_SC)`` the pose of C in S.
- a sensor that carries the part (the robot holds it against a tool standing in the cell,
  ``part_side``): what loads its tool side is the part, pushed by the tool with the opposite of
  the contact wrench on the tool, ``-w_contact``, and the tool centre moves relative to it, so
  ``X_SC`` is given with each sample (:func:`~robot_grinding_sim.core.sim.ft.sensor_inputs`).
- ``w_gravity``: the weight of everything below the measuring face (tool mass m at centre of mass
  c in S): ``F = m R_WS^T g``, ``T = c x F``, with g in the world frame (default (0, 0, -9.81)).
- ``bias``: a constant offset (strain-gauge drift), N / N m.
- ``noise``: white Gaussian, per-channel standard deviation, from a seeded generator (repeatable).
- a first-order low-pass with cut-off ``f_c`` (tau = 1 / (2 pi f_c)), discretised exactly for an
  input held constant between samples (zero-order hold), so any sample spacing is exact. The
  filter starts at the first raw sample (a sensor that has been on); a time that goes backwards
  (a simulation reset) restarts it there.
- ``tare()``: as a driver's bias command: the current filtered value becomes the zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.spatial import cross3

FloatArray = npt.NDArray[np.float64]


def _vec(value: npt.ArrayLike, n: int, what: str) -> FloatArray:
    try:
        a = np.array(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be {n} numbers, got {value!r}") from None
    if a.size == 1 and n > 1:
        a = np.full(n, a[0])
    if a.shape != (n,):
        raise InputError(f"{what} must have {n} elements, got {a.size}")
    if not np.isfinite(a).all():
        raise InputError(f"{what} contains NaN or infinite values: {a.tolist()}")
    return a


def _rotation(R: npt.ArrayLike, what: str) -> FloatArray:
    try:
        M = np.asarray(R, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a 3x3 rotation matrix") from None
    if M.shape != (3, 3) or not np.isfinite(M).all():
        raise InputError(f"{what} must be a finite 3x3 rotation matrix, got shape {M.shape}")
    # plain floats: this runs for every sample of the sensor (1 kHz in contact_solver_node)
    (a, b, c), (d, e, f), (g, h, i) = M.tolist()
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    off = max(abs(a * a + d * d + g * g - 1.0), abs(b * b + e * e + h * h - 1.0), abs(c * c + f * f + i * i - 1.0),
              abs(a * b + d * e + g * h), abs(a * c + d * f + g * i), abs(b * c + e * f + h * i))
    if off > 1e-6 or det < 0:
        raise InputError(f"{what} is not a rotation matrix (not orthonormal with det +1)")
    return M


def transform_wrench(wrench_C: npt.ArrayLike, X_SC: npt.ArrayLike) -> FloatArray:
    """Move a wrench from frame C to frame S.

    Args:
        wrench_C: (6,) [F, T] with the torque about C's origin, expressed in C. N, N m.
        X_SC: (4, 4) pose of C in S.

    Returns:
        (6,) the same wrench with the torque about S's origin, expressed in S.
    """
    w = _vec(wrench_C, 6, "wrench")
    X = np.asarray(X_SC, dtype=np.float64)
    R, p = X[:3, :3], X[:3, 3]
    F = R @ w[:3]
    out = np.empty(6)
    out[:3] = F
    out[3:] = R @ w[3:] + cross3(p, F)
    return out


def wrench_between_links(model: Any, q: npt.ArrayLike | None, wrench: npt.ArrayLike, frame: str,
                         to: str) -> FloatArray:
    """A wrench given in link ``frame`` (torque about its origin) moved to link ``to`` of the robot.

    The frames' relative pose comes from the robot's kinematics at ``q``; two links of one rigid body
    need no q (their pose is fixed), a link of another body does. The root link and ``world``/``""``
    (taken to coincide with the root) are frames too.

    Args:
        model: the RobotModel (``fk``, ``link_names``, ``chain.link_body``, ``root_link``).
        q: (n,) joint positions, rad, or None when none is known yet.
        wrench: (6,) [F, T] in ``frame``, N and N m.

    Returns:
        (6,) [F, T] in ``to``, torque about its origin.

    Raises:
        InputError: ``frame`` is not a link of the robot, or it moves relative to ``to`` and q is None.
    """
    w = _vec(wrench, 6, "wrench")
    root = model.root_link
    frame = root if frame in ("", "world") else frame
    if frame == to:
        return w.copy()
    for name in (frame, to):
        if name not in model.link_names:
            raise InputError(f"frame '{name}' is not a link of {model.source} (links: {', '.join(model.link_names)})")
    body = model.chain.link_body
    rigid = body[frame] == body[to]
    if q is None and not rigid:
        raise InputError(f"a wrench in '{frame}' moves with the arm relative to '{to}': no joint state yet to "
                         "transform it with")
    qq = np.zeros(model.nq) if q is None else np.asarray(q, dtype=np.float64)
    X_WS, X_WC = model.fk(qq, to), model.fk(qq, frame)
    X_SC = np.eye(4)
    X_SC[:3, :3] = X_WS[:3, :3].T @ X_WC[:3, :3]
    X_SC[:3, 3] = X_WS[:3, :3].T @ (X_WC[:3, 3] - X_WS[:3, 3])
    return transform_wrench(w, X_SC)


@dataclass(frozen=True)
class FTSensorParams:
    """Parameters of :class:`FTSensorModel` (SI; frames in the module docstring).

    Attributes:
        X_S_tcp: (4, 4) pose of the tool centre point (where the contact wrench is given) in the
            sensor frame.
        tool_mass: mass below the measuring face, kg (>= 0).
        tool_com: (3,) its centre of mass in the sensor frame, m.
        gravity: (3,) gravity in the world frame, m/s^2.
        bias: (6,) constant offset, N and N m.
        noise_std: (6,) standard deviation of the white noise per channel, N and N m (>= 0).
        cutoff_hz: low-pass cut-off, Hz (> 0), or None for no filter.
        seed: seed of the noise generator.
        part_side: the sensor carries the part, not the tool (module docstring): the contact wrench
            reaches it with the opposite sign, and ``X_S_tcp`` comes with each sample.
    """

    X_S_tcp: FloatArray = field(default_factory=lambda: np.eye(4))
    tool_mass: float = 0.0
    tool_com: FloatArray = field(default_factory=lambda: np.zeros(3))
    gravity: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    bias: FloatArray = field(default_factory=lambda: np.zeros(6))
    noise_std: FloatArray = field(default_factory=lambda: np.zeros(6))
    cutoff_hz: float | None = None
    seed: int = 0
    part_side: bool = False

    def __post_init__(self) -> None:
        X = np.array(self.X_S_tcp, dtype=np.float64)
        if X.shape != (4, 4) or not np.isfinite(X).all() or abs(X[3] - (0, 0, 0, 1)).max() > 1e-12:
            raise InputError("F/T sensor X_S_tcp must be a finite 4x4 homogeneous transform")
        _rotation(X[:3, :3], "F/T sensor X_S_tcp rotation")
        object.__setattr__(self, "X_S_tcp", X)
        m = float(self.tool_mass)
        if not math.isfinite(m) or m < 0.0:
            raise InputError(f"F/T sensor tool_mass must be >= 0 kg, got {self.tool_mass!r}")
        object.__setattr__(self, "tool_mass", m)
        object.__setattr__(self, "tool_com", _vec(self.tool_com, 3, "F/T sensor tool_com"))
        object.__setattr__(self, "gravity", _vec(self.gravity, 3, "F/T sensor gravity"))
        object.__setattr__(self, "bias", _vec(self.bias, 6, "F/T sensor bias"))
        noise = _vec(self.noise_std, 6, "F/T sensor noise_std")
        if (noise < 0).any():
            raise InputError(f"F/T sensor noise_std must be >= 0, got {noise.tolist()}")
        object.__setattr__(self, "noise_std", noise)
        if self.cutoff_hz is not None:
            fc = float(self.cutoff_hz)
            if not math.isfinite(fc) or fc <= 0.0:
                raise InputError(f"F/T sensor cutoff_hz must be > 0 (or None: no filter), "
                                 f"got {self.cutoff_hz!r}")
            object.__setattr__(self, "cutoff_hz", fc)


class FTSensorModel:
    """A simulated F/T sensor (see the module docstring for the model).

    Example::

        ft = FTSensorModel(FTSensorParams(X_S_tcp=X, tool_mass=2.18, tool_com=[0, 0, 0.08],
                                          noise_std=[0.05] * 3 + [0.002] * 3, cutoff_hz=200.0))
        reading = ft.measure(contact_wrench_tcp, R_world_sensor, t)
    """

    def __init__(self, params: FTSensorParams | None = None) -> None:
        self.params = params if params is not None else FTSensorParams()
        self._rng = np.random.default_rng(self.params.seed)
        self._y: FloatArray | None = None
        self._t: float | None = None
        self.tare_offset = np.zeros(6)

    def reset(self) -> None:
        """Forget the filter state, the tare and restart the noise sequence."""
        self._rng = np.random.default_rng(self.params.seed)
        self._y, self._t = None, None
        self.tare_offset = np.zeros(6)

    def gravity_wrench(self, R_WS: npt.ArrayLike) -> FloatArray:
        """(6,) wrench of the tool's weight in the sensor frame, given the sensor orientation
        R_WS (3, 3) in the world."""
        R = _rotation(R_WS, "R_WS (sensor orientation)")
        p = self.params
        F = p.tool_mass * (R.T @ p.gravity)
        out = np.empty(6)
        out[:3] = F
        out[3:] = cross3(p.tool_com, F)
        return out

    def sensor_orientation(self, R_W_tcp: npt.ArrayLike) -> FloatArray:
        """The sensor frame's orientation in the world (3, 3), or (K, 3, 3) for (K, 3, 3), from the
        tcp's R_W_tcp: the two are rigidly connected (``X_S_tcp``), so no forward kinematics."""
        return np.asarray(R_W_tcp, dtype=float) @ self.params.X_S_tcp[:3, :3].T

    def _X(self, X_S_tcp: npt.ArrayLike | None) -> FloatArray:
        if X_S_tcp is None:
            if self.params.part_side:
                raise InputError("F/T sensor carrying the part: the tool centre's pose in the sensor frame "
                                 "(X_S_tcp) is needed with each sample")
            return self.params.X_S_tcp
        return np.asarray(X_S_tcp, dtype=np.float64)

    def contact_wrench(self, wrench_tcp: npt.ArrayLike, X_S_tcp: npt.ArrayLike | None = None) -> FloatArray:
        """(6,) the contact wrench at the tcp (in tcp frame) as it loads the sensor, in the sensor
        frame: moved there; negated for a sensor that carries the part (module docstring).
        ``X_S_tcp`` (4, 4): the tcp's pose in the sensor frame now (default the params' fixed one)."""
        w = transform_wrench(wrench_tcp, self._X(X_S_tcp))
        return -w if self.params.part_side else w

    def measure(self, wrench_tcp: npt.ArrayLike, R_WS: npt.ArrayLike, t: float,
                X_S_tcp: npt.ArrayLike | None = None) -> FloatArray:
        """One sample of the sensor.

        Args:
            wrench_tcp: (6,) contact wrench on the tool at the tcp, in the tcp frame (N, N m).
            R_WS: (3, 3) orientation of the sensor frame in the world.
            t: sample time, s.
            X_S_tcp: (4, 4) the tcp's pose in the sensor frame at the sample (a sensor that carries
                the part); default the params' fixed one.

        Returns:
            (6,) the reading in the sensor frame (N, N m), after bias, noise, filter and tare.
        """
        t = float(t)
        if not math.isfinite(t):
            raise InputError(f"F/T sensor sample time must be finite, got {t!r}")
        p = self.params
        raw = self.contact_wrench(wrench_tcp, X_S_tcp) + self.gravity_wrench(R_WS) + p.bias
        if (p.noise_std > 0).any():
            raw = raw + p.noise_std * self._rng.standard_normal(6)
        return self.measure_filtered(raw, t) - self.tare_offset

    def measure_many(self, wrench_tcp: npt.ArrayLike, R_WS: npt.ArrayLike, t: npt.ArrayLike,
                     X_S_tcp: npt.ArrayLike | None = None) -> FloatArray:
        """:meth:`measure` for K samples in time order at once (wrenches (K, 6), orientations
        (K, 3, 3), times (K,), the tcp's poses in the sensor frame (K, 4, 4) or None): the
        readings (K, 6), the noise drawn and the filter run as K calls of :meth:`measure` would."""
        W = np.asarray(wrench_tcp, dtype=np.float64).reshape(-1, 6)
        R = np.asarray(R_WS, dtype=np.float64).reshape(-1, 3, 3)
        ts = np.asarray(t, dtype=np.float64).reshape(-1)
        if not (len(W) == len(R) == len(ts)):
            raise InputError(f"F/T sensor: {len(W)} wrenches, {len(R)} orientations and {len(ts)} times")
        if not np.isfinite(ts).all():
            raise InputError("F/T sensor sample time must be finite")
        if len(ts) == 0:
            return np.zeros((0, 6))
        gram = np.swapaxes(R, 1, 2) @ R - np.eye(3)
        if not np.isfinite(R).all() or np.abs(gram).max() > 1e-6 or (np.linalg.det(R) < 0).any():
            raise InputError("R_WS (sensor orientation) is not a rotation matrix (not orthonormal with det +1)")
        p = self.params
        X = self._X(X_S_tcp)
        Rs, ps = X[..., :3, :3], X[..., :3, 3]
        if X.ndim == 3 and len(X) != len(ts):
            raise InputError(f"F/T sensor: {len(ts)} samples and {len(X)} tool centre poses")
        raw = np.empty((len(ts), 6))
        F = (Rs @ W[:, :3, None])[:, :, 0]  # stacked 3x3 products: the same rounding as measure()
        raw[:, :3] = F
        raw[:, 3:] = (Rs @ W[:, 3:, None])[:, :, 0] + np.cross(ps, F)
        if p.part_side:
            raw = -raw
        G = p.tool_mass * (p.gravity @ R)  # R^T g per sample
        raw[:, :3] += G
        raw[:, 3:] += np.cross(p.tool_com, G)
        raw += p.bias
        if (p.noise_std > 0).any():
            raw += p.noise_std * self._rng.standard_normal((len(ts), 6))
        if p.cutoff_hz is None:
            self._y, self._t = raw[-1].copy(), float(ts[-1])
            return raw - self.tare_offset
        out = np.empty_like(raw)
        for k in range(len(ts)):
            out[k] = self.measure_filtered(raw[k], float(ts[k]))
        return out - self.tare_offset

    def measure_filtered(self, raw: FloatArray, t: float) -> FloatArray:
        """The low-pass filter's output after the raw sample ``raw`` (6,) at ``t`` (no tare)."""
        p = self.params
        if self._y is None or self._t is None or p.cutoff_hz is None or t < self._t:
            self._y = raw
        else:
            tau = 1.0 / (2.0 * math.pi * p.cutoff_hz)
            self._y = self._y + (-math.expm1(-(t - self._t) / tau)) * (raw - self._y)
        self._t = t
        return self._y

    def tare(self) -> FloatArray:
        """Make the current filtered value the zero (as a driver's bias command) and return the
        offset (6,). Before any sample, the offset is zero."""
        self.tare_offset = np.zeros(6) if self._y is None else self._y.copy()
        return self.tare_offset.copy()

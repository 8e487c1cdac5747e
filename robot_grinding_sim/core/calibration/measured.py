"""Calibration on measured runs of another cell (``grinding calibrate BAG --replay``).

Where :mod:`.calibrate` re-simulates the plan that ran (a cell that runs the package's plans), this
fits the model along the run's own joint states (:mod:`.replay`), which is what a log from another
cell allows, with what its import declared (:func:`~robot_grinding_sim.core.record.importlog.declared`):

1. The reading: a compensated wrench (declared so) is the contact wrench: nothing of the tool or
   the bias is fitted. A raw reading has the tool's weight and the bias in: they are fitted
   (:func:`~.calibrate.fit_gravity_bias`) on the out-of-contact readings at rest, which must span
   :data:`MIN_SPREAD_DEG` of gravity directions in the sensor frame: from one orientation a bias
   cannot be told from the tool's weight, and is refused (one line), not fitted. ``tare`` keeps the
   tool's mass and centre of mass as given and fits the bias alone (the driver's ``~/tare``).
2. The measured normal force: the contact wrench at the tcp, ``-F_z`` in tcp axes (the tool axis).
3. Position control: the contact stiffness ``K`` and the surface's normal offset ``delta`` (the
   part's height error; m, > 0: the surface higher than the part's pose says) minimise the relative
   error of the force :func:`~.replay.replay_path` predicts along the measured joint states at the
   in-contact samples (``scipy.optimize.least_squares``). On such a path the force is the law's at
   the depth the path makes with the surface, so ``K`` and ``delta`` are separable only when the
   depth varies (a pass whose depth stays constant fixes ``K (d + delta)`` alone: the fit says so).
4. Force control: the force follows the controller, not the path; the controller is simulated
   (:func:`~.replay.replay_force_control`, the driver's own code, on the job's coupled step) and
   its gain ``admittance.damping`` (N s/m: the settling D_a / K_eff of the force) is fitted with the
   arm's servo bandwidth ``servo.bandwidth`` (rad/s: how closely, and how stiffly, the arm follows
   the controller's points; bounded Powell search on their logs), ``K`` and ``delta`` as given (a
   position calibration's). ``fit_controller=False`` keeps the cell's ``admittance.*`` (the run's
   controller known) and fits the bandwidth alone (bounded scalar search).
5. Validation: the identified model's prediction of another run (``validate``), not fitted on:
   the mean relative error, the correlation and the lag of ``grinding compare`` before and after.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

MIN_SPREAD_DEG = 10.0
#: in contact: the measured normal force above this fraction of its largest value, and above 0.5 N
CONTACT_FRACTION = 0.2
#: the fit replays at most this many joint states (evenly spaced among the in-contact ones)
MAX_FIT_SAMPLES = 1500


@dataclass
class MeasuredRun:
    """A measured run: joint states (t_js (N,), q (N, n), qd (N, n) or None), the wrench (t (K,) s,
    W (K, 6) in ``frame``, raw or compensated) and the joints at its samples q_w (K, n)."""

    bag: str
    t_js: FloatArray
    q_js: FloatArray
    qd_js: FloatArray | None
    t: FloatArray
    W: FloatArray
    frame: str
    raw: bool
    q_w: FloatArray
    topic: str


def read_run(bag: str, model: Any, topic: str | None, raw: bool | None, frame: str | None = None) -> MeasuredRun:
    """A bag's run with its declaration (topic, frame, raw) as imported, or as given.

    Raises:
        InputError: no wrench, an undeclared compensation, joints that are not the robot's.
    """
    from robot_grinding_sim.core.calibration.calibrate import RAW_TOPIC, positions_at
    from robot_grinding_sim.core.record.bag import has_topic, read_joint_motion, read_wrench
    from robot_grinding_sim.core.record.importlog import declared

    decl = declared(bag)
    if topic is None:
        topic = decl["topic"] if decl else (RAW_TOPIC if has_topic(bag, RAW_TOPIC) else "/ft_sensor/wrench")
    if raw is None:
        if decl is not None and decl.get("topic") == topic:
            raw = not decl["compensated"]
        elif topic == RAW_TOPIC:
            raw = True
        else:
            raise InputError(f"bag {bag}: not declared whether {topic} is raw or compensated (--raw or --compensated)")
    w = read_wrench(bag, topic)
    frame = frame or (decl["frame"] if decl is not None and decl.get("topic") == topic else w.frame)
    if not frame:
        raise InputError(f"bag {bag}: {topic} has no frame (import it with --frame)")
    t_js, names, q_js, qd_js = read_joint_motion(bag)
    if names != list(model.joint_names):
        raise InputError(f"bag {bag}: joint states name {names}, the robot has {list(model.joint_names)}")
    return MeasuredRun(str(bag), t_js, q_js, qd_js, w.t, np.hstack([w.force, w.torque]), frame, bool(raw),
                       positions_at(t_js, q_js, w.t), topic)


def gaps_along(scene: Any, q: FloatArray) -> FloatArray:
    """(K,) the tool's gap to the part (m) at joint positions q (K, n): the contact query."""
    X = scene.model.fk(np.asarray(q, dtype=float), scene.cell.tool.tcp_link)
    return np.array([scene.query.query(x[:3, 3]).gap for x in X])


def cell_tool(scene: Any) -> Any:
    """The cell's own ``ft_sensor.*`` (tool mass, centre of mass, bias) as a fit that identified nothing:
    a raw reading compensated with values identified before (a calibrated cell.yaml)."""
    from robot_grinding_sim.core.calibration.calibrate import GravityFit
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    p = ft_sensor_model(scene.cell, scene.model).params
    return GravityFit(float(p.tool_mass), np.asarray(p.tool_com, dtype=float), np.asarray(p.bias, dtype=float),
                      np.zeros(6), 0, False, math.nan)


def fit_tool(scene: Any, run: MeasuredRun, tare: bool = False, gap: float = 2e-3) -> Any:
    """The tool's weight and the bias of a raw reading (module docstring, 1); None for a compensated one.

    Raises:
        InputError: the readings at rest out of contact span less than MIN_SPREAD_DEG (and not
            ``tare``), or there are too few of them.
    """
    from robot_grinding_sim.core.calibration.calibrate import (
        MIN_POSES,
        at_rest,
        fit_gravity_bias,
        pose_means,
        refuse_part_side,
    )
    from robot_grinding_sim.core.job.replay import frame_poses
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    if not run.raw:
        return None
    cell, model = scene.cell, scene.model
    refuse_part_side(cell, model, f"bag {run.bag}: a raw reading")
    if run.frame != cell.ft_sensor.frame:
        raise InputError(f"bag {run.bag}: the raw reading is in frame {run.frame!r}, the cell's sensor is "
                         f"ft_sensor.frame {cell.ft_sensor.frame!r}")
    stride = max(1, len(run.t) // 4000)
    idx = np.arange(0, len(run.t), stride)
    free = gaps_along(scene, run.q_w[idx]) > gap
    still = free & at_rest(run.t_js, run.q_js, run.t[idx], 0.002, 0.1)
    if still.sum() < 20:
        raise InputError(f"bag {run.bag}: {int(still.sum())} raw readings at rest out of contact: the tool's weight "
                         "and the bias need the arm held still off the part (or import the compensated wrench)")
    R = frame_poses(model, run.frame, run.q_w[idx][still])[:, :3, :3]
    W_p, R_p = pose_means(run.t[idx][still], run.W[idx][still], R)
    p0 = ft_sensor_model(cell, model).params
    g = np.asarray(cell.sim.gravity, dtype=float)
    fit = fit_gravity_bias(W_p, R_p, g, p0.tool_mass, p0.tool_com, min_spread=math.radians(MIN_SPREAD_DEG),
                           min_samples=min(MIN_POSES, len(W_p)))
    if not fit.gravity_identified and not tare:
        spread = math.degrees(fit.spread_rad)
        raise InputError(f"bag {run.bag}: the out-of-contact orientations span {spread:.1f} deg: neither a bias nor "
                         f"the tool's mass can be told from its weight (needs {MIN_SPREAD_DEG:g} deg: a wrist sweep, "
                         "`grinding calibration-plan`; --tare keeps the tool's mass and fits the bias alone)")
    return fit


def measured_normal(scene: Any, run: MeasuredRun, tool: Any) -> FloatArray:
    """(K,) the measured normal force (N): the contact wrench at the tcp, -F_z (module docstring, 2)."""
    from robot_grinding_sim.core.contact.ft_sensor import FTSensorParams
    from robot_grinding_sim.core.job.replay import measured_contact_wrench
    from robot_grinding_sim.core.sim.ft import ft_sensor_model

    params = None
    if run.raw:
        p = ft_sensor_model(scene.cell, scene.model).params
        params = FTSensorParams(X_S_tcp=p.X_S_tcp, tool_mass=tool.mass, tool_com=tool.com, gravity=p.gravity,
                                bias=tool.bias)
    W = measured_contact_wrench(scene.cell, scene.model, run.frame, run.raw, run.W, run.q_w, params)
    return -W[:, 2]


@dataclass
class Figures:
    """A prediction against a measured run: MRE (fraction), correlation, lag (s), samples, means (N)."""

    mre: float
    correlation: float
    lag_s: float
    samples: int
    mean_predicted: float
    mean_measured: float

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def figures(t_pred: FloatArray, f_pred: FloatArray, t_meas: FloatArray, f_meas: FloatArray, threshold: float
            ) -> Figures:
    """``grinding compare``'s figures (time alignment, fz) of a predicted and a measured normal force."""
    from robot_grinding_sim.core.record.bag import WrenchSeries
    from robot_grinding_sim.core.record.compare import compare_runs

    def series(t: FloatArray, f: FloatArray, name: str) -> WrenchSeries:
        F = np.zeros((len(t), 3))
        F[:, 2] = f
        return WrenchSeries(np.asarray(t, dtype=float), F, np.zeros_like(F), "tcp", np.asarray(t, dtype=float),
                            "memory", name, "geometry_msgs/msg/WrenchStamped")

    if np.ptp(f_pred) <= 0.0:  # no contact predicted at all: nothing to align, the error is the measured force
        sel = f_meas > threshold
        p = np.interp(t_meas[sel], t_pred, f_pred)
        return Figures(float(np.mean(np.abs(p - f_meas[sel]) / f_meas[sel])), math.nan, math.nan, int(sel.sum()),
                       float(p.mean()), float(f_meas[sel].mean()))
    c = compare_runs(series(t_pred, f_pred, "/predicted"), series(t_meas, f_meas, "/measured"), align="time",
                     component="fz", threshold=threshold)
    o = c.overall
    return Figures(o.mean_relative_error, o.correlation, c.aligned.lag_s, o.samples, o.mean_sim, o.mean_measured)


@dataclass
class MeasuredCalibration:
    """The result of :func:`measured` (SI)."""

    cell: Any
    stiffness: float
    surface_offset: float
    bandwidth: float | None
    tool: Any
    fitted: list[str]
    before: Figures
    after: Figures
    validation_before: Figures | None = None
    validation_after: Figures | None = None
    evaluations: int = 0
    notes: list[str] = field(default_factory=list)
    #: admittance.damping fitted (force control with fit_controller), N s/m
    damping: float | None = None

    def summary(self) -> dict[str, Any]:
        t = self.tool
        return {
            "identified": {"contact.stiffness": self.stiffness, "surface_offset_m": self.surface_offset,
                           "servo.bandwidth": self.bandwidth,
                           **({} if self.damping is None else {"admittance.damping": self.damping}),
                           **({} if t is None else {"ft_sensor.tool_mass": t.mass, "ft_sensor.tool_com": t.com.tolist(),
                                                     "ft_sensor.bias": t.bias.tolist()})},
            "fitted": self.fitted, "gravity_identified": None if t is None else t.gravity_identified,
            "fit_run": {"before": self.before.as_dict(), "after": self.after.as_dict()},
            "validation": None if self.validation_before is None else {
                "before": self.validation_before.as_dict(), "after": self.validation_after.as_dict()},
            "evaluations": self.evaluations, "notes": self.notes,
        }


def _predict(scene: Any, run: MeasuredRun, K: float, delta: float, force_control: bool, bandwidth: float,
             rows: NDArray[np.int64] | None = None, damping: float | None = None) -> tuple[FloatArray, FloatArray]:
    """(t, predicted normal force) along ``run`` with stiffness K and offset delta (position mode: at
    the joint states ``rows``, default all; force control: the controller's grid, its
    ``admittance.damping`` ``damping``, default the cell's)."""
    from robot_grinding_sim.core.job.replay import joint_velocities, replay_force_control, replay_path

    contact = dataclasses.replace(scene.cell.contact, stiffness=float(K))
    if force_control:
        servo = dataclasses.replace(scene.cell.servo, bandwidth=float(bandwidth))
        params = None if damping is None else dataclasses.replace(scene.cell.admittance, damping=float(damping))
        res = replay_force_control(scene, run.t_js, run.q_js, params=params, surface_offset=delta, contact=contact,
                                   servo=servo)
        return res.t, -res.wrench[:, 2]
    qd = run.qd_js if run.qd_js is not None else joint_velocities(run.t_js, run.q_js)
    rows = np.arange(len(run.t_js)) if rows is None else rows
    res = replay_path(scene, run.t_js[rows], run.q_js[rows], qd[rows], surface_offset=delta, contact=contact)
    return res.t, -res.wrench[:, 2]


def measured(scene: Any, run: MeasuredRun, validate: MeasuredRun | None = None,
                       force_control: bool = False, fit_offset: bool = True, tare: bool = False,
                       surface_offset: float = 0.0, validate_scene: Any = None,
                       tool_from_cell: bool = False, fit_controller: bool = True) -> MeasuredCalibration:
    """Fit the model to a measured run (module docstring); ``surface_offset``: the start (position
    mode) or the value kept (force control). ``validate_scene``: the
    validation run's scene when it ran another plan (force control replays the plan), default ``scene``.
    ``tool_from_cell``: a raw reading is compensated with the cell's ``ft_sensor.*`` (identified before),
    nothing of the tool fitted.

    Raises:
        InputError: see :func:`fit_tool`; no contact in the run.
    """
    from scipy.optimize import least_squares, minimize, minimize_scalar

    cell = scene.cell
    tool = (cell_tool(scene) if run.raw else None) if tool_from_cell else fit_tool(scene, run, tare)
    tool_fitted = tool is not None and not tool_from_cell
    fn = measured_normal(scene, run, tool)
    peak = float(np.percentile(fn, 99.5)) if len(fn) else 0.0
    threshold = max(0.5, CONTACT_FRACTION * peak)
    on = fn > threshold
    if on.sum() < 20:
        raise InputError(f"bag {run.bag}: {int(on.sum())} samples with a measured normal force above "
                         f"{threshold:.3g} N: no contact to fit")
    K0 = cell.contact.stiffness
    notes: list[str] = []
    bw0 = cell.servo.bandwidth
    t_before, f_before = _predict(scene, run, K0, surface_offset, force_control, bw0)
    before = figures(t_before, f_before, run.t, fn, threshold)
    evals = [1]
    D0 = cell.admittance.damping
    D = None
    if force_control:
        K, delta = K0, surface_offset
        fitted = ["servo.bandwidth"] + (["admittance.damping"] if fit_controller else [])

        def cost(x: Any) -> float:
            evals[0] += 1
            x = np.atleast_1d(x)
            t_p, f_p = _predict(scene, run, K, delta, True, math.exp(x[0]),
                                damping=math.exp(x[1]) if len(x) > 1 else None)
            f_at = np.interp(run.t[on], t_p, f_p)
            return float(np.mean(((f_at - fn[on]) / fn[on]) ** 2))

        # stable for w dt < 0.83 (coupled_step): at most 0.8 / dt
        top = math.log(0.8 / cell.sim.dt)
        if fit_controller:
            # the damping within 30x of the cell's either way; log scales: both relative
            sol = minimize(cost, np.array([min(math.log(bw0), top - 0.1), math.log(D0)]), method="Powell",
                           bounds=[(math.log(10.0), top), (math.log(D0 / 30.0), math.log(D0 * 30.0))],
                           options={"xtol": 0.02, "ftol": 1e-4, "maxfev": 60})
            bw, D = float(math.exp(sol.x[0])), float(math.exp(sol.x[1]))
        else:
            sol = minimize_scalar(cost, bounds=(math.log(10.0), top), method="bounded",
                                  options={"xatol": 0.02, "maxiter": 14})
            bw = float(math.exp(sol.x))
    else:
        bw = bw0
        # the joint states the fit replays: those near in-contact wrench samples, evenly thinned
        near = np.zeros(len(run.t_js), dtype=bool)
        k = np.clip(np.searchsorted(run.t_js, run.t[on]), 0, len(run.t_js) - 1)
        near[k] = True
        rows = np.flatnonzero(near)
        rows = rows[np.linspace(0, len(rows) - 1, min(len(rows), MAX_FIT_SAMPLES)).astype(int)]
        f_meas_rows = np.interp(run.t_js[rows], run.t, fn)
        keep = f_meas_rows > threshold
        rows, f_meas_rows = rows[keep], f_meas_rows[keep]
        fitted = ["contact.stiffness"] + (["surface_offset"] if fit_offset else [])

        def residuals(x: FloatArray) -> FloatArray:
            evals[0] += 1
            _, f_p = _predict(scene, run, math.exp(x[0]), x[1] if fit_offset else surface_offset, False, 0.0, rows)
            return (f_p - f_meas_rows) / f_meas_rows

        if fit_offset:
            # start where a linear law meets the mean force: K0 (depth + delta) = mean measured force
            depth = -gaps_along(scene, run.q_js[rows])
            surface_offset = float(np.mean(f_meas_rows)) / K0 - float(np.mean(depth))
        x0 = [math.log(K0)] + ([surface_offset] if fit_offset else [])
        lo = [math.log(1e2)] + ([-5e-3] if fit_offset else [])
        hi = [math.log(1e9)] + ([5e-3] if fit_offset else [])
        sol = least_squares(lambda x: residuals(np.r_[x, 0.0] if not fit_offset else x), np.array(x0),
                            bounds=(lo, hi), x_scale=[1.0] + ([1e-4] if fit_offset else []), diff_step=1e-3,
                            xtol=1e-8, ftol=1e-10, max_nfev=40)
        K = math.exp(sol.x[0])
        delta = float(sol.x[1]) if fit_offset else surface_offset
        if fit_offset:
            J = sol.jac
            sv = np.linalg.svd(J * np.array([1.0, 1e-4]), compute_uv=False)
            if sv[-1] < 1e-3 * sv[0]:
                notes.append("the depth along the path barely varies: K and the surface offset are not separable "
                             "(only K (depth + offset) is); a run with varying depth fixes both")
    ident = cell.replace(**{"contact.stiffness": float(K), "servo.bandwidth": float(bw),
                            **({} if D is None else {"admittance.damping": D})})
    if tool_fitted:
        ident = ident.replace(**{"ft_sensor.tool_mass": float(tool.mass), "ft_sensor.tool_com": tool.com.tolist(),
                                 "ft_sensor.bias": tool.bias.tolist()})
    t_after, f_after = _predict(scene, run, K, delta, force_control, bw, damping=D)
    after = figures(t_after, f_after, run.t, fn, threshold)
    if tool_from_cell and run.raw:
        notes.append("the raw reading compensated with the cell's ft_sensor.* (tool mass, centre of mass, bias)")
    result = MeasuredCalibration(ident, float(K), float(delta), bw if force_control else None,
                                 tool if tool_fitted else None, fitted, before, after, evaluations=evals[0],
                                 notes=notes, damping=D)
    if validate is not None:
        vs = validate_scene or scene
        tool_v = tool if (tool is not None or not validate.raw) else fit_tool(vs, validate, tare)
        if tool_v is None and validate.raw:
            tool_v = cell_tool(vs)
        fn_v = measured_normal(vs, validate, tool_v)
        thr_v = max(0.5, CONTACT_FRACTION * float(np.percentile(fn_v, 99.5)))
        tb, fb = _predict(vs, validate, K0, surface_offset, force_control, bw0)
        ta, fa = _predict(vs, validate, K, delta, force_control, bw, damping=D)
        result.validation_before = figures(tb, fb, validate.t, fn_v, thr_v)
        result.validation_after = figures(ta, fa, validate.t, fn_v, thr_v)
    return result

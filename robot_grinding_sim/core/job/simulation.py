"""The coupled step over a reference in one process, and its record.

:func:`simulate` follows a reference (a job trajectory, or any
:class:`~robot_grinding_sim.core.robot.joint_trajectory.TrajectoryInterpolator`) with the arm and the
contact (:class:`~robot_grinding_sim.core.sim.coupled_step.CoupledStep`, every ``sim.dt``) and
records the force every ``sim.output_dt`` from the closed form inside the steps;
:func:`simulate_trajectory` runs a job trajectory; :func:`pass_statistics` summarises each pass's
force from a record. The whole job (set up, optimise, run) is :mod:`~robot_grinding_sim.core.job.run`;
the force-target optimisation (:mod:`~robot_grinding_sim.core.job.optimise`) re-simulates passes here.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.contact.engine_kernels import engine_list
from robot_grinding_sim.core.contact.registry import integrator, kernels
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job import step_ahead
from robot_grinding_sim.core.job.setup import JobSetup
from robot_grinding_sim.core.layout import STATUS
from robot_grinding_sim.core.planning.trajectory import (
    JointTrajectory,
)
from robot_grinding_sim.core.robot import arm_kernels as ak
from robot_grinding_sim.core.sim import compiled_step as cstep
from robot_grinding_sim.core.sim.coupled_step import (
    ArmContactStepper,
    ContactSide,
    CoupledStep,
    StepResult,
)

FloatArray = NDArray[np.float64]

#: most steps per call of the compiled batch; a batch ends on a multiple of 100 steps (where
#: run_job's progress callback reports), after about PROGRESS_S of wall time
BATCH = 2000
PROGRESS_S = 0.01


def check_record_size(steps: int, samples: int, n: int, t_end: float) -> int:
    """The bytes a :class:`Record` of ``steps`` steps and ``samples`` output samples of an ``n``-joint
    arm takes; InputError if over a quarter of this machine's memory (checked before allocating: a
    job of 1e12 s asked for petabytes)."""
    need = 8 * (steps * (2 + 3 * n + 9) + 4 * samples)
    try:
        budget = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        budget = 4 << 30
    if need > budget:
        raise InputError(f"the job lasts {t_end:.6g} s: {steps:,} steps and {samples:,} force samples need "
                         f"{need / 1e9:.3g} GB, more than a quarter of this machine's memory "
                         f"({4 * budget / 1e9:.3g} GB); shorten the job (fewer or shorter passes) or raise sim.dt "
                         "and sim.output_dt")
    return need


class Record:
    """Samples of a run in preallocated arrays, written by the compiled step (compiled_step.record_step).

    Output grid (every ``output_dt``, from the closed form inside steps), (K,): t s, fn normal
    force N, depth m (penetration; negative: gap), step_index (the step each sample belongs to).
    Per step (S,): ts (end time) s, q, qd, tau (S, n) rad, rad/s, N m; fn_mean the step's mean
    normal force; normal (S, 3); tangential (S, 3) the tangential force per newton of normal force;
    lever (S, 3) contact point minus tool centre, m. :meth:`arrays` adds force (K, 3) (on the tool,
    base_link) and torque (K, 3) (about the tcp, base_link) per output sample.

    Args: output_dt s; n joints; steps the most steps it will hold; t_end s the last output time.
    """

    def __init__(self, output_dt: float, n: int, steps: int, t_end: float) -> None:
        self.output_dt = float(output_dt)
        S, K = steps + 2, int(math.floor(t_end / output_dt + 1e-9)) + 3
        check_record_size(S, K, n, t_end)
        self.ix = np.zeros(cstep.IX.size, dtype=np.int64)  # compiled_step.IX: steps, outputs, next output index, counts
        self.step_rows = (np.empty(S), np.empty((S, n)), np.empty((S, n)), np.empty((S, n)), np.empty(S),
                          np.empty((S, 3)), np.empty((S, 3)), np.empty((S, 3)))
        self.out_rows = (np.empty(K), np.empty(K), np.empty(K), np.empty(K, dtype=np.int64))

    def add(self, res: StepResult, state: Any) -> None:
        """Record one step of the Python wrappers (``state``: the arm's state after it)."""
        st = np.zeros((3, state.q.shape[0]))
        st[0], st[1], st[2] = state.q, state.qd, state.tau
        et, ef, ex = res.engine
        cstep.record_step(res.t0, res.dt, st, res.sv, res.rom_array, res.rom is not None, self.output_dt, self.ix,
                          *self.step_rows, *self.out_rows, et, ef, ex)

    def arrays(self) -> dict[str, FloatArray]:
        S, K = int(self.ix[cstep.I.steps]), int(self.ix[cstep.I.out])
        keys = ("ts", "q", "qd", "tau", "fn_mean", "normal", "tangential", "lever")
        # views, not copies: the record is done with (a copy would double the final run's memory)
        out = {k: a[:S] for k, a in zip(keys, self.step_rows, strict=True)}
        for k, a in zip(("t", "fn", "depth"), self.out_rows[:3], strict=True):
            out[k] = a[:K]
        idx = self.out_rows[3][:K]
        out["step_index"] = idx
        if len(idx):
            f = out["fn"][:, None] * (out["normal"][idx] + out["tangential"][idx])
            out["force"] = f
            out["torque"] = np.cross(out["lever"][idx], f)
        else:
            out["force"] = out["torque"] = np.zeros((0, 3))
        return out


@dataclass
class Run:
    """A simulated run: its record (:class:`Record` arrays), step counts and wall time (s)."""

    record: dict[str, FloatArray]
    steps: int
    contact_steps: int
    event_steps: int
    simulated_s: float
    wall_time_s: float


def coupled_step(setup: JobSetup, q0: FloatArray, project: bool = True) -> CoupledStep:
    """The in-process coupled step of a job's cell, the arm at rest at ``q0``."""
    cell = setup.cell
    contact = ContactSide(setup.model, cell.contact, cell.tool.tcp_link, cell.tool.spindle_speed, setup.query)
    arm = ArmContactStepper(setup.model, q0, cell.servo, cell.sim.gravity, cell.tool.tcp_link, project=project)
    arm.sample_dt = cell.sim.output_dt
    return CoupledStep(contact, arm, cell.sim.dt)


def simulate(setup: JobSetup, reference: Any, q0: FloatArray, t_end: float, project: bool = True,
             on_step: Callable[[float], None] | None = None) -> Run:
    """Follow ``reference`` (a TrajectoryInterpolator from t = 0) from rest at ``q0`` until ``t_end`` s.

    On one CAD face with a compiled surface (B-spline, plane, cylinder, cone, sphere, torus) the
    steps run compiled a batch at a time (:func:`simulate_compiled`);
    otherwise (mesh parts: the scene's geometry) step by step through the same kernels' wrappers."""
    setup.query.reset_warm_start()  # the run depends on its inputs alone, not on the runs before it
    step = coupled_step(setup, q0, project)
    step.arm.arm.set_trajectory(reference, 0.0)
    rec = Record(setup.cell.sim.output_dt, len(q0), int(math.ceil(t_end / step.dt + 1e-9)) + 1, t_end)
    wall = time.perf_counter()
    if setup.query.compiled is not None:
        steps = simulate_compiled(step, rec, t_end, on_step)
    else:
        while step.state.t < t_end - 1e-12:
            res = step.step()
            rec.add(res, step.state)
            if on_step is not None:
                on_step(step.state.t)
        steps = step.steps
    wall = time.perf_counter() - wall
    rec_arrays = rec.arrays()
    contact = int(rec.ix[cstep.I.contact])
    return Run(rec_arrays, steps, contact, int(rec.ix[cstep.I.event]), float(step.state.t), wall)


def simulate_compiled(step: CoupledStep, rec: Record, t_end: float, on_step: Callable[[float], None] | None,
                      engine: Any = None, laws: Any = None) -> int:
    """The coupled steps from the arm's state to ``t_end`` in compiled batches (compiled_step.run_batch,
    onset and release steps included). Leaves the final state in ``step``'s arm; returns the
    number of steps. ``engine``, ``laws``: the engine's and the laws' first-class kernels (default
    :func:`engine_list`, :func:`kernels`; stand-ins of the same types compile the step alone:
    :func:`~robot_grinding_sim.core.warmup.step`)."""
    side, arm_side, sim = step.contact, step.arm, step.arm.arm
    jt, jd, bd, ws, body, X = arm_side.kernel
    knots, coeffs, last = sim.trajectory.arrays()
    ctrl = sim.controller
    n = sim.state.q.shape[0]
    st = np.zeros((ak.ST_ROWS, n))
    st[ak.Q], st[ak.QD] = sim.state.q, sim.state.qd
    cs_state = side.cs
    fp = np.array([arm_side.f_prev])
    geo = side.query.compiled
    out, rom, b, sv = np.empty((ak.ST_ROWS, n)), np.empty(cstep.ROM.size), np.empty(n), np.empty(cstep.SV.size)
    t, dt, h = float(sim.state.t), step.dt, rec.output_dt
    laws = kernels() if laws is None else laws
    phases = integrator(int(side.cp[cstep.C.model]))
    engine = engine_list() if engine is None else engine
    # the step compiled by the helper meanwhile, if one runs (core/job/step_ahead.py), is then loaded
    # from the cache; the engine and the laws (compiled apart) were compiled here while it ran
    step_ahead.wait()
    steps0 = int(rec.ix[cstep.I.steps])
    batch = 200
    while True:
        wall = time.perf_counter()
        count = batch - int(round(t / dt)) % 100  # to the next multiple of 100 steps from t = 0
        code, t = cstep.run_batch(laws, phases, engine, t, dt, t_end, count, st, cs_state, fp, side.cp, geo,
                                  side.query.tool_arrays, knots, coeffs, last, ctrl.arm, ctrl.gravity, sim.gravity, jt,
                                  jd, bd, ws, body, X, *arm_side.held, arm_side.wrench_body, arm_side.wrench_X,
                                  arm_side.project, h, rec.ix, *rec.step_rows, *rec.out_rows, out, rom, b, sv)
        wall = time.perf_counter() - wall
        if code == 0 and wall > 0.0:  # about PROGRESS_S per batch (the first call also loads the kernels)
            batch = int(min(BATCH, max(200.0, batch * PROGRESS_S / wall))) // 100 * 100
        if code == cstep.E.normal_mass_singular:
            raise InputError(f"{STATUS.message(code)}: normal {rom[cstep.ROM.slice('normal')].tolist()} at q = "
                             f"{np.round(st[ak.Q], 4).tolist()}")
        if code != cstep.E.ok:
            raise InputError(f"{STATUS.message(code)} in the step from t = {t} s (q = "
                             f"{np.round(st[ak.Q], 4).tolist()})")
        if on_step is not None:
            on_step(t)
        if code == 0 and not t < t_end - 1e-12:
            break
    step_ahead.mark_compiled()  # the step is in the cache now: later jobs start no helper
    arm_side.f_prev = float(fp[0])
    arm_side.event_steps += int(rec.ix[cstep.I.event])
    arm_side.contact_steps += int(rec.ix[cstep.I.contact])
    sim.state = type(sim.state)(t, st[ak.Q].copy(), st[ak.QD].copy(), st[ak.QDD].copy(), st[ak.TAU].copy(),
                                st[ak.TAU_EXT].copy(), st[ak.Q_REF].copy(), st[ak.QD_REF].copy(),
                                st[ak.QDD_REF].copy())
    steps = int(rec.ix[cstep.I.steps]) - steps0
    step.steps += steps
    return steps


def simulate_trajectory(setup: JobSetup, traj: JointTrajectory, on_step: Callable[[float], None] | None = None,
                        t_end: float | None = None) -> Run:
    """Run a job trajectory from rest at its first knot to its end (or to ``t_end`` s: the run up to
    there is the same, the step being causal)."""
    end = traj.duration if t_end is None else min(float(t_end), traj.duration)
    return simulate(setup, traj.interpolator(setup.model), traj.positions[0], end, on_step=on_step)


@dataclass
class PassResult:
    """Normal force over one pass window: index, t0, t1 (s), mean, max, min, std (N), samples."""

    index: int
    t0: float
    t1: float
    mean: float
    max: float
    min: float
    std: float
    samples: int


def pass_statistics(rec: dict[str, FloatArray], windows: Sequence[tuple[int, float, float]]) -> list[PassResult]:
    """Normal-force statistics over each pass window (index, t0, t1) of the output samples."""
    out = []
    for idx, a, b in windows:
        sel = (rec["t"] >= a) & (rec["t"] <= b)
        f = rec["fn"][sel]
        if f.size == 0:
            out.append(PassResult(idx, a, b, 0.0, 0.0, 0.0, 0.0, 0))
            continue
        out.append(PassResult(idx, a, b, float(f.mean()), float(f.max()), float(f.min()), float(f.std()),
                              int(f.size)))
    return out

"""Running the grinding job in one process: the coupled step over a job trajectory, and its records.

:func:`simulate` follows a reference (a job trajectory, or any
:class:`~robot_grinding_sim.core.robot.arm_sim.TrajectoryInterpolator`) with the arm and the
contact (:class:`~robot_grinding_sim.core.job.coupled_step.CoupledStep`, every ``sim.dt``) and
records the force every ``sim.output_dt`` from the closed form inside the steps.

:func:`run_job` is the whole job (``grinding simulate`` / ``grinding demo`` / ``grinding plan``
with a robot): set up (:mod:`.setup`), optimise the per-pass offsets (:mod:`.optimise`) unless
the plan.json already carries them, build the job trajectory with them
(:mod:`~robot_grinding_sim.core.planning.trajectory`), simulate it, and report per-pass force
statistics. The result carries the plan (with its trajectory, offsets and predicted forces) that
a cell executes unchanged.
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

from robot_grinding_sim.core.contact.registry import kernels
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job import compiled_step as cstep
from robot_grinding_sim.core.job.coupled_step import (
    ArmContactStepper,
    ContactSide,
    CoupledStep,
    StepResult,
)
from robot_grinding_sim.core.job.setup import JobConfig, JobSetup, setup_job
from robot_grinding_sim.core.layout import STATUS
from robot_grinding_sim.core.planning.trajectory import (
    JointTrajectory,
    build_job_trajectory,
)
from robot_grinding_sim.core.robot import arm_kernels as ak

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


def simulate_compiled(step: CoupledStep, rec: Record, t_end: float, on_step: Callable[[float], None] | None
                      ) -> int:
    """The coupled steps from the arm's state to ``t_end`` in compiled batches (compiled_step.run_batch,
    onset and release steps included). Leaves the final state in ``step``'s arm; returns the
    number of steps."""
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
    laws = kernels()
    steps0 = int(rec.ix[cstep.I.steps])
    batch = 200
    while True:
        wall = time.perf_counter()
        count = batch - int(round(t / dt)) % 100  # to the next multiple of 100 steps from t = 0
        code, t = cstep.run_batch(laws, t, dt, t_end, count, st, cs_state, fp, side.cp, geo, knots, coeffs, last,
                                  ctrl.arm, ctrl.gravity, sim.gravity, jt, jd, bd, ws, body, X, arm_side.wrench_body,
                                  arm_side.wrench_X, arm_side.project, h, rec.ix, *rec.step_rows, *rec.out_rows,
                                  out, rom, b, sv)
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
    arm_side.f_prev = float(fp[0])
    arm_side.event_steps += int(rec.ix[cstep.I.event])
    arm_side.contact_steps += int(rec.ix[cstep.I.contact])
    sim.state = type(sim.state)(t, st[ak.Q].copy(), st[ak.QD].copy(), st[ak.QDD].copy(), st[ak.TAU].copy(),
                                st[ak.TAU_EXT].copy(), st[ak.Q_REF].copy(), st[ak.QD_REF].copy(),
                                st[ak.QDD_REF].copy())
    steps = int(rec.ix[cstep.I.steps]) - steps0
    step.steps += steps
    return steps


def simulate_trajectory(setup: JobSetup, traj: JointTrajectory, on_step: Callable[[float], None] | None = None
                        ) -> Run:
    """Run a job trajectory from rest at its first knot to its end."""
    return simulate(setup, traj.interpolator(setup.model), traj.positions[0], traj.duration, on_step=on_step)


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


@dataclass
class JobResult:
    """The final run of a job: its trajectory and offsets, per-pass statistics, the optimisation."""

    setup: JobSetup
    run: Run
    trajectory: JointTrajectory
    offsets: list[float]
    passes: list[PassResult]
    optimisation: Any
    total_wall_time_s: float
    removal: Any = None  # (RemovalGrid, per-pass statistics) of core.job.removal, or None

    @property
    def record(self) -> dict[str, FloatArray]:
        return self.run.record

    def force_target(self) -> dict[str, Any]:
        """plan.json's ``force_target``: per pass the commanded offset and the predicted mean force."""
        cell = self.setup.cell
        F = cell.process.target_force
        out: dict[str, Any] = {
            "target_force_n": F,
            "tolerance": cell.optimise.tolerance,
            "pass_index": [p.index for p in self.passes],
            "offsets_m": list(self.offsets),
            "predicted_mean_force_n": [p.mean for p in self.passes],
            "within_tolerance": [abs(p.mean - F) <= cell.optimise.tolerance * F for p in self.passes],
            "optimised": self.optimisation is not None,
            "step_s": cell.sim.dt,
        }
        if self.optimisation is not None:
            out["iterations"] = self.optimisation.iterations
        return out

    def plan(self) -> Any:
        """The plan that ran, with its job trajectory, offsets, predicted forces and cell values."""
        plan = self.setup.plan
        plan.trajectory = self.trajectory
        plan.offsets = list(self.offsets)
        plan.force_target = self.force_target()
        plan.cell = self.setup.cell.values()
        if plan.reachability is None:
            from robot_grinding_sim.core.planning.trajectory import reachability

            plan.reachability = reachability(self.setup.model, self.trajectory)
        return plan

    def summary(self) -> dict[str, Any]:
        cell = self.setup.cell
        F, tol = cell.process.target_force, cell.optimise.tolerance
        rows = []
        for k, p in enumerate(self.passes):
            row = {"pass": p.index, "mean_n": p.mean, "max_n": p.max, "min_n": p.min, "std_n": p.std,
                   "error": (p.mean - F) / F, "within_tolerance": abs(p.mean - F) <= tol * F,
                   "samples": p.samples, "t0_s": p.t0, "t1_s": p.t1, "offset_m": self.offsets[k]}
            if self.optimisation is not None:
                row["iterations"] = self.optimisation.iterations[k]
                row["means_per_iteration_n"] = self.optimisation.means[k]
            rows.append(row)
        run = self.run
        rtf = run.simulated_s / run.wall_time_s if run.wall_time_s > 0 else None
        opt = self.optimisation
        return {
            "part": self.setup.source,
            "faces": self.setup.faces,
            "exact_surface": self.setup.exact_surface,
            "robot": str(self.setup.model.source),
            "cell": cell.values(),
            "plan_file": self.setup.cfg.plan_file,
            "workpiece_pose": self.setup.X_BP.tolist(),
            "target_force_n": F,
            "tolerance": tol,
            "planned_penetration_m": self.setup.penetration,
            "tool_radius_m": self.setup.tool_radius,
            "passes": rows,
            "all_within_tolerance": all(r["within_tolerance"] for r in rows),
            "steps": run.steps,
            "contact_steps": run.contact_steps,
            "event_steps": run.event_steps,
            "step_s": cell.sim.dt,
            "output_period_s": cell.sim.output_dt,
            "trajectory_duration_s": self.trajectory.duration,
            "simulated_s": run.simulated_s,
            "wall_time_s": run.wall_time_s,
            "real_time_factor": rtf,
            "optimisation": None if opt is None else {
                "iterations": opt.iterations, "converged": opt.converged, "wall_time_s": opt.wall_time_s,
                "simulated_s": opt.simulated_s},
            "total_wall_time_s": self.total_wall_time_s,
            "timings": self.setup.timings,
            "removal": self.removal_summary(),
        }

    def removal_summary(self) -> dict[str, Any] | None:
        """summary.json's ``removal`` (Preston), or None when it is off."""
        if self.removal is None:
            return None
        from robot_grinding_sim.core.job.removal import removal_summary

        return removal_summary(*self.removal, self.setup.cell.removal)


def run_job(cfg: JobConfig, setup: JobSetup | None = None, on_stage: Callable[[str], None] | None = None,
            progress: Callable[[str, float, float], None] | None = None) -> JobResult:
    """Set up, optimise (if configured), build the job trajectory and run it; returns the final run.

    A plan.json with a trajectory runs that trajectory as it is (unless ``cfg.optimise``).
    ``progress(stage, done, total)`` is called: ``optimising`` in passes (done: the passes finished plus
    the current one's share of ``optimise.max_iterations``), ``simulating`` in simulated seconds.
    """
    from robot_grinding_sim.core.job.optimise import optimise_offsets

    wall0 = time.perf_counter()
    setup = setup or setup_job(cfg, on_stage)
    cell = setup.cell
    planned = setup.planned_trajectory() if not cfg.optimising else None
    opt = None
    if planned is not None:
        traj, offsets = planned
    else:
        offsets = [0.0] * len(setup.paths.passes)
        if cfg.optimising:
            if on_stage:
                on_stage("force-target optimisation")

            # progress in passes: the passes done, and of the current one its share of the iterations allowed
            n_passes, order = len(setup.paths.passes), {g.index: k for k, g in enumerate(setup.paths.passes)}
            done = [0.0]

            def opt_iter(idx: int, it: int, off: float, mean: float) -> None:
                if on_stage:
                    on_stage(f"pass {idx} iteration {it}: offset {off * 1e6:+.2f} um -> mean {mean:.3f} N")
                done[0] = order.get(idx, 0) + min(it / max(cell.optimise.max_iterations, 1), 1.0)
                if progress:
                    progress("optimising", done[0], n_passes)

            def opt_step(t: float) -> None:
                if progress and int(t * 1000) % 100 == 0:
                    progress("optimising", done[0], n_passes)

            opt = optimise_offsets(setup, opt_step, opt_iter)
            offsets = opt.final_offsets
        if on_stage:
            on_stage("job trajectory")
        traj = build_job_trajectory(setup.model, setup.paths, cell.process, offsets, setup.penetration,
                                    setup.q_home)
    if on_stage:
        on_stage("final run")
    t_end = traj.duration

    def on_step(t: float) -> None:
        if progress and int(round(t / cell.sim.dt)) % 100 == 0:
            progress("simulating", t, t_end)

    if progress:  # the total first: every report of the run (one per compiled batch) then counts for the ETA
        progress("simulating", 0.0, t_end)
    run = simulate_trajectory(setup, traj, on_step)
    stats = pass_statistics(run.record, traj.pass_windows())
    removal = None
    if cell.removal.enabled:
        from robot_grinding_sim.core.job.removal import job_removal

        if on_stage:
            on_stage("removal map")
        removal = job_removal(setup, run.record, traj)
    return JobResult(setup, run, traj, list(offsets), stats, opt, time.perf_counter() - wall0, removal)

"""The grinding job in one process: set up, optimise, simulate, report.

:func:`run_job` is the whole job (``grinding simulate`` / ``grinding demo`` / ``grinding plan``
with a robot): set up (:mod:`.setup`), optimise the per-pass offsets (:mod:`.optimise`) unless
the plan.json already carries them, build the job trajectory with them
(:mod:`~robot_grinding_sim.core.planning.trajectory`), simulate it (:mod:`.simulation`), and report
per-pass force statistics. The result carries the plan (with its trajectory, offsets and predicted
forces) that a cell executes unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.job.optimise import optimise_offsets
from robot_grinding_sim.core.job.setup import JobConfig, JobSetup, setup_job
from robot_grinding_sim.core.job.simulation import PassResult, Run, pass_statistics, simulate_trajectory
from robot_grinding_sim.core.planning.trajectory import (
    JointTrajectory,
    build_job_trajectory,
)

FloatArray = NDArray[np.float64]

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
    removal_figures: Any = None  # the map's uniformity against removal.target_depth (core.job.removal.depth_figures)

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
            "removal_plan": self.removal_plan_summary(),
        }

    def removal_plan_summary(self) -> dict[str, Any] | None:
        """The plan's depth plan (plan.json ``removal_plan``) without its predicted map, or None."""
        rp = getattr(self.setup.plan, "removal_plan", None)
        if not rp:
            return None
        return {**rp, "predicted": {k: v for k, v in (rp.get("predicted") or {}).items() if k != "map"}}

    def removal_summary(self) -> dict[str, Any] | None:
        """summary.json's ``removal`` (Preston), or None when it is off."""
        if self.removal is None:
            return None
        from robot_grinding_sim.core.job.removal import removal_summary

        return removal_summary(*self.removal, self.setup.cell.removal, self.removal_figures)


def run_job(cfg: JobConfig, setup: JobSetup | None = None, on_stage: Callable[[str], None] | None = None,
            progress: Callable[[str, float, float], None] | None = None) -> JobResult:
    """Set up, optimise (if configured), build the job trajectory and run it; returns the final run.

    A plan.json with a trajectory runs that trajectory as it is (unless ``cfg.optimise``).
    ``progress(stage, done, total)`` is called: ``optimising`` in passes (done: the passes finished plus
    the current one's share of ``optimise.max_iterations``), ``simulating`` in simulated seconds.
    """


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
    stats = pass_statistics(run.record, traj.pass_windows(cell.process.lead_in))
    removal = figures = None
    if cell.removal.enabled:
        from robot_grinding_sim.core.job.removal import depth_figures, job_removal

        if on_stage:
            on_stage("removal map")
        removal = job_removal(setup, run.record, traj)
        figures = depth_figures(setup, removal[0])
    return JobResult(setup, run, traj, list(offsets), stats, opt, time.perf_counter() - wall0, removal, figures)

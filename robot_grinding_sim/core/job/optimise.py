"""Force-target optimisation: per pass, the commanded penetration offset that gives the target force.

Each pass is simulated alone (approach from rest, dwell, the pass, retreat: the same builder and
the same coupled step as the whole job) with an offset along -n added to the planned TCP; its
mean normal force over the pass is compared with the target. The offset starts at 0 (the
planner's d = F/K) and moves by secant steps on mean force vs offset; the first step uses the
series stiffness of the servo-controlled arm and the contact, K k_arm / (K + k_arm) with
k_arm = Kp m at the pass's end (Kelvin-Voigt; the Hunt-Crossley family: the contact's local stiffness n F / d).
A pass stops below ``optimise.goal`` x target or after ``optimise.max_iterations`` simulations;
it converged if its best error is within ``optimise.tolerance``. The best offset is kept.

Each pass's simulation starts from the arm's configuration at that pass's approach in the job
trajectory (:func:`episode_seeds`), not from the first pass's: where the job changes the arm's
configuration between passes (:mod:`~robot_grinding_sim.core.planning.links`), the pass is
simulated in the configuration that will grind it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.contact.law import LINEAR
from robot_grinding_sim.core.job.setup import JobSetup
from robot_grinding_sim.core.job.simulation import pass_statistics, simulate_trajectory
from robot_grinding_sim.core.planning.trajectory import (
    build_job_trajectory,
    episode_trajectory,
    pass_start_configurations,
)


@dataclass
class Optimisation:
    """Per pass: offsets tried (m), mean forces (N), iterations, converged; wall and simulated time (s)."""

    offsets: list[list[float]]
    means: list[list[float]]
    iterations: list[int]
    converged: list[bool]
    final_offsets: list[float]
    wall_time_s: float = 0.0
    simulated_s: float = 0.0


def series_stiffness(setup: JobSetup, q: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """(k_arm = Kp m, series stiffness K k_arm / (K + k_arm)) along n at q, N/m (linear contact)."""
    model, cell = setup.model, setup.cell
    tcp = cell.tool.tcp_link
    m = model.effective_mass(q, tcp, model.fk(q, tcp)[:3, 3], n)
    k_arm = cell.servo.kp * m
    K = cell.contact.stiffness
    return k_arm, K * k_arm / (K + k_arm)


def episode_seeds(setup: JobSetup) -> list[np.ndarray]:
    """Per pass of ``setup.paths``: the arm's configuration (n,) rad at the start of its approach in
    the job trajectory with zero offsets (the offsets are micrometres: the same configurations)."""
    cell = setup.cell
    traj = build_job_trajectory(setup.model, setup.paths, cell.process, [0.0] * len(setup.paths.passes),
                                setup.penetration, setup.q_home)
    starts = pass_start_configurations(traj)
    return [starts[g.index] for g in setup.paths.passes]


def optimise_offsets(setup: JobSetup, on_step: Callable[[float], None] | None = None,
                     on_iteration: Callable[[int, int, float, float], None] | None = None) -> Optimisation:
    """Optimise every pass's offset (see the module docstring)."""
    cell = setup.cell
    F, opt = cell.process.target_force, cell.optimise
    model = setup.model
    wall = time.perf_counter()
    seeds = episode_seeds(setup)
    offsets, means, iters, conv, final = [], [], [], [], []
    sim_time = 0.0
    for g, q_seed in zip(setup.paths.passes, seeds, strict=True):
        tried, got = [0.0], []
        while True:
            traj = episode_trajectory(model, g, cell.process, tried[-1], setup.penetration, q_seed)
            run = simulate_trajectory(setup, traj, on_step)
            sim_time += run.simulated_s
            (res,) = pass_statistics(run.record, traj.pass_windows(cell.process.lead_in))
            got.append(res.mean)
            if on_iteration:
                on_iteration(g.index, len(got), tried[-1], res.mean)
            if abs(res.mean - F) <= opt.goal * F or len(got) >= opt.max_iterations:
                break
            if len(got) >= 2 and abs(tried[-1] - tried[-2]) > 0 and abs(got[-1] - got[-2]) > 1e-9:
                slope = (got[-1] - got[-2]) / (tried[-1] - tried[-2])
            elif registry.get(cell.contact.model).family == LINEAR:  # the series stiffness of arm and contact
                end = next(s for s in traj.segments if s["kind"] == "pass")["stop"] - 1  # the pass's last knot
                _, slope = series_stiffness(setup, traj.positions[end], g.normals[0])
            else:  # K d^n at rest: the contact's local stiffness dF/dd = n F / d at the target
                slope = F * cell.contact.exponent / setup.penetration
            if not slope > 0:
                break
            tried.append(tried[-1] + (F - res.mean) / slope)
        best = int(np.argmin(np.abs(np.array(got) - F)))
        offsets.append(tried[: len(got)])
        means.append(got)
        iters.append(len(got))
        conv.append(abs(got[best] - F) <= opt.tolerance * F)
        final.append(tried[best])
    return Optimisation(offsets, means, iters, conv, final, time.perf_counter() - wall, sim_time)

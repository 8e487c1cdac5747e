"""Force-target optimisation: per pass, the commanded penetration offset that gives the target force.

Each pass is simulated alone (approach from rest, dwell and the pass, to the pass's end: the retreat
after it changes nothing before it; the same builder and the same coupled step as the whole job)
with an offset along -n added to the planned TCP; its mean normal force over the pass is compared
with the target. The offset starts at 0 (the planner's d = F/K) and moves by secant steps on mean
force vs offset. The first step: with a ball and a Kelvin-Voigt law, the slope of the line through
zero force, F0 / (d + offset) (contact and servoed arm in series are linear, so the force is
proportional to the commanded penetration; the series-stiffness model below missed that slope by
up to 36 % on a freeform face); with a patch tool (its force is not linear in the penetration) the
series stiffness of the servo-controlled arm and the contact, K k_arm / (K + k_arm) with
k_arm = Kp m at the pass's end; the Hunt-Crossley family: the contact's local stiffness n F / d.
Where the force fell as the offset grew (not monotonic there: a held part's grinding friction can turn
the arm's wrist onto another branch) the next offset is half the model's step from the best one so far.
A pass stops below ``optimise.goal`` x target or after ``optimise.max_iterations`` simulations;
it converged if its best error is within ``optimise.tolerance``. The best offset is kept.

Each pass's simulation starts from the arm's configuration at that pass's approach in the job
trajectory (:func:`episode_seeds`), not from the first pass's: where the job changes the arm's
configuration between passes (:mod:`~robot_grinding_sim.core.planning.links`), the pass is
simulated in the configuration that will grind it.

The passes are independent (each its own episode from its own seed), so a worker pool runs them at
once (:func:`optimise_offsets` with ``pool``; ``grinding plan/simulate --workers N``, ``--address``):
each worker rebuilds the job's robot, part and contact scene once (:class:`EpisodeSource`) and runs
:func:`optimise_pass`, the same function the serial loop calls, so the result is the serial one
bit for bit (test/unit/test_optimise_parallel.py).
"""

from __future__ import annotations

import hashlib
import pickle
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.contact.law import LINEAR
from robot_grinding_sim.core.errors import GrindingSimError
from robot_grinding_sim.core.geometry.tool_contact import tool_sphere_radius
from robot_grinding_sim.core.geometry.tools import BALL
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


class OptimisationError(GrindingSimError):
    """A pass of the optimisation could not run on its worker (the worker died)."""


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


#: the first step takes the slope of the line through zero force (:func:`optimise_pass`) when the first
#: simulation's mean force is above this fraction of the target (below it the tool barely touched)
RAY_MIN = 0.2


def _point_contact(setup: Any) -> bool:
    """Whether the job's tool touches at a point (the ball), not over a patch whose area grows with
    the penetration (wheel, pad, disc: the force is not linear in it)."""
    arrays = getattr(getattr(setup, "query", None), "tool_arrays", None)
    return arrays is not None and int(arrays[0]) == BALL


@dataclass
class PassOptimisation:
    """One pass's optimisation: the offsets tried (m) and their mean forces (N), simulated time (s)."""

    offsets: list[float]
    means: list[float]
    simulated_s: float


def optimise_pass(setup: JobSetup | EpisodeSetup, g: Any, q_seed: np.ndarray,
                  on_step: Callable[[float], None] | None = None,
                  on_iteration: Callable[[int, int, float, float], None] | None = None) -> PassOptimisation:
    """Optimise the offset of pass ``g`` (one of ``setup.paths.passes``) from the configuration
    ``q_seed`` (n,) rad (see the module docstring)."""
    cell = setup.cell
    F, opt = cell.process.target_force, cell.optimise
    model = setup.model
    tried, got = [0.0], []
    sim_time = 0.0
    linear = registry.get(cell.contact.model).family == LINEAR
    while True:
        traj = episode_trajectory(model, g, cell.process, tried[-1], setup.penetration, q_seed)
        windows = traj.pass_windows(cell.process.lead_in)
        # simulated to the pass's end, not through the retreat after it (the mean is over the pass)
        run = simulate_trajectory(setup, traj, on_step, t_end=windows[0][2] + cell.sim.dt)  # type: ignore[arg-type]
        sim_time += run.simulated_s
        (res,) = pass_statistics(run.record, windows)
        got.append(res.mean)
        if on_iteration:
            on_iteration(g.index, len(got), tried[-1], res.mean)
        if abs(res.mean - F) <= opt.goal * F or len(got) >= opt.max_iterations:
            break
        if linear:  # the series stiffness of arm and contact
            end = next(s for s in traj.segments if s["kind"] == "pass")["stop"] - 1  # the pass's last knot
            _, model_slope = series_stiffness(setup, traj.positions[end], g.normals[0])  # type: ignore[arg-type]
        else:  # K d^n at rest: the contact's local stiffness dF/dd = n F / d at the target
            model_slope = F * cell.contact.exponent / setup.penetration
        if len(got) >= 2 and abs(tried[-1] - tried[-2]) > 0 and abs(got[-1] - got[-2]) > 1e-9:
            slope = (got[-1] - got[-2]) / (tried[-1] - tried[-2])
            if not slope > 0 and model_slope > 0:
                # the force fell as the offset grew: the force is not monotonic in the offset there (a
                # held part's grinding friction can turn the arm's wrist onto another branch): half the
                # model's step from the best offset so far
                k = min(range(len(got)), key=lambda i: abs(got[i] - F))
                tried.append(tried[k] + 0.5 * (F - got[k]) / model_slope)
                continue
        else:
            slope = model_slope
            pen = setup.penetration + tried[-1]
            if linear and res.mean > RAY_MIN * F and pen > 0.0 and _point_contact(setup):
                # a ball's force is linear in the commanded penetration, contact and arm in series:
                # F = k (penetration + offset), so the first simulation gives the slope k itself
                # (the series-stiffness model's k_arm = Kp m at one knot missed it by up to 36 %)
                slope = res.mean / pen
        if not slope > 0:
            break
        tried.append(tried[-1] + (F - res.mean) / slope)
    return PassOptimisation(tried[: len(got)], got, sim_time)


def optimise_offsets(setup: JobSetup, on_step: Callable[[float], None] | None = None,
                     on_iteration: Callable[[int, int, float, float], None] | None = None,
                     pool: Any = None) -> Optimisation:
    """Optimise every pass's offset (see the module docstring).

    ``pool``: a worker pool (:mod:`~robot_grinding_sim.core.study.pools`: local processes or Ray)
    that runs the passes at once, each on a worker that builds the job's robot, part and contact
    scene once (:class:`EpisodeSource`); the result is the serial one, bit for bit. None (or one
    worker, or one pass): in this process. ``on_step`` is called in this process only; with a
    pool ``on_iteration`` replays each pass's iterations as the pass ends.
    """
    cell = setup.cell
    F, opt = cell.process.target_force, cell.optimise
    wall = time.perf_counter()
    seeds = episode_seeds(setup)
    passes = setup.paths.passes
    if pool is None or getattr(pool, "workers", 1) < 2 or len(passes) < 2:
        results = [optimise_pass(setup, g, q, on_step, on_iteration) for g, q in zip(passes, seeds, strict=True)]
    else:
        results = _optimise_on(pool, setup, seeds, on_iteration)
    offsets, means, iters, conv, final = [], [], [], [], []
    for r in results:
        best = int(np.argmin(np.abs(np.array(r.means) - F)))
        offsets.append(r.offsets)
        means.append(r.means)
        iters.append(len(r.means))
        conv.append(abs(r.means[best] - F) <= opt.tolerance * F)
        final.append(r.offsets[best])
    return Optimisation(offsets, means, iters, conv, final, time.perf_counter() - wall,
                        float(sum(r.simulated_s for r in results)))


# --------------------------------------------------------------------------------------------------
# the passes on workers


@dataclass
class EpisodeSetup:
    """What a pass's simulation needs of a job (the part of :class:`JobSetup` a worker rebuilds)."""

    cell: Any
    model: Any
    query: Any
    penetration: float


@dataclass
class EpisodeSource:
    """How a worker rebuilds a job's :class:`EpisodeSetup`: the cell, the part (a built-in's name, or
    a file's name and bytes: the worker need not share the file system), its faces and pose.

    Built by :meth:`of` from a JobSetup; the same inputs give the same scene, so a pass simulated on
    a worker gives the same forces as in the job's own process.
    """

    cell: Any
    part: str
    part_bytes: bytes | None
    unit: str | None
    faces: list[int]
    X_BP: np.ndarray
    penetration: float

    @classmethod
    def of(cls, setup: JobSetup) -> EpisodeSource:
        source = str(getattr(setup.part, "source", setup.plan.source))
        path = Path(source)
        data = path.read_bytes() if path.is_file() else None
        unit = setup.plan.unit if setup.plan.unit != "m" else (setup.cell.workpiece.unit or None)
        return cls(setup.cell, source, data, unit, list(setup.faces), np.asarray(setup.X_BP, dtype=float),
                   float(setup.penetration))

    def key(self) -> str:
        h = hashlib.sha256(pickle.dumps((self.cell.values(), self.part, self.unit, self.faces, self.X_BP.tolist(),
                                         self.penetration)))
        if self.part_bytes is not None:
            h.update(self.part_bytes)
        return h.hexdigest()

    def build(self) -> EpisodeSetup:
        from robot_grinding_sim.core.geometry import parts
        from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
        from robot_grinding_sim.core.job.setup import cell_robot_model

        cell = self.cell
        model = cell_robot_model(cell)
        if self.part_bytes is None:
            part = parts.load_part(self.part, self.unit)
        else:  # the file's own name and suffix (the reader goes by the suffix)
            with tempfile.TemporaryDirectory(prefix="grinding_pass_part_") as tmp:
                path = Path(tmp) / Path(self.part).name
                path.write_bytes(self.part_bytes)
                part = parts.load_part(str(path), self.unit)
        wp = cell.workpiece
        closed = {"auto": None, "true": True, "false": False}[wp.closed]
        radius = tool_sphere_radius(model, cell.tool.tcp_link, cell.tool.link)
        scene, _ = workpiece_scene(part, self.faces, self.X_BP, radius, wp.deflection, closed)
        return EpisodeSetup(cell, model, ToolContactQuery(scene), self.penetration)


#: a worker's EpisodeSetups by EpisodeSource.key (built once per worker and job)
_WORKER_SETUPS: dict[str, EpisodeSetup] = {}


def optimise_pass_on_worker(source: EpisodeSource, g: Any, q_seed: np.ndarray) -> PassOptimisation:
    """:func:`optimise_pass` in a worker (a pool's function: module level, pickled by reference)."""
    key = source.key()
    setup = _WORKER_SETUPS.get(key)
    if setup is None:
        _WORKER_SETUPS.clear()  # one job's scene at a time
        setup = _WORKER_SETUPS[key] = source.build()
    return optimise_pass(setup, g, q_seed)


def _optimise_on(pool: Any, setup: JobSetup, seeds: list[np.ndarray],
                 on_iteration: Callable[[int, int, float, float], None] | None) -> list[PassOptimisation]:
    src = pool.share(EpisodeSource.of(setup))
    passes = setup.paths.passes
    results: list[PassOptimisation | None] = [None] * len(passes)
    for i, r in pool.map_unordered(optimise_pass_on_worker, [(src, g, q) for g, q in zip(passes, seeds, strict=True)]):
        if isinstance(r, Exception):  # the pool's WorkerLost: the worker died
            raise OptimisationError(f"pass {passes[i].index}: {r}")
        results[i] = r
        if on_iteration:
            for k, (off, mean) in enumerate(zip(r.offsets, r.means, strict=True)):
                on_iteration(passes[i].index, k + 1, off, mean)
    return [r for r in results if r is not None]

"""The force-target optimisation's passes on workers (issue 27 item 3): the result is the serial one,
bit for bit, whatever the pool (local processes here; Ray's pool is the study's, tested there).

Each worker rebuilds the job's robot, part and contact scene from the part's file (its bytes: the
worker need not share the file system); the check is against the same job optimised in this
process, pass by pass in order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_grinding_sim.core.config import config_from_mapping
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.job import optimise
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.study.pools import ProcessPool, SerialPool


@pytest.fixture(scope="module", params=["curved_panel", "fitted_blade"])
def job(request, tmp_path_factory):
    # the part as a third party's file (not a built-in name): the workers get its bytes. The fitted
    # face (degree 5 x 8) is one where the surface projection's answer depends on its warm start in
    # the last bits: each simulation starts from the same warm start (ToolContactQuery.reset_warm_start)
    folder = tmp_path_factory.mktemp("part")
    if request.param == "curved_panel":
        step = parts.write_part("curved_panel", folder)
        extra = {}
    else:
        step = parts.fitted_blade_face().write(folder / "blade.step", unit="mm")
        extra = {"workpiece.faces": [0], "passes.stepover": 0.0045}
    cell = config_from_mapping({"workpiece.part": str(step), "optimise.max_iterations": 3, **extra})
    cfg = JobConfig(cell=cell, optimise=True, max_passes=4, pass_length=0.015)
    return setup_job(cfg)


def _as_tuple(o: optimise.Optimisation):
    return o.offsets, o.means, o.iterations, o.converged, o.final_offsets, o.simulated_s


class TwoWorkersHere(SerialPool):
    """The pool protocol with two workers, run in this process (the worker path without processes)."""

    workers = 2


def test_passes_on_workers_equal_serial_bit_for_bit(job) -> None:
    serial = optimise.optimise_offsets(job)
    assert len(serial.final_offsets) == 4 and max(serial.iterations) >= 2  # the secant steps ran
    here = optimise.optimise_offsets(job, pool=TwoWorkersHere())
    assert _as_tuple(here) == _as_tuple(serial)
    pool = ProcessPool(2)
    seen: list[tuple[int, int, float, float]] = []
    try:
        par = optimise.optimise_offsets(job, on_iteration=lambda *a: seen.append(a), pool=pool)
    finally:
        pool.close()
    assert _as_tuple(par) == _as_tuple(serial)
    # every iteration reported, per pass in order
    for g, offs, means in zip(job.paths.passes, serial.offsets, serial.means, strict=True):
        mine = [(it, off, mean) for idx, it, off, mean in seen if idx == g.index]
        assert mine == [(k + 1, o, m) for k, (o, m) in enumerate(zip(offs, means, strict=True))]
    assert np.all(np.isfinite(par.final_offsets))


def test_a_worker_without_the_file_builds_the_scene_from_its_bytes(job) -> None:
    src = optimise.EpisodeSource.of(job)
    with open(src.part, "rb") as f:
        assert src.part_bytes == f.read()
    elsewhere = dataclasses.replace(src, part="/nonexistent/folder/" + src.part.rsplit("/", 1)[-1])
    a, b = job.query.compiled, elsewhere.build().query.compiled
    # the part's pose and its mesh (with its BVH) as the job's own (the warm starts, which the
    # queries move, aside)
    _assert_same(a[0], b[0])
    _assert_same(a[1], b[1])


def _assert_same(x, y) -> None:
    if isinstance(x, tuple):
        assert isinstance(y, tuple) and len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            _assert_same(u, v)
    else:
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_pass_simulation_does_not_depend_on_the_runs_before_it(tmp_path) -> None:
    """The same episode simulated on a fresh job and after another pass's episode: the same force
    to the last bit (the contact query's warm starts are reset per run; on the fitted face a warm
    start left by another pass moved the answers in their last bits, and the optimisation on
    workers, which run the passes in another order, differed from the serial one)."""
    from robot_grinding_sim.core.job.simulation import pass_statistics, simulate_trajectory
    from robot_grinding_sim.core.planning.trajectory import episode_trajectory

    step = parts.fitted_blade_face().write(tmp_path / "blade.step", unit="mm")
    cell = config_from_mapping({"workpiece.part": str(step), "workpiece.faces": [0], "passes.stepover": 0.0045})
    cfg = JobConfig(cell=cell, optimise=True, max_passes=2)

    def episode(setup, k):
        seeds = optimise.episode_seeds(setup)
        g = setup.paths.passes[k]
        traj = episode_trajectory(setup.model, g, cell.process, 0.0, setup.penetration, seeds[k])
        run = simulate_trajectory(setup, traj)
        return run.record["fn"].copy(), pass_statistics(run.record, traj.pass_windows())[0].mean

    fresh = episode(setup_job(cfg), 1)
    used = setup_job(cfg)
    episode(used, 0)
    after = episode(used, 1)
    assert fresh[1] == after[1]
    np.testing.assert_array_equal(fresh[0], after[0])

"""The job's step compiled ahead in a second process (core/job/step_ahead.py, ``warmup --step``): what
the helper compiles is what a job on a CAD face then loads from the cache, not compiles again (numba's
own dispatcher statistics say which), and a job does not start the helper once the step is cached.

Each check runs in fresh processes on an empty cache folder of its own (``NUMBA_CACHE_DIR``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: a process that runs the compiled step on the flat plate's top, a CAD face (an analytic plane: the
#: geometry arrays of every CAD face have these types), for no step; prints numba's statistics of
#: run_batch and whether the helper would start
_JOB = textwrap.dedent("""
    import json, types
    import numpy as np
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.contact.engine_kernels import STEP_SIG, new_step_list
    from robot_grinding_sim.core.contact.law import LAW_SIG, new_law_list
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, tool_sphere_radius, workpiece_scene
    from robot_grinding_sim.core.job import simulation, step_ahead
    from robot_grinding_sim.core.job.setup import load_robot_model
    from robot_grinding_sim.core.planning.planner import default_face, pose_matrix
    from robot_grinding_sim.core.planning.trajectory import JointTrajectory
    from robot_grinding_sim.core.sim import compiled_step
    from numba import njit

    cached_before = step_ahead.step_cached()
    cell = CellConfig()
    tcp = cell.tool.tcp_link
    model = load_robot_model(cell.robot.description_file, tcp)
    part = parts.load_part("flat_plate")
    scene, exact = workpiece_scene(part, [default_face(part)], pose_matrix(cell.workpiece.pose),
                                   tool_sphere_radius(model, tcp, cell.tool.link))
    query = ToolContactQuery(scene)
    q = np.asarray(cell.robot.home, dtype=float)
    traj = JointTrajectory(list(model.joint_names), tcp, np.array([0.0, 0.01]), np.vstack([q, q]), np.zeros((2, 6)))
    step = simulation.coupled_step(types.SimpleNamespace(model=model, cell=cell, query=query), q)
    step.arm.arm.set_trajectory(traj.interpolator(model), 0.0)
    no_step = njit(STEP_SIG)(lambda laws, phases, lp, m, f, d0, v0, t, dt, dense: (dense, 0, 0.0, 0.0, False, 0))
    no_law = njit(LAW_SIG)(lambda op, lp, a, b, c, d, e: 0.0)
    simulation.simulate_compiled(step, simulation.Record(cell.sim.output_dt, 6, 2, 0.0), 0.0, None,
                                 engine=new_step_list(no_step), laws=new_law_list(no_law))
    s = compiled_step.run_batch.stats
    print(json.dumps({"exact": exact, "cached_before": cached_before, "hits": sum(s.cache_hits.values()),
                      "misses": sum(s.cache_misses.values())}))
""")


def _env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_GRINDING_SIM_NUMBA_CACHE_BASE"}
    env["NUMBA_CACHE_DIR"] = str(cache)
    return env


def _job(cache: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _JOB], env=_env(cache), capture_output=True, text=True,
                         timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_helpers_step_is_the_one_a_cad_job_loads(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "robot_grinding_sim.core.warmup", "--step"], env=_env(tmp_path),
                   timeout=900, check=True)
    got = _job(tmp_path)
    assert got["exact"]  # a CAD face with its exact surface, not the helper's mesh
    assert got["cached_before"]  # a job would not start the helper again
    assert got == {**got, "hits": 1, "misses": 0}, got  # loaded, not compiled


def test_no_helper_without_need(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from robot_grinding_sim.core.job import step_ahead

    monkeypatch.setattr(step_ahead, "step_cached", lambda: True)
    assert not step_ahead.start()
    monkeypatch.setattr(step_ahead, "step_cached", lambda: False)
    monkeypatch.setenv(step_ahead.ENV, "0")
    assert not step_ahead.start()
    step_ahead.wait()  # nothing to wait for: returns

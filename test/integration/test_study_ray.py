"""A study on a local Ray cluster of 2 CPUs against the same jobs run one by one in this process.

The study: two built-in parts x two target forces (tiny jobs: one pass of 10 mm), and a face the
part does not have (two failing jobs). Checked: the Ray node listens on loopback; the table has
every job in study order, the failures with their error; its figures equal, bit for bit, those of
the study run in process one job after the other (every column but wall time and worker), and the
per-pass force statistics and cycle time equal those of ``run_job`` called directly on each job's
configuration (the job ``grinding simulate`` runs, without the study's code); Ray is shut down.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

STUDY = """
name: ray check
parts:
  - flat_plate
  - curved_panel
  - {part: flat_plate, faces: [999]}
plan: {max_passes: 1, pass_length: 0.01}
grid:
  process.target_force: [5, 8]
"""


def test_study_on_ray_equals_jobs_run_one_by_one(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not importorskip: ray is imported by the pool, see ray_pool
        pytest.skip("ray is not installed (the study extra)")
    from robot_grinding_sim.core.config import config_from_mapping
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig
    from robot_grinding_sim.core.study.driver import run_study
    from robot_grinding_sim.core.study.pools import SerialPool
    from robot_grinding_sim.core.study.ray_pool import RayPool
    from robot_grinding_sim.core.study.spec import load_study
    from robot_grinding_sim.core.study.table import differences, read_table

    (tmp_path / "study.yaml").write_text(STUDY)
    study = load_study(tmp_path / "study.yaml")
    assert len(study.jobs) == 6

    pool = RayPool(workers=2)
    import ray

    try:
        nodes = ray.nodes()
        assert [n["NodeManagerAddress"] for n in nodes] == ["127.0.0.1"]
        assert ray.cluster_resources()["CPU"] == 2
        report = run_study(study, tmp_path / "ray", lambda: pool)
    finally:
        pool.close()
    assert not ray.is_initialized()
    assert report.workers == 2 and not report.interrupted
    on_ray = read_table(report.table[0])
    assert list(on_ray["job"]) == list(range(6))
    assert list(on_ray["status"]) == ["ok", "ok", "ok", "ok", "failed", "failed"]
    assert all("999" in e for e in on_ray["error"][4:])
    assert len({w for w in on_ray["worker"][:4]}) >= 1
    for f in ("plan.json", "summary.json", "force.png", "removal.png", "result.json"):
        assert (tmp_path / "ray" / on_ray["folder"][0] / f).is_file(), f
    assert report.plots and all(p.is_file() for p in report.plots)

    one_by_one = read_table(run_study(study, tmp_path / "serial", SerialPool, plots=False).table[0])
    assert differences(on_ray, one_by_one) == []

    for job, (_, row) in zip(study.jobs[:4], on_ray.iloc[:4].iterrows(), strict=True):
        cfg = JobConfig(cell=config_from_mapping(job.cell), **job.plan)
        s = run_job(cfg).summary()
        for col, key in (("pass_mean_n", "mean_n"), ("pass_std_n", "std_n"), ("pass_min_n", "min_n"),
                         ("pass_max_n", "max_n")):
            assert list(row[col]) == [p[key] for p in s["passes"]], col
        assert row["cycle_time_s"] == s["trajectory_duration_s"] and row["steps"] == s["steps"]
        assert row["removal_max_depth_m"] == s["removal"]["max_depth_m"]
        assert row["target_force_n"] == row["process.target_force"] == job.cell["process.target_force"]

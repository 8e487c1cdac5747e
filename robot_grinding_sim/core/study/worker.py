"""One job of a study, as a worker runs it: the in-process grinding job, its figures and its files.

:func:`run_study_job` is what every pool calls (in process, in a process pool, in a Ray worker on
this machine or another): it builds the job's :class:`~robot_grinding_sim.core.job.setup.JobConfig`
from the :class:`~.spec.JobSpec`, runs :func:`~robot_grinding_sim.core.job.run.run_job` (the job
``grinding simulate`` runs), computes the figures of the results table (:func:`job_figures`) and
renders plan.json, summary.json, force.png and removal.png (core.job.outputs, without the bag) into
bytes, which it returns: the driver writes them, so workers need no shared file system. A part
file that is not on the worker (a cluster) comes as bytes and is written to a temporary file; the
results name the part as the study does.

It never raises for a job that fails: the outcome carries the error. ``cached`` tells the driver
whether the failure belongs to the inputs (bad parameters, an unreachable pass: the same inputs
fail again, so a resumed study keeps the result) or to the run (a defect, out of memory, another
code version on the worker: run again next time).

BLAS runs on one thread inside a job (threadpoolctl, when installed): a job's numbers do not
depend on the process or the machine's core count (a multi-threaded dot product sums in another
order), and workers do not oversubscribe the cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import GrindingSimError

#: the files of a job kept in its folder (those of core.job.outputs but the bag)
JOB_FILES = ("plan.json", "summary.json", "force.png", "removal.png")
#: the figures of a job (:func:`job_figures`), in the results table's order
FIGURES = ("passes", "target_force_n", "force_mean_n", "force_error_max", "force_std_n", "force_min_n",
           "force_max_n", "all_within_tolerance", "optimisation_iterations", "pass_mean_n", "pass_std_n",
           "pass_min_n", "pass_max_n", "pass_error", "pass_offset_m", "cycle_time_s", "grinding_time_s", "steps",
           "contact_steps", "removal_volume_m3", "removal_max_depth_m", "removal_mean_depth_m", "removal_cv",
           "removal_within_10pct")


class PartNotHere(RuntimeError):
    """The part file is not on the worker and its bytes were not sent: a failure of the run, not
    of the job's inputs (another worker, or the next start, runs it)."""


@dataclass
class JobOutcome:
    """What a worker returns for one job.

    Attributes:
        key: the job's key (:func:`~.keys.job_key`).
        status: ``ok`` or ``failed``.
        error: the error's text (empty when ok).
        cached: the result stands for the inputs (ok, or a failure of the inputs); False: run again.
        figures: the table's figures (:func:`job_figures`; empty when failed).
        files: file name -> bytes (:data:`JOB_FILES` that the job made).
        wall_time_s: the job's wall time on its worker, s.
        worker: ``host:pid`` of the process that ran it.
    """

    key: str
    status: str
    error: str = ""
    cached: bool = True
    figures: dict[str, Any] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    wall_time_s: float = 0.0
    worker: str = ""


def removal_uniformity(grid: Any, setup: Any) -> tuple[float | None, float | None]:
    """How even the removal is over the swath the passes are meant to cover: the grid's nodes within
    half a stepover (``passes.stepover``) of a pass's contact path (the ball's lowest point).

    Returns:
        (coefficient of variation of the depth there (std / mean, 0 = even), fraction of those nodes
        within +-10 % of their mean depth); (None, None) when nothing was removed there.
    """
    from scipy.spatial import cKDTree

    paths = setup.paths.passes
    contact = np.vstack([g.positions - setup.tool_radius * g.normals for g in paths])
    nodes = np.flatnonzero(grid.inside)
    if len(nodes) == 0 or len(contact) == 0:
        return None, None
    dist, _ = cKDTree(contact).query(grid.points[nodes])
    d = grid.depth[nodes[dist <= 0.5 * setup.cell.passes.stepover]]
    mean = float(d.mean()) if len(d) else 0.0
    if mean <= 0.0:
        return None, None
    return float(d.std() / mean), float(np.mean(np.abs(d - mean) <= 0.1 * mean))


def job_figures(result: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """The results table's figures of a finished job (units in the names; see docs/study.md).

    Per-pass normal-force statistics over each pass window (lists, one value per pass, and their
    aggregates over the passes), the force-target optimisation's iterations, the cycle time (the
    job trajectory's duration, approach to retreat, links included), the simulated steps and the
    removal (Preston): volume, largest and mean depth, uniformity (:func:`removal_uniformity`).
    """
    rows = summary["passes"]
    F = float(summary["target_force_n"])
    means = [float(r["mean_n"]) for r in rows]
    err = [float(r["error"]) for r in rows]
    opt = summary.get("optimisation") or {}
    out: dict[str, Any] = {
        "passes": len(rows),
        "target_force_n": F,
        "force_mean_n": float(np.mean(means)) if means else None,
        "force_error_max": float(max(abs(e) for e in err)) if err else None,
        "force_std_n": float(np.mean([r["std_n"] for r in rows])) if rows else None,
        "force_min_n": float(min(r["min_n"] for r in rows)) if rows else None,
        "force_max_n": float(max(r["max_n"] for r in rows)) if rows else None,
        "all_within_tolerance": bool(summary["all_within_tolerance"]),
        "optimisation_iterations": int(sum(opt.get("iterations") or [])),
        "pass_mean_n": means,
        "pass_std_n": [float(r["std_n"]) for r in rows],
        "pass_min_n": [float(r["min_n"]) for r in rows],
        "pass_max_n": [float(r["max_n"]) for r in rows],
        "pass_error": err,
        "pass_offset_m": [float(r["offset_m"]) for r in rows],
        "cycle_time_s": float(summary["trajectory_duration_s"]),
        "grinding_time_s": float(sum(r["t1_s"] - r["t0_s"] for r in rows)),
        "steps": int(summary["steps"]),
        "contact_steps": int(summary["contact_steps"]),
    }
    removal = summary.get("removal")
    cv = within = None
    if removal is not None and result.removal is not None:
        cv, within = removal_uniformity(result.removal[0], result.setup)
    out.update({
        "removal_volume_m3": None if removal is None else float(removal["volume_m3"]),
        "removal_max_depth_m": None if removal is None else float(removal["max_depth_m"]),
        "removal_mean_depth_m": None if removal is None else float(np.mean(
            [p["mean_depth_m"] for p in removal["passes"]] or [0.0])),
        "removal_cv": cv,
        "removal_within_10pct": within,
    })
    return out


@contextlib.contextmanager
def _part_file(job: Any, part_bytes: bytes | None) -> Iterator[tuple[str, bool]]:
    """(the file or built-in name to load, whether it is a stand-in for the study's file)."""
    from robot_grinding_sim.core.study.keys import file_digest

    if job.part.builtin:
        yield job.part.source, False
        return
    here = Path(job.part.source)
    if here.is_file() and file_digest(here) == job.part_digest:
        yield str(here), False
        return
    if part_bytes is None:
        raise PartNotHere(f"{job.part.source}: not on this worker ({socket.gethostname()}) and not sent")
    with tempfile.TemporaryDirectory(prefix="grinding_study_part_") as tmp:
        path = Path(tmp) / here.name  # the same name and suffix: the reader goes by the suffix
        path.write_bytes(part_bytes)
        yield str(path), True


def _one_thread() -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # the study extra brings it; without it BLAS keeps its threads
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def run_study_job(job: Any, part_bytes: bytes | None, code: str) -> JobOutcome:
    """Run one job (see the module docstring); never raises for a failing job.

    Args:
        job: the :class:`~.spec.JobSpec` (with its key and part digest).
        part_bytes: the part file's bytes for workers that do not have it (None: a built-in part, or
            the driver's file system is shared).
        code: the driver's :func:`~.keys.code_version`; a worker with other code refuses the job.
    """
    from robot_grinding_sim.core.study.keys import code_version

    t0 = time.perf_counter()
    who = f"{socket.gethostname()}:{os.getpid()}"

    def failed(error: str, cached: bool) -> JobOutcome:
        return JobOutcome(job.key, "failed", error, cached, wall_time_s=time.perf_counter() - t0, worker=who)

    if code != code_version():
        return failed(f"the worker {who} runs other code (version {code_version()[:12]}, the study's "
                      f"{code[:12]}): install the same package on every worker", cached=False)
    try:
        with _one_thread():
            figures, files = _run(job, part_bytes)
    except PartNotHere as exc:
        return failed(str(exc), cached=False)
    except GrindingSimError as exc:
        return failed(str(exc), cached=True)
    except MemoryError:
        return failed("out of memory", cached=False)
    except Exception as exc:  # a defect: recorded, the study goes on, and the job runs again next time
        return failed(f"internal error: {type(exc).__name__}: {exc}", cached=False)
    return JobOutcome(job.key, "ok", "", True, figures, files, time.perf_counter() - t0, who)


def _run(job: Any, part_bytes: bytes | None) -> tuple[dict[str, Any], dict[str, bytes]]:
    from robot_grinding_sim.core.config import config_from_mapping
    from robot_grinding_sim.core.job.outputs import write_outputs
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig, setup_job

    with _part_file(job, part_bytes) as (source, stand_in):
        cell = config_from_mapping({**job.cell, "workpiece.part": source})
        cfg = JobConfig(cell=cell, **job.plan)
        setup = setup_job(cfg)
        if stand_in:  # the results (summary, plan.json) name the part as the study does, not the copy
            setup.source = setup.plan.source = setup.part.source = job.part.source
            setup.cfg = dataclasses.replace(cfg, cell=config_from_mapping(job.cell))
        result = run_job(cfg, setup)
    summary = result.summary()
    figures = job_figures(result, summary)
    with tempfile.TemporaryDirectory(prefix="grinding_study_job_") as tmp:
        out = Path(tmp) / "job"
        write_outputs(out, result, summary, bag=False)
        # the outputs' paths as the job's folder holds them (not the temporary folder's)
        summary["outputs"] = {k: Path(v).name for k, v in summary["outputs"].items()}
        doc = json.loads((out / "summary.json").read_text())
        doc["outputs"] = summary["outputs"]
        (out / "summary.json").write_text(json.dumps(doc, indent=2))
        files = {name: (out / name).read_bytes() for name in JOB_FILES if (out / name).is_file()}
    return figures, files

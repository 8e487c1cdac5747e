"""Running a study: the jobs without a result go to a worker pool; results are stored as they come.

:func:`run_study` (what ``grinding study`` calls):

1. looks up each job's stored result by its key (:mod:`.table`); a result that stands
   (:func:`~.table.reusable`) is kept, every other job is to run (resumption: a study stopped
   half-way and started again runs only what is missing; an edited parameter or code changes
   the key, so that job runs again);
2. starts the pool (only if something is to run) and sends it the jobs in study order, the part
   files shared once (:meth:`~.pools.Pool.share`);
3. stores each outcome as it arrives (a failed job is recorded with its error and the study goes
   on; a worker that died is recorded as such and runs again next time) and reports progress:
   jobs done and failed, elapsed time and the time left at the rate so far;
4. writes the results table (every job in study order, whatever order they ended in; a stop
   leaves the jobs not run as ``not run``) and the plots across the study.

The table does not depend on the number of workers: each job's result is a function of its
inputs (fixed seeds, no clock in the figures; its wall time and worker are columns of their own).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.study.pools import Pool, WorkerLost
from robot_grinding_sim.core.study.spec import Study
from robot_grinding_sim.core.study.table import load_result, reusable, store_outcome, table_rows, write_table
from robot_grinding_sim.core.study.worker import JobOutcome, run_study_job


@dataclass
class StudyProgress:
    """Where a study is: ``total`` jobs, ``ok`` and ``failed`` (stored, earlier runs included),
    ``reused`` (from earlier runs), ``to_run`` and ``finished`` in this run, ``elapsed_s`` of this
    run since its pool started, ``eta_s`` (the time left at this run's rate; None before the first
    job ends), ``last``: a line on the job that just ended, ``last_status`` its status."""

    total: int
    ok: int = 0
    failed: int = 0
    reused: int = 0
    to_run: int = 0
    finished: int = 0
    elapsed_s: float = 0.0
    eta_s: float | None = None
    last: str = ""
    last_status: str = ""

    @property
    def done(self) -> int:
        return self.ok + self.failed


@dataclass
class StudyReport:
    """The end of :func:`run_study`: the progress at the end, the table's rows and files, the plots,
    and whether it was stopped (``interrupted``) before every job ran."""

    progress: StudyProgress
    rows: list[dict[str, Any]]
    table: tuple[Path, Path] | None = None
    plots: list[Path] = field(default_factory=list)
    interrupted: bool = False
    workers: int = 0


def stored_results(study: Study, out: Path, retry_failed: bool = False
                   ) -> tuple[dict[int, dict[str, Any]], list[int]]:
    """(the stored results that stand, by job index; the indices of the jobs to run)."""
    kept: dict[int, dict[str, Any]] = {}
    todo = []
    for job in study.jobs:
        doc = load_result(out, job)
        if reusable(doc, retry_failed):
            kept[job.index] = doc  # type: ignore[assignment]
        else:
            todo.append(job.index)
    return kept, todo


def run_study(study: Study, out: str | Path, make_pool: Callable[[], Pool], retry_failed: bool = False,
              on_progress: Callable[[StudyProgress], None] | None = None, plots: bool = True) -> StudyReport:
    """Run the study's missing jobs into ``out`` (see the module docstring).

    Args:
        study: from :func:`~.spec.load_study` (jobs with keys).
        out: the output folder (created; it may hold an earlier run of this study or of another).
        make_pool: starts the pool; called only when a job is to run.
        retry_failed: run again the jobs whose stored result is a failure of their inputs.
        on_progress: called at the start and after each job.
        plots: write the plots across the study.

    A KeyboardInterrupt stops the pool (the jobs in flight are cancelled; those that ended are
    stored) and returns a report with ``interrupted`` set, after writing the table.
    """
    from robot_grinding_sim.core.outfiles import check_output
    from robot_grinding_sim.core.study.keys import code_version

    out = check_output(out, "--out", kind="dir")
    out.mkdir(exist_ok=True)
    kept, todo = stored_results(study, out, retry_failed)
    results: dict[int, dict[str, Any] | None] = dict(kept)
    prog = StudyProgress(total=len(study.jobs), reused=len(kept), to_run=len(todo))
    prog.ok = sum(1 for d in kept.values() if d["status"] == "ok")
    prog.failed = len(kept) - prog.ok
    # a job whose stored result is a failure of the run (not of its inputs) runs again; until it
    # ends, the table shows the stored failure
    for i in todo:
        doc = load_result(out, study.jobs[i])
        if doc is not None:
            results[i] = doc
    if on_progress:
        on_progress(prog)
    interrupted = False
    workers = 0
    if todo:
        pool = make_pool()
        t0 = time.monotonic()  # the jobs' time from here (a local Ray cluster takes seconds to start)
        workers = pool.workers
        try:
            code = code_version()
            shared: dict[str, Any] = {}
            calls = []
            for i in todo:
                job = study.jobs[i]
                if not job.part.builtin and job.part.source not in shared:
                    shared[job.part.source] = pool.share(Path(job.part.source).read_bytes())
                calls.append((job, shared.get(job.part.source), code))
            for k, value in pool.map_unordered(run_study_job, calls):
                job = study.jobs[todo[k]]
                outcome = value if isinstance(value, JobOutcome) else JobOutcome(
                    job.key, "failed", f"worker lost: {value}" if isinstance(value, WorkerLost) else
                    f"internal error: {value!r}", cached=False)
                results[job.index] = store_outcome(out, job, outcome)
                prog.finished += 1
                prog.ok += outcome.status == "ok"
                prog.failed += outcome.status != "ok"
                prog.elapsed_s = time.monotonic() - t0
                prog.eta_s = prog.elapsed_s / prog.finished * (prog.to_run - prog.finished)
                prog.last_status = outcome.status
                prog.last = f"{job.describe()}: " + ("ok" if outcome.status == "ok" else
                                                    f"failed: {outcome.error}")
                if on_progress:
                    on_progress(prog)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            pool.close()
    rows = table_rows(study, results)
    table = write_table(out, rows)
    drawn: list[Path] = []
    if plots and not interrupted:
        from robot_grinding_sim.core.study.plots import plot_study

        drawn = plot_study(study, rows, out / "plots")
    return StudyReport(prog, rows, table, drawn, interrupted, workers)

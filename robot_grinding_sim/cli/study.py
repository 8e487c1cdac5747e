"""``grinding study``: many jobs (parts x cell parameters x plan options) on Ray, one results table.

The study file, the job keys, resumption and the table are :mod:`robot_grinding_sim.core.study`;
this module reads the options, starts the pool and shows the progress (docs/study.md).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import emit_json, json_option
from robot_grinding_sim.core.errors import InputError


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A callback for core.study.driver's progress: a bar on a terminal (jobs done / failed, ETA),
    a line per finished job in a log, nothing when not ``enabled`` (--json)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    if not enabled:
        yield lambda p: None
        return
    if not console.is_terminal:
        def line(p: Any) -> None:
            if p.finished == 0:
                click.echo(f"grinding study: {p.total} jobs, {p.reused} with results already, {p.to_run} to run",
                           err=True)
                return
            click.echo(f"grinding study: {p.done}/{p.total} done ({p.failed} failed), {_clock(p.elapsed_s)} "
                       f"elapsed, {_clock(p.eta_s)} left; {p.last}", err=True)
        yield line
        return
    with Progress(TextColumn("study"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
                  TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"), console=console,
                  transient=True) as bar:
        task = bar.add_task("study", total=None, failed=0, eta=_clock(None))

        def show(p: Any) -> None:
            if p.finished and p.last_status == "failed":
                console.print(f"[red]{p.last}[/red]")
            bar.update(task, total=p.total, completed=p.done, failed=p.failed, eta=_clock(p.eta_s))
        yield show


@contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the study as Ctrl-C does (the jobs that ended are kept, the table written)."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def make_pool(kind: str, workers: int | None, address: str | None) -> Any:
    """The pool of ``--pool`` (ray: local or ``--address``; process; serial)."""
    from robot_grinding_sim.core.study import pools

    if kind == "ray":
        from robot_grinding_sim.core.study.ray_pool import RayPool

        return RayPool(address, workers)
    if kind == "process":
        return pools.ProcessPool(workers)
    return pools.SerialPool()


@click.command("study")
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default="study_out", show_default=True,
              help="Output folder: results.parquet, results.csv, plots/, jobs/<key>/. Run again into the same "
                   "folder to continue a stopped study (only the jobs without a result run).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Jobs at once. Local: the Ray cluster's CPUs [default: every core]; with --address: the most "
                   "jobs in flight [default: the cluster's CPUs].")
@click.option("--address", default=None,
              help="A running Ray cluster (auto, HOST:6379, ray://HOST:10001) instead of a local one.")
@click.option("--pool", "pool_kind", type=click.Choice(["ray", "process", "serial"]), default="ray", show_default=True,
              help="Where jobs run: Ray; local processes (no Ray); this process, one by one.")
@click.option("--retry-failed", is_flag=True, help="Run again the jobs whose stored result is a failure.")
@click.option("--list", "list_only", is_flag=True, help="List the jobs, their keys and whether they have a "
                                                         "result; run nothing.")
@click.option("--no-plots", is_flag=True, help="Do not draw the plots across the study.")
@json_option
def study(study_file: str, out: str, workers: int | None, address: str | None, pool_kind: str,
          retry_failed: bool, list_only: bool, no_plots: bool, as_json: bool) -> int:
    """Plan and simulate every job of STUDY_FILE (parts x cell parameters) and write one table.

    Each job is the in-process job of `grinding simulate` (plan, force-target optimisation,
    simulation, removal); its plan.json, summary.json and plots go to its own folder, its figures
    to one row of results.parquet / results.csv. Jobs are keyed by a hash of their inputs and the
    code: a job with a result is not run again. A failed job is recorded with its error; the study
    goes on. Ctrl-C stops it (the table holds what ended); the same command continues it.
    """
    from robot_grinding_sim.core.study.driver import run_study, stored_results
    from robot_grinding_sim.core.study.spec import load_study

    if address is not None and pool_kind != "ray":
        raise InputError(f"--address {address} is a Ray cluster: it needs --pool ray")
    if pool_kind == "serial" and workers not in (None, 1):
        raise InputError("--pool serial runs one job at a time: --workers must be 1")
    spec = load_study(study_file)
    out_dir = Path(out)
    if list_only:
        kept, todo = stored_results(spec, out_dir, retry_failed) if out_dir.is_dir() else ({}, [j.index for j in
                                                                                               spec.jobs])
        jobs = [{"job": j.index, "key": j.key, "describe": j.describe(),
                 "state": kept[j.index]["status"] if j.index in kept else "to run"} for j in spec.jobs]
        if as_json:
            emit_json({"study": spec.name, "jobs": jobs})
        else:
            for j in jobs:
                click.echo(f"{j['job']:>4}  {j['key'][:16]}  {j['state']:<7} {j['describe']}")
            click.echo(f"{len(jobs)} jobs: {len(kept)} with a result, {len(todo)} to run")
        return 0
    with _progress(not as_json) as show, _term_as_interrupt():
        report = run_study(spec, out_dir, lambda: make_pool(pool_kind, workers, address), retry_failed,
                           on_progress=show, plots=not no_plots)
    p = report.progress
    doc = {"study": spec.name, "jobs": p.total, "ok": p.ok, "failed": p.failed, "reused": p.reused,
           "ran": p.finished, "not_run": p.total - p.done, "workers": report.workers, "wall_time_s": p.elapsed_s,
           "table": [str(t) for t in report.table or ()], "plots": [str(x) for x in report.plots],
           "interrupted": report.interrupted}
    if as_json:
        emit_json(doc)
    else:
        click.echo(f"{spec.name}: {p.total} jobs, {p.ok} ok, {p.failed} failed"
                   + (f", {p.total - p.done} not run" if p.total > p.done else "")
                   + f" ({p.reused} from earlier runs, {p.finished} run now"
                   + (f" on {report.workers} workers in {_clock(p.elapsed_s)})" if p.finished else ")"))
        for row in report.rows:
            if row["status"] == "failed":
                click.echo(f"  job {row['job']} ({row['part']}): {row['error']}")
        if report.table:
            click.echo(f"table: {report.table[0]}\n       {report.table[1]}")
        if report.plots:
            click.echo(f"plots: {', '.join(str(x) for x in report.plots)}")
    if report.interrupted:
        click.echo(f"grinding study: stopped: {p.done} of {p.total} jobs have a result; the same command "
                   "continues the study", err=True)
        return 130
    return 0

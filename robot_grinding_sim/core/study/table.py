"""A study's results: each job's folder (result.json and its files) and the results table.

Layout of a study's output folder::

    results.parquet, results.csv    one row per job, in the study's job order (this module)
    plots/<name>.png                a figure against each swept name (core.study.plots)
    jobs/<key[:16]>/                one job: result.json, plan.json, summary.json, force.png, removal.png

A job's folder is written whole or not at all (built beside it, then renamed): a folder that
exists is a finished job. The folder is named by the
job's key, not its number, so editing the study (a value added to the grid) keeps every result
whose inputs did not change. :func:`reusable` says whether a stored result stands (ok, or a
failure of the inputs) or the job runs again.

Table columns: ``job`` (index), ``key``, ``part``, ``faces``, one column per swept cell parameter
(named by the parameter), ``max_passes``, ``pass_length``, ``optimise``, ``status`` (``ok``,
``failed``, ``not run``), ``error``, the figures (:data:`~.worker.FIGURES`), ``wall_time_s``,
``worker``, ``folder``. Lists (per-pass figures) are Parquet lists and JSON text in the CSV.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.jsonsafe import json_safe
from robot_grinding_sim.core.study.spec import PLAN_OPTIONS, JobSpec, Study
from robot_grinding_sim.core.study.worker import FIGURES, JobOutcome

RESULT = "result.json"
#: columns that differ from run to run of the same job (left out of :func:`differences`)
RUN_COLUMNS = ("wall_time_s", "worker")
TABLE = "results.parquet"
CSV = "results.csv"


def load_result(out: Path, job: JobSpec) -> dict[str, Any] | None:
    """The stored result of ``job`` under the study folder ``out`` (None: none, or unreadable)."""
    f = Path(out) / job.folder / RESULT
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("key") == job.key else None


def reusable(doc: Mapping[str, Any] | None, retry_failed: bool = False) -> bool:
    """A stored result that stands: ok, or a failure of the job's inputs (unless ``retry_failed``)."""
    if doc is None:
        return False
    return doc.get("status") == "ok" or (bool(doc.get("cached")) and not retry_failed)


def job_inputs(job: JobSpec) -> dict[str, Any]:
    """The table's input columns of a job."""
    row: dict[str, Any] = {"job": job.index, "key": job.key, "part": job.part.name,
                           "faces": " ".join(str(f) for f in job.faces)}
    row.update({k: v for k, v in job.swept if k not in PLAN_OPTIONS})
    row.update({k: job.plan.get(k) for k in PLAN_OPTIONS})
    return row


def store_outcome(out: Path, job: JobSpec, outcome: JobOutcome) -> dict[str, Any]:
    """Write a job's folder (its files, then result.json) whole, replacing an older one; returns the
    result document."""
    doc = {"key": job.key, "status": outcome.status, "error": outcome.error, "cached": outcome.cached,
           "figures": outcome.figures, "wall_time_s": outcome.wall_time_s, "worker": outcome.worker,
           "inputs": job_inputs(job), "cell": dict(job.cell), "plan": dict(job.plan)}
    jobs = Path(out) / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    final = Path(out) / job.folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=jobs))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # a folder as mkdir makes it (mkdtemp's is private)
        for name, data in outcome.files.items():
            (tmp / name).write_bytes(data)
        (tmp / RESULT).write_text(json.dumps(json_safe(doc), indent=2, allow_nan=False))
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"{final}: cannot write the job's results ({exc.strerror or exc})") from None
    return doc


def table_rows(study: Study, results: Mapping[int, Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """One row per job of ``study`` (in its order) from the stored results by job index (None: not
    run)."""
    rows = []
    for job in study.jobs:
        doc = results.get(job.index)
        row = job_inputs(job)
        row["status"] = "not run" if doc is None else doc["status"]
        row["error"] = "" if doc is None else doc.get("error", "")
        figs = {} if doc is None else doc.get("figures") or {}
        row.update({name: figs.get(name) for name in FIGURES})
        row["wall_time_s"] = None if doc is None else doc.get("wall_time_s")
        row["worker"] = "" if doc is None else doc.get("worker", "")
        row["folder"] = job.folder if doc is not None else ""
        rows.append(row)
    return rows


def results_frame(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The rows as a pandas DataFrame (columns in the rows' order)."""
    import pandas as pd

    return pd.DataFrame(list(rows), columns=list(rows[0]) if rows else None)


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return json.dumps(json_safe(list(v)))
    return v


def write_table(out: Path, rows: Sequence[Mapping[str, Any]]) -> tuple[Path, Path]:
    """results.parquet (pyarrow) and results.csv into ``out``, both or neither."""
    import io

    from robot_grinding_sim.core.outfiles import write_files

    df = results_frame(rows)
    buf = io.BytesIO()
    df.to_parquet(buf, engine="pyarrow", index=False)
    csv = df.map(_csv_cell).to_csv(index=False)
    out = Path(out)
    write_files({out / TABLE: buf.getvalue(), out / CSV: csv})
    return out / TABLE, out / CSV


def read_table(path: str | Path) -> Any:
    """A results table (Parquet) as a DataFrame."""
    import pandas as pd

    return pd.read_parquet(path, engine="pyarrow")


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN/None equal to each other; lists and arrays element by element."""
    if hasattr(a, "tolist"):
        a = a.tolist()
    if hasattr(b, "tolist"):
        b = b.tolist()
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b, strict=True)))
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    if na or nb:
        return na and nb
    return bool(a == b)


def differences(a: Any, b: Any, ignore: Sequence[str] = RUN_COLUMNS) -> list[str]:
    """Where two results tables (DataFrames, rows in job order) differ, bit for bit, except the
    ``ignore`` columns: ``["job 3 force_mean_n: 5.01 != 5.02", ...]`` (empty: identical)."""
    out = []
    cols_a, cols_b = [c for c in a.columns if c not in ignore], [c for c in b.columns if c not in ignore]
    if cols_a != cols_b:
        return [f"columns differ: {sorted(set(cols_a) ^ set(cols_b))}"]
    if len(a) != len(b):
        return [f"{len(a)} rows != {len(b)} rows"]
    for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows(), strict=True):
        for c in cols_a:
            if not _same(ra[c], rb[c]):
                out.append(f"job {ra['job']} {c}: {ra[c]!r} != {rb[c]!r}")
    return out

"""The study's core without Ray (core/study): the study file and its grid, job keys, the stored
results and resumption, a failing job, the results table read back by pyarrow and the csv module.

The driver's logic is checked with a pool that records which jobs it is given and answers with
made-up outcomes (no simulation): which jobs run on a second start is the property under test.
One real job that fails (a face the part does not have) goes through the worker as a study runs it.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.study import keys
from robot_grinding_sim.core.study.driver import run_study
from robot_grinding_sim.core.study.pools import SerialPool, WorkerLost
from robot_grinding_sim.core.study.spec import load_study, read_study
from robot_grinding_sim.core.study.table import differences, read_table, write_table
from robot_grinding_sim.core.study.worker import FIGURES, JobOutcome, run_study_job

REPO = Path(__file__).resolve().parents[2]


def _write(folder: Path, text: str, name: str = "study.yaml") -> Path:
    p = folder / name
    p.write_text(text)
    return p


GRID = """
parts:
  - flat_plate
  - part: cad/a.step
    faces: [[-1], [0]]
plan: {max_passes: 1, pass_length: 0.01}
set: {sim.output_dt: 0.002}
grid:
  process.target_force: [5, 10, 1e1]
  max_passes: [1, 2]
cases:
  - {contact.stiffness: 1e5}
  - {contact.stiffness: 2e5, pass_length: 0.02}
"""


@pytest.fixture
def study_dir(tmp_path: Path) -> Path:
    (tmp_path / "cad").mkdir()
    shutil.copy(REPO / "parts" / "flat_plate.step", tmp_path / "cad" / "a.step")
    return tmp_path


def test_grid_expands_parts_faces_cases_and_grid_in_order(study_dir: Path) -> None:
    st = read_study(_write(study_dir, GRID))
    # 1 + 2 face selections, 2 cases, 3 x 2 grid
    assert len(st.jobs) == 3 * 2 * 6
    assert st.swept == ["contact.stiffness", "pass_length", "process.target_force", "max_passes"]
    first, last = st.jobs[0], st.jobs[-1]
    assert (first.part.name, first.faces) == ("flat_plate", (-1,))
    assert dict(first.swept) == {"contact.stiffness": 1e5, "pass_length": 0.01, "process.target_force": 5.0,
                                 "max_passes": 1}
    assert (last.part.name, last.faces) == ("cad/a.step", (0,))
    assert dict(last.swept) == {"contact.stiffness": 2e5, "pass_length": 0.02, "process.target_force": 10.0,
                                "max_passes": 2}
    # the grid's last name varies fastest; 1e1 is a number (as --set reads it)
    assert [dict(j.swept)["max_passes"] for j in st.jobs[:4]] == [1, 2, 1, 2]
    assert [dict(j.swept)["process.target_force"] for j in st.jobs[:6]] == [5.0, 5.0, 10.0, 10.0, 10.0, 10.0]
    # fixed values reach every job; the part entry sets workpiece.*
    assert all(j.cell["sim.output_dt"] == 0.002 for j in st.jobs)
    assert last.cell["workpiece.part"] == str((study_dir / "cad" / "a.step").resolve())
    assert last.cell["workpiece.faces"] == [0]
    assert [j.index for j in st.jobs] == list(range(len(st.jobs)))


def test_folder_gives_one_part_per_cad_file(study_dir: Path) -> None:
    shutil.copy(REPO / "parts" / "curved_panel.step", study_dir / "cad" / "b.STEP")
    (study_dir / "cad" / "notes.txt").write_text("not a part")
    st = read_study(_write(study_dir, "parts:\n  - folder: cad\n"))
    assert [j.part.name for j in st.jobs] == ["cad/a.step", "cad/b.STEP"]


@pytest.mark.parametrize("text, message", [
    ("parts: [flat_plate]\ngird: {}\n", "unknown key 'gird'"),
    ("parts: [flat_plate]\ngrid: {process.target_forc: [1, 2]}\n", "did you mean process.target_force"),
    ("parts: [flat_plate]\ngrid: {workpiece.part: [a, b]}\n", "workpiece.part comes from 'parts'"),
    ("parts: [flat_plate]\ngrid: {process.target_force: []}\n", "list of one value or more"),
    ("parts: [flat_plate]\nset: {max_passes: 2}\n", "unknown cell parameter 'max_passes'"),
    ("parts: [no_such.step]\n", "no_such.step: no such file"),
    ("parts: [{folder: nowhere}]\n", "folder nowhere: no such folder"),
    ("parts: [{part: flat_plate, faces: [a]}]\n", "faces must be face indices"),
    ("parts: [flat_plate]\nplan: {max_passes: 0}\n", "max-passes must be >= 1"),
    ("parts: [flat_plate]\ngrid: {max_passes: [1, 2.5]}\n", "max_passes must be int"),
    ("parts: []\n", "'parts' must be a list"),
    ("grid: {}\n", "no 'parts'"),
    ("parts: [flat_plate]\ncases: [{process.feed: 1}]\ngrid: {process.feed: [1]}\n", "also in 'grid'"),
])
def test_bad_study_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_study(_write(tmp_path, text))


def test_a_bad_value_names_the_file_and_the_job(tmp_path: Path) -> None:
    path = _write(tmp_path, "parts: [flat_plate]\ngrid: {process.target_force: [5, -3]}\n")
    with pytest.raises(InputError) as err:
        read_study(path)
    msg = str(err.value)
    assert str(path) in msg and "job 1 (flat_plate faces [-1], process.target_force=-3)" in msg
    assert "process.target_force" in msg.split("): ", 1)[1]


def test_the_same_job_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="job 1 and job 0 are the same job"):
        load_study(_write(tmp_path, "parts: [flat_plate]\ngrid: {process.target_force: [5, 5.0]}\n"))


# ---------------------------------------------------------------- keys


def test_keys_change_with_any_input_and_not_with_the_folder(study_dir: Path, tmp_path_factory: Any) -> None:
    text = "parts: [{part: cad/a.step}]\ngrid: {process.target_force: [5, 10]}\n"
    a = load_study(_write(study_dir, text))
    assert len({j.key for j in a.jobs}) == 2
    assert [j.key for j in load_study(_write(study_dir, text)).jobs] == [j.key for j in a.jobs]
    # moved: the same part bytes, the same parameters -> the same keys
    moved = tmp_path_factory.mktemp("moved")
    shutil.copytree(study_dir / "cad", moved / "cad")
    assert [j.key for j in load_study(_write(moved, text)).jobs] == [j.key for j in a.jobs]
    # a parameter's value
    b = load_study(_write(study_dir, text.replace("10]", "10.5]")))
    assert b.jobs[0].key == a.jobs[0].key and b.jobs[1].key != a.jobs[1].key
    # a fixed parameter, a plan option
    c = load_study(_write(study_dir, text + "set: {contact.cr: 0.4}\n"))
    d = load_study(_write(study_dir, text + "plan: {pass_length: 0.02}\n"))
    assert not ({j.key for j in c.jobs} | {j.key for j in d.jobs}) & {j.key for j in a.jobs}
    # the part's bytes (same name)
    shutil.copy(REPO / "parts" / "curved_panel.step", study_dir / "cad" / "a.step")
    e = load_study(_write(study_dir, text))
    assert not {j.key for j in e.jobs} & {j.key for j in a.jobs}


def test_keys_change_with_the_code(tmp_path: Path) -> None:
    st = read_study(_write(tmp_path, "parts: [flat_plate]\n"))
    job = st.jobs[0]
    digest = keys.part_digest(job.part)
    assert keys.job_key(job, digest, "code-1") != keys.job_key(job, digest, "code-2")
    assert keys.job_key(job, digest, "code-1") == keys.job_key(job, digest, "code-1")
    # the code version is the package's sources: an edited source file gives another one
    pkg = tmp_path / "pkg"
    shutil.copytree(REPO / "robot_grinding_sim" / "core" / "study", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = keys.source_digest(pkg)
    assert keys.source_digest(pkg) == before
    (pkg / "spec.py").write_text((pkg / "spec.py").read_text() + "\n# an edit\n")
    assert keys.source_digest(pkg) != before
    assert len(keys.code_version()) == 64 and keys.code_version() == keys.code_version()


def test_a_file_parameter_is_keyed_by_its_contents(tmp_path: Path) -> None:
    urdf = REPO / "urdf" / "ur10e_grinding.urdf"
    for name in ("r1.urdf", "r2.urdf"):
        shutil.copy(urdf, tmp_path / name)
    text = "parts: [flat_plate]\nset: {robot.description_file: %s}\n"
    k1 = load_study(_write(tmp_path, text % (tmp_path / "r1.urdf"))).jobs[0].key
    k2 = load_study(_write(tmp_path, text % (tmp_path / "r2.urdf"))).jobs[0].key
    assert k1 == k2  # another path, the same bytes
    (tmp_path / "r2.urdf").write_text(urdf.read_text().replace("<robot", "<!-- edited -->\n<robot", 1))
    assert load_study(_write(tmp_path, text % (tmp_path / "r2.urdf"))).jobs[0].key != k1


# ---------------------------------------------------------------- the driver, with a recording pool


class RecordingPool:
    """A pool that runs nothing: answers each job with ``answer(job)``; ``stop_after`` jobs, then a
    KeyboardInterrupt (a user's Ctrl-C half-way)."""

    workers = 2

    def __init__(self, answer: Callable[[Any], Any], stop_after: int | None = None) -> None:
        self.answer, self.stop_after, self.ran, self.closed = answer, stop_after, [], False

    def share(self, obj: Any) -> Any:
        return obj

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> Iterator[tuple[int, Any]]:
        assert fn is run_study_job
        for i, (job, _part, _code) in reversed(list(enumerate(calls))):  # out of order, as workers end
            if self.stop_after is not None and len(self.ran) == self.stop_after:
                raise KeyboardInterrupt
            self.ran.append(job.index)
            yield i, self.answer(job)

    def close(self) -> None:
        self.closed = True


def _ok(job: Any) -> JobOutcome:
    figs = {name: None for name in FIGURES}
    figs.update(force_mean_n=float(job.cell["process.target_force"]) + 0.1, pass_mean_n=[1.0, 2.0], passes=2)
    return JobOutcome(job.key, "ok", figures=figs, files={"summary.json": b"{}"}, wall_time_s=1.0, worker="w:1")


def test_resume_runs_only_the_missing_jobs(tmp_path: Path) -> None:
    st = load_study(_write(tmp_path, "parts: [flat_plate, curved_panel]\ngrid: {process.target_force: [4, 5, 6]}\n"))
    out = tmp_path / "out"
    first = RecordingPool(_ok, stop_after=2)
    rep = run_study(st, out, lambda: first, plots=False)
    assert rep.interrupted and first.closed and len(first.ran) == 2
    table = read_table(rep.table[0])
    assert list(table["job"]) == list(range(6))  # every job, in study order
    assert sorted(table.loc[table["status"] == "ok", "job"]) == sorted(first.ran)
    assert (table["status"] == "not run").sum() == 4
    second = RecordingPool(_ok)
    rep = run_study(st, out, lambda: second, plots=False)
    assert sorted(second.ran) == sorted(set(range(6)) - set(first.ran))
    assert not rep.interrupted and rep.progress.reused == 2 and rep.progress.ok == 6
    # everything done: the pool is not even started
    rep = run_study(st, out, lambda: pytest.fail("started a pool with nothing to run"), plots=False)
    assert rep.progress.finished == 0 and rep.progress.ok == 6
    # an edited value: only its jobs run
    st2 = load_study(_write(tmp_path, "parts: [flat_plate, curved_panel]\ngrid: {process.target_force: [4, 5, 7]}\n"))
    third = RecordingPool(_ok)
    run_study(st2, out, lambda: third, plots=False)
    assert sorted(third.ran) == [2, 5]


def test_a_failing_job_is_recorded_and_the_study_goes_on(tmp_path: Path) -> None:
    st = load_study(_write(tmp_path, "parts: [flat_plate]\ngrid: {process.target_force: [4, 5, 6, 7]}\n"))

    def answer(job: Any) -> Any:
        if job.index == 1:
            return JobOutcome(job.key, "failed", "pass 0 unreachable", cached=True)
        if job.index == 2:
            return WorkerLost("worker process died")  # the pool's word for a call that could not run
        return _ok(job)

    out = tmp_path / "out"
    rep = run_study(st, out, lambda: RecordingPool(answer), plots=False)
    assert (rep.progress.ok, rep.progress.failed) == (2, 2)
    rows = {r["job"]: r for r in rep.rows}
    assert rows[1]["status"] == "failed" and rows[1]["error"] == "pass 0 unreachable"
    assert rows[2]["status"] == "failed" and "worker lost: worker process died" in rows[2]["error"]
    assert rows[3]["status"] == "ok"
    # next start: the lost job runs again, the inputs' failure does not (unless asked)
    again = RecordingPool(_ok)
    run_study(st, out, lambda: again, plots=False)
    assert again.ran == [2]
    retry = RecordingPool(_ok)
    rep = run_study(st, out, lambda: retry, retry_failed=True, plots=False)
    assert retry.ran == [1] and rep.progress.ok == 4


def test_a_real_failing_job_through_the_worker(tmp_path: Path) -> None:
    """A face the part does not have: the in-process job's own error, recorded, cached."""
    st = load_study(_write(tmp_path, "parts: [{part: flat_plate, faces: [999]}]\nplan: {max_passes: 1}\n"))
    rep = run_study(st, tmp_path / "out", SerialPool, plots=False)
    (row,) = rep.rows
    assert row["status"] == "failed" and "999" in row["error"], row["error"]
    doc = json.loads((tmp_path / "out" / row["folder"] / "result.json").read_text())
    assert doc["cached"] is True and doc["key"] == st.jobs[0].key


def test_a_worker_with_other_code_refuses_the_job(tmp_path: Path) -> None:
    st = load_study(_write(tmp_path, "parts: [flat_plate]\n"))
    out = run_study_job(st.jobs[0], None, "0" * 64)
    assert out.status == "failed" and not out.cached and "runs other code" in out.error


# ---------------------------------------------------------------- the table


def test_table_reads_back_with_pyarrow_and_csv(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [{"job": 0, "part": "a", "process.target_force": 5.0, "status": "ok", "force_mean_n": 5.01,
             "pass_mean_n": [5.0, 5.02], "wall_time_s": 3.0},
            {"job": 1, "part": "b", "process.target_force": 10.0, "status": "failed", "force_mean_n": None,
             "pass_mean_n": None, "wall_time_s": 1.0}]
    parquet, csv_path = write_table(tmp_path, rows)
    t = pq.read_table(parquet).to_pylist()
    assert t[0]["pass_mean_n"] == [5.0, 5.02] and t[1]["force_mean_n"] is None
    assert t[1]["process.target_force"] == 10.0 and t[1]["status"] == "failed"
    with open(csv_path, newline="") as fh:
        back = list(csv.DictReader(fh))
    assert json.loads(back[0]["pass_mean_n"]) == [5.0, 5.02] and back[1]["part"] == "b"
    a = read_table(parquet)
    b = a.copy()
    b.loc[0, "wall_time_s"] = 99.0
    assert differences(a, b) == []  # the wall time is the run's, not the job's
    b.loc[1, "process.target_force"] = 10.000000001
    b.at[0, "pass_mean_n"] = [5.0, 5.0200001]
    found = differences(a, b)
    assert len(found) == 2 and "job 1 process.target_force" in found[1] and "job 0 pass_mean_n" in found[0]


def test_a_builtin_part_is_its_shipped_file_every_time() -> None:
    """A built-in job's key hashes the file the job loads: the shipped parts/<name>.step, the same
    bytes at every call (it was a new STEP file in the cache at each call, with a new timestamp in
    its header, so a built-in part's job never had the same key twice)."""
    from robot_grinding_sim.core.geometry.parts import part_path

    first = part_path("flat_plate")
    assert first == REPO / "parts" / "flat_plate.step"
    assert keys.file_digest(part_path("flat_plate")) == keys.file_digest(first)


# ---------------------------------------------------------------- the command


def test_cli_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    from cli_runner import run

    r = run("study", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing.yaml: no such file" in r.stderr
    bad = _write(tmp_path, "parts: [flat_plate]\ngrid: {process.target_force: [5, nan]}\n")
    r = run("study", str(bad), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.startswith("grinding study: error: ") and "job 1" in r.stderr, r.stderr
    r = run("study", str(bad), "--pool", "process", "--address", "auto")
    assert r.returncode == 2 and "--address auto is a Ray cluster" in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_list_shows_jobs_and_what_has_a_result(tmp_path: Path) -> None:
    from cli_runner import run

    path = _write(tmp_path, "parts: [flat_plate]\ngrid: {process.target_force: [4, 5]}\n")
    st = load_study(path)
    out = tmp_path / "out"
    run_study(st, out, lambda: RecordingPool(_ok, stop_after=1), plots=False)
    r = run("study", str(path), "--out", str(out), "--list", "--json")
    assert r.returncode == 0, r.stderr
    jobs = json.loads(r.stdout)["jobs"]
    assert [j["key"] for j in jobs] == [j.key for j in st.jobs]
    assert sorted(j["state"] for j in jobs) == ["ok", "to run"]


def test_a_job_folder_is_made_as_mkdir_makes_folders(tmp_path: Path) -> None:
    import os

    st = load_study(_write(tmp_path, "parts: [flat_plate]\n"))
    run_study(st, tmp_path / "out", lambda: RecordingPool(_ok), plots=False)
    umask = os.umask(0)
    os.umask(umask)
    mode = (tmp_path / "out" / st.jobs[0].folder).stat().st_mode & 0o777
    assert mode == 0o777 & ~umask, oct(mode)


@pytest.mark.slow
def test_a_worker_without_the_part_file_runs_it_from_the_bytes_sent(study_dir: Path) -> None:
    """A cluster's worker: the part file is not there; the driver's bytes are written to a temporary
    file, and the results name the part as the study does (plan.json runs again from it)."""
    st = load_study(_write(study_dir, "parts: [cad/a.step]\nplan: {max_passes: 1, pass_length: 0.01}\n"))
    job = st.jobs[0]
    data = (study_dir / "cad" / "a.step").read_bytes()
    (study_dir / "cad" / "a.step").unlink()
    out = run_study_job(job, None, keys.code_version())
    assert out.status == "failed" and "not on this worker" in out.error and not out.cached
    out = run_study_job(job, data, keys.code_version())
    assert out.status == "ok", out.error
    plan = json.loads(out.files["plan.json"])
    summary = json.loads(out.files["summary.json"])
    assert plan["part"]["source"] == summary["part"] == summary["cell"]["workpiece.part"] == job.part.source
    assert plan["cell"]["workpiece.part"] == job.part.source
    assert summary["outputs"] == {"plot": "force.png", "summary": "summary.json", "plan": "plan.json",
                                  "removal_plot": "removal.png"}
    assert out.figures["passes"] == 1 and out.figures["force_mean_n"] > 0

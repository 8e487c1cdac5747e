"""``grinding calibrate`` shows a progress bar with an ETA on stderr; --json stays clean.

The bag is the in-process job on one 10 mm pass of the flat plate (no optimisation), calibrated
against its own plan.json: the fit needs no orientation sweep to run (bias only), only the bag and
the plan. The CLI runs with a terminal forced on stderr (rich honours FORCE_COLOR), as in
test_progress_cli; the bar is drawn at every update (rich draws it 10 times a second from a thread
of its own, so a fast stage could pass undrawn), so every stage is drawn however fast the machine,
without holding the simulations.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from robot_grinding_sim.cli import cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ETA = re.compile(r"(\d+)%\s+\d+:\d\d:\d\d\s+\d+:\d\d:\d\d")  # percentage, elapsed, remaining
ENV = {"FORCE_COLOR": "1", "COLUMNS": "200"}
STAGES = ("reading the bag", "simulating the starting cell", "fitting the contact stiffness",
          "simulating the identified cell")


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job's output folder: bag/ and plan.json (what `grinding simulate` writes)."""
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.outputs import write_outputs
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig

    out = tmp_path_factory.mktemp("calibrate_progress") / "sim"
    result = run_job(JobConfig(cell=CellConfig(), max_passes=1, pass_length=0.01, optimise=False))
    write_outputs(out, result, result.summary())
    return out


@pytest.fixture
def drawn_at_every_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's Progress redraws after each update, advance and reset (the bar as the timer thread
    would draw it, at every change)."""
    from rich.progress import Progress

    for name in ("update", "advance", "reset"):
        original = getattr(Progress, name)

        def redraw(self: Progress, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            out = _original(self, *args, **kwargs)
            self.refresh()
            return out

        monkeypatch.setattr(Progress, name, redraw)


def test_the_core_reports_each_stage_with_a_total(measured: Path) -> None:
    from robot_grinding_sim.core.calibration.calibrate import calibrate

    calls: list[tuple[str, float, float]] = []
    result = calibrate(measured / "bag", measured / "plan.json", progress=lambda *a: calls.append(a))
    names = list(dict.fromkeys(name for name, _, _ in calls))
    assert names[0] == "loading robot, part and plan" and calls[0][2] == 0.0  # no total: open-ended
    assert [n.split(" (")[0] for n in names[1:]] == list(STAGES)
    assert re.fullmatch(r"fitting the contact stiffness \(at most \d+ simulations\)", names[3])
    for name in names[1:]:
        rows = [(d, t) for n, d, t in calls if n == name]
        assert len({t for _, t in rows}) == 1 and rows[0][1] > 0  # one total per stage
        done = [d for d, _ in rows]
        assert done == sorted(done) and 0.0 <= done[0] and done[-1] <= rows[0][1] + 1e-9
        if not name.startswith("fitting"):
            assert done[-1] == pytest.approx(rows[0][1])  # the stage ends at 100 %
    # the fit's budget is in simulated seconds of the pass (the identified cell's total), and it
    # stopped short of it
    fit = [(d, t) for n, d, t in calls if n == names[3]]
    n_max = int(re.search(r"at most (\d+)", names[3]).group(1))
    assert fit[0][1] == pytest.approx(n_max * calls[-1][2])
    assert fit[-1][0] < fit[0][1] and result.simulations >= 3


def test_calibrate_shows_a_bar_with_an_eta_on_stderr(measured: Path, tmp_path: Path,
                                                     drawn_at_every_update: None) -> None:
    out = tmp_path / "cell.yaml"
    res = CliRunner().invoke(cli, ["calibrate", str(measured / "bag"), "--out", str(out)], env=ENV,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    err = ANSI.sub("", res.stderr)
    lines = [ln for ln in re.split(r"[\r\n]", err) if ln.strip()]
    for stage in STAGES[1:]:
        etas = [m for ln in lines if ln.startswith(stage) and (m := ETA.search(ln))]
        assert etas, f"no {stage!r} bar line with an ETA: {lines[-5:]!r}"
    stdout = ANSI.sub("", res.stdout)
    assert not any(stage in stdout for stage in STAGES)  # the bar stays off stdout
    assert "mean relative error" in stdout and f"wrote {out}" in stdout and out.is_file()


def test_calibrate_json_has_no_bar(measured: Path, tmp_path: Path, drawn_at_every_update: None) -> None:
    out = tmp_path / "cell.yaml"
    res = CliRunner().invoke(cli, ["calibrate", str(measured / "bag"), "--out", str(out), "--json"], env=ENV,
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)  # stdout is the JSON document and nothing else
    assert summary["out"] == str(out) and summary["simulations"] >= 3 and "mre_after" in summary
    assert not any(stage in res.stderr for stage in ("calibrating", *STAGES)), res.stderr[-500:]

"""A long-running subcommand shows a progress bar with an ETA on stderr.

``grinding simulate`` on a small job (one 10 mm pass of the flat plate, no optimisation) with a
terminal forced on stderr (rich honours FORCE_COLOR): some rendered bar line must carry a
percentage, the elapsed time and a numeric time remaining (rich's TimeRemainingColumn shows
``-:--:--`` while the total is unknown, which a bar without a total shows throughout).
"""

from __future__ import annotations

import re

from click.testing import CliRunner

from robot_grinding_sim.cli import cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ETA = re.compile(r"(\d+)%\s+\d+:\d\d:\d\d\s+\d+:\d\d:\d\d")  # percentage, elapsed, remaining


def test_simulate_shows_a_bar_with_an_eta_on_stderr(tmp_path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["simulate", "flat_plate", "--max-passes", "1", "--pass-length", "0.01",
                                   "--no-optimise", "--out", str(out)],
                             env={"FORCE_COLOR": "1", "COLUMNS": "150"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    err = ANSI.sub("", res.stderr)
    lines = [ln for ln in re.split(r"[\r\n]", err) if ln.startswith("simulating")]
    assert lines, f"no 'simulating' bar on stderr: {err[-500:]!r}"
    etas = [m for ln in lines if (m := ETA.search(ln))]
    assert etas, f"no bar line with an ETA: {lines[-3:]!r}"
    assert max(int(m.group(1)) for m in etas) == 100
    assert "simulating" not in ANSI.sub("", res.stdout)  # the bar stays off stdout


def test_plan_shows_a_bar_with_an_eta_on_stderr(tmp_path) -> None:
    """grinding plan with the force-target optimisation: the optimisation's bar counts passes and the
    final run's counts simulated seconds; both have a total, so a percentage and a time remaining."""
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(cli, ["plan", "flat_plate", "--max-passes", "2", "--pass-length", "0.01",
                                   "--out", str(out)],
                             env={"FORCE_COLOR": "1", "COLUMNS": "150"}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    err = ANSI.sub("", res.stderr)
    for stage in ("optimising", "simulating"):
        lines = [ln for ln in re.split(r"[\r\n]", err) if ln.startswith(stage)]
        etas = [m for ln in lines if (m := ETA.search(ln))]
        assert etas, f"no {stage!r} bar line with an ETA: {lines[-3:]!r}"
    assert "optimising" not in ANSI.sub("", res.stdout) and out.is_file()


def test_a_stage_shorter_than_a_redraw_still_draws_its_time_remaining(monkeypatch) -> None:
    """rich redraws on a 10 Hz clock; a stage that is over before the first redraw (the optimisation
    of two short passes on a fast machine) must still draw its time remaining once it is known."""
    import io
    import sys

    from robot_grinding_sim.cli.common import progress

    err = io.StringIO()
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "150")
    monkeypatch.setattr(sys, "stderr", err)
    with progress(None, "stage") as bar:
        bar.update(0.0, 10.0, description="short")
        for k in (1.0, 2.0, 3.0):  # no pause: all within one redraw period
            bar.update(k)
        bar.update(0.0, 5.0, description="next")  # the next stage takes the bar, as the job's final run does
    lines = [ln for ln in re.split(r"[\r\n]", ANSI.sub("", err.getvalue())) if ln.startswith("short")]
    assert any(ETA.search(ln) for ln in lines), lines

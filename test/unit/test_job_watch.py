"""grinding bringup's job progress (cli/job_watch.py): the job's window from the executive's own
log line, and a progress stamp placed in it."""

from __future__ import annotations

import pytest

from robot_grinding_sim.cli.job_watch import JobClock


def executive_line(kind: str, n: int, duration: float, stamp: float) -> str:
    """The line grinding_executive logs when a command goes out, as rcutils prints it."""
    from pathlib import Path

    import robot_grinding_sim

    # the format the node uses (read as text: no rclpy in unit tests), so a change there fails here
    src = (Path(robot_grinding_sim.__file__).parent / "nodes" / "grinding_executive.py").read_text()
    assert 'f"sent {c.kind}: {len(c.times)} points, {c.duration:.2f} s from t = {sent.stamp:.3f} s"' in src
    return (f"[INFO] [1795555296.378362924] [grinding_executive]: "
            f"sent {kind}: {n} points, {duration:.2f} s from t = {stamp:.3f} s")


def test_nothing_until_both_sources_spoke() -> None:
    c = JobClock()
    assert c.state() is None
    c.feed_progress(0, 12.0)
    assert c.state() is None
    c.feed_line(executive_line("start", 487, 15.9, 10.5))
    done, total, what = c.state()
    assert (done, total, what) == (pytest.approx(1.5), pytest.approx(15.9), "job: pass 0")


def test_start_sets_the_window_and_progress_moves_in_it() -> None:
    c = JobClock()
    c.feed_line(executive_line("start", 487, 15.9, 10.5))
    c.feed_progress(-1, 9.0)  # before the start: nothing done yet
    done, total, what = c.state()
    assert (done, total, what) == (0.0, pytest.approx(15.9), "job")
    c.feed_progress(1, 20.0)
    done, total, what = c.state()
    assert done == pytest.approx(9.5) and what == "job: pass 1"
    c.feed_progress(1, 40.0)  # past the end (the retreat's last stamp): full, not more
    assert c.state()[0] == pytest.approx(15.9)


def test_resume_extends_the_window_from_the_first_start() -> None:
    c = JobClock()
    c.feed_line(executive_line("start", 487, 15.9, 10.5))
    c.feed_line(executive_line("stop", 20, 0.5, 14.0))  # not a job command: window unchanged
    c.feed_progress(0, 14.0)
    assert c.state()[1] == pytest.approx(15.9)
    c.feed_line(executive_line("resume", 300, 13.0, 18.0))
    done, total, _ = c.state()
    assert total == pytest.approx(18.0 + 13.0 - 10.5) and done == pytest.approx(3.5)


def test_other_lines_are_ignored() -> None:
    c = JobClock()
    c.feed_line("[INFO] [1.0] [grinding_executive]: job running")
    c.feed_line("sent start: many points")
    c.feed_progress(0, 1.0)
    assert c.state() is None


def test_the_clock_moves_the_bar_between_passes() -> None:
    c = JobClock()
    c.feed_line(executive_line("start", 487, 15.9, 10.5))
    c.feed_clock(12.0)  # the approach: no progress sample yet
    assert c.state() == (pytest.approx(1.5), pytest.approx(15.9), "job")
    c.feed_progress(0, 13.0)
    c.feed_clock(12.9)  # an older /clock (100 Hz) does not move it back
    assert c.state() == (pytest.approx(2.5), pytest.approx(15.9), "job: pass 0")

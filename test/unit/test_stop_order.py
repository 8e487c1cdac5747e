"""The launchers stop the recorder last: every other node has exited before the recorder is asked to
stop, so what they published up to their end can reach the bag (a graph stopped all at once lost the
arm's last 50 ms of joint states at load 20: the executive had seen the arm at the plan's end, the
bag had not)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from robot_grinding_sim.cli.processes import Child, stop_all

#: a stand-in node: on SIGINT it writes when it was asked, lingers ``linger`` s (a node closing), writes
#: when it left, and exits 0
NODE = """
import signal, sys, time
out, linger = sys.argv[1], float(sys.argv[2])
def on_int(*_):
    open(out, "a").write(f"asked {time.time()!r}\\n")
    time.sleep(linger)
    open(out, "a").write(f"left {time.time()!r}\\n")
    sys.exit(0)
signal.signal(signal.SIGINT, on_int)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # as a node does once it can stop
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def _times(path: Path) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split() for line in path.read_text().splitlines())}


def test_the_recorder_is_stopped_after_every_other_node_has_exited(tmp_path: Path) -> None:
    names = ("recorder", "dynamics_node", "grinding_executive")
    children = [Child(n, [sys.executable, "-c", NODE, str(tmp_path / n), "0.0" if n == "recorder" else "0.4"], {})
                for n in names]
    deadline = time.monotonic() + 60
    while not all("ready" in c.tail for c in children):
        assert time.monotonic() < deadline, "the stand-in nodes did not start"
        time.sleep(0.02)
    stop_all(children)
    assert [c.proc.returncode for c in children] == [0, 0, 0]
    rec = _times(tmp_path / "recorder")
    for n in names[1:]:
        other = _times(tmp_path / n)
        assert other["left"] < rec["asked"], (n, other, rec)

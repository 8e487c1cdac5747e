"""The launchers (``grinding bringup``, ``grinding emulate``) take Ctrl-C whenever it comes.

Their main loop waits on the stop flag that their SIGINT/SIGTERM handler sets. With a
``threading.Event`` as that flag, a signal that came while the main thread was inside
``Event.wait()`` (holding the event's lock) ran the handler there, and its ``Event.set()`` waited
forever for that lock: ``grinding bringup sim`` ignored a Ctrl-C and left every node running (seen
once in CI on Jazzy). The window is a few bytecodes wide; here a loop that does nothing but wait is
hit by 5,000 signals. With the event, each of 3 runs failed within a second: one handler stuck on the
lock, the next signals' handlers nested on it until RecursionError.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: a launcher's loop: wait on the flag in short steps, whatever signals come, until the file ``argv[1]``
#: exists; then say how many it took. SIGUSR1 dumps the stacks of a hung run (stop_on_signals registers it).
LOOP = """
import os, sys
from robot_grinding_sim.cli.processes import stop_on_signals
with stop_on_signals() as (stop, received):
    print("ready", flush=True)
    n = 0
    while n % 1000 or not os.path.exists(sys.argv[1]):
        stop.wait(0.00001)
        n += 1
    print(f"left with {len(received)} signal(s), set={stop.is_set()}", flush=True)
"""


def _start(*args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.communicate(timeout=60)
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # its stacks, for the failure message
        time.sleep(1.0)
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the loop did not end: it hung in its signal handler\n{err[-4000:]}") from None


def test_a_flood_of_sigint_never_hangs_the_waiting_loop(tmp_path: Path) -> None:
    enough = tmp_path / "enough"
    proc = _start(LOOP, str(enough))
    sent = 0
    while proc.poll() is None and sent < 5000:
        os.kill(proc.pid, signal.SIGINT)
        sent += 1
        time.sleep(0.0002)
    enough.touch()
    out, err = _finish(proc)
    assert proc.returncode == 0 and sent == 5000, (sent, out, err[-4000:])
    assert 1 <= int(out.split("left with ")[1].split()[0]) <= sent  # signals that come together count once
    assert "set=True" in out and not err, err[-4000:]


def test_one_sigint_ends_a_long_wait_and_sigusr1_shows_the_stacks() -> None:
    code = """
import os, signal, time
from robot_grinding_sim.cli.processes import stop_on_signals
with stop_on_signals() as (stop, received):
    os.kill(os.getpid(), signal.SIGUSR1)
    print("ready", flush=True)
    t0 = time.monotonic()
    woke = stop.wait(600.0)
    print(f"woke={woke} after {time.monotonic() - t0:.3f} s, received={received}", flush=True)
"""
    proc = _start(code)
    os.kill(proc.pid, signal.SIGINT)
    out, err = _finish(proc)
    assert proc.returncode == 0, (out, err)
    assert "woke=True" in out and f"received=[{int(signal.SIGINT)}]" in out, out  # by the signal: the wait is 600 s
    assert "Current thread" in err and 'File "<string>", line 5' in err, err  # faulthandler's dump, from the kill

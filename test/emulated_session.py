"""Real mode against the emulated cell, as a user runs it: ``grinding emulate`` and ``grinding
bringup real`` as two process groups on loopback (shared by test/ros/test_emulate.py,
test_calibrate_emulated.py and test_emulated_faults.py).

Test-only settings (:func:`real_params`), because two graphs of Python nodes share two busy cores
(while the real graph starts, the emulated arm is starved for tens of ms at a time and catches up
(dynamics_node max_lag); joint states arrive late): the driver's
joint_states_timeout and ft_timeout at 2 s instead of 0.1 s, the executive's tracking_error_limit
at 0.3 rad instead of 0.05, its joint_states_timeout at 3 s and its move_velocity_scale at 0.1 (a
skip of 0.1 s on a move at 1 rad/s is a 0.1 rad jump). Also the driver's ft_port at the emulated
sensor's free port, removal off in the prediction (start-up time), and the F/T at 500 Hz (emulate
--ft-rate, the driver's ft_rate), the rate of the arm's joint states. The emulated sensor follows
the arm's clock up to FT_MAX_HOLD (emulate --ft-max-hold) behind the wall clock, half the driver's
ft_timeout here (a starved arm lags by up to its max_lag, 1 s, and more within a slow catch-up).

The job is started with ``/grinding_executive/start`` once both graphs are up rather than with
``--start --until-done``: the executive's autostart does not wait for the prediction, whose
collision_node loads the CAD part in 10 to 25 s on two busy cores.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

#: the emulated Net F/T's record rate and the driver's ft_rate in these tests, Hz
FT_RATE = 500.0
#: how far behind the wall clock the emulated sensor follows the arm's clock here, s (emulate --ft-max-hold)
FT_MAX_HOLD = 1.0


def grinding() -> list[str]:
    """The ``grinding`` command of this venv."""
    script = Path(sys.executable).with_name("grinding")
    return [str(script)] if script.exists() else [sys.executable, "-m", "robot_grinding_sim.cli"]


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def real_params(path: Path, port: int, driver: str = "", executive: str = "") -> Path:
    """The real graph's test-only parameter file (module docstring); ``driver`` / ``executive``: more
    yaml lines (indented 4 / 6 spaces) of hardware_driver's parameters / the executive's ``execution``."""
    path.write_text(
        "hardware_driver:\n  ros__parameters:\n"
        f"    ft_port: {port}\n    ft_rate: {FT_RATE}\n    joint_states_timeout: 2.0\n    ft_timeout: 2.0\n{driver}"
        "contact_solver_node:\n  ros__parameters:\n    removal:\n      enabled: false\n"
        "grinding_executive:\n  ros__parameters:\n    execution:\n      tracking_error_limit: 0.3\n"
        f"      joint_states_timeout: 3.0\n      move_velocity_scale: 0.1\n{executive}")
    return path


class EmulatedSession:
    """``grinding emulate`` + ``grinding bringup real`` in ``tmp`` (logs emulate.log, real.log).

    Use as a context manager: on exit every group still running gets SIGINT (Ctrl-C in each
    terminal) and :attr:`codes` holds the exit codes (emulated cell first).
    """

    def __init__(self, tmp: Path, port: int | None = None) -> None:
        self.tmp = tmp
        self.port = port or free_udp_port()
        self.domain = os.environ["ROS_DOMAIN_ID"]
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.emu_log, self.real_log = tmp / "emulate.log", tmp / "real.log"
        self.emu: subprocess.Popen[bytes] | None = None
        self.real: subprocess.Popen[bytes] | None = None
        self.codes: list[int] = []

    # -- processes -----------------------------------------------------------------------------
    def _spawn(self, args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        # the emulated cell runs on the arm's clock with its sensor (issue 21), so neither graph needs
        # a niceness for its physics to hold on two loaded cores
        with log.open("ab") as fh:
            return subprocess.Popen([*grinding(), *args], stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=self.env)

    @property
    def procs(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in (self.emu, self.real) if p is not None]

    def text(self, log: Path | None = None) -> str:
        """A log's text (default: both)."""
        logs = [log] if log else [self.emu_log, self.real_log]
        return "".join(p.read_text(errors="replace") for p in logs if p.exists())

    def has(self, log: Path, *texts: str) -> bool:
        text = self.text(log)
        return all(t in text for t in texts)

    def wait(self, what: str, pred: Callable[[], bool], timeout: float,
             procs: Sequence[subprocess.Popen[bytes]] | None = None) -> None:
        """Poll ``pred`` until true; fail with both logs' tails on timeout or when a process exits."""
        procs = self.procs if procs is None else procs
        deadline = time.monotonic() + timeout
        while not pred():
            dead = [p for p in procs if p.poll() is not None]
            if time.monotonic() > deadline or dead:
                tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
                                  for p in (self.emu_log, self.real_log) if p.exists())
                pytest.fail(f"{'a process exited' if dead else 'timed out'} waiting for {what}\n{tails}")
            time.sleep(0.2)

    def start_cell(self, *extra: str) -> None:
        """``grinding emulate`` (F/T at :data:`FT_RATE`, more options ``extra``), until 'cell ready'."""
        self.emu = self._spawn(["emulate", "--domain-id", self.domain, "--port", str(self.port), "--ft-rate",
                                f"{FT_RATE:g}", "--ft-max-hold", f"{FT_MAX_HOLD:g}", *extra], self.emu_log)
        # the real graph starts once the arm runs and its Net F/T streams
        self.wait("the emulated cell", lambda: self.has(self.emu_log, "cell ready"), 600)

    def start_real(self, plan_file: Path, params_files: Sequence[Path], bag: Path | None = None,
                   *extra: str) -> None:
        """``grinding bringup real`` on the plan, until every node of the job and the prediction runs."""
        args = ["bringup", "real", "--domain-id", self.domain, "--robot-ip", "127.0.0.1", "--ft-sensor-ip",
                "127.0.0.1", "--plan-file", str(plan_file)]
        for p in params_files:
            args += ["--params-file", str(p)]
        if bag is not None:
            args += ["--record", str(bag)]
        self.real = self._spawn([*args, *extra], self.real_log)
        ready = ["[collision_node] [INFO]", "[contact_solver_node] [INFO]", "job ready"]
        if bag is not None:
            ready += ["[recorder] [INFO]", "recording /"]
        self.wait("the real graph", lambda: self.has(self.real_log, *ready), 900)

    def start_job(self, probe: Any) -> None:
        """``/grinding_executive/start``, retried while the executive waits for joint states or the controller."""
        from std_srvs.srv import Trigger

        def started() -> bool:
            r = probe.call(Trigger, "/grinding_executive/start", timeout=120)
            assert r.success or "no joint states yet" in r.message or "nobody subscribes" in r.message, r.message
            return bool(r.success)

        probe.wait_for(started, timeout=300, what="the job started")

    def job_ended(self) -> bool:
        return any(self.has(self.real_log, f"job {w}") for w in ("done", "failed", "stopped"))

    def wait_job_end(self, timeout: float = 900) -> None:
        self.wait("the job's end", self.job_ended, timeout)

    def stop_cell_then_recorder(self, bag: Path) -> None:
        """The cell first (its streams end), then the real graph once the recorder has caught up with
        them: on two busy cores it records seconds behind, and what it has not taken when it stops is
        lost. Caught up: the bag's checkpoints stop growing (only /diagnostics at 1 Hz is left)."""
        assert self.emu is not None
        os.killpg(self.emu.pid, signal.SIGINT)
        self.codes.append(self.emu.wait(timeout=120))
        sizes: list[int] = []

        def recorder_idle() -> bool:
            sizes.append(sum(f.stat().st_size for f in bag.glob("*")))
            return len(sizes) > 10 and sizes[-1] - sizes[-11] < 20_000  # under 10 kB/s over 2 s

        self.wait("the recorder to catch up", recorder_idle, 600, [p for p in self.procs if p is not self.emu])

    def close(self) -> list[int]:
        """SIGINT to every group still running (as Ctrl-C in each terminal); their exit codes, cell first."""
        codes = []
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
        for p in self.procs:
            codes.append(p.wait(timeout=120))
        self.codes = codes
        return codes

    def __enter__(self) -> EmulatedSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def assert_clean(self) -> None:
        """Both groups exited 0 and no node printed a traceback."""
        logs = self.text()
        assert self.codes == [0, 0], logs[-6000:]
        assert "Traceback" not in logs, logs[-6000:]


def pass_clock_offset(progress: Any, traj: Any, pass_index: int = 0, trim: float = 5e-4) -> float:
    """bag clock - plan time on a pass, from the executive's /grinding/progress ``[pass, arc, stamp]``:
    each sample's arc gives its plan time on the pass (the plan's arc-length table), and the median
    of stamp - plan time is the offset (samples within ``trim`` m of the pass's ends are left out:
    there the arc stands still while the clock runs)."""
    import numpy as np

    seg = next(s for s in traj.segments if s["kind"] == "pass" and s["pass_index"] == pass_index)
    i0, i1 = seg["start"], seg["stop"]
    arc, times = np.asarray(traj.arc[i0:i1]), np.asarray(traj.times[i0:i1])
    sel = ((progress.pass_index == pass_index) & (progress.arc_length > arc[0] + trim) &
           (progress.arc_length < arc[-1] - trim))
    if not sel.any():
        raise AssertionError(f"no progress inside pass {pass_index}")
    return float(np.median(progress.t[sel] - np.interp(progress.arc_length[sel], arc, times)))

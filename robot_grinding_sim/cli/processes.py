"""Nodes as child processes, for ``grinding bringup`` and ``grinding emulate``: start one with its
output printed line by line prefixed ``[name]`` (the last lines kept for error reports), stop a
set of them (SIGINT, then SIGTERM, then, for a node that still runs, its threads' stacks (SIGUSR1)
and SIGKILL).

A node starts with SIGINT and SIGTERM blocked (:func:`~robot_grinding_sim.ros.early_signals.blocked_for_child`):
a stop that comes while its interpreter starts waits until the node's own handlers take it.
"""

from __future__ import annotations

import collections
import faulthandler
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from robot_grinding_sim.ros.early_signals import blocked_for_child

#: how long a node has to stop after SIGINT, s
STOP_TIMEOUT = 15.0
#: grinding_executive's log line when the job ends (see nodes/grinding_executive.py)
JOB_END = re.compile(r"\bjob (done|stopped|failed)\b")


class StopFlag:
    """A stop request that a signal handler may set: ``set()`` takes no lock.

    A Python signal handler runs in the main thread between two bytecodes, so it may run while that
    thread is inside ``threading.Event.wait()`` holding the event's lock; an ``Event.set()`` in the
    handler then waits forever for a lock its own thread holds. The launcher's main loop waited on
    such an event five times a second, and a Ctrl-C that came in that window left ``grinding
    bringup`` running with every node (test_launcher_signals.py blasts a waiting loop with signals
    to show it). Here ``set()`` is a flag and a byte into a pipe, and ``wait()`` a ``select`` on the pipe:
    the byte written by a handler that interrupted the ``select`` ends it at once (PEP 475 retries
    it with the byte already there).
    """

    def __init__(self) -> None:
        self._set = False
        self._read_fd, self._write_fd = os.pipe()  # not inherited by the nodes (PEP 446)
        os.set_blocking(self._write_fd, False)

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._write_fd, b"\0")
        except OSError:  # the pipe is full (a flood of signals) or closed: the wait ends anyway
            pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Return when set or after ``timeout`` s; whether it is set."""
        if not self._set:
            select.select([self._read_fd], [], [], timeout)
        return self._set

    def close(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


@contextmanager
def stop_on_signals() -> Iterator[tuple[StopFlag, list[int]]]:
    """While the block runs, SIGINT and SIGTERM set the flag it gets and are listed (signal
    numbers, in order of arrival) instead of ending the launcher; the old handlers come back after.
    The launcher then stops its children its own way (:func:`stop_all`). SIGUSR1 writes the
    launcher's threads' stacks to stderr (as it does in every node), for a launcher that does not stop."""
    stop = StopFlag()
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)  # a list's append takes no Python-level lock
        stop.set()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        yield stop, received
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        stop.close()


def node_command(executable: str) -> list[str]:
    """Python command that runs a node's ``main()`` (``--ros-args`` appended by the caller)."""
    code = f"import sys; from robot_grinding_sim.nodes.{executable} import main; sys.exit(main())"
    return [sys.executable, "-c", code]


class Child:
    """A running node: the process, a reader thread printing its output (each line also to
    ``on_line``, from that thread), the last lines."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str],
                 on_line: Callable[[str], None] | None = None, nice: int = 0) -> None:
        self.name = name
        self.on_line = on_line
        self.cmd = cmd
        self.tail: collections.deque[str] = collections.deque(maxlen=25)
        with blocked_for_child():
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # our signal handling decides when a node stops
            )
        self.nice_error = set_niceness(self.proc.pid, nice) if nice else None
        self.reported = False
        self.job_end: str | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.tail.append(line)
            click.echo(f"[{self.name}] {line}")
            if self.on_line is not None:
                self.on_line(line)
            if self.name == "grinding_executive" and self.job_end is None:
                m = JOB_END.search(line)
                if m:
                    self.job_end = m.group(1)

    def last_lines(self, n: int = 10) -> str:
        """The last ``n`` lines of its output, indented."""
        return "\n".join(f"    {line}" for line in list(self.tail)[-n:])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def join(self) -> None:
        self._reader.join(timeout=5)


#: how long a node that does not stop has to write its threads' stacks (SIGUSR1) before SIGKILL, s
STACKS_TIMEOUT = 3.0


def set_niceness(pid: int, nice: int) -> str | None:
    """Give process ``pid`` (a session leader: :class:`Child` starts each node in a session of its own)
    the niceness ``nice`` (negative: more CPU than the rest when the machine is busy); the reason it
    could not (no privilege to raise a priority), else None.

    Linux with autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, the default of most
    distributions) shares the CPU between sessions first: a process's niceness only weighs against
    the processes of its own session, and a node in a session of its own kept an equal share with
    every other session whatever its niceness (the emulated arm at -10 fell to 0.46x real time beside
    other sessions' work). So the niceness is also given to the process's autogroup
    (``/proc/PID/autogroup``), which holds this node alone.
    """
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except (PermissionError, ProcessLookupError, OSError) as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    autogroup = f"/proc/{pid}/autogroup"
    try:
        if os.path.exists(autogroup) and os.getsid(pid) == pid:  # its own session: the group is this node's
            with open(autogroup, "w") as fh:
                fh.write(str(nice))
    except (PermissionError, ProcessLookupError, OSError) as exc:
        return f"autogroup: {type(exc).__name__}: {exc.strerror or exc}"
    return None


def stop_all(children: list[Child], last: tuple[str, ...] = ("recorder",)) -> None:
    """Stop the nodes: every one but those named in ``last`` first, then those (the recorder: it then takes
    what the others published before they stopped, instead of stopping beside them and losing it).

    Each group: SIGINT every live node, then SIGTERM; a node that still runs is asked for its threads'
    stacks (SIGUSR1: every node writes them to its output, printed with its name) and then killed."""
    _stop_group([c for c in children if c.name not in last])
    _stop_group([c for c in children if c.name in last])
    for c in children:
        c.join()


def _stop_group(children: list[Child]) -> None:
    escalation = ((signal.SIGINT, STOP_TIMEOUT), (signal.SIGTERM, 5.0), (signal.SIGUSR1, STACKS_TIMEOUT),
                  (signal.SIGKILL, 5.0))
    for sig, wait in escalation:
        live = [c for c in children if c.alive()]
        if not live:
            break
        if sig == signal.SIGUSR1:
            click.echo(f"[stop] {', '.join(c.name for c in live)} did not stop after SIGINT and SIGTERM: "
                       "their threads' stacks follow, then SIGKILL", err=True)
        for c in live:
            try:
                c.proc.send_signal(sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        for c in live:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def quote(arg: str) -> str:
    """``arg`` quoted for a POSIX shell (the commands ``--print`` shows)."""
    import shlex

    return shlex.quote(arg)


def report_exits(children: list[Child], failed: list[str], prefix: str) -> None:
    """Report each node that has exited while it should run (once), with the end of its output;
    its name goes into ``failed``."""
    for c in children:
        if not c.alive() and not c.reported:
            c.reported = True
            c.join()
            failed.append(c.name)
            click.echo(f"[{prefix}] ERROR: {c.name} exited with code {c.proc.returncode}; last output:\n"
                       f"{c.last_lines()}", err=True)


def report_unclean(children: list[Child], failed: list[str], prefix: str) -> list[Child]:
    """After :func:`stop_all`: the nodes not already reported that did not stop with exit code 0
    (each reported with the end of its output)."""
    unclean = [c for c in children if c.name not in failed and c.proc.returncode != 0]
    for c in unclean:
        click.echo(f"[{prefix}] ERROR: {c.name} stopped with exit code {c.proc.returncode}; last output:\n"
                   f"{c.last_lines()}", err=True)
    return unclean

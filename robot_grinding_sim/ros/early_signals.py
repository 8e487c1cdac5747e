"""SIGINT/SIGTERM from the first line of a node process until run_node takes over: exit 0 at once.

A node's module imports rclpy, numpy, OpenCascade and the core, which takes a second or more (much
more while numba compiles on a fresh install); a Ctrl-C that reaches the whole process group in
that time must end the process promptly, with exit code 0 and no traceback. Nothing exists yet that
needs closing (no ROS context, no file of the node's), so the handler flushes the standard streams
and leaves with ``os._exit(0)``: it runs in the main thread at the next bytecode, so the stop waits
at most for the C call under way (an extension module's initialisation).

Imported by ``robot_grinding_sim`` itself (the first module of every node's import), this installs
the handlers when the process is a node process: a ``ros2 run``/launch console script, ``grinding
bringup``'s ``python -c ... --ros-args``, or ``python -m robot_grinding_sim.nodes.<executable>``.
Imported any other way (tests, the CLI), it installs nothing. It also unblocks SIGINT and SIGTERM:
the package's launchers start node processes with both blocked (a signal mask survives exec), so a
signal that arrives before these handlers exist (the interpreter's own start-up, where Python would
raise KeyboardInterrupt or SIGTERM would kill it) waits, pending, and is handled here.
:func:`robot_grinding_sim.ros.node_base.run_node` replaces the handlers with its own. Standard
library only, so it is cheap to import first.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: executables whose process installs the early handlers (setup.py's NODES)
EXECUTABLES = frozenset({"dynamics_node", "collision_node", "contact_solver_node", "planner_node",
                         "grinding_executive", "recorder", "description_publisher",
                         "hardware_driver", "netft_emulator"})
#: the signals a launcher blocks while it starts a node (:func:`blocked_for_child`)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_now(code: int = 0) -> None:
    """Flush Python's and C's standard streams, then end the process with ``code`` (no clean-up:
    the callers have nothing left to close)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:  # C stdio (rcutils' console output) is not flushed by os._exit either
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass
    os._exit(code)


def exit_later(seconds: float, code: int = 0) -> bool:
    """End the process with ``_exit(code)`` after ``seconds``, from a thread of the C library's own
    (a POSIX timer with ``SIGEV_THREAD`` whose function is libc's ``_exit``): it needs neither the
    GIL nor the main thread, so it ends a process whose main thread is stuck in a C call that holds
    the GIL, where no Python thread can run. For a teardown whose data is already written (run_node);
    Python's streams are flushed now, what is written after may be lost. Returns False where the
    timer cannot be made (not Linux/glibc): nothing is armed then."""
    import ctypes

    class _Sigevent(ctypes.Structure):  # struct sigevent (64 bytes on Linux)
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                    ("function", ctypes.c_void_p), ("attributes", ctypes.c_void_p), ("_pad", ctypes.c_byte * 32)]

    class _Timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

    class _Itimerspec(ctypes.Structure):
        _fields_ = [("interval", _Timespec), ("value", _Timespec)]

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        event = _Sigevent(value=code, notify=2,  # SIGEV_THREAD: function(value) in a new thread
                          function=ctypes.cast(libc._exit, ctypes.c_void_p).value)
        timer = ctypes.c_void_p()
        if libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC
            return False
        whole = int(seconds)
        spec = _Itimerspec(value=_Timespec(whole, int((seconds - whole) * 1e9)))
        return libc.timer_settime(timer, 0, ctypes.byref(spec), None) == 0
    except (OSError, AttributeError):
        return False


def _exit_on_signal(_signum: int, _frame: object) -> None:
    exit_now(0)


def is_node_process(argv: list[str] | None = None, orig_argv: list[str] | None = None) -> bool:
    """True for a node's console script, ``python -c ... --ros-args`` or ``python -m robot_grinding_sim.nodes.X``."""
    argv = sys.argv if argv is None else argv
    orig = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    argv0 = argv[0] if argv else ""
    if Path(argv0).name in EXECUTABLES or (argv0 == "-c" and "--ros-args" in argv):
        return True
    # python -m: sys.argv[0] is "-m" while the package imports, the module's path after; the
    # interpreter's own options (-u, -X importtime, -W error, ...) come before it
    i = 1
    while i < len(orig) - 1:
        arg = orig[i]
        if arg == "-m":
            package, _, module = orig[i + 1].rpartition(".")
            return package == "robot_grinding_sim.nodes" and module in EXECUTABLES
        if not arg.startswith("-") or arg.startswith("--") or arg in ("-", "-c"):
            return False  # a script, -c or the end of the options
        i += 2 if arg in ("-W", "-X") else 1
    return False


def install_if_node_process() -> bool:
    """Install the exiting handlers in a node process's main thread and unblock SIGINT/SIGTERM;
    True if installed."""
    if threading.current_thread() is not threading.main_thread() or not is_node_process():
        return False
    import faulthandler

    for sig in STOP_SIGNALS:
        signal.signal(sig, _exit_on_signal)
    # where a node that does not stop is waiting: every thread's stack (written from C, works while
    # the main thread is stuck; run_node registers it again)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a pending one is handled now
    return True


@contextmanager
def blocked_for_child() -> Iterator[None]:
    """``with blocked_for_child(): Popen(node)``: SIGINT/SIGTERM blocked in the calling thread while
    it starts a node process, which inherits the mask through fork and exec; the node unblocks them
    once its handlers are installed (:func:`install_if_node_process`). The calling thread's own
    mask is restored on exit, and a signal that came meanwhile is delivered then."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)

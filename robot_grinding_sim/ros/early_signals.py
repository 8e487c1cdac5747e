"""SIGINT/SIGTERM recorded from the first line of a node process until run_node takes over.

A node's module imports rclpy, numpy and the core, which takes a while; a Ctrl-C that reaches the
whole process group in that time must still end in exit code 0 without a traceback. Imported by
``robot_grinding_sim.nodes`` (before any node module), this installs handlers that only record the
signal, when the process is a node process: a ``ros2 run``/launch console script, or ``grinding
bringup``'s ``python -c ... --ros-args``. Imported any other way (tests, the CLI), it installs
nothing. :func:`robot_grinding_sim.ros.node_base.run_node` honours a recorded signal. Standard
library only, so it is cheap to import first.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

#: executables whose process installs the early handlers (setup.py's NODES)
EXECUTABLES = frozenset({"dynamics_node", "collision_node", "contact_solver_node", "planner_node", "recorder"})
#: signals received before run_node installed its own handlers
RECEIVED: list[int] = []


def _record(signum: int, _frame: object) -> None:
    RECEIVED.append(signum)


def is_node_process(argv: list[str] | None = None) -> bool:
    """True for a node's console script or ``python -c ... --ros-args``."""
    argv = sys.argv if argv is None else argv
    argv0 = argv[0] if argv else ""
    return Path(argv0).name in EXECUTABLES or (argv0 == "-c" and "--ros-args" in argv)


def install_if_node_process() -> bool:
    """Install the recording handlers in a node process's main thread; True if installed."""
    if threading.current_thread() is not threading.main_thread() or not is_node_process():
        return False
    signal.signal(signal.SIGINT, _record)
    signal.signal(signal.SIGTERM, _record)
    return True

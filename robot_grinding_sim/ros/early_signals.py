"""SIGINT/SIGTERM recorded from the first line of a node process until run_node takes over.

A node's module imports rclpy, numpy and the core, which takes a while; a Ctrl-C that reaches the
whole process group in that time must still end in exit code 0 without a traceback. Imported by
``robot_grinding_sim.nodes`` (before any node module), this installs handlers that only record the
signal, when the process is a node process: a ``ros2 run``/launch console script, ``grinding
bringup``'s ``python -c ... --ros-args``, or ``python -m robot_grinding_sim.nodes.<executable>``.
Imported any other way (tests, the CLI), it installs nothing.
:func:`robot_grinding_sim.ros.node_base.run_node` honours a recorded signal. Standard library only,
so it is cheap to import first.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

#: executables whose process installs the early handlers (setup.py's NODES)
EXECUTABLES = frozenset({"dynamics_node", "collision_node", "contact_solver_node", "planner_node",
                         "grinding_executive", "recorder", "description_publisher",
                         "hardware_driver", "netft_emulator"})
#: signals received before run_node installed its own handlers
RECEIVED: list[int] = []


def _record(signum: int, _frame: object) -> None:
    RECEIVED.append(signum)


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
    """Install the recording handlers in a node process's main thread; True if installed."""
    if threading.current_thread() is not threading.main_thread() or not is_node_process():
        return False
    signal.signal(signal.SIGINT, _record)
    signal.signal(signal.SIGTERM, _record)
    return True

"""The ``main()`` of every node, and a guard that keeps callbacks from killing a node.

Every node module ends with::

    def main(args=None):
        return run_node(DynamicsNode, args)

:func:`run_node` keeps DDS on loopback, initialises rclpy (which installs SIGINT/SIGTERM handlers
that shut the context down), creates the node, spins it, and cleans up. A
:class:`~robot_grinding_sim.ros.parameters.ParameterError` (or any
:class:`~robot_grinding_sim.core.errors.InputError`) raised while the node is constructed is logged
as one FATAL line naming the parameter and the process exits with code 1.

:func:`guarded` wraps a subscription/timer/service callback: an exception is logged (identical
messages at most once per ``throttle_s``, with a count of the suppressed ones) and the node keeps
running. Bad input (:class:`InputError`) is logged as a warning ("rejected: ..."), anything else
as an error with the exception type.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros.environment import default_discovery_range
from robot_grinding_sim.ros.parameters import ParameterError

F = TypeVar("F", bound=Callable[..., Any])


def _node_name_from_args(argv: Sequence[str], default: str) -> str:
    """The ``__node:=`` remap in ``--ros-args`` (for the fatal log line before a node exists)."""
    name = default
    for i, a in enumerate(argv):
        if a in ("-r", "--remap") and i + 1 < len(argv) and argv[i + 1].startswith(("__node:=", "__name:=")):
            name = argv[i + 1].split(":=", 1)[1]
    return name


def run_node(
    node_factory: Callable[[], Any],
    args: Sequence[str] | None = None,
    multithreaded: bool = False,
    default_name: str | None = None,
) -> int:
    """Create a node, spin it until shutdown and return the process exit code.

    Args:
        node_factory: callable returning an ``rclpy.node.Node`` (usually the node class).
        args: command line (default ``sys.argv``); ``--ros-args`` are handled by rclpy.
        multithreaded: spin with a ``MultiThreadedExecutor`` (2 threads) instead of a single thread.
        default_name: the node's name for the fatal log line if construction fails
            (default: the factory's ``NODE_NAME`` attribute or its ``__name__``).

    Returns:
        0 after a clean shutdown (SIGINT/SIGTERM), 1 on a bad parameter or a crash at start-up.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor

    # LOCALHOST only when the caller did not choose (a real cell runs with SUBNET)
    default_discovery_range()
    argv = list(sys.argv if args is None else args)
    name = default_name or getattr(node_factory, "NODE_NAME", getattr(node_factory, "__name__", "node"))
    name = _node_name_from_args(argv, name)
    rclpy.init(args=argv)
    node = None
    code = 0
    try:
        try:
            node = node_factory()
        except InputError as exc:  # ParameterError is an InputError
            rclpy.logging.get_logger(getattr(exc, "node_name", None) or name).fatal(str(exc))
            return 1
        except Exception as exc:
            rclpy.logging.get_logger(name).fatal(
                f"start-up failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            )
            return 1
        executor = MultiThreadedExecutor(num_threads=2) if multithreaded else SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            executor.shutdown()
    finally:
        if node is not None:
            try:
                close = getattr(node, "close", None)
                if callable(close):
                    close()
                node.destroy_node()
            except Exception:  # shutting down anyway; never mask the exit code
                pass
        rclpy.try_shutdown()
    return code


class _Throttle:
    """At most one log per key per ``period`` seconds; counts what it suppressed."""

    def __init__(self, period: float) -> None:
        self.period = period
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> tuple[bool, int]:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.period:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False, 0
            self._last[key] = now
            if len(self._last) > 1000:  # bounded memory with many distinct messages
                self._last = {key: now}
            return True, self._suppressed.pop(key, 0)


def guarded(node: Any, what: str, throttle_s: float = 2.0) -> Callable[[F], F]:
    """Decorator: exceptions in the callback are logged (throttled) and swallowed.

    Args:
        node: the node whose logger to use.
        what: short name of the callback for the log line (e.g. ``"joint_trajectory"``).
        throttle_s: identical messages are logged at most once per this many seconds.

    Usage::

        self.create_subscription(JointTrajectory, "x", guarded(self, "x")(self._on_x), 10)
    """
    throttle = _Throttle(throttle_s)

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except InputError as exc:
                msg = f"{what}: rejected: {exc}"
                log_ok, n = throttle(msg)
                if log_ok:
                    node.get_logger().warning(msg + (f" (and {n} more like it)" if n else ""))
            except Exception as exc:
                msg = f"{what}: {type(exc).__name__}: {exc}"
                log_ok, n = throttle(msg)
                if log_ok:
                    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
                    node.get_logger().error(msg + (f" (and {n} more like it)" if n else "") + "\n" + tb)
            return None

        return wrapper  # type: ignore[return-value]

    return deco


__all__ = ["ParameterError", "guarded", "run_node"]


def load_robot(params: dict[str, Any], node_name: str, tip_link: str | None = None,
               links: Sequence[str] = ()) -> Any:
    """The node's RobotModel from its ``robot.description_file`` parameter (default: the package's robot).

    Args:
        params: the node's declared parameter values (``robot.description_file`` and the ``links``).
        node_name: for error messages.
        tip_link: tip of the chain (None: ``tcp`` if present), from the parameter ``tool.tcp_link``.
        links: names of parameters whose values must be links of the model (e.g. ``"tool.link"``).

    Raises:
        ParameterError: the file cannot be loaded, or a named link is not in it; names the parameter.
    """
    from robot_grinding_sim.core.resources import URDF_DEFAULT, package_file
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    urdf = params["robot.description_file"] or str(package_file(URDF_DEFAULT))
    try:
        model = RobotModel.from_urdf(urdf, tip_link=tip_link or None)
    except InputError as exc:
        name = "tool.tcp_link" if tip_link and tip_link in str(exc) else "robot.description_file"
        raise ParameterError(name, str(exc), node_name) from None
    for key in links:
        if params[key] not in model.link_names:
            raise ParameterError(
                key, f"'{params[key]}' is not a link of {urdf} (links: {', '.join(model.link_names)})", node_name
            )
    return model

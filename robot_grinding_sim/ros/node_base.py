"""The ``main()`` of every node, its shutdown, and a guard that keeps callbacks from killing a node.

Every node module ends with::

    def main(args=None):
        return run_node(DynamicsNode, args)

:func:`run_node` sets the discovery range default, initialises rclpy, creates the node, spins it,
and on SIGINT or SIGTERM closes it and exits 0 without a traceback, whatever the moment:

- from the package's first import until :func:`run_node` starts, a signal ends the process at once
  with 0 (:mod:`robot_grinding_sim.ros.early_signals`: nothing exists yet that needs closing);
- the process installs its own SIGINT/SIGTERM handlers before ``rclpy.init`` (rclpy's are turned
  off: they shut the context down from under running callbacks, timers and the executor's wait
  set, which is where "context is not valid", "publisher's context is invalid" and "Unable to
  convert call argument" came from);
- while the node is constructed (imports of C extensions, CAD and URDF loading, numba compiling
  on a fresh install: up to minutes), a signal runs the hooks registered with :func:`at_abort`
  (the recorder removes the bag it created) and ends the process with 0 at once: an exception
  raised there would land inside a C extension's initialisation (OpenCascade through pybind11
  turns it into ImportError) or numba's compiler (which swallows it), and there is nothing to
  close yet;
- while it spins, the handlers only set a stop flag and count (they never raise); spinning polls
  the flag every 0.1 s, and :func:`guarded` callbacks no longer run; a long computation inside a
  callback (the planner's optimisation) runs through :func:`stoppable`, which stops waiting for it
  at once (:class:`StopRequested`, a BaseException, so no callback guard swallows it); a callback
  that still holds the main thread :data:`STOP_GRACE_S` after the signal (numba compiling a kernel
  on its first call) does not hold the stop: a watchdog thread closes the node and ends the process;
- then the executor is shut down (no callback runs after), the node's ``close()`` runs to the end
  (the recorder writes out its bag; further signals are counted and ignored), the node is
  destroyed and the context shut down; errors while tearing down are logged, never raised. What
  follows ``close()`` (DDS entities and the participant going away) is bounded: after
  :data:`TEARDOWN_S` the watchdog ends the process with 0, its data already safe, and says so;
  2 s later a timer of the C library's own ends it with 0 even if the teardown holds the GIL
  (:func:`~robot_grinding_sim.ros.early_signals.exit_later`).

SIGUSR1 writes every thread's Python stack to the node's stderr and the node goes on (Python's
``faulthandler``): how to see where a node that does not stop is waiting.

A :class:`~robot_grinding_sim.ros.parameters.ParameterError` (or any
:class:`~robot_grinding_sim.core.errors.InputError`) raised while the node is constructed is logged
as one FATAL line naming the parameter and the process exits with code 1. A node asks for its own
orderly stop (the recorder at ``max_duration``) with :func:`request_stop`.

:func:`guarded` wraps a subscription/timer/service callback: an exception is logged (identical
messages at most once per ``throttle_s``, with a count of the suppressed ones) and the node keeps
running. Bad input (:class:`InputError`) is logged as a warning ("rejected: ..."), anything else
as an error with the exception type.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.environment import default_discovery_range
from robot_grinding_sim.ros import early_signals
from robot_grinding_sim.ros.parameters import ParameterError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def _node_name_from_args(argv: Sequence[str], default: str) -> str:
    """The ``__node:=`` remap in ``--ros-args`` (for the fatal log line before a node exists)."""
    name = default
    for i, a in enumerate(argv):
        if a in ("-r", "--remap") and i + 1 < len(argv) and argv[i + 1].startswith(("__node:=", "__name:=")):
            name = argv[i + 1].split(":=", 1)[1]
    return name


class StopRequested(BaseException):  # a request, not an error: no "Error" suffix
    """Raised by :func:`stoppable` when a stop is requested while it waits; ends the callback."""


#: how long a callback may keep holding the main thread after a stop signal, s
STOP_GRACE_S = 1.0
#: how long the teardown after ``close()`` (executor, node, context) may take, s
TEARDOWN_S = 3.0
#: after a stop, a node with ``messages_taken()`` (the recorder) keeps taking what its subscriptions
#: already hold until none came for DRAIN_QUIET_S, at most DRAIN_S, s
DRAIN_S = 0.5
DRAIN_QUIET_S = 0.1

_ABORT_HOOKS: list[Callable[[], Any]] = []


def at_abort(hook: Callable[[], Any]) -> None:
    """Run ``hook`` if a stop signal ends the process while the node is still being constructed
    (e.g. remove a file the constructor created). Hooks run in the signal handler, in order, and
    their exceptions are ignored."""
    _ABORT_HOOKS.append(hook)


class _Stopper:
    """SIGINT/SIGTERM handling of one node process (see the module docstring).

    ``phase``: ``"construct"`` (a signal aborts the process), ``"spin"``, ``"drain"`` (a recorder
    takes what its subscriptions hold; a second signal ends it), ``"stopping"`` (the executor shuts
    down), ``"close"`` (the node's ``close()`` runs), ``"teardown"`` (after it), ``"done"``.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        #: a stop is under way: set before the event (see _on_signal)
        self.stopping = False
        self.signals = 0
        self.phase = "construct"
        self.node: Any = None
        self.logger: Any = None
        self._old: dict[int, Any] = {}
        self._phase_changed = threading.Condition()
        self._watchdog: threading.Thread | None = None
        self._close_lock = threading.Lock()
        self._closed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; the caller handles stops
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._on_signal)
        # a node that hangs can be asked where (written from C: works while the main thread is stuck)
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    def restore(self) -> None:
        if self._old:
            faulthandler.unregister(signal.SIGUSR1)
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        self._old.clear()

    def _on_signal(self, _signum: int, _frame: Any) -> None:
        self.signals += 1
        if self.phase == "construct" and self.own_process:
            for hook in _ABORT_HOOKS:
                try:
                    hook()
                except Exception:
                    pass
            early_signals.exit_now(0)
        if self.stopping:
            # a second signal while the stop is under way: the handler runs in the main thread, which may
            # be inside event.set() holding the event's lock (a SIGTERM twice 0.16 s apart hung planner_node:
            # the handler waited for the lock its own thread held); the first stop goes on
            return
        self.stop()

    #: whether the process is the node's own (a node executable), so the watchdog may end it
    own_process = False

    def set_phase(self, phase: str) -> None:
        with self._phase_changed:
            self.phase = phase
            self._phase_changed.notify_all()

    def stop(self) -> None:
        self.stopping = True
        self.event.set()

    def start_watchdog(self) -> None:
        """Start the thread that bounds the stop (:meth:`_watch`), in a node's own process; it waits
        for the stop flag (started here rather than in the signal handler: a handler must not take
        the locks ``Thread.start`` needs, the main thread may hold them)."""
        if self.own_process and self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="stop_watchdog", daemon=True)
            self._watchdog.start()

    def _wait_phase(self, phases: tuple[str, ...], timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._phase_changed:
            while self.phase not in phases:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0.0:
                    return False
                self._phase_changed.wait(left)
        return True

    def close_node(self) -> None:
        """The node's ``close()``, once, from whichever thread comes first (the other waits for it)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self.set_phase("close")
            close = getattr(self.node, "close", None)
            if callable(close):
                _quietly("close", close, self.logger)

    def _watch(self) -> None:
        """Bound the stop (module docstring): a callback holding the main thread, a stalled teardown."""
        self.event.wait()
        if not self._wait_phase(("close", "teardown", "done"), STOP_GRACE_S + DRAIN_S):
            self._say(f"the node did not reach close() {STOP_GRACE_S:.0f} s after the stop signal (a callback or "
                      "the executor holds the main thread): closing it from here")
            self.close_node()
            _exit_process(0)
        self._wait_phase(("teardown", "done"), None)  # close() runs to its end
        if not self._wait_phase(("done",), TEARDOWN_S):
            self._say(f"the node's teardown after close() took more than {TEARDOWN_S:.0f} s: leaving without it "
                      "(everything is written)")
            _exit_process(0)

    def _say(self, text: str) -> None:
        try:
            self.logger.warning(text)
        except Exception:
            pass


_STOPPER: _Stopper | None = None


def request_stop() -> bool:
    """Ask :func:`run_node` to stop spinning and close the node (as SIGINT would); thread-safe.

    Returns False when no :func:`run_node` is running in this process (the caller then stops its
    own way, e.g. by shutting its context down).
    """
    if _STOPPER is None:
        return False
    _STOPPER.stop()
    return True


def stop_requested() -> bool:
    """True once SIGINT/SIGTERM (or :func:`request_stop`) asked :func:`run_node` to stop; for
    threads of a node that must end without waiting for the executor."""
    st = _STOPPER
    return st is not None and st.event.is_set()


def stoppable(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a way that a stop does not wait for: for long computations in a callback.

    Under :func:`run_node`, ``fn`` runs in a daemon thread while the calling callback waits for it,
    looking at the stop flag every 0.05 s; on SIGINT/SIGTERM (or :func:`request_stop`) it raises
    :class:`StopRequested` at once and leaves the thread behind, and the process ends once the node
    is closed. So ``fn`` must not touch ROS objects (the node is destroyed under it) and must leave
    nothing half-written if it is cut anywhere (write files atomically). Its result is returned and
    its exception re-raised here. Elsewhere (no :func:`run_node`), ``fn`` is simply called.
    """
    st = _STOPPER
    if st is None:
        return fn(*args, **kwargs)
    if st.event.is_set():
        raise StopRequested
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"stoppable-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    while not done.wait(0.05):
        if st.event.is_set():
            raise StopRequested
    if "error" in box:
        raise box["error"]
    return box["value"]


def _quietly(what: str, fn: Callable[[], Any], logger: Any) -> None:
    """Run a teardown step; log (never raise) what goes wrong."""
    try:
        fn()
    except Exception as exc:  # tearing down anyway: report, do not mask the exit code
        try:
            logger.warning(f"shutdown: {what}: {type(exc).__name__}: {exc}")
        except Exception:
            pass


def run_node(
    node_factory: Callable[[], Any],
    args: Sequence[str] | None = None,
    multithreaded: bool = False,
    default_name: str | None = None,
) -> int:
    """Create a node, spin it until SIGINT/SIGTERM (or :func:`request_stop`), close it; return the exit code.

    Args:
        node_factory: callable returning an ``rclpy.node.Node`` (usually the node class).
        args: command line (default ``sys.argv``); ``--ros-args`` are handled by rclpy.
        multithreaded: spin with a ``MultiThreadedExecutor`` (2 threads) instead of a single thread.
        default_name: the node's name for the fatal log line if construction fails
            (default: the factory's ``NODE_NAME`` attribute or its ``__name__``).

    Returns:
        0 after a stop (signal, request or external shutdown), 1 on a bad parameter or a crash at
        start-up.
    """
    global _STOPPER
    stopper = _Stopper()
    own_process = early_signals.is_node_process() and threading.current_thread() is threading.main_thread()
    stopper.own_process = own_process
    stopper.install()  # before anything slow: a signal from here on ends the process cleanly
    _STOPPER = stopper
    try:
        code = _run(stopper, node_factory, args, multithreaded, default_name)
    finally:
        if not own_process:
            stopper.restore()
            _STOPPER = None
    if own_process:
        _exit_process(code)
    return code


def _exit_process(code: int) -> None:
    """End a node process now, with ``code``, once the node is closed and the context shut down.

    Interpreter finalisation resets SIGINT/SIGTERM to their defaults and then tears down rclpy,
    DDS and numba for a noticeable time, so a second signal (a launcher escalating, a process
    group Ctrl-C) would kill the process with -15 after a clean close. Nothing is left to do by
    then: flush the streams and logging, and leave.
    """
    import logging

    logging.shutdown()
    early_signals.exit_now(code)


#: ``GRINDING_EXECUTOR``: ``events`` (default: rclpy's EventsExecutor, callbacks dispatched from C++)
#: or ``single`` (rclpy's SingleThreadedExecutor, which rebuilds its wait set in Python on every
#: spin: about 110 us more per callback, which a 1 kHz lockstep graph cannot afford)
EXECUTOR_ENV = "GRINDING_EXECUTOR"


def single_threaded_executor(fallback: Callable[[], Any], logger: Any) -> Any:
    """The single-threaded executor :data:`EXECUTOR_ENV` asks for (rclpy's EventsExecutor by default)."""
    kind = os.environ.get(EXECUTOR_ENV, "events").strip().lower()
    if kind not in ("events", "single"):
        logger.warning(f"{EXECUTOR_ENV}={kind!r} is neither 'events' nor 'single': using 'events'")
        kind = "events"
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:  # an rclpy older than Jazzy's
            logger.info("rclpy has no EventsExecutor: using the SingleThreadedExecutor")
        else:
            return EventsExecutor()
    return fallback()



def _run(stopper: _Stopper, node_factory: Callable[[], Any], args: Sequence[str] | None, multithreaded: bool,
         default_name: str | None) -> int:
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    # LOCALHOST only when the caller did not choose (a real cell runs with SUBNET)
    default_discovery_range()
    argv = list(sys.argv if args is None else args)
    name = default_name or getattr(node_factory, "NODE_NAME", getattr(node_factory, "__name__", "node"))
    name = _node_name_from_args(argv, name)
    if stopper.event.is_set():
        return 0  # stopped before rclpy was even initialised
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    logger = rclpy.logging.get_logger(name)
    stopper.logger = logger
    node = None
    try:
        # A signal during construction aborts the process (module docstring); outside a node's
        # own process (a test calling run_node) it is honoured once construction returns.
        try:
            node = node_factory()
        except InputError as exc:  # ParameterError is an InputError
            rclpy.logging.get_logger(getattr(exc, "node_name", None) or name).fatal(str(exc))
            return 1
        except Exception as exc:
            logger.fatal(f"start-up failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            return 1
        logger = node.get_logger()
        stopper.node, stopper.logger = node, logger
        if stopper.event.is_set():  # a signal during construction (not in a node process)
            stopper.close_node()
            _quietly("destroy node", node.destroy_node, logger)
            return 0
        stopper.set_phase("spin")
        stopper.start_watchdog()
        executor = MultiThreadedExecutor(num_threads=2) if multithreaded else single_threaded_executor(
            SingleThreadedExecutor, logger)
        executor.add_node(node)
        # what start-up built (the robot, the part, numba's dispatchers) stays: out of the
        # collector's reach, a full collection no longer walks it (a pause in a 1 kHz loop)
        gc.collect()
        gc.freeze()
        try:
            # spin_once with a timeout: a signal handler only runs between bytecodes, and the
            # executor's wait is in C; polling every 0.1 s bounds the reaction time
            while not stopper.event.is_set() and node.context.ok():
                executor.spin_once(timeout_sec=0.1)
        except (StopRequested, ExternalShutdownException):
            pass
        stopper.stop()  # however the loop ended (a shut-down context too): the watchdog bounds what follows
        _drain(node, executor, stopper, logger)
        stopper.set_phase("stopping")
        # the node leaves the executor first: the EventsExecutor then unhooks its entities'
        # middleware callbacks, so no DDS thread calls into an entity while destroy_node frees it
        # (rclpy's EventsExecutor crashes on entities destroyed under it: ros2/rclpy#1644; a
        # netft_emulator and an executive stopped just after start-up died with -11 there)
        _quietly("executor", lambda: executor.remove_node(node), logger)
        _quietly("executor", lambda: executor.shutdown(timeout_sec=TEARDOWN_S), logger)
        stopper.close_node()
        if stopper.own_process:  # armed from here: a teardown stuck in C with the GIL held starves the watchdog
            early_signals.exit_later(TEARDOWN_S + 2.0)
        stopper.set_phase("teardown")
        _quietly("destroy node", node.destroy_node, logger)
        return 0
    finally:
        from robot_grinding_sim.ros import compat

        compat.shutdown()  # keeps our SIGINT/SIGTERM handlers (rclpy would reset them to SIG_DFL)
        stopper.set_phase("done")


def _drain(node: Any, executor: Any, stopper: Any, logger: Any) -> None:
    """A node that counts what it takes (``messages_taken()``: the recorder) keeps taking, after the stop,
    the messages its subscriptions already hold: the graph's last states, published just before the
    publishers were stopped, are not lost with the middleware's queue. Until nothing new came for
    DRAIN_QUIET_S, at most DRAIN_S (a graph still publishing does not hold the stop)."""
    taken = getattr(node, "messages_taken", None)
    if not callable(taken):
        return
    stopper.set_phase("drain")
    start = last_change = time.monotonic()
    try:
        last = taken()
        while node.context.ok() and stopper.signals < 2 and time.monotonic() - start < DRAIN_S:
            executor.spin_once(timeout_sec=DRAIN_QUIET_S / 4)
            now, n = time.monotonic(), taken()
            if n != last:
                last, last_change = n, now
            elif now - last_change >= DRAIN_QUIET_S:
                break
    except StopRequested:
        pass
    except Exception as e:  # the bag matters more than the drain (an external shutdown ends it too)
        if type(e).__name__ != "ExternalShutdownException":
            logger.warning(f"draining the subscriptions after the stop: {e}")


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


#: ``GRINDING_SLOW_CALLBACK_MS``: log every callback of a node that runs longer than this many
#: milliseconds (a diagnosis of a lockstep graph's stalls: a callback that holds a node's only
#: thread holds the loop); unset or empty: no timing
SLOW_CALLBACK_ENV = "GRINDING_SLOW_CALLBACK_MS"


def slow_callback_threshold() -> float | None:
    """The threshold :data:`SLOW_CALLBACK_ENV` sets, s (None: unset)."""
    raw = os.environ.get(SLOW_CALLBACK_ENV, "").strip()
    if not raw:
        return None
    try:
        ms = float(raw)
    except ValueError:
        raise InputError(f"{SLOW_CALLBACK_ENV}={raw!r} is not a number of milliseconds") from None
    if not ms >= 0.0:
        raise InputError(f"{SLOW_CALLBACK_ENV}={raw!r} must be >= 0 ms")
    return ms * 1e-3


def _timed(node: Any, what: str, fn: F, threshold: float) -> F:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.perf_counter() - t0
            if took > threshold:
                node.get_logger().warning(f"slow callback: {what} took {took * 1e3:.1f} ms")

    return timed  # type: ignore[return-value]


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
    slow = slow_callback_threshold()

    def deco(fn: F) -> F:
        if slow is not None:
            fn = _timed(node, what, fn, slow)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            st = _STOPPER
            if st is not None and st.event.is_set():
                return None  # stopping: run no more callbacks
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


__all__ = ["ParameterError", "StopRequested", "at_abort", "guarded", "request_stop", "run_node", "stoppable"]


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
    from robot_grinding_sim.core.job.setup import load_robot_model
    from robot_grinding_sim.core.resources import URDF_DEFAULT, package_file

    urdf = params["robot.description_file"] or str(package_file(URDF_DEFAULT))
    tcp = params.get("tool.tcp_link") or "tcp"
    try:
        if params.get("workpiece.link") and (tip_link or tcp) == tcp:
            # the robot holds the part (core/sim/held_part.py): the tool centre relative to the part,
            # built as the in-process job builds it
            from robot_grinding_sim.core.config import CellConfig
            from robot_grinding_sim.core.job.setup import held_part_model

            held = {k: v for k, v in params.items()
                    if (k.split(".")[0] in ("robot", "workpiece") or k == "removal.material") and v is not None}
            model = held_part_model(CellConfig().replace(**held, **{"tool.tcp_link": tcp}))
        else:
            model = load_robot_model(urdf, tip_link or None, params.get("robot.package_dirs") or ())
    except ParameterError as exc:
        raise ParameterError(exc.name, exc.problem, node_name) from None
    except InputError as exc:
        raise ParameterError("robot.description_file", str(exc), node_name) from None
    for key in links:
        if params[key] not in model.link_names:
            raise ParameterError(
                key, f"'{params[key]}' is not a link of {urdf} (links: {', '.join(model.link_names)})", node_name
            )
    return model

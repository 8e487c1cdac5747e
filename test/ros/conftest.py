"""ROS test helpers: real node processes, and a probe node in the test process that talks to them.

Every test under test/ros is marked ``ros``. The DDS environment (loopback discovery, a domain id
of this test run) is already in ``os.environ`` (test/conftest.py) and is inherited by every node
process started here.

Fixtures:
- ``launch_node(executable, node_name=..., params_file=..., params={...}, remaps={...})`` starts a
  node executable as a real process (``.venv/bin/<executable>`` if it exists, else
  ``python -m robot_grinding_sim.nodes.<executable>``) with ``--ros-args``; stdout/stderr go to a
  log file; every process is stopped at teardown (SIGINT, then SIGKILL).
- ``probe``: an rclpy node in the test process with :meth:`Probe.wait_for` (spin until a
  predicate holds; generous timeouts, no fixed sleeps), message collectors, publishers that wait
  for their subscribers, and service calls.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from robot_grinding_sim.ros.early_signals import blocked_for_child

REPO = Path(__file__).resolve().parents[2]

#: Default time limit of every wait (CI has 2 busy cores; DDS discovery can take seconds).
TIMEOUT = 60.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.ros)


@pytest.fixture(scope="session", autouse=True)
def numba_cache_warm() -> None:
    """Compile the numba kernels once before any node starts.

    On a fresh clone the first process to use them compiles for up to a minute on 2 busy cores;
    without this, that lands inside a node's start-up and a test's wait for its first message.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "robot_grinding_sim.core.warmup"], capture_output=True, text=True, timeout=1200
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------------
# node processes


def ros_value(v: Any) -> str:
    """A Python value as a ``-p name:=value`` string (YAML as rcl parses it)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return v if v and all(c.isalnum() or c in "/._-" for c in v) and not _yaml_special(v) else repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(ros_value(x) for x in v) + "]"
    raise TypeError(f"cannot pass {v!r} as a ROS parameter")


def _yaml_special(s: str) -> bool:
    import yaml

    return not isinstance(yaml.safe_load(s), str)


def node_command(
    executable: str,
    node_name: str | None = None,
    params_file: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    params: Mapping[str, Any] | None = None,
    remaps: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The command line that starts ``executable`` with ``--ros-args``."""
    script = Path(sys.executable).with_name(executable)
    module = f"robot_grinding_sim.nodes.{executable}"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", module]
    cmd += list(extra_args)
    ros: list[str] = []
    if node_name:
        ros += ["-r", f"__node:={node_name}"]
    if params_file is None:
        files: Sequence[Any] = []
    elif isinstance(params_file, (str, os.PathLike)):
        files = [params_file]
    else:
        files = params_file
    for f in files:
        ros += ["--params-file", str(f)]
    for k, v in (params or {}).items():
        ros += ["-p", f"{k}:={ros_value(v)}"]
    for src, dst in (remaps or {}).items():
        ros += ["-r", f"{src}:={dst}"]
    return cmd + (["--ros-args", *ros] if ros else [])


def node_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's ROS environment plus unbuffered, uncoloured logs."""
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.update(
        PYTHONUNBUFFERED="1",
        RCUTILS_LOGGING_BUFFERED_STREAM="0",
        RCUTILS_COLORIZED_OUTPUT="0",
        RCUTILS_CONSOLE_OUTPUT_FORMAT="[{severity}] [{name}]: {message}",
    )
    env.update(extra or {})
    return env


@dataclass
class NodeProcess:
    """A node started as a real process; output in ``log_path``."""

    cmd: list[str]
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        """Wait for the process to exit by itself; return its exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.cmd[0]} did not exit within {timeout} s; log:\n{self.log()[-3000:]}"
            ) from None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGINT; a node still running after ``timeout`` writes its threads' stacks into its log
        (SIGUSR1) and is killed. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stacks()
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def stacks(self, settle: float = 10.0) -> str:
        """Every thread's Python stack of the running node (SIGUSR1: the nodes' faulthandler),
        appended to its log and returned."""
        before = self.log_path.stat().st_size
        self.proc.send_signal(signal.SIGUSR1)
        deadline, size = time.monotonic() + settle, -1
        while time.monotonic() < deadline and size != (size := self.log_path.stat().st_size):
            time.sleep(0.5)  # until the dump stops growing
        return self.log_path.read_bytes()[before:].decode(errors="replace")


@pytest.fixture
def launch_node(tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    """Factory fixture: ``launch_node(executable, node_name=, params_file=, params=, remaps=, env=)``."""
    started: list[NodeProcess] = []
    serial = itertools.count()

    def _start(
        executable: str,
        node_name: str | None = None,
        params_file: Any = None,
        params: Mapping[str, Any] | None = None,
        remaps: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> NodeProcess:
        cmd = node_command(executable, node_name, params_file, params, remaps, extra_args)
        log_path = tmp_path / f"{node_name or executable}.{next(serial)}.log"  # unique across threads
        fh = open(log_path, "wb")
        with blocked_for_child():  # as the package's launchers start a node (cli/processes.py)
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=node_env(env), cwd=str(REPO))
        fh.close()
        node = NodeProcess(cmd, proc, log_path)
        started.append(node)
        return node

    yield _start
    for node in reversed(started):
        node.stop()


# --------------------------------------------------------------------------------------------------
# probe node


@pytest.fixture(scope="session")
def rclpy_context() -> Iterator[Any]:
    import rclpy
    from rclpy.context import Context

    ctx = Context()
    rclpy.init(context=ctx)
    yield ctx
    from robot_grinding_sim.ros import compat

    compat.shutdown(ctx)


@dataclass
class Collector:
    """Messages received on one topic (thread-safe append; read ``messages`` / ``last``)."""

    topic: str
    messages: list[Any] = field(default_factory=list)
    keep: int = 100_000

    def __call__(self, msg: Any) -> None:
        self.messages.append(msg)
        if len(self.messages) > self.keep:
            del self.messages[: len(self.messages) - self.keep]

    @property
    def last(self) -> Any:
        return self.messages[-1] if self.messages else None

    def clear(self) -> None:
        self.messages.clear()


def _stamp_of(msg: Any) -> float:
    """A message's header stamp, s."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


class Probe:
    """A node in the test process. All waiting happens in :meth:`wait_for` (spins the node)."""

    def __init__(self, context: Any, name: str) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.node = rclpy.create_node(name, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self._lock = threading.Lock()

    def spin_once(self, timeout: float = 0.05) -> None:
        self.executor.spin_once(timeout_sec=timeout)

    def wait_for(
        self,
        predicate: Callable[[], Any],
        timeout: float = TIMEOUT,
        what: str = "condition",
        procs: Sequence[NodeProcess] = (),
    ) -> Any:
        """Spin until ``predicate()`` is truthy and return its value.

        Fails (AssertionError) after ``timeout`` seconds, or at once if one of ``procs`` has
        exited, with the tail of its log.
        """
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            for p in procs:
                if not p.alive:
                    raise AssertionError(
                        f"while waiting for {what}: {p.cmd[0]} exited with {p.returncode}; "
                        f"log:\n{p.log()[-4000:]}"
                    )
            if time.monotonic() > deadline:
                logs = "".join(f"\n--- {p.cmd[0]} log:\n{p.log()[-3000:]}" for p in procs)
                raise AssertionError(f"timed out after {timeout} s waiting for {what}{logs}")
            self.spin_once(0.05)

    def subscribe(self, msg_type: Any, topic: str, qos: Any = 10, keep: int = 100_000) -> Collector:
        col = Collector(topic, keep=keep)
        self.node.create_subscription(msg_type, topic, col, qos)
        return col

    def publisher(self, msg_type: Any, topic: str, qos: Any = 10, wait_subscribers: int = 1,
                  timeout: float = TIMEOUT, procs: Sequence[NodeProcess] = ()) -> Any:
        """A publisher; waits until ``wait_subscribers`` subscriptions have matched it."""
        pub = self.node.create_publisher(msg_type, topic, qos)
        if wait_subscribers:
            self.wait_for(
                lambda: pub.get_subscription_count() >= wait_subscribers,
                timeout,
                f"{wait_subscribers} subscriber(s) on {topic}",
                procs,
            )
        return pub

    def answer(self, pub: Any, msg: Any, collector: Collector, procs: Sequence[NodeProcess] = ()) -> Any:
        """Publish ``msg`` (a stamped joint state) until ``collector`` has the answer carrying its
        stamp; return that answer.

        Matching the stamp matters: answers to the previous joint state, republished while waiting,
        may still arrive after the new one is sent.
        """
        stamp = _stamp_of(msg)
        return self.republish_until(pub, msg, lambda: self.stamped(collector, stamp),
                                    f"an answer stamped {stamp} on {collector.topic}", procs)

    @staticmethod
    def stamped(collector: Collector, stamp: float) -> Any:
        """The first message of ``collector`` stamped ``stamp`` (contact/model: its data[0]), or None."""
        if collector.topic.endswith("contact/model"):
            return next((m for m in collector.messages if m.data[0] == stamp), None)
        return next((m for m in collector.messages if _stamp_of(m) == stamp), None)

    def republish_until(self, pub: Any, msg: Any, find: Callable[[], Any], what: str,
                        procs: Sequence[NodeProcess] = ()) -> Any:
        """Publish ``msg`` (a joint state) until ``find()`` returns an answer; return it.

        Each answer of the nodes is published once per joint state: one that went out before this
        probe's subscription was matched with its publisher (discovery on a busy machine takes
        seconds, and the solver skips its wrench outputs while nobody is matched) is lost, so the
        joint state is published again until every answer waited for has come.
        """
        def answer() -> Any:
            hit = find()
            if hit is None:
                pub.publish(msg)
            return hit

        return self.wait_for(answer, what=what, procs=procs)

    def wait_for_publishers(self, topic: str, n: int = 1, timeout: float = TIMEOUT,
                            procs: Sequence[NodeProcess] = ()) -> None:
        what = f"{n} publisher(s) on {topic}"
        self.wait_for(lambda: self.node.count_publishers(topic) >= n, timeout, what, procs)

    def wait_for_messages(self, col: Collector, n: int = 1, timeout: float = TIMEOUT,
                          procs: Sequence[NodeProcess] = ()) -> list[Any]:
        self.wait_for(lambda: len(col.messages) >= n, timeout, f"{n} message(s) on {col.topic}", procs)
        return col.messages

    def call(self, srv_type: Any, name: str, request: Any | None = None, timeout: float = TIMEOUT,
             procs: Sequence[NodeProcess] = ()) -> Any:
        """Call a service (waits for it to appear) and return the response."""
        client = self.node.create_client(srv_type, name)
        try:
            self.wait_for(client.service_is_ready, timeout, f"service {name}", procs)
            future = client.call_async(request if request is not None else srv_type.Request())
            self.wait_for(future.done, timeout, f"response of {name}", procs)
            return future.result()
        finally:
            self.node.destroy_client(client)

    def set_param(self, node: str, name: str, value: Any, procs: Sequence[NodeProcess] = ()) -> None:
        """Set one parameter of ``node`` (its set_parameters service); fails with the node's reason."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        r = self.call(SetParameters, f"{node}/set_parameters",
                      SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]), procs=procs)
        assert r.results[0].successful, f"{node} {name}: {r.results[0].reason}"

    def wait_for_log(self, proc: NodeProcess, text: str, timeout: float = TIMEOUT) -> str:
        """Spin until ``text`` appears in the process's log; return the log."""
        self.wait_for(lambda: text in proc.log(), timeout, f"{text!r} in the log of {proc.cmd[0]}")
        return proc.log()

    def destroy(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture
def probe(rclpy_context: Any, request: pytest.FixtureRequest) -> Iterator[Probe]:
    name = "probe_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    p = Probe(rclpy_context, name)
    yield p
    p.destroy()

"""Every node exits 0, without a traceback, on SIGINT and SIGTERM at any moment after it starts.

Each node executable of setup.py is started as a real process with its parameter files (hardware_driver
with an RDTEmulator of this process on 127.0.0.1 as its Net F/T) and gets
20 signals in all (SIGINT and SIGTERM mixed), one or two per run, at random moments in three
phases, chosen in turn:

- *start-up*: 0-1 s after the process handles signals (seen in /proc/<pid>/status), i.e. while it
  imports and constructs the node (CAD, URDF, numba);
- *ready*: 0-0.2 s after its first log line;
- *working*: 0.3-1.5 s after its first log line, while the test publishes /joint_states at 100 Hz
  to the collision, contact and recorder nodes, the planner runs its start-up optimisation and the
  dynamics_node under test steps its own simulation;

and two runs in three get a second signal 0-0.08 s after the first, while the node closes. Every
run must exit 0 with no traceback and none of the errors a torn-down context gives; a recorder
that started must leave a complete bag: metadata.yaml, the MCAP file (read back with ``mcap``, the
recorder writes with ``rosbags``) and the recorder's own count of messages received all agree.
Runs go four at a time, all nodes mixed (node start-up is CPU-bound, 1-5 CPU seconds each, and
most of the file's time: twelve runs per node rather than twenty).

A second signal while ``close()`` runs is ignored and close runs to its end (a handshake, not
luck); a long computation in a callback (:func:`~robot_grinding_sim.ros.node_base.stoppable`)
stops at once. ``grinding bringup sim --record DIR`` in its own process group gets SIGINT on the whole
group once every node has started and the bag records: the launcher and every node exit 0, no
traceback, and the bag is complete and readable by ``mcap`` and ``rosbags``. SIGTERM to the
launcher alone is forwarded as well.
"""

from __future__ import annotations

import ast
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcap.reader import make_reader

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
CELL = REPO / "config" / "cell.yaml"
#: signals per node in the random-moments test (SHUTDOWN_TEST_SIGNALS=200: the long check of docs/nodes.md)
SIGNALS_PER_NODE = int(os.environ.get("SHUTDOWN_TEST_SIGNALS", "20"))
PARALLEL = int(os.environ.get("SHUTDOWN_TEST_PARALLEL", "4"))
PHASES = ("ready", "working", "start-up", "working", "ready")  # run i is in PHASES[i % 5]
BAD = ("Traceback", "KeyboardInterrupt", "RCLError", "InvalidHandle", "ExternalShutdownException",
       "context is not valid", "context is invalid", "Unable to convert call argument", "Segmentation fault")
SEED = int(os.environ.get("SHUTDOWN_TEST_SEED", "20261122"))
WAIT = 120.0  # generous limit of every wait for a node (2 busy cores)
CLOSED = re.compile(r"closed .*: (\d+) messages written, (\d+) received, (\d+) write errors(?:, (\d+) computed)?")


def node_executables() -> list[str]:
    """setup.py's node executables (its ``NODES`` list: one console script per node)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "NODES" for t in stmt.targets):
            return list(ast.literal_eval(stmt.value))
    raise AssertionError("setup.py has no NODES list")


NODES = node_executables()


def _handles_sigterm(pid: int) -> bool:
    """True once the process has a handler for SIGTERM (its node code is running)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_until(predicate: Any, proc: subprocess.Popen[bytes], timeout: float = WAIT, poll: float = 0.01) -> bool:
    """Poll ``predicate`` until it holds (True), the process exits or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            return bool(predicate())
        time.sleep(poll)
    return True


# --------------------------------------------------------------------------------------------------
# bags


def _mcap_counts(mcap_file: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    with mcap_file.open("rb") as fh:
        reader = make_reader(fh)
        if reader.get_summary() is None:
            raise ValueError("no summary section (the file was not closed)")
        for _, channel, _ in reader.iter_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
    return counts


def bag_problems(bag: Path, log: str, rosbags_too: bool = False) -> list[str]:
    """What is wrong with a recorder's bag after a stop (nothing: [])."""
    try:
        info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (FileNotFoundError, yaml.YAMLError, KeyError, TypeError) as exc:
        return [f"bag {bag}: no readable metadata.yaml ({exc})"]
    files = list(bag.glob("*.mcap"))
    if len(files) != 1:
        return [f"bag {bag}: {len(files)} MCAP files"]
    try:
        counts = _mcap_counts(files[0])
    except Exception as exc:  # any reader error is the finding
        return [f"bag {bag}: MCAP not readable ({type(exc).__name__}: {exc})"]
    meta = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    meta = {k: v for k, v in meta.items() if v}
    out = [] if counts == meta else [f"bag {bag}: metadata {meta} != MCAP {counts}"]
    closed = CLOSED.search(log)
    if closed is None:
        out.append(f"bag {bag}: the recorder did not report closing it")
    else:
        written, received, errors, computed = (int(g or 0) for g in closed.groups())  # computed: /tf, /tf_static
        if not written == received == sum(counts.values()) - computed or errors:
            out.append(f"bag {bag}: {received} received, {written} written ({errors} errors), "
                       f"{sum(counts.values())} in the MCAP file")
    if rosbags_too:
        from rosbags.highlevel import AnyReader

        try:
            with AnyReader([bag]) as reader:
                n = sum(1 for _ in reader.messages())
        except Exception as exc:
            return [*out, f"bag {bag}: rosbags cannot read it ({type(exc).__name__}: {exc})"]
        if n != sum(counts.values()):
            out.append(f"bag {bag}: rosbags reads {n} messages, mcap {sum(counts.values())}")
    return out


# --------------------------------------------------------------------------------------------------
# node runs


@dataclass
class Run:
    node: str
    index: int
    phase: str
    delay: float
    sent: list[str] = field(default_factory=list)
    after_ready: float | None = None  # s from the first log line to the first signal (None: before it)
    returncode: int | None = None
    log: str = ""
    bag: Path | None = None
    failures: list[str] = field(default_factory=list)
    wall: float = 0.0  # s from start to exit
    cpu: float = 0.0  # CPU seconds of the process when it got the first signal
    stacks: str = ""  # the threads' stacks of a run that did not stop

    def problems(self) -> list[str]:
        out = list(self.failures)
        if self.returncode != 0:
            out.append(f"exit code {self.returncode}")
        out += [f"'{b}' in the output" for b in BAD if b in self.log]
        if self.bag is not None and self.bag.exists():
            out += bag_problems(self.bag, self.log)
        return out

    def moment(self) -> str:
        if self.after_ready is None:
            return "start-up"
        return "just ready" if self.after_ready <= 0.3 else "working"


def _signals_planned(index: int) -> int:
    return 1 if index % 3 == 0 else 2


def _one_run(launch_node: Any, node: str, index: int, tmp: Path, ft_port: int = 0) -> Run:
    rng = random.Random(f"{SEED}-{node}-{index}")
    phase = PHASES[index % len(PHASES)]
    delay = {"start-up": rng.uniform(0.0, 1.0), "ready": rng.uniform(0.0, 0.2), "working": rng.uniform(0.3, 1.5)}[phase]
    run = Run(node, index, phase, delay)
    params: dict[str, Any] = {}
    files = [CELL, REPO / "config" / f"{node}.yaml"]
    if node == "recorder":  # as bringup starts it: its own file only
        run.bag = tmp / f"bag_{index}"
        files = [REPO / "config" / "recorder.yaml"]
        params = {"output": str(run.bag), "topics": ["/joint_states"], "flush_period": 0.5, "discovery_period": 0.2}
    if node == "hardware_driver":  # its Net F/T: the test's emulator on loopback (never the default address)
        params = {"ft_sensor_ip": "127.0.0.1", "ft_port": ft_port}
    if node == "netft_emulator":  # runs in parallel: each on a free port of its own (127.0.0.1 only)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            params = {"port": sock.getsockname()[1]}
    if node == "dynamics_node" and phase == "working":
        params = {"lockstep": False}  # steps and publishes without waiting for a contact side
    t_start = time.monotonic()
    started = launch_node(node, node_name=f"{node}_{index}", params_file=files, params=params)
    proc = started.proc
    t_ready: float | None = None

    def logged() -> bool:
        nonlocal t_ready
        if t_ready is None and started.log_path.stat().st_size > 0:
            t_ready = time.monotonic()  # (to the poll period)
        return t_ready is not None

    if not _wait_until(lambda: _handles_sigterm(proc.pid), proc, poll=0.002):
        run.failures.append("never installed a SIGTERM handler")
    if phase != "start-up" and not _wait_until(logged, proc):
        run.failures.append("no log line")
    if node == "recorder" and phase == "working":
        # working = recording: its subscription comes with discovery (a second or more on busy cores)
        _wait_until(lambda: "subscribed to /joint_states" in started.log(), proc)
    until = time.monotonic() + delay
    while time.monotonic() < until:  # the random delay, noting when the first log line comes
        logged()
        time.sleep(min(0.01, max(0.0, until - time.monotonic())))
    first, second = rng.choice([signal.SIGINT, signal.SIGTERM]), rng.choice([signal.SIGINT, signal.SIGTERM])
    if proc.poll() is None:
        logged()
        run.cpu = _cpu_seconds(proc.pid)
        proc.send_signal(first)
        run.sent.append(first.name)
        run.after_ready = None if t_ready is None else time.monotonic() - t_ready
        if _signals_planned(index) == 2:  # a second one, mostly while the node closes
            time.sleep(rng.uniform(0.0, 0.08))
            if proc.poll() is None:
                proc.send_signal(second)
                run.sent.append(second.name)
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        run.failures.append("did not exit within 90 s of the signal")
        run.stacks = _stacks(proc, started.log_path)
        proc.kill()
        proc.wait(timeout=10)
    run.returncode = proc.returncode
    run.wall = time.monotonic() - t_start
    run.log = started.log()
    return run


def _stacks(proc: subprocess.Popen[bytes], log_path: Path) -> str:
    """Every thread's Python stack of a node that does not stop (SIGUSR1: run_node's faulthandler)."""
    before = log_path.stat().st_size
    proc.send_signal(signal.SIGUSR1)
    deadline, size = time.monotonic() + 10.0, -1
    while time.monotonic() < deadline and size != (size := log_path.stat().st_size):
        time.sleep(0.5)  # until the dump stops growing
    return log_path.read_bytes()[before:].decode(errors="replace")


class _Schedule:
    """Hands out runs, all nodes in turn, until each node has had SIGNALS_PER_NODE signals."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.lock = threading.Lock()
        self.sent = dict.fromkeys(nodes, 0)
        self.pending = dict.fromkeys(nodes, 0)  # signals planned by runs under way
        self.runs: dict[str, list[Run]] = {n: [] for n in nodes}
        self.started = dict.fromkeys(nodes, 0)
        self.turn = 0

    def next(self) -> tuple[str, int] | None:
        with self.lock:
            for k in range(len(self.nodes)):
                node = self.nodes[(self.turn + k) % len(self.nodes)]
                if (self.sent[node] + self.pending[node] < SIGNALS_PER_NODE
                        and self.started[node] < 3 * SIGNALS_PER_NODE):
                    self.turn = (self.turn + k + 1) % len(self.nodes)
                    index = self.started[node]
                    self.started[node] += 1
                    self.pending[node] += _signals_planned(index)
                    return node, index
            return None

    def done(self, run: Run) -> None:
        with self.lock:
            self.pending[run.node] -= _signals_planned(run.index)
            self.sent[run.node] += len(run.sent)
            self.runs[run.node].append(run)


def _arm_joints() -> tuple[list[str], list[float]]:
    """Joint names of the package's URDF (in its order) and the cell's robot.home."""
    import xml.etree.ElementTree as ET

    from robot_grinding_sim.core.resources import URDF_DEFAULT, package_file

    root = ET.parse(package_file(URDF_DEFAULT)).getroot()
    names = [j.get("name") for j in root.iter("joint") if j.get("type") in ("revolute", "continuous", "prismatic")]
    home = yaml.safe_load(CELL.read_text())["/**"]["ros__parameters"]["robot"]["home"]
    assert len(names) == len(home), (names, home)
    return names, [float(q) for q in home]


@pytest.fixture
def joint_states(rclpy_context: Any) -> Any:
    """/joint_states at 100 Hz from this process (the home pose, moving a little) for the nodes to chew on."""
    import math

    import rclpy
    from sensor_msgs.msg import JointState

    names, home = _arm_joints()
    node = rclpy.create_node("shutdown_test_joint_states", context=rclpy_context)
    pub = node.create_publisher(JointState, "/joint_states", 50)
    stop = threading.Event()
    sent = [0]

    def publish() -> None:
        t0 = time.monotonic()
        while not stop.wait(0.01):
            t = time.monotonic() - t0
            msg = JointState(name=names, position=[q + 0.05 * math.sin(t + i) for i, q in enumerate(home)],
                             velocity=[0.05 * math.cos(t + i) for i in range(len(home))], effort=[0.0] * len(home))
            msg.header.stamp = node.get_clock().now().to_msg()
            pub.publish(msg)
            sent[0] += 1

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    yield sent
    stop.set()
    thread.join(timeout=10)
    node.destroy_node()


def test_every_node_exits_cleanly_on_signals_at_random_moments(launch_node: Any, joint_states: Any,
                                                               tmp_path: Path) -> None:
    from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator

    schedule = _Schedule(NODES)
    # hardware_driver's F/T sensor (the last driver to ask gets the stream; the others see it fall silent)
    emulator = RDTEmulator(lambda t: [0.0, 0.0, 5.0, 0.0, 0.0, 0.0], rate_hz=500.0).start()

    def worker() -> None:
        while (job := schedule.next()) is not None:
            node, index = job
            schedule.done(_one_run(launch_node, node, index, tmp_path, emulator.address[1]))

    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            for f in [pool.submit(worker) for _ in range(PARALLEL)]:
                f.result()
    finally:
        emulator.close()
    elapsed = time.monotonic() - t0
    assert joint_states[0] >= 10 * elapsed, f"only {joint_states[0]} joint states in {elapsed:.0f} s"

    summary, failures, tails = [], [], []
    for node in NODES:
        runs = sorted(schedule.runs[node], key=lambda r: r.index)
        moments = {m: sum(r.moment() == m for r in runs) for m in ("start-up", "just ready", "working")}
        summary.append(f"{node}: {len(runs)} runs, {schedule.sent[node]} signals "
                       f"({sum(len(r.sent) == 2 for r in runs)} runs with two), {moments}, "
                       f"{sum(r.wall for r in runs) / len(runs):.1f} s and {sum(r.cpu for r in runs) / len(runs):.1f} "
                       "CPU s per run")
        for r in runs:
            if r.problems():
                failures.append(f"{node} run {r.index} ({r.phase}, {r.delay:.2f} s, signals {r.sent}): "
                                f"{'; '.join(r.problems())}")
                fatal = r.log.find("Fatal Python error")  # a crash: its threads' stacks, not the module list after
                tail = r.log[fatal:fatal + 6000] if fatal >= 0 else r.log[-1500:]
                tails.append(f"--- {node} run {r.index}, log {'from the crash' if fatal >= 0 else 'tail'}:\n{tail}"
                             + (f"\n--- its threads when it did not stop:\n{r.stacks}" if r.stacks else ""))
    report = "\n".join(summary)
    print(f"\n{report}\n{elapsed:.0f} s")
    head = f"{len(failures)} runs did not stop cleanly (seed {SEED}):\n{report}\n"
    assert not failures, head + "\n".join(failures) + "\n" + "\n".join(tails[:3])
    for node in NODES:
        runs = schedule.runs[node]
        assert schedule.sent[node] >= SIGNALS_PER_NODE, f"{node} exited by itself before most signals:\n{report}"
        assert sum(len(r.sent) == 2 for r in runs) >= 3, f"too few {node} runs with a second signal:\n{report}"
        assert any(r.moment() == "just ready" for r in runs) and any(r.moment() == "working" for r in runs), report
    assert sum(r.moment() == "start-up" for runs in schedule.runs.values() for r in runs) >= 5, report
    recorded = [r for r in schedule.runs["recorder"] if r.bag is not None and r.bag.exists()
                and (m := CLOSED.search(r.log)) is not None and int(m.group(1)) > 0]
    assert len(recorded) >= 3, f"too few recorder runs recorded any /joint_states:\n{report}"


# --------------------------------------------------------------------------------------------------
# close runs to its end


CLOSE_NODE = """
import sys, time
from pathlib import Path
from rclpy.node import Node
from robot_grinding_sim.ros.node_base import run_node

d = Path(sys.argv[1])

class SlowClose(Node):
    def __init__(self):
        super().__init__("slow_close")
        # said from the first spin, not here: a signal while the constructor runs aborts the process
        # at once without close() (by design), and on a busy machine the test's SIGINT at "up" came
        # before run_node had left construction
        self.timer = self.create_timer(0.01, self.up)

    def up(self):
        self.timer.cancel()
        self.get_logger().info("up")

    def close(self):
        (d / "closing").touch()
        while not (d / "go").exists():  # the test signals meanwhile
            time.sleep(0.01)
        time.sleep(0.3)
        (d / "closed").touch()

sys.exit(run_node(SlowClose))
"""


def test_signals_while_closing_do_not_cut_close_short(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = tmp_path / "out.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", CLOSE_NODE, str(tmp_path), "--ros-args"], stdout=fh,
                                stderr=subprocess.STDOUT, env=env)
    try:
        assert _wait_until(lambda: "up" in log.read_text(), proc), log.read_text()
        proc.send_signal(signal.SIGINT)
        assert _wait_until((tmp_path / "closing").exists, proc), log.read_text()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            proc.send_signal(sig)
        (tmp_path / "go").touch()
        code = proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text(errors="replace")
    assert code == 0, out
    assert (tmp_path / "closed").exists(), out
    assert not [b for b in BAD if b in out], out


BUSY_NODE = """
import ctypes, sys, time
from rclpy.node import Node
from robot_grinding_sim.ros.node_base import run_node, stoppable

libc = ctypes.CDLL(None)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
cmp = CMP(lambda a, b: a[0] - b[0])

def work():  # two minutes, nearly all of it in ctypes callbacks (as numba's compiler calls back)
    arr = (ctypes.c_int * 2000)()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120:
        for i in range(2000):
            arr[i] = (i * 7919) % 2000
        libc.qsort(arr, 2000, ctypes.sizeof(ctypes.c_int), cmp)

class Busy(Node):
    def __init__(self):
        super().__init__("busy")
        self.timer = self.create_timer(0.1, self.tick)

    def tick(self):
        self.timer.cancel()
        print("working", flush=True)
        stoppable(work)
        print("not stopped", flush=True)

sys.exit(run_node(Busy))
"""


def test_a_long_computation_in_a_callback_stops_at_once(tmp_path: Path) -> None:
    """A signal while a callback computes (here inside ctypes callbacks, where an exception raised by a
    signal handler would be swallowed) stops the node within a second or two, exit 0."""
    log = tmp_path / "out.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", BUSY_NODE, "--ros-args"], stdout=fh, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert _wait_until(lambda: "working" in log.read_text(), proc), log.read_text()
        time.sleep(random.uniform(0.1, 0.5))
        proc.send_signal(random.choice([signal.SIGINT, signal.SIGTERM]))
        t0 = time.monotonic()
        code = proc.wait(timeout=WAIT)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text(errors="replace")
    assert code == 0, out
    assert not [b for b in (*BAD, "Exception ignored", "not stopped") if b in out], out
    assert took < 10, f"took {took:.1f} s to stop"


STUCK_NODE = """
import sys, time
from pathlib import Path
from rclpy.node import Node
from robot_grinding_sim.ros.node_base import run_node

d, where = Path(sys.argv[1]), sys.argv[2]

class Stuck(Node):
    def __init__(self):
        super().__init__("stuck")
        self.timer = self.create_timer(0.05, self.tick)
        self.get_logger().info("up")

    def tick(self):
        self.timer.cancel()
        print("spinning", flush=True)
        if where == "callback":  # a callback that does not return (a first call compiling for minutes)
            time.sleep(600)

    def close(self):
        (d / "closed").touch()

    def destroy_node(self):
        if where == "teardown":  # what follows close() does not return (DDS going away)
            print("destroying", flush=True)
            time.sleep(600)
        if where == "teardown-gil":  # ... in a C call that holds the GIL: no Python thread runs
            import re
            re.match(r"(a+)+$", "a" * 60 + "b")
        super().destroy_node()

sys.exit(run_node(Stuck))
"""


@pytest.mark.parametrize("where", ["callback", "teardown", "teardown-gil"])
def test_a_node_stuck_in_a_callback_or_its_teardown_still_stops_with_0(tmp_path: Path, where: str) -> None:
    """The stop watchdog (node_base): a callback still holding the main thread 1 s after the signal,
    or a teardown after close() longer than 3 s, no longer holds the process (a launcher would SIGKILL
    it: the CI failures of description_publisher and the recorder); close() has run either way."""
    log = tmp_path / "out.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", STUCK_NODE, str(tmp_path), where, "--ros-args"], stdout=fh,
                                stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert _wait_until(lambda: "spinning" in log.read_text(), proc), log.read_text()
        proc.send_signal(random.choice([signal.SIGINT, signal.SIGTERM]))
        t0 = time.monotonic()
        code = proc.wait(timeout=WAIT)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text(errors="replace")
    assert code == 0 and (tmp_path / "closed").exists() and not [b for b in BAD if b in out], out
    if where != "teardown-gil":  # (there, nothing in Python runs to say it)
        assert ("did not reach close()" if where == "callback" else "teardown after close()") in out, out
    assert took < 10.0, f"took {took:.1f} s to stop"


IMPORTING_NODE = """
import sys, time
import robot_grinding_sim  # the first import of every node process: its stop handling starts here
print("importing", flush=True)
t0 = time.monotonic()
while time.monotonic() - t0 < 60:  # a node's imports that take a minute (numba compiling on a fresh install)
    sum(i * i for i in range(10000))
print("imported", flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_node_imports_ends_it_at_once_with_0(tmp_path: Path, sig: signal.Signals) -> None:
    """Before run_node takes over there is nothing to close: a signal ends the process at once, exit 0."""
    log = tmp_path / "out.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", IMPORTING_NODE, "--ros-args"], stdout=fh,
                                stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert _wait_until(lambda: "importing" in log.read_text(), proc), log.read_text()
        time.sleep(random.uniform(0.0, 0.3))
        proc.send_signal(sig)
        t0 = time.monotonic()
        code = proc.wait(timeout=WAIT)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text(errors="replace")
    assert code == 0 and "imported" not in out and not [b for b in BAD if b in out], out
    assert took < 3.0, f"took {took:.1f} s to stop"


def test_a_signal_while_numba_compiles_in_construction_stops_the_node_at_once(tmp_path: Path) -> None:
    """A cold numba cache (a fresh install): dynamics_node compiles its kernels while it is constructed,
    for 10 CPU seconds or more; a signal then ends it with 0 within a second or two, not when the
    construction ends (22 s after the signal before)."""
    log = tmp_path / "out.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"))
    from conftest import node_command

    cmd = node_command("dynamics_node", params_file=[CELL, REPO / "config" / "dynamics_node.yaml"],
                       params={"lockstep": False})
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        # well into the compilation: 3 CPU seconds (the imports take about 1.5), no start-up line yet
        assert _wait_until(lambda: _cpu_seconds(proc.pid) >= 3.0, proc, poll=0.05), log.read_text()
        assert log.stat().st_size == 0, f"the node was up before the test could signal it:\n{log.read_text()}"
        proc.send_signal(random.choice([signal.SIGINT, signal.SIGTERM]))
        t0 = time.monotonic()
        code = proc.wait(timeout=WAIT)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text(errors="replace")
    assert code == 0 and not [b for b in BAD if b in out], out
    assert took < 3.0, f"took {took:.1f} s to stop"


def test_a_node_started_by_the_launchers_takes_a_signal_at_any_moment_of_its_start(launch_node: Any) -> None:
    """The launchers start a node with SIGINT/SIGTERM blocked (early_signals.blocked_for_child): a stop
    in the interpreter's first milliseconds (where Python would raise KeyboardInterrupt during site's
    imports, exit 1 with a traceback, or SIGTERM kill it) waits until the node's own handlers take it."""
    rng = random.Random(SEED)
    runs = []
    for i in range(12):
        node = launch_node("description_publisher", node_name=f"early_{i}", params_file=[CELL])
        time.sleep(rng.uniform(0.0, 0.15))
        node.proc.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM]))
        code = node.proc.wait(timeout=WAIT)
        runs.append((i, code, [b for b in BAD if b in node.log()], node.log()[-500:]))
    bad = [r for r in runs if r[1] != 0 or r[2]]
    assert not bad, "\n".join(f"run {i}: exit {code}, {found}:\n{tail}" for i, code, found, tail in bad)


def test_node_modules_run_with_python_m_are_node_processes() -> None:
    """``python -m robot_grinding_sim.nodes.X`` gets the early handlers too (conftest's fallback)."""
    from robot_grinding_sim.ros.early_signals import is_node_process

    assert is_node_process(["-m"], ["/usr/bin/python3", "-u", "-m", "robot_grinding_sim.nodes.recorder", "--ros-args"])
    assert is_node_process(["/x/robot_grinding_sim/nodes/planner_node.py"],
                           ["/usr/bin/python3", "-X", "importtime", "-m", "robot_grinding_sim.nodes.planner_node"])
    assert not is_node_process(["-m"], ["/usr/bin/python3", "-m", "pytest", "-q"])
    assert not is_node_process(["/usr/bin/pytest", "-m", "ros"], ["/usr/bin/python3", "/usr/bin/pytest", "-m", "ros"])


# --------------------------------------------------------------------------------------------------
# grinding bringup


def _grinding() -> list[str]:
    script = Path(sys.executable).with_name("grinding")
    return [str(script)] if script.exists() else [sys.executable, "-m", "robot_grinding_sim.cli"]


def _start_bringup(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = tmp_path / "bringup.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen([*_grinding(), "bringup", "sim", *args], stdout=fh, stderr=subprocess.STDOUT,
                                env=env, cwd=str(REPO), start_new_session=True)  # its own group, as a terminal gives
    return proc, log


def _stop_bringup(proc: subprocess.Popen[bytes], log: Path, sig: signal.Signals, group: bool) -> tuple[int, str]:
    if group:
        os.killpg(proc.pid, sig)  # Ctrl-C: the whole foreground process group
    else:
        proc.send_signal(sig)
    try:
        code = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"bringup did not stop within 90 s:\n{log.read_text()[-3000:]}") from None
    return code, log.read_text(errors="replace")


def _recorded(bag: Path, n: int) -> bool:
    try:
        info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (FileNotFoundError, yaml.YAMLError, KeyError, TypeError):
        return False
    return any(t["topic_metadata"]["name"] == "/joint_states" and t["message_count"] >= n
               for t in info["topics_with_message_count"])


def test_bringup_stops_cleanly_when_the_process_group_gets_ctrl_c(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    proc, log = _start_bringup(tmp_path, "--record", str(bag))
    started = re.compile(r"\[bringup\] sim: starting (.*) \(ROS_DOMAIN_ID")

    def up() -> bool:
        text = log.read_text(errors="replace")
        names = started.search(text)
        return (names is not None and all(f"[{n}] " in text for n in names.group(1).split(", "))
                and _recorded(bag, 100))

    try:
        assert _wait_until(up, proc, timeout=240, poll=0.2), f"the graph did not start:\n{log.read_text()[-3000:]}"
    finally:
        code, out = _stop_bringup(proc, log, signal.SIGINT, group=True)
    assert code == 0, out[-3000:]
    found = [b for b in BAD if b in out]
    assert not found, f"{found} in the output:\n{out[-3000:]}"
    assert "exited with code" not in out and "stopped with exit code" not in out, out[-3000:]
    assert not bag_problems(bag, out, rosbags_too=True)


def test_bringup_forwards_sigterm(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    proc, log = _start_bringup(tmp_path, "--only", "recorder", "--record", str(bag))
    try:
        assert _wait_until(lambda: "[recorder] " in log.read_text(errors="replace"), proc, poll=0.05), \
            log.read_text()[-3000:]
    finally:
        code, out = _stop_bringup(proc, log, signal.SIGTERM, group=False)
    assert code == 0, out[-3000:]
    assert "(signal 15)" in out and not [b for b in BAD if b in out], out[-3000:]
    assert not bag_problems(bag, out, rosbags_too=True)


def test_a_second_signal_inside_the_first_stop_does_not_deadlock() -> None:
    """A signal handler runs in the main thread between bytecodes, also inside the first handler's
    ``event.set()`` while it holds the event's lock: the second handler must not wait for that lock
    (planner_node hung until SIGKILL on SIGTERM twice 0.16 s apart). Here the second signal is
    delivered from inside ``notify_all``, where ``set()`` holds the lock, on a worker thread so that a
    deadlock is seen instead of hanging the test."""
    from robot_grinding_sim.ros.node_base import _Stopper

    stopper = _Stopper()
    stopper.phase = "spin"
    cond = stopper.event._cond
    notify_all = cond.notify_all

    def notify_with_a_signal() -> None:
        cond.notify_all = notify_all  # one nested signal
        stopper._on_signal(signal.SIGTERM, None)
        notify_all()

    cond.notify_all = notify_with_a_signal
    worker = threading.Thread(target=stopper._on_signal, args=(signal.SIGTERM, None), daemon=True)
    worker.start()
    worker.join(timeout=10.0)
    assert not worker.is_alive(), "the second signal's handler waits for the lock the first one holds"
    assert stopper.event.is_set() and stopper.signals == 2

"""Every node exits 0, without a traceback, on SIGINT and SIGTERM at any moment after it starts.

Each node executable is started 20 times and signalled at a random moment once its process handles
signals (seen in /proc/<pid>/status): while importing, while constructing (CAD, URDF, numba), idle,
while spinning callbacks (a background dynamics_node publishes /joint_states at 1 kHz, so the
collision, contact and recorder nodes are busy; dynamics_node steps its own simulation; the
planner runs its start-up optimisation), and in half of the runs a second signal lands while the
node is closing. Every run must exit 0 with no traceback and none of the errors a torn-down
context gives. A recorder that had started must leave a complete bag (read back with ``mcap``).

``grinding bringup sim --record DIR`` in its own process group gets SIGINT on the whole group
once the graph records: the launcher and every node exit 0, no traceback, and the bag is whole.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
CELL = REPO / "config" / "cell.yaml"
NODES = ["dynamics_node", "collision_node", "contact_solver_node", "planner_node", "recorder"]
RUNS_PER_NODE = 20
BAD = ("Traceback", "KeyboardInterrupt", "RCLError", "InvalidHandle", "context is not valid",
       "context is invalid", "Unable to convert call argument", "Segmentation fault")
SEED = int(os.environ.get("SHUTDOWN_TEST_SEED", "20261122"))


def _handles_sigterm(pid: int) -> bool:
    """True once the process has a handler for SIGTERM (its node code is running)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@dataclass
class Run:
    node: str
    index: int
    delay: float
    signals: list[str]
    returncode: int | None
    log: str
    bag: Path | None

    def problems(self) -> list[str]:
        out = []
        if self.returncode != 0:
            out.append(f"exit code {self.returncode}")
        out += [f"'{b}' in the output" for b in BAD if b in self.log]
        if self.bag is not None and "recording" in self.log:
            out += _bag_problems(self.bag)
        return out


def _bag_problems(bag: Path) -> list[str]:
    """A started recorder's bag after a stop: metadata.yaml and the MCAP file agree, message by message."""
    try:
        info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (FileNotFoundError, yaml.YAMLError, KeyError, TypeError) as exc:
        return [f"bag {bag}: no readable metadata.yaml ({exc})"]
    files = list(bag.glob("*.mcap"))
    if len(files) != 1:
        return [f"bag {bag}: {len(files)} MCAP files"]
    counts: dict[str, int] = {}
    try:
        with files[0].open("rb") as fh:
            for _, channel, _ in make_reader(fh).iter_messages():
                counts[channel.topic] = counts.get(channel.topic, 0) + 1
    except Exception as exc:  # any reader error is the finding
        return [f"bag {bag}: MCAP not readable ({type(exc).__name__}: {exc})"]
    meta = {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}
    meta = {k: v for k, v in meta.items() if v}
    return [] if counts == meta else [f"bag {bag}: metadata {meta} != MCAP {counts}"]


def _one_run(launch_node, node: str, index: int, rng: random.Random, tmp: Path) -> Run:
    params = {}
    bag = None
    if node == "recorder":
        bag = tmp / f"bag_{index}"
        params = {"output": str(bag), "topics": ["/joint_states"], "flush_period": 0.5, "discovery_period": 0.2}
    files = [CELL, REPO / "config" / f"{node}.yaml"] if node != "recorder" else [REPO / "config" / "recorder.yaml"]
    started = launch_node(node, params_file=files, params=params)
    proc = started.proc
    deadline = time.monotonic() + 120
    while not _handles_sigterm(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    delay = rng.choice([rng.uniform(0.0, 0.3), rng.uniform(0.3, 2.0), rng.uniform(2.0, 5.0)])
    time.sleep(delay)
    sent = []
    first = rng.choice([signal.SIGINT, signal.SIGTERM])
    if proc.poll() is None:
        proc.send_signal(first)
        sent.append(first.name)
        if rng.random() < 0.5:  # a second one, often while the node is closing
            time.sleep(rng.uniform(0.0, 0.3))
            second = rng.choice([signal.SIGINT, signal.SIGTERM])
            if proc.poll() is None:
                proc.send_signal(second)
                sent.append(second.name)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    return Run(node, index, delay, sent, proc.returncode, started.log(), bag)


@pytest.fixture
def busy_graph(launch_node):
    """A dynamics_node publishing /joint_states at 1 kHz (no contact coupling) for the others to chew on."""
    proc = launch_node("dynamics_node", node_name="shutdown_test_arm",
                       params_file=[CELL, REPO / "config" / "dynamics_node.yaml"],
                       params={"coupling": "none", "lockstep": False, "publish_clock": False})
    return proc


@pytest.mark.parametrize("node", NODES)
def test_node_exits_cleanly_on_signals_at_random_moments(node: str, launch_node, busy_graph, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-{node}")
    seeds = [rng.random() for _ in range(RUNS_PER_NODE)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = list(pool.map(lambda i: _one_run(launch_node, node, i, random.Random(seeds[i]), tmp_path),
                             range(RUNS_PER_NODE)))
    assert busy_graph.alive, "the background dynamics_node died:\n" + busy_graph.log()[-2000:]
    bad = [r for r in runs if r.problems()]
    report = "\n".join(
        f"run {r.index} (signals {r.signals} {r.delay:.2f} s after start): {'; '.join(r.problems())}\n"
        f"  log tail: {r.log[-1500:]}" for r in bad[:3])
    assert not bad, f"{len(bad)} of {len(runs)} {node} runs did not stop cleanly (seed {SEED}):\n{report}"
    signalled = [r for r in runs if r.signals]
    assert len(signalled) >= RUNS_PER_NODE - 2, "the node exited by itself before most signals"
    assert sum(len(r.signals) == 2 for r in runs) >= 3, "too few runs with a second signal while closing"


def test_bringup_stops_cleanly_when_the_process_group_gets_ctrl_c(tmp_path: Path) -> None:
    bag = tmp_path / "bag"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--record", str(bag)]
    log = tmp_path / "bringup.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(REPO),
                                start_new_session=True)  # its own process group, as a terminal gives it

    def recording() -> bool:
        try:
            info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        except (FileNotFoundError, yaml.YAMLError, KeyError, TypeError):
            return False
        return any(t["topic_metadata"]["name"] == "/joint_states" and t["message_count"] > 100
                   for t in info["topics_with_message_count"])

    deadline = time.monotonic() + 240
    while not recording():
        assert proc.poll() is None, f"bringup exited early ({proc.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the graph did not start recording:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
    try:
        code = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"bringup did not stop within 90 s:\n{log.read_text()[-3000:]}") from None
    out = log.read_text(errors="replace")
    assert code == 0, out[-3000:]
    found = [b for b in BAD if b in out]
    assert not found, f"{found} in the output:\n{out[-3000:]}"
    assert "exited with code" not in out and "stopped with exit code" not in out
    assert not _bag_problems(bag)

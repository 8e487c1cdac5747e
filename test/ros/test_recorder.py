"""The recorder node as a real process: messages published here are read back from its bag.

The bag is read by libraries that did not write it: ``rosbags`` (AnyReader) for both storages,
the ``mcap`` library for MCAP and Python's ``sqlite3`` for sqlite3 bags. The recorder's periodic
checkpoint rewrites ``metadata.yaml``; the tests wait on it (no fixed sleeps).
"""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcap.reader import make_reader
from rosbags.highlevel import AnyReader

WRENCH = "/ft_sensor/wrench"
CHATTER = "/recorder_test/chatter"


def metadata_counts(bag: Path) -> dict[str, int]:
    """Per-topic counts of the bag's metadata.yaml ({} while it does not exist yet)."""
    try:
        doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return {}
    info = doc["rosbag2_bagfile_information"]
    return {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}


def reliable(depth: int = 1000) -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def publish(probe: Any, rec: Any, n_wrench: int, n_chatter: int, start: int = 0, pubs: Any = None) -> Any:
    """Publish wrenches with force.z = start..start+n-1 and chatter 'msg <i>'; returns the publishers."""
    from geometry_msgs.msg import WrenchStamped
    from std_msgs.msg import String

    if pubs is None:
        pubs = (
            probe.publisher(WrenchStamped, WRENCH, reliable(), procs=[rec]),
            probe.publisher(String, CHATTER, reliable(), procs=[rec]),
        )
    pw, pc = pubs
    for i in range(start, start + n_wrench):
        m = WrenchStamped()
        m.header.frame_id = "ft_sensor"
        m.header.stamp.sec = 100 + i // 1000
        m.header.stamp.nanosec = (i % 1000) * 1_000_000
        m.wrench.force.z = float(i)
        m.wrench.torque.x = -float(i)
        pw.publish(m)
        if i - start < n_chatter:
            pc.publish(String(data=f"msg {i - start}"))
        if i % 50 == 0:
            probe.spin_once(0.0)
    return pubs


def rosbags_read(bag: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    with AnyReader([bag]) as r:
        for conn, _, raw in r.messages():
            out.setdefault(conn.topic, []).append(r.deserialize(raw, conn.msgtype))
    return out


def independent_counts(bag: Path, storage: str) -> dict[str, int]:
    """Per-topic message counts read with the mcap library or sqlite3 (not rosbags)."""
    counts: dict[str, int] = {}
    if storage == "mcap":
        (f,) = bag.glob("*.mcap")
        with f.open("rb") as fh:
            for _, channel, _ in make_reader(fh).iter_messages():
                counts[channel.topic] = counts.get(channel.topic, 0) + 1
    else:
        (f,) = bag.glob("*.db3")
        with sqlite3.connect(f"file:{f}?mode=ro", uri=True) as db:
            rows = db.execute(
                "SELECT topics.name, count(*) FROM messages JOIN topics ON messages.topic_id = topics.id "
                "GROUP BY topics.name"
            ).fetchall()
        counts = dict(rows)
    return counts


def start_recorder(launch_node: Any, bag: Path, storage: str, flush_period: float = 0.2) -> Any:
    return launch_node(
        "recorder",
        params={
            "output": str(bag),
            "storage": storage,
            "topics": [WRENCH, CHATTER.lstrip("/")],  # one without the leading slash
            "flush_period": flush_period,
            "discovery_period": 0.2,
        },
    )


@pytest.mark.parametrize(("storage", "sig"), [("mcap", signal.SIGINT), ("sqlite3", signal.SIGTERM)])
def test_records_every_message_and_closes_on_signal(
    tmp_path: Path, launch_node: Any, probe: Any, storage: str, sig: int
) -> None:
    bag = tmp_path / "bag"
    rec = start_recorder(launch_node, bag, storage)
    n, k = 1500, 60
    publish(probe, rec, n, k)
    probe.wait_for(lambda: metadata_counts(bag) == {WRENCH: n, CHATTER: k}, what="all messages checkpointed",
                   procs=[rec])
    rec.proc.send_signal(sig)
    assert rec.wait_exit() == 0, rec.log()[-3000:]
    assert f"{n + k} messages written" in rec.log()

    msgs = rosbags_read(bag)
    assert [m.wrench.force.z for m in msgs[WRENCH]] == [float(i) for i in range(n)]
    assert [m.wrench.torque.x for m in msgs[WRENCH]] == [-float(i) for i in range(n)]
    assert {m.header.frame_id for m in msgs[WRENCH]} == {"ft_sensor"}
    assert [m.data for m in msgs[CHATTER]] == [f"msg {i}" for i in range(k)]
    assert independent_counts(bag, storage) == {WRENCH: n, CHATTER: k}
    meta = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == storage and meta["message_count"] == n + k
    if storage == "mcap":  # the closed file has its summary (index) again
        (f,) = bag.glob("*.mcap")
        with f.open("rb") as fh:
            assert make_reader(fh).get_summary().statistics.message_count == n + k


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_killed_recorder_leaves_bag_readable_up_to_last_checkpoint(
    tmp_path: Path, launch_node: Any, probe: Any, storage: str
) -> None:
    from robot_grinding_sim.core.record.bag import read_wrench
    from robot_grinding_sim.core.record.bagwriter import repair_bag

    bag = tmp_path / "bag"
    rec = start_recorder(launch_node, bag, storage, flush_period=0.2)
    n1 = 400
    pubs = publish(probe, rec, n1, 10)
    probe.wait_for(lambda: metadata_counts(bag).get(WRENCH) == n1, what="first checkpoint", procs=[rec])
    publish(probe, rec, 300, 0, start=n1, pubs=pubs)  # some of these may not be checkpointed
    rec.proc.send_signal(signal.SIGKILL)
    rec.proc.wait(timeout=30)

    # readable as left behind, by rosbags and by the independent reader
    msgs = rosbags_read(bag)
    got = [m.wrench.force.z for m in msgs[WRENCH]]
    assert n1 <= len(got) <= n1 + 300
    assert got == [float(i) for i in range(len(got))]  # a prefix of what was sent, in order
    assert independent_counts(bag, storage)[WRENCH] == len(got)
    assert len(read_wrench(bag, WRENCH)) == len(got)
    # repair makes the metadata match the storage file exactly
    res = repair_bag(bag)
    assert metadata_counts(bag)[WRENCH] == len(got) and res.messages == len(got) + 10


def test_existing_output_is_refused_at_start_up(tmp_path: Path, launch_node: Any) -> None:
    (tmp_path / "taken").mkdir()
    rec = launch_node("recorder", params={"output": str(tmp_path / "taken")})
    assert rec.wait_exit() == 1
    assert "'output'" in rec.log() and "exists" in rec.log()


def test_grinding_record_cli(tmp_path: Path, probe: Any) -> None:
    """`grinding record` runs the same node in its own process; Ctrl-C closes the bag."""
    import os
    import shutil
    import subprocess
    import sys

    class Proc:  # what Probe.wait_for needs to fail early with the log
        def __init__(self, cmd: list[str], log: Path) -> None:
            self.cmd, self.log_path = cmd, log
            with log.open("wb") as fh:
                self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ))

        alive = property(lambda self: self.proc.poll() is None)
        returncode = property(lambda self: self.proc.poll())

        def log(self) -> str:
            return self.log_path.read_text(errors="replace")

    exe = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))
    bag = tmp_path / "cli_bag"
    cmd = [exe, "record", "-o", str(bag), "-t", WRENCH, "-t", CHATTER, "--storage", "sqlite3",
           "--flush-period", "0.2"]
    rec = Proc(cmd, tmp_path / "record.log")
    try:
        publish(probe, rec, 200, 5)
        probe.wait_for(lambda: metadata_counts(bag) == {WRENCH: 200, CHATTER: 5}, what="checkpoint", procs=[rec])
    finally:
        rec.proc.send_signal(signal.SIGINT)
        try:
            code = rec.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rec.proc.kill()
            raise
    assert code == 0, rec.log()[-3000:]
    assert "recorded 205 messages on 2 topics" in rec.log()
    assert independent_counts(bag, "sqlite3") == {WRENCH: 200, CHATTER: 5}


@pytest.mark.parametrize(
    "msgtype",
    ["geometry_msgs/msg/WrenchStamped", "sensor_msgs/msg/JointState", "sensor_msgs/msg/PointCloud2",
     "trajectory_msgs/msg/JointTrajectory", "visualization_msgs/msg/MarkerArray", "nav_msgs/msg/Path",
     "rcl_interfaces/msg/ParameterDescriptor",  # bounded sequences
     "type_description_interfaces/msg/TypeDescription"],  # bounded strings
)
def test_definitions_rebuilt_from_python_classes_match_the_type_store(msgtype: str) -> None:
    """The fallback for types outside rosbags' store gives the same definition hash (RIHS01)."""
    from rosbags.typesys import Stores, get_typestore

    from robot_grinding_sim.nodes.recorder import import_message, register_message_class

    store = get_typestore(Stores.EMPTY)
    register_message_class(store, import_message(msgtype), msgtype)
    assert store.hash_rihs01(msgtype) == get_typestore(Stores.ROS2_KILTED).hash_rihs01(msgtype)


def test_recorded_bag_feeds_grinding_compare(tmp_path: Path, launch_node: Any, probe: Any) -> None:
    """The recorder's bag feeds `grinding compare`: predicted and "measured" wrenches published here
    with a known relation (measured = 1.05 x predicted, two passes marked on the progress topic) are
    recorded into one bag, and compare recovers that relation, the passes and zero lag. (A bag of
    the real node graph is checked in test_graph_contact.py.)"""
    import json
    import math
    import subprocess
    import sys

    from geometry_msgs.msg import WrenchStamped
    from std_msgs.msg import Float64MultiArray

    bag = tmp_path / "run"
    topics = ["/contact/wrench", "/ft_sensor/wrench", "/grinding/progress"]
    rec = launch_node("recorder", params={"output": str(bag), "topics": topics, "flush_period": 0.2,
                                          "discovery_period": 0.2})
    pubs = [probe.publisher(WrenchStamped, t, reliable(), procs=[rec]) for t in topics[:2]]
    prog = probe.publisher(Float64MultiArray, topics[2], reliable(), procs=[rec])
    n_wrench = n_prog = 0
    for i in range(2400):  # 2 passes of 1 s at 1 kHz, 0.2 s apart; 100 mm/s
        k, tau = divmod(i, 1200)
        on_pass = tau < 1000
        t = 50.0 + i * 1e-3
        f = (5.0 + math.sin(2 * math.pi * 2.0 * tau * 1e-3 + k)) if on_pass else 0.0
        for pub, scale in zip(pubs, (1.0, 1.05), strict=True):
            m = WrenchStamped()
            m.header.stamp.sec, m.header.stamp.nanosec = int(t), int(round((t - int(t)) * 1e9))
            m.header.frame_id = "tcp"
            m.wrench.force.z = scale * f
            pub.publish(m)
        n_wrench += 1
        if i % 10 == 0:
            prog.publish(Float64MultiArray(data=[float(k) if on_pass else -1.0, 0.1 * tau * 1e-3, t]))
            n_prog += 1
        if i % 50 == 0:
            probe.spin_once(0.0)
    want = {topics[0]: n_wrench, topics[1]: n_wrench, topics[2]: n_prog}
    probe.wait_for(lambda: metadata_counts(bag) == want, what="all messages checkpointed", procs=[rec])
    assert rec.stop() == 0

    out = subprocess.run(
        [sys.executable, "-m", "robot_grinding_sim.cli", "compare", str(bag), str(bag), "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["align"] == "progress"
    assert [p["index"] for p in doc["passes"]] == [0, 1]
    assert doc["mean_relative_error"] == pytest.approx(0.05 / 1.05, abs=1e-3)
    assert doc["lag_s"] == pytest.approx(0.0, abs=2e-3)


def report_of(bag: Path) -> dict[str, Any] | None:
    """The recorder's report in the bag's metadata.yaml (custom_data), read with yaml and json."""
    import json

    try:
        doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return None
    text = (doc["rosbag2_bagfile_information"].get("custom_data") or {}).get("robot_grinding_sim.recorder")
    return None if text is None else json.loads(text)


@pytest.mark.slow
def test_a_best_effort_publisher_joining_after_a_reliable_one_is_recorded(
        tmp_path: Path, launch_node: Any, probe: Any) -> None:
    """The recorder subscribed reliably (the one publisher was reliable); a best-effort publisher
    joins. Before, its subscription never matched it: 0 of 200 recorded, only rclpy's QoS warning.
    Now it gets a subscription with its QoS, and every message of both publishers is in the bag once
    (the best-effort subscription also hears the reliable publisher: those copies are dropped)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    topic = "/recorder_test/mixed"
    bag = tmp_path / "bag"
    rec = launch_node("recorder", params={"output": str(bag), "topics": [topic], "flush_period": 0.2,
                                          "discovery_period": 0.2})
    rel = probe.publisher(String, topic, reliable(), procs=[rec])
    for i in range(100):
        rel.publish(String(data=f"R {i}"))
    probe.wait_for(lambda: metadata_counts(bag).get(topic) == 100, what="the reliable publisher's 100", procs=[rec])
    be = probe.publisher(String, topic, QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT),
                         procs=[rec])
    for i in range(200):
        be.publish(String(data=f"B {i}"))
        if i % 2:
            rel.publish(String(data=f"R {100 + i // 2}"))
        if i % 50 == 0:
            probe.spin_once(0.0)
    probe.wait_for(lambda: metadata_counts(bag).get(topic) == 400, what="all 400 checkpointed", procs=[rec])
    assert rec.stop() == 0
    got = [m.data for m in rosbags_read(bag)[topic]]
    assert sorted(got) == sorted([f"R {i}" for i in range(200)] + [f"B {i}" for i in range(200)])
    assert [g for g in got if g[0] == "R"] == [f"R {i}" for i in range(200)]  # in order, once each
    rep = report_of(bag)["topics"][topic]
    assert rep["received"] == 400 and rep["lost"] == 0
    assert "best effort" in rec.log()


@pytest.mark.slow
def test_messages_lost_on_the_way_are_counted_in_the_metadata_and_on_exit(
        tmp_path: Path, launch_node: Any, probe: Any) -> None:
    """A publisher whose stream reaches the recorder with gaps: the recorder is stopped (SIGSTOP)
    while a reliable publisher of depth 10 sends 3000 messages; its history keeps only the last 10,
    so most never arrive. Before, the recorder reported "written == received, 0 write errors" and
    nothing else. Now the count it reports lost (by the publisher's sequence numbers), in the bag's
    metadata and in its closing line, is the number of published messages the bag lacks."""
    import json

    bag = tmp_path / "bag"
    rec = start_recorder(launch_node, bag, "mcap")
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    pub = probe.publisher(WrenchStamped, WRENCH, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
                          procs=[rec])
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            m = WrenchStamped()
            m.header.stamp.sec, m.header.stamp.nanosec = 100 + sent // 1000, (sent % 1000) * 1_000_000
            m.wrench.force.z = float(sent)
            pub.publish(m)
            sent += 1

    send(20)
    probe.wait_for(lambda: metadata_counts(bag).get(WRENCH) == 20, what="the first 20", procs=[rec])
    rec.proc.send_signal(signal.SIGSTOP)
    try:
        send(3000)
    finally:
        rec.proc.send_signal(signal.SIGCONT)
    send(20)

    def accounted() -> bool:  # the last message is in: everything before it is received or lost
        r = report_of(bag)
        t = (r or {}).get("topics", {}).get(WRENCH)
        return t is not None and t["received"] + t["lost"] == sent

    probe.wait_for(accounted, what="the recorder's account to reach the last message", procs=[rec])
    assert rec.stop() == 0
    z = {int(m.wrench.force.z) for m in rosbags_read(bag)[WRENCH]}
    missing = sent - len(z)
    assert 0 in z and sent - 1 in z and missing > 0
    rep = json.loads(yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"][
        "custom_data"]["robot_grinding_sim.recorder"])["topics"][WRENCH]
    assert rep["lost"] == rep["lost_by_sequence"] == missing and rep["received"] == len(z)
    assert f"lost {missing} messages: {WRENCH} {missing} (publisher sequence numbers" in rec.log()
    print(f"recorded {len(z)} of {sent}; lost {missing}; DDS sample-lost events: {rep['dds_sample_lost']}")

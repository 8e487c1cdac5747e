"""The recorder computes /tf and /tf_static from /joint_states where no node publishes /tf (the pip
path), and records a publisher's /tf instead once there is one.

Joint states are published here; the bag is read with the ``mcap`` library and decoded with
``cdr_reader`` (the schema text the file carries; no code shared with the writer, ``rosbags``); the
transforms are checked against Pinocchio's FK of the published positions.
"""

from __future__ import annotations

import signal
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from cdr_reader import decode
from mcap.reader import make_reader
from scipy.spatial.transform import Rotation

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
HOME = np.array([0.0, -1.2, 1.9, -2.27, -1.57, 0.0])


def metadata_counts(bag: Path) -> dict[str, int]:
    try:
        info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (FileNotFoundError, yaml.YAMLError, KeyError, TypeError):
        return {}
    return {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}


def read_bag(bag: Path) -> dict[str, list[tuple[int, str, dict[str, Any]]]]:
    """topic -> [(log time ns, schema name, decoded message)] in log-time order."""
    (f,) = bag.glob("*.mcap")
    out: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
    with f.open("rb") as fh:
        for schema, channel, message in make_reader(fh).iter_messages(log_time_order=True):
            out.setdefault(channel.topic, []).append(
                (message.log_time, schema.name, decode(schema.name, schema.data.decode(), message.data)))
    return out


def matrix(tf: dict[str, Any]) -> np.ndarray:
    t, r = tf["translation"], tf["rotation"]
    X = np.eye(4)
    X[:3, :3] = Rotation.from_quat([r["x"], r["y"], r["z"], r["w"]]).as_matrix()
    X[:3, 3] = [t["x"], t["y"], t["z"]]
    return X


def tree_poses(transforms: list[dict[str, Any]], root: str = "base_link") -> dict[str, np.ndarray]:
    edges = {tf["child_frame_id"]: (tf["header"]["frame_id"], matrix(tf["transform"])) for tf in transforms}
    out = {root: np.eye(4)}

    def pose(frame: str) -> np.ndarray:
        if frame not in out:
            parent, X = edges[frame]
            out[frame] = pose(parent) @ X
        return out[frame]

    for frame in edges:
        pose(frame)
    return out


def pinocchio_poses(names: list[str], q: np.ndarray) -> dict[str, np.ndarray]:
    import pinocchio as pin

    model = pin.buildModelFromXML(URDF.read_text())
    data = model.createData()
    qp = pin.neutral(model)
    for name, v in zip(names, q, strict=True):
        if model.existJointName(name):
            qp[model.joints[model.getJointId(name)].idx_q] = v
    pin.framesForwardKinematics(model, data, qp)
    return {f.name: data.oMf[k].homogeneous for k, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}


def check_tf_against_fk(msgs: dict[str, list[tuple[int, str, dict[str, Any]]]], min_motion: float) -> dict[str, Any]:
    """Every /tf composed with /tf_static equals Pinocchio's FK of the joint state of its stamp,
    logged at that joint state's receive time; returns figures."""
    urdf = ET.fromstring(URDF.read_text())
    fixed = {(j.find("parent").get("link"), j.find("child").get("link")) for j in urdf.findall("joint")
             if j.get("type") == "fixed"}
    moving = {(j.find("parent").get("link"), j.find("child").get("link")) for j in urdf.findall("joint")
              if j.get("type") != "fixed"}
    ((_, stype, static),) = msgs["/tf_static"]
    assert stype == "tf2_msgs/msg/TFMessage"
    assert {(tf["header"]["frame_id"], tf["child_frame_id"]) for tf in static["transforms"]} == \
        fixed | {("base_link", "workpiece")}
    wp = {tf["child_frame_id"]: matrix(tf["transform"]) for tf in static["transforms"]}["workpiece"]
    expected = np.eye(4)
    expected[:3, 3] = [0.7, 0.0, 0.0]  # config/cell.yaml workpiece.pose: 0.7 m in front, not rotated
    assert np.allclose(wp, expected, atol=1e-12)
    states = {}
    for log_ns, _, m in msgs["/joint_states"]:
        states.setdefault(m["header"]["stamp"]["sec"] * 10**9 + m["header"]["stamp"]["nanosec"], (log_ns, m))
    worst = 0.0
    qs = []
    for log_ns, stype, m in msgs["/tf"]:
        assert stype == "tf2_msgs/msg/TFMessage"
        assert {(tf["header"]["frame_id"], tf["child_frame_id"]) for tf in m["transforms"]} == moving
        (stamp,) = {tf["header"]["stamp"]["sec"] * 10**9 + tf["header"]["stamp"]["nanosec"] for tf in m["transforms"]}
        js_log, js = states[stamp]
        assert log_ns == js_log  # written at the receive time of its joint state
        q = np.array(js["position"])
        qs.append([q[js["name"].index(n)] for n in JOINTS])
        tree = tree_poses(static["transforms"] + m["transforms"])
        ref = pinocchio_poses(js["name"], q)
        for link in {c for _, c in fixed | moving}:
            worst = max(worst, float(np.abs(tree[link] - ref[link]).max()))
    assert worst < 1e-9, worst
    motion = float(np.ptp(np.array(qs), axis=0).max())
    assert motion > min_motion, motion  # the arm moved: the check is not at one configuration
    return {"worst": worst, "tf": len(msgs["/tf"]), "joint_states": len(msgs["/joint_states"]), "motion": motion}


def joint_state(k: int, names: list[str]) -> Any:
    from sensor_msgs.msg import JointState

    q = HOME + 0.3 * np.sin(0.05 * k + np.arange(6))
    values = dict(zip(JOINTS, q, strict=True)) | {"finger_joint": 0.5}  # an extra joint is ignored
    m = JointState()
    m.header.stamp.sec, m.header.stamp.nanosec = 100 + k // 100, (k % 100) * 10_000_000  # 100 Hz
    m.name = names
    m.position = [float(values[n]) for n in names]
    return m


def test_recorder_computes_tf_from_joint_states(tmp_path: Path, launch_node: Any, probe: Any) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    bag = tmp_path / "bag"
    rec = launch_node("recorder", params={"output": str(bag), "topics": ["/joint_states", "/tf", "/tf_static"],
                                          "computed_tf_rate": 50.0, "flush_period": 0.2, "discovery_period": 0.2})
    pub = probe.publisher(JointState, "/joint_states", QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE),
                          procs=[rec])
    names = [*reversed(JOINTS), "finger_joint"]  # any order
    n = 201
    for k in range(n):
        pub.publish(joint_state(k, names))
        if k % 20 == 0:
            probe.spin_once(0.0)
    # 50 Hz of 100 Hz stamps: every second joint state, the first one included
    want = {"/joint_states": n, "/tf": 101, "/tf_static": 1}
    probe.wait_for(lambda: metadata_counts(bag) == want, what=f"{want} checkpointed", procs=[rec])
    rec.proc.send_signal(signal.SIGINT)
    assert rec.wait_exit() == 0, rec.log()[-3000:]
    assert f"{n} messages written, {n} received, 0 write errors, 102 computed" in rec.log()
    msgs = read_bag(bag)
    assert {t: len(v) for t, v in msgs.items()} == want
    figures = check_tf_against_fk(msgs, min_motion=0.5)
    print(f"recorder /tf vs Pinocchio: {figures}")


def test_a_tf_publisher_takes_over(tmp_path: Path, launch_node: Any, probe: Any) -> None:
    """With a node publishing /tf on the graph, the recorder records it and computes nothing."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String  # tf2_msgs is not installable here: any publisher of /tf counts

    tf_pub = probe.node.create_publisher(String, "/tf", 10)
    bag = tmp_path / "bag"
    rec = launch_node("recorder", params={"output": str(bag), "topics": ["/joint_states", "/tf", "/tf_static"],
                                          "flush_period": 0.2, "discovery_period": 0.2})
    probe.wait_for(lambda: "recording it instead of computing it" in rec.log(), what="the recorder to see /tf",
                   procs=[rec])
    pub = probe.publisher(JointState, "/joint_states", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
                          procs=[rec])
    probe.wait_for(lambda: tf_pub.get_subscription_count() >= 1, what="the recorder's /tf subscription", procs=[rec])
    for k in range(20):
        pub.publish(joint_state(k, JOINTS))
        tf_pub.publish(String(data=f"tf {k}"))
    want = {"/joint_states": 20, "/tf": 20}
    probe.wait_for(lambda: metadata_counts(bag) == want, what=f"{want} checkpointed", procs=[rec])
    rec.proc.send_signal(signal.SIGINT)
    assert rec.wait_exit() == 0, rec.log()[-3000:]
    assert "40 messages written, 40 received, 0 write errors, 0 computed" in rec.log()
    msgs = read_bag(bag)
    assert [m["data"] for _, _, m in msgs["/tf"]] == [f"tf {k}" for k in range(20)]


@pytest.mark.parametrize("rate", [0.0])
def test_no_computed_tf_at_rate_zero(tmp_path: Path, launch_node: Any, probe: Any, rate: float) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    bag = tmp_path / "bag"
    rec = launch_node("recorder", params={"output": str(bag), "topics": ["/joint_states", "/tf"],
                                          "computed_tf_rate": rate, "flush_period": 0.2, "discovery_period": 0.2})
    pub = probe.publisher(JointState, "/joint_states", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
                          procs=[rec])
    for k in range(10):
        pub.publish(joint_state(k, JOINTS))
    probe.wait_for(lambda: metadata_counts(bag) == {"/joint_states": 10}, what="10 joint states", procs=[rec])
    rec.proc.send_signal(signal.SIGINT)
    assert rec.wait_exit() == 0, rec.log()[-3000:]
    assert "10 messages written, 10 received, 0 write errors; nothing lost\n" in rec.log()

"""ros/wire.py: the loop's messages as bytes are the standard messages.

Independent readers: rclpy's own deserializer (the typesupport of the message packages) and
``rosbags``' CDR deserializer; independent writers: rclpy's serializer, with its padding bytes and
any joint order."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.sim.coupled_step import LAYOUT
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros import wire

NAMES = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
         "wrist_3_joint"]
STORE = get_typestore(Stores.ROS2_KILTED) if hasattr(Stores, "ROS2_KILTED") else get_typestore(Stores.LATEST)
RNG = np.random.default_rng(7)


def test_joint_state_bytes_read_back_by_rclpy_and_rosbags() -> None:
    q, qd, tau = RNG.normal(size=(3, 6))
    ns = 1_795_536_606_719_396_499  # a wall-clock stamp: float seconds would lose its last digits
    data = wire.joint_state_bytes(NAMES).encode(ns, np.concatenate([q, qd, tau]))
    msg = deserialize_message(data, JointState)
    assert list(msg.name) == NAMES
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == divmod(ns, 1_000_000_000)
    np.testing.assert_array_equal(msg.position, q)
    np.testing.assert_array_equal(msg.velocity, qd)
    np.testing.assert_array_equal(msg.effort, tau)
    other = STORE.deserialize_cdr(data, "sensor_msgs/msg/JointState")
    assert list(other.name) == NAMES
    np.testing.assert_array_equal(other.effort, tau)


def test_joint_state_reader_takes_any_order_extra_joints_and_rclpy_padding() -> None:
    q, qd = RNG.normal(size=(2, 6))
    order = [3, 0, 5, 1, 4, 2]
    msg = cv.arrays_to_joint_state([NAMES[i] for i in order] + ["gripper"], np.r_[q[order], 9.0],
                                   np.r_[qd[order], 8.0], None, cv.sec_to_time(12.5), frame_id="base_link")
    reader = wire.JointStateReader(NAMES)
    for _ in range(2):  # the second read takes the cached name match
        ns, q2, qd2 = reader.read(serialize_message(msg), need_velocity=True)
        assert ns == 12_500_000_000
        np.testing.assert_array_equal(q2, q)
        np.testing.assert_array_equal(qd2, qd)
    # positions only: no velocities
    only_q = cv.arrays_to_joint_state(NAMES, q, None, None, cv.sec_to_time(1.0))
    assert reader.read(serialize_message(only_q), need_velocity=True)[2] is None


@pytest.mark.parametrize("case, match", [
    ("missing", "missing joints"),
    ("nan", "NaN or inf for \\['elbow_joint'\\]"),
    ("short", "5 values for 6 names"),
    ("duplicate", "duplicate joint names"),
    ("garbage", "not a little-endian CDR"),
])
def test_joint_state_reader_errors_name_the_problem(case: str, match: str) -> None:
    q = np.zeros(6)
    if case == "missing":
        data = serialize_message(cv.arrays_to_joint_state(NAMES[:5], q[:5]))
    elif case == "nan":
        q[2] = np.nan
        msg = JointState(name=NAMES)
        msg.position = q.tolist()
        data = serialize_message(msg)
    elif case == "short":
        msg = JointState(name=NAMES)
        msg.position = q[:5].tolist()
        data = serialize_message(msg)
    elif case == "duplicate":
        msg = JointState(name=NAMES[:5] + [NAMES[0]])
        msg.position = q.tolist()
        data = serialize_message(msg)
    else:
        data = b"\x01\x02"
    with pytest.raises(InputError, match=match):
        wire.JointStateReader(NAMES).read(data)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_point_cloud_bytes_are_array_to_pointcloud2(n: int) -> None:
    rows = RNG.normal(size=(n, len(cv.CONTACT_FIELDS)))
    data = wire.PointCloudWriter("base_link").encode(42_000_000_007, rows)
    msg = deserialize_message(data, PointCloud2)
    ref = cv.array_to_pointcloud2(rows, "base_link", cv.sec_to_time(42.000000007))
    for field in ("height", "width", "point_step", "row_step", "is_bigendian", "is_dense"):
        assert getattr(msg, field) == getattr(ref, field), field
    assert [(f.name, f.offset, f.datatype, f.count) for f in msg.fields] == \
        [(f.name, f.offset, f.datatype, f.count) for f in ref.fields]
    np.testing.assert_array_equal(cv.pointcloud2_to_array(msg), rows)
    other = STORE.deserialize_cdr(data, "sensor_msgs/msg/PointCloud2")
    assert other.width == n and other.header.frame_id == "base_link"
    # read back in place, and a cloud written by rclpy (other padding) through the general path
    reader = wire.PointCloudReader("base_link")
    for raw in (data, serialize_message(ref)):
        frame, ns, back = reader.read(raw)
        assert (frame, ns) == ("base_link", 42_000_000_007)
        np.testing.assert_array_equal(back, rows)


def test_point_cloud_reader_reads_another_layout() -> None:
    """float32 fields in another order (another publisher): read by name."""
    rows = RNG.normal(size=(2, len(cv.CONTACT_FIELDS))).astype(np.float32).astype(float)
    fields = list(cv.CONTACT_FIELDS)[::-1]
    msg = cv.array_to_pointcloud2(rows[:, ::-1], "base_link", cv.sec_to_time(3.0), fields=fields, double=False)
    frame, ns, back = wire.PointCloudReader("base_link").read(serialize_message(msg))
    np.testing.assert_array_equal(back, rows)


def test_contact_model_bytes_round_trip() -> None:
    data = RNG.normal(size=len(LAYOUT))
    raw = wire.ContactModelWriter().encode(data)
    msg = deserialize_message(raw, Float64MultiArray)
    assert [(d.label, d.size, d.stride) for d in msg.layout.dim] == [(cv.CONTACT_MODEL_LABEL, len(LAYOUT),
                                                                     len(LAYOUT))]
    np.testing.assert_array_equal(msg.data, data)
    # any layout is read (dimensions skipped)
    other = Float64MultiArray(data=[1.0, 2.0, 3.0])
    other.layout.dim = [MultiArrayDimension(label="a", size=1, stride=3), MultiArrayDimension(label="bc", size=3,
                                                                                              stride=3)]
    np.testing.assert_array_equal(wire.float64_array_reader(serialize_message(other), "x"), [1.0, 2.0, 3.0])
    t, rom = wire.contact_model_from_bytes(wire.ContactModelWriter().encode(np.array([4.25])))
    assert t == 4.25 and rom is None


def test_wrench_bytes_read_back_by_rclpy() -> None:
    from geometry_msgs.msg import WrenchStamped

    w = RNG.normal(size=6)
    msg = deserialize_message(wire.wrench_stamped_bytes("tcp").encode(5_500_000_000, w), WrenchStamped)
    assert msg.header.frame_id == "tcp" and msg.header.stamp.sec == 5 and msg.header.stamp.nanosec == 500_000_000
    np.testing.assert_array_equal(cv.wrench_to_array(msg), w)


def test_triangle_marker_bytes_are_removal_to_marker_array() -> None:
    from visualization_msgs.msg import MarkerArray

    V = RNG.normal(size=(12, 3))
    T = np.array([[0, 1, 2], [2, 3, 4], [5, 6, 7], [8, 9, 11]])
    depth = RNG.uniform(0.0, 1e-5, size=12)
    raw = wire.triangle_marker_bytes(V, T, cv.depth_colors(depth), "base_link", 7_250_000_000, "removal")
    got = deserialize_message(raw, MarkerArray).markers
    ref = cv.removal_to_marker_array(V, T, depth, "base_link", cv.sec_to_time(7.25)).markers
    assert len(got) == len(ref) == 1
    g, r = got[0], ref[0]
    for field in ("header", "ns", "id", "type", "action", "pose", "scale", "lifetime", "frame_locked", "text",
                  "mesh_resource", "texture_resource", "mesh_use_embedded_materials"):
        assert getattr(g, field) == getattr(r, field), field
    assert [(p.x, p.y, p.z) for p in g.points] == [(p.x, p.y, p.z) for p in r.points]
    np.testing.assert_allclose([(c.r, c.g, c.b, c.a) for c in g.colors], [(c.r, c.g, c.b, c.a) for c in r.colors],
                               atol=1e-7)  # float32 on the wire
    other = STORE.deserialize_cdr(raw, "visualization_msgs/msg/MarkerArray")
    assert len(other.markers[0].points) == 3 * len(T)

"""JointTrajectory as bytes (ros/trajectory_wire.py) against rclpy's own serialization: rclpy reads
the bytes written back as the message it would have built itself (rclpy's own bytes differ only in
their padding, which it leaves uninitialised, and its buffer's unused tail), and messages rclpy
wrote are read with the arrays and the errors of conversions.joint_trajectory_to_arrays."""

from __future__ import annotations

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from rclpy.serialization import deserialize_message, serialize_message
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.trajectory_wire import joint_trajectory_bytes, joint_trajectory_from_bytes

pytestmark = pytest.mark.ros

NAMES = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint", "j6"]


def arrays(k: int, n: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.uniform(0.001, 0.3, k)) + 0.25
    return times, rng.normal(size=(k, n)), rng.normal(size=(k, n)), rng.normal(size=(k, n))


def same_message(a: JointTrajectory, b: JointTrajectory) -> None:
    assert (a.header.stamp.sec, a.header.stamp.nanosec, a.header.frame_id, list(a.joint_names)) == \
        (b.header.stamp.sec, b.header.stamp.nanosec, b.header.frame_id, list(b.joint_names))
    assert len(a.points) == len(b.points)
    for p, r in zip(a.points, b.points, strict=True):
        assert (p.time_from_start.sec, p.time_from_start.nanosec) == (r.time_from_start.sec, r.time_from_start.nanosec)
        for f in ("positions", "velocities", "accelerations", "effort"):
            assert list(getattr(p, f)) == list(getattr(r, f)), f


@pytest.mark.parametrize("k, n, vel, acc, frame", [(1, 6, True, False, "base_link"), (500, 6, True, False, ""),
                                                   (7, 3, False, False, "x"), (40, 5, True, True, "odd_frame"),
                                                   (3, 7, False, True, "ab")])
def test_bytes_are_rclpys(k: int, n: int, vel: bool, acc: bool, frame: str) -> None:
    times, q, qd, qdd = arrays(k, n)
    names = NAMES[:n] if n <= 6 else [*NAMES, "j7"]
    msg = cv.arrays_to_joint_trajectory(names, times, q, qd if vel else None, qdd if acc else None, frame_id=frame)
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_795_555_443, 959_000_000
    ours = joint_trajectory_bytes(names, times, q, qd if vel else None, qdd if acc else None, frame_id=frame,
                                  stamp=(1_795_555_443, 959_000_000))
    same_message(deserialize_message(ours, JointTrajectory), msg)
    theirs = bytes(serialize_message(msg))
    assert len(ours) <= len(theirs)  # rclpy's buffer may run on past the message


def test_rclpy_messages_read_back() -> None:
    times, q, qd, _ = arrays(300)
    msg = cv.arrays_to_joint_trajectory(NAMES, times, q, qd, frame_id="base_link")
    msg.header.stamp.sec = 12
    stamp, frame, names, t, pos, vel, acc = joint_trajectory_from_bytes(bytes(serialize_message(msg)))
    ref = cv.joint_trajectory_to_arrays(msg)
    assert stamp == (12, 0) and frame == "base_link" and names == ref[0] and acc is None
    np.testing.assert_array_equal(t, ref[1])
    np.testing.assert_array_equal(pos, ref[2])
    np.testing.assert_array_equal(vel, ref[3])


def bad(points: list[JointTrajectoryPoint], names: list[str] | None = None) -> bytes:
    return bytes(serialize_message(JointTrajectory(joint_names=NAMES[:2] if names is None else names,
                                                   points=points)))


@pytest.mark.parametrize("data", [
    bad([JointTrajectoryPoint(positions=[0.0, 1.0], velocities=[0.0, 0.0]),
         JointTrajectoryPoint(positions=[0.0, 1.0], time_from_start=Duration(sec=1))]),
    bad([JointTrajectoryPoint(positions=[0.0])]),
    bad([JointTrajectoryPoint(positions=[0.0, float("nan")])]),
    bad([JointTrajectoryPoint(positions=[0.0, 1.0], time_from_start=Duration(sec=1)),
         JointTrajectoryPoint(positions=[0.0, 1.0], time_from_start=Duration(sec=1))]),
    bad([]),
    bad([JointTrajectoryPoint(positions=[0.0, 1.0])], names=["a", "a"]),
], ids=["velocities_on_one_point", "too_few_positions", "nan", "times_not_increasing", "no_points",
        "repeated_name"])  # serialize_message's padding bytes differ between processes: named ids for xdist
def test_errors_are_the_message_readers(data: bytes) -> None:
    with pytest.raises(InputError) as ours:
        joint_trajectory_from_bytes(data)
    with pytest.raises(InputError) as theirs:
        cv.joint_trajectory_to_arrays(deserialize_message(data, JointTrajectory))
    assert str(ours.value) == str(theirs.value)


def test_truncated_messages_are_refused() -> None:
    times, q, qd, _ = arrays(50)
    data = joint_trajectory_bytes(NAMES, times, q, qd)
    for cut in (10, 40, len(data) // 2, len(data) - 5):
        with pytest.raises(InputError, match="joint_trajectory"):
            joint_trajectory_from_bytes(data[:cut])

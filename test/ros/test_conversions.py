"""Message <-> array converters: round trips, independent checks, and the errors bad messages get."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Pose, Quaternion
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState, PointCloud2, PointField
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import conversions as cv

NAMES = ["a", "b", "c"]


def _rand_pose(rng: np.random.Generator) -> np.ndarray:
    X = np.eye(4)
    X[:3, :3] = Rotation.random(random_state=rng).as_matrix()
    X[:3, 3] = rng.normal(size=3)
    return X


def test_pose_round_trip_and_quaternion_order() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        X = _rand_pose(rng)
        np.testing.assert_allclose(cv.pose_to_matrix(cv.matrix_to_pose(X)), X, atol=1e-12)
        np.testing.assert_allclose(cv.transform_to_matrix(cv.matrix_to_transform(X)), X, atol=1e-12)
    # 90 deg about z: ROS order (x, y, z, w) = (0, 0, sin 45, cos 45)
    X = np.eye(4)
    X[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    o = cv.matrix_to_pose(X).orientation
    np.testing.assert_allclose([o.x, o.y, o.z, o.w], [0, 0, math.sqrt(0.5), math.sqrt(0.5)], atol=1e-12)
    ps = cv.matrix_to_pose_stamped(X, "base_link")
    Y, frame = cv.pose_stamped_to_matrix(ps)
    assert frame == "base_link"
    np.testing.assert_allclose(Y, X, atol=1e-12)


def test_pose_errors() -> None:
    with pytest.raises(InputError, match="4x4"):
        cv.matrix_to_pose(np.eye(3))
    with pytest.raises(InputError, match="NaN"):
        cv.matrix_to_pose(np.full((4, 4), np.nan))
    with pytest.raises(InputError, match="zero quaternion"):
        cv.pose_to_matrix(Pose(orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=0.0)))


def test_time_round_trip() -> None:
    for s in (0.0, 1.5, 123.000000001, 1e-9):
        assert abs(cv.time_to_sec(cv.sec_to_time(s)) - s) < 1e-9
    d = cv.sec_to_duration(-0.25)
    assert (d.sec, d.nanosec) == (-1, 750_000_000)
    assert cv.time_to_sec(d) == -0.25
    with pytest.raises(InputError):
        cv.sec_to_time(-1.0)
    with pytest.raises(InputError):
        cv.sec_to_duration(math.nan)


def test_wrench_round_trip_and_nan() -> None:
    w = [1.0, -2.0, 3.0, 0.1, -0.2, 0.3]
    msg = cv.array_to_wrench_stamped(w, "tcp")
    a, frame, stamp = cv.wrench_stamped_to_array(msg)
    assert frame == "tcp" and stamp == 0.0
    np.testing.assert_array_equal(a, w)
    msg.wrench.force.y = math.nan
    with pytest.raises(InputError, match="wrench"):
        cv.wrench_to_array(msg)
    with pytest.raises(InputError, match="6 values"):
        cv.array_to_wrench([1.0, 2.0])


def test_joint_state_reorders_and_validates() -> None:
    msg = JointState(name=["c", "a", "b"], position=[3.0, 1.0, 2.0], velocity=[30.0, 10.0, 20.0])
    q, qd, tau = cv.joint_state_to_arrays(msg, NAMES)
    np.testing.assert_array_equal(q, [1, 2, 3])
    np.testing.assert_array_equal(qd, [10, 20, 30])
    assert tau is None
    back = cv.arrays_to_joint_state(NAMES, q, qd)
    assert list(back.name) == NAMES and list(back.position) == [1, 2, 3] and list(back.effort) == []
    with pytest.raises(InputError, match=r"unknown joint names \['x'\]"):
        cv.joint_state_to_arrays(JointState(name=["a", "b", "x"], position=[0.0] * 3), NAMES)
    with pytest.raises(InputError, match=r"missing joints \['c'\]"):
        cv.joint_state_to_arrays(JointState(name=["a", "b"], position=[0.0] * 2), NAMES)
    with pytest.raises(InputError, match=r"NaN or inf for \['b'\]"):
        cv.joint_state_to_arrays(JointState(name=NAMES, position=[0.0, math.nan, 0.0]), NAMES)
    with pytest.raises(InputError, match="2 values for 3 names"):
        cv.joint_state_to_dict(JointState(name=NAMES, position=[0.0, 0.0]))
    with pytest.raises(InputError, match="duplicate"):
        cv.joint_state_to_dict(JointState(name=["a", "a"], position=[0.0, 0.0]))
    partial = cv.reorder({"a": 1.0}, NAMES, partial=True)
    assert partial[0] == 1.0 and np.isnan(partial[1:]).all()


def _traj(times: list[float], pos: list[list[float]], vel: list | None = None) -> JointTrajectory:
    msg = JointTrajectory(joint_names=NAMES)
    for i, t in enumerate(times):
        p = JointTrajectoryPoint(positions=pos[i], time_from_start=cv.sec_to_duration(t))
        if vel is not None and vel[i] is not None:
            p.velocities = vel[i]
        msg.points.append(p)
    return msg


def test_trajectory_to_arrays() -> None:
    names, t, p, v, a = cv.joint_trajectory_to_arrays(_traj([0.5, 1.25], [[0, 1, 2], [3, 4, 5]]))
    assert names == NAMES and v is None and a is None
    np.testing.assert_array_equal(t, [0.5, 1.25])
    np.testing.assert_array_equal(p, [[0, 1, 2], [3, 4, 5]])
    msg = cv.arrays_to_joint_trajectory(NAMES, [0.5, 1.0], np.ones((2, 3)), velocities=np.zeros((2, 3)))
    assert cv.time_to_sec(msg.points[1].time_from_start) == 1.0
    _, _, _, v2, _ = cv.joint_trajectory_to_arrays(msg)
    assert v2.shape == (2, 3)


@pytest.mark.parametrize(
    ("msg", "text"),
    [
        (JointTrajectory(joint_names=NAMES), "points: empty"),
        (JointTrajectory(joint_names=[], points=[JointTrajectoryPoint()]), "joint_names: empty"),
        (_traj([1.0, 1.0], [[0, 0, 0], [1, 1, 1]]), r"points\[1\].time_from_start"),
        (_traj([1.0, 0.5], [[0, 0, 0], [1, 1, 1]]), "is not after"),
        (_traj([1.0], [[0, math.nan, 0]]), r"points\[0\].positions: NaN"),
        (_traj([1.0], [[0, 0]]), "2 values for 3 joints"),
        (_traj([1.0, 2.0], [[0, 0, 0], [1, 1, 1]], [[0, 0, 0], None]), "every point needs 3 values or none"),
        (_traj([1.0], [[0, 0, 0]], [[0, math.inf, 0]]), "velocities: NaN or inf"),
    ],
)
def test_trajectory_errors(msg: JointTrajectory, text: str) -> None:
    with pytest.raises(InputError, match=text):
        cv.joint_trajectory_to_arrays(msg)


def test_negative_time_rejected() -> None:
    msg = _traj([1.0], [[0, 0, 0]])
    msg.points[0].time_from_start = Duration(sec=-1, nanosec=0)
    with pytest.raises(InputError, match="negative"):
        cv.joint_trajectory_to_arrays(msg)


def test_pointcloud_round_trip_and_layout() -> None:
    rng = np.random.default_rng(1)
    pts = rng.normal(size=(5, 8))
    msg = cv.array_to_pointcloud2(pts, "world")  # the contact cloud: float64 (no rounding of positions)
    assert msg.point_step == 64 and msg.width == 5 and len(msg.data) == 320
    assert [f.name for f in msg.fields] == ["x", "y", "z", "normal_x", "normal_y", "normal_z", "depth", "stiffness"]
    assert [f.offset for f in msg.fields] == [0, 8, 16, 24, 32, 40, 48, 56]
    assert {f.datatype for f in msg.fields} == {PointField.FLOAT64}
    np.testing.assert_array_equal(cv.pointcloud2_to_array(msg), pts)
    # read independently of our reader: little-endian float64 rows
    np.testing.assert_array_equal(np.frombuffer(bytes(msg.data), "<f8").reshape(5, 8), pts)
    single = cv.array_to_pointcloud2(pts.astype(np.float32).astype(float), "world", double=False)
    assert single.point_step == 32 and [f.offset for f in single.fields] == [0, 4, 8, 12, 16, 20, 24, 28]
    np.testing.assert_array_equal(np.frombuffer(bytes(single.data), "<f4").reshape(5, 8),
                                  pts.astype(np.float32))
    empty = cv.array_to_pointcloud2(np.zeros((0, 8)), "world")
    assert cv.pointcloud2_to_array(empty).shape == (0, 8)


def test_pointcloud_foreign_layout_and_errors() -> None:
    # float64 x,y,z with padding and a different field order, as another producer might write it
    dt = np.dtype({"names": ["z", "x", "y"], "formats": ["<f8"] * 3, "offsets": [0, 8, 16], "itemsize": 32})
    rec = np.zeros(2, dtype=dt)
    rec["x"], rec["y"], rec["z"] = [1, 2], [3, 4], [5, 6]
    msg = PointCloud2(height=1, width=2, point_step=32, row_step=64, data=rec.tobytes())
    msg.fields = [
        PointField(name=n, offset=o, datatype=PointField.FLOAT64, count=1)
        for n, o in (("z", 0), ("x", 8), ("y", 16))
    ]
    np.testing.assert_array_equal(cv.pointcloud2_to_array(msg, ("x", "y", "z")), [[1, 3, 5], [2, 4, 6]])
    with pytest.raises(InputError, match="missing fields"):
        cv.pointcloud2_to_array(msg)
    msg.data = msg.data[:40]
    with pytest.raises(InputError, match="bytes of data"):
        cv.pointcloud2_to_array(msg, ("x", "y", "z"))
    with pytest.raises(InputError, match="expected shape"):
        cv.array_to_pointcloud2(np.zeros((3, 3)), "world")

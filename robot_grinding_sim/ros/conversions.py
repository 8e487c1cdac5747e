"""Pure converters between ROS messages and NumPy arrays (no node, no rclpy; message types only).

Conventions:
- Poses are 4x4 homogeneous transforms ``X_AB`` (frame B expressed in frame A), SI units.
- Quaternions are in ROS order (x, y, z, w), through ``scipy.spatial.transform.Rotation``.
- Wrenches are (6,) arrays ``[fx, fy, fz, tx, ty, tz]`` (N, N m), in the message's frame.
- Times are float seconds.

Bad input (NaN, wrong length, unknown joint names, non-monotonic trajectory times, a point cloud
without the expected fields) raises :class:`robot_grinding_sim.core.errors.InputError` naming the
message field and the problem, so a node's :func:`~robot_grinding_sim.ros.node_base.guarded`
callback logs it as a rejection and runs on.
"""

from __future__ import annotations

import array
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion, Transform, Vector3, Wrench, WrenchStamped
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState, PointCloud2, PointField
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import ROW_FIELDS

# --------------------------------------------------------------------------------------------------
# time


def time_to_sec(t: Time | Duration) -> float:
    """builtin_interfaces Time or Duration -> float seconds."""
    return float(t.sec) + 1e-9 * float(t.nanosec)


def _split_sec(seconds: float, what: str) -> tuple[int, int]:
    if not math.isfinite(seconds):
        raise InputError(f"{what}: time must be finite, got {seconds}")
    ns = round(seconds * 1e9)
    sec, nsec = divmod(ns, 1_000_000_000)
    return int(sec), int(nsec)


def sec_to_time(seconds: float) -> Time:
    """float seconds (>= 0) -> builtin_interfaces/Time."""
    if seconds < 0:
        raise InputError(f"time: must be >= 0, got {seconds}")
    sec, nsec = _split_sec(seconds, "time")
    return Time(sec=sec, nanosec=nsec)


def sec_to_duration(seconds: float) -> Duration:
    """float seconds -> builtin_interfaces/Duration (negative durations keep nanosec in [0, 1e9))."""
    sec, nsec = _split_sec(seconds, "duration")
    return Duration(sec=sec, nanosec=nsec)


# --------------------------------------------------------------------------------------------------
# poses


def _check_finite(a: np.ndarray, what: str) -> np.ndarray:
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what}: contains NaN or inf: {a.tolist()}")
    return a


def _as_transform(X: np.ndarray, what: str = "pose") -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.shape != (4, 4):
        raise InputError(f"{what}: expected a 4x4 homogeneous transform, got shape {X.shape}")
    return _check_finite(X, what)


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """3x3 rotation -> (4,) quaternion (x, y, z, w), w >= 0."""
    q = Rotation.from_matrix(np.asarray(R, dtype=float)).as_quat()
    return -q if q[3] < 0 else q


def quaternion_to_matrix(q: Sequence[float], what: str = "orientation") -> np.ndarray:
    """(x, y, z, w) -> 3x3 rotation. The quaternion is normalised; a zero or NaN one is an error."""
    q = _check_finite(np.asarray(q, dtype=float), what)
    n = float(np.linalg.norm(q))
    if n < 1e-9:
        raise InputError(f"{what}: zero quaternion")
    return Rotation.from_quat(q / n).as_matrix()


def matrix_to_pose(X: np.ndarray) -> Pose:
    """4x4 transform -> geometry_msgs/Pose."""
    X = _as_transform(X)
    x, y, z, w = matrix_to_quaternion(X[:3, :3])
    p = X[:3, 3]
    return Pose(
        position=Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
        orientation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)),
    )


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """geometry_msgs/Pose -> 4x4 transform."""
    X = np.eye(4)
    o = pose.orientation
    X[:3, :3] = quaternion_to_matrix((o.x, o.y, o.z, o.w), "pose.orientation")
    X[:3, 3] = _check_finite(np.array([pose.position.x, pose.position.y, pose.position.z]), "pose.position")
    return X


def matrix_to_pose_stamped(X: np.ndarray, frame_id: str, stamp: Time | None = None) -> PoseStamped:
    """4x4 transform of a frame in ``frame_id`` -> geometry_msgs/PoseStamped."""
    msg = PoseStamped(pose=matrix_to_pose(X))
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


def pose_stamped_to_matrix(msg: PoseStamped) -> tuple[np.ndarray, str]:
    """geometry_msgs/PoseStamped -> (4x4 transform, frame_id)."""
    return pose_to_matrix(msg.pose), msg.header.frame_id


def matrix_to_transform(X: np.ndarray) -> Transform:
    """4x4 transform -> geometry_msgs/Transform."""
    pose = matrix_to_pose(X)
    return Transform(
        translation=Vector3(x=pose.position.x, y=pose.position.y, z=pose.position.z),
        rotation=pose.orientation,
    )


def transform_to_matrix(t: Transform) -> np.ndarray:
    """geometry_msgs/Transform -> 4x4 transform."""
    X = np.eye(4)
    r = t.rotation
    X[:3, :3] = quaternion_to_matrix((r.x, r.y, r.z, r.w), "transform.rotation")
    X[:3, 3] = _check_finite(
        np.array([t.translation.x, t.translation.y, t.translation.z]), "transform.translation"
    )
    return X


# --------------------------------------------------------------------------------------------------
# wrenches


def wrench_to_array(w: Wrench | WrenchStamped) -> np.ndarray:
    """Wrench or WrenchStamped -> (6,) [force (N); torque (N m)]; NaN/inf is an InputError."""
    if isinstance(w, WrenchStamped):
        w = w.wrench
    a = np.array([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z], dtype=float)
    return _check_finite(a, "wrench")


def wrench_stamped_to_array(msg: WrenchStamped) -> tuple[np.ndarray, str, float]:
    """WrenchStamped -> ((6,) wrench, frame_id, stamp in seconds)."""
    return wrench_to_array(msg), msg.header.frame_id, time_to_sec(msg.header.stamp)


def array_to_wrench(a: Sequence[float]) -> Wrench:
    """(6,) [force; torque] -> geometry_msgs/Wrench."""
    a = np.asarray(a, dtype=float).reshape(-1)
    if a.shape != (6,):
        raise InputError(f"wrench: expected 6 values [fx fy fz tx ty tz], got {a.shape[0]}")
    w = Wrench()
    w.force.x, w.force.y, w.force.z = (float(v) for v in a[:3])
    w.torque.x, w.torque.y, w.torque.z = (float(v) for v in a[3:])
    return w


def array_to_wrench_stamped(a: Sequence[float], frame_id: str, stamp: Time | None = None) -> WrenchStamped:
    """(6,) [force; torque] in ``frame_id`` -> geometry_msgs/WrenchStamped."""
    msg = WrenchStamped(wrench=array_to_wrench(a))
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


# --------------------------------------------------------------------------------------------------
# joint states


def joint_state_to_dict(msg: JointState, field: str = "position") -> dict[str, float]:
    """JointState -> {name: value} for one field (``position``, ``velocity`` or ``effort``).

    Raises:
        InputError: the field's length differs from ``name`` (empty is allowed only for
            velocity/effort and gives {}), duplicate names, or NaN/inf values.
    """
    names = list(msg.name)
    values = list(getattr(msg, field))
    if not values and field != "position":
        return {}
    if len(values) != len(names):
        raise InputError(f"joint_state.{field}: {len(values)} values for {len(names)} names")
    if len(set(names)) != len(names):
        raise InputError(f"joint_state.name: duplicate joint names {names}")
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        bad = [n for n, v in zip(names, arr, strict=True) if not math.isfinite(v)]
        raise InputError(f"joint_state.{field}: NaN or inf for {bad}")
    return dict(zip(names, arr.tolist(), strict=True))


def reorder(
    values: Mapping[str, float], joint_names: Sequence[str], what: str = "joint_state", partial: bool = False
) -> np.ndarray:
    """{name: value} -> (n,) array in ``joint_names`` order.

    Args:
        partial: allow missing names (they become NaN); unknown names are always an error.

    Raises:
        InputError: names not in ``joint_names`` or (unless ``partial``) missing ones.
    """
    unknown = sorted(set(values) - set(joint_names))
    if unknown:
        raise InputError(f"{what}: unknown joint names {unknown} (expected {list(joint_names)})")
    missing = [n for n in joint_names if n not in values]
    if missing and not partial:
        raise InputError(f"{what}: missing joints {missing}")
    return np.array([values.get(n, math.nan) for n in joint_names], dtype=float)


def joint_state_to_arrays(
    msg: JointState, joint_names: Sequence[str]
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """JointState -> (q, qd or None, tau or None), each (n,) in ``joint_names`` order.

    The message may list the joints in any order; every joint of ``joint_names`` must be present,
    extra names are an error (use :func:`joint_state_to_dict` to pick from a larger message).
    """
    q = reorder(joint_state_to_dict(msg, "position"), joint_names, "joint_state.position")
    vel = joint_state_to_dict(msg, "velocity")
    eff = joint_state_to_dict(msg, "effort")
    qd = reorder(vel, joint_names, "joint_state.velocity") if vel else None
    tau = reorder(eff, joint_names, "joint_state.effort") if eff else None
    return q, qd, tau


def arrays_to_joint_state(
    joint_names: Sequence[str],
    position: Sequence[float],
    velocity: Sequence[float] | None = None,
    effort: Sequence[float] | None = None,
    stamp: Time | None = None,
    frame_id: str = "",
) -> JointState:
    """(n,) arrays -> sensor_msgs/JointState (velocity/effort omitted when None)."""
    n = len(joint_names)
    msg = JointState()
    msg.name = list(joint_names)
    for field, val in (("position", position), ("velocity", velocity), ("effort", effort)):
        if val is None:
            continue
        a = np.asarray(val, dtype=float).reshape(-1)
        if a.shape[0] != n:
            raise InputError(f"joint_state.{field}: {a.shape[0]} values for {n} joints")
        # array.array('d') is taken by the message setter as is; a list is checked element by element
        setattr(msg, field, array.array("d", a.tobytes()))
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


# --------------------------------------------------------------------------------------------------
# trajectories


def joint_trajectory_to_arrays(
    msg: JointTrajectory,
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """JointTrajectory -> (names, times (K,), positions (K, n), velocities (K, n) or None,
    accelerations (K, n) or None).

    Velocities/accelerations are returned only when every point has them (ros2_control's rule:
    all or none); times are ``time_from_start`` in seconds.

    Raises:
        InputError: no joint names or duplicates, no points, a point with the wrong number of
            positions, velocities/accelerations on some points only, NaN/inf, or times not
            strictly increasing / negative.
    """
    points = msg.points
    fields = ("positions", "velocities", "accelerations")
    counts = {f: [len(getattr(p, f)) for p in points] for f in fields}
    times = np.array([time_to_sec(p.time_from_start) for p in points], dtype=float)

    def values(field: str) -> np.ndarray:
        return np.array([list(getattr(p, field)) for p in points], dtype=float)

    return checked_trajectory(list(msg.joint_names), times, counts, values)


def checked_trajectory(names: list[str], times: np.ndarray, counts: dict[str, Sequence[int]],
                       values: Any) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """A JointTrajectory's parts checked (the errors of :func:`joint_trajectory_to_arrays`).

    Args:
        names: joint_names. times: (K,) time_from_start, s.
        counts: per field (``positions``, ``velocities``, ``accelerations``) each point's number of values.
        values: ``values(field)`` -> (K, n) array of a field whose counts are all n (called only then).
    """
    if not names:
        raise InputError("joint_trajectory.joint_names: empty")
    if len(set(names)) != len(names):
        raise InputError(f"joint_trajectory.joint_names: duplicates in {names}")
    k = len(times)
    if not k:
        raise InputError("joint_trajectory.points: empty")
    n = len(names)
    extra: dict[str, np.ndarray | None] = {}
    for field in ("velocities", "accelerations"):
        c = counts[field]
        if all(x == 0 for x in c):
            extra[field] = None
            continue
        if any(x != n for x in c):
            raise InputError(
                f"joint_trajectory.points[].{field}: every point needs {n} values or none (got {list(c)})"
            )
        extra[field] = values(field)
    for i, x in enumerate(counts["positions"]):
        if x != n:
            raise InputError(f"joint_trajectory.points[{i}].positions: {x} values for {n} joints")
    pos = values("positions")
    checks = [("positions", pos), *extra.items()]
    for field, arr in checks:
        if arr is not None and not np.all(np.isfinite(arr)):
            i = int(np.argwhere(~np.isfinite(arr))[0][0])
            raise InputError(f"joint_trajectory.points[{i}].{field}: NaN or inf")
    if times[0] < 0:
        raise InputError(f"joint_trajectory.points[0].time_from_start: negative ({times[0]} s)")
    if k > 1 and np.any(np.diff(times) <= 0):
        i = int(np.argwhere(np.diff(times) <= 0)[0][0]) + 1
        raise InputError(
            f"joint_trajectory.points[{i}].time_from_start: {times[i]} s is not after the previous point's "
            f"{times[i - 1]} s"
        )
    return names, times, pos, extra["velocities"], extra["accelerations"]


def arrays_to_joint_trajectory(
    joint_names: Sequence[str],
    times: Sequence[float],
    positions: np.ndarray,
    velocities: np.ndarray | None = None,
    accelerations: np.ndarray | None = None,
    frame_id: str = "",
) -> JointTrajectory:
    """(K,) times and (K, n) arrays -> trajectory_msgs/JointTrajectory (header stamp 0: start now)."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    positions = np.asarray(positions, dtype=float)
    times = np.asarray(times, dtype=float).reshape(-1)
    if positions.ndim != 2 or positions.shape != (times.shape[0], len(joint_names)):
        raise InputError(
            f"positions: expected shape ({times.shape[0]}, {len(joint_names)}), got {positions.shape}"
        )
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.header.frame_id = frame_id
    for i, t in enumerate(times):
        pt = JointTrajectoryPoint(positions=positions[i].tolist(), time_from_start=sec_to_duration(float(t)))
        if velocities is not None:
            pt.velocities = np.asarray(velocities, dtype=float)[i].tolist()
        if accelerations is not None:
            pt.accelerations = np.asarray(accelerations, dtype=float)[i].tolist()
        msg.points.append(pt)
    return msg


# --------------------------------------------------------------------------------------------------
# contact point clouds

#: Fields of the contact point cloud (/contact/points): position (m), unit normal, depth (m) and
#: the stiffness of a tool's patch (N/m; -1: the law's own; core.geometry.tool_contact.CONTACT_ROW),
#: all float64: the contact is integrated from them, and float32 positions 1 m from the base would
#: be off by 0.06 um (1 % of the force at a 5 um series compliance).
CONTACT_FIELDS = ROW_FIELDS

_NUMPY_OF_POINTFIELD = {
    PointField.INT8: np.int8,
    PointField.UINT8: np.uint8,
    PointField.INT16: np.int16,
    PointField.UINT16: np.uint16,
    PointField.INT32: np.int32,
    PointField.UINT32: np.uint32,
    PointField.FLOAT32: np.float32,
    PointField.FLOAT64: np.float64,
}


def array_to_pointcloud2(
    points: np.ndarray,
    frame_id: str,
    stamp: Time | None = None,
    fields: Sequence[str] = CONTACT_FIELDS,
    double: bool = True,
) -> PointCloud2:
    """(N, F) float array -> unordered PointCloud2 (height 1) with fields ``fields``, float64
    (``double``, the default) or float32.

    Default fields: x, y, z, normal_x, normal_y, normal_z, depth, stiffness (the contact cloud).
    """
    pts = np.asarray(points, dtype=float)
    if pts.ndim == 1 and pts.size == 0:
        pts = pts.reshape(0, len(fields))
    if pts.ndim != 2 or pts.shape[1] != len(fields):
        raise InputError(
            f"point cloud: expected shape (N, {len(fields)}) for fields {list(fields)}, got {pts.shape}"
        )
    itemsize = (8 if double else 4) * len(fields)
    msg = PointCloud2()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.height = 1
    msg.width = int(pts.shape[0])
    msg.fields = _point_fields(tuple(fields), double)
    msg.is_bigendian = False
    msg.point_step = itemsize
    msg.row_step = itemsize * msg.width
    msg.is_dense = bool(np.isfinite(pts).all()) if pts.size else True
    # packed little-endian fields in order: the rows of a C-ordered array are the points
    msg.data = np.ascontiguousarray(pts, dtype="<f8" if double else "<f4").tobytes()
    return msg


@functools.lru_cache(maxsize=16)
def _point_fields(fields: tuple[str, ...], double: bool) -> list[PointField]:
    """The PointField list of packed float64 (or float32) ``fields`` (built once: collision_node
    publishes a cloud per joint state)."""
    size, kind = (8, PointField.FLOAT64) if double else (4, PointField.FLOAT32)
    return [PointField(name=f, offset=size * j, datatype=kind, count=1) for j, f in enumerate(fields)]


def pointcloud2_to_array(msg: PointCloud2, fields: Sequence[str] = CONTACT_FIELDS) -> np.ndarray:
    """PointCloud2 -> (N, len(fields)) float64 array of the named fields (any numeric type/offset).

    Raises:
        InputError: a requested field is missing, the data size does not match width x height x
            point_step, or a field does not fit in a point.
    """
    n = int(msg.width) * int(msg.height)
    k = len(fields)
    if (not msg.is_bigendian and int(msg.point_step) == 8 * k and int(msg.row_step) == 8 * k * int(msg.width)
            and [(f.name, f.offset, f.datatype) for f in msg.fields]
            == [(f, 8 * j, PointField.FLOAT64) for j, f in enumerate(fields)]):
        # the packed float64 layout array_to_pointcloud2 writes: one view of the bytes
        raw = bytes(msg.data)
        if len(raw) == 8 * n * k:
            return np.frombuffer(raw, dtype="<f8").reshape(n, k).astype(float)
    by_name = {f.name: f for f in msg.fields}
    missing = [f for f in fields if f not in by_name]
    if missing:
        raise InputError(f"point cloud: missing fields {missing} (has {list(by_name)})")
    n = int(msg.width) * int(msg.height)
    step = int(msg.point_step)
    data = bytes(msg.data)
    if n == 0:
        return np.zeros((0, len(fields)))
    if step <= 0 or len(data) < n * step:
        raise InputError(f"point cloud: {len(data)} bytes of data for {n} points of {step} bytes")
    endian = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for f in fields:
        pf = by_name[f]
        if pf.datatype not in _NUMPY_OF_POINTFIELD:
            raise InputError(f"point cloud: field {f} has unknown datatype {pf.datatype}")
        dt = np.dtype(_NUMPY_OF_POINTFIELD[pf.datatype]).newbyteorder(endian)
        if pf.offset + dt.itemsize > step:
            raise InputError(
                f"point cloud: field {f} at offset {pf.offset} does not fit in point_step {step}"
            )
        names.append(f)
        formats.append(dt)
        offsets.append(pf.offset)
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": step})
    if msg.height > 1 and msg.row_step != msg.width * step:
        # rows may be padded: gather row by row
        rows = [
            np.frombuffer(data, dtype=dtype, count=msg.width, offset=r * int(msg.row_step))
            for r in range(int(msg.height))
        ]
        rec = np.concatenate(rows)
    else:
        rec = np.frombuffer(data, dtype=dtype, count=n)
    return np.stack([rec[f].astype(float) for f in fields], axis=1)


# --------------------------------------------------------------------------------------------------
# the contact model exchanged by the contact side and the arm side

#: label of the one dimension of contact/model (std_msgs/Float64MultiArray)
CONTACT_MODEL_LABEL = "normal_contact_model"


def contact_model_to_msg(rom: Any, t: float) -> Float64MultiArray:
    """The contact model (a :class:`~robot_grinding_sim.core.sim.coupled_step.NormalContactModel`,
    or None: nothing near the tool at sim time ``t``) as contact/model's Float64MultiArray."""
    data = rom.to_array() if rom is not None else np.array([float(t)])
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=CONTACT_MODEL_LABEL, size=int(data.size), stride=int(data.size))]
    msg.data = data.tolist()
    return msg


def msg_to_contact_model(msg: Float64MultiArray) -> tuple[float, Any]:
    """contact/model -> (sim time t of the state, NormalContactModel or None when nothing is near).

    Raises:
        InputError: a malformed message (length, NaN, law id, normal), naming the problem.
    """
    return contact_model_from_array(np.asarray(msg.data, dtype=float))


def contact_model_from_array(data: np.ndarray) -> tuple[float, Any]:
    """contact/model's data (the message's ``data``) -> (t, NormalContactModel or None): see
    :func:`msg_to_contact_model`."""
    from robot_grinding_sim.core.sim.coupled_step import NormalContactModel

    if data.size == 1:
        if not math.isfinite(float(data[0])):
            raise InputError(f"contact/model: time is {data[0]}")
        return float(data[0]), None
    rom = NormalContactModel.from_array(data)
    return rom.t, rom


def depth_colors(depth: np.ndarray) -> np.ndarray:
    """(M,) depths -> (M, 3) rgb in [0, 1]: black at 0, through red and yellow to white at the largest."""
    top = float(np.max(depth)) if len(depth) else 0.0
    x = np.clip(np.asarray(depth, dtype=float) / (top or 1.0), 0.0, 1.0)
    return np.column_stack([np.clip(3 * x, 0, 1), np.clip(3 * x - 1, 0, 1), np.clip(3 * x - 2, 0, 1)])


def removal_to_marker_array(vertices: np.ndarray, triangles: np.ndarray, depth: np.ndarray, frame_id: str,
                            stamp: Time | None = None, ns: str = "removal") -> Any:
    """A removal map's display mesh -> visualization_msgs/MarkerArray with one TRIANGLE_LIST marker,
    vertex-coloured by depth (black at 0, through red and yellow to white at the largest), positions
    as given, frame ``frame_id``. Empty mesh: a DELETE."""
    from std_msgs.msg import ColorRGBA
    from visualization_msgs.msg import Marker, MarkerArray

    m = Marker()
    m.header.frame_id = frame_id
    if stamp is not None:
        m.header.stamp = stamp
    m.ns, m.id = ns, 0
    m.pose.orientation.w = 1.0
    if len(triangles) == 0:
        m.action = Marker.DELETE
        return MarkerArray(markers=[m])
    m.type, m.action = Marker.TRIANGLE_LIST, Marker.ADD
    m.scale.x = m.scale.y = m.scale.z = 1.0
    m.color.a = 1.0
    rgb = depth_colors(depth)
    idx = np.asarray(triangles, dtype=np.int64).ravel()
    V = np.asarray(vertices, dtype=float)[idx]
    C = rgb[idx]
    m.points = [Point(x=float(a), y=float(b), z=float(c)) for a, b, c in V]
    m.colors = [ColorRGBA(r=float(r), g=float(g), b=float(b), a=1.0) for r, g, b in C]
    return MarkerArray(markers=[m])

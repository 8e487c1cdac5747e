"""The robot's transform tree for viewers: ``/tf`` and ``/tf_static`` (tf2_msgs/msg/TFMessage)
computed from joint positions and the URDF, serialized through the ``rosbags`` type store; ROS-free.

What robot_state_publisher publishes on a ROS install, computed where it does not run (the pip
path has neither robot_state_publisher nor the tf2_msgs package; ``rosbags``' type store knows
TFMessage, so bags carry it all the same):

- ``/tf_static``: one TransformStamped per fixed joint of the URDF (frame_id the parent link,
  child_frame_id the child link, the joint's origin), plus extra static frames (the in-process job
  and the recorder add ``base_link -> workpiece``, the part's pose); written once, with the stamp
  of the first joint state.
- ``/tf``: one TransformStamped per moving joint (revolute, continuous, prismatic; a moving joint
  off the kinematic chain is held at 0, as the dynamics hold it): the child link's pose in the
  parent link's frame at the joint positions, stamped with the joint state's stamp, at most
  ``rate`` Hz of stamp time (robot_state_publisher publishes every joint state; 100 Hz is plenty
  for a viewer and keeps a 1 kHz bag small).

Poses come from :meth:`RobotModel.link_poses
<robot_grinding_sim.core.robot.dynamics.RobotModel.link_poses>` (the dynamics' FK), as
T_parent_child = T_root_parent^-1 T_root_child. Translations in m; quaternions in ROS order
(x, y, z, w).
"""

from __future__ import annotations

import math
import struct
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
TF_TYPE = "tf2_msgs/msg/TFMessage"
JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
#: /tf rate of the in-process job's bag and the recorder's default, Hz of stamp time
DEFAULT_TF_RATE = 100.0
#: URDF joint types that move (published on /tf); every other type (fixed) goes to /tf_static
MOVING_JOINTS = ("revolute", "continuous", "prismatic")

#: (parent frame, child frame, (4, 4) pose of the child frame in the parent frame, m)
Transform = tuple[str, str, FloatArray]


@dataclass(frozen=True)
class UrdfJoint:
    """One ``<joint>`` of a URDF: its name, type and the links it connects."""

    name: str
    kind: str
    parent: str
    child: str


def urdf_joints(urdf: str | bytes) -> list[UrdfJoint]:
    """The joints of URDF text, in file order.

    Raises:
        InputError: not XML, or a joint without name, type, parent or child.
    """
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise InputError(f"robot description: not well-formed XML: {exc}") from None
    out = []
    for j in root.findall("joint"):  # the robot's joints, not those named inside <transmission>
        parent, child = j.find("parent"), j.find("child")
        name, kind = j.get("name"), j.get("type")
        if name is None or kind is None or parent is None or child is None:
            raise InputError(f"robot description: joint {name!r} lacks a name, type, parent or child")
        out.append(UrdfJoint(name, kind, str(parent.get("link")), str(child.get("link"))))
    return out


def relative(T_a: FloatArray, T_b: FloatArray) -> FloatArray:
    """Pose (4, 4) of frame b in frame a, both given in a common frame (or (B, 4, 4) for
    batches of poses)."""
    Rt = np.swapaxes(T_a[..., :3, :3], -1, -2)
    out = np.zeros(T_a.shape)
    out[..., :3, :3] = Rt @ T_b[..., :3, :3]
    out[..., :3, 3] = (Rt @ (T_b[..., :3, 3] - T_a[..., :3, 3])[..., None])[..., 0]
    out[..., 3, 3] = 1.0
    return out


class RobotTf:
    """The URDF's transform tree split as robot_state_publisher splits it (module docstring).

    Args:
        model: the :class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` of ``urdf``.
        urdf: the URDF text the model was loaded from (its joint tree: parents and types).
        extra_static: further static transforms, e.g. ``("base_link", "workpiece", X_BP)``.

    Raises:
        InputError: the URDF names a link the model does not know.
    """

    def __init__(self, model: Any, urdf: str | bytes, extra_static: Iterable[Transform] = ()) -> None:
        self.model = model
        joints = urdf_joints(urdf)
        known = set(model.link_names)
        for j in joints:
            if j.parent not in known or j.child not in known:
                raise InputError(f"robot description: joint {j.name!r} connects links the robot model lacks "
                                 f"({j.parent!r}, {j.child!r})")
        self.moving = [j for j in joints if j.kind in MOVING_JOINTS]
        fixed = [j for j in joints if j.kind not in MOVING_JOINTS]
        q0 = np.clip(np.zeros(model.nq), model.lower, model.upper)
        poses = model.link_poses(q0)  # a fixed joint's transform does not depend on q
        self.static: list[Transform] = [(j.parent, j.child, relative(poses[j.parent], poses[j.child]))
                                        for j in fixed]
        self.static += [(p, c, np.asarray(X, dtype=float).reshape(4, 4)) for p, c, X in extra_static]
        self.index = {name: k for k, name in enumerate(model.joint_names)}

    def transforms(self, q: FloatArray) -> list[Transform]:
        """The moving joints' transforms at joint positions ``q`` (nq,), rad or m."""
        P = self.model.link_poses(np.asarray(q, dtype=float))
        return [(j.parent, j.child, relative(P[j.parent], P[j.child])) for j in self.moving]

    def transforms_many(self, q: FloatArray) -> FloatArray:
        """The moving joints' transforms (B, J, 4, 4) at joint positions ``q`` (B, nq), in the
        order of :attr:`moving`."""
        P = self.model.link_poses(np.asarray(q, dtype=float).reshape(-1, self.model.nq))
        return np.stack([relative(P[j.parent], P[j.child]) for j in self.moving], axis=1)

    def positions(self, names: Sequence[str], values: Sequence[float]) -> FloatArray | None:
        """The model's q (nq,) from a joint state's names and positions (any order, extra joints
        ignored); None when one of the model's joints is missing or not finite."""
        if len(values) != len(names):
            return None
        q = np.full(self.model.nq, np.nan)
        for name, v in zip(names, values, strict=True):
            k = self.index.get(name)
            if k is not None:
                q[k] = v
        return q if np.all(np.isfinite(q)) else None


def tf_message(typestore: Any, transforms: Iterable[Transform], stamp_ns: int) -> Any:
    """A ``rosbags`` tf2_msgs/msg/TFMessage of ``transforms``, every one stamped ``stamp_ns`` (ns)."""
    T = typestore.types
    Header, Time = T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    TS, Tr = T["geometry_msgs/msg/TransformStamped"], T["geometry_msgs/msg/Transform"]
    V3, Quat = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    stamp = Time(sec=int(stamp_ns // 1_000_000_000), nanosec=int(stamp_ns % 1_000_000_000))
    transforms = list(transforms)
    quats = Rotation.from_matrix(np.array([X[:3, :3] for _, _, X in transforms])).as_quat() if transforms else []
    out = []
    for (parent, child, X), (x, y, z, w) in zip(transforms, quats, strict=True):
        p = X[:3, 3]
        out.append(TS(header=Header(stamp=stamp, frame_id=parent), child_frame_id=child, transform=Tr(
            translation=V3(x=float(p[0]), y=float(p[1]), z=float(p[2])),
            rotation=Quat(x=float(x), y=float(y), z=float(z), w=float(w)))))
    return T[TF_TYPE](transforms=out)


class TfStream:
    """``/tf_static`` once and ``/tf`` at most ``rate`` Hz from a stream of joint states.

    Used by the in-process job's bag (:meth:`add`, joint positions as arrays) and by the recorder
    (:meth:`add_cdr`, the serialized sensor_msgs/JointState it received).

    Args:
        robot_tf: the tree. typestore: the bag's ``rosbags`` type store.
        rate: largest /tf rate, Hz of the joint states' stamps; 0: every joint state.
    """

    def __init__(self, robot_tf: RobotTf, typestore: Any, rate: float = DEFAULT_TF_RATE) -> None:
        if not (math.isfinite(rate) and rate >= 0.0):
            raise InputError(f"tf rate must be >= 0 Hz, got {rate}")
        self.tf = robot_tf
        self.typestore = typestore
        self.period_ns = int(round(1e9 / rate)) if rate > 0 else 0
        self.static_sent = False
        self.last_ns: int | None = None
        self.count = 0  # messages made
        self._layout: Any = None  # the /tf message's CDR layout (cdr_batch), made on first use

    def due(self, stamp_ns: int) -> bool:
        """Whether a joint state stamped ``stamp_ns`` makes a message: the first one (/tf_static),
        then /tf once per period (1 ppm early counts as on time: stamps are rounded to ns)."""
        return not self.static_sent or self._tf_due(stamp_ns)

    def _tf_due(self, stamp_ns: int) -> bool:
        last = self.last_ns
        return last is None or (stamp_ns > last and stamp_ns - last >= self.period_ns - self.period_ns // 1_000_000)

    def add(self, stamp_ns: int, q: FloatArray) -> list[tuple[str, bytes]]:
        """(topic, CDR bytes) to write for a joint state stamped ``stamp_ns`` with positions ``q``
        (nq,): ``/tf_static`` for the first one, ``/tf`` when one is due (never for a stamp that
        does not advance). The bytes are :meth:`add_many`'s for a block of one."""
        static, idx, rows = self.add_many([stamp_ns], np.asarray(q, dtype=float).reshape(1, -1))
        out = [] if static is None else [(TF_STATIC_TOPIC, static)]
        return out + [(TF_TOPIC, rows[0].tobytes())] if len(idx) else out

    def add_many(self, stamps_ns: Any, q: FloatArray) -> tuple[bytes | None, np.ndarray, np.ndarray]:
        """:meth:`add` for a block of joint states (stamps (N,) ns, positions (N, nq)) at once:
        (the ``/tf_static`` bytes or None, the indices of the states that make a ``/tf``
        message, their CDR bytes (M, size) uint8, :mod:`~robot_grinding_sim.core.record.cdr_batch`)."""
        from robot_grinding_sim.core.record import cdr_batch

        stamps = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
        static = None
        if len(stamps) and not self.static_sent:
            self.static_sent = True
            static = self.serialize(tf_message(self.typestore, self.tf.static, int(stamps[0])))
            self.count += 1
        due = []
        for k, ns in enumerate(stamps.tolist()):
            if self._tf_due(ns):
                self.last_ns = ns
                due.append(k)
        idx = np.asarray(due, dtype=np.int64)
        if self._layout is None:
            self._layout = cdr_batch.tf_message([(j.parent, j.child) for j in self.tf.moving])
        layout = self._layout
        if not len(idx):
            return static, idx, np.zeros((0, layout.size), dtype=np.uint8)
        X = self.tf.transforms_many(np.asarray(q, dtype=float)[idx]).reshape(-1, 4, 4)
        quats = Rotation.from_matrix(X[:, :3, :3]).as_quat()
        values = np.hstack([X[:, :3, 3], quats]).reshape(len(idx), 7 * len(self.tf.moving))
        self.count += len(idx)
        return static, idx, layout.pack(stamps[idx], values)

    def add_cdr(self, data: bytes | memoryview) -> list[tuple[str, bytes]]:
        """Like :meth:`add` for a serialized sensor_msgs/msg/JointState (its header stamp and
        positions); nothing for a joint state that lacks one of the model's joints. Only a due
        message is deserialized (the stamp is read from the CDR header)."""
        stamp = cdr_header_stamp(data)
        if stamp is not None and not self.due(stamp):
            return []
        js = self.typestore.deserialize_cdr(bytes(data), JOINT_STATE_TYPE)
        q = self.tf.positions(list(js.name), np.asarray(js.position, dtype=float))
        if q is None:
            return []
        return self.add(int(js.header.stamp.sec) * 1_000_000_000 + int(js.header.stamp.nanosec), q)

    def serialize(self, msg: Any) -> bytes:
        return bytes(self.typestore.serialize_cdr(msg, TF_TYPE))


def cdr_header_stamp(data: bytes | memoryview) -> int | None:
    """The ``header.stamp`` (ns) of a serialized message whose first field is a std_msgs/Header
    (CDR: 4-byte encapsulation, then int32 sec, uint32 nanosec); None if it cannot be read."""
    if len(data) < 12 or data[0] != 0 or data[1] not in (0, 1):
        return None
    sec, nsec = struct.unpack("<iI" if data[1] == 1 else ">iI", bytes(data[4:12]))
    return sec * 1_000_000_000 + nsec


def static_pose(pose: Sequence[float]) -> FloatArray:
    """(4, 4) from x y z roll pitch yaw (m, rad; fixed axes XYZ), as ``workpiece.pose`` is given."""
    a = np.asarray(pose, dtype=float)
    if a.shape != (6,) or not np.all(np.isfinite(a)):
        raise InputError(f"pose: expected x y z roll pitch yaw (6 finite numbers), got {a.tolist()}")
    X = np.eye(4)
    X[:3, :3] = Rotation.from_euler("xyz", a[3:]).as_matrix()
    X[:3, 3] = a[:3]
    return X


def add_tf_topics(bag: Any) -> None:
    """Register ``/tf`` and ``/tf_static`` in a :class:`~robot_grinding_sim.core.record.bagwriter.BagWriter`
    with the QoS tf2 uses (/tf_static transient local, so ``ros2 bag play`` latches it)."""
    from robot_grinding_sim.core.record.bagwriter import TopicQos

    if not bag.has_topic(TF_TOPIC):
        bag.add_topic(TF_TOPIC, TF_TYPE, qos=[TopicQos(reliable=True, transient_local=False, depth=100)])
    if not bag.has_topic(TF_STATIC_TOPIC):
        bag.add_topic(TF_STATIC_TOPIC, TF_TYPE, qos=[TopicQos(reliable=True, transient_local=True, depth=1)])

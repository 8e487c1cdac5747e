"""The 1 kHz messages of the lockstep loop as CDR bytes: read and written without message objects.

At 1 ms steps every node of the loop handles a message per step (joint_states, contact/points,
contact/model). rclpy turns each into Python objects (a string per joint name, a PointField per
field, a list per array) and back: with the EventsExecutor that conversion, not DDS, was most of a
node's work per step. The nodes therefore subscribe with ``raw=True`` and publish bytes for these
topics; the bytes are the standard messages (sensor_msgs/JointState, sensor_msgs/PointCloud2,
std_msgs/Float64MultiArray, geometry_msgs/WrenchStamped), so any ROS node, bag or tool reads them
as usual, and whatever a publisher sends (any joint order, any point layout, padding) is read:
a message this module does not take apart on its fast path is deserialized by rclpy and read by
:mod:`robot_grinding_sim.ros.conversions`, with the same errors.

CDR layout (XCDR1, little endian, as :mod:`robot_grinding_sim.core.record.cdr_batch` writes it):
a 4-byte encapsulation header, then every primitive aligned to its size counted from the end of
that header; a string is a uint32 length (with its NUL) and the bytes; a sequence a uint32 count
and its elements.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from numpy.typing import NDArray
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState, PointCloud2
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record import cdr_batch
from robot_grinding_sim.ros import conversions as cv

FloatArray = NDArray[np.float64]

#: history depth of the package's publishers of 1 kHz streams (joint_states, contact/wrench,
#: contact/model, ft_sensor/wrench, grinding/progress, the driver's wrenches): one second of samples.
#: Fast DDS's shared-memory transport hands readers the writer's own buffers, so the writer's depth
#: is a subscriber's slack: at 50 (50 ms) a recorder descheduled on a loaded machine lost 23-232 of
#: 600,000 samples in 10 min (bench/bench_recorder.py); it costs memory only (a reliable KEEP_LAST
#: writer never blocks)
STREAM_DEPTH = 1000

_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")
LITTLE_ENDIAN_CDR = (b"\x00\x01", b"\x00\x03")  # CDR_LE, PL_CDR_LE encapsulation ids


class MessageBytes:
    """One fixed-layout message (a :class:`~robot_grinding_sim.core.record.cdr_batch.CdrLayout`)
    written from a stamp (ns) and its float64 values: the template's bytes with the slots filled."""

    def __init__(self, layout: cdr_batch.CdrLayout) -> None:
        self.template = bytes(cdr_batch.ENCAPSULATION + layout.buf)
        base = len(cdr_batch.ENCAPSULATION)
        self.stamps = [base + off for off in layout.stamps]
        self.floats = [(base + off, n) for off, n in layout.floats]
        self.n_floats = layout.n_floats

    def encode(self, stamp_ns: int, values: Sequence[float] | FloatArray) -> bytes:
        """The message with stamp ``stamp_ns`` and ``values`` (n_floats,) in its float64 slots."""
        buf = bytearray(self.template)
        sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
        for off in self.stamps:
            _STAMP.pack_into(buf, off, sec, nsec)
        data = np.ascontiguousarray(values, dtype="<f8").reshape(-1)
        if data.shape[0] != self.n_floats:
            raise InputError(f"message: {self.n_floats} values expected, got {data.shape[0]}")
        raw = data.tobytes()
        col = 0
        for off, n in self.floats:
            buf[off:off + 8 * n] = raw[8 * col:8 * (col + n)]
            col += n
        return bytes(buf)


def stamp_ns(seconds: float) -> int:
    """A time in s as integer ns (what a builtin_interfaces/Time holds)."""
    return int(round(seconds * 1e9))


def time_msg(ns: int) -> Time:
    """Integer ns -> builtin_interfaces/Time."""
    sec, nsec = divmod(int(ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nsec)


def _check_encapsulation(data: bytes, what: str) -> None:
    if len(data) < 12 or data[:2] not in LITTLE_ENDIAN_CDR:
        raise InputError(f"{what}: not a little-endian CDR message ({len(data)} bytes)")


def _string_end(data: bytes, off: int) -> int:
    """Offset just past the CDR string at ``off`` (4-aligned already)."""
    (n,) = _U32.unpack_from(data, off)
    return off + 4 + n


def _align(off: int, n: int) -> int:
    # offsets count from the end of the 4-byte encapsulation header
    return off + (-(off - 4) % n)


class JointStateReader:
    """sensor_msgs/JointState bytes -> (stamp ns, position, velocity) in a fixed joint order.

    The names (any order, extra joints ignored) are matched once per distinct name list: the
    bytes from the frame id to the end of the names are compared with the last message's.

    Args:
        joint_names: the joints wanted, in the order of the arrays returned.
        what: the topic, for error messages.
    """

    def __init__(self, joint_names: Sequence[str], what: str = "joint_states") -> None:
        self.joint_names = list(joint_names)
        self.what = what
        self._key = b""
        self._index: NDArray[np.intp] | None = None
        self._n = 0

    def read(self, data: bytes, need_velocity: bool = False) -> tuple[int, FloatArray, FloatArray | None]:
        """(stamp ns, q (n,), qd (n,) or None when the message has no velocities).

        Raises:
            InputError: missing joints, NaN/inf, mismatched lengths, duplicate names, not CDR.
        """
        _check_encapsulation(data, self.what)
        sec, nsec = _STAMP.unpack_from(data, 4)
        names_start = 12
        key = self._key
        if key and data[names_start:names_start + len(key)] == key:
            p = names_start + len(key)  # the frame id and names of the last message: matched
        else:
            off = _align(_string_end(data, names_start), 4)  # past frame_id
            (count,) = _U32.unpack_from(data, off)
            p = off + 4
            for _ in range(count):
                p = _align(_string_end(data, p), 4)
            self._match(data, off, count)
            self._key = bytes(data[names_start:p])
        arrays = []
        off = p
        for _field in range(2 if need_velocity else 1):
            off = _align(off, 4)
            (k,) = _U32.unpack_from(data, off)
            off = _align(off + 4, 8)
            arrays.append((k, off))
            off += 8 * k
        k, o = arrays[0]
        if k != self._n:
            raise InputError(f"joint_state.position: {k} values for {self._n} names")
        q = np.frombuffer(data, "<f8", count=k, offset=o)[self._index]
        if not np.isfinite(q).all():
            raise InputError(f"joint_state.position: NaN or inf for {self._bad(q)}")
        qd = None
        if need_velocity:
            k, o = arrays[1]
            if k:
                if k != self._n:
                    raise InputError(f"joint_state.velocity: {k} values for {self._n} names")
                qd = np.frombuffer(data, "<f8", count=k, offset=o)[self._index]
                if not np.isfinite(qd).all():
                    raise InputError(f"joint_state.velocity: NaN or inf for {self._bad(qd)}")
        return sec * 1_000_000_000 + nsec, q, qd

    def _bad(self, values: FloatArray) -> list[str]:
        return [j for j, v in zip(self.joint_names, values.tolist(), strict=True) if not math.isfinite(v)]

    def _match(self, data: bytes, off: int, count: int) -> None:
        names = []
        p = off + 4
        for _ in range(count):
            (n,) = _U32.unpack_from(data, p)
            names.append(bytes(data[p + 4:p + 3 + n]).decode(errors="replace"))
            p = _align(p + 4 + n, 4)
        if len(set(names)) != len(names):
            raise InputError(f"joint_state.name: duplicate joint names {names}")
        where = {name: i for i, name in enumerate(names)}
        missing = [j for j in self.joint_names if j not in where]
        if missing:
            raise InputError(f"{self.what}: missing joints {missing} (expected {self.joint_names})")
        self._index = np.array([where[j] for j in self.joint_names], dtype=np.intp)
        self._n = count


def joint_state_bytes(names: Sequence[str], frame_id: str = "") -> MessageBytes:
    """A JointState writer for ``names``: values position, velocity, effort (3 n)."""
    return MessageBytes(cdr_batch.joint_state(names, frame_id))


def wrench_stamped_bytes(frame_id: str) -> MessageBytes:
    """A WrenchStamped writer in ``frame_id``: values force xyz, torque xyz."""
    return MessageBytes(cdr_batch.wrench_stamped(frame_id))


def float64_array_reader(data: bytes, what: str) -> FloatArray:
    """std_msgs/Float64MultiArray bytes -> its data (any layout; dimensions are skipped)."""
    _check_encapsulation(data, what)
    (ndim,) = _U32.unpack_from(data, 4)
    off = 8
    for _ in range(ndim):
        off = _align(_string_end(data, off), 4) + 8  # label, size, stride
    off += 4  # data_offset
    (k,) = _U32.unpack_from(data, off)
    off = _align(off + 4, 8)
    if off + 8 * k > len(data):
        raise InputError(f"{what}: {k} values announced in a message of {len(data)} bytes")
    return np.frombuffer(data, "<f8", count=k, offset=off).copy()


class ContactModelWriter:
    """contact/model (std_msgs/Float64MultiArray, one dimension labelled
    :data:`~robot_grinding_sim.ros.conversions.CONTACT_MODEL_LABEL`) from the model's array."""

    def __init__(self) -> None:
        self._by_count: dict[int, MessageBytes] = {}

    def encode(self, data: FloatArray) -> bytes:
        n = int(data.shape[0])
        writer = self._by_count.get(n)
        if writer is None:
            lay = cdr_batch.CdrLayout().u32(1).string(cv.CONTACT_MODEL_LABEL).u32(n).u32(n).u32(0).f64_sequence(n)
            writer = self._by_count[n] = MessageBytes(lay)
        return writer.encode(0, data)


def contact_model_bytes(writer: ContactModelWriter, rom: Any, t: float) -> bytes:
    """:func:`~robot_grinding_sim.ros.conversions.contact_model_to_msg` as bytes."""
    return writer.encode(rom.to_array() if rom is not None else np.array([float(t)]))


def contact_model_from_bytes(data: bytes) -> tuple[float, Any]:
    """:func:`~robot_grinding_sim.ros.conversions.msg_to_contact_model` from bytes."""
    return cv.contact_model_from_array(float64_array_reader(data, "contact/model"))


class PointCloudWriter:
    """contact/points (sensor_msgs/PointCloud2 with the packed float64 ``fields``, height 1) in
    ``frame_id``: :func:`~robot_grinding_sim.ros.conversions.array_to_pointcloud2` as bytes."""

    def __init__(self, frame_id: str, fields: Sequence[str] = cv.CONTACT_FIELDS) -> None:
        self.k = len(fields)
        lay = cdr_batch.CdrLayout().header(frame_id).u32(1)  # header, height
        self.head = bytes(cdr_batch.ENCAPSULATION + lay.buf)
        self.stamp_off = len(cdr_batch.ENCAPSULATION) + lay.stamps[0]
        # after the width: the fields (name, offset, datatype uint8, count), is_bigendian,
        # point_step; they start 4-aligned (the head ends with a uint32), so their bytes are fixed
        fl = cdr_batch.CdrLayout().u32(self.k)
        for j, name in enumerate(fields):
            fl.string(name).u32(8 * j)
            fl.buf += bytes([8])  # PointField.FLOAT64
            fl.u32(1)
        fl.buf += b"\x00"  # is_bigendian
        fl.u32(8 * self.k)
        self.fields = bytes(fl.buf)

    def encode(self, stamp: int, rows: FloatArray) -> bytes:
        """rows (N, k) float -> the message bytes; ``stamp`` in ns."""
        pts = np.ascontiguousarray(rows, dtype="<f8")
        if pts.ndim != 2 or pts.shape[1] != self.k:
            raise InputError(f"point cloud: expected shape (N, {self.k}), got {pts.shape}")
        n = pts.shape[0]
        head = bytearray(self.head)
        sec, nsec = divmod(int(stamp), 1_000_000_000)
        _STAMP.pack_into(head, self.stamp_off, sec, nsec)
        data = pts.tobytes()
        dense = b"\x01" if np.isfinite(pts).all() else b"\x00"
        return b"".join((head, _U32.pack(n), self.fields, _U32.pack(8 * self.k * n), _U32.pack(len(data)), data,
                         dense))


def pointcloud_from_bytes(data: bytes, what: str = "contact/points") -> tuple[str, int, FloatArray]:
    """contact/points bytes -> (frame_id, stamp ns, rows (N, 8)) through rclpy and
    :func:`~robot_grinding_sim.ros.conversions.pointcloud2_to_array` (any point layout)."""
    msg = deserialize_message(data, PointCloud2)
    rows = cv.pointcloud2_to_array(msg)
    return msg.header.frame_id, int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec), rows


class PointCloudReader:
    """contact/points bytes -> (frame_id, stamp ns, rows (N, k)): the layout
    :class:`PointCloudWriter` writes is read in place; any other goes through rclpy."""

    def __init__(self, frame_id: str, fields: Sequence[str] = cv.CONTACT_FIELDS) -> None:
        self.writer = PointCloudWriter(frame_id, fields)
        self.k = len(fields)
        self.frame_id = frame_id

    def read(self, data: bytes) -> tuple[str, int, FloatArray]:
        w = self.writer
        h = len(w.head)
        if (len(data) > h + 4 + len(w.fields) + 8 and data[:2] in LITTLE_ENDIAN_CDR
                and data[12:h] == w.head[12:] and data[h + 4:h + 4 + len(w.fields)] == w.fields):
            (n,) = _U32.unpack_from(data, h)
            off = h + 4 + len(w.fields) + 4
            (size,) = _U32.unpack_from(data, off)
            if size == 8 * self.k * n and len(data) >= off + 4 + size:
                sec, nsec = _STAMP.unpack_from(data, 4)
                rows = np.frombuffer(data, "<f8", count=n * self.k, offset=off + 4).reshape(n, self.k)
                return self.frame_id, sec * 1_000_000_000 + nsec, rows
        return pointcloud_from_bytes(data)


def joint_state_from_bytes(data: bytes) -> JointState:
    """JointState bytes as a message (for the paths that are not hot)."""
    return deserialize_message(data, JointState)


class _Writer:
    """A CDR buffer built field by field (offsets count from the end of the encapsulation)."""

    def __init__(self) -> None:
        self.buf = bytearray(cdr_batch.ENCAPSULATION)

    def align(self, n: int) -> None:
        self.buf += bytes(-(len(self.buf) - 4) % n)

    def pack(self, fmt: str, *values: Any, align: int) -> None:
        self.align(align)
        self.buf += struct.pack("<" + fmt, *values)

    def string(self, text: str) -> None:
        data = text.encode() + b"\x00"
        self.pack("I", len(data), align=4)
        self.buf += data


def triangle_marker_bytes(vertices: FloatArray, triangles: NDArray[np.int64], rgb: FloatArray, frame_id: str,
                          stamp: int, ns: str) -> bytes:
    """A visualization_msgs/MarkerArray of one vertex-coloured TRIANGLE_LIST (id 0 in ``ns``,
    frame ``frame_id``, stamp ns) as bytes: a removal map's mesh of 10^5 triangles is 0.5 s of
    Python objects through rclpy and a few ms here.

    Args:
        vertices: (M, 3) m; triangles: (T, 3) vertex indices; rgb: (M, 3) vertex colours in [0, 1].
    """
    idx = np.asarray(triangles, dtype=np.int64).ravel()
    n = len(idx)
    w = _Writer()
    w.pack("I", 1, align=4)  # one marker
    sec, nsec = divmod(int(stamp), 1_000_000_000)
    w.pack("iI", sec, nsec, align=4)
    w.string(frame_id)
    w.string(ns)
    w.pack("iii", 0, Marker.TRIANGLE_LIST, Marker.ADD, align=4)
    w.pack("7d", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, align=8)  # pose
    w.pack("3d", 1.0, 1.0, 1.0, align=8)  # scale
    w.pack("4f", 0.0, 0.0, 0.0, 1.0, align=4)  # color (the vertices' colours are used)
    w.pack("iI", 0, 0, align=4)  # lifetime: forever
    w.buf += b"\x00"  # frame_locked
    w.pack("I", n, align=4)
    if n:
        w.align(8)
        w.buf += np.ascontiguousarray(np.asarray(vertices, dtype="<f8")[idx]).tobytes()
    w.pack("I", n, align=4)
    if n:
        col = np.ones((n, 4), dtype="<f4")
        col[:, :3] = np.asarray(rgb, dtype=float)[idx]
        w.buf += col.tobytes()
    w.buf += _marker_tail()
    return bytes(w.buf)


@functools.lru_cache(maxsize=1)
def _marker_tail() -> bytes:
    """A Marker's fields after ``colors`` (texture, uv coordinates, text, mesh), all empty: taken
    from rclpy's bytes of an empty marker (their alignment is at most 4, and ``colors`` ends
    4-aligned, so they are the same bytes after any number of points)."""
    empty = serialize_message(MarkerArray(markers=[Marker()]))
    w = _Writer()
    w.pack("I", 1, align=4)
    w.pack("iI", 0, 0, align=4)
    w.string("")
    w.string("")
    w.pack("iii", 0, 0, 0, align=4)
    w.pack("7d", *([0.0] * 7), align=8)
    w.pack("3d", 0.0, 0.0, 0.0, align=8)
    w.pack("4f", 0.0, 0.0, 0.0, 0.0, align=4)
    w.pack("iI", 0, 0, align=4)
    w.buf += b"\x00"
    w.align(4)
    return empty[len(w.buf) + 8:]  # past the (empty) points and colors counts

"""trajectory_msgs/JointTrajectory as CDR bytes, written and read without message objects.

A job's command is one JointTrajectory of ~16,000 points (the default plan). rclpy builds a
JointTrajectoryPoint object with four lists per point: 180 ms to build it in the executive, 56 ms
to serialize, and 190 ms to deserialize in the node that takes it (dynamics_node, the hardware
driver): time the lockstep loop stands still when a job starts. Here the points are walked by
compiled loops over the buffer; the bytes are the standard message's (the tests compare them with
rclpy's serialization byte for byte and read rclpy-written messages), and the arrays come out with
the checks and errors of :func:`robot_grinding_sim.ros.conversions.joint_trajectory_to_arrays`.

CDR layout (XCDR1, little endian; alignment counted from the end of the 4-byte encapsulation
header): header (stamp int32 sec, uint32 nanosec; frame_id string), joint_names (uint32 count,
strings), points (uint32 count; per point positions, velocities, accelerations, effort: each a
uint32 count and, when not empty, float64 values aligned to 8; time_from_start int32 sec, uint32
nanosec). Every 4-byte field then sits at a multiple of 4 in the buffer and every float64 at 4 + a
multiple of 8, so the loops index a uint32 view of the buffer and a float64 view from byte 4.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from numba import njit
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros.conversions import checked_trajectory

FloatArray = NDArray[np.float64]

ENCAPSULATION = b"\x00\x01\x00\x00"
FIELDS = ("positions", "velocities", "accelerations", "effort")


def _pad4(buf: bytearray) -> None:
    buf += b"\x00" * (-(len(buf) - 4) % 4)


@njit(cache=True)
def write_points(u32: NDArray[np.uint32], f64: FloatArray, off: int, sec: NDArray[np.int64],
                 nsec: NDArray[np.int64], pos: FloatArray, vel: FloatArray, acc: FloatArray, has_vel: bool,
                 has_acc: bool) -> int:
    """Write the points from byte ``off`` (a multiple of 4) of the buffer; returns the end offset."""
    k, n = pos.shape
    for i in range(k):
        for f in range(4):
            c = n if f == 0 or (f == 1 and has_vel) or (f == 2 and has_acc) else 0
            u32[off // 4] = c
            off += 4
            if c > 0:
                if (off - 4) % 8:
                    off += 4
                j0 = (off - 4) // 8
                for j in range(n):
                    f64[j0 + j] = pos[i, j] if f == 0 else (vel[i, j] if f == 1 else acc[i, j])
                off += 8 * n
        u32[off // 4] = sec[i] & 0xFFFFFFFF
        u32[off // 4 + 1] = nsec[i]
        off += 8
    return off


def stamped(data: bytes, stamp: tuple[int, int]) -> bytes:
    """``data`` (a serialized message whose header comes first) with its header stamp set to
    (sec, nanosec)."""
    out = bytearray(data)
    struct.pack_into("<iI", out, 4, *stamp)
    return bytes(out)


def joint_trajectory_bytes(names: Sequence[str], times: FloatArray, positions: FloatArray,
                           velocities: FloatArray | None = None, accelerations: FloatArray | None = None,
                           frame_id: str = "", stamp: tuple[int, int] = (0, 0)) -> bytes:
    """A serialized JointTrajectory: (K,) times_from_start (s) and (K, n) arrays in ``names``' order
    (rad, rad/s, rad/s^2); header ``stamp`` (sec, nanosec; 0: start now) and ``frame_id``."""
    pos = np.ascontiguousarray(positions, dtype=float)
    times = np.asarray(times, dtype=float).reshape(-1)
    k, n = times.shape[0], len(names)
    if pos.shape != (k, n):
        raise InputError(f"positions: expected shape ({k}, {n}), got {pos.shape}")
    vel = np.ascontiguousarray(velocities if velocities is not None else np.zeros((0, 0)), dtype=float)
    acc = np.ascontiguousarray(accelerations if accelerations is not None else np.zeros((0, 0)), dtype=float)
    for what, arr, given in (("velocities", vel, velocities), ("accelerations", acc, accelerations)):
        if given is not None and arr.shape != (k, n):
            raise InputError(f"{what}: expected shape ({k}, {n}), got {arr.shape}")
    # time_from_start as rclpy's Duration: floor seconds, nanoseconds in [0, 1e9)
    ns = np.round(times * 1e9).astype(np.int64)
    sec, nsec = np.divmod(ns, 1_000_000_000)
    head = bytearray(ENCAPSULATION)
    head += struct.pack("<iI", *stamp)
    for s in (frame_id,):
        raw = s.encode() + b"\x00"
        head += struct.pack("<I", len(raw)) + raw
    _pad4(head)
    head += struct.pack("<I", n)
    for s in names:
        raw = s.encode() + b"\x00"
        head += struct.pack("<I", len(raw)) + raw
        _pad4(head)
    head += struct.pack("<I", k)
    size = len(head) + k * (8 + 4 * 4 + 3 * (4 + 8 * n)) + 8
    size += -(size - 4) % 8
    buf = np.zeros(size, dtype=np.uint8)
    buf[: len(head)] = np.frombuffer(bytes(head), dtype=np.uint8)
    end = write_points(buf.view(np.uint32), buf[4:].view(np.float64), len(head), sec, nsec, pos, vel, acc,
                       velocities is not None, accelerations is not None)
    return buf[:end].tobytes()


@njit(cache=True)
def scan_points(u32: NDArray[np.uint32], off: int, k: int, size: int
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], int]:
    """Walk ``k`` points from byte ``off``: (counts (k, 4), float64 index of each field's first value
    (k, 4), sec (k,), nanosec (k,), end offset; -1: the buffer ends early)."""
    counts = np.zeros((k, 4), dtype=np.int64)
    first = np.zeros((k, 4), dtype=np.int64)
    sec = np.zeros(k, dtype=np.int64)
    nsec = np.zeros(k, dtype=np.int64)
    for i in range(k):
        for f in range(4):
            if off + 4 > size:
                return counts, first, sec, nsec, -1
            c = np.int64(u32[off // 4])
            off += 4
            counts[i, f] = c
            if c > 0:
                if (off - 4) % 8:
                    off += 4
                first[i, f] = (off - 4) // 8
                off += 8 * c
        if off + 8 > size:
            return counts, first, sec, nsec, -1
        s = np.int64(u32[off // 4])
        sec[i] = s - (1 << 32) if s >= (1 << 31) else s
        nsec[i] = u32[off // 4 + 1]
        off += 8
    return counts, first, sec, nsec, off


@njit(cache=True)
def gather(f64: FloatArray, first: NDArray[np.int64], n: int) -> FloatArray:
    """(k, n) values of one field from each point's first float64 index."""
    out = np.empty((first.shape[0], n))
    for i in range(first.shape[0]):
        for j in range(n):
            out[i, j] = f64[first[i] + j]
    return out


def _string(data: bytes, off: int, what: str) -> tuple[str, int]:
    off += -(off - 4) % 4
    if off + 4 > len(data):
        raise InputError(f"joint_trajectory: message ends inside {what}")
    (length,) = struct.unpack_from("<I", data, off)
    end = off + 4 + length
    if length == 0 or end > len(data):
        raise InputError(f"joint_trajectory: bad string length {length} for {what}")
    return data[off + 4:end - 1].decode(errors="replace"), end


TrajectoryArrays = tuple[tuple[int, int], str, list[str], FloatArray, FloatArray, FloatArray | None,
                         FloatArray | None]


def joint_trajectory_from_bytes(data: bytes, allow_empty: bool = False) -> TrajectoryArrays:
    """A serialized JointTrajectory -> (stamp (sec, nanosec), frame_id, names, times (K,) s,
    positions (K, n), velocities (K, n) or None, accelerations (K, n) or None).

    ``allow_empty``: a message without points (ros2_control's "stop: hold here") gives K = 0
    arrays instead of an error.

    Raises:
        InputError: not little-endian CDR, a truncated message, or what
            :func:`~robot_grinding_sim.ros.conversions.checked_trajectory` refuses.
    """
    if len(data) < 16 or data[:2] not in (b"\x00\x01", b"\x00\x03"):
        raise InputError("joint_trajectory: not a little-endian CDR message")
    stamp = struct.unpack_from("<iI", data, 4)
    frame_id, off = _string(data, 12, "header.frame_id")
    off += -(off - 4) % 4
    (n_names,) = struct.unpack_from("<I", data, off)
    off += 4
    if n_names > 10_000:
        raise InputError(f"joint_trajectory: {n_names} joint names")
    names = []
    for i in range(n_names):
        name, off = _string(data, off, f"joint_names[{i}]")
        names.append(name)
    off += -(off - 4) % 4
    if off + 4 > len(data):
        raise InputError("joint_trajectory: message ends before its points")
    (k,) = struct.unpack_from("<I", data, off)
    off += 4
    if k > (len(data) - off) // 12:
        raise InputError(f"joint_trajectory: {k} points cannot fit in {len(data)} bytes")
    u32 = np.frombuffer(data, dtype=np.uint32, count=len(data) // 4)
    f64 = np.frombuffer(data, dtype=np.float64, offset=4, count=(len(data) - 4) // 8)
    counts, first, sec, nsec, end = scan_points(u32, off, k, len(data))
    if end < 0 or (k and int(first[:, :3].max(initial=0) + counts.max(initial=0)) > len(f64)):
        raise InputError("joint_trajectory: message ends inside its points")
    n = len(names)
    times = sec + 1e-9 * nsec
    if k == 0 and allow_empty:
        return (int(stamp[0]), int(stamp[1])), frame_id, names, times, np.zeros((0, n)), None, None

    def values(field: str) -> FloatArray:
        f = FIELDS.index(field)
        return gather(f64, np.ascontiguousarray(first[:, f]), n)

    out = checked_trajectory(names, times, {f: counts[:, i].tolist() for i, f in enumerate(FIELDS[:3])}, values)
    return (int(stamp[0]), int(stamp[1])), frame_id, *out


def warm_up(names: Sequence[str]) -> None:
    """Load (or compile) the kernels with a two-point trajectory of ``names``, before a node's
    first message: the first call of a freshly installed package compiles for a few 100 ms."""
    n = len(names)
    data = joint_trajectory_bytes(names, np.array([0.0, 1.0]), np.zeros((2, n)), np.zeros((2, n)), np.zeros((2, n)))
    joint_trajectory_from_bytes(stamped(data, (0, 1)))

"""Many messages of one fixed layout serialized at once (CDR, little endian), with numpy; ROS-free.

The in-process job writes a message per step on several topics (600,000 steps for the full
default job): building a ``rosbags`` message object per step and serializing it took most of the
time of its outputs. A message whose strings and sequence lengths are the same in every sample
(a JointState with the same joint names, a WrenchStamped in one frame, a TFMessage of the same
frames) has the same bytes but for its stamp and its float64 fields, at the same offsets: a
:class:`CdrLayout` is that template, and :meth:`CdrLayout.pack` writes N messages as an (N, size)
uint8 array. The bytes are what ``rosbags``' ``serialize_cdr`` gives for the same message
(test/unit/test_cdr_batch.py compares them).

CDR (XCDR1, little endian): a 4-byte encapsulation header ``00 01 00 00``, then every primitive
aligned to its size counted from the end of that header; a string is a uint32 length (with its
NUL) then the bytes and the NUL; a sequence a uint32 count then its elements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

ENCAPSULATION = b"\x00\x01\x00\x00"
#: samples per block when many messages are serialized at once (bounds the memory they take)
BLOCK = 20_000


class CdrLayout:
    """The bytes of one fixed-layout message, built field by field; float64 runs and stamps are
    slots filled per sample by :meth:`pack`."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.stamps: list[int] = []  # offsets (into buf) of (int32 sec, uint32 nanosec) pairs
        self.floats: list[tuple[int, int]] = []  # (offset, count) of float64 runs

    def _align(self, n: int) -> None:
        self.buf += bytes(-len(self.buf) % n)

    def u32(self, value: int) -> CdrLayout:
        self._align(4)
        self.buf += int(value).to_bytes(4, "little")
        return self

    def i32(self, value: int) -> CdrLayout:
        self._align(4)
        self.buf += int(value).to_bytes(4, "little", signed=True)
        return self

    def string(self, text: str) -> CdrLayout:
        data = text.encode() + b"\x00"
        self.u32(len(data))
        self.buf += data
        return self

    def stamp(self) -> CdrLayout:
        """A builtin_interfaces/Time slot (filled from the sample's stamp in ns)."""
        self._align(4)
        self.stamps.append(len(self.buf))
        self.buf += bytes(8)
        return self

    def header(self, frame_id: str) -> CdrLayout:
        """A std_msgs/Header with a stamp slot."""
        return self.stamp().string(frame_id)

    def f64(self, count: int) -> CdrLayout:
        """A run of ``count`` float64 slots (the next ``count`` columns of :meth:`pack`'s values)."""
        self._align(8)
        self.floats.append((len(self.buf), count))
        self.buf += bytes(8 * count)
        return self

    def f64_sequence(self, count: int) -> CdrLayout:
        """A ``float64[]`` of ``count`` elements (its count, then slots)."""
        self.u32(count)
        return self.f64(count) if count else self

    @property
    def size(self) -> int:
        return len(ENCAPSULATION) + len(self.buf)

    @property
    def n_floats(self) -> int:
        return sum(n for _, n in self.floats)

    def pack(self, stamps_ns: Sequence[int] | NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.uint8]:
        """(N, :attr:`size`) uint8: sample k's message with stamp ``stamps_ns[k]`` (every stamp
        slot) and ``values[k]`` (N, :attr:`n_floats`) in the float64 slots, in order."""
        ns = np.asarray(stamps_ns, dtype=np.int64).reshape(-1)
        vals = np.ascontiguousarray(values, dtype="<f8").reshape(len(ns), -1)
        if vals.shape[1] != self.n_floats:
            raise ValueError(f"layout has {self.n_floats} float64 slots, got {vals.shape[1]} values per message")
        out = np.empty((len(ns), self.size), dtype=np.uint8)
        out[:] = np.frombuffer(ENCAPSULATION + bytes(self.buf), dtype=np.uint8)
        base = len(ENCAPSULATION)
        if self.stamps:
            sec = np.floor_divide(ns, 1_000_000_000).astype("<i4")
            nsec = np.remainder(ns, 1_000_000_000).astype("<u4")
            sn = np.empty((len(ns), 2), dtype="<u4")
            sn[:, 0] = sec.view("<u4")
            sn[:, 1] = nsec
            sn_bytes = sn.view(np.uint8)
            for off in self.stamps:
                out[:, base + off:base + off + 8] = sn_bytes
        col = 0
        for off, n in self.floats:
            out[:, base + off:base + off + 8 * n] = vals[:, col:col + n].copy().view(np.uint8)
            col += n
        return out


def wrench_stamped(frame_id: str) -> CdrLayout:
    """geometry_msgs/WrenchStamped: values force x y z, torque x y z."""
    return CdrLayout().header(frame_id).f64(6)


def pose_stamped(frame_id: str) -> CdrLayout:
    """geometry_msgs/PoseStamped: values position x y z, orientation x y z w."""
    return CdrLayout().header(frame_id).f64(7)


def joint_state(names: Sequence[str], frame_id: str = "") -> CdrLayout:
    """sensor_msgs/JointState of ``names``: values position, velocity, effort (3 n)."""
    lay = CdrLayout().header(frame_id).u32(len(names))
    for name in names:
        lay.string(name)
    n = len(names)
    return lay.f64_sequence(n).f64_sequence(n).f64_sequence(n)


def tf_message(frames: Sequence[tuple[str, str]]) -> CdrLayout:
    """tf2_msgs/TFMessage of (parent, child) transforms, one stamp for all: values per transform
    translation x y z, rotation x y z w."""
    lay = CdrLayout().u32(len(frames))
    for parent, child in frames:
        lay.header(parent).string(child).f64(7)
    return lay


def float64_multi_array(count: int) -> CdrLayout:
    """std_msgs/Float64MultiArray with an empty layout and ``count`` values."""
    return CdrLayout().u32(0).u32(0).f64_sequence(count)

"""Reading force series and grinding progress out of rosbag2 bags (sqlite3 and MCAP); ROS-free.

Bags come from ``ros2 bag record`` (any storage ``rosbags`` reads: sqlite3, MCAP; rosbag2 metadata
versions 1-9), from this package's ``recorder`` node, or from any other writer. Reading goes
through ``rosbags.highlevel.AnyReader``, which takes message definitions from the bag itself, so
no ROS install is needed.

Accepted paths: a bag directory with ``metadata.yaml``, a bag directory without it (the single
``.mcap``/``.db3`` inside is read directly, e.g. after a crash), or a bare ``.mcap``/``.db3`` file.

Topics:

- wrench: ``geometry_msgs/msg/WrenchStamped`` (time = header stamp, falling back to the time the
  message was logged when the stamp is zero) or ``geometry_msgs/msg/Wrench`` (time = log time).
- progress (``/grinding/progress`` by default): ``std_msgs/msg/Float64MultiArray`` with
  ``data = [pass_index, arc_length_m, stamp_s, ...]``. ``pass_index`` counts passes from 0 and
  is negative off a pass (approach, retreat, transit); ``arc_length_m`` is the distance travelled
  along the current pass (m); ``stamp_s`` (optional) is the time of the sample on the clock of the
  wrench header stamps (s; ROS time, sim time in simulation); without it the log time is used.
  Further elements are reserved. See docs/compare.md.

Every error names the bag and the topic and is a :class:`~robot_grinding_sim.core.errors.InputError`.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError

WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
WRENCH = "geometry_msgs/msg/Wrench"
WRENCH_TYPES = (WRENCH_STAMPED, WRENCH)
PROGRESS_TYPE = "std_msgs/msg/Float64MultiArray"
PROGRESS_TOPIC = "/grinding/progress"

_REPAIR_HINT = "if a recorder was killed while writing it, `grinding record --repair BAG` rebuilds it"


def normalize_topic(topic: str) -> str:
    """Topic name with exactly one leading slash (``contact/wrench`` -> ``/contact/wrench``)."""
    name = str(topic).strip()
    if not name.strip("/"):
        raise InputError(f"topic name {topic!r} is empty")
    return "/" + name.lstrip("/")


@dataclass(frozen=True)
class WrenchSeries:
    """A force-torque time series read from one topic of one bag.

    Attributes:
        t: (N,) sample times, s (header stamps; log time where the stamp is zero or absent),
            sorted ascending.
        force: (N, 3) force, N, in ``frame``.
        torque: (N, 3) torque, N m, in ``frame``.
        frame: header frame_id ("" for an unstamped Wrench or mixed frames: see ``frames``).
        t_log: (N,) times the messages were logged (received by the recorder), s.
        bag: the bag path as given.
        topic: the topic name (leading slash).
        msgtype: the message type.
    """

    t: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    frame: str
    t_log: np.ndarray
    bag: str
    topic: str
    msgtype: str

    def __len__(self) -> int:
        return int(self.t.shape[0])

    @property
    def period(self) -> float:
        """Median sample period, s (inf for fewer than two samples)."""
        return float(np.median(np.diff(self.t))) if len(self) > 1 else float("inf")


@dataclass(frozen=True)
class ProgressSeries:
    """Where the tool is along the planned passes over time (see the module docstring).

    Attributes:
        t: (M,) sample times, s, on the clock of the wrench header stamps, sorted ascending.
        pass_index: (M,) int pass number (negative: off a pass).
        arc_length: (M,) distance along the current pass, m.
        bag: the bag path as given.
        topic: the topic name.
    """

    t: np.ndarray
    pass_index: np.ndarray
    arc_length: np.ndarray
    bag: str
    topic: str

    def __len__(self) -> int:
        return int(self.t.shape[0])


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag: name, message type, message count."""

    name: str
    msgtype: str
    count: int


def _resolve(path: str | os.PathLike[str]) -> Path:
    """The path ``AnyReader`` should open (see the module docstring for what is accepted)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"bag {path} does not exist")
    if p.is_dir() and not (p / "metadata.yaml").exists():
        stores = sorted(p.glob("*.mcap")) + sorted(p.glob("*.db3"))
        if len(stores) == 1:
            return stores[0]
        if not stores:
            raise InputError(f"bag {path}: directory without metadata.yaml and without a .mcap or .db3 file")
        names = [s.name for s in stores]
        raise InputError(f"bag {path}: no metadata.yaml and several storage files {names}; {_REPAIR_HINT}")
    if p.is_file() and p.suffix not in (".mcap", ".db3", ".bag"):
        raise InputError(f"bag {path}: not a bag directory nor a .mcap, .db3 or .bag file")
    return p


@contextmanager
def open_bag(path: str | os.PathLike[str]) -> Iterator[Any]:
    """Open a bag with ``rosbags.highlevel.AnyReader``; errors become InputError naming the bag."""
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag2.errors import ReaderError

    target = _resolve(path)
    reader = AnyReader([target])
    try:
        reader.open()
    except (AnyReaderError, ReaderError, OSError, ValueError, KeyError, TypeError, AssertionError,
            struct.error, sqlite3.DatabaseError) as exc:
        msg = f"bag {path} cannot be read (truncated or not a rosbag2?): {exc}; {_REPAIR_HINT}"
        raise InputError(msg) from exc
    try:
        yield reader
    finally:
        reader.close()


def bag_topics(path: str | os.PathLike[str]) -> list[TopicInfo]:
    """The topics of a bag, sorted by name."""
    with open_bag(path) as reader:
        infos = [TopicInfo(n, i.msgtype or "?", int(i.msgcount)) for n, i in reader.topics.items()]
    return sorted(infos, key=lambda t: t.name)


def _connections(reader: Any, path: Any, topic: str, allowed: tuple[str, ...], role: str) -> list[Any]:
    conns = [c for c in reader.connections if c.topic == topic]
    if not conns:
        names = sorted({c.topic for c in reader.connections})
        if not names:
            raise InputError(f"bag {path} is empty (no topics), so it has no topic {topic}")
        raise InputError(f"bag {path} has no topic {topic} (topics: {', '.join(names)})")
    bad = sorted({c.msgtype for c in conns if c.msgtype not in allowed})
    if bad:
        raise InputError(
            f"topic {topic} in bag {path} is {', '.join(bad)}, not {' or '.join(allowed)} ({role})"
        )
    return conns


def _iter_messages(reader: Any, conns: list[Any], path: Any, topic: str) -> Iterator[tuple[int, Any, str]]:
    """(log time ns, decoded message, msgtype) of ``conns``; corrupt data -> InputError."""
    from rosbags.highlevel import AnyReaderError
    from rosbags.rosbag2.errors import ReaderError

    errors = (AnyReaderError, ReaderError, OSError, ValueError, KeyError, IndexError, AssertionError,
              struct.error, sqlite3.DatabaseError)
    try:
        for conn, t_ns, raw in reader.messages(connections=conns):
            yield t_ns, reader.deserialize(raw, conn.msgtype), conn.msgtype
    except errors as exc:
        msg = f"bag {path}, topic {topic}: cannot read the messages (truncated or corrupt?): {exc}"
        raise InputError(msg) from exc


def read_messages(path: str | os.PathLike[str], topic: str, msgtypes: tuple[str, ...], role: str
                  ) -> Iterator[tuple[int, Any]]:
    """(log time ns, decoded message) of every message of ``topic`` in the bag at ``path``, in log
    order; InputError naming the bag when the topic is missing, of another type than ``msgtypes``
    (``role``: what the caller reads it as, for the message) or corrupt."""
    with open_bag(path) as reader:
        conns = _connections(reader, path, normalize_topic(topic), msgtypes, role)
        for t_ns, msg, _ in _iter_messages(reader, conns, path, topic):
            yield t_ns, msg


def read_wrench(path: str | os.PathLike[str], topic: str, stamp: str = "header") -> WrenchSeries:
    """Read a force-torque series from ``topic`` of the bag at ``path``.

    Args:
        path: bag directory or storage file.
        topic: topic name, with or without the leading slash.
        stamp: ``"header"`` (header stamps, log time where a stamp is zero or the type has no
            header) or ``"log"`` (the time each message was logged).

    Returns:
        The series sorted by time (duplicated times are kept in log order).

    Raises:
        InputError: no such topic, empty topic or bag, not a wrench type, unreadable file,
            non-finite values.
    """
    if stamp not in ("header", "log"):
        raise InputError(f"stamp must be 'header' or 'log', got {stamp!r}")
    topic = normalize_topic(topic)
    t_log: list[int] = []
    t_hdr: list[int] = []
    vals: list[tuple[float, ...]] = []
    frames: set[str] = set()
    msgtype = ""
    with open_bag(path) as reader:
        conns = _connections(reader, path, topic, WRENCH_TYPES, "a force-torque topic")
        for t_ns, msg, msgtype in _iter_messages(reader, conns, path, topic):
            if msgtype == WRENCH_STAMPED:
                s = msg.header.stamp
                t_hdr.append(int(s.sec) * 1_000_000_000 + int(s.nanosec))
                frames.add(msg.header.frame_id)
                w = msg.wrench
            else:
                t_hdr.append(0)
                w = msg
            t_log.append(t_ns)
            f, m = w.force, w.torque
            vals.append((f.x, f.y, f.z, m.x, m.y, m.z))
    if not vals:
        raise InputError(f"topic {topic} in bag {path} has no messages")
    arr = np.asarray(vals, dtype=float)
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.all(np.isfinite(arr), axis=1)))
        raise InputError(f"topic {topic} in bag {path}: {bad} of {len(arr)} wrenches are NaN or infinite")
    log = np.asarray(t_log, dtype=np.int64)
    hdr = np.asarray(t_hdr, dtype=np.int64)
    t_ns = log.copy() if stamp == "log" else np.where(hdr > 0, hdr, log)
    # float64 seconds since the epoch resolve 0.24 us: far below any force sample period.
    order = np.argsort(t_ns, kind="stable")
    frame = frames.pop() if len(frames) == 1 else ""
    return WrenchSeries(
        t=t_ns[order] * 1e-9,
        force=arr[order, :3],
        torque=arr[order, 3:],
        frame=frame,
        t_log=log[order] * 1e-9,
        bag=str(path),
        topic=topic,
        msgtype=msgtype,
    )


def read_progress(path: str | os.PathLike[str], topic: str = PROGRESS_TOPIC) -> ProgressSeries:
    """Read the grinding progress topic (``[pass_index, arc_length_m, stamp_s, ...]``).

    Raises:
        InputError: no such topic, wrong type, fewer than 2 elements in a message, NaN.
    """
    topic = normalize_topic(topic)
    ts: list[float] = []
    passes: list[float] = []
    arcs: list[float] = []
    with open_bag(path) as reader:
        conns = _connections(reader, path, topic, (PROGRESS_TYPE,), "the grinding progress topic")
        for t_ns, msg, _ in _iter_messages(reader, conns, path, topic):
            data = np.asarray(msg.data, dtype=float)
            if data.shape[0] < 2:
                raise InputError(
                    f"topic {topic} in bag {path}: a message has {data.shape[0]} elements;"
                    " expected [pass_index, arc_length_m, stamp_s, ...]"
                )
            ts.append(float(data[2]) if data.shape[0] >= 3 and data[2] > 0 else t_ns * 1e-9)
            passes.append(float(data[0]))
            arcs.append(float(data[1]))
    if not ts:
        raise InputError(f"topic {topic} in bag {path} has no messages")
    t = np.asarray(ts)
    p = np.asarray(passes)
    s = np.asarray(arcs)
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p)) and np.all(np.isfinite(s))):
        raise InputError(f"topic {topic} in bag {path}: NaN or infinite progress values")
    order = np.argsort(t, kind="stable")
    return ProgressSeries(
        t=t[order],
        pass_index=np.round(p[order]).astype(int),
        arc_length=s[order],
        bag=str(path),
        topic=topic,
    )


def read_joint_states(bag: str | os.PathLike[str], topic: str = "/joint_states"
                      ) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(t (N,) s header stamps, joint names, positions (N, n) rad) of a bag's joint states."""
    t, names, q, _ = read_joint_motion(bag, topic)
    return t, names, q


def read_joint_motion(bag: str | os.PathLike[str], topic: str = "/joint_states"
                      ) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray | None]:
    """:func:`read_joint_states` and the velocities (N, n) rad/s, or None unless every message has
    one per joint (a log without them: ``grinding import-log`` writes empty velocity sequences)."""
    ts: list[float] = []
    qs: list[np.ndarray] = []
    vs: list[np.ndarray] = []
    names: list[str] | None = None
    with open_bag(bag) as reader:
        conns = _connections(reader, bag, topic, ("sensor_msgs/msg/JointState",), "joint states")
        for _t_ns, msg, _ in _iter_messages(reader, conns, bag, topic):
            n = [str(x) for x in msg.name]
            if names is None:
                names = n
            vel = np.asarray(msg.velocity, dtype=float)
            if n != names:
                idx = {k: i for i, k in enumerate(n)}
                if set(names) - set(idx):
                    raise InputError(f"bag {bag}, {topic}: messages name different joints")
                order = [idx[k] for k in names]
                pos = np.asarray(msg.position, dtype=float)[order]
                vel = vel[order] if len(vel) == len(n) else vel[:0]
            else:
                pos = np.asarray(msg.position, dtype=float)
            ts.append(msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec)
            qs.append(pos)
            vs.append(vel)
    if not ts:
        raise InputError(f"bag {bag}: no messages on {topic}")
    order = np.argsort(ts, kind="stable")
    n_j = len(names or [])
    qd = np.asarray(vs)[order] if all(len(v) == n_j for v in vs) else None
    if qd is not None and not np.isfinite(qd).all():
        qd = None
    return np.asarray(ts)[order], list(names or []), np.asarray(qs)[order], qd


#: where the recorder node puts its report in metadata.yaml's custom_data (nodes/recorder.py)
RECORDER_REPORT_KEY = "robot_grinding_sim.recorder"


def recording_report(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The recorder's report of a bag (``{"topics": {topic: {"received", "lost", ...}},
    "write_errors"}``; core/record/loss.py), from its ``metadata.yaml``; None for a bag without one
    (another recorder, or no metadata.yaml).

    Raises:
        InputError: the report is there but is not JSON.
    """
    import json

    import yaml

    bag = _resolve(path)
    meta = (bag if bag.is_dir() else bag.parent) / "metadata.yaml"
    try:
        doc = yaml.safe_load(meta.read_text())
        text = (doc["rosbag2_bagfile_information"].get("custom_data") or {}).get(RECORDER_REPORT_KEY)
    except (OSError, yaml.YAMLError, TypeError, KeyError, AttributeError):
        return None
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"bag {path}: metadata.yaml custom_data {RECORDER_REPORT_KEY} is not JSON: {exc}") from None


def has_topic(path: str | os.PathLike[str], topic: str) -> bool:
    """Whether the bag has ``topic`` with at least one message."""
    topic = normalize_topic(topic)
    return any(t.name == topic and t.count > 0 for t in bag_topics(path))

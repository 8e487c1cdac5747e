"""Writing rosbag2 bags (MCAP or sqlite3) through ``rosbags``, with durable checkpoints; ROS-free.

The recorder node hands serialized CDR bytes to :class:`BagWriter`; tests write synthetic bags
with :func:`write_bag`. Everything goes through ``rosbags.rosbag2.Writer`` so the files are what
``ros2 bag`` and the ``rosbags``/``mcap`` readers expect: message definitions from the ``rosbags``
type store (ROS 2 Kilted by default, the same standard messages as Jazzy), a ``metadata.yaml``
that ``ros2 bag info`` reads, and QoS profiles per topic.

Crash safety (:meth:`BagWriter.flush`, called periodically by the recorder):

- MCAP: the pending chunk is closed and written, then a footer without summary
  (``summary_start = 0``) and the closing magic are appended and the file position is moved back
  before them, so the next chunk overwrites them. A process killed between checkpoints leaves a
  valid MCAP holding every message up to the last checkpoint; readers without a summary scan the
  file linearly (``rosbags`` and ``mcap`` both do). ``close()`` writes the full summary as usual.
- sqlite3: the open transaction is committed.
- both: ``metadata.yaml`` is rewritten atomically (temporary file + rename) with the counts of
  the checkpoint, so the bag directory is readable by ``rosbags`` and ``ros2 bag info`` as is.

A bag left behind by a writer killed in the middle of a checkpoint (or any bag whose
``metadata.yaml`` is missing) is fixed by :func:`repair_bag`.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.errors import InputError

#: Storage plugin names as ``ros2 bag`` spells them.
STORAGES = ("mcap", "sqlite3")
#: rosbag2 metadata version written by default: 8 is what Jazzy writes and reads (Kilted reads it too).
DEFAULT_VERSION = 8

_MCAP_MAGIC = b"\x89MCAP0\r\n"
# Footer record: opcode 0x02, length 20, summary_start 0, summary_offset_start 0, crc 0.
_MCAP_CHECKPOINT_TAIL = b"\x02" + (20).to_bytes(8, "little") + bytes(20) + _MCAP_MAGIC


def default_typestore(distro: str = "kilted") -> Any:
    """The ``rosbags`` type store of a ROS 2 distribution (``"kilted"``, ``"jazzy"``, ``"humble"``)."""
    from rosbags.typesys import Stores, get_typestore

    try:
        store = Stores[f"ROS2_{distro.upper()}"]
    except KeyError:
        raise InputError(f"unknown ROS 2 distribution {distro!r} for the message type store") from None
    return get_typestore(store)


@dataclass(frozen=True)
class TopicQos:
    """The QoS a topic was offered with (what ``ros2 bag`` stores per topic).

    Attributes:
        reliable: RELIABLE (True) or BEST_EFFORT (False).
        transient_local: TRANSIENT_LOCAL (True) or VOLATILE (False) durability.
        depth: history depth (KEEP_LAST).
    """

    reliable: bool = True
    transient_local: bool = False
    depth: int = 10

    def to_rosbags(self) -> Any:
        """The ``rosbags.interfaces.Qos`` value of this profile."""
        from rosbags.interfaces import (
            Qos,
            QosDurability,
            QosHistory,
            QosLiveliness,
            QosReliability,
            QosTime,
        )

        return Qos(
            history=QosHistory.KEEP_LAST,
            depth=int(self.depth),
            reliability=QosReliability.RELIABLE if self.reliable else QosReliability.BEST_EFFORT,
            durability=QosDurability.TRANSIENT_LOCAL if self.transient_local else QosDurability.VOLATILE,
            deadline=QosTime(0, 0),
            lifespan=QosTime(0, 0),
            liveliness=QosLiveliness.AUTOMATIC,
            liveliness_lease_duration=QosTime(0, 0),
            avoid_ros_namespace_conventions=False,
        )


class BagWriter:
    """A rosbag2 writer with periodic durable checkpoints (see the module docstring).

    Not thread-safe: the recorder calls it from its writer thread only.

    Args:
        path: the bag directory to create (must not exist).
        storage: ``"mcap"`` (default) or ``"sqlite3"``.
        version: rosbag2 metadata version, 8 or 9.
        typestore: ``rosbags`` type store giving message definitions (default: ROS 2 Kilted).
        fsync: also fsync at each checkpoint (survives power loss, not only a killed process).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        storage: str = "mcap",
        version: int = DEFAULT_VERSION,
        typestore: Any = None,
        fsync: bool = False,
    ) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in STORAGES:
            raise InputError(f"bag storage must be one of {STORAGES}, got {storage!r}")
        if version not in (8, 9):
            raise InputError(f"rosbag2 version must be 8 or 9, got {version!r}")
        self.path = Path(path)
        if self.path.exists():
            raise InputError(f"bag {self.path} exists already; choose a new output path")
        self.storage = storage
        self.typestore = typestore if typestore is not None else default_typestore()
        self.fsync = fsync
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self.path, version=version, storage_plugin=plugin)  # type: ignore[arg-type]
        self._conns: dict[str, Any] = {}
        self._open = False
        self._checkpoint_supported = True

    # -- lifecycle ------------------------------------------------------------------------------
    def open(self) -> BagWriter:
        """Create the bag directory and the storage file; returns self."""
        self._writer.open()
        self._open = True
        return self

    def __enter__(self) -> BagWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        return self._open

    def discard(self) -> None:
        """Remove the bag directory this writer created, without closing it (a recording that never
        started: nothing partial is left behind). Safe from any thread; errors are ignored."""
        import shutil

        if self._open:
            self._open = False
            shutil.rmtree(self.path, ignore_errors=True)

    def close(self) -> None:
        """Write the summary and ``metadata.yaml``; idempotent."""
        if not self._open:
            return
        self._open = False
        self._writer.close()

    # -- topics and messages --------------------------------------------------------------------
    def has_topic(self, topic: str) -> bool:
        return topic in self._conns

    def knows_type(self, msgtype: str) -> bool:
        """Whether the type store has a definition of ``msgtype`` (e.g. ``geometry_msgs/msg/Wrench``)."""
        return msgtype in self.typestore.fielddefs

    def add_topic(
        self,
        topic: str,
        msgtype: str,
        qos: Sequence[TopicQos] = (),
        msgdef: str | None = None,
        rihs01: str | None = None,
    ) -> None:
        """Register a topic. The message definition comes from the type store unless given.

        Raises:
            InputError: the type store does not know ``msgtype`` and no definition was given, or
                the topic was already added.
        """
        if topic in self._conns:
            raise InputError(f"topic {topic!r} is already in bag {self.path}")
        if msgdef is None and not self.knows_type(msgtype):
            raise InputError(
                f"message type {msgtype!r} of topic {topic!r} has no definition in the type store;"
                " it cannot be written to bag " + str(self.path)
            )
        self._conns[topic] = self._writer.add_connection(
            topic,
            msgtype,
            typestore=self.typestore,
            msgdef=msgdef,
            rihs01=rihs01,
            offered_qos_profiles=[q.to_rosbags() for q in qos],
        )

    def write(self, topic: str, timestamp_ns: int, data: bytes | memoryview) -> None:
        """Append one serialized (CDR) message of ``topic`` received at ``timestamp_ns`` (ns since epoch)."""
        try:
            conn = self._conns[topic]
        except KeyError:
            raise InputError(f"topic {topic!r} was not added to bag {self.path}") from None
        self._writer.write(conn, int(timestamp_ns), data)

    def write_many(self, topics: Sequence[str], timestamps_ns: Any, rows: Sequence[Any]) -> None:
        """Append a message of every topic in ``topics`` per stamp, interleaved as
        ``for k: for j: write(topics[j], timestamps_ns[k], rows[j][k])`` would (the same file):
        ``rows[j]`` is an (N, size_j) uint8 array of serialized messages
        (:mod:`~robot_grinding_sim.core.record.cdr_batch`). MCAP records are laid out with numpy
        a chunk at a time (rosbags' McapWriter: its open chunk closes after the message that takes
        it past 1 MiB); other storages, message by message."""
        import numpy as np
        from rosbags.rosbag2.enums import CompressionMode
        from rosbags.rosbag2.storage_mcap import McapWriter

        conns = []
        for topic in topics:
            if topic not in self._conns:
                raise InputError(f"topic {topic!r} was not added to bag {self.path}")
            conns.append(self._conns[topic])
        ns = np.asarray(timestamps_ns, dtype=np.int64).reshape(-1)
        blocks = [np.asarray(r, dtype=np.uint8).reshape(len(ns), -1) for r in rows]
        store = self._writer.storage
        if not (isinstance(store, McapWriter) and self._writer.compression_mode != CompressionMode.MESSAGE
                and hasattr(store, "chunk")):
            for k in range(len(ns)):
                for conn, b in zip(conns, blocks, strict=True):
                    self._writer.write(conn, int(ns[k]), b[k].tobytes())
            return
        # record: opcode 0x05, uint64 length, uint16 channel, uint32 sequence 0, log and publish time, data
        parts, sizes = [], []
        for conn, b in zip(conns, blocks, strict=True):
            rec = np.empty((len(ns), 31 + b.shape[1]), dtype=np.uint8)
            rec[:, 0] = 0x05
            rec[:, 1:9] = np.frombuffer((22 + b.shape[1]).to_bytes(8, "little"), dtype=np.uint8)
            rec[:, 9:11] = np.frombuffer(int(conn.id).to_bytes(2, "little"), dtype=np.uint8)
            rec[:, 11:15] = 0
            rec[:, 15:23] = ns.astype("<i8").view(np.uint8).reshape(-1, 8)
            rec[:, 23:31] = rec[:, 15:23]
            rec[:, 31:] = b
            parts.append(rec)
            sizes.append(rec.shape[1])
        flat = np.concatenate(parts, axis=1).reshape(-1)
        size = np.tile(np.asarray(sizes, dtype=np.int64), len(ns))
        ends = np.cumsum(size)
        cid = [int(c.id) for c in conns]
        J, M, i, byte0 = len(conns), len(size), 0, 0
        while i < M:
            chunk = store.chunk
            pos = chunk.bio.tell()
            # the last message of this chunk: the first that ends past 1 MiB, or the last one
            last = min(M - 1, i + int(np.searchsorted(ends[i:] - byte0 + pos, 2**20, side="right")))
            stop = int(ends[last])
            chunk.bio.write(memoryview(flat[byte0:stop]))
            starts = (ends[i:last + 1] - size[i:last + 1] - byte0 + pos).tolist()
            for j in sorted(range(J), key=lambda j: (j - i) % J):  # channels in order of first message
                first = i + (j - i) % J
                t = ns[first // J:(last - j) // J + 1] if first <= last else ns[:0]
                sel = slice(first - i, last + 1 - i, J)
                chunk.msgs[cid[j]].extend(zip(t.tolist(), starts[sel], strict=True))
                store.channel_stats[cid[j]] += len(t)
                self._writer.counts[cid[j]] += len(t)
            t = ns[i // J:last // J + 1]
            t0, t1 = int(t.min()), int(t.max())
            chunk.message_start_time = min(t0, chunk.message_start_time)
            chunk.message_end_time = max(t1, chunk.message_end_time)
            store.message_start_time = min(t0, store.message_start_time)
            store.message_end_time = max(t1, store.message_end_time)
            self._writer.min_timestamp = min(t0, self._writer.min_timestamp)
            self._writer.max_timestamp = max(t1, self._writer.max_timestamp)
            if chunk.bio.tell() > 2**20:
                store.close_chunk()
            i, byte0 = last + 1, stop

    def set_custom_data(self, key: str, value: str) -> None:
        """Set ``key`` of the bag's ``custom_data`` (rosbag2's map of strings in ``metadata.yaml``),
        written at the next checkpoint and at close."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise InputError(f"bag {self.path}: custom_data takes strings, got {key!r}: {value!r}")
        w = self._writer
        if hasattr(w, "set_custom_data"):  # rosbags >= 0.9.16
            w.set_custom_data(key, value)
        else:
            w.custom_data = {**getattr(w, "custom_data", {}), key: value}

    def serialize(self, msg: Any, msgtype: str) -> bytes:
        """CDR bytes of a ``rosbags`` message object (for tests and synthetic bags)."""
        return bytes(self.typestore.serialize_cdr(msg, msgtype))

    @property
    def counts(self) -> dict[str, int]:
        """Messages written so far per topic."""
        return {t: self._writer.counts[c.id] for t, c in self._conns.items()}

    # -- checkpoints ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Make everything written so far durable and readable (see the module docstring)."""
        if not self._open:
            return
        store = self._writer.storage
        if self.storage == "mcap":
            self._flush_mcap(store)
        else:
            store.conn.commit()
            if self.fsync:
                fd = os.open(store.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        write_metadata(self.path, self._metadata())

    def _flush_mcap(self, store: Any) -> None:
        # rosbags' McapWriter keeps the open chunk in memory (store.chunk) and writes closed chunks
        # to store.bio; these are internals, so check them and degrade to "repair needed" if absent.
        if not self._checkpoint_supported or not all(
            hasattr(store, a) for a in ("chunk", "bio", "close_chunk")
        ):
            self._checkpoint_supported = False
            return
        if store.chunk.bio.tell():
            store.close_chunk()
        bio = store.bio
        pos = bio.tell()
        bio.write(_MCAP_CHECKPOINT_TAIL)
        bio.flush()
        if self.fsync:
            os.fsync(bio.fileno())
        bio.seek(pos)

    def _metadata(self) -> dict[str, Any]:
        """The ``metadata.yaml`` content of the current state (what ``Writer.close`` writes)."""
        w = self._writer
        count = sum(w.counts.values())
        start = w.min_timestamp if count else 0
        duration = max(0, w.max_timestamp - w.min_timestamp) if count else 0
        name = w.storage.path.name
        return metadata_dict(
            storage=self.storage,
            version=w.version,
            file_name=name,
            topics=[
                (c.topic, c.msgtype, c.digest, list(c.ext.offered_qos_profiles), w.counts[c.id])
                for c in w.connections
            ],
            start_ns=start,
            duration_ns=duration,
            custom_data=dict(getattr(w, "custom_data", {})),
        )


def metadata_dict(
    storage: str,
    version: int,
    file_name: str,
    topics: Iterable[tuple[str, str, str, list[Any], int]],
    start_ns: int,
    duration_ns: int,
    custom_data: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A rosbag2 ``metadata.yaml`` document (as ``rosbags``' writer lays it out).

    Args:
        topics: (name, type, type_description_hash, rosbags Qos list, message count) per topic.
        custom_data: rosbag2's ``custom_data`` map of strings (None or empty: none).
    """
    from rosbags.rosbag2.metadata import dump_qos_v8, dump_qos_v9

    dump_qos = dump_qos_v9 if version >= 9 else dump_qos_v8
    topics = list(topics)
    count = sum(t[4] for t in topics)
    return {
        "rosbag2_bagfile_information": {
            "version": version,
            "storage_identifier": storage,
            "relative_file_paths": [file_name],
            "duration": {"nanoseconds": int(duration_ns)},
            "starting_time": {"nanoseconds_since_epoch": int(start_ns)},
            "message_count": count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": name,
                        "type": msgtype,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": dump_qos(qos),
                        "type_description_hash": digest,
                    },
                    "message_count": n,
                }
                for name, msgtype, digest, qos, n in topics
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [
                {
                    "path": file_name,
                    "starting_time": {"nanoseconds_since_epoch": int(start_ns)},
                    "duration": {"nanoseconds": int(duration_ns)},
                    "message_count": count,
                }
            ],
            "custom_data": custom_data or None,
            "ros_distro": "rosbags",
        }
    }


def write_metadata(bag_dir: Path, metadata: dict[str, Any]) -> None:
    """Write ``bag_dir/metadata.yaml`` atomically (temporary file + rename)."""
    import yaml

    # libyaml's emitter when PyYAML has it: the recorder rewrites this file at every checkpoint
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(metadata, Dumper=dumper, default_flow_style=False, sort_keys=False)
    tmp = bag_dir / "metadata.yaml.tmp"
    tmp.write_text(text, "utf8")
    tmp.replace(bag_dir / "metadata.yaml")


def write_bag(
    path: str | os.PathLike[str],
    messages: Iterable[tuple[str, int, Any]],
    types: dict[str, str],
    storage: str = "mcap",
    typestore: Any = None,
    version: int = DEFAULT_VERSION,
) -> Path:
    """Write a whole bag at once: ``messages`` are (topic, log time ns, rosbags message object).

    Args:
        types: topic -> message type (``geometry_msgs/msg/WrenchStamped``); fixes the topic order.

    Returns:
        The bag directory.
    """
    with BagWriter(path, storage=storage, typestore=typestore, version=version) as bag:
        for topic, msgtype in types.items():
            bag.add_topic(topic, msgtype)
        for topic, t_ns, msg in messages:
            bag.write(topic, t_ns, bag.serialize(msg, types[topic]))
    return Path(path)


# -- repair -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_bag` did.

    Attributes:
        path: the repaired bag directory.
        storage: ``"mcap"`` or ``"sqlite3"``.
        messages: messages in the repaired bag.
        rewritten: the storage file was rewritten (an MCAP whose tail was cut off); the original
            is kept next to it with the suffix ``.orig``.
    """

    path: Path
    storage: str
    messages: int
    rewritten: bool


def _storage_file(path: Path) -> tuple[Path, Path, str]:
    """(bag directory, storage file, storage id) of a bag directory or a bare .mcap/.db3 file."""
    if path.is_file():
        files = [path]
        bag_dir = path.parent
    elif path.is_dir():
        files = sorted(path.glob("*.mcap")) + sorted(path.glob("*.db3"))
        bag_dir = path
    else:
        raise InputError(f"bag {path} does not exist")
    files = [f for f in files if f.suffix in (".mcap", ".db3")]
    if len(files) != 1:
        raise InputError(
            f"bag {path}: expected exactly one .mcap or .db3 storage file, found {[f.name for f in files]}"
        )
    f = files[0]
    return bag_dir, f, "mcap" if f.suffix == ".mcap" else "sqlite3"


def _mcap_is_complete(path: Path) -> bool:
    size = path.stat().st_size
    if size < 8 + 37:
        return False
    with path.open("rb") as fh:
        fh.seek(-37, os.SEEK_END)
        tail = fh.read()
    return tail[-8:] == _MCAP_MAGIC and tail[0] == 0x02


def _rewrite_mcap(src: Path, dst_dir: Path, version: int) -> int:
    """Copy every complete record of a cut-off MCAP ``src`` into a new bag ``dst_dir``; returns the count."""
    from mcap.exceptions import McapError
    from mcap.reader import NonSeekingReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.rosbag2.metadata import parse_qos

    n = 0
    with src.open("rb") as fh:
        reader = NonSeekingReader(fh, validate_crcs=True)
        writer = Writer(dst_dir, version=version, storage_plugin=StoragePlugin.MCAP)  # type: ignore[arg-type]
        writer.open()
        conns: dict[int, Any] = {}
        try:
            try:
                for schema, channel, message in reader.iter_messages(log_time_order=False):
                    if channel.id not in conns:
                        if schema is None:
                            raise InputError(f"bag {src}: channel {channel.topic!r} has no schema")
                        conns[channel.id] = writer.add_connection(
                            channel.topic,
                            schema.name,
                            msgdef=schema.data.decode(),
                            rihs01=_rihs01_of(schema),
                            offered_qos_profiles=parse_qos(channel.metadata.get("offered_qos_profiles", "")),
                        )
                    writer.write(conns[channel.id], message.log_time, message.data)
                    n += 1
            except (McapError, EOFError, ValueError, OSError, KeyError, struct.error):
                # The cut-off tail: every record before it was copied. The mcap library raises
                # one of these for a record that runs past the end of the file.
                pass
            writer.close()
        except BaseException:
            writer.abort()
            raise
    return n


def _rihs01_of(schema: Any) -> str:
    """The RIHS01 type hash of an MCAP schema (MCAP schemas do not carry it): parse and hash it."""
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    text = schema.data.decode()
    store = get_typestore(Stores.EMPTY)
    if schema.encoding == "ros2msg":
        store.register(get_types_from_msg(text, schema.name))
    else:
        sep = "=" * 80 + "\n"
        parts = text.split(sep)[1:] if text.startswith(sep) else [text]
        for part in parts:
            store.register(get_types_from_idl(part.split("\n", 1)[1] if part.startswith("IDL: ") else part))
    return store.hash_rihs01(schema.name)


def custom_data(bag_dir: Path) -> dict[str, str] | None:
    """The ``custom_data`` of a bag's ``metadata.yaml`` as its last checkpoint left it (None: none,
    or no readable file)."""
    import yaml

    try:
        doc = yaml.safe_load((bag_dir / "metadata.yaml").read_text())
        data = doc["rosbag2_bagfile_information"].get("custom_data")
    except (OSError, yaml.YAMLError, TypeError, KeyError, AttributeError):
        return None
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def repair_bag(path: str | os.PathLike[str], version: int = DEFAULT_VERSION) -> RepairResult:
    """Make a bag left behind by a killed recorder readable, in place.

    - MCAP storage whose end was cut off mid-write (no closing magic): every complete record up
      to the cut is copied into a new MCAP with a full summary; the original file is kept as
      ``<name>.mcap.orig``.
    - sqlite3 storage: opened read-write once so that SQLite rolls back an interrupted transaction
      (a reader opening it read-only would not).
    - Both: ``metadata.yaml`` is rebuilt from the storage file (topics, types, QoS, counts, times);
      its ``custom_data`` (the recorder's loss report) is kept as the last checkpoint wrote it.

    Args:
        path: the bag directory (or its storage file).

    Raises:
        InputError: not a bag, or nothing readable in it.
    """
    from rosbags.rosbag2 import Reader
    from rosbags.rosbag2.errors import ReaderError

    bag_dir, store, storage = _storage_file(Path(path))
    rewritten = False
    if storage == "mcap":
        with store.open("rb") as fh:
            head = fh.read(len(_MCAP_MAGIC))
        if head != _MCAP_MAGIC:
            # random bytes or another format: there is nothing to recover, and nothing is touched
            raise InputError(f"bag {bag_dir}: {store.name} is not an MCAP file (it does not start with the MCAP "
                             "magic); nothing changed")
    if storage == "mcap" and not _mcap_is_complete(store):
        tmp_dir = bag_dir.parent / f".{bag_dir.name}.repair"
        if tmp_dir.exists():
            raise InputError(f"bag {bag_dir}: a previous repair left {tmp_dir}; remove it first")
        try:
            _rewrite_mcap(store, tmp_dir, version)
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"bag {bag_dir}: {store.name} cannot be repaired: {exc}") from exc
        orig = store.with_name(store.name + ".orig")
        store.replace(orig)
        (tmp_dir / f"{tmp_dir.name}.mcap").replace(store)
        for leftover in tmp_dir.iterdir():
            leftover.unlink()
        tmp_dir.rmdir()
        rewritten = True
    elif storage == "sqlite3":
        try:
            conn = sqlite3.connect(store)
            try:
                conn.execute("SELECT count(*) FROM messages").fetchone()
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            msg = f"bag {bag_dir}: {store.name} is not a readable rosbag2 database: {exc}"
            raise InputError(msg) from exc

    try:
        with Reader(store) as reader:
            topics = [
                (c.topic, c.msgtype, c.digest, list(c.ext.offered_qos_profiles), c.msgcount)
                for c in reader.connections
            ]
            count = reader.message_count
            start = reader.start_time if count else 0
            duration = max(0, reader.end_time - 1 - start) if count else 0
    except (ReaderError, OSError, ValueError, KeyError) as exc:
        raise InputError(f"bag {bag_dir}: {store.name} is not readable after repair: {exc}") from exc
    meta = metadata_dict(storage, version, store.name, topics, start, duration, custom_data(bag_dir))
    write_metadata(bag_dir, meta)
    return RepairResult(bag_dir, storage, count, rewritten)

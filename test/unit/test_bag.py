"""Reading bags (core.bag) and writing them (core.bagwriter).

Bags are written by independent writers: ``rosbags.rosbag2.Writer`` used directly (sqlite3 and
MCAP) and the ``mcap`` library's own Writer with CDR bytes from ``rosbags``' serializer. Bags
written by :class:`BagWriter` are read back by the ``rosbags`` and ``mcap`` readers.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap.writer import Writer as McapWriter
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import bag_topics, normalize_topic, read_progress, read_wrench
from robot_grinding_sim.core.record.bagwriter import BagWriter, TopicQos, repair_bag

TS = get_typestore(Stores.ROS2_KILTED)
WS = "geometry_msgs/msg/WrenchStamped"
WR = "geometry_msgs/msg/Wrench"
F64 = "std_msgs/msg/Float64MultiArray"
JS = "sensor_msgs/msg/JointState"
T0_NS = 1_700_000_000_000_000_000


def wrench_stamped(t_ns: int, force: Iterable[float], torque: Iterable[float] = (0, 0, 0), frame: str = "ft"):
    t = TS.types
    fx, fy, fz = (float(v) for v in force)
    mx, my, mz = (float(v) for v in torque)
    return t[WS](
        header=t["std_msgs/msg/Header"](
            stamp=t["builtin_interfaces/msg/Time"](sec=int(t_ns // 10**9), nanosec=int(t_ns % 10**9)),
            frame_id=frame,
        ),
        wrench=t[WR](force=t["geometry_msgs/msg/Vector3"](x=fx, y=fy, z=fz),
                     torque=t["geometry_msgs/msg/Vector3"](x=mx, y=my, z=mz)),
    )


def progress_msg(data: Iterable[float]):
    t = TS.types
    layout = t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    return t[F64](layout=layout, data=np.asarray(list(data), dtype=np.float64))


def joint_state(t_ns: int):
    t = TS.types
    hdr = t["std_msgs/msg/Header"](
        stamp=t["builtin_interfaces/msg/Time"](sec=int(t_ns // 10**9), nanosec=int(t_ns % 10**9)), frame_id=""
    )
    z = np.zeros(1)
    return t[JS](header=hdr, name=["j1"], position=z, velocity=z, effort=z)


def rosbags_bag(path: Path, storage: str, messages: list[tuple[str, str, int, object]]) -> Path:
    """A bag written by rosbags' Writer directly: messages are (topic, type, log time ns, msg)."""
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as w:
        conns = {}
        for topic, msgtype, _, _ in messages:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=TS)
        for topic, msgtype, t_ns, msg in messages:
            w.write(conns[topic], t_ns, TS.serialize_cdr(msg, msgtype))
    return path


def mcap_file(path: Path, messages: list[tuple[str, str, int, object]]) -> Path:
    """A bare .mcap written by the mcap library (ros2 profile, ros2msg schemas, CDR from rosbags)."""
    with path.open("wb") as fh:
        w = McapWriter(fh)
        w.start(profile="ros2", library="test")
        schemas: dict[str, int] = {}
        channels: dict[str, int] = {}
        for topic, msgtype, _, _ in messages:
            if msgtype not in schemas:
                msgdef, _ = TS.generate_msgdef(msgtype, ros_version=2)
                schemas[msgtype] = w.register_schema(msgtype, "ros2msg", msgdef.encode())
            if topic not in channels:
                channels[topic] = w.register_channel(topic, "cdr", schemas[msgtype])
        for seq, (topic, msgtype, t_ns, msg) in enumerate(messages):
            data = bytes(TS.serialize_cdr(msg, msgtype))
            w.add_message(channels[topic], log_time=t_ns, data=data, publish_time=t_ns, sequence=seq)
        w.finish()
    return path


def wrench_messages(n: int, topic: str = "/ft_sensor/wrench", period_ns: int = 1_000_000) -> list:
    """(topic, type, log time, msg): force (i, -2 i, 0.5 + i), torque (0.1 i, 0, -i); log 3 ms late."""
    out = []
    for i in range(n):
        stamp = T0_NS + i * period_ns
        msg = wrench_stamped(stamp, (i, -2 * i, 0.5 + i), (0.1 * i, 0, -i))
        out.append((topic, WS, stamp + 3_000_000, msg))
    return out


def check_series(s, n: int, period_s: float = 1e-3) -> None:
    i = np.arange(n)
    np.testing.assert_array_equal(s.force, np.c_[i, -2 * i, 0.5 + i])
    np.testing.assert_allclose(s.torque, np.c_[0.1 * i, np.zeros(n), -i], rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.t - T0_NS * 1e-9, i * period_s, atol=1e-6)
    np.testing.assert_allclose(s.t_log - s.t, 3e-3, atol=1e-6)
    assert s.frame == "ft"


# -- reading bags written by other writers ------------------------------------------------------
@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_read_wrench_from_rosbags_writer(tmp_path: Path, storage: str) -> None:
    bag = rosbags_bag(tmp_path / "bag", storage, wrench_messages(250))
    s = read_wrench(bag, "ft_sensor/wrench")  # without the leading slash
    assert len(s) == 250 and s.topic == "/ft_sensor/wrench" and s.msgtype == WS
    check_series(s, 250)
    # the storage file on its own (no metadata.yaml) reads the same
    (store,) = [p for p in bag.iterdir() if p.suffix in (".mcap", ".db3")]
    np.testing.assert_array_equal(read_wrench(store, "/ft_sensor/wrench").force, s.force)
    (bag / "metadata.yaml").unlink()
    np.testing.assert_array_equal(read_wrench(bag, "/ft_sensor/wrench").force, s.force)


def test_read_wrench_from_mcap_library_writer(tmp_path: Path) -> None:
    msgs = wrench_messages(300, period_ns=2_000_000)
    f = mcap_file(tmp_path / "run.mcap", msgs)
    s = read_wrench(f, "/ft_sensor/wrench")
    check_series(s, 300, period_s=2e-3)
    # log-time stamps instead of header stamps
    s_log = read_wrench(f, "/ft_sensor/wrench", stamp="log")
    np.testing.assert_allclose(s_log.t, s.t + 3e-3, atol=1e-6)


def test_unsorted_messages_are_sorted_by_stamp(tmp_path: Path) -> None:
    msgs = wrench_messages(50)
    shuffled = [msgs[i] for i in np.random.default_rng(1).permutation(50)]
    # log times stay increasing in the file; the header stamps arrive out of order
    shuffled = [(tp, ty, T0_NS + k, m) for k, (tp, ty, _, m) in enumerate(shuffled)]
    s = read_wrench(mcap_file(tmp_path / "x.mcap", shuffled), "/ft_sensor/wrench")
    assert np.all(np.diff(s.t) > 0)
    np.testing.assert_array_equal(s.force[:, 0], np.arange(50))


def test_unstamped_wrench_and_zero_stamp_use_log_time(tmp_path: Path) -> None:
    t = TS.types
    v = t["geometry_msgs/msg/Vector3"]
    msgs = [
        ("/w", WR, T0_NS + i * 10**6, t[WR](force=v(x=0.0, y=0.0, z=float(i)), torque=v(x=0.0, y=0.0, z=0.0)))
        for i in range(10)
    ]
    msgs += [("/ws", WS, T0_NS + i * 10**6, wrench_stamped(0, (0, 0, i))) for i in range(10)]
    bag = rosbags_bag(tmp_path / "b", "mcap", msgs)
    for topic in ("/w", "/ws"):
        s = read_wrench(bag, topic)
        np.testing.assert_allclose(s.t - T0_NS * 1e-9, np.arange(10) * 1e-3, atol=1e-6)
        np.testing.assert_array_equal(s.force[:, 2], np.arange(10))
    assert read_wrench(bag, "/w").frame == ""


def test_read_progress(tmp_path: Path) -> None:
    topic = "/grinding/progress"
    data = [[i // 10, 0.001 * (i % 10), 50.0 + 0.01 * i] for i in range(30)]
    msgs = [(topic, F64, T0_NS + i * 10**7, progress_msg(d)) for i, d in enumerate(data)]
    msgs += [("/grinding/progress", F64, T0_NS + 10**9, progress_msg([-1, 0.0]))]  # no stamp: log time
    p = read_progress(rosbags_bag(tmp_path / "b", "sqlite3", msgs))
    assert len(p) == 31
    np.testing.assert_allclose(p.t[:30], 50.0 + 0.01 * np.arange(30))
    np.testing.assert_array_equal(p.pass_index[:30], np.arange(30) // 10)
    np.testing.assert_allclose(p.arc_length[:30], 0.001 * (np.arange(30) % 10))
    assert p.pass_index[-1] == -1 and p.t[-1] == pytest.approx(T0_NS * 1e-9 + 1.0)


def test_bag_topics_and_normalize() -> None:
    assert normalize_topic("contact/wrench") == "/contact/wrench"
    assert normalize_topic("/contact/wrench") == "/contact/wrench"
    with pytest.raises(InputError):
        normalize_topic("/")


# -- bad input: errors name the bag and the topic -----------------------------------------------
def assert_names(exc: pytest.ExceptionInfo, *parts: str) -> None:
    text = str(exc.value)
    assert "\n" not in text
    for p in parts:
        assert p in text, f"{p!r} not in {text!r}"


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_missing_topic(tmp_path: Path, storage: str) -> None:
    bag = rosbags_bag(tmp_path / "b", storage, wrench_messages(5))
    with pytest.raises(InputError) as exc:
        read_wrench(bag, "/contact/wrench")
    assert_names(exc, str(bag), "/contact/wrench", "/ft_sensor/wrench")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_empty_bag(tmp_path: Path, storage: str) -> None:
    bag = rosbags_bag(tmp_path / "empty", storage, [])
    with pytest.raises(InputError) as exc:
        read_wrench(bag, "/ft_sensor/wrench")
    assert_names(exc, str(bag), "/ft_sensor/wrench", "empty")


def test_topic_without_messages(tmp_path: Path) -> None:
    plugin = StoragePlugin.MCAP
    with Writer(tmp_path / "b", version=9, storage_plugin=plugin) as w:
        w.add_connection("/ft_sensor/wrench", WS, typestore=TS)
    with pytest.raises(InputError) as exc:
        read_wrench(tmp_path / "b", "/ft_sensor/wrench")
    assert_names(exc, str(tmp_path / "b"), "/ft_sensor/wrench", "no messages")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_not_a_wrench(tmp_path: Path, storage: str) -> None:
    bag = rosbags_bag(tmp_path / "b", storage, [("/ft_sensor/wrench", JS, T0_NS, joint_state(T0_NS))])
    with pytest.raises(InputError) as exc:
        read_wrench(bag, "/ft_sensor/wrench")
    assert_names(exc, str(bag), "/ft_sensor/wrench", JS, WS)
    with pytest.raises(InputError) as exc:
        read_progress(bag, "/ft_sensor/wrench")
    assert_names(exc, str(bag), "/ft_sensor/wrench", F64)


def test_truncated_mcap(tmp_path: Path) -> None:
    f = mcap_file(tmp_path / "run.mcap", wrench_messages(2000))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as exc:
        read_wrench(f, "/ft_sensor/wrench")
    assert_names(exc, str(f), "truncated")


def test_truncated_db3(tmp_path: Path) -> None:
    bag = rosbags_bag(tmp_path / "b", "sqlite3", wrench_messages(3000))
    (db,) = bag.glob("*.db3")
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError) as exc:
        read_wrench(bag, "/ft_sensor/wrench")
    assert_names(exc, str(bag))


def test_not_a_bag(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for p in (tmp_path / "notes.txt", tmp_path / "missing"):
        with pytest.raises(InputError) as exc:
            read_wrench(p, "/w")
        assert_names(exc, str(p))
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"not an mcap file at all" * 10)
    with pytest.raises(InputError) as exc:
        read_wrench(junk, "/w")
    assert_names(exc, str(junk))


def test_nan_wrench_is_refused(tmp_path: Path) -> None:
    msgs = wrench_messages(3)
    msgs.append(("/ft_sensor/wrench", WS, T0_NS + 10**7, wrench_stamped(T0_NS + 10**7, (np.nan, 0, 0))))
    with pytest.raises(InputError) as exc:
        read_wrench(rosbags_bag(tmp_path / "b", "mcap", msgs), "/ft_sensor/wrench")
    assert_names(exc, "/ft_sensor/wrench", "NaN")


# -- BagWriter: read back by readers that did not write it --------------------------------------
def _write_with_bagwriter(path: Path, storage: str, n: int, flush_at: int | None = None) -> BagWriter:
    bw = BagWriter(path, storage=storage).open()
    bw.add_topic("/ft_sensor/wrench", WS, qos=[TopicQos(reliable=True, depth=1000)])
    bw.add_topic("/joint_states", JS, qos=[TopicQos(reliable=False)])
    for i, (topic, msgtype, t_ns, msg) in enumerate(wrench_messages(n)):
        bw.write(topic, t_ns, bw.serialize(msg, msgtype))
        if i % 10 == 0:
            bw.write("/joint_states", t_ns, bw.serialize(joint_state(t_ns), JS))
        if flush_at is not None and i + 1 == flush_at:
            bw.flush()
    return bw


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_bagwriter_round_trip(tmp_path: Path, storage: str) -> None:
    bw = _write_with_bagwriter(tmp_path / "rec", storage, 400)
    assert bw.counts == {"/ft_sensor/wrench": 400, "/joint_states": 40}
    bw.close()
    check_series(read_wrench(tmp_path / "rec", "/ft_sensor/wrench"), 400)
    with AnyReader([tmp_path / "rec"]) as r:
        counts = {c.topic: c.msgcount for c in r.connections}
        assert counts == {"/ft_sensor/wrench": 400, "/joint_states": 40}
        qos = {c.topic: c.ext.offered_qos_profiles[0] for c in r.connections}
        assert qos["/ft_sensor/wrench"].reliability.name == "RELIABLE"
        assert qos["/joint_states"].reliability.name == "BEST_EFFORT"
    meta = yaml.safe_load((tmp_path / "rec" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert meta["storage_identifier"] == storage and meta["message_count"] == 440
    per_topic = {t["topic_metadata"]["name"]: t["message_count"] for t in meta["topics_with_message_count"]}
    assert per_topic == counts
    if storage == "mcap":
        with (tmp_path / "rec" / "rec.mcap").open("rb") as fh:
            reader = make_reader(fh)
            topics = [ch.topic for _, ch, _ in reader.iter_messages()]
            assert topics.count("/ft_sensor/wrench") == 400 and topics.count("/joint_states") == 40
            schemas = {s.name for s in reader.get_summary().schemas.values()}
            assert schemas == {WS, JS}


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_checkpoint_survives_a_killed_writer(tmp_path: Path, storage: str) -> None:
    """Copy the bag directory after a flush and more (unflushed) writes: what a SIGKILL leaves."""
    bw = _write_with_bagwriter(tmp_path / "rec", storage, 700, flush_at=500)
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "rec", killed)
    bw.close()
    (store,) = [p for p in killed.iterdir() if p.suffix in (".mcap", ".db3")]
    store.rename(killed / ("killed" + store.suffix))  # metadata names the original file
    meta = (killed / "metadata.yaml").read_text().replace(f"rec{store.suffix}", f"killed{store.suffix}")
    (killed / "metadata.yaml").write_text(meta)
    s = read_wrench(killed, "/ft_sensor/wrench")
    assert len(s) == 500
    check_series(s, 500)
    if storage == "mcap":
        with (killed / f"killed{store.suffix}").open("rb") as fh:
            n = sum(1 for _, ch, _ in make_reader(fh).iter_messages() if ch.topic == "/ft_sensor/wrench")
        assert n == 500


def test_repair_cut_off_mcap(tmp_path: Path) -> None:
    bw = _write_with_bagwriter(tmp_path / "rec", "mcap", 600, flush_at=300)
    bw.flush()  # second checkpoint: 600 messages in two chunks
    data = (tmp_path / "rec" / "rec.mcap").read_bytes()
    bw.close()
    cut = tmp_path / "cut"
    cut.mkdir()
    # drop the checkpoint tail (37 bytes), the second chunk's message indexes (~5 kB) and the end of
    # the chunk itself (~35 kB): the file is cut in the middle of a record
    (cut / "cut.mcap").write_bytes(data[: len(data) - 37 - 15000])
    with pytest.raises(InputError):
        read_wrench(cut, "/ft_sensor/wrench")
    res = repair_bag(cut)
    assert res.rewritten and res.storage == "mcap"
    s = read_wrench(cut, "/ft_sensor/wrench")
    assert len(s) == 300  # every message of the first checkpoint, none of the cut chunk
    check_series(s, 300)
    assert (cut / "cut.mcap.orig").exists() and (cut / "metadata.yaml").exists()
    with AnyReader([cut]) as r:
        assert {c.topic: c.msgcount for c in r.connections} == {"/ft_sensor/wrench": 300, "/joint_states": 30}


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_repair_rebuilds_metadata(tmp_path: Path, storage: str) -> None:
    _write_with_bagwriter(tmp_path / "rec", storage, 120).close()
    meta = tmp_path / "rec" / "metadata.yaml"
    before = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
    meta.unlink()
    res = repair_bag(tmp_path / "rec")
    assert not res.rewritten and res.messages == 132
    after = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
    for key in ("message_count", "storage_identifier", "relative_file_paths", "starting_time"):
        assert after[key] == before[key], key
    assert after["duration"]["nanoseconds"] == before["duration"]["nanoseconds"]
    check_series(read_wrench(tmp_path / "rec", "/ft_sensor/wrench"), 120)


def test_bagwriter_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="storage"):
        BagWriter(tmp_path / "a", storage="rosbag1")
    (tmp_path / "exists").mkdir()
    with pytest.raises(InputError, match="exists"):
        BagWriter(tmp_path / "exists")
    with BagWriter(tmp_path / "b") as bw:
        with pytest.raises(InputError, match="no_such_msgs/msg/Thing"):
            bw.add_topic("/x", "no_such_msgs/msg/Thing")
        with pytest.raises(InputError, match="/y"):
            bw.write("/y", 0, b"")
        bw.add_topic("/x", WS)
        with pytest.raises(InputError, match="already"):
            bw.add_topic("/x", WS)
    assert [t.name for t in bag_topics(tmp_path / "b")] == ["/x"]


def test_cli_repair(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from robot_grinding_sim.cli import main as grinding

    _write_with_bagwriter(tmp_path / "rec", "mcap", 50).close()
    (tmp_path / "rec" / "metadata.yaml").unlink()
    assert grinding(["record", "--repair", str(tmp_path / "rec"), "--json"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["messages"] == 55 and doc["rewritten"] is False
    assert grinding(["record", "--repair", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "nothing") in err[0]


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_flush_with_fsync_and_repeated_flushes(tmp_path: Path, storage: str) -> None:
    bw = BagWriter(tmp_path / "rec", storage=storage, fsync=True).open()
    bw.add_topic("/ft_sensor/wrench", WS)
    for k, (topic, msgtype, t_ns, msg) in enumerate(wrench_messages(30)):
        bw.write(topic, t_ns, bw.serialize(msg, msgtype))
        bw.flush()
        bw.flush()  # nothing new: must not disturb the file
        assert len(read_wrench(tmp_path / "rec", "/ft_sensor/wrench")) == k + 1
    bw.close()
    check_series(read_wrench(tmp_path / "rec", "/ft_sensor/wrench"), 30)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_custom_data_is_in_the_metadata_at_checkpoints_at_close_and_after_a_repair(tmp_path: Path,
                                                                                   storage: str) -> None:
    """The recorder's report lives in rosbag2's custom_data: written at each checkpoint, at close
    (rosbags' own writer), read back by rosbags' reader and by recording_report; a repaired bag
    keeps what the last checkpoint wrote."""
    import json

    from robot_grinding_sim.core.record.bag import RECORDER_REPORT_KEY, recording_report

    bw = _write_with_bagwriter(tmp_path / "rec", storage, 100)
    report = {"topics": {"/ft_sensor/wrench": {"received": 100, "lost": 3}}, "write_errors": 0}
    bw.set_custom_data(RECORDER_REPORT_KEY, json.dumps(report))
    bw.flush()
    meta = tmp_path / "rec" / "metadata.yaml"
    custom = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]["custom_data"]
    assert json.loads(custom[RECORDER_REPORT_KEY]) == report
    report["topics"]["/ft_sensor/wrench"]["lost"] = 4
    bw.set_custom_data(RECORDER_REPORT_KEY, json.dumps(report))
    bw.close()
    custom = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]["custom_data"]  # rosbags' close
    assert json.loads(custom[RECORDER_REPORT_KEY]) == report
    check_series(read_wrench(tmp_path / "rec", "/ft_sensor/wrench"), 100)
    assert recording_report(tmp_path / "rec") == report
    res = repair_bag(tmp_path / "rec")
    assert res.messages == 110 and recording_report(tmp_path / "rec") == report
    with pytest.raises(InputError, match="custom_data"):
        bw.set_custom_data(RECORDER_REPORT_KEY, 3)  # type: ignore[arg-type]
    assert recording_report(_write_bag(tmp_path / "other", [])) is None


def _write_bag(path: Path, msgs: list) -> Path:
    from robot_grinding_sim.core.record.bagwriter import write_bag

    return write_bag(path, msgs, {"/ft_sensor/wrench": WS})

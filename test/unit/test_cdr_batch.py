"""The bulk paths of the job's outputs give what the per-message paths give, to the byte:
cdr_batch layouts vs rosbags' serialize_cdr, BagWriter.write_many vs write (the whole MCAP file),
FTSensorModel.measure_many vs measure, batched link poses and /tf transforms vs one at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.contact.ft_sensor import FTSensorModel, FTSensorParams
from robot_grinding_sim.core.record import cdr_batch
from robot_grinding_sim.core.record.bagwriter import BagWriter, default_typestore
from robot_grinding_sim.core.record.tf_tree import DEFAULT_TF_RATE, TF_TYPE, RobotTf, TfStream, tf_message

STAMPS = np.array([0, 1_500_000_001, 605_910_000_000, 2_999_999_999])


@pytest.fixture(scope="module")
def ts():
    return default_typestore()


def _time(T, ns):
    return T["builtin_interfaces/msg/Time"](sec=int(ns // 10**9), nanosec=int(ns % 10**9))


def test_layouts_match_rosbags(ts) -> None:
    T = ts.types
    H, V3, Q = T["std_msgs/msg/Header"], T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    rng = np.random.default_rng(1)
    n = len(STAMPS)
    v = rng.normal(size=(n, 6))
    out = cdr_batch.wrench_stamped("tcp").pack(STAMPS, v)
    for k in range(n):
        m = T["geometry_msgs/msg/WrenchStamped"](header=H(stamp=_time(T, STAMPS[k]), frame_id="tcp"),
                                                 wrench=T["geometry_msgs/msg/Wrench"](force=V3(*v[k, :3]),
                                                                                      torque=V3(*v[k, 3:])))
        assert bytes(ts.serialize_cdr(m, "geometry_msgs/msg/WrenchStamped")) == out[k].tobytes()
    names = ["shoulder_pan_joint", "a", "elbow_joint", "bb", "ccc", "wrist_3_joint"]
    v = rng.normal(size=(n, 18))
    out = cdr_batch.joint_state(names).pack(STAMPS, v)
    for k in range(n):
        m = T["sensor_msgs/msg/JointState"](header=H(stamp=_time(T, STAMPS[k]), frame_id=""), name=names,
                                            position=v[k, :6], velocity=v[k, 6:12], effort=v[k, 12:])
        assert bytes(ts.serialize_cdr(m, "sensor_msgs/msg/JointState")) == out[k].tobytes()
    v = rng.normal(size=(n, 7))
    out = cdr_batch.pose_stamped("base_link").pack(STAMPS, v)
    for k in range(n):
        m = T["geometry_msgs/msg/PoseStamped"](header=H(stamp=_time(T, STAMPS[k]), frame_id="base_link"),
                                               pose=T["geometry_msgs/msg/Pose"](
                                                   position=T["geometry_msgs/msg/Point"](*v[k, :3]),
                                                   orientation=Q(*v[k, 3:])))
        assert bytes(ts.serialize_cdr(m, "geometry_msgs/msg/PoseStamped")) == out[k].tobytes()
    frames = [("base_link", "shoulder_link"), ("shoulder_link", "upper_arm_link"), ("x", "yy")]
    v = rng.normal(size=(n, 21))
    out = cdr_batch.tf_message(frames).pack(STAMPS, v)
    for k in range(n):
        tr = [T["geometry_msgs/msg/TransformStamped"](
            header=H(stamp=_time(T, STAMPS[k]), frame_id=p), child_frame_id=c,
            transform=T["geometry_msgs/msg/Transform"](translation=V3(*v[k, 7 * i:7 * i + 3]),
                                                       rotation=Q(*v[k, 7 * i + 3:7 * i + 7])))
            for i, (p, c) in enumerate(frames)]
        m = T["tf2_msgs/msg/TFMessage"](transforms=tr)
        assert bytes(ts.serialize_cdr(m, "tf2_msgs/msg/TFMessage")) == out[k].tobytes()
    v = rng.normal(size=(n, 3))
    out = cdr_batch.float64_multi_array(3).pack(STAMPS, v)
    for k in range(n):
        m = T["std_msgs/msg/Float64MultiArray"](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                                                data=v[k])
        assert bytes(ts.serialize_cdr(m, "std_msgs/msg/Float64MultiArray")) == out[k].tobytes()
    with pytest.raises(ValueError):
        cdr_batch.wrench_stamped("tcp").pack(STAMPS, np.zeros((n, 5)))


def _bag(d: Path, batch: bool, a, b, c, ns) -> dict[str, bytes]:
    with BagWriter(d / "bag") as bag:
        for t in ("/a", "/b", "/c"):
            bag.add_topic(t, "std_msgs/msg/String")
        bag.write("/c", 1, b"xx")
        if batch:
            for s in range(0, len(ns), 7777):
                bag.write_many(["/a", "/b"], ns[s:s + 7777], [a[s:s + 7777], b[s:s + 7777]])
            bag.write_many(["/c"], ns[:len(c)], [c])
        else:
            for k in range(len(ns)):
                bag.write("/a", int(ns[k]), a[k].tobytes())
                bag.write("/b", int(ns[k]), b[k].tobytes())
            for k in range(len(c)):
                bag.write("/c", int(ns[k]), c[k].tobytes())
        assert bag.counts == {"/a": len(ns), "/b": len(ns), "/c": len(c) + 1}
    return {f.name: f.read_bytes() for f in sorted((d / "bag").iterdir())}


def test_write_many_writes_the_same_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 30_000  # several 1 MiB chunks, chunks closing between the two topics of a stamp
    ns = np.arange(n) * 1_000_000 + 5
    a = rng.integers(0, 255, (n, 120), dtype=np.uint8)
    b = rng.integers(0, 255, (n, 64), dtype=np.uint8)
    c = rng.integers(0, 255, (n // 3, 77), dtype=np.uint8)
    (tmp_path / "one").mkdir()
    (tmp_path / "many").mkdir()
    assert _bag(tmp_path / "one", False, a, b, c, ns) == _bag(tmp_path / "many", True, a, b, c, ns)


@pytest.mark.parametrize("kw", [{}, {"noise_std": [0.05] * 3 + [0.002] * 3, "seed": 4},
                                {"cutoff_hz": 200.0, "bias": [0.3, -0.2, 0.5, 0.01, -0.01, 0.005]},
                                {"noise_std": [0.1] * 6, "cutoff_hz": 50.0}])
def test_measure_many_is_measure(kw: dict) -> None:
    rng = np.random.default_rng(3)
    K = 2000
    X = np.eye(4)
    X[:3, :3] = Rotation.random(random_state=1).as_matrix()
    X[:3, 3] = [0.01, 0.02, 0.15]
    W = rng.normal(size=(K, 6)) * 5
    R = Rotation.random(K, random_state=2).as_matrix()
    t = np.arange(K) * 1e-3
    t[1200:] -= 0.5  # a reset of the filter
    p = FTSensorParams(X_S_tcp=X, tool_mass=2.18, tool_com=[0, 0.001, 0.08], **kw)
    one, many = FTSensorModel(p), FTSensorModel(p)
    expected = np.array([one.measure(W[k], R[k], t[k]) for k in range(K)])
    got = np.vstack([many.measure_many(W[:700], R[:700], t[:700]), many.measure_many(W[700:], R[700:], t[700:])])
    assert np.array_equal(expected, got)
    assert np.array_equal(one.measure(W[0], R[0], 5.0), many.measure(W[0], R[0], 5.0))


def test_batched_link_poses_and_tf(ts) -> None:
    from robot_grinding_sim.core.resources import default_urdf
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    model = RobotModel.from_urdf(default_urdf())
    urdf = Path(model.source).read_text()
    q = np.random.default_rng(0).uniform(-3, 3, (300, model.nq))
    batch = model.link_poses(q)
    for i in (0, 17, 299):
        one = model.link_poses(q[i])
        assert all(np.array_equal(one[n], batch[n][i]) for n in one)
    stamps = np.arange(300) * 1_000_000  # 1 kHz: /tf at 100 Hz
    tree = RobotTf(model, urdf)
    a, b = TfStream(tree, ts, DEFAULT_TF_RATE), TfStream(RobotTf(model, urdf), ts, DEFAULT_TF_RATE)
    # what rosbags serializes from its own message objects, at the due stamps (every 10 ms)
    expected = [(0, "/tf_static", bytes(ts.serialize_cdr(tf_message(ts, tree.static, 0), TF_TYPE)))]
    expected += [(k, "/tf", bytes(ts.serialize_cdr(tf_message(ts, tree.transforms(q[k]), int(stamps[k])), TF_TYPE)))
                 for k in range(0, 300, 10)]
    assert [(k, topic, data) for k in range(300) for topic, data in a.add(int(stamps[k]), q[k])] == expected
    static, idx, rows = b.add_many(stamps[:150], q[:150])
    _, idx2, rows2 = b.add_many(stamps[150:], q[150:])
    got = [(0, "/tf_static", static)] + [(int(k), "/tf", r.tobytes()) for k, r in zip(
        np.concatenate([idx, 150 + idx2]), np.vstack([rows, rows2]), strict=True)]
    got.sort(key=lambda x: (x[0], x[1] != "/tf_static"))
    assert got == expected
    assert a.count == b.count


def test_accumulate_many_is_accumulate() -> None:
    from robot_grinding_sim.core.contact.preston import RemovalGrid

    rng = np.random.default_rng(5)
    g = np.stack(np.meshgrid(np.arange(0, 0.05, 5e-4), np.arange(0, 0.05, 5e-4)), -1).reshape(-1, 2)
    nodes = np.column_stack([g, np.zeros(len(g))])
    one, many = (RemovalGrid(nodes, np.full(len(nodes), 2.5e-7), shape=(100, 100)) for _ in range(2))
    M = 400
    args = (rng.random((M, 3)) * [0.05, 0.05, 0.0], np.tile([0.0, 0.0, 1.0], (M, 1)),
            np.where(rng.random(M) < 0.2, 0.0, rng.random(M) * 10),
            np.where(rng.random(M) < 0.2, 0.0, rng.random(M) * 3e-3),
            rng.random((M, 3)), rng.normal(size=(M, 3)) * 100, rng.normal(size=(M, 3)) * 0.01, np.full(M, 1e-3))
    expected = [one.accumulate(*(a[i] for a in args)) for i in range(M)]
    got = many.accumulate_many(*args)
    assert np.array_equal(expected, got) and np.array_equal(one.depth, many.depth) and one.work == many.work


def test_progress_markers_cdr_is_serialize(ts) -> None:
    from robot_grinding_sim.core.record.scene_markers import MARKER_ARRAY_TYPE, SceneMessages

    scene = SceneMessages(ts, "base_link")
    rng = np.random.default_rng(2)
    traces = {k: rng.normal(size=(int(rng.integers(2, 40)), 3)) for k in range(6)}
    cache: dict = {}
    for step in range(40):  # passes finished one after the other, texts of varied lengths: both alignments
        current = step // 7
        lines = [(k, traces[k]) for k in range(current)]
        if current < 6:
            lines.append((current, traces[current][:2 + step % 7]))
        ns = 1_000_000_000 * step + 123
        text = "running" + "." * (step % 5)
        expected = bytes(ts.serialize_cdr(scene.progress_markers(ns, lines, np.ones(3), text), MARKER_ARRAY_TYPE))
        assert scene.progress_markers_cdr(ns, lines, np.ones(3), text, range(current), cache) == expected
    assert cache

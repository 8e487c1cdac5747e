"""The in-process job's bag carries what a 3D viewer needs to replay the job without ROS.

A short job (two 20 mm passes on the curved panel, no optimisation, removal on) is run and its
outputs written as ``grinding demo`` writes them. The MCAP file is read with the ``mcap`` library
and every message decoded with ``cdr_reader`` (the schema text stored in the file + CDR, as
Foxglove decodes it; no code shared with the writer, ``rosbags``). The figures they are checked
against come from elsewhere: the robot's FK from Pinocchio on the URDF text, the fixed joints from
the URDF's XML, the workpiece pose and the pass points from plan.json (written by plan_io), the
part's extent from its exact CAD bounds.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdr_reader import decode
from mcap.reader import make_reader
from scipy.spatial.transform import Rotation

URDF = Path(__file__).resolve().parents[2] / "urdf" / "ur10e_grinding.urdf"
VIEWER_TOPICS = {"/tf": "tf2_msgs/msg/TFMessage", "/tf_static": "tf2_msgs/msg/TFMessage",
                 "/robot_description": "std_msgs/msg/String",
                 "/planner_node/markers": "visualization_msgs/msg/MarkerArray",
                 "/grinding/removal": "visualization_msgs/msg/MarkerArray",
                 "/grinding/progress_markers": "visualization_msgs/msg/MarkerArray",
                 "/contact/force_marker": "visualization_msgs/msg/Marker"}
ARROW, LINE_STRIP, TEXT_VIEW_FACING, TRIANGLE_LIST, DELETE, DELETEALL = 0, 4, 9, 11, 2, 3


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from robot_grinding_sim.core.job.outputs import write_outputs
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig

    out = tmp_path_factory.mktemp("viewer") / "job"
    result = run_job(JobConfig(max_passes=2, pass_length=0.02, optimise=False))
    assert result.removal is not None  # removal.enabled is the default
    write_outputs(out, result, result.summary())
    (mcap_file,) = (out / "bag").glob("*.mcap")
    msgs: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    schemas: dict[str, str] = {}
    with mcap_file.open("rb") as f:
        for schema, channel, message in make_reader(f).iter_messages(log_time_order=True):
            schemas[channel.topic] = schema.name
            msgs.setdefault(channel.topic, []).append(
                (message.log_time, decode(schema.name, schema.data.decode(), message.data)))
    return {"msgs": msgs, "schemas": schemas, "plan": json.loads((out / "plan.json").read_text()),
            "summary": json.loads((out / "summary.json").read_text())}


def ns(stamp: dict[str, int]) -> int:
    return stamp["sec"] * 1_000_000_000 + stamp["nanosec"]


def matrix(tf: dict[str, Any]) -> np.ndarray:
    t, r = tf["translation"], tf["rotation"]
    X = np.eye(4)
    X[:3, :3] = Rotation.from_quat([r["x"], r["y"], r["z"], r["w"]]).as_matrix()
    X[:3, 3] = [t["x"], t["y"], t["z"]]
    return X


def compose(edges: dict[str, tuple[str, np.ndarray]], root: str) -> dict[str, np.ndarray]:
    """Every frame's pose in ``root`` from child -> (parent, pose in parent) edges."""
    out = {root: np.eye(4)}

    def pose(frame: str) -> np.ndarray:
        if frame not in out:
            parent, X = edges[frame]
            out[frame] = pose(parent) @ X
        return out[frame]

    for frame in edges:
        pose(frame)
    return out


def pinocchio_link_poses(urdf: str, names: list[str], q: np.ndarray) -> dict[str, np.ndarray]:
    import pinocchio as pin

    model = pin.buildModelFromXML(urdf)
    data = model.createData()
    qp = pin.neutral(model)
    for name, v in zip(names, q, strict=True):
        qp[model.joints[model.getJointId(name)].idx_q] = v
    pin.framesForwardKinematics(model, data, qp)
    return {f.name: data.oMf[k].homogeneous for k, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}


def test_the_bag_has_the_viewer_topics_with_their_types(job: dict[str, Any]) -> None:
    for topic, msgtype in VIEWER_TOPICS.items():
        assert topic in job["msgs"], topic
        assert job["schemas"][topic] == msgtype
    counts = {t: len(m) for t, m in job["msgs"].items()}
    assert counts == job["summary"]["bag_counts"]
    assert counts["/tf_static"] == counts["/robot_description"] == counts["/planner_node/markers"] == 1


def test_robot_description_is_the_urdf(job: dict[str, Any]) -> None:
    ((t, msg),) = job["msgs"]["/robot_description"]
    assert msg["data"] == URDF.read_text()
    assert t == job["msgs"]["/joint_states"][0][0]  # there from the first message on


def test_tf_equals_pinocchio_fk_of_the_recorded_joint_states(job: dict[str, Any]) -> None:
    urdf = URDF.read_text()
    joints = ET.fromstring(urdf).findall("joint")
    fixed = {(j.find("parent").get("link"), j.find("child").get("link")) for j in joints if j.get("type") == "fixed"}
    moving = {(j.find("parent").get("link"), j.find("child").get("link")) for j in joints if j.get("type") != "fixed"}
    ((_, static),) = job["msgs"]["/tf_static"]
    static_edges = {tf["child_frame_id"]: (tf["header"]["frame_id"], matrix(tf["transform"]))
                    for tf in static["transforms"]}
    assert {(p, c) for c, (p, _) in static_edges.items()} == fixed | {("base_link", "workpiece")}

    joint_states = {ns(m["header"]["stamp"]): m for _, m in job["msgs"]["/joint_states"]}
    tfs = job["msgs"]["/tf"]
    stamps = np.array([ns(m["transforms"][0]["header"]["stamp"]) for _, m in tfs])
    # 100 Hz of sim time over the whole job, every /tf stamped like a joint state, logged at its stamp
    span = (max(joint_states) - min(joint_states)) * 1e-9
    assert len(tfs) == pytest.approx(span * 100 + 1, abs=1)
    assert np.all(np.diff(stamps) == 10_000_000)
    assert [t for t, _ in tfs] == list(stamps)
    worst_p = worst_r = 0.0
    links = {c for _, c in fixed | moving} | {"base_link"}
    for k, (_, msg) in enumerate(tfs):
        assert {(tf["header"]["frame_id"], tf["child_frame_id"]) for tf in msg["transforms"]} == moving
        assert {ns(tf["header"]["stamp"]) for tf in msg["transforms"]} == {stamps[k]}
        js = joint_states[stamps[k]]
        edges = dict(static_edges)
        edges.update({tf["child_frame_id"]: (tf["header"]["frame_id"], matrix(tf["transform"]))
                      for tf in msg["transforms"]})
        tree = compose(edges, "base_link")
        if k % 10:
            continue  # Pinocchio on every 10th (the tree's shape is checked on all)
        ref = pinocchio_link_poses(urdf, js["name"], np.array(js["position"]))
        for link in links:
            worst_p = max(worst_p, float(np.abs(tree[link][:3, 3] - ref[link][:3, 3]).max()))
            worst_r = max(worst_r, float(np.abs(tree[link][:3, :3] - ref[link][:3, :3]).max()))
    assert worst_p < 1e-9 and worst_r < 1e-9, (worst_p, worst_r)
    # the workpiece frame is the plan's workpiece pose
    wp = job["plan"]["part"]["workpiece_pose"]
    X = static_edges["workpiece"][1]
    assert np.allclose(X[:3, 3], wp["position"], atol=1e-12)
    assert np.allclose(X[:3, :3], Rotation.from_quat(wp["orientation"]).as_matrix(), atol=1e-12)


def test_part_and_pass_markers(job: dict[str, Any]) -> None:
    from robot_grinding_sim.core.geometry import parts

    ((t, msg),) = job["msgs"]["/planner_node/markers"]
    assert t == job["msgs"]["/joint_states"][0][0]
    markers = msg["markers"]
    assert markers[0]["action"] == DELETEALL
    wp = job["plan"]["part"]["workpiece_pose"]
    R, o = Rotation.from_quat(wp["orientation"]).as_matrix(), np.array(wp["position"])
    passes = [m for m in markers if m["ns"] == "passes"]
    assert [m["type"] for m in passes] == [LINE_STRIP] * len(job["plan"]["passes"]) == [LINE_STRIP] * 2
    for m, p in zip(passes, job["plan"]["passes"], strict=True):
        assert m["header"]["frame_id"] == "base_link" and m["scale"]["x"] == 0.001
        pts = np.array([[q["x"], q["y"], q["z"]] for q in m["points"]])
        ref = np.array([w["surface_point"] for w in p["waypoints"]]) @ R.T + o
        assert pts.shape == ref.shape and np.abs(pts - ref).max() < 1e-9
    (part,) = [m for m in markers if m["ns"] == "part"]
    assert part["type"] == TRIANGLE_LIST and part["color"]["a"] == 1.0
    tri = np.array([[q["x"], q["y"], q["z"]] for q in part["points"]])
    assert len(tri) % 3 == 0 and len(tri) > 300
    lo, hi = parts.load_part("curved_panel").bounds  # exact CAD bounds, part frame
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]) @ R.T + o
    # the tessellation spans the part: its box equals the exact one within the chordal tolerance
    assert np.abs(tri.min(axis=0) - corners.min(axis=0)).max() < 5e-4
    assert np.abs(tri.max(axis=0) - corners.max(axis=0)).max() < 5e-4


def test_progress_markers_grow_along_the_passes(job: dict[str, Any]) -> None:
    """/grinding/progress_markers: at each stamp the ``ground`` lines are the plan's passes (from
    plan.json) up to the /grinding/progress arc of that time (the TCP arc mapped onto the surface
    points here); at the end both passes whole and the text says done."""
    plan = job["plan"]
    wp = plan["part"]["workpiece_pose"]
    R, o = Rotation.from_quat(wp["orientation"]).as_matrix(), np.array(wp["position"])
    surf, arcs = [], []
    for p in plan["passes"]:
        surf.append(np.array([w["surface_point"] for w in p["waypoints"]]) @ R.T + o)
        tcp = np.array([w["tcp"]["position"] for w in p["waypoints"]])
        arcs.append(np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(tcp, axis=0), axis=1))])
    progress = [(t, m["data"]) for t, m in job["msgs"]["/grinding/progress"]]
    frames = job["msgs"]["/grinding/progress_markers"]
    assert len(frames) > 10
    partial = 0
    for t, msg in frames[:-1]:
        last = [d for tp, d in progress if tp <= t and d[0] >= 0]
        lines = {m["id"]: np.array([[q["x"], q["y"], q["z"]] for q in m["points"]])
                 for m in msg["markers"] if m["ns"] == "ground" and m["type"] == LINE_STRIP}
        if not last:
            assert not lines
            continue
        k, arc = int(last[-1][0]), last[-1][1]
        assert set(lines) == set(range(k + 1)) or (set(lines) == set(range(k)) and arc < 1e-9)
        for j in range(k):
            np.testing.assert_allclose(lines[j], surf[j], atol=1e-12)
        if k in lines and arc < arcs[k][-1]:
            partial += 1
            end = np.array([np.interp(arc, arcs[k], surf[k][:, i]) for i in range(3)])
            np.testing.assert_allclose(lines[k][-1], end, atol=1e-12)
            np.testing.assert_allclose(lines[k][:-1], surf[k][arcs[k] <= arc], atol=1e-12)
        (text,) = [m for m in msg["markers"] if m["ns"] == "status"]
        assert text["type"] == TEXT_VIEW_FACING and text["text"].startswith("running")
    assert partial >= 5
    _, final = frames[-1]
    lines = [m for m in final["markers"] if m["ns"] == "ground"]
    assert len(lines) == 2
    (text,) = [m for m in final["markers"] if m["ns"] == "status"]
    assert text["text"] == "done: 2/2 passes ground"


def test_removal_marker_lies_on_the_ground_track(job: dict[str, Any]) -> None:
    ((t, msg),) = job["msgs"]["/grinding/removal"]
    assert t == job["msgs"]["/joint_states"][-1][0]  # the final map, at the end of the job
    (m,) = msg["markers"]
    assert m["type"] == TRIANGLE_LIST and m["ns"] == "removal" and m["header"]["frame_id"] == "base_link"
    pts = np.array([[q["x"], q["y"], q["z"]] for q in m["points"]])
    cols = np.array([[c["r"], c["g"], c["b"]] for c in m["colors"]])
    assert len(pts) == len(cols) and len(pts) % 3 == 0 and len(pts) > 0
    wp = job["plan"]["part"]["workpiece_pose"]
    R, o = Rotation.from_quat(wp["orientation"]).as_matrix(), np.array(wp["position"])
    track = np.vstack([np.array([w["surface_point"] for w in p["waypoints"]]) for p in job["plan"]["passes"]]) @ R.T + o
    hot = pts[cols.sum(axis=1) > 2.5]  # white/yellow: the deepest removal
    assert len(hot)
    gap = np.linalg.norm(hot[:, None, :] - track[None, :, :], axis=2).min(axis=1)
    # within the contact patch (about 1.4 mm at 50 um) and one display cell (1 mm) of a pass
    assert gap.max() < 2.5e-3, gap.max()


def test_force_arrow_is_the_contact_wrench_in_base_axes(job: dict[str, Any]) -> None:
    """/contact/force_marker (Foxglove has no wrench display) = /contact/wrench (frame tcp) turned
    into base_link by the bag's own TF tree, 1 cm per N, from a point on the ball (radius 20 mm)."""
    ((_, static),) = job["msgs"]["/tf_static"]
    edges = {tf["child_frame_id"]: (tf["header"]["frame_id"], matrix(tf["transform"])) for tf in static["transforms"]}
    tf_at = {ns(m["transforms"][0]["header"]["stamp"]): m for _, m in job["msgs"]["/tf"]}
    wrench = {ns(m["header"]["stamp"]): m for _, m in job["msgs"]["/contact/wrench"]}
    arrows = job["msgs"]["/contact/force_marker"]
    assert [t for t, _ in arrows] == sorted(tf_at)  # one with every /tf
    shown = worst = 0
    for t, m in arrows:
        assert m["ns"] == "force" and m["type"] == ARROW and m["header"]["frame_id"] == "base_link"
        w = wrench[t]
        assert w["header"]["frame_id"] == "tcp"
        f_tcp = np.array([w["wrench"]["force"][k] for k in "xyz"])
        if m["action"] == DELETE:
            assert np.linalg.norm(f_tcp) < 1e-6
            continue
        shown += 1
        tree = compose({**edges, **{tf["child_frame_id"]: (tf["header"]["frame_id"], matrix(tf["transform"]))
                                    for tf in tf_at[t]["transforms"]}}, "base_link")
        X = tree["tcp"]
        a, b = (np.array([p["x"], p["y"], p["z"]]) for p in m["points"])
        worst = max(worst, float(np.abs((b - a) / 0.01 - X[:3, :3] @ f_tcp).max()))
        assert abs(np.linalg.norm(a - X[:3, 3]) - 0.020) < 2e-4  # on the ball, within the penetration
    assert shown > 400 and worst < 1e-9, (shown, len(arrows), worst)  # 506 of 747 in contact

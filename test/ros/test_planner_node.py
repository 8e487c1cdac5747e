"""planner_node as a real process over DDS.

The flat plate (top at z = 10 mm in the part frame) placed at x = 0.8 m: every path pose must be
the ball centre above the top face, (R - F/K) along +z, with the tool z axis pointing down; the
trajectory must put the robot's tcp (Pinocchio's forward kinematics, not ours) on those poses;
the markers must carry the passes, normals and the part mesh. A bad face index makes ``~/plan``
answer with success false and the reason, and the node stays up; a bad parameter stops the node
at start-up naming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nav_msgs.msg import Path as PathMsg
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
CONFIG = [REPO / "config" / "cell.yaml", REPO / "config" / "planner_node.yaml"]
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
FAST = {"workpiece.part": "flat_plate", "workpiece.pose": [0.8, 0.0, 0.0, 0.0, 0.0, 0.0], "passes.stepover": 0.03,
        "passes.spacing": 0.01, "passes.margin": 0.01, "optimise.enabled": False}


def test_plans_on_start_and_publishes(launch_node, probe) -> None:
    node = launch_node("planner_node", params_file=CONFIG, params=FAST)
    paths = probe.subscribe(PathMsg, "/grinding/path", LATCHED)
    trajs = probe.subscribe(JointTrajectory, "/grinding/trajectory", LATCHED)
    markers = probe.subscribe(MarkerArray, "/planner_node/markers", LATCHED)
    probe.wait_for(lambda: paths.messages and trajs.messages and markers.messages,
                   timeout=180, what="path, trajectory and markers", procs=[node])
    path = paths.last
    assert path.header.frame_id == "base_link" and len(path.poses) > 20
    T = np.array([cv.pose_to_matrix(p.pose) for p in path.poses])
    d = 5.0 / 1.0e5  # target_force / stiffness of config/cell.yaml
    np.testing.assert_allclose(T[:, 2, 3], 0.01 + 0.02 - d, atol=1e-9)
    assert np.all(np.abs(T[:, 0, 3] - 0.8) <= 0.1 - 0.01 + 1e-9)  # margin 10 mm inside the 200 mm plate
    np.testing.assert_allclose(T[:, :3, 2], np.tile([0.0, 0.0, -1.0], (len(T), 1)), atol=1e-9)

    traj = trajs.last
    names, times, pos, vel, acc = cv.joint_trajectory_to_arrays(traj)
    # positions and velocities: a joint_trajectory_controller interpolates them as the simulation did
    assert len(names) == 6 and vel is not None and acc is None
    import pinocchio as pin

    pm = pin.buildModelFromUrdf(str(URDF))
    data = pm.createData()
    fid = pm.getFrameId("tcp")
    tcp = []
    for q in pos:
        pin.framesForwardKinematics(pm, data, q)
        tcp.append(data.oMf[fid].translation.copy())
    tcp = np.array(tcp)
    # every path pose is visited by the trajectory (to IK accuracy)
    for k in range(0, len(T), 5):
        assert np.min(np.linalg.norm(tcp - T[k, :3, 3], axis=1)) < 1e-5

    m = markers.last
    by_ns: dict[str, list[Marker]] = {}
    for mk in m.markers:
        by_ns.setdefault(mk.ns, []).append(mk)
    assert {mk.type for mk in by_ns["passes"]} == {Marker.LINE_STRIP}
    assert {mk.type for mk in by_ns["normals"]} == {Marker.ARROW}
    (part,) = by_ns["part"]
    assert part.type == Marker.TRIANGLE_LIST and len(part.points) % 3 == 0 and len(part.points) >= 36
    arrow = by_ns["normals"][0]
    a, b = np.array([[p.x, p.y, p.z] for p in arrow.points])
    np.testing.assert_allclose((b - a) / np.linalg.norm(b - a), [0, 0, 1], atol=1e-9)

    # a re-plan on request answers with a summary and republishes
    n_before = len(paths.messages)
    res = probe.call(Trigger, "/planner_node/plan", timeout=180, procs=[node])
    assert res.success, res.message
    assert "passes" in res.message
    probe.wait_for(lambda: len(paths.messages) > n_before, timeout=60, what="a new path", procs=[node])


def test_bad_face_is_a_failed_service_call_and_the_node_lives(launch_node, probe) -> None:
    node = launch_node("planner_node", params_file=CONFIG,
                       params={**FAST, "workpiece.faces": [42], "plan_on_start": False})
    res = probe.call(Trigger, "/planner_node/plan", timeout=120, procs=[node])
    assert not res.success
    assert "face index 42 out of range" in res.message
    res = probe.call(Trigger, "/planner_node/plan", timeout=120, procs=[node])  # still serving
    assert not res.success and node.alive


def test_unreachable_part_is_a_failed_service_call(launch_node, probe) -> None:
    node = launch_node("planner_node", params_file=CONFIG,
                       params={**FAST, "plan_on_start": False, "workpiece.pose": [3.0, 0.0, 0.0, 0.0, 0.0, 0.0]})
    res = probe.call(Trigger, "/planner_node/plan", timeout=180, procs=[node])
    assert not res.success
    assert "unreachable for the arm" in res.message and "workpiece.pose" in res.message  # and what to change
    assert node.alive


def test_bad_parameter_stops_the_node_naming_it(launch_node) -> None:
    node = launch_node("planner_node", params_file=CONFIG, params={"passes.stepover": -0.001})
    assert node.wait_exit(timeout=120) == 1
    assert "parameter 'passes.stepover': -0.001 is below the minimum" in node.log()


def test_a_plan_file_is_published_as_it_is(launch_node, probe, tmp_path) -> None:
    """With plan_file the node plans nothing: grinding/plan is the file's text, the trajectory its
    knots, the pass markers its surface points (read back with ``json``); a file that is not a plan
    fails ~/plan with the reason and the node stays up."""
    import json

    from std_msgs.msg import String

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    cell = CellConfig().replace(**FAST)
    f = plan_io.write_plan(plan_job(cell, optimise=False, max_passes=2, pass_length=0.02, check_collisions=False),
                           tmp_path / "plan.json")
    doc = json.loads(f.read_text())
    node = launch_node("planner_node", params_file=CONFIG, params={"plan_file": str(f)})
    plan = probe.subscribe(String, "/grinding/plan", qos=LATCHED)
    traj = probe.subscribe(JointTrajectory, "/grinding/trajectory", qos=LATCHED)
    markers = probe.subscribe(MarkerArray, "/planner_node/markers", qos=LATCHED)
    for sub in (plan, traj, markers):
        probe.wait_for_messages(sub, 1, timeout=120, procs=[node])
    assert plan.last.data == f.read_text()
    np.testing.assert_allclose([p.positions for p in traj.last.points], doc["trajectory"]["positions"], atol=1e-12)
    X = np.eye(4)
    from scipy.spatial.transform import Rotation

    wp = doc["part"]["workpiece_pose"]
    X[:3, :3], X[:3, 3] = Rotation.from_quat(wp["orientation"]).as_matrix(), wp["position"]
    passes = [m for m in markers.last.markers if m.ns == "passes"]
    assert len(passes) == len(doc["passes"]) == 2
    for m, p in zip(passes, doc["passes"], strict=True):
        pts = np.array([[q.x, q.y, q.z] for q in m.points])
        expected = np.array([w["surface_point"] for w in p["waypoints"]]) @ X[:3, :3].T + X[:3, 3]
        np.testing.assert_allclose(pts, expected, atol=1e-9)
    assert any(m.ns == "part" and m.type == Marker.TRIANGLE_LIST for m in markers.last.markers)
    f.write_text('{"schema": "something else"}')
    res = probe.call(Trigger, "/planner_node/plan", timeout=120, procs=[node])
    assert not res.success and str(f) in res.message and node.alive
    assert plan.last.data != f.read_text()  # nothing published

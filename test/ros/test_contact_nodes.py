"""collision_node and contact_solver_node as real processes over DDS.

Joint states that put the ball tool (r 20 mm, centre = tcp) 0.1 mm into a flat part (an STL mesh
written here) must give one contact point under the tcp with normal +z and depth 0.1 mm, a
contact model on contact/model with that gap and the effective mass (Pinocchio), a contact force
K d (within 1 %), and a simulated F/T reading equal to that force plus the tool's weight (masses
from the URDF's README table, not from the code). Malformed messages are logged and skipped; the
nodes stay up. (The force law itself is tested without ROS in test/unit/test_contact_side.py.)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import trimesh
from geometry_msgs.msg import WrenchStamped
from pinocchio_oracle import effective_mass
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64MultiArray

from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]
Q0 = np.array([0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0])  # tool pointing straight down
K = 1.0e5  # N/m
DEPTH = 1e-4  # m
R_BALL = 0.02
TOOL_MASS = 1.80 + 0.080  # kg below the sensor's measuring face: spindle + abrasive head (urdf/README.md)


def joint_state(q, names=JOINTS, stamp=1.0) -> JointState:
    msg = JointState()
    msg.header.stamp = cv.sec_to_time(stamp)
    msg.name = list(names)
    msg.position = [float(x) for x in q]
    return msg


@pytest.fixture
def flat_part(tmp_path):
    """A 0.4 x 0.4 x 0.02 m slab whose top face is 0.1 mm above the ball's lowest point at Q0."""
    model = RobotModel.from_urdf(URDF)
    tcp = model.fk(Q0, "tcp")[:3, 3]
    slab = trimesh.creation.box((0.4, 0.4, 0.02))  # top at z = +0.01 in its frame
    path = tmp_path / "slab.stl"
    slab.export(path)
    top = tcp[2] - R_BALL + DEPTH
    pose = [float(tcp[0]) + 0.03, float(tcp[1]) - 0.05, float(top - 0.01), 0.0, 0.0, 0.0]
    return path, pose, tcp, top, model


def start_nodes(launch_node, probe, part_path, part_pose):
    cell = REPO / "config" / "cell.yaml"
    col = launch_node("collision_node", params_file=[cell, REPO / "config" / "collision_node.yaml"],
                      params={"robot.description_file": str(URDF), "workpiece.part": str(part_path),
                              "workpiece.unit": "m", "workpiece.pose": part_pose, "min_distance_rate": 1000.0})
    sol = launch_node("contact_solver_node", params_file=[cell, REPO / "config" / "contact_solver_node.yaml"],
                      # no tangential force: at rest the spinning ball would slide on its sub-micrometre
                      # offset from the axis (the law and its tangential force: test_contact_side.py)
                      params={"robot.description_file": str(URDF), "contact.stiffness": K,
                              "contact.force_ratio": 0.0})
    procs = [col, sol]
    points = probe.subscribe(PointCloud2, "/contact/points")
    model = probe.subscribe(Float64MultiArray, "/contact/model")
    wrench = probe.subscribe(WrenchStamped, "/contact/wrench")
    ft = probe.subscribe(WrenchStamped, "/ft_sensor/wrench")
    pub = probe.publisher(JointState, "/joint_states", wait_subscribers=2, procs=procs)
    probe.publisher(PointCloud2, "/contact/points", wait_subscribers=1, procs=procs)  # the solver
    return procs, pub, points, model, wrench, ft


def test_tool_pushed_into_a_flat_part(launch_node, probe, flat_part) -> None:
    path, pose, tcp, top, model = flat_part
    procs, pub, points, model_sub, wrench, ft = start_nodes(launch_node, probe, path, pose)
    msg = probe.answer(pub, joint_state(Q0, stamp=2.0), points, procs)
    assert msg.header.frame_id == "base_link"
    rows = cv.pointcloud2_to_array(msg)
    assert rows.shape == (1, 8)
    x, y, z, nx, ny, nz, d, k = rows[0]
    assert k == -1.0  # a point contact: the law's own stiffness
    # float64 fields; the STL file stores float32 vertices (the slab's top within ~1e-9 m)
    np.testing.assert_allclose([x, y, z], [tcp[0], tcp[1], top], atol=5e-9)
    np.testing.assert_allclose([nx, ny, nz], [0, 0, 1], atol=1e-9)
    assert d == pytest.approx(DEPTH, abs=5e-9)

    state = joint_state(Q0, stamp=2.0)
    m_msg = probe.answer(pub, state, model_sub, procs)
    assert m_msg.layout.dim[0].label == "normal_contact_model" and len(m_msg.data) == 27
    t_m, rom = cv.msg_to_contact_model(m_msg)
    assert t_m == 2.0 and rom.gap == -d and rom.stiffness == K
    assert rom.force_ratio == 0.0 and rom.slip_speed == 0.001  # the cell's tangential law (contact.*)
    np.testing.assert_allclose(rom.normal, [0, 0, 1], atol=1e-9)
    assert rom.mass == pytest.approx(effective_mass(str(URDF), Q0, np.array([0.0, 0.0, 1.0])), rel=1e-9)

    w_msg = probe.republish_until(pub, state, lambda: probe.stamped(wrench, 2.0), "contact/wrench for the stamp", procs)
    assert w_msg.header.frame_id == "tcp"
    w = cv.wrench_to_array(w_msg)
    R_tcp = model.fk(Q0, "tcp")[:3, :3]
    f_base = R_tcp @ w[:3]
    assert np.linalg.norm(f_base) == pytest.approx(K * DEPTH, rel=0.01)
    np.testing.assert_allclose(f_base / np.linalg.norm(f_base), [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(w[3:], 0.0, atol=1e-6)  # the force passes through the ball's centre

    f_msg = probe.republish_until(pub, state, lambda: probe.stamped(ft, 2.0), "ft_sensor/wrench for the stamp", procs)
    assert f_msg.header.frame_id == "ft_sensor"
    R_ws = model.fk(Q0, "ft_sensor")[:3, :3]
    expected = R_ws.T @ (np.array([0, 0, K * DEPTH]) + TOOL_MASS * np.array([0, 0, -9.81]))
    np.testing.assert_allclose(cv.wrench_to_array(f_msg)[:3], expected, atol=0.01 * K * DEPTH)

    # clear of the part: no contact point, "nothing near" on contact/model, zero contact force
    lifted = Q0 + np.array([0, -0.05, 0, 0, 0, 0])
    state = joint_state(lifted, stamp=3.0)
    msg = probe.answer(pub, state, points, procs)
    assert cv.pointcloud2_to_array(msg).shape == (0, 8)
    m_msg = probe.republish_until(pub, state, lambda: probe.stamped(model_sub, 3.0), "contact/model 'nothing near'",
                            procs)
    assert list(m_msg.data) == [3.0]
    w_msg = probe.republish_until(pub, state, lambda: probe.stamped(wrench, 3.0), "zero contact/wrench", procs)
    np.testing.assert_allclose(cv.wrench_to_array(w_msg), 0.0, atol=1e-12)


def test_malformed_messages_are_logged_and_skipped(launch_node, probe, flat_part) -> None:
    path, pose, _, _, _ = flat_part
    procs, pub, points, _, wrench, _ = start_nodes(launch_node, probe, path, pose)
    col, sol = procs
    probe.answer(pub, joint_state(Q0, stamp=1.0), points, procs)

    bad_nan = joint_state([math.nan, *Q0[1:]], stamp=1.5)
    bad_count = joint_state(Q0[:5], names=JOINTS[:5], stamp=1.6)
    for m in (bad_nan, bad_count):
        pub.publish(m)
    probe.wait_for_log(col, "joint_states: rejected")
    probe.wait_for(lambda: "NaN" in col.log() and "missing joints ['wrist_3_joint']" in col.log(),
                   what="both rejections in the collision_node log", procs=procs)
    probe.wait_for(lambda: "NaN" in sol.log() and "missing joints ['wrist_3_joint']" in sol.log(),
                   what="both rejections in the contact_solver_node log", procs=procs)

    # a contact cloud with a NaN depth and one without the depth field, straight to the solver
    cloud_pub = probe.publisher(PointCloud2, "/contact/points", wait_subscribers=0)
    nan_cloud = cv.array_to_pointcloud2(np.array([[0, 0, 0, 0, 0, 1, np.nan, -1]]), "base_link", cv.sec_to_time(1.7))
    short_cloud = cv.array_to_pointcloud2(np.zeros((1, 3)), "base_link", cv.sec_to_time(1.8), fields=("x", "y", "z"))
    cloud_pub.publish(nan_cloud)
    cloud_pub.publish(short_cloud)
    probe.wait_for(lambda: "contact/points: rejected" in sol.log() and "missing fields" in sol.log(),
                   what="cloud rejections in the solver log", procs=procs)
    assert col.alive and sol.alive
    # still working
    state = joint_state(Q0, stamp=4.0)
    probe.answer(pub, state, points, procs)
    probe.republish_until(pub, state, lambda: probe.stamped(wrench, 4.0), "a wrench after the bad messages", procs)
    assert not [m for m in wrench.messages if cv.time_to_sec(m.header.stamp) in (1.5, 1.6, 1.7, 1.8)]


def test_bad_parameter_stops_the_node_naming_it(launch_node, tmp_path) -> None:
    node = launch_node("collision_node", params={"workpiece.part": str(tmp_path / "missing.stl")})
    assert node.wait_exit() == 1
    assert "parameter 'workpiece.part'" in node.log() and "missing.stl" in node.log()
    node = launch_node("contact_solver_node", params={"contact.cr": 3.0})
    assert node.wait_exit() == 1
    assert "parameter 'contact.cr': 3.0 is above the maximum 1.0" in node.log()
    # the plan whose passes the removal map covers: a file that is not there
    node = launch_node("contact_solver_node", params={"plan_file": str(tmp_path / "missing_plan.json")})
    assert node.wait_exit() == 1
    assert "parameter 'plan_file'" in node.log() and "missing_plan.json" in node.log()
    assert "Traceback" not in node.log()


def test_collision_node_answers_from_the_exact_cad_surface(launch_node, probe) -> None:
    """On the built-in curved panel (a B-spline top), collision_node's depth equals R - the distance from
    the ball's centre to the part as OpenCascade's BRepExtrema computes it, within 1 um."""
    from OCP.BRepBuilderAPI import BRepBuilderAPI_MakeVertex
    from OCP.BRepExtrema import BRepExtrema_DistShapeShape
    from OCP.gp import gp_Pnt
    from OCP.IFSelect import IFSelect_RetDone
    from OCP.STEPControl import STEPControl_Reader

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.planning.path_ik import solve_ik

    reader = STEPControl_Reader()
    assert reader.ReadFile(str(REPO / "parts" / "curved_panel.step")) == IFSelect_RetDone
    reader.TransferRoots()
    shape = reader.OneShape()  # the STEP file is in mm

    def nearest(p_mm):
        d = BRepExtrema_DistShapeShape(BRepBuilderAPI_MakeVertex(gp_Pnt(*p_mm)).Vertex(), shape)
        q = d.PointOnShape2(1)
        return d.Value(), np.array([q.X(), q.Y(), q.Z()])

    pose = np.array(CellConfig().workpiece.pose[:3])  # translation only in the default cell
    assert np.allclose(CellConfig().workpiece.pose[3:], 0.0)
    model = RobotModel.from_urdf(URDF, tip_link="tcp")
    col = launch_node("collision_node", params_file=[REPO / "config" / "cell.yaml",
                                                     REPO / "config" / "collision_node.yaml"])
    points = probe.subscribe(PointCloud2, "/contact/points")
    pub = probe.publisher(JointState, "/joint_states", wait_subscribers=1, procs=[col])
    R_down = np.diag([1.0, -1.0, -1.0])
    q_seed = np.array(CellConfig().robot.home)
    worst = 0.0
    for k, (x, y, d) in enumerate([(0.0, 0.0, 5e-5), (0.03, 0.02, 2e-5), (-0.04, 0.03, 1e-4), (0.02, -0.05, 3e-6)]):
        # a surface point and its normal from OpenCascade: the nearest point to one 40 mm above the
        # panel (so it lands inside the face, not on its boundary)
        far = np.array([x * 1e3, y * 1e3, 60.0])
        _, p_mm = nearest(far)
        assert np.all(np.abs(p_mm[:2]) < 70.0), p_mm  # inside the 200 x 150 mm panel
        n = (far - p_mm) / np.linalg.norm(far - p_mm)
        centre = p_mm * 1e-3 + pose + (R_BALL - d) * n
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R_down, centre
        q = solve_ik(model, T[None], q_seed, what="test pose")[0]
        q_seed = q
        c = model.fk(q)[:3, 3]
        dist_mm, _ = nearest((c - pose) * 1e3)
        depth_ref = R_BALL - dist_mm * 1e-3
        msg = probe.answer(pub, joint_state(q, stamp=10.0 + k), points, [col])
        rows = cv.pointcloud2_to_array(msg)
        assert rows.shape == (1, 8), rows
        worst = max(worst, abs(rows[0, 6] - depth_ref))
        assert rows[0, 6] == pytest.approx(depth_ref, abs=1e-6), (k, rows[0], depth_ref)
        np.testing.assert_allclose(rows[0, 3:6], n, atol=1e-3)
    print(f"collision_node depth vs OpenCascade: worst {worst * 1e9:.1f} nm")


def test_contact_solver_publishes_the_removal_map(launch_node, probe) -> None:
    """The tool (axis along the normal, at rest) pressed 50 um into the built-in flat plate at 51 points
    over 10 mm along x, 10 ms each: the solver's grinding/removal is one TRIANGLE_LIST in base_link whose
    vertex colours lie on the documented ramp (black, red, yellow, white: r + g + b = 3 depth / max) and,
    across the middle of the track, follow the closed-form groove of a Hertzian patch spinning at
    w = tool.spindle_speed, depth(y) ~ 2 s^2 J(s/a), s^2 = a^2 - y^2, J(k) = ((2k^2 - 1) E(k) +
    (1 - k^2) K(k)) / (3 k^2) (docs/contact.md), within 5 % of its peak (the 51 presses sample the
    integral along x: 3 % at worst on the 0.2 mm grid), black beyond the patch."""
    from geometry_msgs.msg import Point  # noqa: F401  (message module loaded for the marker)
    from scipy.special import ellipe, ellipk
    from visualization_msgs.msg import Marker, MarkerArray

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.planning.path_ik import solve_ik

    cell = [REPO / "config" / "cell.yaml"]
    plate = {"workpiece.part": "flat_plate"}  # planar top 10 mm above the part frame, normal +z
    col = launch_node("collision_node", params_file=[*cell, REPO / "config" / "collision_node.yaml"], params=plate)
    sol = launch_node("contact_solver_node", params_file=[*cell, REPO / "config" / "contact_solver_node.yaml"],
                      params={**plate, "removal_marker_rate": 20.0, "removal_marker_cell": 1e-4,
                              "use_sim_time": False})
    procs = [col, sol]
    points = probe.subscribe(PointCloud2, "/contact/points")
    removal = probe.subscribe(MarkerArray, "/grinding/removal")
    wrench = probe.subscribe(WrenchStamped, "/contact/wrench")
    pub = probe.publisher(JointState, "/joint_states", wait_subscribers=2, procs=procs)
    probe.wait_for_log(sol, "removal map:", timeout=120)
    model = RobotModel.from_urdf(URDF, tip_link="tcp")
    pose = np.array(CellConfig().workpiece.pose[:3])
    q = np.array(CellConfig().robot.home)
    track = []
    R_down = np.diag([1.0, -1.0, -1.0])
    depth = 5e-5

    def solved(msg: JointState) -> np.ndarray:
        """The contact rows of ``msg``'s state, once the solver has solved that state too (its wrench
        with the stamp: each state removes over the time since the one before, 10 ms here)."""
        rows = cv.pointcloud2_to_array(probe.answer(pub, msg, points, procs))
        probe.answer(pub, msg, wrench, procs)
        return rows

    for k, x in enumerate(np.linspace(-0.005, 0.005, 51)):
        T = np.eye(4)
        T[:3, :3] = R_down
        T[:3, 3] = pose + [x, 0.0, 0.0326]  # 2.6 mm above the plate (top at 10 mm): collision_node reports the gap
        q = solve_ik(model, T[None], q, "probe")[0]
        above = solved(joint_state(q, stamp=2.0 + 0.02 * k))
        assert len(above) == 1, above
        n = above[0, 3:6]
        np.testing.assert_allclose(n, [0.0, 0.0, 1.0], atol=1e-9)
        T[:3, 3] = above[0, :3] + (R_BALL - depth) * n  # then 50 um deep along the normal there
        q = solve_ik(model, T[None], q, "pressed")[0]
        rows = solved(joint_state(q, stamp=2.01 + 0.02 * k))
        assert len(rows) == 1 and rows[0, 6] == pytest.approx(depth, abs=1e-7), rows
        track.append(rows[0, :3])
    track = np.array(track)
    a = np.sqrt(2.0 * R_BALL * depth)  # the patch radius

    def final_map():  # the last marker once it holds the last press's patch
        m = next((m.markers[0] for m in reversed(removal.messages)
                  if m.markers and m.markers[0].type == Marker.TRIANGLE_LIST), None)
        return m if m is not None and max(p.x for p in m.points) > track[-1, 0] + 0.5 * a else None

    marker = probe.wait_for(final_map, what="the removal TRIANGLE_LIST with every press", procs=procs)
    assert marker.header.frame_id == "base_link" and marker.ns == "removal"
    assert len(marker.points) % 3 == 0 and len(marker.points) == len(marker.colors) > 0
    P = np.array([[p.x, p.y, p.z] for p in marker.points])
    C = np.array([[c.r, c.g, c.b] for c in marker.colors])
    # the ramp: red first, then green, then blue, each saturating before the next rises
    assert np.all(C[:, 0] >= C[:, 1] - 1e-6) and np.all(C[:, 1] >= C[:, 2] - 1e-6)
    assert np.all((C[:, 1] <= 1e-6) | (C[:, 0] >= 1 - 1e-6)) and np.all((C[:, 2] <= 1e-6) | (C[:, 1] >= 1 - 1e-6))
    heat = C.sum(axis=1) / 3.0  # depth / largest depth
    y = np.abs(P[:, 1] - track[:, 1].mean())
    assert np.all(heat[y > a + 3e-4] == 0.0)  # beyond the patch (plus a grid spacing and a half)
    mid = np.abs(P[:, 0] - track[:, 0].mean()) < 0.002  # where the track is steady (2 mm from its middle)
    s2 = np.clip(a * a - y[mid] ** 2, 0.0, None)
    m2 = np.clip(s2 / (a * a), 1e-12, 1.0 - 1e-15)
    ref = np.where(s2 > 0, 2.0 * s2 * ((2.0 * m2 - 1.0) * ellipe(m2) + (1.0 - m2) * ellipk(m2)) / (3.0 * m2), 0.0)
    scale = float(heat[mid] @ ref / (ref @ ref))
    err = np.max(np.abs(heat[mid] - scale * ref)) / (scale * ref.max())
    print(f"removal marker colours vs the closed-form groove: {err:.2%} of the peak, "
          f"peak/largest {scale * ref.max():.3f}, {mid.sum()} vertices")
    assert err < 0.05, err
    assert scale * ref.max() == pytest.approx(1.0, abs=0.06)  # the largest depth is the groove's (hump) peak

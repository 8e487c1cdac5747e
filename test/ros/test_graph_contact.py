"""The node graph runs the in-process job's physics: dynamics_node + collision_node +
contact_solver_node as real processes, exchanging the contact model in lockstep.

The arm (tool straight down) is commanded 50 um into a slab (an STL mesh written here) and held
there. The steady contact force the graph publishes must be (1) the series compliance of the
contact K and the servo Kp m, with the effective mass m from Pinocchio (within 1 %), and (2) what
the in-process coupled step gives for the same commanded pose (to 1e-6: the same code, the same
equilibrium).

The recorder node records the run. Its bag is read back with the ``mcap`` library and decoded with
rclpy's own CDR deserializer (the recorder writes through ``rosbags``): every contact wrench the
test's subscriber saw inside the recorded span is in the bag with the same values, and the
recorded F/T reading is the recorded contact force plus the tool's weight (masses from the URDF's
README table) in the sensor frame of the recorded joint state.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from geometry_msgs.msg import WrenchStamped
from mcap.reader import make_reader
from pinocchio_oracle import effective_mass
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
from robot_grinding_sim.core.planning.path_ik import solve_ik
from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.core.robot.joint_trajectory import TrajectoryInterpolator
from robot_grinding_sim.core.sim.coupled_step import ArmContactStepper, ContactSide, CoupledStep
from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
URDF = REPO / "urdf" / "ur10e_grinding.urdf"
CELL = REPO / "config" / "cell.yaml"
Q0 = np.array([0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0])  # tool pointing straight down
R_BALL, GAP, D_CMD = 0.02, 1e-3, 5e-5
TOOL_MASS = 1.80 + 0.080  # kg below the sensor's measuring face: spindle + abrasive head (urdf/README.md)
RECORDED = {"/contact/wrench": WrenchStamped, "/ft_sensor/wrench": WrenchStamped, "/joint_states": JointState}


def test_graph_holds_the_in_process_force(launch_node, probe, tmp_path) -> None:
    model = RobotModel.from_urdf(URDF, tip_link="tcp")
    T0 = model.fk(Q0, "tcp")
    slab = trimesh.creation.box((0.4, 0.4, 0.02))  # top at z = +0.01 in its frame
    stl = tmp_path / "slab.stl"
    slab.export(stl)
    top = T0[2, 3] - R_BALL - GAP  # the tool starts 1 mm above the slab
    pose = [float(T0[0, 3]) + 0.03, float(T0[1, 3]) - 0.05, float(top - 0.01), 0.0, 0.0, 0.0]
    T1 = T0.copy()
    T1[2, 3] -= GAP + D_CMD  # commanded 50 um into the slab
    q1 = solve_ik(model, T1[None], Q0, "pressed pose")[0]
    # the cell, with no tangential force (a spinning ball at rest slides on its sub-micrometre offset
    # from the axis: not part of the series-compliance formula)
    cell_values = {"robot.description_file": str(URDF), "robot.home": Q0.tolist(), "workpiece.part": str(stl),
                   "workpiece.unit": "m", "workpiece.pose": pose, "contact.force_ratio": 0.0}
    cfg = [CELL]
    dyn = launch_node("dynamics_node", params_file=[*cfg, REPO / "config" / "dynamics_node.yaml"],
                      params={**cell_values, "lockstep": True, "exchange_interval": 0.0})
    col = launch_node("collision_node", params_file=[*cfg, REPO / "config" / "collision_node.yaml"],
                      params=cell_values)
    sol = launch_node("contact_solver_node", params_file=[*cfg, REPO / "config" / "contact_solver_node.yaml"],
                      params=cell_values)
    bag = tmp_path / "run"
    rec = launch_node("recorder", params={"output": str(bag), "topics": list(RECORDED), "flush_period": 0.2,
                                          "discovery_period": 0.2})
    procs = [dyn, col, sol, rec]
    js = probe.subscribe(JointState, "/joint_states", keep=5000)
    wrench = probe.subscribe(WrenchStamped, "/contact/wrench", keep=5000)
    # Both subscriptions must have matched before the command (DDS matches each on its own).
    probe.wait_for(lambda: len(wrench.messages) > 10 and js.messages, timeout=180,
                   what="the contact side answering and joint_states arriving", procs=procs)
    probe.wait_for(lambda: all(metadata_counts(bag).get(t, 0) > 0 for t in RECORDED), timeout=120,
                   what="the recorder recording every topic", procs=procs)
    pub = probe.publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", procs=procs)
    traj = JointTrajectory(joint_names=list(model.joint_names))
    traj.points = [JointTrajectoryPoint(positions=q1.tolist(), velocities=[0.0] * 6,
                                        time_from_start=cv.sec_to_duration(0.5))]
    pub.publish(traj)
    probe.wait_for_log(dyn, "trajectory accepted")
    t_cmd = cv.time_to_sec(js.last.header.stamp)

    def settled() -> bool:
        return bool(wrench.messages) and cv.time_to_sec(wrench.last.header.stamp) > t_cmd + 1.2

    probe.wait_for(settled, timeout=300, what="1.2 s of sim time pressing", procs=procs)
    f_graph = np.linalg.norm(cv.wrench_to_array(wrench.last)[:3])
    assert all(p.alive for p in procs)
    # (1) the series compliance, the effective mass from Pinocchio
    n = np.array([0.0, 0.0, 1.0])
    cell = CellConfig().replace(**cell_values)
    k_arm = cell.servo.kp * effective_mass(str(URDF), q1, n)
    K = cell.contact.stiffness
    expected = D_CMD / (1.0 / K + 1.0 / k_arm)
    assert f_graph == pytest.approx(expected, rel=0.01)
    # (2) the in-process coupled step, held at the same commanded pose until it settles
    part = parts.load_part(str(stl), "m")
    scene, _ = workpiece_scene(part, [0], cad_pose(pose), R_BALL, cell.workpiece.deflection)
    side = ContactSide(model, cell.contact, "tcp", cell.tool.spindle_speed, ToolContactQuery(scene))
    arm = ArmContactStepper(model, q1, cell.servo, cell.sim.gravity, "tcp")
    arm.arm.set_trajectory(TrajectoryInterpolator.hold(q1), 0.0)
    step = CoupledStep(side, arm, cell.sim.dt)
    while step.state.t < 1.0:
        step.step()
    rom = side.from_geometry(step.state.t, step.state.q, step.state.qd,
                             side.query.query(model.fk(step.state.q, "tcp")[:3, 3]))
    assert f_graph == pytest.approx(side.normal_force(rom), rel=1e-6)

    # (3) the recorder's bag of the same run
    assert rec.stop() == 0
    recorded = read_bag(bag)
    seen = {cv.time_to_sec(m.header.stamp): cv.wrench_to_array(m) for m in wrench.messages}
    in_bag = {cv.time_to_sec(m.header.stamp): cv.wrench_to_array(m) for m in recorded["/contact/wrench"]}
    span = [t for t in seen if min(in_bag) <= t <= max(in_bag)]
    assert len(span) > 100
    missing = [t for t in span if t not in in_bag]
    assert not missing, f"{len(missing)} contact wrenches seen on the graph are not in the bag"
    for t in span:
        np.testing.assert_array_equal(in_bag[t], seen[t])
    # the F/T reading of the last recorded stamp: contact force + tool weight, in the sensor frame
    t_end = max(set(in_bag) & {cv.time_to_sec(m.header.stamp) for m in recorded["/ft_sensor/wrench"]})
    ft = next(m for m in recorded["/ft_sensor/wrench"] if cv.time_to_sec(m.header.stamp) == t_end)
    q_end = next(np.array(m.position) for m in recorded["/joint_states"] if cv.time_to_sec(m.header.stamp) == t_end)
    R_tcp = model.fk(q_end, "tcp")[:3, :3]
    R_ft = model.fk(q_end, "ft_sensor")[:3, :3]
    f_base = R_tcp @ in_bag[t_end][:3] + TOOL_MASS * np.array([0.0, 0.0, -9.81])
    assert ft.header.frame_id == "ft_sensor"
    np.testing.assert_allclose(cv.wrench_to_array(ft)[:3], R_ft.T @ f_base, atol=0.01 * expected)


def metadata_counts(bag: Path) -> dict[str, int]:
    """Per-topic counts of the recorder's checkpointed metadata.yaml ({} before the first)."""
    import yaml

    try:
        doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return {}
    info = doc["rosbag2_bagfile_information"]
    return {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}


def read_bag(bag: Path) -> dict[str, list]:
    """The recorded messages by topic: MCAP container read by ``mcap``, CDR decoded by rclpy."""
    out: dict[str, list] = {t: [] for t in RECORDED}
    (f,) = bag.glob("*.mcap")
    with f.open("rb") as fh:
        for _, channel, message in make_reader(fh).iter_messages(topics=list(RECORDED)):
            out[channel.topic].append(deserialize_message(message.data, RECORDED[channel.topic]))
    return out


def cad_pose(pose: list[float]) -> np.ndarray:
    from robot_grinding_sim.core.planning.planner import pose_matrix

    return pose_matrix(pose)

"""Any robot: third-party arms (example-robot-data's Panda, 7 joints, and UR5, 6 joints, each with a
ball tool under link names the package never uses) plan and simulate the curved panel from the
cell's configuration alone; a URDF that lacks what the job needs is refused before any work, in
one line naming the parameter and what to add.

Independent references: Pinocchio's forward kinematics of the same URDF (the job trajectory puts the
tool centre on the planned path), the target force (the simulated contact reaches it), the URDF
read with lxml (the joints of the file).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from cli_runner import run as grinding
from lxml import etree
from third_party_arms import ARMS, BALL_RADIUS, arm_with_ball_tool, cell_values

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.job.run import run_job
from robot_grinding_sim.core.job.setup import JobConfig, cell_robot_model, setup_job
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.planning import plan_io
from robot_grinding_sim.core.record.tf_tree import urdf_joints


def _cell(arm: str, urdf: Path, **values: object) -> CellConfig:
    return CellConfig().replace(**{**cell_values(arm, urdf), **values})


def _segment_distance(p: np.ndarray, line: np.ndarray) -> float:
    """Distance (m) of point p (3,) from the polyline ``line`` (N, 3)."""
    a, b = line[:-1], line[1:]
    ab = b - a
    t = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-30), 0.0, 1.0)
    return float(np.min(np.linalg.norm(a + t[:, None] * ab - p, axis=1)))


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_arm_plans_and_simulates_the_curved_panel(tmp_path, arm):
    urdf = arm_with_ball_tool(arm, tmp_path / f"{arm}_grinder.urdf")
    cell = _cell(arm, urdf)
    setup = setup_job(JobConfig(cell=cell, max_passes=1, pass_length=0.03, optimise=True))
    assert setup.model.nq == (7 if arm == "panda" else 6) and setup.tool_radius == BALL_RADIUS
    result = run_job(setup.cfg, setup)
    # the contact the simulation found brings the pass to the target force
    assert len(result.passes) == 1
    assert result.passes[0].mean == pytest.approx(cell.process.target_force, rel=cell.optimise.tolerance)

    # Pinocchio's kinematics of the same file: on the pass the tool centre follows the planned TCP path
    # (shifted along the normal by the pass's commanded offset, at most a few tens of um)
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId("tip")
    traj = result.trajectory
    seg = next(s for s in traj.segments if s["kind"] == "pass")
    X_BP = setup.X_BP
    planned = setup.plan.tcp_positions[0] @ X_BP[:3, :3].T + X_BP[:3, 3]
    idx = {n: pm.getJointId(n) for n in traj.joint_names}
    worst = 0.0
    for i in range(seg["start"], seg["stop"]):
        q = pin.neutral(pm)
        for k, n in enumerate(traj.joint_names):
            q[pm.joints[idx[n]].idx_q] = traj.positions[i, k]
        pin.framesForwardKinematics(pm, data, q)
        worst = max(worst, _segment_distance(data.oMf[fid].translation, planned))
    assert worst <= abs(result.offsets[0]) + 2e-5

    # plan.json names the frame the pose and trajectory are in: this URDF's root link (read with lxml)
    tree = etree.parse(str(urdf))
    (root,) = set(tree.xpath("/robot/link/@name")) - set(tree.xpath("/robot/joint/child/@link"))
    setup.plan.trajectory = traj
    data = json.loads(plan_io.plan_text(setup.plan))
    assert data["part"]["workpiece_pose"]["frame"] == data["trajectory"]["frame"] == root
    assert plan_io.trajectory_from_dict(data["trajectory"]).frame == root


def test_simulate_cli_writes_the_wrenches_in_the_cells_frames(tmp_path):
    """`grinding simulate` on the Panda: the bag's contact wrench is in tool.tcp_link, the sensor's in
    ft_sensor.frame (read back with the rosbags library, not the package's reader)."""
    from rosbags.highlevel import AnyReader

    urdf = arm_with_ball_tool("panda", tmp_path / "panda_grinder.urdf")
    params = tmp_path / "panda.yaml"
    params.write_text(json.dumps({"/**": {"ros__parameters": cell_values("panda", urdf)}}))
    res = grinding("simulate", "--params", str(params), "--max-passes", "1", "--pass-length", "0.01",
                   "--no-optimise", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    frames: dict[str, set[str]] = {}
    with AnyReader([tmp_path / "out" / "bag"]) as reader:
        conns = [c for c in reader.connections if c.topic in ("/contact/wrench", "/ft_sensor/wrench")]
        for conn, _, raw in reader.messages(connections=conns):
            frames.setdefault(conn.topic, set()).add(reader.deserialize(raw, conn.msgtype).header.frame_id)
    assert frames == {"/contact/wrench": {"tip"}, "/ft_sensor/wrench": {"probe_mount"}}


# ------------------------------------------------------------------------------------------------
# what a job needs of the URDF, refused before any work in one line naming the parameter


def _refusal(cell: CellConfig) -> ParameterError:
    with pytest.raises(ParameterError) as err:
        cell_robot_model(cell)
    assert "\n" not in str(err.value)
    return err.value


def test_missing_tcp_frame_names_the_parameter_and_what_to_add(tmp_path):
    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf", tip=False)
    err = _refusal(_cell("panda", urdf))
    assert err.name == "tool.tcp_link" and "'tip' is not a link" in str(err) and "add the tool centre point" in str(err)


def test_tool_without_collision_geometry_names_the_parameter(tmp_path):
    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf", ball=False)
    err = _refusal(_cell("panda", urdf))
    assert err.name == "tool.link" and "'grit_ball'" in str(err) and "no <collision> geometry" in str(err)
    assert "<sphere> centred on the tool centre point 'tip'" in str(err)


def test_arm_link_without_inertia_says_what_to_add(tmp_path):
    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf", no_inertial="panda_link3")
    err = _refusal(_cell("panda", urdf))
    assert err.name == "robot.description_file" and "panda_link3" in str(err) and "add an <inertial>" in str(err)


def test_default_link_names_on_another_arm_are_refused_by_name(tmp_path):
    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf")
    values = cell_values("panda", urdf)
    for key, default in (("ft_sensor.frame", "ft_sensor"), ("tool.link", "abrasive_head"),
                         ("tool.links", ["spindle", "abrasive_head"])):
        err = _refusal(CellConfig().replace(**{**values, key: default}))
        assert err.name == key and "is not a link of" in str(err)
    err = _refusal(CellConfig().replace(**{**values, "robot.home": list(CellConfig().robot.home)}))
    assert err.name == "robot.home" and "expected 7 values" in str(err)


def test_unresolved_package_meshes_are_refused_before_planning(tmp_path):
    """The arm's package:// meshes do not resolve from a URDF written elsewhere: `grinding plan` says
    which package and how to give it (--package-dir) before it plans anything; with it, the check passes."""
    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf")
    values = {k: v for k, v in cell_values("panda", urdf).items() if k != "robot.package_dirs"}
    params = tmp_path / "panda.yaml"
    params.write_text(json.dumps({"/**": {"ros__parameters": values}}))
    res = grinding("plan", "--params", str(params), "--robot", str(urdf), "--out", str(tmp_path / "plan.json"))
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "planning passes" not in res.stderr, res.stderr
    assert "robot.package_dirs" in lines[0] and "--package-dir example-robot-data=PATH" in lines[0]
    assert not (tmp_path / "plan.json").exists()
    from third_party_arms import PACKAGE_DIR

    cell_robot_model(CellConfig().replace(**{**values, "robot.package_dirs": [PACKAGE_DIR]}))  # resolves


def test_urdf_joints_are_the_robots_not_those_of_its_transmissions():
    """ur5_robot.urdf names its joints again inside <transmission>: the tf tree takes the robot's."""
    text = ARMS["ur5"].urdf.read_bytes()
    ours = [j.name for j in urdf_joints(text)]
    theirs = [j.get("name") for j in etree.fromstring(text).findall("joint")]
    assert ours == theirs
    moving = [j.name for j in urdf_joints(text) if j.kind != "fixed"]
    assert moving == [n for n in pin.buildModelFromUrdf(str(ARMS["ur5"].urdf)).names[1:]]


def test_plan_json_holds_an_infinite_clearance_as_null():
    """A tool with no other link near the part on contact moves has no tool clearance (inf): plan.json
    is still valid JSON (null), not a ValueError."""
    from robot_grinding_sim.core.planning import planner

    plan = planner.plan("flat_plate", pass_params=None, robot=None)
    plan.collision = {"min_clearance_m": 0.01, "tool_clearance_m": math.inf, "tool_nearest": None}
    data = json.loads(plan_io.plan_text(plan))
    assert data["collision"]["tool_clearance_m"] is None and data["collision"]["min_clearance_m"] == 0.01


def test_a_node_checks_only_the_parameters_it_declared(tmp_path):
    """grinding_executive has no ft_sensor group: the default 'ft_sensor' frame it would read is not its
    to check (it stopped the graph run of a Panda cell)."""
    from robot_grinding_sim.core.job.setup import check_robot_for_job, load_robot_model

    urdf = arm_with_ball_tool("panda", tmp_path / "r.urdf")
    values = cell_values("panda", urdf)
    del values["ft_sensor.frame"]
    cell = CellConfig().replace(**values)
    model = load_robot_model(str(urdf), "tip", cell.robot.package_dirs)
    check_robot_for_job(model, cell, set(values) | {"tool.link", "robot.home"})
    with pytest.raises(ParameterError, match="ft_sensor.frame"):
        check_robot_for_job(model, cell)

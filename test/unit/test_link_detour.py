"""A change of the arm's configuration between passes goes over the part (issue 12).

On a third-party wrapped IGES face the arm changed configuration on a straight link next to the
part: the joint-space move swung the spindle through it (160 mm deep). The planner now gives every
straight link a way over the part (its ``detour``, in plan.json from minor 2), and the job takes it
where the arm changes configuration there. Checks: the detour's height and clearance against the
part's mesh measured with trimesh (not the planner's mesh query), its round trip through plan.json,
and the link of a reconfigured job followed with yourdfpy's forward kinematics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.config import CellConfig, PassParameters
from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.planning import plan_io, planner
from robot_grinding_sim.core.planning import trajectory as tr
from robot_grinding_sim.core.robot.ik import load_robot


@pytest.fixture(scope="module")
def plan2():
    cell = CellConfig()
    part = parts.load_part("curved_panel")
    plan = planner.plan(part, None, PassParameters(stepover=0.03, spacing=0.004), planner.tool_parameters(cell, 0.02),
                        robot=None, workpiece_pose=cell.workpiece.pose)
    return cell, planner.crop_plan(plan, part, max_passes=2, pass_length=0.02)


def test_a_straight_link_has_a_way_over_the_part(plan2) -> None:
    import trimesh

    cell, plan = plan2
    link = next(m for m in plan.moves if m.kind == "link")
    assert link.detour is not None  # the two passes side by side: a straight link, and its detour
    P, Q = link.detour
    np.testing.assert_allclose(P[[0, -1]], link.positions[[0, -1]], atol=1e-12)
    tool = plan.tool
    top = float(np.max(plan.mesh.vertices @ plan.up)) + tool.radius + tool.clearance + tool.approach
    assert float(np.max(P @ plan.up)) == pytest.approx(top, abs=1e-9)
    # the ball keeps radius + clearance off the part, or no nearer than at the ends
    mesh = trimesh.Trimesh(plan.mesh.vertices, plan.mesh.faces, process=False)
    d = np.abs(trimesh.proximity.signed_distance(mesh, P))
    assert d.min() >= min(tool.radius + tool.clearance, d[0], d[-1]) - 1e-6
    # the previous pass's last orientation while rising, the next pass's first while coming down
    R = Rotation.from_quat(Q)
    q_prev, q_next = plan.tcp_quaternions[0][-1], plan.tcp_quaternions[1][0]
    assert (R[0].inv() * Rotation.from_quat(q_prev)).magnitude() < 1e-9
    assert (R[-1].inv() * Rotation.from_quat(q_next)).magnitude() < 1e-9
    # plan.json keeps it (minor 2), and the job's paths carry it in base_link
    back = plan_io.plan_from_dict(plan_io.plan_to_dict(plan))
    link_back = next(m for m in back.moves if m.kind == "link")
    np.testing.assert_allclose(link_back.detour[0], P, atol=1e-9)
    np.testing.assert_allclose(link_back.detour[1], Q, atol=1e-9)
    paths = tr.job_paths(back)
    X = plan.workpiece_pose
    np.testing.assert_allclose(paths.detours[0][0], P @ X[:3, :3].T + X[:3, 3], atol=1e-9)


def test_a_change_of_configuration_on_a_straight_link_goes_over_the_part(plan2, monkeypatch) -> None:
    import yourdfpy

    from robot_grinding_sim.core.resources import default_urdf

    cell, plan = plan2
    model = load_robot("default")
    paths = tr.job_paths(plan)
    real = tr.link_segment

    def not_followed(*args, joint_path=None, **kw):
        if joint_path is None:  # following the straight link fails (as at a wrist singularity)
            raise PlanningError("link to pass 1, point 3, is unreachable (test)")
        return real(*args, joint_path=joint_path, **kw)

    monkeypatch.setattr(tr, "link_segment", not_followed)
    traj = tr.build_job_trajectory(model, paths, cell.process, [0.0, 0.0], plan.tool.penetration,
                                   np.asarray(cell.robot.home, dtype=float))
    seg = next(s for s in traj.segments if s["kind"] == "link")
    urdf = yourdfpy.URDF.load(str(default_urdf()), load_meshes=False)
    tcp = []
    for q in traj.positions[seg["start"]:seg["stop"]]:
        urdf.update_cfg(dict(zip(model.joint_names, q, strict=True)))
        tcp.append(urdf.get_transform("tcp", "base_link")[:3, 3])
    X = plan.workpiece_pose
    up = X[:3, :3] @ plan.up
    tool = plan.tool
    top = float(np.max((plan.mesh.vertices @ X[:3, :3].T + X[:3, 3]) @ up)) + tool.radius + tool.clearance \
        + tool.approach
    assert float(np.max(np.array(tcp) @ up)) >= top - 1e-6  # rises to the detour's top
    assert len(tcp) > len(plan.moves[3].positions)  # not the straight link's few knots

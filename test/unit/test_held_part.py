"""The robot holds the part (issue 24 item 3): a UR10e carries the part past a ball tool standing
in the cell (test/held_part_cell.py).

Independent references: Pinocchio's kinematics and dynamics of the same URDF (frame placements,
frame Jacobians, gravity torques), the contact law's static force K d, and the target force.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from held_part_cell import GRASP, held_cell_values, held_part_urdf

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.job.setup import cell_robot_model
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.planning.planner import pose_matrix

X_BP0 = pose_matrix((0.7, 0.1, 0.05, 0.1, -0.2, 0.3))  # any nominal pose: the frame of the plan


@pytest.fixture(scope="module")
def urdf(tmp_path_factory):
    return held_part_urdf(tmp_path_factory.mktemp("held") / "ur10e_held.urdf")


def _cell(urdf, **values: object) -> CellConfig:
    return CellConfig().replace(**{**held_cell_values(urdf), **values})


def _pin_relative(urdf, q):
    """Pinocchio: the tool centre seen from the part, carried to X_BP0, and its Jacobian (6, n) from
    the frame Jacobians of the tcp (fixed in the cell) and of the sensor (the part's holder)."""
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    pin.computeJointJacobians(pm, data, q)
    pin.updateFramePlacements(pm, data)
    ft, tcp = pm.getFrameId("ft_sensor"), pm.getFrameId("tcp")
    X_BP = data.oMf[ft].homogeneous @ pose_matrix(GRASP)
    X_BT = data.oMf[tcp].homogeneous
    T = X_BP0 @ np.linalg.inv(X_BP) @ X_BT
    Jt = pin.getFrameJacobian(pm, data, tcp, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    Jh = pin.getFrameJacobian(pm, data, ft, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    r = X_BT[:3, 3] - data.oMf[ft].translation  # the holder's point at the tool centre: v + w x r
    Jh = Jh.copy()
    Jh[:3] -= np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]]) @ Jh[3:]
    A = X_BP0[:3, :3] @ X_BP[:3, :3].T
    Jd = Jt - Jh
    return T, np.vstack([A @ Jd[:3], A @ Jd[3:]])


def test_relative_kinematics_match_pinocchio(urdf) -> None:
    model = cell_robot_model(_cell(urdf))
    model = type(model)(model.robot, "tcp", "ft_sensor", pose_matrix(GRASP), X_BP0)
    assert model.tip_link == "tcp" and model.robot.tip_link == "ft_sensor" and model.nq == 6
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(-2.5, 2.5, 6)
        T_ref, J_ref = _pin_relative(urdf, q)
        np.testing.assert_allclose(model.fk(q), T_ref, atol=1e-12)
        np.testing.assert_allclose(model.jacobian(q), J_ref, atol=1e-12)
        # and the Jacobian is the pose's derivative (central differences of Pinocchio's poses)
        qd = rng.normal(size=6)
        h = 1e-6
        Tp, Tm = _pin_relative(urdf, q + h * qd)[0], _pin_relative(urdf, q - h * qd)[0]
        v = (Tp[:3, 3] - Tm[:3, 3]) / (2 * h)
        W = (Tp[:3, :3] - Tm[:3, :3]) / (2 * h) @ T_ref[:3, :3].T
        np.testing.assert_allclose(J_ref[:3] @ qd, v, atol=1e-6)
        np.testing.assert_allclose(J_ref[3:] @ qd, [W[2, 1], W[0, 2], W[1, 0]], atol=1e-6)
    # a batch of configurations as one at a time
    Q = rng.uniform(-2.5, 2.5, (3, 6))
    np.testing.assert_allclose(model.fk(Q), np.array([model.fk(q) for q in Q]), atol=0)


def test_effective_mass_is_pinocchios_along_the_relative_jacobian(urdf) -> None:
    model = cell_robot_model(_cell(urdf))
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    q = np.array([0.1, -1.4, 1.7, -1.9, -1.5, 0.2])
    model = type(model)(model.robot, "tcp", "ft_sensor", pose_matrix(GRASP), X_BP0)
    _, J = _pin_relative(urdf, q)
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    n = np.array([0.2, -0.3, 0.9]) / np.linalg.norm([0.2, -0.3, 0.9])
    x = J[:3].T @ n
    assert model.effective_mass(q, "tcp", None, n) == pytest.approx(1.0 / (x @ np.linalg.solve(M, x)), rel=1e-10)


def test_a_tool_on_the_arm_or_a_holder_in_the_cell_is_refused(urdf, tmp_path) -> None:
    from robot_grinding_sim.core.resources import default_urdf

    # the package's UR10e carries its tool: it cannot also hold the part
    with pytest.raises(ParameterError, match="parameter 'tool.tcp_link'.*moves with the arm.*attach"):
        cell_robot_model(_cell(default_urdf()))
    with pytest.raises(ParameterError, match="parameter 'workpiece.link'.*'spindle' has no moving joint"):
        cell_robot_model(_cell(urdf, **{"workpiece.link": "spindle"}))
    with pytest.raises(ParameterError, match="parameter 'workpiece.link'.*'gripper' is not a link"):
        cell_robot_model(_cell(urdf, **{"workpiece.link": "gripper"}))

"""A wrench read in the frame its header names, moved into the sensor frame by the robot's kinematics
(core/contact/ft_sensor.wrench_between_links, the hardware driver's topic backends), checked against
Pinocchio's force action (SE3.actInv on a Force) on the package's UR10e and a third-party arm."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from third_party_arms import arm_with_ball_tool

from robot_grinding_sim.core.contact.ft_sensor import wrench_between_links
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.resources import default_urdf
from robot_grinding_sim.core.robot.dynamics import RobotModel


def _pin_q(pm, names, q):
    out = pin.neutral(pm)
    for name, v in zip(names, q, strict=True):
        out[pm.joints[pm.getJointId(name)].idx_q] = v
    return out


def _oracle(urdf: str, names, q, wrench, frame: str, to: str) -> np.ndarray:
    """Pinocchio: the wrench as a Force in ``frame`` -> world (act) -> ``to`` (actInv)."""
    pm = pin.buildModelFromUrdf(urdf)
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, _pin_q(pm, names, q))
    f = pin.Force(np.asarray(wrench[:3]), np.asarray(wrench[3:]))
    f_w = data.oMf[pm.getFrameId(frame)].act(f)
    f_s = data.oMf[pm.getFrameId(to)].actInv(f_w)
    return np.r_[f_s.linear, f_s.angular]


@pytest.mark.parametrize("frame,to", [("base_link", "ft_sensor"), ("tool0", "ft_sensor"), ("tcp", "ft_sensor"),
                                      ("wrist_1_link", "tool0")])
def test_moved_wrench_matches_pinocchio_on_the_ur10e(frame, to):
    urdf = str(default_urdf())
    model = RobotModel.from_urdf(urdf)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(-np.pi, np.pi, model.nq)
        w = rng.normal(size=6) * [10, 10, 10, 1, 1, 1]
        got = wrench_between_links(model, q, w, frame, to)
        np.testing.assert_allclose(got, _oracle(urdf, model.joint_names, q, w, frame, to), atol=1e-10)


def test_moved_wrench_matches_pinocchio_on_a_seven_joint_arm(tmp_path):
    urdf = str(arm_with_ball_tool("panda", tmp_path / "panda.urdf"))
    model = RobotModel.from_urdf(urdf, tip_link="tip")
    q = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.7, 0.5])
    w = np.array([1.0, -2.0, 5.0, 0.1, 0.2, -0.3])
    for frame in ("panda_link0", "panda_link8", "tip"):
        np.testing.assert_allclose(wrench_between_links(model, q, w, frame, "probe_mount"),
                                   _oracle(urdf, model.joint_names, q, w, frame, "probe_mount"), atol=1e-10)


def test_frames_of_one_body_need_no_joint_state_and_moving_ones_do():
    model = RobotModel.from_urdf(default_urdf())
    w = np.array([0.0, 0.0, 10.0, 0.0, 0.0, 0.0])
    q = np.zeros(model.nq)
    np.testing.assert_allclose(wrench_between_links(model, None, w, "tool0", "ft_sensor"),
                               wrench_between_links(model, q + 0.3, w, "tool0", "ft_sensor"), atol=1e-12)
    with pytest.raises(InputError, match="no joint state yet"):
        wrench_between_links(model, None, w, "base_link", "ft_sensor")
    with pytest.raises(InputError, match="'tool0_controller' is not a link"):
        wrench_between_links(model, q, w, "tool0_controller", "ft_sensor")
    np.testing.assert_allclose(wrench_between_links(model, q, w, "", "base_link"), w)  # no frame: the root

"""hardware_driver's topic F/T presets as real processes over DDS: the UR e-series built-in sensor
as the UR ROS 2 driver publishes it (``ft_backend: ur_builtin``: /force_torque_sensor_broadcaster/wrench
in tool0 or tool0_controller) and a ros2_controllers force_torque_sensor_broadcaster of another name
(``ft_backend: ft_broadcaster``). The wrench comes in the frame its header names and is moved into
ft_sensor.frame with the arm's kinematics at the measured joints: checked against Pinocchio's force
action on the URDF at the fake arm's pose; a frame that is not a link is refused with a warning
naming it (nothing published); SIGINT ends the driver cleanly."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from geometry_msgs.msg import WrenchStamped
from test_hardware_driver import CELL, HOME, JOINTS, REPO, URDF, arm, stopped_clean  # noqa: F401

from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

W = np.array([2.0, -1.0, 8.0, 0.3, -0.2, 0.1])


def oracle(frame: str, w: np.ndarray = W, to: str = "ft_sensor") -> np.ndarray:
    """``w`` given in ``frame`` expressed in ``to`` at HOME: Pinocchio's SE3 action on a Force."""
    pm = pin.buildModelFromUrdf(str(URDF))
    data = pm.createData()
    q = pin.neutral(pm)
    for name, v in zip(JOINTS, HOME, strict=True):
        q[pm.joints[pm.getJointId(name)].idx_q] = v
    pin.framesForwardKinematics(pm, data, q)
    f = data.oMf[pm.getFrameId(to)].actInv(data.oMf[pm.getFrameId(frame)].act(pin.Force(w[:3], w[3:])))
    return np.r_[f.linear, f.angular]


def start(launch_node, backend: str, **extra):
    params = {"use_sim_time": False, "ft_backend": backend, "control_rate": 100.0, "ft_rate": 100.0,
              "ft_timeout": 5.0, "joint_states_timeout": 1.0, "diagnostics_rate": 5.0, **extra}
    return launch_node("hardware_driver", params_file=[CELL, REPO / "config" / "hardware_driver.yaml"],
                       params=params)


def feed_until(probe, drv, pub, raw, frame: str, w: np.ndarray) -> np.ndarray:
    """Publish ``w`` in ``frame`` until the driver's raw output has a reading of it (told from the
    others by |F|, which no change of frame alters); that reading."""
    size = float(np.linalg.norm(w[:3]))

    def mine() -> np.ndarray | None:
        for m in reversed(raw.messages):
            v = cv.wrench_to_array(m)
            if abs(np.linalg.norm(v[:3]) - size) < 1e-9 * size:
                return v
        return None

    def arrived() -> bool:
        pub.publish(cv.array_to_wrench_stamped(w, frame))
        return mine() is not None

    probe.wait_for(arrived, what=f"a reading in {frame!r} through the driver", procs=[drv])
    got = mine()
    assert got is not None
    return got


def test_ur_builtin_sensor_in_tool0_and_base_link_frames(launch_node, probe, arm) -> None:  # noqa: F811
    raw = probe.subscribe(WrenchStamped, "/hardware_driver/wrench_raw", keep=1000)
    drv = start(launch_node, "ur_builtin")
    pub = probe.publisher(WrenchStamped, "/force_torque_sensor_broadcaster/wrench", procs=[drv])
    probe.wait_for_log(drv, "/force_torque_sensor_broadcaster/wrench")
    for k, frame in enumerate(("tool0", "tool0_controller", "base_link", "ft_sensor")):
        w = W * (k + 1)
        got = feed_until(probe, drv, pub, raw, frame, w)
        np.testing.assert_allclose(got, oracle("tool0" if frame == "tool0_controller" else frame, w), atol=1e-9,
                                   err_msg=frame)
    assert {m.header.frame_id for m in raw.messages} == {"ft_sensor"}
    bad = W * 10.0
    for _ in range(20):
        pub.publish(cv.array_to_wrench_stamped(bad, "camera_link"))
    probe.wait_for_log(drv, "camera_link")
    assert "'camera_link' is not a link" in drv.log()
    feed_until(probe, drv, pub, raw, "tool0", W * 7.0)  # still running; nothing of camera_link came out
    assert not any(np.isclose(np.linalg.norm(cv.wrench_to_array(m)[:3]), np.linalg.norm(bad[:3]))
                   for m in raw.messages)
    stopped_clean(drv)


def test_a_force_torque_sensor_broadcaster_by_its_name(launch_node, probe, arm) -> None:  # noqa: F811
    raw = probe.subscribe(WrenchStamped, "/hardware_driver/wrench_raw", keep=1000)
    drv = start(launch_node, "ft_broadcaster", ft_broadcaster="axia_ft_broadcaster",
                ft_frame_aliases=["axia_measure=ft_sensor"])
    pub = probe.publisher(WrenchStamped, "/axia_ft_broadcaster/wrench", procs=[drv])
    np.testing.assert_allclose(feed_until(probe, drv, pub, raw, "axia_measure", W), W, atol=1e-12)
    np.testing.assert_allclose(feed_until(probe, drv, pub, raw, "tcp", 2 * W), oracle("tcp", 2 * W), atol=1e-9)
    stopped_clean(drv)

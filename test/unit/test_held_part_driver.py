"""hardware_driver with a part the robot holds (issue 24): the real arm's F/T processing
(hardware/supervisor.py, without ROS) of a sensor between the flange and the held part.

The readings are made here, independently of the package, from Pinocchio's frame placements of the
same URDF: a bias, the part's weight at its centre of mass (the flat plate: a box, its mass and
centre in closed form) and the contact wrench on the part (the opposite of the one on the tool at the
standing tool centre), all about the sensor's origin in its axes. The driver tares at one pose with
nothing touching, then at another pose, in contact, must give back the contact alone: in the sensor
frame, and at the tool centre as the graph's ``/contact/wrench`` (the wrench on the tool, tcp frame).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from held_part_cell import GRASP, HELD_URDF, held_cell_values
from test_driver_supervisor import HOME, Clock, Outputs

from robot_grinding_sim.core.config import MATERIAL_DENSITY, config_from_mapping
from robot_grinding_sim.core.job.setup import cell_robot_model
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.planning.planner import pose_matrix
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.hardware.supervisor import supervisor_from_parameters
from robot_grinding_sim.ros.schemas import node_specs

PLATE = (0.2, 0.15, 0.01)  # m, the flat plate (its frame at the bottom face's centre)
G = np.array([0.0, 0.0, -9.81])


@pytest.fixture(scope="module")
def urdf():
    return HELD_URDF  # the shipped held-part cell


def _params(urdf, **extra) -> dict:
    p = {s.name: s.default for s in node_specs("hardware_driver")}
    p.update({"robot.home": HOME.tolist(), "ft_sensor_ip": "127.0.0.1", **held_cell_values(),
              "workpiece.part": "flat_plate", "removal.material": "steel"}, **extra)
    return p


def _supervisor(urdf, **extra):
    p = _params(urdf, **extra)
    cell = config_from_mapping(p, allow_unknown=True)
    mono, ros = Clock(), Clock()
    return supervisor_from_parameters(p, cell, cell_robot_model(cell), Outputs(), monotonic=mono, ros_now=ros,
                                      node_name="hardware_driver"), mono


def _reading(pm, data, q, bias, w_tool) -> np.ndarray:
    """What the sensor between the flange and the steel plate reads at q with the wrench w_tool (6,)
    on the standing tool (tcp frame, about the tcp): Pinocchio's placements, the plate's closed form."""
    a, b, c = PLATE
    mass, c_P = MATERIAL_DENSITY["steel"] * a * b * c, np.array([0.0, 0.0, c / 2])
    pin.framesForwardKinematics(pm, data, q)
    oS, oT = data.oMf[pm.getFrameId("ft_sensor")], data.oMf[pm.getFrameId("tcp")]
    c_W = (oS.homogeneous @ pose_matrix(GRASP) @ np.r_[c_P, 1.0])[:3]
    f_part, t_part = -oT.rotation @ w_tool[:3], -oT.rotation @ w_tool[3:]
    F = mass * G + f_part
    T = np.cross(c_W - oS.translation, mass * G) + np.cross(oT.translation - oS.translation, f_part) + t_part
    return bias + np.r_[oS.rotation.T @ F, oS.rotation.T @ T]


def test_the_driver_compensates_the_held_parts_weight_and_reports_the_contact_on_the_tool(urdf) -> None:
    sup, mono = _supervisor(urdf)
    assert sup.proc.params.part_side
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    bias = np.array([3.0, -1.5, 7.0, 0.2, -0.1, 0.05])
    q1, q2 = np.array([0.3, -1.2, 1.6, -2.0, -1.4, 0.5]), np.array([-0.2, -1.5, 1.9, -1.7, -1.7, -0.8])
    # tare at q1, nothing touching: the bias is what is left of the reading after the part's weight
    sup.joint_state(q1, None)
    y1 = _reading(pm, data, q1, bias, np.zeros(6))
    sup.readings(FTReadings(np.tile(y1, (5, 1)), mono.t - np.arange(5)[::-1] * 1e-3, mono.t,
                            np.arange(5, dtype=np.int64)), mono.t)
    ok, _ = sup.tare()
    assert ok
    np.testing.assert_allclose(sup.proc.bias, bias, rtol=0, atol=1e-9 * np.abs(y1).max())
    # at q2 the tool pushes on the part: the driver gives the contact alone, in both frames
    w_tool = np.array([1.5, -2.0, 12.0, 0.03, -0.02, 0.01])
    mono.t += 0.01
    sup.joint_state(q2, None)
    y2 = _reading(pm, data, q2, bias, w_tool)
    (processed,) = sup.readings(FTReadings(y2[None], np.array([mono.t]), mono.t, np.array([9])), mono.t)
    contact_S = _reading(pm, data, q2, np.zeros(6), w_tool) - _reading(pm, data, q2, np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(processed, contact_S, rtol=0, atol=1e-9 * np.abs(y2).max())
    np.testing.assert_allclose(sup.to_tcp(processed), w_tool, rtol=0, atol=1e-9 * np.abs(y2).max())


def test_force_control_with_a_held_part_is_refused_in_one_line(urdf) -> None:
    with pytest.raises(ParameterError, match="parameter 'force_control'.*part the robot holds"):
        _supervisor(urdf, force_control=True)


def test_the_guard_bounds_where_the_arm_carries_the_part_and_its_speed_past_the_tool(urdf) -> None:
    """With the tool standing in the cell, the workspace box bounds the held part's frame in
    base_link and the TCP speed is the part's point at the tool centre moving past it, both made
    here from Pinocchio's placements of the shipped URDF."""
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    q0, dq = np.array([0.3, -1.2, 1.6, -2.0, -1.4, 0.5]), np.array([0.0, 0.02, -0.03, 0.01, 0.0, 0.0])
    times = np.array([0.5, 1.0])
    q = np.array([q0, q0 + dq])

    def part_origin(qk: np.ndarray) -> np.ndarray:
        pin.framesForwardKinematics(pm, data, qk)
        return (data.oMf[pm.getFrameId("ft_sensor")].homogeneous @ pose_matrix(GRASP))[:3, 3]

    def tool_in_part(qk: np.ndarray) -> np.ndarray:  # the standing tool centre in the part frame
        pin.framesForwardKinematics(pm, data, qk)
        X_BP = data.oMf[pm.getFrameId("ft_sensor")].homogeneous @ pose_matrix(GRASP)
        return (np.linalg.inv(X_BP) @ data.oMf[pm.getFrameId("tcp")].homogeneous)[:3, 3]

    p0, p1 = part_origin(q[0]), part_origin(q[1])
    chord = np.linalg.norm(tool_in_part(q[1]) - tool_in_part(q[0])) / (times[1] - times[0])
    assert np.linalg.norm(p1 - p0) > 5e-3 and chord > 5e-3  # the part moves, and past the tool
    # a box with one side between the part frame's places at the two knots, across the axis it
    # moves most along: the knot beyond it is outside
    a = int(np.argmax(np.abs(p1 - p0)))
    assert abs(p1[a] - p0[a]) > 2e-3
    side = 0.5 * (p0[a] + p1[a])
    lo, hi = np.full(3, -3.0), np.full(3, 3.0)
    (hi if p1[a] > p0[a] else lo)[a] = side
    sup, _ = _supervisor(urdf, workspace_min=lo.tolist(), workspace_max=hi.tolist())
    names = sup.model.joint_names
    result = sup.guard.check(names, times, q)
    (v,) = [v for v in result.violations if v.check == "workspace"]
    assert v.subject == f"part {'xyz'[a]}" and v.knot == 1 and v.count == 1
    assert v.value == pytest.approx(p1[a], abs=1e-9) and v.limit == pytest.approx(side)
    # the chord's speed is the relative one: a limit just under it refuses, just over it passes
    speeds = [v.value for v in result.violations if v.check == "implied tcp speed"]
    assert not speeds
    slow, _ = _supervisor(urdf, **{"process.max_tcp_speed": 0.999 * chord})
    (v,) = [v for v in slow.guard.check(names, times, q).violations if v.check == "implied tcp speed"]
    assert v.value == pytest.approx(chord, rel=1e-9)
    fast, _ = _supervisor(urdf, **{"process.max_tcp_speed": 1.001 * chord})
    assert not [v for v in fast.guard.check(names, times, q).violations if "speed" in v.check]

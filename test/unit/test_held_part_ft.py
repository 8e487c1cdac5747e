"""The held part's body (issue 24): its mass in the arm's dynamics and its load on an F/T sensor it
hangs from, with the robot holding the part against a tool standing in the cell
(test/held_part_cell.py: the UR10e holds the part at its sensor's face).

Independent references: the closed-form mass and inertia of a box (the flat plate), Pinocchio's
RNEA and CRBA of the same URDF with the part appended to the holder's body (``appendBodyToJoint``),
and the sensor's load computed from Pinocchio's frame placements: the part's weight at its centre
of mass and the opposite of the contact wrench at the standing tool centre, both moved to the
sensor's origin in its axes.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from held_part_cell import GRASP, HELD_URDF, held_cell_values

from robot_grinding_sim.core.config import MATERIAL_DENSITY, CellConfig
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job.setup import cell_robot_model, held_part_inertia
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.core.planning.planner import pose_matrix
from robot_grinding_sim.core.sim.ft import ft_sensor_model, sensor_inputs

PLATE = (0.2, 0.15, 0.01)  # the flat plate's box, m (its frame at the bottom face's centre)


@pytest.fixture(scope="module")
def urdf():
    return HELD_URDF  # the shipped held-part cell


def _cell(urdf, **values: object) -> CellConfig:
    return CellConfig().replace(**{**held_cell_values(), "workpiece.part": "flat_plate", "workpiece.faces": [5],
                                   **values})


def _plate_body(density: float) -> tuple[float, np.ndarray, np.ndarray]:
    a, b, c = PLATE
    m = density * a * b * c
    return m, np.array([0.0, 0.0, c / 2]), np.diag([m * (b * b + c * c), m * (a * a + c * c), m * (a * a + b * b)]) / 12


def _pin_with_part(urdf, body: tuple[float, np.ndarray, np.ndarray]):
    """Pinocchio's model of the URDF with the part's body appended to the sensor's joint at the grasp."""
    pm = pin.buildModelFromUrdf(str(urdf))
    frame = pm.frames[pm.getFrameId("ft_sensor")]
    m, c, inertia = body
    placement = frame.placement * pin.SE3(pose_matrix(GRASP))
    pm.appendBodyToJoint(frame.parentJoint, pin.Inertia(m, c, inertia), placement)
    return pm, pm.createData()


def test_the_part_body_is_its_solid_of_the_cells_material(urdf) -> None:
    for material in ("aluminium", "steel"):
        m, c, inertia = held_part_inertia(_cell(urdf, **{"removal.material": material}))
        m_ref, c_ref, i_ref = _plate_body(MATERIAL_DENSITY[material])
        assert m == pytest.approx(m_ref, rel=1e-12)
        np.testing.assert_allclose(c, c_ref, atol=1e-15)
        np.testing.assert_allclose(inertia, i_ref, rtol=1e-10, atol=1e-15)
    # a density of its own, or the body given outright
    assert held_part_inertia(_cell(urdf, **{"workpiece.density": 1000.0}))[0] == pytest.approx(0.3, rel=1e-12)
    given = {"workpiece.mass": 1.5, "workpiece.com": [0.01, 0.0, 0.02],
             "workpiece.inertia": [0.01, 0, 0, 0.02, 0, 0.025]}
    m, c, inertia = held_part_inertia(_cell(urdf, **given))
    assert m == 1.5 and c.tolist() == [0.01, 0.0, 0.02] and np.diag(inertia).tolist() == [0.01, 0.02, 0.025]
    with pytest.raises(ParameterError, match="parameter 'workpiece.inertia'.*is not the inertia of a body"):
        held_part_inertia(_cell(urdf, **{**given, "workpiece.inertia": [0.01, 0, 0, 0.01, 0, 0.05]}))


def test_a_face_without_volume_asks_for_the_parts_mass(urdf, tmp_path) -> None:
    from robot_grinding_sim.core.geometry.parts import freeform_face

    face = freeform_face(0.1).write(tmp_path / "face.step")
    with pytest.raises(ParameterError, match="parameter 'workpiece.mass'.*encloses no volume.*give it"):
        held_part_inertia(_cell(urdf, **{"workpiece.part": str(face), "workpiece.faces": [0]}))


def test_the_arm_carries_the_part_in_its_dynamics_as_pinocchio_does(urdf) -> None:
    """RNEA and the mass matrix of the job's robot (the part lumped into the sensor's body) equal
    Pinocchio's with the part appended to the same joint, to 1e-9 relative."""
    cell = _cell(urdf, **{"removal.material": "steel"})
    model = cell_robot_model(cell)
    body = _plate_body(MATERIAL_DENSITY["steel"])
    pm, data = _pin_with_part(urdf, body)
    bare = pin.buildModelFromUrdf(str(urdf))
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, qd, qdd = rng.uniform(-2.5, 2.5, 6), rng.normal(size=6), rng.normal(size=6)
        tau = model.rnea(q, qd, qdd)
        ref = pin.rnea(pm, data, q, qd, qdd)
        np.testing.assert_allclose(tau, ref, rtol=0, atol=1e-9 * np.abs(ref).max())
        # the part does load the arm: without it the torques differ by far more than that
        assert np.abs(pin.rnea(bare, bare.createData(), q, qd, qdd) - ref).max() > 1e-3 * np.abs(ref).max()
        M = pin.crba(pm, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(model.mass_matrix(q), M, rtol=0, atol=1e-9 * np.abs(M).max())


def test_the_sensor_weighs_the_part_and_takes_the_opposite_of_the_tools_contact(urdf) -> None:
    """The F/T sensor between the flange and the part reads the part's weight and the contact wrench
    on the part (the opposite of the one on the tool, at the standing tool centre), in its frame:
    as Pinocchio's frame placements give them, to 1e-9."""
    cell = _cell(urdf)
    model = cell_robot_model(cell)
    ft = ft_sensor_model(cell, model)
    assert ft.params.part_side
    m, c_P, _ = _plate_body(MATERIAL_DENSITY["aluminium"])
    g = np.array(cell.sim.gravity)
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    S, T = pm.getFrameId("ft_sensor"), pm.getFrameId("tcp")
    rng = np.random.default_rng(11)
    Q = rng.uniform(-2.5, 2.5, (4, 6))
    W = rng.normal(size=(4, 6)) * [5, 5, 20, 0.2, 0.2, 0.2]  # on the tool, tcp frame, about the tcp
    R_WS, X_S_tcp = sensor_inputs(ft, model, "ft_sensor", Q)
    got = ft.measure_many(W, R_WS, np.arange(4) * 1e-3, X_S_tcp)
    for k, q in enumerate(Q):
        pin.framesForwardKinematics(pm, data, q)
        oS, oT = data.oMf[S], data.oMf[T]
        c_W = (oS.homogeneous @ pose_matrix(GRASP) @ np.r_[c_P, 1.0])[:3]
        f_part, t_part = -oT.rotation @ W[k, :3], -oT.rotation @ W[k, 3:]  # on the part, world axes, about the tcp
        F_W = m * g + f_part
        T_W = np.cross(c_W - oS.translation, m * g) + np.cross(oT.translation - oS.translation, f_part) + t_part
        ref = np.r_[oS.rotation.T @ F_W, oS.rotation.T @ T_W]
        np.testing.assert_allclose(got[k], ref, rtol=0, atol=1e-9 * np.abs(ref).max())
        # one sample at a time gives the same
        R1, X1 = sensor_inputs(ft, model, "ft_sensor", q)
        np.testing.assert_allclose(ft.measure(W[k], R1, 1.0 + k, X1), ref, rtol=0, atol=1e-9 * np.abs(ref).max())


def test_a_sensor_under_the_standing_tool_reads_the_contact_on_the_tool(urdf, tmp_path) -> None:
    """A sensor under the standing tool (the frame fixed to the root) is rigid with the tool centre
    and never turns: it reads the contact on the tool and the weight of the tool above it, whatever
    the arm does; a sensor on the arm that does not carry the part is refused."""
    cell = _cell(urdf, **{"ft_sensor.frame": "spindle"})
    model = cell_robot_model(cell)
    ft = ft_sensor_model(cell, model)
    assert not ft.params.part_side
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    pin.framesForwardKinematics(pm, data, np.zeros(6))
    oS, oT = data.oMf[pm.getFrameId("spindle")], data.oMf[pm.getFrameId("tcp")]
    w = np.array([1.0, -2.0, 10.0, 0.1, 0.0, -0.05])
    f_W, t_W = oT.rotation @ w[:3], oT.rotation @ w[3:]
    m_tool, c_tool = ft.params.tool_mass, ft.params.tool_com
    assert m_tool > 0  # the ball and its holder above the spindle's face
    F_W = f_W + m_tool * np.array(cell.sim.gravity)
    T_W = np.cross(oT.translation - oS.translation, f_W) + t_W + np.cross(oS.rotation @ c_tool, F_W - f_W)
    ref = np.r_[oS.rotation.T @ F_W, oS.rotation.T @ T_W]
    for q in np.random.default_rng(5).uniform(-2.5, 2.5, (3, 6)):
        R_WS, X = sensor_inputs(ft, model, "spindle", q)
        assert X is None
        np.testing.assert_allclose(ft.measure(w, R_WS, 0.0), ref, rtol=0, atol=1e-12)
    # the part on the flange, the sensor's face below it (toward the old tool): it carries nothing
    flange = _cell(urdf, **{"workpiece.link": "flange"})
    with pytest.raises(ParameterError, match="'ft_sensor.frame': link 'ft_sensor' .* is not on the chain"):
        cell_robot_model(flange)  # the job's check of the robot
    from robot_grinding_sim.core.job.setup import held_part_model

    with pytest.raises(InputError, match="'ft_sensor.frame': 'ft_sensor' moves with the arm.*does not carry the "
                                         "part held on 'flange'"):
        ft_sensor_model(flange, held_part_model(flange))  # a node's robot

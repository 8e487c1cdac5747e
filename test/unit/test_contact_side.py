"""The contact side of the coupled step (what contact_solver_node runs), without rclpy.

A contact 0.1 mm deep on the ball, off the tcp axis, with joint velocities: the model's
penetration rate comes from the velocity of the contact point by finite differences of our FK,
the effective mass from Pinocchio (CRBA and the frame Jacobian of the contact point), the
damping from the clamped restitution relation; the force is K d + D d' (Kelvin-Voigt) or
K d^1.5 (Hunt-Crossley at rest); the tangential force is the grinding force ratio against the
sliding velocity.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from pinocchio_oracle import effective_mass

from robot_grinding_sim.core.config import ContactConfig
from robot_grinding_sim.core.contact.kelvin_voigt import kv_zeta_clamped
from robot_grinding_sim.core.resources import default_urdf
from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.core.sim.coupled_step import ContactSide

URDF = default_urdf()
Q0 = np.array([0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0])  # tool pointing straight down
K = 1.0e5  # N/m
DEPTH = 1e-4  # m
R_BALL = 0.02


@pytest.fixture(scope="module")
def model() -> RobotModel:
    return RobotModel.from_urdf(URDF, tip_link="tcp")


def _side(robot: RobotModel, spindle: float = 0.0, **contact: object) -> ContactSide:
    cfg = ContactConfig(**{"stiffness": K, "force_ratio": 0.0, **contact})
    return ContactSide(robot, cfg, "tcp", spindle)


def _case(model: RobotModel):
    """The contact row, q, qd, tcp pose, normal, contact point and the penetration rate d' = -n . v
    of the contact point moving with the tool (finite differences of the forward kinematics)."""
    q = Q0 + np.array([0.1, 0.05, -0.1, 0.2, 0.1, 0.3])
    qd = np.array([0.05, -0.1, 0.08, 0.2, -0.1, 0.3])
    T = model.fk(q, "tcp")
    n = np.array([0.3, -0.2, 0.93])
    n /= np.linalg.norm(n)
    p = T[:3, 3] - (R_BALL - DEPTH) * n
    p_local = np.linalg.solve(T, np.r_[p, 1.0])
    eps = 1e-7
    v = ((model.fk(q + eps * qd, "tcp") @ p_local)[:3] - (model.fk(q - eps * qd, "tcp") @ p_local)[:3]) / (2 * eps)
    row = np.array([[*p, *n, DEPTH]])
    return row, q, qd, T, n, p, v


def test_kelvin_voigt_with_damping_and_velocity(model) -> None:
    side = _side(model, damping=300.0)
    row, q, qd, T, n, p, v = _case(model)
    dd = -float(n @ v)
    assert abs(dd) > 1e-3  # the case has a real penetration rate
    rom = side.from_rows(0.5, q, qd, row)
    assert rom.gap == -DEPTH and rom.rate == pytest.approx(-dd, rel=1e-6)
    F = K * DEPTH + 300.0 * dd
    assert side.normal_force(rom) == pytest.approx(F, rel=1e-6)
    w = side.wrench(rom)
    np.testing.assert_allclose(T[:3, :3] @ w[:3], F * n, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(T[:3, :3] @ w[3:], np.cross(p - T[:3, 3], F * n), atol=1e-9)


def test_kelvin_voigt_restitution_uses_the_arm_effective_mass(model) -> None:
    side = _side(model, cr=0.6)
    row, q, qd, T, n, p, v = _case(model)
    rom = side.from_rows(0.5, q, qd, row)
    m_eff = effective_mass(str(URDF), q, n, point=p)
    assert rom.mass == pytest.approx(m_eff, rel=1e-9)
    D = 2 * kv_zeta_clamped(0.6) * math.sqrt(K * m_eff)
    assert rom.damping == pytest.approx(D, rel=1e-9)
    assert side.normal_force(rom) == pytest.approx(K * DEPTH - D * float(n @ v), rel=1e-6)


def test_hunt_crossley_static_and_no_contact(model) -> None:
    side = _side(model, model="hunt_crossley", stiffness=1e9, cr=0.5)
    row, q, _, T, n, _, _ = _case(model)
    rom = side.from_rows(0.5, q, np.zeros(6), row)
    np.testing.assert_allclose(T[:3, :3] @ side.wrench(rom)[:3], 1e9 * DEPTH**1.5 * n, rtol=1e-9)
    assert side.from_rows(0.6, q, np.zeros(6), np.zeros((0, 7))) is None


def test_tangential_force_opposes_the_sliding_velocity(model) -> None:
    side = _side(model, force_ratio=0.3)
    row, q, qd, T, n, p, v = _case(model)
    rom = side.from_rows(0.5, q, qd, row)
    v_slide = v - (v @ n) * n  # the contact point's tangential velocity (no spindle)
    expected = -0.3 * v_slide / math.sqrt(v_slide @ v_slide + 1e-6)
    np.testing.assert_allclose(rom.tangential, expected, rtol=1e-5, atol=1e-9)
    assert abs(rom.tangential @ n) < 1e-12
    # a spinning tool slides at spindle rate x offset even with the arm at rest: along -(w x r)
    spun = _side(model, spindle=1000.0, force_ratio=0.3)
    rest = spun.from_rows(0.5, q, np.zeros(6), row)
    w_r = np.cross(1000.0 * T[:3, 2], p - T[:3, 3])
    w_r -= (w_r @ n) * n
    np.testing.assert_allclose(rest.tangential, -0.3 * w_r / math.sqrt(w_r @ w_r + 1e-6), rtol=1e-9)


def test_a_patch_row_carries_its_stiffness_to_the_model(model) -> None:
    """The contact row of a tool with a patch (a wheel, pad or disc; collision_node's
    /contact/points) carries the patch stiffness k_w A_c: the model and the force take it in place of
    the law's; the ball's row carries -1 (the law's own), and a row without the column (a cloud of 7
    fields) is the ball's. The damping follows the patch stiffness (the same damping ratio)."""
    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.core.geometry.tool_contact import CONTACT_ROW, ROW_FIELDS, ContactGeometry

    assert ROW_FIELDS == ("x", "y", "z", "normal_x", "normal_y", "normal_z", "depth", "stiffness")
    side = _side(model, cr=0.6, model="winkler", stiffness=2e8)  # k_w, N/m^3: never the model's K
    row, q, qd, T, n, p, v = _case(model)
    K_patch = 4.0e4  # N/m
    patch = np.c_[row, [[K_patch]]]
    rom = side.from_rows(0.5, q, np.zeros(6), patch)
    m_eff = effective_mass(str(URDF), q, n, point=p)
    assert rom.stiffness == K_patch and rom.gap == -DEPTH
    assert rom.damping == pytest.approx(2 * kv_zeta_clamped(0.6) * math.sqrt(K_patch * m_eff), rel=1e-9)
    assert side.normal_force(rom) == pytest.approx(K_patch * DEPTH, rel=1e-9)
    # the geometry's row and back: the same contact
    g = ContactGeometry.from_rows(patch, T[:3, 3])
    np.testing.assert_array_equal(g.row(), patch[0])
    assert g.row().shape == (CONTACT_ROW.size,)
    # the ball: the law's own stiffness, with or without the column
    ball = _side(model)
    for r in (row, np.c_[row, [[-1.0]]]):
        assert ball.from_rows(0.5, q, np.zeros(6), r).stiffness == K
    for bad, what in ((np.c_[row, [[0.0]]], "stiffness 0.0"), (np.c_[row, [[-5.0]]], "stiffness -5.0"),
                      (row[:, :6], "got shape"), (np.c_[row, [[1.0, 2.0]]], "got shape")):
        with pytest.raises(InputError, match=what):
            ContactGeometry.from_rows(bad, T[:3, 3])

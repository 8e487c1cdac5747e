"""The default robot and tools (urdf/ur10e_grinding*.urdf) against independent references.

The references are written here, not read from the URDF: the UR10e standard DH parameters and the
published masses, centres of mass and inertia tensors (shared/reference/robot_facts.md, section 2.3),
transcribed by hand. Two third-party parsers read the files: yourdfpy (XML-level checks and a second
forward kinematics) and Pinocchio (kinematics, inertias as a rigid-body library sees them, gravity).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin  # test dependency ("test" extra): a missing install must fail, not skip
import pytest
import yourdfpy

URDF_DIR = Path(__file__).resolve().parents[2] / "urdf"
BALL = URDF_DIR / "ur10e_grinding.urdf"
WHEEL = URDF_DIR / "ur10e_grinding_wheel.urdf"
BOTH = [BALL, WHEEL]

JOINTS = [
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
]
# Links that are pure frames (no body): no mass, no geometry.
FRAME_LINKS = {"base_link", "flange", "tool0", "tcp"}

# UR10e standard DH (robot_facts.md 2.3).
DH_D = (0.1807, 0.0, 0.0, 0.17415, 0.11985, 0.11655)
DH_A = (0.0, -0.6127, -0.57155, 0.0, 0.0, 0.0)
DH_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)

# Published UR10e inertial data: mass [kg], CoG [m] and rpy of the inertia frame in the link frame,
# (ixx, ixy, ixz, iyy, iyz, izz) [kg m^2] about the CoG in that rotated frame.
H = math.pi / 2
UR10E_INERTIA = {
    "shoulder_link": (7.369, (0.021, -0.027, 0.0), (H, 0, 0),
                      (0.03408, 0.00002, -0.00425, 0.03529, 0.00008, 0.02156)),
    "upper_arm_link": (13.051, (-0.2327, 0.0, 0.158), (0, 0, 0),
                       (0.02814, 0.00005, -0.01561, 0.77068, 0.00002, 0.76943)),
    "forearm_link": (3.989, (-0.33155, 0.0, 0.068), (0, 0, 0),
                     (0.01014, 0.00008, 0.00916, 0.30928, 0.0, 0.30646)),
    "wrist_1_link": (2.1, (0.0, -0.018, 0.007), (H, 0, 0),
                     (0.00296, -0.00001, 0.0, 0.00222, -0.00024, 0.00258)),
    "wrist_2_link": (1.98, (0.0, 0.018, -0.007), (-H, 0, 0),
                     (0.00296, -0.00001, 0.0, 0.00222, -0.00024, 0.00258)),
    "wrist_3_link": (0.615, (0.0, 0.0, -0.026), (0, 0, 0), (0.00040, 0.0, 0.0, 0.00041, 0.0, 0.00034)),
}
BASE_MASS = 4.0
ARM_MASS = BASE_MASS + sum(v[0] for v in UR10E_INERTIA.values())  # 33.104 kg
G = 9.81


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def homog(r: np.ndarray, p=(0.0, 0.0, 0.0)) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = r
    t[:3, 3] = p
    return t


def dh_fk(q: np.ndarray) -> np.ndarray:
    """Standard DH forward kinematics (4x4, flange in the DH base frame); q (6,) [rad]."""
    t = np.eye(4)
    for qi, d, a, alpha in zip(q, DH_D, DH_A, DH_ALPHA, strict=True):
        t = t @ homog(rot_z(qi), (0, 0, d)) @ homog(rot_x(alpha), (a, 0, 0))
    return t


def sym(i6) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = i6
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]], dtype=float)


def rpy_matrix(rpy) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    return rot_z(rpy[2]) @ rot_y(rpy[1]) @ rot_x(rpy[0])


@pytest.fixture(scope="module", params=BOTH, ids=lambda p: p.stem)
def robot(request):
    path = request.param
    model = pin.buildModelFromUrdf(str(path))
    urdf = yourdfpy.URDF.load(
        str(path), build_scene_graph=True, load_meshes=False, build_collision_scene_graph=False
    )
    return path, model, urdf


def frame_pose(model, data, name: str) -> np.ndarray:
    assert model.existFrame(name), f"frame {name} missing"
    return data.oMf[model.getFrameId(name)].homogeneous.copy()


def test_parse_joints_and_frames(robot):
    path, model, urdf = robot
    assert model.nq == 6 and model.nv == 6
    assert [model.names[i] for i in range(1, model.njoints)] == JOINTS
    for name in ("base_link", "base_link_inertia", "tool0", "flange", "ft_sensor", "spindle", "tcp"):
        assert model.existFrame(name), name
        assert name in urdf.link_map, name
    assert urdf.base_link == "base_link"
    assert set(urdf.actuated_joint_names) == set(JOINTS)


def test_joint_limits(robot):
    _, _, urdf = robot
    vel_deg = (120, 120, 180, 180, 180, 180)
    effort = (330, 330, 150, 56, 56, 56)
    for name, v, e in zip(JOINTS, vel_deg, effort, strict=True):
        j = urdf.joint_map[name]
        pos = 180.0 if name == "elbow_joint" else 360.0
        assert j.type == "revolute"
        assert j.limit.lower == pytest.approx(-math.radians(pos), abs=1e-12)
        assert j.limit.upper == pytest.approx(math.radians(pos), abs=1e-12)
        assert j.limit.velocity == pytest.approx(math.radians(v), abs=1e-12)
        assert j.limit.effort == pytest.approx(e)


def test_collision_geometry_on_every_body(robot):
    path, model, urdf = robot
    for name, link in urdf.link_map.items():
        if name in FRAME_LINKS:
            assert link.inertial is None and not link.collisions, f"{name} should be a pure frame"
        else:
            assert link.inertial is not None and link.inertial.mass > 0, f"{name} has no mass"
            assert link.collisions, f"{name} has no collision geometry"
            for c in link.collisions:
                g = c.geometry
                assert g.mesh is None and any(x is not None for x in (g.box, g.cylinder, g.sphere)), name
    # Pinocchio/coal build a collision object for each primitive.
    geom = pin.buildGeomFromUrdf(model, str(path), pin.GeometryType.COLLISION)
    n_urdf = sum(len(link.collisions) for link in urdf.link_map.values())
    assert geom.ngeoms == n_urdf


def test_inertials_physically_valid(robot):
    _, _, urdf = robot
    for name, link in urdf.link_map.items():
        if link.inertial is None:
            continue
        ev = np.linalg.eigvalsh(link.inertial.inertia)
        assert np.all(ev > 0), f"{name}: inertia not positive definite {ev}"
        a, b, c = ev
        assert a + b >= c * (1 - 1e-9), f"{name}: principal moments violate the triangle inequality {ev}"


def test_masses_match_published_figures(robot):
    _, model, urdf = robot
    assert urdf.link_map["base_link_inertia"].inertial.mass == pytest.approx(BASE_MASS)
    for name, (mass, *_rest) in UR10E_INERTIA.items():
        assert urdf.link_map[name].inertial.mass == pytest.approx(mass, abs=1e-12), name
    arm = sum(urdf.link_map[n].inertial.mass for n in ["base_link_inertia", *UR10E_INERTIA])
    assert arm == pytest.approx(ARM_MASS) and arm == pytest.approx(33.104)
    tool = sum(urdf.link_map[n].inertial.mass for n in ("ft_sensor", "spindle", "abrasive_head"))
    assert 1.5 < tool < 3.0  # sensor ~0.3 kg, spindle ~1.8 kg, head < 0.1 kg
    assert 0.2 <= urdf.link_map["ft_sensor"].inertial.mass <= 0.5
    # Pinocchio lumps the base into the universe (fixed to the ground): the moving mass is the rest.
    assert pin.computeTotalMass(model) == pytest.approx(ARM_MASS - BASE_MASS + tool, abs=1e-9)


def test_arm_inertias_as_pinocchio_sees_them(robot):
    """Each arm body's inertia in its joint frame equals the published figures with the rpy applied."""
    _, model, urdf = robot
    for jid, link in enumerate(
        ["shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link"], start=1
    ):
        mass, com, rpy, i6 = UR10E_INERTIA[link]
        r = rpy_matrix(rpy)
        inertia = model.inertias[jid]
        assert inertia.mass == pytest.approx(mass, abs=1e-12), link
        np.testing.assert_allclose(inertia.lever, com, atol=1e-12, err_msg=link)
        np.testing.assert_allclose(inertia.inertia, r @ sym(i6) @ r.T, atol=1e-12, err_msg=link)
    # wrist_3 carries the flange-side bodies lumped: sensor, spindle and head.
    tool = sum(urdf.link_map[n].inertial.mass for n in ("ft_sensor", "spindle", "abrasive_head"))
    assert model.inertias[6].mass == pytest.approx(UR10E_INERTIA["wrist_3_link"][0] + tool, abs=1e-12)


def test_tool0_matches_standard_dh(robot):
    """Pinocchio FK of tool0 == Rz(pi) (UR base_link vs DH base) . DH(q) . B, with B constant."""
    _, model, _ = robot
    data = model.createData()
    a_base = homog(rot_z(math.pi))

    pin.framesForwardKinematics(model, data, np.zeros(6))
    t0 = frame_pose(model, data, "tool0")
    b_tool = np.linalg.inv(a_base @ dh_fk(np.zeros(6))) @ t0
    # tool0 is the DH flange frame up to a rotation about the tool axis: same origin, same z.
    np.testing.assert_allclose(b_tool[:3, 3], 0.0, atol=1e-12)
    np.testing.assert_allclose(b_tool[:3, 2], (0, 0, 1), atol=1e-12)

    rng = np.random.default_rng(20261122)
    for q in rng.uniform(-math.pi, math.pi, size=(20, 6)):
        pin.framesForwardKinematics(model, data, q)
        expected = a_base @ dh_fk(q) @ b_tool
        got = frame_pose(model, data, "tool0")
        np.testing.assert_allclose(got[:3, 3], expected[:3, 3], atol=1e-9)
        np.testing.assert_allclose(got[:3, :3], expected[:3, :3], atol=1e-9)


def test_tool_frames_two_parsers_agree(robot):
    """yourdfpy and Pinocchio give the same tcp and ft_sensor poses at random q."""
    _, model, urdf = robot
    data = model.createData()
    rng = np.random.default_rng(7)
    for q in rng.uniform(-math.pi, math.pi, size=(5, 6)):
        urdf.update_cfg(dict(zip(JOINTS, q, strict=True)))
        pin.framesForwardKinematics(model, data, q)
        for name in ("tool0", "ft_sensor", "tcp"):
            np.testing.assert_allclose(
                urdf.get_transform(name, "base_link"), frame_pose(model, data, name), atol=1e-12, err_msg=name
            )


def _rel(model, data, a: str, b: str) -> np.ndarray:
    return np.linalg.inv(frame_pose(model, data, a)) @ frame_pose(model, data, b)


def _collision(urdf, link: str, name: str):
    (c,) = [c for c in urdf.link_map[link].collisions if c.name == name]
    return c


def test_sensor_frame_at_measuring_face(robot):
    _, model, urdf = robot
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array([0.3, -1.2, 1.1, -0.7, 1.4, 0.2]))
    x_es = _rel(model, data, "tool0", "ft_sensor")
    body = _collision(urdf, "ft_sensor", "body")
    r, h = body.geometry.cylinder.radius, body.geometry.cylinder.length
    assert 2 * r == pytest.approx(0.080) and h == pytest.approx(0.030)
    # The sensor body spans tool0 (mounting face) .. ft_sensor (measuring face), same orientation.
    np.testing.assert_allclose(x_es[:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(x_es[:3, 3], (0, 0, h), atol=1e-12)
    np.testing.assert_allclose(body.origin[:3, 3], (0, 0, -h / 2), atol=1e-12)
    # The sensor sits on the chain between the flange and the tcp.
    parent_of = {j.child: j.parent for j in urdf.joint_map.values()}
    chain, link = [], "tcp"
    while link in parent_of:
        link = parent_of[link]
        chain.append(link)
    order = [chain.index(n) for n in ("ft_sensor", "tool0", "flange", "wrist_3_link")]
    assert order == sorted(order)


def test_tool0_z_points_out_of_the_flange(robot):
    _, model, _ = robot
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.array([0.1, -1.0, 1.5, -2.0, -1.2, 0.4]))
    w2 = frame_pose(model, data, "wrist_2_link")
    t0 = frame_pose(model, data, "tool0")
    out = t0[:3, 3] - w2[:3, 3]
    # The flange is d6 = 0.11655 m from the wrist_2 axis, along tool0 z.
    np.testing.assert_allclose(out, 0.11655 * t0[:3, 2], atol=1e-12)


def test_ball_tool_geometry():
    model = pin.buildModelFromUrdf(str(BALL))
    data = model.createData()
    urdf = yourdfpy.URDF.load(str(BALL), load_meshes=False, build_collision_scene_graph=False)
    pin.framesForwardKinematics(model, data, np.array([-0.4, -1.9, 2.0, 0.3, 0.8, -1.0]))
    x_et = _rel(model, data, "tool0", "tcp")
    np.testing.assert_allclose(x_et[:3, :3], np.eye(3), atol=1e-12)  # tcp z = tool0 z
    np.testing.assert_allclose(x_et[:3, 3], (0, 0, 0.235), atol=1e-12)

    ball = _collision(urdf, "abrasive_head", "ball")
    assert ball.geometry.sphere.radius == pytest.approx(0.020)
    # The ball's centre is the tcp.
    x_ht = _rel(model, data, "abrasive_head", "tcp")
    np.testing.assert_allclose(ball.origin[:3, 3], x_ht[:3, 3], atol=1e-12)
    # Spindle tip (far end of its body) -> tcp: 25 mm shank + 20 mm ball radius along the tool axis.
    body = _collision(urdf, "spindle", "body")
    tip = body.origin[:3, 3] + body.origin[:3, 2] * body.geometry.cylinder.length / 2
    x_st = _rel(model, data, "spindle", "tcp")
    np.testing.assert_allclose(x_st[:3, 3] - tip, (0, 0, 0.025 + 0.020), atol=1e-12)
    # The ball's foremost point is 0.020 m beyond the tcp along z, clear of the spindle.
    assert x_st[2, 3] - ball.geometry.sphere.radius > tip[2]

    head = urdf.link_map["abrasive_head"].inertial
    ball_mass = 4 / 3 * math.pi * 0.020**3 * 2200  # vitrified alumina ~2.2 g/cm^3
    assert head.mass == pytest.approx(ball_mass + 0.006, rel=0.02)


def test_wheel_tool_geometry():
    model = pin.buildModelFromUrdf(str(WHEEL))
    data = model.createData()
    urdf = yourdfpy.URDF.load(str(WHEEL), load_meshes=False, build_collision_scene_graph=False)
    pin.framesForwardKinematics(model, data, np.zeros(6))
    x_et = _rel(model, data, "tool0", "tcp")
    np.testing.assert_allclose(x_et[:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(x_et[:3, 3], (0, 0, 0.220), atol=1e-12)

    wheel = _collision(urdf, "abrasive_head", "wheel")
    assert wheel.geometry.cylinder.radius == pytest.approx(0.025)
    assert wheel.geometry.cylinder.length == pytest.approx(0.010)
    # Wheel centred on the tcp, its axis (the cylinder's z) along the tcp z (coaxial with the spindle).
    x_ht = _rel(model, data, "abrasive_head", "tcp")
    np.testing.assert_allclose(wheel.origin[:3, 3], x_ht[:3, 3], atol=1e-12)
    np.testing.assert_allclose(wheel.origin[:3, 2], x_ht[:3, 2], atol=1e-12)
    body = _collision(urdf, "spindle", "body")
    tip = body.origin[:3, 3] + body.origin[:3, 2] * body.geometry.cylinder.length / 2
    x_st = _rel(model, data, "spindle", "tcp")
    np.testing.assert_allclose(x_st[:3, 3] - tip, (0, 0, 0.025 + 0.005), atol=1e-12)

    head = urdf.link_map["abrasive_head"].inertial
    wheel_mass = math.pi * 0.025**2 * 0.010 * 2200
    assert head.mass == pytest.approx(wheel_mass + 0.006, rel=0.02)


def test_variants_share_arm_and_sensor():
    ball = yourdfpy.URDF.load(str(BALL), load_meshes=False, build_scene_graph=False)
    wheel = yourdfpy.URDF.load(str(WHEEL), load_meshes=False, build_scene_graph=False)
    assert set(ball.link_map) == set(wheel.link_map)
    tool_links = {"abrasive_head"}
    tool_joints = {"abrasive_head-tcp"}
    for name in set(ball.link_map) - tool_links:
        assert ball.link_map[name] == wheel.link_map[name], name
    for name in set(ball.joint_map) - tool_joints:
        assert ball.joint_map[name] == wheel.joint_map[name], name


def test_gravity_torque_hand_estimate(robot):
    """At q = 0 the arm is stretched horizontally: lift and elbow hold m g x of everything outboard."""
    _, model, urdf = robot
    data = model.createData()
    tau = pin.computeGeneralizedGravity(model, data, np.zeros(6))
    tool = sum(urdf.link_map[n].inertial.mass for n in ("ft_sensor", "spindle", "abrasive_head"))
    m = {k: v[0] for k, v in UR10E_INERTIA.items()}
    wrist = m["wrist_1_link"] + m["wrist_2_link"] + m["wrist_3_link"] + tool
    a2, a3 = 0.6127, 0.57155
    # Horizontal distances from each axis (CoG x along the links from the table; wrist lumped on its axis).
    lift = G * (m["upper_arm_link"] * 0.2327 + m["forearm_link"] * (a2 + 0.33155) + wrist * (a2 + a3))
    elbow = G * (m["forearm_link"] * 0.33155 + wrist * a3)
    # The lift axis is base_link +y at q = 0, so holding the arm up takes a negative torque.
    assert tau[1] == pytest.approx(-lift, rel=0.02)
    assert tau[2] == pytest.approx(-elbow, rel=0.02)
    assert abs(tau[0]) < 1e-9

"""RobotModel against Pinocchio on third-party URDFs (example-robot-data) and a prismatic chain.

Pinocchio parses each URDF itself; joints off our chain are locked at zero with
``pin.buildReducedModel`` so both sides describe the same mechanism. Continuous joints are
(cos, sin) pairs in Pinocchio's configuration: converted here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from robot_grinding_sim.core.robot.dynamics import RobotModel

ERD = Path(pin.__file__).resolve()
for parent in ERD.parents:
    if (parent / "share" / "example-robot-data" / "robots").is_dir():
        SHARE = parent / "share"
        break
else:  # pragma: no cover
    raise RuntimeError("example-robot-data URDFs not found next to pinocchio")
ROBOTS = SHARE / "example-robot-data" / "robots"

RTOL = 1e-9

PRISMATIC_URDF = """<?xml version="1.0"?>
<robot name="slider_arm">
  <link name="base"/>
  <link name="carriage">
    <inertial><origin xyz="0.01 0.02 0.03" rpy="0.1 0.2 0.3"/><mass value="3.0"/>
      <inertia ixx="0.02" ixy="0.001" ixz="0.002" iyy="0.03" iyz="0.003" izz="0.04"/></inertial>
  </link>
  <link name="arm">
    <inertial><origin xyz="0.2 0.0 0.05" rpy="0 0.3 0"/><mass value="2.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/></inertial>
  </link>
  <link name="slide">
    <inertial><origin xyz="0 0 0.1"/><mass value="0.7"/>
      <inertia ixx="0.003" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.001"/></inertial>
  </link>
  <link name="wrist">
    <inertial><origin xyz="0 0.03 0"/><mass value="0.4"/>
      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.001"/></inertial>
  </link>
  <link name="tool">
    <inertial><origin xyz="0 0 0.02"/><mass value="0.3"/>
      <inertia ixx="0.0005" ixy="0" ixz="0" iyy="0.0005" iyz="0" izz="0.0002"/></inertial>
  </link>
  <link name="tcp"/>
  <joint name="rail" type="prismatic">
    <parent link="base"/><child link="carriage"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.3 -0.2 0.1"/><axis xyz="1 1 0"/>
    <limit lower="-1" upper="1" effort="100" velocity="1"/>
  </joint>
  <joint name="shoulder" type="revolute">
    <parent link="carriage"/><child link="arm"/>
    <origin xyz="0 0 0.2" rpy="1.5707963 0 0.4"/><axis xyz="0 0.6 0.8"/>
    <limit lower="-3" upper="3" effort="50" velocity="2"/>
  </joint>
  <joint name="extend" type="prismatic">
    <parent link="arm"/><child link="slide"/>
    <origin xyz="0.4 0 0" rpy="0 1.5707963 0"/><axis xyz="0 0 -1"/>
    <limit lower="0" upper="0.3" effort="20" velocity="0.5"/>
  </joint>
  <joint name="twist" type="continuous">
    <parent link="slide"/><child link="wrist"/>
    <origin xyz="0 0 0.2" rpy="0 0 0.7"/><axis xyz="1 0 0"/>
  </joint>
  <joint name="flange" type="fixed">
    <parent link="wrist"/><child link="tool"/><origin xyz="0 0 0.05" rpy="0.2 0 0"/>
  </joint>
  <joint name="tool_tip" type="fixed">
    <parent link="tool"/><child link="tcp"/><origin xyz="0 0 0.1"/>
  </joint>
</robot>
"""

# (id, urdf path, tip link or None for our default). Different conventions: UR (rpy origins,
# axes along z with offsets), Panda (modified-DH rpy chain, a prismatic finger on the chain, the
# other finger locked and lumped), Z1 (axes along y/z/x, gripper joint locked), SO-100 (arbitrary
# rpy origins), Kinova (continuous joints, fingers locked), and a hand-written prismatic chain.
CASES = [
    ("ur5", ROBOTS / "ur_description/urdf/ur5_robot.urdf", "tool0"),
    ("panda_finger", ROBOTS / "panda_description/urdf/panda.urdf", "panda_leftfinger"),
    ("panda_tcp", ROBOTS / "panda_description/urdf/panda.urdf", "panda_hand_tcp"),
    ("z1", ROBOTS / "z1_description/urdf/z1.urdf", "link06"),
    ("so100", ROBOTS / "so_arm_description/urdf/so100.urdf", None),
    ("kinova", ROBOTS / "kinova_description/robots/kinova.urdf", None),
    ("prismatic", None, "tcp"),
]


class Pair:
    """Our model and the Pinocchio model of the same chain, with configuration conversion."""

    def __init__(self, path: Path | None, tip: str | None, tmp: Path) -> None:
        if path is None:
            path = tmp / "slider_arm.urdf"
            path.write_text(PRISMATIC_URDF)
        self.ours = RobotModel.from_urdf(path, tip_link=tip, package_dirs=[SHARE])
        full = pin.buildModelFromUrdf(str(path))
        lock = [full.getJointId(n) for n in full.names[1:] if n not in self.ours.joint_names]
        self.model = pin.buildReducedModel(full, lock, pin.neutral(full)) if lock else full
        self.data = self.model.createData()
        names = list(self.model.names[1:])
        assert names == self.ours.joint_names, (names, self.ours.joint_names)
        self.joints = [self.model.joints[i] for i in range(1, self.model.njoints)]

    def pin_q(self, q: np.ndarray) -> np.ndarray:
        out = []
        for j, qi in zip(self.joints, q, strict=True):
            out += [np.cos(qi), np.sin(qi)] if j.nq == 2 else [qi]
        return np.array(out)

    def pin_fext(self, q: np.ndarray, wrenches: dict[str, np.ndarray]) -> list:
        """Our root-frame wrenches (about each link origin) as Pinocchio joint-frame forces."""
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, self.pin_q(q))
        pin.updateFramePlacements(m, d)
        fext = [pin.Force.Zero() for _ in range(m.njoints)]
        for link, w in wrenches.items():
            fid = m.getFrameId(link, pin.FrameType.BODY)
            frame = m.frames[fid]
            R = d.oMf[fid].rotation
            local = pin.Force(R.T @ w[:3], R.T @ w[3:])  # in the link frame, about its origin
            fext[frame.parentJoint] += frame.placement.act(local)
        return fext


def _rel(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(ours - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def _states(model: RobotModel, rng: np.random.Generator, n: int = 4):
    lo = np.where(np.isfinite(model.lower), model.lower, -np.pi)
    hi = np.where(np.isfinite(model.upper), model.upper, np.pi)
    for _ in range(n):
        yield rng.uniform(lo, hi), rng.normal(0, 1.5, model.nq), rng.normal(0, 3.0, model.nq)


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def pair(request, tmp_path_factory) -> Pair:
    _, path, tip = request.param
    return Pair(path, tip, tmp_path_factory.mktemp("urdf"))


def test_same_chain_and_limits(pair: Pair) -> None:
    m = pair.ours
    assert m.nq == pair.model.nv
    vmax = np.asarray(pair.model.velocityLimit)
    emax = np.asarray(pair.model.effortLimit)
    finite = np.isfinite(m.velocity_limits)
    np.testing.assert_allclose(m.velocity_limits[finite], vmax[finite])
    finite = np.isfinite(m.effort_limits)
    np.testing.assert_allclose(m.effort_limits[finite], emax[finite])
    lo, hi = np.asarray(pair.model.lowerPositionLimit), np.asarray(pair.model.upperPositionLimit)
    for i, j in enumerate(pair.joints):
        if j.nq == 1:  # continuous joints: Pinocchio bounds cos/sin, we give +-inf
            assert (m.lower[i], m.upper[i]) == (lo[j.idx_q], hi[j.idx_q])
        else:
            assert m.lower[i] == -np.inf and m.upper[i] == np.inf


def test_rnea_mass_matrix_fd(pair: Pair) -> None:
    m, pm, pd = pair.ours, pair.model, pair.data
    rng = np.random.default_rng(7)
    for q, qd, qdd in _states(m, rng):
        pq = pair.pin_q(q)
        tau_pin = pin.rnea(pm, pd, pq, qd, qdd)
        assert _rel(m.rnea(q, qd, qdd), tau_pin) < RTOL
        M_pin = pin.crba(pm, pd, pq)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        assert _rel(m.mass_matrix(q), M_pin) < RTOL
        assert _rel(m.gravity_torques(q), pin.computeGeneralizedGravity(pm, pd, pq)) < RTOL
        assert _rel(m.bias_forces(q, qd), pin.nonLinearEffects(pm, pd, pq, qd)) < RTOL
        tau = rng.normal(0, 5.0, m.nq)
        assert _rel(m.forward_dynamics(q, qd, tau), pin.aba(pm, pd, pq, qd, tau)) < RTOL
        g = rng.normal(0, 10.0, 3)
        pm.gravity.linear = g
        try:
            assert _rel(m.rnea(q, qd, qdd, gravity=g), pin.rnea(pm, pd, pq, qd, qdd)) < RTOL
        finally:
            pm.gravity.linear = np.array([0.0, 0.0, -9.81])


def test_rnea_and_fd_with_external_wrenches(pair: Pair) -> None:
    m, pm, pd = pair.ours, pair.model, pair.data
    rng = np.random.default_rng(11)
    links = [m.tip_link, m.link_names[len(m.link_names) // 2], m.link_names[-1]]
    for q, qd, qdd in _states(m, rng):
        wrenches = {name: rng.normal(0, 20.0, 6) for name in links}
        pq = pair.pin_q(q)
        fext = pair.pin_fext(q, wrenches)
        assert _rel(m.rnea(q, qd, qdd, f_ext=wrenches), pin.rnea(pm, pd, pq, qd, qdd, fext)) < RTOL
        tau = rng.normal(0, 5.0, m.nq)
        assert _rel(m.forward_dynamics(q, qd, tau, f_ext=wrenches), pin.aba(pm, pd, pq, qd, tau, fext)) < RTOL


def test_fk_and_jacobians_of_every_link(pair: Pair) -> None:
    m, pm, pd = pair.ours, pair.model, pair.data
    rng = np.random.default_rng(3)
    for q, _, _ in _states(m, rng, n=3):
        pq = pair.pin_q(q)
        pin.computeJointJacobians(pm, pd, pq)
        pin.updateFramePlacements(pm, pd)
        for link in m.link_names:
            fid = pm.getFrameId(link, pin.FrameType.BODY)
            assert fid < len(pm.frames), link
            np.testing.assert_allclose(m.fk(q, link), pd.oMf[fid].homogeneous, rtol=0, atol=1e-12)
            J_pin = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)
            np.testing.assert_allclose(m.jacobian(q, link), J_pin, rtol=0, atol=1e-12)
            point = rng.normal(0, 0.5, 3)
            shift = pin.skew(point - pd.oMf[fid].translation)
            J_point = J_pin.copy()
            J_point[:3] -= shift @ J_pin[3:]
            np.testing.assert_allclose(m.jacobian(q, link, point), J_point, rtol=0, atol=1e-12)


def test_batch_matches_pinocchio(pair: Pair) -> None:
    m, pm, pd = pair.ours, pair.model, pair.data
    rng = np.random.default_rng(5)
    Q, QD, QDD = zip(*_states(m, rng, n=16), strict=True)
    Q, QD, QDD = np.array(Q), np.array(QD), np.array(QDD)
    ref = np.array([pin.rnea(pm, pd, pair.pin_q(q), qd, qdd) for q, qd, qdd in zip(Q, QD, QDD, strict=True)])
    assert _rel(m.rnea(Q, QD, QDD), ref) < RTOL
    Ms = m.mass_matrix(Q)
    for q, M in zip(Q, Ms, strict=True):
        M_pin = pin.crba(pm, pd, pair.pin_q(q))
        assert _rel(M, np.triu(M_pin) + np.triu(M_pin, 1).T) < RTOL

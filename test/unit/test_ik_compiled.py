"""The IK's compiled iteration (core/robot/ik.py dls_solve, issue 27 item 5): the rotation
logarithm against scipy's, the solution against yourdfpy's forward kinematics of the URDF."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.robot.ik import IKSolver, load_robot, log_so3


def test_log_so3_is_scipys_rotation_vector_also_near_a_half_turn() -> None:
    rng = np.random.default_rng(3)
    axes = rng.normal(size=(60, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    angles = np.r_[rng.uniform(0.0, math.pi, 20), math.pi - np.geomspace(1e-12, 1e-3, 20),
                   np.geomspace(1e-12, 1e-5, 20)]
    for a, n in zip(angles, axes, strict=True):
        R = Rotation.from_rotvec(a * n).as_matrix()
        want = Rotation.from_matrix(R).as_rotvec()
        got = log_so3(R)
        if a > math.pi - 1e-6:  # a half turn: +-axis are the same rotation
            assert min(np.linalg.norm(got - want), np.linalg.norm(got + want)) < 1e-7
        else:
            np.testing.assert_allclose(got, want, atol=1e-9)


@pytest.fixture(scope="module")
def ur10e():
    return load_robot("default")


def test_solution_reaches_the_target_by_the_urdfs_own_kinematics(ur10e) -> None:
    import yourdfpy

    from robot_grinding_sim.core.resources import default_urdf

    urdf = yourdfpy.URDF.load(str(default_urdf()), load_meshes=False)
    solver = IKSolver(ur10e, tol_position=1e-9, tol_rotation=5e-9)
    rng = np.random.default_rng(0)
    q0 = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])
    for _ in range(10):
        q_true = q0 + rng.uniform(-0.3, 0.3, 6)
        urdf.update_cfg(dict(zip(ur10e.joint_names, q_true, strict=True)))
        T = urdf.get_transform("tcp", "base_link")
        q, ok, ep, er = solver.solve(T, q0)
        assert ok and ep < 1e-9 and er < 5e-9
        urdf.update_cfg(dict(zip(ur10e.joint_names, q, strict=True)))
        X = urdf.get_transform("tcp", "base_link")
        assert np.linalg.norm(X[:3, 3] - T[:3, 3]) < 1e-8
        assert np.linalg.norm(Rotation.from_matrix(X[:3, :3] @ T[:3, :3].T).as_rotvec()) < 1e-7

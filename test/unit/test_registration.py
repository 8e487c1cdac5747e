"""``grinding register`` (issue 25 item 3): the part's pose from points on its surface, against a
known pose with noise (the uncertainty must cover the error), and the refusal of point sets that
cannot fix the pose (points on one line fix no rotation about it)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run

from robot_grinding_sim.core.calibration.registration import AXES, pose_to_xyzrpy, register_points
from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import WORKPIECE
from robot_grinding_sim.core.job.replay import pose_matrix, replay_scene

TRUE = [0.72, 0.03, 0.11, 0.02, -0.015, 0.3]
NOISE = 20e-6


@pytest.fixture(scope="module")
def scene():
    return replay_scene(CellConfig(), "curved_panel", TRUE)


def _surface_points(scene, k: int, rng: np.random.Generator, line: bool = False) -> np.ndarray:
    """k points on the part's top face at the true pose: the closest points to centres above it,
    displaced along the normal by gaussian noise of NOISE m."""
    q = scene.query
    q.scene.set_pose(WORKPIECE, pose_matrix(TRUE))
    X = pose_matrix(TRUE)
    lo, hi = np.array([-0.08, -0.06]), np.array([0.08, 0.06])
    if line:
        s = rng.uniform(-1.0, 1.0, size=k)
        uv = np.stack([0.08 * s, np.full(k, 0.01)], axis=1)
    else:
        uv = rng.uniform(lo, hi, size=(k, 2))
    # centres above the face in the part frame (its top about z; 0.05 m up), then onto the surface
    pts = []
    for u, v in uv:
        c = X @ np.array([u, v, 0.2, 1.0])
        g = q.query(c[:3])
        pts.append(g.point + g.normal * rng.normal(0.0, NOISE))
    return np.array(pts)


def test_known_pose_within_its_uncertainty(scene) -> None:
    rng = np.random.default_rng(3)
    P = _surface_points(scene, 120, rng)
    from scipy.spatial.transform import Rotation

    # x, y and the turn about z known (kept: the rotations and translations are about the points'
    # centroid c), height and tilts off by 1.5 mm and 10 mrad
    c = P.mean(axis=0)
    M = np.eye(4)
    M[:3, :3] = Rotation.from_rotvec([0.01, -0.01, 0.0]).as_matrix()
    M[:3, 3] = c - M[:3, :3] @ c + [0.0, 0.0, 0.0015]
    start = M @ pose_matrix(TRUE)
    reg = register_points(scene.query, start, P, 0.0, keep=("x", "y", "rz"))

    X, T = reg.pose, pose_matrix(TRUE)
    # the error as the uncertainty is stated: the origin's translation, the rotation about the base axes
    err = np.r_[X[:3, 3] - T[:3, 3], Rotation.from_matrix(X[:3, :3] @ T[:3, :3].T).as_rotvec()]
    # the plate-like top fixes height and tilts; x, y and the turn about z were kept from the start
    for k, a in enumerate(AXES):
        if a in ("x", "y", "rz"):
            assert math.isnan(reg.std[a])
            continue
        assert reg.std[a] > 0
        assert abs(err[k]) < 4.0 * reg.std[a] + 1e-9, (a, err[k], reg.std[a])
    assert reg.std["z"] < 1e-5
    assert reg.rms == pytest.approx(NOISE, rel=0.3)


def test_points_on_one_line_are_refused_naming_the_rotation(scene) -> None:
    rng = np.random.default_rng(4)
    P = _surface_points(scene, 40, rng, line=True)
    with pytest.raises(InputError, match="cannot fix the .*rotation about"):
        register_points(scene.query, pose_matrix(TRUE), P, 0.0, keep=("x", "y", "rz"))


def test_the_freeform_top_fixes_every_axis_and_a_flat_plate_does_not(scene) -> None:
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(5)
    P = _surface_points(scene, 150, rng)
    start = pose_matrix([TRUE[0] + 0.001, TRUE[1] - 0.001, TRUE[2] + 0.001, TRUE[3], TRUE[4], TRUE[5] + 0.005])
    reg = register_points(scene.query, start, P, 0.0)
    X, T = reg.pose, pose_matrix(TRUE)
    err = np.r_[X[:3, 3] - T[:3, 3], Rotation.from_matrix(X[:3, :3] @ T[:3, :3].T).as_rotvec()]
    for k, a in enumerate(AXES):
        assert abs(err[k]) < 4.0 * reg.std[a] + 1e-9, (a, err[k], reg.std[a])
    # in-plane the B-spline's curvature fixes the pose far less than its height
    assert reg.std["x"] > 10 * reg.std["z"]
    flat = replay_scene(CellConfig(), "flat_plate", TRUE)
    Q = _surface_points(flat, 60, rng)
    with pytest.raises(InputError, match="translation along") as exc:
        register_points(flat.query, pose_matrix(TRUE), Q, 0.0)
    assert "rotation about" in str(exc.value) and "--keep" in str(exc.value)
    ok = register_points(flat.query, pose_matrix(TRUE), Q, 0.0, keep=("x", "y", "rz"))
    assert ok.std["z"] < 1e-5


def test_register_cli_from_touch_points(scene, tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    P = _surface_points(scene, 80, rng)
    np.savetxt(tmp_path / "touch.txt", P * 1e3, header="x y z (mm)")
    start = [TRUE[0], TRUE[1], TRUE[2] - 0.003, TRUE[3], TRUE[4], TRUE[5]]
    res = run("register", "--points", str(tmp_path / "touch.txt"), "--unit", "mm", "--part", "curved_panel",
              "--pose", " ".join(map(str, start)), "--keep", "x,y,rz", "--json")
    assert res.returncode == 0, res.stderr
    import json

    doc = json.loads(res.stdout)
    assert doc["pose"][2] == pytest.approx(TRUE[2], abs=5 * doc["std"]["z"] + 1e-9)
    assert doc["pose"][3:] == pytest.approx(TRUE[3:], abs=5 * max(doc["std"]["rx"], doc["std"]["ry"]) + 1e-9)
    collinear = _surface_points(scene, 20, rng, line=True)
    np.savetxt(tmp_path / "line.txt", collinear)
    bad = run("register", "--points", str(tmp_path / "line.txt"), "--part", "curved_panel", "--pose",
              " ".join(map(str, TRUE)), "--keep", "x,y,rz")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "rotation about" in bad.stderr
    assert pose_to_xyzrpy(pose_matrix(TRUE)) == pytest.approx(TRUE)

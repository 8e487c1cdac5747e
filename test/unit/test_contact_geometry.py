"""The simulator's own contact geometry against analytic surfaces.

The tool's contact query of the in-process job and of collision_node
(:class:`~robot_grinding_sim.core.geometry.tool_contact.ToolContactQuery` on a
:func:`~robot_grinding_sim.core.geometry.tool_contact.workpiece_scene`: the face's tessellation for
the broad phase, its exact surface through the FaceProjector) is asked for the gap and normal of a
20 mm ball whose centre sits along the analytic normal of a plane, a cylinder and a sphere (faces of
solids built here), at penetrations from 1 mm apart to 200 um in, along paths (warm starts) and by
random jumps, with the part at a tilted pose. Gap within 1 um and normal within 0.01 deg of the
analytic values (the acceptance of DESIGN.md; the query does far better). The cylinder's and the
sphere's angular parameter wraps within the sampled range (the seam is crossed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.geometry import cad, shapes
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene

R_TOOL = 0.02
POSE = np.eye(4)
POSE[:3, :3] = Rotation.from_euler("xyz", [0.3, -0.2, 0.5]).as_matrix()
POSE[:3, 3] = [0.62, -0.11, 0.05]


def _face(part: cad.CadPart, kind: str) -> int:
    (idx,) = [f.index for f in part.list_faces() if f.type == kind]
    return idx


def _surface(kind: str):
    """(part, face index, sampler(u, v) -> (points (k, 3), outward normals (k, 3)) in the part frame)."""
    if kind == "plane":
        part = cad.CadPart(shapes.make_box((0.2, 0.15, 0.02), (-0.1, -0.075, -0.02)), source="box")
        top = [f.index for f in part.faces if np.allclose(f.evaluate(*np.mean(
            np.reshape(f.uv_bounds, (2, 2)), axis=1).reshape(2, 1))[1][0], [0, 0, 1])]

        def plane(u, v):
            p = np.column_stack([0.08 * (2 * u - 1), 0.06 * (2 * v - 1), np.zeros_like(u)])
            return p, np.tile([0.0, 0.0, 1.0], (len(u), 1))

        return part, top[0], plane
    if kind == "cylinder":  # radius 0.1 m, axis y, the lateral face
        part = cad.CadPart(shapes.make_cylinder(0.1, 0.2, origin=(0, -0.1, 0), axis=(0, 1, 0)), source="cyl")

        def cyl(u, v):
            th = math.pi * (0.15 + 0.7 * u)
            n = np.column_stack([np.cos(th), np.zeros_like(th), np.sin(th)])
            return 0.1 * n + np.column_stack([np.zeros_like(v), 0.16 * v - 0.08, np.zeros_like(v)]), n

        return part, _face(part, "cylinder"), cyl
    part = cad.CadPart(shapes.make_sphere(0.15), source="sphere")

    def sph(u, v):
        th, ph = 2 * math.pi * u, 0.6 * math.pi * v + 0.2 * math.pi  # polar angle 36 .. 144 deg
        n = np.column_stack([np.sin(ph) * np.cos(th), np.sin(ph) * np.sin(th), np.cos(ph)])
        return 0.15 * n, n

    return part, _face(part, "sphere"), sph


@pytest.mark.parametrize("kind", ["plane", "cylinder", "sphere"])
def test_gap_and_normal_match_the_analytic_surface(kind: str) -> None:
    part, face, sample = _surface(kind)
    scene, exact = workpiece_scene(part, [face], POSE, R_TOOL)
    assert exact
    query = ToolContactQuery(scene)
    rng = np.random.default_rng(7)
    R, o = POSE[:3, :3], POSE[:3, 3]
    # a path (the tool moving smoothly: warm starts) followed by random jumps
    t = np.linspace(0.0, 1.0, 300)
    u = np.r_[0.2 + 0.6 * t, rng.uniform(0, 1, 200)]
    v = np.r_[0.5 + 0.3 * np.sin(6 * t), rng.uniform(0, 1, 200)]
    d = np.r_[2e-4 * np.sin(20 * t), rng.uniform(-1e-3, 2e-4, 200)]  # penetration, m (< 0: apart)
    p, n = sample(u, v)
    centres = (p + (R_TOOL - d)[:, None] * n) @ R.T + o
    worst_gap = worst_angle = 0.0
    for k, c in enumerate(centres):
        g = query.query(c)
        worst_gap = max(worst_gap, abs(g.gap + d[k]))
        n_world = R @ n[k]
        angle = math.atan2(float(np.linalg.norm(np.cross(g.normal, n_world))), float(g.normal @ n_world))
        worst_angle = max(worst_angle, math.degrees(angle))
        np.testing.assert_allclose(g.point, R @ p[k] + o, atol=1e-6)
    assert worst_gap < 1e-6 and worst_angle < 0.01, (worst_gap, worst_angle)
    assert worst_gap < 1e-9 and worst_angle < 1e-6  # in fact, to the projector's convergence

"""The ball's contact query on a B-spline face that wraps all the way round, against OpenCascade.

The face is written here like pythonocc-demos' surf114.igs (whose face 3 the planner's force
optimisation got wrong): one clamped, non-periodic B-spline sheet closed on itself around an axis
(its first and last columns of poles coincide, tangent-continuous across the seam), each end
collapsed to a pole, so the corner (u0, v0) of its parameter box is a point where S_u x S_v
vanishes; a waist makes it concave along the axis. A 20 mm ball is set along the face's outward
normal at penetrations from 100 um apart to 50 um in, along paths that cross the seam (warm
starts) and by random jumps from one side to the other (the warm start on the wrong sheet); the
gap must equal BRepExtrema's distance from the ball's centre to the face, minus R, within 1 um, in
the compiled query (the in-process job) and the scene's (collision_node). Before the fix the
normals were all reversed (the sign was taken at the pole: the gap read -2R), the seam was a
boundary (the mesh answered, 0.2 mm off) and warm starts ended on the far sheet.
"""

from __future__ import annotations

import math

import numpy as np
from OCP.BRepBuilderAPI import BRepBuilderAPI_MakeVertex
from OCP.BRepExtrema import BRepExtrema_DistShapeShape
from OCP.gp import gp_Pnt
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.geometry import cad, shapes
from robot_grinding_sim.core.geometry.projector import FaceProjector
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene

R_TOOL = 0.02
POSE = np.eye(4)
POSE[:3, :3] = Rotation.from_euler("xyz", [0.3, -0.2, 0.5]).as_matrix()
POSE[:3, 3] = [0.62, -0.11, 0.05]


def wrapped_face():
    """A closed peanut-shaped B-spline sheet 90 mm long, radius up to ~32 mm, waist ~31 mm (concave
    along the axis, its radii of curvature above the ball's)."""
    nu, nv = 9, 12
    x = np.linspace(0.0, 0.09, nu)
    radius = np.array([0.0, 0.022, 0.032, 0.033, 0.031, 0.033, 0.032, 0.022, 0.0])
    angles = 2.0 * math.pi * np.arange(nv) / (nv - 1)  # 0 and 2 pi at the ends of v: the seam
    P = np.zeros((nu, nv, 3))
    for i in range(nu):
        r = radius[i]
        P[i, :, 0] = x[i]
        P[i, :, 1], P[i, :, 2] = r * np.sin(angles), r * np.cos(angles)
        # the seam's neighbours on its tangent (y): the sheet is smooth across the seam
        t = r * angles[1]
        P[i, 1, 1:], P[i, nv - 2, 1:] = (t, r), (-t, r)
    return shapes.make_bspline_face(P)


def test_gap_on_a_face_closed_on_itself_is_brepextrema_distance() -> None:
    part = cad.CadPart(wrapped_face(), source="wrapped")
    face = part.face(0)
    u0, u1, v0, v1 = face.uv_bounds
    # the face as the bug needs it: a pole at the corner (u0, v0), closed across v
    S, Su, Sv = face.surface_eval(np.array([u0, u0, 0.5 * (u0 + u1)]), np.array([v0, v1, v0]))
    assert np.linalg.norm(np.cross(Su[0], Sv[0])) < 1e-12
    assert np.linalg.norm(S[2] - face.surface_eval(np.array([0.5 * (u0 + u1)]), np.array([v1]))[0][0]) < 1e-12
    proj = FaceProjector(face)
    assert proj.box[4, 1] == v1 - v0 and proj.box[4, 0] == 0.0  # v wraps, u does not
    scene, exact = workpiece_scene(part, [0], POSE, R_TOOL)
    assert exact
    compiled, python = ToolContactQuery(scene), ToolContactQuery(scene)
    assert compiled.compiled is not None
    python.compiled = None
    rng = np.random.default_rng(11)
    # away from the poles (BRepExtrema itself is off by microns there): a path round the seam,
    # twice, then random jumps anywhere around
    t = np.linspace(0.0, 1.0, 240)
    u = np.r_[u0 + (u1 - u0) * (0.3 + 0.4 * t), rng.uniform(u0 + 0.15 * (u1 - u0), u1 - 0.15 * (u1 - u0), 160)]
    v = np.r_[v0 + (v1 - v0) * ((0.8 + 2.0 * t) % 1.0), rng.uniform(v0, v1, 160)]
    d = np.r_[5e-5 * np.sin(25 * t) - 2.5e-5, rng.uniform(-1e-4, 5e-5, 160)]  # penetration, m
    s = face.derivatives(u, v)
    # the face's normal points away from its axis (x): outward, as CadFace says
    radial = s.points - np.column_stack([s.points[:, 0], np.zeros((len(u), 2))])
    assert (np.einsum("ij,ij->i", s.normals, radial) > 0).all()
    centres = s.points + (R_TOOL - d)[:, None] * s.normals
    worst = {"compiled": 0.0, "scene": 0.0}
    for k, c in enumerate(centres):
        ref = BRepExtrema_DistShapeShape(BRepBuilderAPI_MakeVertex(gp_Pnt(*map(float, c))).Vertex(), face.shape)
        assert ref.IsDone()
        gap_ref = ref.Value() - R_TOOL
        c_world = POSE[:3, :3] @ c + POSE[:3, 3]
        for name, query in (("compiled", compiled), ("scene", python)):
            g = query.query(c_world)
            worst[name] = max(worst[name], abs(g.gap - gap_ref))
            assert abs(g.gap - gap_ref) < 1e-6, (name, k, u[k], v[k], d[k], g.gap, gap_ref, g.point)
    print({k: f"{w * 1e9:.1f} nm" for k, w in worst.items()})

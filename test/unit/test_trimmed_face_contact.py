"""The ball's contact query over a trimmed face (a plate's hole), against OpenCascade.

The exact-surface query projects onto the face's underlying surface; for a face trimmed inside its
parameter box (the built-in plate_with_hole's top: a 200 x 150 mm plane with a 40 mm hole) the
projection over the hole lands on the plane across it. There the answer must be the face's: the
rim, which the mesh answers. A 20 mm ball is set over the hole, over the rim and over the plate
beside it, its centre from 25 mm above the top down to the top; the gap must equal
BRepExtrema's distance from the ball's centre to the trimmed face, minus R, in the compiled query
(the in-process job) and the scene's (collision_node). Before the trim was taken into account a
ball 5 mm above the hole's centre read -15 mm (the plane) instead of +0.6 mm (the rim).
"""

from __future__ import annotations

import math

import numpy as np
from OCP.BRepBuilderAPI import BRepBuilderAPI_MakeVertex
from OCP.BRepExtrema import BRepExtrema_DistShapeShape
from OCP.gp import gp_Pnt

from robot_grinding_sim.core.geometry import cad, parts
from robot_grinding_sim.core.geometry.projector import FaceProjector
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene

R_TOOL = 0.02
TOP = 0.01  # the plate's top, m
HOLE = 0.02  # the hole's radius, m


def top_face(part: cad.CadPart) -> int:
    for i in range(7):
        f = part.face(i)
        u0, u1, v0, v1 = f.uv_bounds
        s = f.derivatives(np.array([0.5 * (u0 + u1)]), np.array([0.5 * (v0 + v1)]))
        if s.normals[0, 2] > 0.99 and abs(s.points[0, 2] - TOP) < 1e-9:
            return i
    raise AssertionError("no top face")


def test_gap_over_a_hole_is_brepextrema_distance() -> None:
    part = parts.load_part("plate_with_hole")
    index = top_face(part)
    face = part.face(index)
    assert face.trims_its_box() and FaceProjector(face).box.shape[0] > 5
    pose = np.eye(4)
    pose[:3, 3] = [0.7, 0.05, 0.0]
    scene, exact = workpiece_scene(part, [index], pose, R_TOOL)
    assert exact
    compiled, python = ToolContactQuery(scene), ToolContactQuery(scene)
    python.compiled = None
    rng = np.random.default_rng(5)
    r = np.r_[np.zeros(3), rng.uniform(0.0, 0.045, 200)]  # from the hole's axis out past the rim
    a = rng.uniform(0.0, 2.0 * math.pi, len(r))
    # the ball's centre above the top (below it, inside the hole, the ball meets the hole's wall,
    # another face, first)
    h = np.r_[0.005, 0.025, 0.0005, rng.uniform(0.0, 0.025, 200)]
    worst = {"compiled": 0.0, "scene": 0.0}
    for k in range(len(r)):
        c = np.array([r[k] * math.cos(a[k]), r[k] * math.sin(a[k]), TOP + h[k]])
        ref = BRepExtrema_DistShapeShape(BRepBuilderAPI_MakeVertex(gp_Pnt(*map(float, c))).Vertex(), face.shape)
        assert ref.IsDone()
        gap_ref = ref.Value() - R_TOOL
        if gap_ref > 0.004:
            continue  # beyond the contact margin the query need not be exact
        for name, query in (("compiled", compiled), ("scene", python)):
            g = query.query(pose[:3, :3] @ c + pose[:3, 3])
            worst[name] = max(worst[name], abs(g.gap - gap_ref))
            # the rim comes from the mesh: within its chordal tolerance
            assert abs(g.gap - gap_ref) < 6e-5, (name, k, r[k], h[k], g.gap, gap_ref)
    print({k: f"{w * 1e6:.2f} um" for k, w in worst.items()})
    # the case of the docstring: 5 mm above the hole's centre the ball clears the rim
    g = compiled.query(pose[:3, :3] @ np.array([0.0, 0.0, TOP + 0.005]) + pose[:3, 3])
    assert abs(g.gap - (math.hypot(HOLE, 0.005) - R_TOOL)) < 6e-5

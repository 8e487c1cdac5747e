"""Approach and retreat lengths: the tool ends ``clearance`` off the part, measured with OpenCascade.

A plate is ground at its top; a 5 mm ball of the part hangs 27 mm beside the pass end at the height
a 10 mm retreat along the normal ends (the retreat of a face that wraps round passes another part
of the face the same way): the plain retreat would end 2 mm from it. The planner's
:func:`~robot_grinding_sim.core.planning.planner.clear_length` lengthens it until the ball is the
clearance off, measured here by BRepExtrema against the part (not the planner's mesh); with nothing
near, the retreat keeps ``approach``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from OCP.BRep import BRep_Builder
from OCP.BRepBuilderAPI import BRepBuilderAPI_MakeVertex
from OCP.BRepExtrema import BRepExtrema_DistShapeShape
from OCP.gp import gp_Pnt
from OCP.TopoDS import TopoDS_Compound

from robot_grinding_sim.core.geometry import shapes
from robot_grinding_sim.core.planning.planner import ToolParameters, clear_length


class OccDistance:
    """The distance from points to a shape, by BRepExtrema (the reference)."""

    def __init__(self, shape) -> None:
        self.shape = shape

    def distance(self, pts: np.ndarray) -> np.ndarray:
        out = []
        for p in np.atleast_2d(pts):
            d = BRepExtrema_DistShapeShape(BRepBuilderAPI_MakeVertex(gp_Pnt(*map(float, p))).Vertex(), self.shape)
            assert d.IsDone()
            out.append(d.Value())
        return np.array(out)


def _part(with_ball: bool):
    comp, builder = TopoDS_Compound(), BRep_Builder()
    builder.MakeCompound(comp)
    builder.Add(comp, shapes.make_box((0.1, 0.1, 0.02), (-0.05, -0.05, -0.02)))
    if with_ball:
        builder.Add(comp, shapes.make_sphere(0.005, (0.027, 0.0, 0.03)))
    return comp


def test_retreat_is_lengthened_until_the_tool_is_clear() -> None:
    tool = dataclasses.replace(ToolParameters(), radius=0.02, approach=0.01, clearance=0.005)
    p, n = np.array([0.0, 0.0, 0.02]), np.array([0.0, 0.0, 1.0])  # the ball on the plate's top
    ref = OccDistance(_part(True))
    assert ref.distance(p + tool.approach * n)[0] - tool.radius < 0.0021  # the plain retreat: 2 mm off
    L = clear_length(p, n, tool, ref)
    gap = ref.distance(p + L * n)[0] - tool.radius
    assert gap >= tool.clearance - 1e-9, gap
    # no longer than it needs (the steps are a quarter of the clearance): 23.1 mm here
    assert ref.distance(p + (L - 0.25 * tool.clearance) * n)[0] - tool.radius < tool.clearance
    assert 0.023 <= L <= 0.0245, L
    assert clear_length(p, n, tool, OccDistance(_part(False))) == tool.approach
    assert clear_length(p, n, tool, None) == tool.approach

"""Surfaces facing any way the robot reaches (issue 24 item 4): the approach direction.

The parts are written here with OpenCascade's own primitives (OCP: BRepPrimAPI, BRepAlgoAPI), not
with the package's shape helpers; coverage is measured by test/unit/surface_coverage.py (OpenCascade
sampling of the faces, independent of the planner's mesh) over the part of the face whose outward
normal faces the approach (n . a >= 0), farther than the margin from its boundary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import surface_coverage as sc

from robot_grinding_sim.core import config
from robot_grinding_sim.core.errors import InputError, PlanningError
from robot_grinding_sim.core.geometry import cad
from robot_grinding_sim.core.planning import planner
from robot_grinding_sim.core.planning.passes import PassGenerator, PassParameters

OCP = pytest.importorskip("OCP")

STEP, SPACING, MARGIN = 0.005, 0.002, 0.005


def upright_cylinder(r: float = 0.05, h: float = 0.08):
    """A solid cylinder standing on the part frame's xy plane, axis z."""
    from OCP.BRepPrimAPI import BRepPrimAPI_MakeCylinder
    from OCP.gp import gp_Ax2, gp_Dir, gp_Pnt

    return BRepPrimAPI_MakeCylinder(gp_Ax2(gp_Pnt(0.0, 0.0, 0.0), gp_Dir(0.0, 0.0, 1.0)), r, h).Shape()


def bowl(radius: float = 0.055, depth: float = 0.05):
    """A 140 x 140 x 60 mm block with a spherical cavity (``radius``, ``depth`` deep) cut into its top."""
    from OCP.BRepAlgoAPI import BRepAlgoAPI_Cut
    from OCP.BRepPrimAPI import BRepPrimAPI_MakeBox, BRepPrimAPI_MakeSphere
    from OCP.gp import gp_Pnt

    box = BRepPrimAPI_MakeBox(gp_Pnt(-0.07, -0.07, 0.0), 0.14, 0.14, 0.06).Shape()
    sphere = BRepPrimAPI_MakeSphere(gp_Pnt(0.0, 0.0, 0.06 - depth + radius), radius).Shape()
    return BRepAlgoAPI_Cut(box, sphere).Shape()


def block():
    """A 100 x 60 x 40 mm box (its faces look +-x, +-y, +-z)."""
    from OCP.BRepPrimAPI import BRepPrimAPI_MakeBox
    from OCP.gp import gp_Pnt

    return BRepPrimAPI_MakeBox(gp_Pnt(-0.05, -0.03, 0.0), 0.1, 0.06, 0.04).Shape()


def _face(part: cad.CadPart, kind: str) -> int:
    return next(f.index for f in part.faces if f.type == kind)


def _plane_facing(part: cad.CadPart, n: tuple[float, float, float]) -> int:
    for f in part.faces:
        if f.type != "plane":
            continue
        u0, u1, v0, v1 = f.uv_bounds
        _, nr = f.evaluate(np.array([0.5 * (u0 + u1)]), np.array([0.5 * (v0 + v1)]))
        if float(nr[0] @ np.asarray(n)) > 0.999:
            return f.index
    raise AssertionError(f"no plane facing {n}")


def _generate(shape, faces, toward_robot=None, **kw):
    params = PassParameters(stepover=STEP, spacing=SPACING, margin=MARGIN, **kw)
    gen = PassGenerator(cad.CadPart(shape), faces, params, toward_robot)
    return gen, gen.generate()


def test_upright_cylinder_wall_is_planned_on_the_side_of_the_robot() -> None:
    shape = upright_cylinder()
    face = _face(cad.CadPart(shape), "cylinder")
    gen, passes = _generate(shape, [face], toward_robot=(-1.0, 0.0, 0.0))
    np.testing.assert_allclose(gen.approach, [-1.0, 0.0, 0.0], atol=1e-12)
    m = sc.measure(shape, [face], [p.points for p in passes], STEP, MARGIN, n=170, approach=(-1.0, 0.0, 0.0))
    assert m.area == pytest.approx(math.pi * 0.05 * (0.08 - 2 * MARGIN), rel=0.05)  # half the wall, in the margin
    assert m.coverage >= 0.98, f"coverage {m.coverage:.4f}, worst gap {m.worst_gap * 1e3:.2f} mm"
    assert m.stepover_ok >= 0.95
    assert gen.coverage.coverage == pytest.approx(m.coverage, abs=0.015)
    nrm = np.vstack([p.normals for p in passes])
    assert (nrm @ np.array([-1.0, 0.0, 0.0])).min() >= -0.06  # only what faces the approach
    assert np.abs(nrm[:, 2]).max() < 1e-9  # a vertical wall: horizontal normals


def test_turning_the_part_changes_what_faces_the_robot() -> None:
    """The same wall with the part turned by 90 deg about z on the table: the side towards the robot
    is the part's +y side (auto takes the horizontal direction to the robot's base)."""
    shape = upright_cylinder()
    part = cad.CadPart(shape)
    face = _face(part, "cylinder")
    pass_params = PassParameters(stepover=0.01, spacing=0.004, margin=MARGIN)
    res = {}
    for yaw in (0.0, -0.5 * math.pi):
        plan = planner.plan(part, [face], pass_params, robot=None, link_clearance_check=False,
                            workpiece_pose=(0.7, 0.0, 0.0, 0.0, 0.0, yaw))
        res[yaw] = np.vstack([p.points for p in plan.passes]).mean(axis=0)
    assert res[0.0][0] < -0.02 and abs(res[0.0][1]) < 0.005  # the -x side: towards the base at x = -0.7
    assert res[-0.5 * math.pi][1] < -0.02 or res[-0.5 * math.pi][1] > 0.02
    # base_link's -x seen from the part turned by -90 deg about z is the part's -y... (R^T (-1, 0, 0))
    expect = planner.toward_robot(planner.pose_matrix((0.7, 0.0, 0.0, 0.0, 0.0, -0.5 * math.pi)))
    np.testing.assert_allclose(expect, [0.0, -1.0, 0.0], atol=1e-12)
    assert res[-0.5 * math.pi][1] < -0.02


def test_a_given_approach_direction_selects_the_side() -> None:
    shape = upright_cylinder()
    face = _face(cad.CadPart(shape), "cylinder")
    gen, passes = _generate(shape, [face], approach_direction="0 1 0")
    m = sc.measure(shape, [face], [p.points for p in passes], STEP, MARGIN, n=170, approach=(0.0, 1.0, 0.0))
    assert m.coverage >= 0.98
    assert np.vstack([p.normals for p in passes])[:, 1].min() >= -0.06


def test_a_face_looking_sideways_takes_its_own_normal_and_a_face_can_be_given_its_own() -> None:
    shape = block()
    part = cad.CadPart(shape)
    side = _plane_facing(part, (0.0, -1.0, 0.0))
    gen, passes = _generate(shape, [side])
    np.testing.assert_allclose(gen.approach, [0.0, -1.0, 0.0], atol=1e-9)
    m = sc.measure(shape, [side], [p.points for p in passes], STEP, MARGIN, n=170, approach=(0.0, -1.0, 0.0))
    assert m.coverage >= 0.98
    # per face: the side given a direction, the job's (up) for nothing else selected
    gen, passes = _generate(shape, [side], approach_direction=f"{side}:0 -1 0.2")
    np.testing.assert_allclose(gen.approach_of[side], np.array([0.0, -1.0, 0.2]) / math.hypot(1.0, 0.2))


def test_a_face_turned_away_from_the_approach_is_one_clear_error() -> None:
    shape = block()
    part = cad.CadPart(shape)
    top = _plane_facing(part, (0.0, 0.0, 1.0))
    with pytest.raises(PlanningError, match=r"faces the approach direction.*passes\.approach_direction") as e:
        _generate(shape, [top], approach_direction="0 0 -1")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text,pattern", [
    ("sideways", r"passes\.approach_direction.*'sideways' is not a direction"),
    ("0 0 0", r"passes\.approach_direction.*not a direction"),
    ("1 2", r"passes\.approach_direction.*not a direction"),
    ("x:1 0 0", r"passes\.approach_direction.*'x' .* is not a face index"),
])
def test_bad_approach_direction_names_the_parameter(text: str, pattern: str) -> None:
    with pytest.raises(InputError, match=pattern):
        PassParameters(approach_direction=text).validate()


def test_approach_of_a_face_not_selected_is_refused() -> None:
    shape = block()
    part = cad.CadPart(shape)
    top = _plane_facing(part, (0.0, 0.0, 1.0))
    with pytest.raises(InputError, match=r"face 99 is not one of the selected faces"):
        _generate(shape, [top], approach_direction="99:1 0 0")


def test_parse_approach() -> None:
    got = config.parse_approach("up; 3: 1 0 0 ;4:auto")
    assert got[None] == (0.0, 0.0, 1.0) and got[3] == (1.0, 0.0, 0.0) and got[4] is None


def test_inside_of_a_bowl_is_planned() -> None:
    shape = bowl()
    face = _face(cad.CadPart(shape), "sphere")
    gen, passes = _generate(shape, [face])
    np.testing.assert_allclose(gen.approach, [0.0, 0.0, 1.0])
    m = sc.measure(shape, [face], [p.points for p in passes], STEP, MARGIN, n=170)
    assert m.coverage >= 0.98, f"coverage {m.coverage:.4f}"


@pytest.mark.parametrize("what", ["cylinder wall", "bowl"])
def test_plan_and_simulate_reach_the_target_force(tmp_path, what: str) -> None:
    """End to end on the robot: `grinding plan` (force-target optimisation by simulation) and then
    `grinding simulate --plan` on the wall of an upright cylinder (the tool lies horizontal) and in
    a bowl (80 mm sphere, 25 mm deep: the first passes near its rim, the tool tilted 40 deg) written
    by OpenCascade (BREP, m): the simulated mean force on the pass is the target within 5 %."""
    import json

    from cli_runner import run
    from OCP.BRepTools import BRepTools

    shape = upright_cylinder() if what == "cylinder wall" else bowl(0.08, 0.025)
    BRepTools.Write_s(shape, str(tmp_path / "cyl.brep"))
    face = _face(cad.CadPart(shape), "cylinder" if what == "cylinder wall" else "sphere")
    out = run("plan", "cyl.brep", "--unit", "m", "--face", str(face), "--max-passes", "1", "--pass-length", "0.01",
              "--target-force", "6", "--out", "plan.json", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    # progress into a log even with --json (stderr is not a terminal here), the JSON alone on stdout
    approach = "(-1, 0, 0)" if what == "cylinder wall" else "(0, 0, 1)"
    assert f"grinding plan: passes on faces [{face}]" in out.stderr and f"approach direction {approach}" in out.stderr
    assert "grinding plan: collision check" in out.stderr
    summary = json.loads(out.stdout)
    assert summary["coverage"]["excluded_m2"]["arm_cannot_reach"] == 0.0  # the job reaches every waypoint
    data = json.loads((tmp_path / "plan.json").read_text())
    n = np.array([w["normal"] for w in data["passes"][0]["waypoints"]])
    if what == "cylinder wall":
        assert np.abs(n[:, 2]).max() < 1e-9 and n[:, 0].max() < -0.9  # the wall's side towards the robot
    else:
        assert n[:, 2].min() > 0.5  # inside the bowl: the outward normal (out of the material) looks up
    assert data["collision"]["min_clearance_m"] > 0.0  # no collision (the plan would be refused)
    assert abs(data["force_target"]["predicted_mean_force_n"][0] - 6.0) <= 0.05 * 6.0
    sim = run("simulate", "--plan", "plan.json", "--out", "run", "--json", cwd=tmp_path)
    assert sim.returncode == 0, sim.stderr
    summary = json.loads(sim.stdout)
    assert summary["all_within_tolerance"]
    assert abs(summary["passes"][0]["mean_n"] - 6.0) <= 0.05 * 6.0


def test_coverage_is_reported_against_the_whole_face_with_what_is_left_out() -> None:
    """Honest coverage (issue 24 item 5): the upright cylinder's wall, r 50 mm, h 80 mm, approached
    from -x: half of it faces away (pi r h), a band of 2 x margin along the two rims of the other
    half lies within the margin (pi r 2 m), the ball touches all the rest; the arm is not checked
    without a robot. The areas are the analytic ones."""
    shape = upright_cylinder()
    part = cad.CadPart(shape)
    face = _face(part, "cylinder")
    plan = planner.plan(part, [face], PassParameters(stepover=STEP, spacing=SPACING, margin=MARGIN), robot=None,
                        workpiece_pose=(0.7, 0.0, 0.0, 0.0, 0.0, 0.0))
    c = plan.coverage
    r, h = 0.05, 0.08
    assert c.face_area == pytest.approx(2 * math.pi * r * h, rel=1e-6)
    assert c.away_area == pytest.approx(math.pi * r * h, rel=0.03)
    assert c.margin_area == pytest.approx(math.pi * r * 2 * MARGIN, rel=0.1)
    assert c.area == pytest.approx(math.pi * r * (h - 2 * MARGIN), rel=0.02)
    assert c.unreachable_area == 0.0 and c.arm_unreachable_area is None
    assert c.coverage >= 0.98
    assert c.coverage_of_face == pytest.approx(c.coverage * c.area / c.face_area, rel=1e-9)
    d = c.as_dict()
    assert d["excluded_m2"]["faces_away_from_the_approach"] == c.away_area and d["face_area_m2"] == c.face_area

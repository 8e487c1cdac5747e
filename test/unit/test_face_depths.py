"""Per face target depths (issue 26): the parameter and the command-line form, the faces' feeds on
the job's groove, and the feed varied along a pass that crosses faces.

References: the depth a face's feed gives is the mean of the summed grooves (groove_volume / stepover,
Preston's volume); the pass's timing at a feed that varies along it is t = integral ds / v(s)
(trapezoid written here), its knots moving at v(s).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_grinding_sim.core.config import CellConfig, parse_face_depths
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.planning.depth import (
    BallFootprint,
    DepthLimits,
    groove_volume,
    plan_depth,
    plan_face_depths,
)


def test_the_parameter_reads_face_depth_entries_and_names_what_is_wrong() -> None:
    assert parse_face_depths("3:5e-6;4:1e-5", 2e-6) == {None: 2e-6, 3: 5e-6, 4: 1e-5}
    assert parse_face_depths(" 7e-6 ; 4 : 1e-5 ") == {None: 7e-6, 4: 1e-5}
    assert parse_face_depths("", 5e-6) == {None: 5e-6}
    for bad, what in (("x:5e-6", "'x' in 'x:5e-6' is not a face index"), ("3:abc", "'3:abc': the depth must be"),
                      ("3:-1e-6", "'3:-1e-6': the depth must be"), ("3:5e-6;3:6e-6", "face 3 is given twice"),
                      ("-2:5e-6", "face -2 in '-2:5e-6' is not a face index"), ("3:0.5", "'3:0.5': the depth")):
        with pytest.raises(InputError, match="removal.face_depths.*" + what.replace("(", r"\(")):
            parse_face_depths(bad)
    with pytest.raises(InputError, match="removal.face_depths"):
        CellConfig().replace(**{"removal.face_depths": "3:abc"})
    cell = CellConfig().replace(**{"removal.target_depth": 5e-6, "removal.face_depths": "3:8e-6"})
    assert cell.removal.depths([3, 4]) == {None: 5e-6, 3: 8e-6}
    with pytest.raises(InputError, match="face 3 is not one of the selected faces \\[4, 5\\]"):
        cell.removal.depths([4, 5])


def test_target_depth_on_the_command_line_takes_the_per_face_form() -> None:
    import robot_grinding_sim.cli.plan  # noqa: F401  (its options register the cell options)
    from robot_grinding_sim.cli.cell_options import build_cell

    cell = build_cell({"removal__target_depth": "3:5e-6;4:1e-5"})
    assert cell.removal.target_depth == 5e-6 and cell.removal.depths() == {None: 5e-6, 3: 5e-6, 4: 1e-5}
    cell = build_cell({"removal__target_depth": "2e-6;4:1e-5"})
    assert cell.removal.target_depth == 2e-6 and cell.removal.depths() == {None: 2e-6, 4: 1e-5}
    assert build_cell({"removal__target_depth": "5e-6"}).removal.face_depths == ""
    with pytest.raises(InputError, match="--target-depth: '4:deep'"):
        build_cell({"removal__target_depth": "4:deep"})


def test_each_faces_feed_removes_its_depth_on_the_jobs_groove() -> None:
    fp = BallFootprint(0.02, 1e5, 1.0, -1047.2, 9.5e-12)
    dp = plan_depth(fp, 5e-6, 5.0)
    faces = plan_face_depths(fp, dp, {2: 5e-6, 6: 8e-6, 9: 1e-9}, DepthLimits())
    for f, D in ((2, 5e-6), (6, 8e-6)):
        e = faces[str(f)]
        assert e["limiting"] is None
        assert groove_volume(fp, dp.force, e["feed"]) / dp.stepover == pytest.approx(D, rel=1e-6)
        assert e["feed_scale"] == pytest.approx(e["feed"] / dp.feed)
    assert faces["2"]["feed"] == pytest.approx(dp.feed, rel=1e-6)
    # 1 nm needs a feed far over the range: named for that face, the fastest feed kept
    assert faces["9"]["limiting"].startswith("feed range: face 9's D = 1e-09 m") and faces["9"]["feed"] == 0.1


def test_the_pass_runs_at_each_faces_feed() -> None:
    """A pass on the flat plate whose second half is at half the feed: the pass takes the time of
    integral ds / v(s), and its knots move at v(s) on the cruise."""
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.planning import planner
    from robot_grinding_sim.core.planning import trajectory as tr
    from robot_grinding_sim.core.planning.passes import PassParameters
    from robot_grinding_sim.core.robot.ik import load_robot

    cell = CellConfig()
    part = parts.load_part("flat_plate")
    plan = planner.plan(part, None, PassParameters(stepover=0.03, spacing=0.004), planner.tool_parameters(cell, 0.02),
                        robot=None, workpiece_pose=cell.workpiece.pose)
    plan = planner.crop_plan(plan, part, max_passes=1, pass_length=0.06)
    model = load_robot("default")
    g = tr.job_paths(plan).passes[0]
    half = 0.5 * (g.arc[0] + g.arc[-1])
    scale = np.where(g.arc < half, 1.0, 0.5)
    g.feed_scale = scale
    process, pen = cell.process, plan.tool.penetration
    vmax = np.asarray(model.velocity_limits, dtype=float)
    q0 = tr.first_configuration(model, tr.targets(g.positions[:1] + 0.01 * g.normals[:1], g.rotations[:1])[0],
                                np.asarray(cell.robot.home, dtype=float), "start")
    seg = next(s for s in tr.pass_episode(model, g, process, 0.0, pen, 0.0, q0, vmax) if s.kind == "pass")
    v = process.feed
    ref = float(np.sum(np.diff(g.arc) * 0.5 * (1 / scale[1:] + 1 / scale[:-1]))) / v  # integral ds / v(s)
    # the ramps at both ends (0.1 s smoothstep each) add half a ramp's time each at the feed
    assert seg.t[-1] - seg.t[0] == pytest.approx(ref + tr.FEED_RAMP, rel=1e-3)
    speed = np.diff(seg.arc) / np.diff(seg.t)
    mid = (seg.t - seg.t[0] > 0.2) & (seg.t[-1] - seg.t > 0.2)
    a = 0.5 * (seg.arc[1:] + seg.arc[:-1])[mid[1:]]
    want = np.where(a < half - 0.003, v, np.where(a > half + 0.003, 0.5 * v, np.nan))
    ok = np.isfinite(want)
    assert ok.sum() > 10 and np.allclose(speed[mid[1:]][ok], want[ok], rtol=2e-2)
    assert math.isclose(seg.arc[-1], g.arc[-1], rel_tol=1e-9)


def test_a_plan_without_face_depths_has_none_and_keeps_its_groove() -> None:
    """plan.json's removal_plan ``faces`` is {} for one D (a positional DepthPlan once put the groove's
    offsets there and the depths in groove_y)."""
    fp = BallFootprint(0.02, 1e5, 1.0, -1047.2, 9.5e-12)
    dp = plan_depth(fp, 5e-6, 5.0)
    assert dp.faces == {} and dp.as_dict()["faces"] == {}
    assert dp.groove_y is not None and dp.groove_y[0] < 0 < dp.groove_y[-1] and dp.groove_h.max() > 0
    assert dp.as_dict()["groove"]["y_m"][0] == pytest.approx(-dp.half_width)

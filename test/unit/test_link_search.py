"""Links between passes planned round the part (issue 24 item 5): where the job's collision check
finds a link hitting the part, the planner makes it again over the part (lift, go over, come down),
higher each time, before refusing the job; a refusal is one line naming the move, the robot link and
what would fix it.

The obstacle is a box added to the part's mesh for the robot's collision check only (the planner's
own clearance of the ball does not see it), the way another robot link meets a part the ball clears:
the check (python-fcl) is the independent judge of the trajectory kept.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_grinding_sim.core import config
from robot_grinding_sim.core.errors import PlanningError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.planning import links, planner
from robot_grinding_sim.core.planning import trajectory as tr
from robot_grinding_sim.core.planning.passes import PassParameters

trimesh = pytest.importorskip("trimesh")


@pytest.fixture(scope="module")
def job():
    from robot_grinding_sim.core.robot.ik import load_robot

    part = parts.load_part("flat_plate")
    res = planner.plan(part, None, PassParameters(stepover=0.08, spacing=0.01, order="oneway"), robot=None)
    res = planner.crop_plan(res, part, max_passes=2, pass_length=0.14)
    model = load_robot("default")
    planner.robot_stage(res, part, model, check_collisions=False)
    return part, res, model


def _rebuild(res, model):
    process = config.ProcessConfig(feed=res.tool.feed, approach=res.tool.approach)

    def rebuild():
        return tr.build_job_trajectory(model, tr.job_paths(res), process, [0.0] * len(res.passes),
                                       res.tool.penetration, np.asarray(config.RobotConfig.home, dtype=float))
    return rebuild


def _search(res, model, mesh, part, **kw):
    return links.search_links(res, model, mesh, planner.remake_links(res, planner.clearance_of(part)),
                              _rebuild(res, model), **kw)


def _with_box(part, centre, size):
    box = trimesh.creation.box(extents=size)
    box.apply_translation(centre)
    return trimesh.util.concatenate([part.tessellate(deflection=2e-4), box])


def test_a_link_that_hits_is_made_again_over_the_part(job) -> None:
    part, res0, model = job
    res = dataclasses.replace(res0)
    link = next(m for m in res.moves if m.kind == "link")
    mid = link.positions[len(link.positions) // 2]
    mesh = _with_box(part, mid, (0.008, 0.008, 0.008))
    with pytest.raises(PlanningError, match="link move of pass 1"):  # the straight link hits it
        planner.check_trajectory_collisions(model, res.trajectory, mesh, res.workpiece_pose)
    passes_before = [s for s in res.trajectory.segments if s["kind"] == "pass"]
    q_pass = [res.trajectory.positions[s["start"]:s["stop"]] for s in passes_before]
    lines: list[str] = []
    report = _search(res, model, mesh, part, on_stage=lines.append)
    assert lines == ["the link to pass 1 hits the part (abrasive_head): made again over the part, 0 mm above its "
                     "safe height", "the link to pass 1 hits the part (abrasive_head): made again over the part, "
                     "50 mm above its safe height"]
    # over the part at its safe height the ball still meets the box (its centre 45 mm up, the box
    # 36..44 mm): one lift more clears it
    assert report["links_over_the_part"] == {"1": pytest.approx(links.LINK_LIFT)}
    planner.check_trajectory_collisions(model, res.trajectory, mesh, res.workpiece_pose)  # clear: no raise
    link = next(m for m in res.moves if m.kind == "link")
    assert link.positions[:, 2].max() >= mid[2] + 0.004 + res.tool.radius
    # the passes are the same
    after = [res.trajectory.positions[s["start"]:s["stop"]] for s in res.trajectory.segments if s["kind"] == "pass"]
    for a, b in zip(q_pass, after, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_no_link_found_is_one_line_naming_the_move_and_the_fix(job) -> None:
    part, res0, model = job
    res = dataclasses.replace(res0)
    link = next(m for m in res.moves if m.kind == "link")
    mid = link.positions[len(link.positions) // 2]
    mesh = _with_box(part, mid + [0.0, 0.0, 0.03], (0.006, 0.006, 0.06))  # a post up to 60 mm above the link
    with pytest.raises(PlanningError) as e:
        _search(res, model, mesh, part, tries=2)
    msg = str(e.value)
    assert "\n" not in msg
    assert "link move of pass 1" in msg and "no collision-free link to pass 1 found" in msg
    assert "tried over the part up to 50 mm above its safe height" in msg and "--place auto" in msg


def test_a_contact_move_that_hits_is_refused_with_the_fix(job) -> None:
    part, res0, model = job
    res = dataclasses.replace(res0)
    grind = next(m for m in res.moves if m.kind == "pass" and m.pass_index == 0)
    mid = grind.positions[len(grind.positions) // 2]
    mesh = _with_box(part, mid + [0.0, 0.0, 0.06], (0.02, 0.02, 0.02))  # in the spindle's way on pass 0
    with pytest.raises(PlanningError) as e:
        _search(res, model, mesh, part)
    msg = str(e.value)
    assert "\n" not in msg and "while the tool works on pass" in msg and "--approach-direction" in msg

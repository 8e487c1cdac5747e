"""Planning for a removal depth per face and with a patch tool, end to end (issue 26), as a user runs
them (``grinding plan`` then ``grinding simulate --plan``, subprocesses):

- two adjacent faces written here (a flat top for x < 0 and a 5 deg slope beyond a ridge at x = 0:
  the passes cross the ridge), ``--target-depth '2:5e-6;6:8e-6'``: the feed changes along each pass
  at the ridge; the simulated map (the arm under position control, the compliant contact, Preston on
  the exact surface of both faces) holds each face to its own D: >= 95 % within +-10 %, no gouge at
  the pass ends;
- the flap wheel (config/tools/flap_wheel.yaml) on the curved panel at 20 um: its footprint (the
  Winkler pressure over its 25 mm wide line contact, the spindle at 6,000 rpm) plans the stepover,
  feed and force; the simulated map the same figures.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("OCP")

pytestmark = pytest.mark.slow

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))
CONFIG = Path(__file__).resolve().parents[2] / "config"


def write_roof(path: Path) -> Path:
    """A 200 x 150 x 20 mm block whose top is two faces: flat for x < 0, sloping down 5 deg for x > 0."""
    from OCP.Interface import Interface_Static
    from OCP.STEPControl import STEPControl_AsIs, STEPControl_Controller, STEPControl_Writer

    from robot_grinding_sim.core.geometry import shapes

    STEPControl_Controller.Init_s()
    block = shapes.make_box((0.2, 0.15, 0.02), (-0.1, -0.075, 0.0))
    cutter = shapes.rotated(shapes.make_box((0.3, 0.3, 0.1), (0.0, -0.15, 0.02)), (0.0, 1.0, 0.0),
                            math.radians(5.0), (0.0, 0.0, 0.02))
    writer = STEPControl_Writer()
    Interface_Static.SetCVal_s("write.step.unit", "M")
    Interface_Static.SetCVal_s("xstep.cascade.unit", "M")
    writer.Transfer(shapes.cut(block, cutter), STEPControl_AsIs)
    assert int(writer.Write(str(path))) == 1
    return path


def grinding(*args: str, cwd: Path) -> dict:
    proc = subprocess.run([GRINDING, *args, "--json"], capture_output=True, text=True, timeout=1800, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def check(u: dict, depth: float) -> None:
    assert u["target_depth_m"] == depth and u["region_nodes"] >= 300, u
    assert u["within_band"] >= 0.95, u
    assert u["mean_depth_m"] == pytest.approx(depth, rel=0.05), u
    assert u["end_of_pass_ratio"] <= 1.1, u


def test_two_faces_each_ground_to_its_own_depth(tmp_path: Path) -> None:
    from robot_grinding_sim.core.geometry import parts

    write_roof(tmp_path / "roof.step")
    part = parts.load_part(str(tmp_path / "roof.step"))

    def normal_z(face: object) -> float:
        u0, u1, v0, v1 = face.uv_bounds
        return float(face.evaluate(np.array([0.5 * (u0 + u1)]), np.array([0.5 * (v0 + v1)]))[1][0][2])

    top = sorted((f for f in part.faces if normal_z(f) > 0.5), key=normal_z)  # the slope's normal leans
    assert len(top) == 2
    slope, flat = top[0].index, top[1].index
    depths = {flat: 5e-6, slope: 8e-6}
    plan = grinding("plan", "roof.step", "--face", str(flat), "--face", str(slope), "--target-depth",
                    f"{flat}:5e-6;{slope}:8e-6", "--max-passes", "24", "--pass-length", "0.06", "--out", "plan.json",
                    cwd=tmp_path)
    rp = plan["removal_plan"]
    assert rp["limiting"] is None and {int(k) for k in rp["faces"]} == {flat, slope}
    # one groove for the job: the faces' feeds in the ratio of their depths (the feed's own sliding aside)
    assert rp["faces"][str(slope)]["feed"] / rp["faces"][str(flat)]["feed"] == pytest.approx(5 / 8, rel=0.02)
    sim = grinding("simulate", "--plan", "plan.json", "--out", "sim", cwd=tmp_path)
    for where in (rp["predicted"]["uniformity"], sim["removal"]["uniformity"]):
        assert {int(k) for k in where["faces"]} == {flat, slope}
        for f, u in where["faces"].items():
            check(u, depths[int(f)])
            assert u["deepest"]["depth_m"] <= 1.1 * depths[int(f)]
    # the deepest anywhere is on the ridge (the ball rolls its contact over the edge, 1.3 x the deeper
    # face's D in process): within the transition the check leaves out, and no gouge beyond it
    assert sim["removal"]["max_depth_m"] <= 1.5 * 8e-6
    # the map of two faces has a (u, v) layout per face: plan.json's predicted map per face, and the
    # removal marker in the bag (the node's display of the map) covers both faces (it was empty)
    m = json.loads((tmp_path / "plan.json").read_text())["removal_plan"]["predicted"]["map"]
    assert sorted(f["face"] for f in m["faces"]) == sorted(depths)
    for f in m["faces"]:
        assert len(f["depth_um"]) == f["shape"][0] * f["shape"][1]
        assert max(f["depth_um"]) >= 0.9 * depths[f["face"]] * 1e6
    from cdr_reader import read_mcap
    from scipy.spatial import cKDTree

    bag = read_mcap(tmp_path / "sim" / "bag", ["/grinding/removal", "/grinding/removal_nodes"])
    (cloud,), (markers,) = bag["/grinding/removal_nodes"], bag["/grinding/removal"]
    rows = np.frombuffer(bytes(bytearray(cloud["data"])), dtype="<f8").reshape(cloud["width"], 11)
    vertices = np.array([[q["x"], q["y"], q["z"]] for mk in markers["markers"] for q in mk["points"]])
    assert len(vertices) > 100
    near = cKDTree(rows[:, :3]).query(vertices)[1]
    assert set(rows[near, 7].astype(int).tolist()) == set(depths)
    assert (tmp_path / "sim" / "removal.png").exists()


def test_the_flap_wheel_grinds_the_curved_panel_to_an_even_depth(tmp_path: Path) -> None:
    D = 2e-5
    plan = grinding("plan", "curved_panel", "--params", str(CONFIG / "cell.yaml"), "--params",
                    str(CONFIG / "tools" / "flap_wheel.yaml"), "--target-depth", str(D), "--max-passes", "40",
                    "--pass-length", "0.045", "--out", "plan.json", cwd=tmp_path)
    rp = plan["removal_plan"]
    assert rp["limiting"] is None and rp["half_width"] == pytest.approx(0.0125, rel=0.01)  # the wheel's, not a ball's
    check(rp["predicted"]["uniformity"], D)
    sim = grinding("simulate", "--plan", "plan.json", "--out", "sim", cwd=tmp_path)
    check(sim["removal"]["uniformity"], D)
    assert sim["removal"]["max_depth_m"] <= 1.1 * D


def test_the_disc_grinds_the_curved_panel_to_an_even_depth_without_spikes_where_passes_engage(tmp_path: Path) -> None:
    """The disc on its face at 0.2 rad (config/tools/disc_grinder.yaml) on the curved panel at 5 um:
    its patch is under 0.6 mm along the travel, and under the 0.3 mm grid where each pass engages.
    The plan's predicted map and the simulated one: >= 95 % within +-10 %, the pass ends within 10 %
    of the pass depth, no node anywhere past 1.2 D. (Before, the engaging patch fell between the
    nodes and the map put the whole force on one: 3.6 x D at the pass starts simulated, 18.7 um; and
    the prediction, at half-cell steps, 60 % within the band.)"""
    D = 5e-6
    plan = grinding("plan", "curved_panel", "--params", str(CONFIG / "cell.yaml"), "--params",
                    str(CONFIG / "tools" / "disc_grinder.yaml"), "--target-depth", str(D), "--max-passes", "12",
                    "--pass-length", "0.04", "--out", "plan.json", cwd=tmp_path)
    rp = plan["removal_plan"]
    assert rp["limiting"] is None and rp["half_length"] < 1e-3 < rp["half_width"]  # the disc's thin segment
    for u in (rp["predicted"]["uniformity"], None):
        if u is None:
            sim = grinding("simulate", "--plan", "plan.json", "--out", "sim", cwd=tmp_path)
            u = sim["removal"]["uniformity"]
        check(u, D)
        assert abs(u["end_of_pass_ratio"] - 1.0) <= 0.1, u
    # no spike anywhere (before: 18.7 um); 5.7 um mid-pass: the map's nodes under a patch 2 cells long
    assert sim["removal"]["max_depth_m"] <= 1.2 * D

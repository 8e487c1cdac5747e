"""Unit traps and runaways (issue 22, item 5): a part whose size does not fit a robot cell is refused
at once, naming its size and the unit its file declares; every stage that grows with the input has
a bound it checks before it allocates.

The STEP files are written here with OpenCascade (OCP) directly, not with the package's writer: the
file declares metres (``SI_UNIT($,.METRE.)``) around the numbers of a 200 x 150 x 10 mm plate.
The CLI runs as a user runs it (``python -m robot_grinding_sim.cli`` in a subprocess, under a 4 GB
address-space cap: before the check, ``grinding plan`` ran for minutes and died with a MemoryError
traceback).
"""

from __future__ import annotations

import math
import re
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("OCP")

from robot_grinding_sim.core.errors import InputError

#: the CLI as a process, from the outside (exit codes, files, limits): seconds per test
pytestmark = pytest.mark.slow

CAP = 4 << 30  # bytes of address space for the CLI under test


def write_step(path: Path, size_mm: tuple[float, float, float], unit: str) -> Path:
    """A box of ``size_mm`` numbers centred on z, written by OCP's STEP writer declaring ``unit``
    ("M" or "MM") around those very numbers; the file's text is checked to say so."""
    from OCP.BRepPrimAPI import BRepPrimAPI_MakeBox
    from OCP.gp import gp_Pnt
    from OCP.Interface import Interface_Static
    from OCP.STEPControl import STEPControl_AsIs, STEPControl_Controller, STEPControl_Writer

    STEPControl_Controller.Init_s()
    x, y, z = size_mm
    box = BRepPrimAPI_MakeBox(gp_Pnt(-x / 2, -y / 2, 0.0), x, y, z).Shape()
    writer = STEPControl_Writer()
    # the shape's numbers are written as they are, labelled with the unit
    Interface_Static.SetCVal_s("write.step.unit", unit)
    Interface_Static.SetCVal_s("xstep.cascade.unit", unit)
    writer.Transfer(box, STEPControl_AsIs)
    assert int(writer.Write(str(path))) == 1  # IFSelect_RetDone
    text = path.read_text()
    pts = [[float(c) for c in pt.split(",")] for pt in re.findall(r"CARTESIAN_POINT\('',\(([^)]*)\)", text)]
    xs = [p[0] for p in pts if len(p) == 3]
    assert min(xs) == pytest.approx(-x / 2)  # the numbers are the ones given, not converted
    label = "SI_UNIT($,.METRE.)" if unit == "M" else "SI_UNIT(.MILLI.,.METRE.)"
    assert label in text
    return path


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def grinding(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, preexec_fn=_cap)


def _one_error_line(out: subprocess.CompletedProcess[str], cmd: str) -> str:
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [ln for ln in out.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and errors[0].startswith(f"grinding {cmd}: error: "), out.stderr[-3000:]
    assert out.stderr.strip().splitlines()[-1] == errors[0]
    return errors[0]


@pytest.mark.parametrize("robot", ["none", "default"])
def test_step_declaring_metres_around_millimetre_numbers_is_refused_at_once(tmp_path: Path, robot: str) -> None:
    step = write_step(tmp_path / "plate_m.step", (200.0, 150.0, 10.0), "M")
    out = grinding("plan", str(step), "--robot", robot, "--out", "plan.json", cwd=tmp_path)
    line = _one_error_line(out, "plan")
    assert "plate_m.step" in line and "200 m" in line and "metre" in line, line
    if robot == "default":  # with a robot the bound is its reach
        assert "reach" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plate_m.step"]  # nothing written


def test_step_declaring_millimetres_around_metre_numbers_is_refused(tmp_path: Path) -> None:
    """The other way round: a 0.2 m plate written as 0.2 mm is smaller than the 20 mm ball."""
    step = write_step(tmp_path / "plate_mm.step", (0.2, 0.15, 0.01), "MM")
    out = grinding("plan", str(step), "--robot", "none", "--out", "plan.json", cwd=tmp_path)
    line = _one_error_line(out, "plan")
    assert "0.0002 m" in line and "millimetre" in line and "smaller than the tool" in line, line
    assert not (tmp_path / "plan.json").exists()


def test_the_same_plate_in_its_right_unit_plans(tmp_path: Path) -> None:
    """The check refuses the unit, not the plate: the same box declared in millimetres plans."""
    step = write_step(tmp_path / "plate.step", (200.0, 150.0, 10.0), "MM")
    out = grinding("plan", str(step), "--robot", "none", "--out", "plan.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "plan.json").is_file()


def test_waypoints_are_bounded_before_any_pass_is_made() -> None:
    """A 10 m square (inside the size bound) at a 0.1 mm stepover and spacing would be 1e10
    waypoints: refused from the faces' area before the mesh, the levels or the boundary exist."""
    from robot_grinding_sim.core.config import PassParameters
    from robot_grinding_sim.core.geometry import cad, shapes
    from robot_grinding_sim.core.planning import planner

    part = cad.CadPart(shapes.make_box((10.0, 10.0, 0.05), (-5.0, -5.0, 0.0)), source="big_plate")
    params = PassParameters(stepover=1e-4, spacing=1e-4, margin=0.005)
    with pytest.raises(InputError, match=r"stepover 0.0001 m and passes.spacing 0.0001 m make about 1e\+10 waypoints"):
        planner.plan(part, None, params, planner.ToolParameters(radius=0.02))


def test_part_size_bound_uses_the_robots_reach() -> None:
    """The reach bound is the chain's length: for the UR10e with the ball tool about 1.86 m (the UR10e's
    published reach is 1.3 m from the base axis to the flange; the chain's length is longer than that)."""
    from robot_grinding_sim.core.job.setup import load_robot_model
    from robot_grinding_sim.core.planning.planner import robot_reach

    model = load_robot_model("", "tcp")
    reach = robot_reach(model)
    assert 1.3 < reach < 2.2
    # no configuration reaches farther than the bound: FK of random configurations
    q = np.random.default_rng(0).uniform(model.lower, model.upper, (500, model.nq))
    tips = model.fk(q, "tcp")[:, :3, 3]
    assert np.linalg.norm(tips, axis=1).max() <= reach + 1e-9


def test_removal_grid_of_a_mesh_part_is_bounded_before_allocating() -> None:
    """plane_grid (parts without an exact surface) had no bound: 100 m of passes at 0.2 mm is 2.5e11 nodes."""
    from robot_grinding_sim.core.job.removal import plane_grid

    pts = np.array([[0.0, 0.0, 0.0], [100.0, 0.0, 0.0], [0.0, 100.0, 0.0]])
    nrm = np.tile([0.0, 0.0, 1.0], (3, 1))
    with pytest.raises(InputError, match="removal.grid_spacing"):
        plane_grid(pts, nrm, 2e-4, np.eye(4))


def test_bounce_with_a_runaway_duration_is_refused(tmp_path: Path) -> None:
    """--duration 1e9 at 1 ms is 1e12 steps: before, grinding bounce ran until killed."""
    out = grinding("bounce", "--duration", "1e9", cwd=tmp_path, timeout=120)
    line = _one_error_line(out, "bounce")
    assert "--duration" in line and "steps" in line


def test_record_of_the_in_process_job_is_bounded() -> None:
    """The in-process job sizes its record by the job's duration: 1e12 s asked for petabytes (a numpy
    _ArrayMemoryError traceback after the plan was read); now an InputError naming the duration."""
    from robot_grinding_sim.core.job.simulation import Record

    with pytest.raises(InputError, match=r"the job lasts 1e\+12 s"):
        Record(1e-3, 6, int(math.ceil(1e12 / 1e-3)), 1e12)
    Record(1e-3, 6, 3000, 3.0)  # a short job allocates as before

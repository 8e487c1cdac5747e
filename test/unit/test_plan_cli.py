"""``grinding plan`` and ``grinding parts`` as a user runs them: the console script's entry point in this
process (cli_runner), and once as a subprocess of the console script."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

from robot_grinding_sim.core.geometry import parts

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))


def test_parts_lists_the_builtin_parts() -> None:
    # the console script itself, once: a process, its exit code and its output
    out = subprocess.run([GRINDING, "parts", "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == list(parts.BUILTIN_PARTS)
    assert [r["name"] for r in rows if r["default"]] == ["curved_panel"]
    text = run("parts")
    assert text.returncode == 0 and "plate_with_hole" in text.stdout


def test_list_faces_json() -> None:
    out = run("plan", "flat_plate", "--list-faces", "--json")
    assert out.returncode == 0, out.stderr
    faces = json.loads(out.stdout)
    assert [set(f) for f in faces] == [{"index", "type", "area"}] * 6
    assert sorted(round(f["area"], 9) for f in faces) == sorted([0.0015, 0.0015, 0.002, 0.002, 0.03, 0.03])


def test_plan_writes_json_csv_plot(tmp_path: Path) -> None:
    out = run("plan", "plate_with_hole", "--stepover", "0.02", "--spacing", "0.005", "--margin", "0.004",
              "--no-optimise", "--out", "plan.json", "--csv", "plan.csv", "--plot", "plan.png", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["schema"] == "robot_grinding_sim/plan" and data["version"] == 2
    n = sum(len(p["waypoints"]) for p in data["passes"])
    assert n == summary["waypoints"] > 100
    with (tmp_path / "plan.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == n
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    traj = data["trajectory"]  # the default robot: UR10e + ball tool
    assert len(traj["joint_names"]) == 6 and len(traj["times"]) == len(traj["positions"]) > n
    assert traj["interpolation"] == "cubic_hermite" and data["reachability"]["knots"] == len(traj["times"])
    assert data["force_target"] is None  # --no-optimise: no predicted force
    assert data["cell"]["passes.margin"] == 0.004 and data["cell"]["passes.spacing"] == 0.005
    for p in data["passes"]:
        for w in p["waypoints"]:
            x, y, _ = w["surface_point"]
            assert (x * x + y * y) ** 0.5 >= 0.024 - 1e-9  # hole radius 20 mm + margin 4 mm


def test_plan_with_the_force_target(tmp_path: Path) -> None:
    out = run("plan", "flat_plate", "--stepover", "0.03", "--max-passes", "2", "--pass-length", "0.01",
              "--target-force", "8", "--out", "plan.json", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "plan.json").read_text())
    ft = data["force_target"]
    assert ft["target_force_n"] == 8.0 and ft["optimised"] and len(ft["offsets_m"]) == 2 == len(data["passes"])
    assert all(abs(f - 8.0) <= 0.05 * 8.0 for f in ft["predicted_mean_force_n"])
    assert all(o > 0 for o in ft["offsets_m"])  # deeper than F/K: the arm is a spring in series
    assert data["cell"]["process.target_force"] == 8.0
    assert all(abs(p["length"] - 0.01) < 1e-9 for p in data["passes"])


def _assert_clean_failure(out: subprocess.CompletedProcess[str], folder: Path, pattern: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    # one error line, the last; progress lines (stderr is not a terminal here) may precede it
    lines = out.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("grinding plan: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and re.search(pattern, errors[0]), out.stderr
    assert all(ln.startswith("grinding plan: ") and "Traceback" not in ln for ln in lines), out.stderr
    assert not any(folder.glob("plan*")), "no output file after a failure"
    assert not any(p.name.startswith(".plan") for p in folder.iterdir()), "no temporary file left"


@pytest.mark.parametrize("args,pattern", [
    (["--stepover", "0"], "stepover"),
    (["--stepover", "-0.002"], "stepover"),
    (["--face", "42"], "face index 42 out of range"),
    (["--margin", "0.2"], "margin"),
])
def test_bad_options_fail_cleanly(tmp_path: Path, args: list[str], pattern: str) -> None:
    out = run("plan", "flat_plate", *args, "--out", "plan.json", cwd=tmp_path)
    _assert_clean_failure(out, tmp_path, pattern)


@pytest.mark.parametrize("content,pattern", [
    ("", "empty"),
    ("this is not STEP\n", "not a readable STEP"),
    (None, "no length unit"),
])
def test_bad_files_fail_cleanly(tmp_path: Path, content: str | None, pattern: str) -> None:
    src = tmp_path / "part.step"
    if content is None:  # a real STEP file with its length unit removed
        text = parts.part_path("flat_plate").read_text()
        text = re.sub(r"GLOBAL_UNIT_ASSIGNED_CONTEXT\s*\(\(\s*#\d+\s*,", "GLOBAL_UNIT_ASSIGNED_CONTEXT((", text)
        src.write_text(text)
    else:
        src.write_text(content)
    out = run("plan", str(src), "--out", "plan.json", cwd=tmp_path)
    _assert_clean_failure(out, tmp_path, pattern)


def test_unknown_source(tmp_path: Path) -> None:
    out = run("plan", "no_such_part", "--out", "plan.json", cwd=tmp_path)
    _assert_clean_failure(out, tmp_path, "built-in")


def test_unreachable_workpiece_fails_cleanly(tmp_path: Path) -> None:
    out = run("plan", "flat_plate", "--stepover", "0.03", "--spacing", "0.01", "--robot", "default",
              "--workpiece-pose", "2.5 0 0 0 0 0", "--out", "plan.json", cwd=tmp_path)
    _assert_clean_failure(out, tmp_path, r"all \d+ waypoints of the passes are unreachable for the arm.*move the "
                                         r"workpiece closer")


def test_place_auto_makes_the_job_on_the_placed_passes_in_memory(tmp_path: Path, monkeypatch) -> None:
    """``--place auto`` wrote the placed passes to a passes.json and read them back (rounded to 12 digits,
    the pose through a quaternion): now the job is made on them as they are: the plan's workpiece pose is
    the chosen pose's matrix exactly, the passes are those placed, and no plan file is written or read."""
    import numpy as np

    from robot_grinding_sim.cli.plan import _robot_plan
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.geometry import parts
    from robot_grinding_sim.core.planning import plan_io, planner

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("a plan file written or read in the middle of --place auto")

    for name in ("write_plan", "read_plan", "parse_plan", "plan_from_dict"):
        monkeypatch.setattr(plan_io, name, refuse)
    cell = CellConfig().replace(**{"workpiece.pose": [1.25, 0.3, 0.0, 0.0, 0.0, 0.3]})  # out of reach
    part = parts.load_part(cell.workpiece.part)
    faces = None if list(cell.workpiece.faces) == [-1] else [int(f) for f in cell.workpiece.faces]  # as the CLI
    result = _robot_plan(cell, part, faces, False, 1, 0.01, "auto", None, None)
    pose = result.placement["pose"]
    assert pose != result.placement["configured_pose"]
    np.testing.assert_array_equal(result.workpiece_pose, planner.pose_matrix(pose))
    assert result.trajectory is not None and result.cell["workpiece.pose"] == pose
    placed = planner.crop_plan(planner.plan(part, faces, cell.passes.validate(), result.tool, robot=None,
                                            workpiece_pose=planner.pose_matrix(pose)), part, 1, 0.01)
    for a, b in zip(result.passes, placed.passes, strict=True):
        np.testing.assert_array_equal(a.points, b.points)

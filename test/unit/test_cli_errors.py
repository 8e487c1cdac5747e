"""Every error is one line, and nothing partial is left (issue 22, item 6).

Each test runs ``grinding`` as a user does (``python -m robot_grinding_sim.cli`` in a subprocess, or
``main()`` in process where a fault is injected) and checks from the outside: the exit code, that
stderr ends in exactly one ``grinding <cmd>: error:`` line naming the input with no traceback, and
that the folder holds nothing new (no output, no temporary file). Faults come from the system where
it lets us (a path through a regular file, a read-only and a full tmpfs when this process may
mount one) and otherwise are injected at the write layer (``os.fdopen``: OSError ENOSPC).
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from robot_grinding_sim.cli import main

#: the CLI as a process, from the outside (exit codes, files, limits): seconds per test
pytestmark = pytest.mark.slow

CMD = [sys.executable, "-m", "robot_grinding_sim.cli"]


def grinding(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def error_line(stderr: str, cmd: str) -> str:
    """The one error line of ``stderr`` (its last line); progress lines may precede it."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = stderr.strip().splitlines()
    errors = [ln for ln in lines if f"grinding {cmd}: error:" in ln or "internal error" in ln]
    assert len(errors) == 1 and lines[-1] == errors[0], stderr[-3000:]
    return errors[0]


def fails_cleanly(out: subprocess.CompletedProcess[str], cmd: str, *needles: str) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr[-3000:])
    line = error_line(out.stderr, cmd)
    for n in needles:
        assert n in line, line
    return line


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _mount_tmpfs(where: Path, options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path):
    """mount(options) -> a fresh tmpfs under tmp_path (skips where this process may not mount)."""
    mounted: list[Path] = []

    def make(options: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        if not _mount_tmpfs(where, options):
            pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", str(where)], capture_output=True)


@pytest.fixture
def readonly_dir(tmp_path: Path, tmpfs):
    """A folder no file can be created in: a read-only tmpfs, or (not root) a folder without write bits."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    yield tmpfs("ro,size=64k")


# -- output paths ---------------------------------------------------------------------------------

def test_a_path_through_a_regular_file_is_one_line(tmp_path: Path) -> None:
    """"Not a directory": before, a NotADirectoryError traceback after the whole plan was made."""
    (tmp_path / "afile").write_text("x")
    out = grinding("plan", "flat_plate", "--robot", "none", "--out", "afile/plan.json", cwd=tmp_path)
    fails_cleanly(out, "plan", "afile/plan.json", "is a file")
    assert listing(tmp_path) == ["afile"]


def test_a_read_only_folder_is_refused_before_the_work(tmp_path: Path, readonly_dir: Path) -> None:
    out = grinding("plan", "flat_plate", "--robot", "none", "--out", str(readonly_dir / "plan.json"), cwd=tmp_path)
    line = fails_cleanly(out, "plan", str(readonly_dir / "plan.json"))
    assert "Read-only file system" in line or "Permission denied" in line, line
    assert "planning" not in out.stderr  # refused before the planning started
    assert listing(readonly_dir) == []


@pytest.mark.parametrize("cmd", ["plan", "simulate"])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path, tmpfs, cmd: str) -> None:
    """A 64 kB tmpfs: flat_plate's plan.json (about 300 kB) does not fit, nor a job's bag."""
    full = tmpfs("size=64k")
    if cmd == "plan":
        target = full / "plan.json"
        out = grinding("plan", "flat_plate", "--robot", "none", "--out", str(target), cwd=tmp_path)
    else:
        target = full / "run"
        out = grinding("simulate", "flat_plate", "--max-passes", "1", "--pass-length", "0.01", "--no-optimise",
                       "--out", str(target), cwd=tmp_path)
    fails_cleanly(out, cmd, str(target), "No space left on device")
    assert listing(full) == []


def _enospc_on(name: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every file whose name starts with ``.name`` (the atomic writers' temporary files) fail
    its write with ENOSPC, through os.fdopen; returns the list of names that failed."""
    real = os.fdopen
    failed: list[str] = []

    class Full:
        def __init__(self, fh, path: str) -> None:
            self.fh, self.path = fh, path

        def write(self, data):
            failed.append(self.path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, key):
            return getattr(self.fh, key)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()
            return False

    def fdopen(fd, *a, **kw):
        fh = real(fd, *a, **kw)
        path = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        return Full(fh, path) if os.path.basename(path).startswith(f".{name}") else fh

    monkeypatch.setattr(os, "fdopen", fdopen)
    return failed


@pytest.mark.parametrize("failing", ["plan.csv", "plan.json"])
def test_plan_json_csv_and_plot_are_written_together_or_not_at_all(tmp_path: Path, monkeypatch, capsys,
                                                                   failing: str) -> None:
    """Before, plan.json was left behind after a failed --csv or --plot (each was written on its own)."""
    monkeypatch.chdir(tmp_path)
    failed = _enospc_on(failing, monkeypatch)
    code = main(["plan", "flat_plate", "--robot", "none", "--out", "plan.json", "--csv", "plan.csv",
                 "--plot", "plan.png"])
    err = capsys.readouterr().err
    assert failed, "the injected fault did not fire"
    assert code == 2, err[-3000:]
    line = error_line(err, "plan")
    assert failing in line and "No space left on device" in line, line
    assert listing(tmp_path) == []  # neither plan.json, nor the CSV, the PNG or a temporary file


# -- plan.json checked before running ---------------------------------------------------------------

@pytest.fixture(scope="module")
def robot_plan(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A short plan with its job trajectory (flat_plate, one 10 mm pass, no optimisation)."""
    d = tmp_path_factory.mktemp("plan")
    out = grinding("plan", "flat_plate", "--max-passes", "1", "--pass-length", "0.01", "--no-optimise",
                   "--out", "plan.json", cwd=d)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads((d / "plan.json").read_text())


def _broken(plan: dict, how: str) -> dict:
    p = copy.deepcopy(plan)
    if how == "nan_offset":
        p["force_target"] = {"target_force_n": 5.0, "tolerance": 0.05, "pass_index": [0], "offsets_m": [float("nan")],
                             "predicted_mean_force_n": [5.0], "within_tolerance": [True], "optimised": True}
    elif how == "last_time_1e12":
        p["trajectory"]["times"][-1] = 1e12
    elif how == "jump_1rad":
        q = np.asarray(p["trajectory"]["positions"])
        q[len(q) // 2:, 0] += 1.0  # shoulder_pan jumps by 1 rad between two knots ~13 ms apart
        p["trajectory"]["positions"] = q.tolist()
    return p


@pytest.mark.parametrize(("how", "needle"), [("nan_offset", "offset of pass 0 is nan"),
                                              ("last_time_1e12", "1e+12 s"),
                                              ("jump_1rad", "shoulder_pan_joint moves 1 in")])
def test_a_broken_plan_is_refused_before_the_job_runs(tmp_path: Path, robot_plan: dict, how: str,
                                                      needle: str) -> None:
    """Before: the NaN offset crashed writing summary.json after the job ran, 1e12 s asked numpy for
    7 PiB, and the 1 rad jump ran (the arm's servo followed a step of 75 rad/s)."""
    (tmp_path / "bad.json").write_text(json.dumps(_broken(robot_plan, how)))  # NaN as the JSON NaN literal
    out = grinding("simulate", "--plan", "bad.json", "--out", "run", cwd=tmp_path)
    fails_cleanly(out, "simulate", "bad.json", needle)
    assert "simulating" not in out.stderr and "final run" not in out.stderr  # nothing ran
    assert listing(tmp_path) == ["bad.json"]


def test_a_calibration_plan_past_the_joint_limits_is_refused(tmp_path: Path, robot_plan: dict) -> None:
    p = copy.deepcopy(robot_plan)
    p["trajectory"]["positions"] = (np.asarray(p["trajectory"]["positions"]) + [10.0, 0, 0, 0, 0, 0]).tolist()
    (tmp_path / "far.json").write_text(json.dumps(p))
    out = grinding("calibration-plan", "far.json", "--out", "calib.json", cwd=tmp_path)
    fails_cleanly(out, "calibration-plan", "far.json", "shoulder_pan_joint", "outside its limits")
    assert listing(tmp_path) == ["far.json"]


# -- one validation of the parameters ----------------------------------------------------------------

def test_robot_home_is_checked_by_check_config_and_set_alike(tmp_path: Path) -> None:
    """--set robot.home=[0,1] passed check-config and was refused only by dynamics_node at start (and
    grinding simulate crashed on it); now the same check, the same words, everywhere."""
    (tmp_path / "home.yaml").write_text("/**:\n  ros__parameters:\n    robot:\n      home: [0.0, 1.0]\n")
    cc = grinding("check-config", "home.yaml", cwd=tmp_path)
    line_cc = fails_cleanly(cc, "check-config", "home.yaml", "robot.home")
    sim = grinding("simulate", "flat_plate", "--set", "robot.home=[0,1]", "--out", "run", cwd=tmp_path)
    line_sim = fails_cleanly(sim, "simulate", "robot.home")
    problem = "expected 6 values in the URDF's joint order"
    assert problem in line_cc and problem in line_sim
    assert listing(tmp_path) == ["home.yaml"]


def test_robot_home_past_a_joint_limit_is_refused_by_check_config(tmp_path: Path) -> None:
    """The same words as dynamics_node's refusal at start (test/ros/test_dynamics_node.py, HOME_PAST_LIMIT)."""
    (tmp_path / "home.yaml").write_text("/**:\n  ros__parameters:\n    robot:\n"
                                        "      home: [0.0, -1.2, 1.9, -2.27, -1.57, 10.0]\n")
    out = grinding("check-config", "home.yaml", cwd=tmp_path)
    fails_cleanly(out, "check-config", "parameter 'robot.home': wrist_3_joint = 10 is outside its limits "
                                       "[-6.28319, 6.28319]")


def test_numbers_as_users_write_them(tmp_path: Path) -> None:
    """1e5 (YAML 1.1 reads it as a string) is a number in a parameter file and in --set, as rcl reads it."""
    (tmp_path / "k.yaml").write_text("/**:\n  ros__parameters:\n    contact:\n      stiffness: 1e5\n"
                                     "      slip_speed: 2E-3\n")
    out = grinding("check-config", "k.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from robot_grinding_sim.cli.cell_options import build_cell

    cell = build_cell({"params_files": [str(tmp_path / "k.yaml")], "sets": ["contact.cr=5e-1"]})
    assert cell.contact.stiffness == 1e5 and cell.contact.slip_speed == 2e-3 and cell.contact.cr == 0.5


# -- bags and reports --------------------------------------------------------------------------------

@pytest.mark.parametrize("as_file", [False, True])
def test_repair_of_random_bytes_is_an_error_and_changes_nothing(tmp_path: Path, as_file: bool) -> None:
    """Before: "repaired: 0 messages", exit 0, the file renamed to .orig and a metadata.yaml written."""
    bag = tmp_path / "bag"
    bag.mkdir()
    data = np.random.default_rng(1).bytes(5000)
    (bag / "bag_0.mcap").write_bytes(data)
    target = bag / "bag_0.mcap" if as_file else bag
    out = grinding("record", "--repair", str(target), cwd=tmp_path)
    fails_cleanly(out, "record", "bag_0.mcap", "not an MCAP file")
    assert listing(tmp_path) == ["bag", "bag/bag_0.mcap"] and (bag / "bag_0.mcap").read_bytes() == data


def test_target_nan_is_blamed_on_the_target(tmp_path: Path) -> None:
    from test_compare import make_pair

    _, meas, _ = make_pair(tmp_path, "mcap", "mcap")
    out = grinding("report", str(meas), "--target", "nan", cwd=tmp_path)
    line = fails_cleanly(out, "report")
    assert "target" in line and "band" not in line, line


# -- what the hidden CAD showed ---------------------------------------------------------------------

def _floor_and_wall(path: Path) -> Path:
    """A floor (80 x 50 mm at z 10 mm) beside a wall (10 mm thick, 40 mm high), written by OCP: the 20 mm
    ball cannot touch the floor within 20 mm of the wall without cutting into it."""
    pytest.importorskip("OCP")
    from OCP.BRepAlgoAPI import BRepAlgoAPI_Cut
    from OCP.BRepPrimAPI import BRepPrimAPI_MakeBox
    from OCP.gp import gp_Pnt
    from OCP.Interface import Interface_Static
    from OCP.STEPControl import STEPControl_AsIs, STEPControl_Controller, STEPControl_Writer

    STEPControl_Controller.Init_s()
    block = BRepPrimAPI_MakeBox(gp_Pnt(0, 0, 0), 80.0, 60.0, 40.0).Shape()
    pocket = BRepPrimAPI_MakeBox(gp_Pnt(-10, -10, 10), 100.0, 60.0, 50.0).Shape()
    writer = STEPControl_Writer()
    Interface_Static.SetCVal_s("write.step.unit", "MM")
    writer.Transfer(BRepAlgoAPI_Cut(block, pocket).Shape(), STEPControl_AsIs)
    assert int(writer.Write(str(path))) == 1
    return path


@pytest.mark.parametrize("crop", [["--max-passes", "2"], ["--pass-length", "0.02"]])
def test_cropping_a_plan_with_a_region_the_ball_cannot_touch(tmp_path: Path, crop: list[str]) -> None:
    """Before: TypeError: 'NoneType' object is not subscriptable (_coverage_line) after plan.json was written."""
    _floor_and_wall(tmp_path / "wall.step")
    out = grinding("plan", "wall.step", "--robot", "none", *crop, "--out", "plan.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "the ball cannot touch" in out.stdout and "waypoints left out" in out.stdout
    cov = json.loads((tmp_path / "plan.json").read_text())["coverage"]
    assert cov["unreachable_area_m2"] > 0 and cov["tool_reach"]["dropped_waypoints"] > 0


def test_long_commands_print_progress_lines_into_a_log(tmp_path: Path) -> None:
    """stdout and stderr not terminals (a log): before, nothing until the end; now a line per stage and
    percentage lines, on stderr, prefixed with the command."""
    with open(tmp_path / "log.txt", "w") as log:
        code = subprocess.run([*CMD, "simulate", "flat_plate", "--max-passes", "1", "--pass-length", "0.01",
                               "--no-optimise", "--out", "run"], stdout=log, stderr=subprocess.STDOUT,
                              cwd=tmp_path, timeout=600).returncode
    text = (tmp_path / "log.txt").read_text()
    assert code == 0, text[-3000:]
    lines = text.splitlines()
    for stage in ("loading robot and part", "planning passes", "final run", "simulating"):
        assert f"grinding simulate: {stage}" in lines, text[-3000:]


def test_progress_lines_give_the_share_done_and_the_time_left(monkeypatch, capsys) -> None:
    """The plain lines of a stage with a total, on a clock we drive: one per tenth passed, no two
    closer than MIN_GAP, the time left from the rate so far."""
    from robot_grinding_sim.cli import common

    now = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])
    bar = common._Lines("simulating", 50.0)
    for done in range(1, 51):  # 1 s of wall time per unit of work
        now[0] += 1.0
        bar.update(float(done))
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "grinding: simulating"
    assert lines[1] == "grinding: simulating  10% (0:00:05 elapsed, 0:00:45 left)"
    assert lines[-1] == "grinding: simulating 100% (0:00:50 elapsed, 0:00:00 left)"
    assert len(lines) == 11
    bar.update(0.0, description="writing")  # a new stage: its name
    now[0] += 0.5
    bar.update(25.0, total=50.0)  # 50 % after 0.5 s: within MIN_GAP of the stage line, no line yet
    assert capsys.readouterr().err.splitlines() == ["grinding: writing"]


# -- every subcommand: bad paths and bad values ------------------------------------------------------

SWEEP = [
    (["plan", "flat_plate", "--out", "afile/p.json"], "afile/p.json"),
    (["plan", "flat_plate", "--robot", "none", "--out", "p.json", "--plot", "afile/p.png"], "afile/p.png"),
    (["plan", "flat_plate", "--robot", "none", "--pass-length", "-1", "--out", "p.json"], "pass-length"),
    (["plan", "flat_plate", "--robot", "none", "--pass-length", "nan", "--out", "p.json"], "--pass-length"),
    (["plan", "nope.step", "--out", "p.json"], "nope.step"),
    (["simulate", "flat_plate", "--out", "afile/run"], "afile/run"),
    (["simulate", "--plan", "nope.json", "--out", "run"], "nope.json"),
    (["simulate", "flat_plate", "--dt", "nan", "--out", "run"], "--dt"),
    (["demo", "--out", "afile/run"], "afile/run"),
    (["bounce", "--plot", "afile/plots"], "afile/plots"),
    (["bounce", "--cr", "nan"], "--cr"),
    (["compare", "nope_a", "nope_b"], "nope_a"),
    (["report", "nope_bag"], "nope_bag"),
    (["report", "nope_bag", "--threshold", "nan"], "--threshold"),
    (["calibrate", "nope_bag", "--out", "cell.yaml"], "nope_bag"),
    (["calibration-plan", "--out", "afile/c.json"], "afile/c.json"),
    (["calibration-plan", "--out", "c.json", "--lift", "nan"], "--lift"),
    (["check-config", "nope.yaml"], "nope.yaml"),
    (["check-config", "--write-defaults", "afile"], "afile"),
    (["dynamics", "--urdf", "nope.urdf"], "nope.urdf"),
    (["dynamics", "--q", "nan,0,0,0,0,0"], "--q"),
    (["record", "--repair", "nope_bag"], "nope_bag"),
    (["record", "--duration", "nan"], "--duration"),
    (["emulate", "--print", "--params-file", "nope.yaml"], "nope.yaml"),
    (["bringup", "sim", "--print", "--params-file", "nope.yaml"], "nope.yaml"),
]


@pytest.mark.parametrize(("args", "needle"), SWEEP, ids=[" ".join(a) for a, _ in SWEEP])
def test_every_subcommand_fails_in_one_line_and_writes_nothing(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "afile").write_text("x")
    out = grinding(*args, cwd=tmp_path, timeout=300)
    fails_cleanly(out, args[0], needle)
    assert listing(tmp_path) == ["afile"]


@pytest.mark.parametrize(("exc", "code", "needle"), [(RuntimeError("boom"), 1, "internal error: RuntimeError: boom"),
                                                     (MemoryError(), 2, "out of memory"),
                                                     (OSError(errno.EIO, "Input/output error", "x.bin"), 2,
                                                      "x.bin: Input/output error")])
def test_anything_else_is_one_line_too(monkeypatch, capsys, exc: BaseException, code: int, needle: str) -> None:
    """Exceptions the commands do not expect still end in one line (a defect: exit 1, and the traceback
    with GRINDING_TRACEBACK=1)."""
    from robot_grinding_sim.core.geometry import parts

    def boom() -> None:
        raise exc

    monkeypatch.setattr(parts, "list_parts", boom)
    monkeypatch.delenv("GRINDING_TRACEBACK", raising=False)
    assert main(["parts"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("grinding parts: ") and needle in err, err
    if code == 1:
        monkeypatch.setenv("GRINDING_TRACEBACK", "1")
        with pytest.raises(RuntimeError, match="boom"):
            main(["parts"])

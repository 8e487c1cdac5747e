"""``grinding bounce`` as a user runs it: the console script's entry point in this process (cli_runner), and
the installed console script in a subprocess for its exit code and output as a process."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import cli_runner
import matplotlib.image
import pytest

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))
KEYS = {"t_impact", "v_in", "v_out", "peak_force", "max_penetration", "contact_duration"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_runner.run("bounce", *args)


def test_json_defaults_reproduce_the_paper_ball() -> None:
    out = run("--json", "--dt", "0.128", "--duration", "2.0")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"bounces", "steps", "wall_time_s"} <= set(data)
    assert data["steps"] == math.ceil(2.0 / 0.128)
    b = data["bounces"]
    assert len(b) == 2 and all(set(x) >= KEYS for x in b)
    assert b[0]["t_impact"] == pytest.approx(math.sqrt(2 / 9.81), abs=1e-9)
    assert b[0]["v_in"] == pytest.approx(math.sqrt(2 * 9.81), rel=1e-12)
    assert b[0]["v_out"] == pytest.approx(b[0]["v_in"], rel=1e-9)  # default c_r = 1
    assert b[0]["peak_force"] == pytest.approx(b[0]["v_in"] * math.sqrt(1.4e8), rel=5e-4)
    assert b[0]["max_penetration"] == pytest.approx(b[0]["v_in"] / math.sqrt(1.4e8), rel=5e-4)
    assert b[0]["contact_duration"] == pytest.approx(math.pi / math.sqrt(1.4e8), rel=5e-4)
    # second impact after a full symmetric flight
    assert b[1]["t_impact"] - b[0]["t_impact"] == pytest.approx(
        2 * math.sqrt(2 / 9.81) + b[0]["contact_duration"], abs=1e-9)


@pytest.mark.parametrize("model, cr, expect", [
    ("kelvin_voigt", 0.4, 0.4), ("hunt_crossley", 0.4, 0.4),
    ("lankarani_nikravesh", 0.5, 0.725), ("flores", 0.5, 0.470),
])
def test_models_and_options(model: str, cr: float, expect: float) -> None:
    out = run("--json", "--model", model, "--cr", str(cr), "--dt", "0.05", "--duration", "1.0",
              "--mass", "2.0", "--height", "0.5", "--stiffness", "1e9")
    assert out.returncode == 0, out.stderr
    b = json.loads(out.stdout)["bounces"][0]
    assert b["t_impact"] == pytest.approx(math.sqrt(2 * 0.5 / 9.81), abs=1e-9)
    assert b["v_out"] / b["v_in"] == pytest.approx(expect, abs=5e-3)


def test_human_output_and_plots(tmp_path: Path) -> None:
    out = run("--cr", "0.8", "--duration", "1.3", "--plot", str(tmp_path / "fig"))
    assert out.returncode == 0, out.stderr
    assert "0.8000" in out.stdout  # the realised ratio column
    for name in ("force_time", "force_penetration", "velocity_time", "velocity_penetration", "energy",
                 "figure3"):
        path = tmp_path / "fig" / f"{name}.png"
        img = matplotlib.image.imread(path)  # read back by a library that did not write it... as PNG
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        assert img.std() > 0.01  # not blank


@pytest.mark.parametrize("args, word", [
    (("--mass", "-1"), "--mass"),
    (("--cr", "0"), "--cr"),
    (("--cr", "1.5"), "--cr"),
    (("--dt", "0"), "--dt"),
    (("--dt", "-0.1"), "--dt"),
    (("--stiffness", "0"), "--stiffness"),
    (("--duration", "nan"), "--duration"),
    (("--model", "ode"), "--model"),
])
def test_bad_input_exit_2_one_line(args: tuple[str, ...], word: str, capsys: pytest.CaptureFixture) -> None:
    # in process (the console script's main()), to keep the test fast; one subprocess check below
    from robot_grinding_sim.cli import main

    assert main(["bounce", *args, "--json"]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], cap.err
    assert lines[0].startswith("grinding bounce: error:")
    assert cap.out == ""


def test_bad_input_subprocess() -> None:
    out = subprocess.run([GRINDING, "bounce", "--mass", "-1", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--mass" in lines[0], out.stderr
    assert out.stdout == ""


def test_plot_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    out = run("--plot", str(f), "--duration", "0.1")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1

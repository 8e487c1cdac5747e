"""Calibration against a truth the package does not contain (issue 25, item 6): MuJoCo's cell.

The emulated cell (test/mujoco_cell.py: MuJoCo's arm with elastic joints, a delayed PD, MuJoCo's
soft contact on a plate 80 um higher than its nominal pose, an F/T sensor with bias, low-pass and
noise) runs four jobs on the built-in flat plate; each is written as UR's RTDE CSV and goes through
the package as a user's log would: ``grinding import-log`` (raw F/T in ft_sensor), then
``grinding calibrate --replay`` on one run and ``--validate`` on another it was not fitted on:

- position control: the calibration plan of job A (a wrist sweep out of contact, then a 40 mm pass
  at 5 N) is fitted (tool, bias, K, the surface's offset); job B (60 mm at 8 N, faster) is predicted
  along its measured joint states before (the package's defaults, the nominal pose) and after;
- force control (the driver's NormalForceControl closing the loop on MuJoCo's sensor): job A is
  fitted (the arm's lag, with the position fit's K and offset), job B predicted before and after.

Prints the figures (MRE, correlation, lag) and the commands; ``--json`` for a program.
Usage: ``.venv/bin/python bench/bench_independent_cell.py [--out DIR] [--json]`` (about a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from mujoco_cell import MujocoCell, write_rtde_csv

from robot_grinding_sim.cli import main as grinding


def _cli(*args: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = grinding(list(args))
    if code != 0:
        raise SystemExit(f"grinding {' '.join(args)}: exit {code}: {err.getvalue().strip()}")
    text = out.getvalue()
    return json.loads(text) if "--json" in args else {"text": text}


def make_plans(out: Path) -> dict[str, Path]:
    """Plans A and B on the flat plate, and A's calibration plan (the wrist sweep first)."""
    from robot_grinding_sim.core.calibration.calibrate import calibration_plan
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.setup import cell_robot_model
    from robot_grinding_sim.core.planning.plan_io import plan_text

    base = CellConfig().replace(**{"workpiece.part": "flat_plate"})
    a = json.loads(plan_text(plan_job(base, optimise=False, max_passes=1, pass_length=0.04)))
    cell_b = base.replace(**{"process.target_force": 8.0, "process.feed": 0.03})
    b = json.loads(plan_text(plan_job(cell_b, optimise=False, max_passes=1, pass_length=0.06)))
    cal = calibration_plan(a, cell_robot_model(base), hold_time=0.4)
    paths = {"A": out / "plan_a.json", "B": out / "plan_b.json", "A_cal": out / "plan_a_cal.json"}
    for key, data in (("A", a), ("B", b), ("A_cal", cal)):
        paths[key].write_text(json.dumps(data))
    return paths


def emulate(plans: dict[str, Path], out: Path) -> dict[str, Path]:
    """The four MuJoCo runs as RTDE CSVs imported into bags."""
    from robot_grinding_sim.core.planning.plan_io import cell_of, trajectory_from_dict

    cell = cell_of(json.loads(plans["A"].read_text()))
    mc = MujocoCell(cell, cell.workpiece.pose)
    bags = {}
    for name, plan, fc in (("pos_cal", "A_cal", False), ("pos_b", "B", False), ("fc_a", "A", True),
                           ("fc_b", "B", True)):
        data = json.loads(plans[plan].read_text())
        rec = mc.run(trajectory_from_dict(data["trajectory"], mc.model_pkg), force_control=fc, plan_data=data)
        csv_path = out / f"{name}.csv"
        write_rtde_csv(csv_path, rec)
        _cli("import-log", str(csv_path), "--frame", "ft_sensor", "--raw", "--out", str(out / name))
        bags[name] = out / name
    return bags


def calibrate(plans: dict[str, Path], bags: dict[str, Path], out: Path) -> dict[str, Any]:
    pos = _cli("calibrate", str(bags["pos_cal"]), "--replay", "--plan", str(plans["A_cal"]), "--validate",
               str(bags["pos_b"]), "--out", str(out / "cell.yaml"), "--json")
    offset = pos["identified"]["surface_offset_m"]
    # MuJoCo's force controller is tuned unlike the cell's admittance (mujoco_cell.Truth): another cell's
    fc = _cli("calibrate", str(bags["fc_a"]), "--replay", "--force-control", "--fit-controller", "--plan",
              str(plans["A"]), "--params", str(out / "cell.yaml"), "--tool-from-cell", "--surface-offset", repr(offset),
              "--validate", str(bags["fc_b"]),
              "--validate-plan", str(plans["B"]), "--out", str(out / "cell_fc.yaml"), "--json")
    return {"position": pos, "force_control": fc}


def run(out: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    plans = make_plans(out)
    t1 = time.perf_counter()
    bags = emulate(plans, out)
    t2 = time.perf_counter()
    res = calibrate(plans, bags, out)
    res["wall_s"] = {"plans": t1 - t0, "mujoco_and_import": t2 - t1, "calibration": time.perf_counter() - t2}
    return res


def _row(name: str, f: dict[str, float | None]) -> str:
    def num(v: float | None, fmt: str, scale: float = 1.0) -> str:
        return "-" if v is None else format(scale * v, fmt)

    return (f"  {name:<20} MRE {num(f['mre'], '6.2f', 100)} %   r {num(f['correlation'], '.4f')}   lag "
            f"{num(f['lag_s'], '+6.1f', 1e3)} ms   mean predicted/measured {num(f['mean_predicted'], '.3f')} / "
            f"{num(f['mean_measured'], '.3f')} N")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="keep the plans, logs, bags and cell.yaml here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        res = run(out)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    for mode in ("position", "force_control"):
        r = res[mode]
        print(f"{mode.replace('_', ' ')}: identified {json.dumps(r['identified'])}")
        print(_row("fit run, before", r["fit_run"]["before"]))
        print(_row("fit run, after", r["fit_run"]["after"]))
        print(_row("second job, before", r["validation"]["before"]))
        print(_row("second job, after", r["validation"]["after"]))
        for n in r["notes"]:
            print(f"  note: {n}")
    print("wall (s): " + ", ".join(f"{k} {v:.1f}" for k, v in res["wall_s"].items()))


if __name__ == "__main__":
    main()

"""The round trip of issue 25: an in-process job -> its joint states and raw F/T reading written as
UR's RTDE recording writes them (by the csv module, not by the package) -> ``grinding import-log``
-> ``grinding replay`` -> ``grinding compare`` agrees with the job's own force within 1 %."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from robot_grinding_sim.cli import main
from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.job.outputs import ft_readings, write_outputs
from robot_grinding_sim.core.job.run import run_job
from robot_grinding_sim.core.job.setup import JobConfig

#: the F/T sensor's bias in the "measured" cell (the replay removes it from the raw reading)
BIAS = [0.4, -0.3, 0.6, 0.02, -0.01, 0.005]


def _write_rtde_csv(path: Path, t: np.ndarray, q: np.ndarray, qd: np.ndarray, w: np.ndarray) -> None:
    """The columns of UR's RTDE record (space separated, a header), values as repr() writes them."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f, delimiter=" ")
        out.writerow(["timestamp", *(f"actual_q_{i}" for i in range(6)), *(f"actual_qd_{i}" for i in range(6)),
                      *(f"actual_TCP_force_{i}" for i in range(6)), "runtime_state"])
        for k in range(len(t)):
            out.writerow([repr(float(t[k])), *map(repr, q[k].tolist()), *map(repr, qd[k].tolist()),
                          *map(repr, w[k].tolist()), 1])


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("roundtrip")
    cell = CellConfig().replace(**{"ft_sensor.bias": BIAS})
    res = run_job(JobConfig(cell=cell, max_passes=1, pass_length=0.02, optimise=False))
    write_outputs(tmp / "job", res, res.summary())
    rec = res.record
    _, w_ft = ft_readings(res)
    # the joint states at the force samples (the step ends: sim.dt == sim.output_dt)
    idx = rec["step_index"]
    t = rec["t"] + 12.5  # another clock's origin, as RTDE's controller time
    _write_rtde_csv(tmp / "rtde.csv", t, rec["q"][idx], rec["qd"][idx], w_ft)
    return {"tmp": tmp, "result": res}


def _run(args: list[str], capsys: pytest.CaptureFixture) -> str:
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_rtde_csv_imports_replays_and_compares_within_one_percent(job: dict, capsys) -> None:
    tmp = job["tmp"]
    _run(["import-log", str(tmp / "rtde.csv"), "--out", str(tmp / "imported"), "--frame", "ft_sensor", "--raw"],
         capsys)
    _run(["replay", str(tmp / "imported"), "--plan", str(tmp / "job" / "plan.json"), "--out", str(tmp / "replay"),
          "--set", f"ft_sensor.bias={BIAS}"], capsys)
    # the model along the measured path against the measured (raw, compensated by the replay) reading
    meas = json.loads(_run(["compare", str(tmp / "replay"), str(tmp / "replay"), "--topic-real", "/measured/wrench",
                            "--align", "time", "--json"], capsys))
    assert meas["samples"] > 500
    assert meas["mean_relative_error"] < 0.01
    assert abs(meas["lag_s"]) < 2e-3
    # ... and against the job's own contact wrench (its clock 12.5 s earlier)
    job_bag = tmp / "job" / "bag"
    own = json.loads(_run(["compare", str(tmp / "replay"), str(job_bag), "--topic-real", "/contact/wrench",
                           "--align", "xcorr", "--json"], capsys))
    assert own["mean_relative_error"] < 0.01
    assert own["lag_s"] == pytest.approx(-12.5, abs=2e-3)
    assert own["correlation"] > 0.99


def _plan_pose(plan: dict) -> np.ndarray:
    from robot_grinding_sim.core.planning.plan_io import plan_from_dict
    from robot_grinding_sim.core.planning.planner import pose_vector

    return np.array(pose_vector(plan_from_dict(plan).workpiece_pose))


def test_params_on_a_plan_change_what_they_name_not_the_part_pose(job: dict, capsys) -> None:
    """Issue 25 item 7: a cell.yaml (the whole cell, its workpiece.pose the default) given to a plan
    does not move the plan's part; the plan.json written holds one pose; --set workpiece.pose does
    move it (the joint path stays: 0.1 mm higher, the force rises by K * 0.1 mm)."""
    tmp = job["tmp"]
    plan = json.loads((tmp / "job" / "plan.json").read_text())
    nominal = _plan_pose(plan)
    (tmp / "cell.yaml").write_text("/**:\n  ros__parameters:\n    contact.stiffness: 200000.0\n"
                                   "    workpiece.pose: [0.5, 0.1, 0.2, 0.0, 0.0, 0.0]\n")
    _run(["simulate", "--plan", str(tmp / "job" / "plan.json"), "--params", str(tmp / "cell.yaml"), "--out",
          str(tmp / "sim_params"), "--json"], capsys)
    out = json.loads((tmp / "sim_params" / "plan.json").read_text())
    np.testing.assert_allclose(_plan_pose(out), nominal, atol=1e-9)
    np.testing.assert_allclose(out["cell"]["workpiece.pose"], nominal, atol=1e-9)
    assert out["cell"]["contact.stiffness"] == 200000.0
    moved = nominal + [0.0, 0.0, 1e-4, 0.0, 0.0, 0.0]
    _run(["simulate", "--plan", str(tmp / "job" / "plan.json"), "--set",
          f"workpiece.pose={moved.tolist()}", "--out", str(tmp / "sim_moved"), "--json"], capsys)
    out2 = json.loads((tmp / "sim_moved" / "plan.json").read_text())
    np.testing.assert_allclose(_plan_pose(out2), moved, atol=1e-9)
    np.testing.assert_allclose(out2["cell"]["workpiece.pose"], moved, atol=1e-9)
    s0 = json.loads((tmp / "job" / "summary.json").read_text())["passes"][0]["mean_n"]
    s1 = json.loads((tmp / "sim_moved" / "summary.json").read_text())["passes"][0]["mean_n"]
    K = CellConfig().contact.stiffness
    assert s1 - s0 == pytest.approx(K * 1e-4, rel=0.15)  # the arm's compliance in series takes a little


def test_whitespace_log_in_tcp_frame_imports_and_replays(job: dict, capsys) -> None:
    """The other lab's format: no header, a sample counter, the compensated wrench (N, N mm) in the
    tool frame, the joints in degrees, 250 Hz (every 4th sample of the 1 kHz job), written by
    numpy.savetxt; the replay's force (velocities from finite differences) within 1 %."""
    res = job["result"]
    tmp = job["tmp"]
    rec = res.record
    w_tcp, _ = ft_readings(res)
    idx = rec["step_index"]
    k = np.arange(0, len(rec["t"]), 4)
    wrench = w_tcp[k].copy()
    wrench[:, 3:] *= 1e3  # N m -> N mm
    table = np.hstack([k[:, None] // 4 + 1000, wrench, np.degrees(rec["q"][idx][k])])
    np.savetxt(tmp / "lab.txt", table, fmt="%.12g")
    (tmp / "lab.yaml").write_text("columns: sample fx fy fz tx ty tz q0 q1 q2 q3 q4 q5\nrate: 250\nangle_unit: deg\n"
                                  "torque_unit: Nmm\nframe: tcp\ncompensated: true\n")
    _run(["import-log", str(tmp / "lab.txt"), "--format", str(tmp / "lab.yaml"), "--out", str(tmp / "lab_bag")],
         capsys)
    _run(["replay", str(tmp / "lab_bag"), "--plan", str(tmp / "job" / "plan.json"), "--out", str(tmp / "lab_replay")],
         capsys)
    doc = json.loads(_run(["compare", str(tmp / "lab_replay"), str(tmp / "lab_replay"), "--topic-real",
                           "/measured/wrench", "--align", "time", "--json"], capsys))
    assert doc["samples"] > 100
    assert doc["mean_relative_error"] < 0.01
    # a raw import is not a contact force: compare refuses it by name
    _run(["import-log", str(tmp / "lab.txt"), "--format", str(tmp / "lab.yaml"), "--raw", "--frame", "ft_sensor",
          "--out", str(tmp / "lab_raw")], capsys)
    code = main(["compare", str(tmp / "lab_replay"), str(tmp / "lab_raw")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "/measured/wrench" in err

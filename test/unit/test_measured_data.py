"""Measured data from other cells (issue 25): logs written by something other than the package
(numpy.savetxt, the csv module) imported by ``grinding import-log`` and read back with a decoder
that shares no code with the writer (test/cdr_reader.py); the refusals, one line each, nothing
written; the comparison's filter."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from cdr_reader import header_stamp, read_mcap
from cli_runner import run

from robot_grinding_sim.core.record.bag import WrenchSeries
from robot_grinding_sim.core.record.compare import compare_runs
from robot_grinding_sim.core.record.force_filter import ForceFilter
from robot_grinding_sim.core.record.importlog import declared

JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
          "wrist_3_joint"]


def _ok(*args: str) -> str:
    res = run(*args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _refused(*args: str) -> str:
    res = run(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_whitespace_log_with_a_format_yaml(tmp_path: Path) -> None:
    """Another lab's log: a sample counter, the wrench (N, N mm) in the tool frame, six joints in
    degrees, 250 Hz, no header; the columns and units in a small YAML."""
    rng = np.random.default_rng(1)
    n = 300
    q_deg = rng.uniform(-170, 170, size=(n, 6))
    w = rng.normal(size=(n, 6)) * [5, 5, 20, 300, 300, 50]
    np.savetxt(tmp_path / "run.txt", np.hstack([np.arange(100, 100 + n)[:, None], w, q_deg]), fmt="%.10g")
    (tmp_path / "fmt.yaml").write_text(
        "columns: sample fx fy fz tx ty tz q0 q1 q2 q3 q4 q5\nrate: 250\nangle_unit: deg\ntorque_unit: Nmm\n"
        "frame: tool0\ncompensated: true\n")
    _ok("import-log", str(tmp_path / "run.txt"), "--format", str(tmp_path / "fmt.yaml"), "--out",
        str(tmp_path / "bag"))
    msgs = read_mcap(tmp_path / "bag", ["/joint_states", "/ft_sensor/wrench"])
    js, ws = msgs["/joint_states"], msgs["/ft_sensor/wrench"]
    assert len(js) == len(ws) == n
    t = np.array([header_stamp(m) for m in ws])
    np.testing.assert_allclose(t, np.arange(n) / 250.0, atol=1e-9)
    np.testing.assert_allclose([m["position"] for m in js], np.radians(q_deg), rtol=1e-9)
    assert list(js[0]["name"]) == JOINTS and len(js[0]["velocity"]) == 0
    got = np.array([[m["wrench"]["force"][k] for k in "xyz"] + [m["wrench"]["torque"][k] for k in "xyz"] for m in ws])
    np.testing.assert_allclose(got[:, :3], w[:, :3], rtol=1e-9)
    np.testing.assert_allclose(got[:, 3:], w[:, 3:] * 1e-3, rtol=1e-9)
    assert ws[0]["header"]["frame_id"] == "tool0"
    decl = declared(tmp_path / "bag")
    assert decl["compensated"] is True and decl["frame"] == "tool0" and decl["torque_unit"] == "Nmm"


def test_rtde_csv_is_read_by_name(tmp_path: Path) -> None:
    """UR's RTDE recording (space separated, a header, more columns than the import needs)."""
    rng = np.random.default_rng(2)
    n = 50
    t = 3456.0 + 0.002 * np.arange(n)
    q, qd, f = rng.normal(size=(n, 6)), rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    with open(tmp_path / "rtde.csv", "w", newline="") as fh:
        out = csv.writer(fh, delimiter=" ")
        out.writerow(["timestamp", "target_q_0", *(f"actual_q_{i}" for i in range(6)),
                      *(f"actual_qd_{i}" for i in range(6)), *(f"actual_TCP_force_{i}" for i in range(6))])
        for k in range(n):
            out.writerow([repr(float(t[k])), 0.0, *q[k].tolist(), *qd[k].tolist(), *f[k].tolist()])
    text = _ok("import-log", str(tmp_path / "rtde.csv"), "--out", str(tmp_path / "bag"))
    assert "rtde" in text and "frame base, compensated" in text
    msgs = read_mcap(tmp_path / "bag", ["/joint_states", "/ft_sensor/wrench"])
    np.testing.assert_allclose([header_stamp(m) for m in msgs["/joint_states"]], t, atol=1e-9)
    np.testing.assert_allclose([m["velocity"] for m in msgs["/joint_states"]], qd, rtol=1e-12)
    np.testing.assert_allclose([m["position"] for m in msgs["/joint_states"]], q, rtol=1e-12)
    assert msgs["/ft_sensor/wrench"][0]["header"]["frame_id"] == "base"


def test_csv_with_a_header_and_a_time_column_in_ms(tmp_path: Path) -> None:
    rows = [["time", *(f"q{i}" for i in range(6)), "fx", "fy", "fz", "tx", "ty", "tz", "note"]]
    rows += [[str(10 * k), *["0.1"] * 6, "1", "2", "3", "0.1", "0.2", "0.3", "x"] for k in range(20)]
    with open(tmp_path / "log.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    _ok("import-log", str(tmp_path / "log.csv"), "--time-unit", "ms", "--frame", "ft_sensor", "--raw", "--out",
        str(tmp_path / "bag"))
    msgs = read_mcap(tmp_path / "bag", ["/ft_sensor/wrench"])["/ft_sensor/wrench"]
    np.testing.assert_allclose([header_stamp(m) for m in msgs], 0.01 * np.arange(20), atol=1e-9)
    assert declared(tmp_path / "bag")["compensated"] is False


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    data = np.hstack([np.arange(30)[:, None], np.zeros((30, 12))])
    np.savetxt(tmp_path / "plain.txt", data)
    back = data.copy()
    back[10, 0] = 3
    np.savetxt(tmp_path / "back.txt", back)
    with open(tmp_path / "bad.txt", "w") as fh:
        fh.write("\n".join(" ".join(["1"] * 13) for _ in range(3)) + "\n1 2 3 4 5 6 7 8 9 10 11 12 abc\n")
    return tmp_path


COLS = "sample q0 q1 q2 q3 q4 q5 fx fy fz tx ty tz"


@pytest.mark.parametrize(("args", "says"), [
    (["plain.txt", "--frame", "tool0", "--compensated"], "no header line; name the columns"),
    (["plain.txt", "--columns", COLS, "--frame", "tool0", "--compensated"], "no sample rate"),
    (["plain.txt", "--columns", COLS, "--rate", "250", "--compensated"], "frame is not declared"),
    (["plain.txt", "--columns", COLS, "--rate", "250", "--frame", "tool0"], "raw or compensated"),
    (["plain.txt", "--columns", COLS.replace(" q5", " skip"), "--rate", "250", "--frame", "tool0", "--raw"],
     "no column q5"),
    (["plain.txt", "--columns", COLS.replace("q5", "q9"), "--rate", "250", "--frame", "tool0", "--raw"],
     "unknown column name 'q9'"),
    (["back.txt", "--columns", COLS, "--rate", "250", "--frame", "tool0", "--raw"], "line 11: time does not increase"),
    (["bad.txt", "--columns", COLS, "--rate", "250", "--frame", "tool0", "--raw"], "line 4: column 13 (tz) is 'abc'"),
])
def test_refusals_are_one_line_and_write_nothing(logs: Path, args: list[str], says: str) -> None:
    line = _refused("import-log", str(logs / args[0]), *args[1:], "--out", str(logs / "out"))
    assert says in line
    assert not (logs / "out").exists()


@pytest.mark.parametrize("args", [["--fit-controller"], ["--replay", "--fit-controller"]])
def test_fit_controller_without_force_control_is_refused(logs: Path, args: list[str]) -> None:
    """Refused before the bag is read (an empty folder here): the option asks for a force-controlled run."""
    (logs / "bag").mkdir()
    line = _refused("calibrate", str(logs / "bag"), *args, "--out", str(logs / "cell.yaml"))
    assert "--fit-controller goes with" in line and "--force-control" in line
    assert not (logs / "cell.yaml").exists()


# -- the comparison's filter ----------------------------------------------------------------------
def _series(t: np.ndarray, fz: np.ndarray, topic: str) -> WrenchSeries:
    f = np.zeros((len(t), 3))
    f[:, 2] = fz
    return WrenchSeries(t, f, np.zeros((len(t), 3)), "tcp", t, "mem", topic, "geometry_msgs/msg/WrenchStamped")


def test_a_notch_removes_a_belts_vibration_and_the_figures_say_so(tmp_path: Path) -> None:
    from robot_grinding_sim.core.record.reports import write_compare_report

    t = np.arange(0.0, 4.0, 1e-3)
    true = 5.0 + 0.5 * np.sin(2 * math.pi * 0.5 * t) + 0.3 * np.sin(2 * math.pi * 3.0 * t)
    meas = _series(t, true + 2.0 * np.sin(2 * math.pi * 80.0 * t), "/meas")
    sim = _series(t, true, "/sim")
    raw = compare_runs(sim, meas, align="time", component="fz")
    flt = ForceFilter(notch=(80.0,))
    cleaned = compare_runs(sim, meas, align="time", component="fz", force_filter=flt)
    assert raw.overall.mean_relative_error > 0.15
    # what is left: the notch's transient at the ends (zero-phase, so no lag)
    assert cleaned.overall.mean_relative_error < 0.01
    assert abs(cleaned.aligned.lag_s) < 2e-3
    mid = (t > 0.5) & (t < 3.5)
    np.testing.assert_allclose(flt.apply(meas).force[mid, 2], true[mid], atol=0.02)  # zero phase: no shift
    low = compare_runs(sim, meas, align="time", component="fz", force_filter=ForceFilter(lowpass=10.0, decimate=5))
    assert low.overall.mean_relative_error < 0.01
    assert low.overall.samples < len(t) / 4
    assert cleaned.to_json()["filter"].startswith("notch 80 Hz")
    index = write_compare_report(cleaned, tmp_path / "rep")
    assert "notch 80 Hz" in index.read_text()


def test_filter_refusals() -> None:
    from robot_grinding_sim.core.errors import InputError

    t = np.arange(0.0, 1.0, 1e-3)
    s = _series(t, np.ones_like(t), "/x")
    with pytest.raises(InputError, match="Nyquist"):
        ForceFilter(lowpass=600.0).apply(s)
    with pytest.raises(InputError, match="--decimate"):
        ForceFilter(decimate=0).check()

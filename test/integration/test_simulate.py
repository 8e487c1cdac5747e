"""``grinding simulate`` end to end: a subprocess, outputs read back by libraries that did not
write them (the ``mcap`` reader + rosbags CDR decoding), and ``grinding report`` on its bag."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from rosbags.typesys import Stores, get_typestore
from scipy.spatial.transform import Rotation

GRINDING = shutil.which("grinding") or str(Path(sys.executable).with_name("grinding"))


def read_topics(bag: Path) -> dict[str, list]:
    (mcap_file,) = bag.glob("*.mcap")
    store = get_typestore(Stores.ROS2_KILTED)
    out: dict[str, list] = {}
    with open(mcap_file, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            out.setdefault(channel.topic, []).append(store.deserialize_cdr(message.data, schema.name))
    return out


def _ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _tool_below_sensor() -> tuple[float, np.ndarray]:
    """(mass of the links below ft_sensor (URDF, ElementTree), rotation of tcp in ft_sensor (Pinocchio))."""
    import pinocchio as pin

    from robot_grinding_sim.core.resources import default_urdf

    urdf = str(default_urdf())
    root = ET.parse(urdf).getroot()
    children: dict[str, list[str]] = {}
    for j in root.iter("joint"):
        children.setdefault(j.find("parent").get("link"), []).append(j.find("child").get("link"))
    mass, stack = 0.0, list(children.get("ft_sensor", []))
    while stack:
        link = stack.pop()
        stack += children.get(link, [])
        m = root.find(f"link[@name='{link}']/inertial/mass")
        mass += float(m.get("value")) if m is not None else 0.0
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    R_WS = data.oMf[model.getFrameId("ft_sensor")].rotation
    R_WT = data.oMf[model.getFrameId("tcp")].rotation
    return mass, R_WS.T @ R_WT


def test_simulate_flat_plate_writes_bag_plot_summary_and_report_reads_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run([GRINDING, "simulate", "flat_plate", "--max-passes", "2", "--pass-length", "0.01",
                           "--stepover", "0.02", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads(proc.stdout)
    assert s == json.loads((out / "summary.json").read_text())
    assert len(s["passes"]) == 2 and s["all_within_tolerance"]
    for p in s["passes"]:
        assert abs(p["mean_n"] - 5.0) <= 0.25
    assert (out / "force.png").stat().st_size > 10_000

    topics = read_topics(out / "bag")
    counts = {k: len(v) for k, v in topics.items()}
    assert counts == s["bag_counts"]
    steps = s["steps"]
    assert counts["/joint_states"] == counts["/dynamics_node/tool_pose"] == steps
    n_out = int(round(s["simulated_s"] / s["output_period_s"]))
    assert abs(counts["/contact/wrench"] - n_out) <= 1 and counts["/ft_sensor/wrench"] == counts["/contact/wrench"]
    assert counts["/grinding/progress"] > 100
    cw, ft = topics["/contact/wrench"], topics["/ft_sensor/wrench"]
    assert {m.header.frame_id for m in cw} == {"tcp"} and {m.header.frame_id for m in ft} == {"ft_sensor"}
    # the tool points down at a horizontal plate: the contact force is along the tcp's -z
    fz = np.array([m.wrench.force.z for m in cw])
    assert fz.min() < -4.0 and fz.max() <= 1e-9
    # the F/T reading (noise-free sensor model) is the contact force moved to the sensor frame plus
    # the weight of the tool below the sensor: its mass read from the URDF here with ElementTree,
    # the sensor's orientation from the recorded tool pose and the URDF's sensor-to-tcp rotation
    f_cw = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z] for m in cw])
    f_ft = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z] for m in ft])
    mass, R_ST = _tool_below_sensor()
    poses = {_ns(m.header.stamp): m.pose.orientation for m in topics["/dynamics_node/tool_pose"]}
    R_WT = Rotation.from_quat([[o.x, o.y, o.z, o.w] for o in (poses[_ns(m.header.stamp)] for m in cw)]).as_matrix()
    R_WS = R_WT @ R_ST.T
    weight_S = np.einsum("kji,j->ki", R_WS, mass * np.array([0.0, 0.0, -9.81]))
    np.testing.assert_allclose(f_ft, f_cw @ R_ST.T + weight_S, atol=1e-9)
    prog = np.array([list(m.data[:2]) for m in topics["/grinding/progress"]])
    assert set(np.unique(prog[:, 0])) == {-1.0, 0.0, 1.0}

    rep = subprocess.run([GRINDING, "report", str(out / "bag"), "--topic", "/contact/wrench", "--target", "5",
                          "--band", "5%", "--json"], capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    r = json.loads(rep.stdout)
    assert len(r["passes"]) == 2
    for p_rep, p_sim in zip(r["passes"], s["passes"], strict=True):
        assert abs(p_rep["mean"] - p_sim["mean_n"]) < 0.1


def _fails_cleanly(args: list[str], out: Path, needle: str) -> None:
    proc = subprocess.run([GRINDING, "simulate", *args, "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    # one error line, the last; progress lines (stderr is not a terminal here) may precede it
    lines = proc.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("grinding simulate: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and needle in errors[0], proc.stderr
    assert all(ln.startswith("grinding simulate: ") for ln in lines), proc.stderr
    assert not out.exists()
    assert not list(out.parent.glob(f".{out.name}.*"))


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    _fails_cleanly([str(tmp_path / "nope.step")], tmp_path / "a", "nope.step")
    _fails_cleanly(["flat_plate", "--dt", "0.01"], tmp_path / "b", "too long for the servo")
    _fails_cleanly(["flat_plate", "--stiffness", "-5"], tmp_path / "c", "stiffness")
    _fails_cleanly(["flat_plate", "--plan", str(tmp_path / "missing.json")], tmp_path / "d", "missing.json")
    _fails_cleanly(["flat_plate", "--workpiece-pose", "0.7 0 0"], tmp_path / "e", "workpiece-pose")
    # a pose the arm cannot reach: planning error, still nothing written
    _fails_cleanly(["flat_plate", "--workpiece-pose", "3 0 0 0 0 0", "--max-passes", "1"], tmp_path / "f",
                   "unreachable for the arm")


def test_simulate_runs_the_plan_json_of_grinding_plan_as_predicted(tmp_path: Path) -> None:
    """One plan: `grinding plan` optimises and predicts, `grinding simulate --plan` runs exactly that
    trajectory (the plan's part, pose and cell; no re-optimisation) and gets the predicted force."""
    plan = tmp_path / "plan.json"
    proc = subprocess.run([GRINDING, "plan", "flat_plate", "--stepover", "0.05", "--max-passes", "1",
                           "--pass-length", "0.01", "--set", "process.dwell=0.1",
                           "--workpiece-pose", "0.75 0.05 0 0 0 0.3", "--out", str(plan)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(plan.read_text())
    predicted = data["force_target"]["predicted_mean_force_n"]
    out = tmp_path / "sim"
    proc = subprocess.run([GRINDING, "simulate", "--plan", str(plan), "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = json.loads(proc.stdout)
    assert "flat_plate" in s["part"] and len(s["passes"]) == 1 and s["optimisation"] is None
    X = np.array(s["workpiece_pose"])
    assert np.allclose(X[:3, 3], [0.75, 0.05, 0.0], atol=1e-9)  # the plan's pose, not the default
    assert np.isclose(np.arctan2(X[1, 0], X[0, 0]), 0.3, atol=1e-9)
    assert s["cell"]["process.dwell"] == 0.1  # the plan's cell
    assert abs(s["passes"][0]["mean_n"] - predicted[0]) <= 0.005 * predicted[0]
    assert s["passes"][0]["offset_m"] == data["force_target"]["offsets_m"][0]
    assert s["trajectory_duration_s"] == data["trajectory"]["times"][-1]
    ran = json.loads((out / "plan.json").read_text())  # the plan that ran is written with the outputs
    assert ran["trajectory"]["positions"] == data["trajectory"]["positions"]
    # the same plan without the optimisation: the planner's d = F/K gives less than the target
    raw = tmp_path / "raw.json"
    proc = subprocess.run([GRINDING, "plan", "flat_plate", "--stepover", "0.05", "--max-passes", "1",
                           "--pass-length", "0.01", "--no-optimise", "--out", str(raw)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run([GRINDING, "simulate", "--plan", str(raw), "--out", str(tmp_path / "raw"), "--json"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 3.0 < json.loads(proc.stdout)["passes"][0]["mean_n"] < 5.0
    # a plan.json runs as it is: no pass selection on top of it
    _fails_cleanly(["--plan", str(plan), "--max-passes", "1"], tmp_path / "g", "--max-passes")

"""Any tool, mesh parts and several faces through the node graph (issue 24): real node processes,
DDS on loopback, the test's own domain.

- A sanding pad pressed flat into the built-in flat plate: collision_node's contact row carries the
  pad's patch (depth d, stiffness k_w A, A the pad's face read from the URDF here with the standard
  library's XML reader) and contact_solver_node's model and wrench give F = k_w A d, the closed form
  of a Winkler layer flat on a plane.
- ``grinding plan`` with a shipped tool that is not a ball (the flap wheel), a mesh part (an STL
  written here with numpy-stl, not the library that reads it) and two faces of a CAD part with the
  ball, then ``grinding simulate --plan plan.json --graph``: the job runs to ``job done`` through
  the graph and the graph bag's per-pass mean force (read with the ``mcap`` library and
  ``cdr_reader``, along the pass's inward normal in tcp axes computed here from plan.json's
  waypoints) is within 2 % of the in-process run's and within 5 % of the 5 N target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from cdr_reader import header_stamp, pass_window, read_mcap
from geometry_msgs.msg import WrenchStamped
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import JointState, PointCloud2
from std_msgs.msg import Float64MultiArray

from robot_grinding_sim.ros import conversions as cv

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
PAD_URDF = REPO / "urdf" / "ur10e_sanding_pad.urdf"
K_W = 2.0e7  # N/m^3
DEPTH = 1e-4  # m
TARGET = 5.0  # N


def pad_area() -> float:
    """The pad's working face (m^2): the <box> collision ``pad`` of abrasive_head in the URDF."""
    for link in ET.parse(PAD_URDF).getroot().iter("link"):
        if link.get("name") == "abrasive_head":
            for col in link.iter("collision"):
                box = col.find("geometry/box")
                if col.get("name") == "pad" and box is not None:
                    sx, sy, _ = (float(v) for v in box.get("size").split())
                    return sx * sy
    raise AssertionError("no pad box in the URDF")


def test_pad_pressed_flat_on_a_plate_is_k_w_A_d(launch_node, probe) -> None:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.planning.path_ik import solve_ik
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    files = [REPO / "config" / "cell.yaml", REPO / "config" / "tools" / "sanding_pad.yaml"]
    cell = {"robot.description_file": str(PAD_URDF), "workpiece.part": "flat_plate", "contact.stiffness": K_W,
            "contact.force_ratio": 0.0}
    col = launch_node("collision_node", params_file=[*files, REPO / "config" / "collision_node.yaml"], params=cell)
    sol = launch_node("contact_solver_node", params_file=[*files, REPO / "config" / "contact_solver_node.yaml"],
                      params={**cell, "removal_marker_rate": 0.0})
    procs = [col, sol]
    points = probe.subscribe(PointCloud2, "/contact/points")
    models = probe.subscribe(Float64MultiArray, "/contact/model")
    wrench = probe.subscribe(WrenchStamped, "/contact/wrench")
    pub = probe.publisher(JointState, "/joint_states", wait_subscribers=2, procs=procs)

    # the pad face down, flat on the plate (top 10 mm above the part frame), DEPTH into it
    model = RobotModel.from_urdf(PAD_URDF, tip_link="tcp")
    T = np.eye(4)
    T[:3, :3] = np.diag([1.0, -1.0, -1.0])
    T[:3, 3] = np.array(CellConfig().workpiece.pose[:3]) + [0.0, 0.0, 0.010 - DEPTH]
    q = solve_ik(model, T[None], np.array(CellConfig().robot.home), "pad on the plate")[0]
    msg = JointState()
    msg.header.stamp = cv.sec_to_time(2.0)
    msg.name = list(model.joint_names)
    msg.position = [float(x) for x in q]

    rows = cv.pointcloud2_to_array(probe.answer(pub, msg, points, procs))
    A = pad_area()
    assert rows.shape == (1, 8)
    assert rows[0, 6] == pytest.approx(DEPTH, abs=1e-9)  # every point of the face DEPTH deep
    assert rows[0, 7] == pytest.approx(K_W * A, rel=1e-9)  # the patch stiffness k_w A
    np.testing.assert_allclose(rows[0, 3:6], [0.0, 0.0, 1.0], atol=1e-9)
    m_msg = probe.answer(pub, msg, models, procs)
    _, rom = cv.msg_to_contact_model(m_msg)
    assert rom.stiffness == pytest.approx(K_W * A, rel=1e-9) and rom.gap == pytest.approx(-DEPTH, abs=1e-9)
    w = cv.wrench_to_array(probe.answer(pub, msg, wrench, procs))
    f_base = model.fk(q, "tcp")[:3, :3] @ w[:3]
    np.testing.assert_allclose(f_base, [0.0, 0.0, K_W * A * DEPTH], rtol=1e-6, atol=1e-6 * K_W * A * DEPTH)
    assert col.alive and sol.alive


def dome_stl(path: Path) -> None:
    """A closed 160 x 120 mm block, 30 mm thick, whose top rises 12 mm in a dome, in millimetres:
    triangles wound outwards, written with numpy-stl."""
    mesh_stl = pytest.importorskip("stl.mesh")
    n = 41
    xs, ys = np.linspace(-0.08, 0.08, n), np.linspace(-0.06, 0.06, n)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    Z = 0.03 + 0.012 * (1 - (X / 0.08) ** 2) * (1 - (Y / 0.06) ** 2)
    top = np.column_stack([X.ravel(), Y.ravel(), Z.ravel()])
    bottom = top.copy()
    bottom[:, 2] = 0.0
    V = np.vstack([top, bottom])
    idx = np.arange(n * n).reshape(n, n)
    F = []
    for i in range(n - 1):
        for j in range(n - 1):
            a, b, c, d = idx[i, j], idx[i + 1, j], idx[i + 1, j + 1], idx[i, j + 1]
            F += [[a, b, c], [a, c, d], [a + n * n, c + n * n, b + n * n], [a + n * n, d + n * n, c + n * n]]
    rim = [*idx[:, 0], *idx[-1, 1:], *idx[::-1, -1][1:], *idx[0, ::-1][1:-1]]
    for k in range(len(rim)):
        a, b = rim[k], rim[(k + 1) % len(rim)]
        F += [[a, a + n * n, b + n * n], [a, b + n * n, b]]
    m = mesh_stl.Mesh(np.zeros(len(F), dtype=mesh_stl.Mesh.dtype))
    m.vectors[:] = V[np.array(F)] * 1000.0
    m.save(str(path))


def grinding(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRINDING_GRAPH_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"], "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", *args], capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def pass_means(bag: Path, plan: dict) -> dict[int, float]:
    """Each pass's mean of -F . a over its window (the plan's pass placed by /grinding/progress), a
    the pass's inward normal in tcp axes (plan.json's waypoints: R^T (-n), averaged over the pass)."""
    m = read_mcap(bag, ["/contact/wrench", "/grinding/progress"])
    out = {}
    for ps in plan["passes"]:
        R = Rotation.from_quat([w["tcp"]["orientation"] for w in ps["waypoints"]]).as_matrix()
        n = np.array([w["normal"] for w in ps["waypoints"]])
        a = np.einsum("kji,kj->i", R, -n)
        a /= np.linalg.norm(a)
        t0, t1 = pass_window(m, ps["index"], plan)
        f = [-np.dot([w["wrench"]["force"][k] for k in "xyz"], a) for w in m["/contact/wrench"]
             if t0 <= header_stamp(w) <= t1]
        assert len(f) > 100, f"{bag}: {len(f)} wrench samples in pass {ps['index']}"
        out[ps["index"]] = float(np.mean(f))
    return out


@pytest.mark.parametrize("case", ["flap_wheel", "stl_mesh", "two_faces"])
def test_a_plan_runs_through_the_graph_as_in_process(case: str, tmp_path: Path) -> None:
    plan_args = {"flap_wheel": ["curved_panel", "--params", str(REPO / "config" / "tools" / "flap_wheel.yaml")],
                 "stl_mesh": ["dome.stl", "--unit", "mm"],
                 "two_faces": ["cylinder_section", "--face", "5", "--face", "6"]}[case]
    if case == "stl_mesh":
        dome_stl(tmp_path / "dome.stl")
    grinding("plan", *plan_args, "--set", "process.dwell=0.1", "--max-passes", "1", "--pass-length", "0.02",
             "--target-force", str(TARGET), "--out", "plan.json", cwd=tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["tool"]["shape"] == ("wheel" if case == "flap_wheel" else "ball")
    if case == "two_faces":  # the contact is on the tessellated part (several faces), the passes on them
        assert plan["part"]["faces"] == [5, 6]
        assert {w["face"] for ps in plan["passes"] for w in ps["waypoints"]} <= {5, 6}
    grinding("simulate", "--plan", "plan.json", "--graph", "--out", "run", cwd=tmp_path)
    log = (tmp_path / "run" / "graph.log").read_text()
    assert "job done" in log
    inproc, graph = pass_means(tmp_path / "run" / "bag", plan), pass_means(tmp_path / "run" / "graph_bag", plan)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    rows = {r["pass"]: r for r in summary["graph_vs_inprocess"]["passes"]}
    for k in inproc:
        print(f"\n{case} pass {k}: in-process {inproc[k]:.4f} N, graph {graph[k]:.4f} N "
              f"({(graph[k] - inproc[k]) / inproc[k]:+.3%})")
        assert graph[k] == pytest.approx(inproc[k], rel=0.02)
        assert graph[k] == pytest.approx(TARGET, rel=0.05)
        assert rows[k]["inprocess_mean_n"] == pytest.approx(inproc[k], rel=1e-6)
        assert rows[k]["graph_mean_n"] == pytest.approx(graph[k], rel=1e-6)

"""The robot holds the part through the node graph (issue 24 item 3): the UR10e carries the curved
panel past the ball standing in the cell (the shipped config/cells/held_part.yaml), one short pass by ``grinding
simulate --graph``: in process, then through real node processes (bringup sim, DDS on loopback,
the test's own domain), from one parameter file.

Independent references: the graph bag read with the ``mcap`` library and ``cdr_reader`` (not the
package's reader), Pinocchio's kinematics of the same URDF. The graph's mean normal force over the
pass is within 2 % of the in-process run's; the frames are truthful: the part frame hangs from the
holder link at the grasp, the nominal frame (where the contact geometry is written) from the part,
and a contact point collision_node reports, carried through that tf chain and Pinocchio's pose of
the holder at the joint state of its stamp, lies on the standing ball (radius minus depth from its
centre)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from cdr_reader import pass_forces, read_mcap
from held_part_cell import CELL_FILE, GRASP, HELD_URDF, held_cell_values

from robot_grinding_sim.core.planning.planner import pose_matrix

pytestmark = pytest.mark.ros

def _matrix(tf: dict) -> np.ndarray:
    t, r = tf["translation"], tf["rotation"]
    X = np.eye(4)
    X[:3, :3] = pin.Quaternion(r["w"], r["x"], r["y"], r["z"]).toRotationMatrix()
    X[:3, 3] = [t["x"], t["y"], t["z"]]
    return X


def test_the_held_part_runs_a_pass_through_the_graph(tmp_path: Path) -> None:
    urdf, params = HELD_URDF, CELL_FILE  # the shipped cell, as a user passes it
    out = tmp_path / "run"
    env = {**os.environ, "GRINDING_GRAPH_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"], "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", "simulate", "--params", str(params),
                        "--max-passes", "1", "--pass-length", "0.02", "--graph", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "job done" in (out / "graph.log").read_text()

    m = read_mcap(out / "graph_bag", ["/contact/wrench", "/grinding/progress", "/joint_states", "/tf_static",
                                      "/collision_node/markers", "/ft_sensor/wrench"])
    f = pass_forces(m, 0, json.loads((out / "plan.json").read_text()))  # the plan's pass window
    assert len(f) > 100
    graph = float(np.mean(f))
    summary = json.loads((out / "summary.json").read_text())
    inproc = summary["graph_vs_inprocess"]["passes"][0]["inprocess_mean_n"]
    print(f"\nheld part, one pass: in-process {inproc:.4f} N, graph {graph:.4f} N")
    assert inproc > 1.0  # N: the pass grinds
    assert graph == pytest.approx(inproc, rel=0.02)
    assert {w["header"]["frame_id"] for w in m["/contact/wrench"]} == {"tcp"}

    # the part's frames: the part at the grasp in the sensor, the nominal frame in the part
    static = {(tf["header"]["frame_id"], tf["child_frame_id"]): _matrix(tf["transform"])
              for msg in m["/tf_static"] for tf in msg["transforms"]}
    X_hP = static[("ft_sensor", "workpiece")]
    np.testing.assert_allclose(X_hP, pose_matrix(GRASP), atol=1e-12)
    X_PN = static[("workpiece", "workpiece_nominal")]
    np.testing.assert_allclose(np.linalg.inv(X_PN), pose_matrix(summary["cell"]["workpiece.pose"]), atol=1e-12)
    assert not [k for k in static if k[1] == "workpiece" and k[0] != "ft_sensor"]

    # a contact point in the nominal frame, through tf and Pinocchio, is on the standing ball
    radius = json.loads((out / "plan.json").read_text())["tool"]["radius"]
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    states = {(js["header"]["stamp"]["sec"], js["header"]["stamp"]["nanosec"]): js for js in m["/joint_states"]}
    checked = 0
    for msg in m["/collision_node/markers"]:
        for mk in msg["markers"]:
            if mk["ns"] != "contacts" or not mk["points"]:
                continue
            assert mk["header"]["frame_id"] == "workpiece_nominal"
            js = states.get((mk["header"]["stamp"]["sec"], mk["header"]["stamp"]["nanosec"]))
            if js is None:
                continue
            q = np.array([js["position"][js["name"].index(pm.names[k])] for k in range(1, pm.njoints)])
            pin.framesForwardKinematics(pm, data, q)
            X_B_ft = data.oMf[pm.getFrameId("ft_sensor")].homogeneous
            centre = data.oMf[pm.getFrameId("tcp")].translation
            p = mk["points"][0]
            p_B = (X_B_ft @ X_hP @ X_PN @ np.array([p["x"], p["y"], p["z"], 1.0]))[:3]
            # on the part's surface, inside the ball by the depth (0.05 mm at 5 N)
            assert radius - 2e-4 <= np.linalg.norm(p_B - centre) <= radius + 1e-9
            checked += 1
    assert checked >= 3, checked

    # the F/T sensor between the flange and the part reads the part's weight and the opposite of the
    # contact wrench on the tool (at the standing tool centre), in its frame, at each stamp's q
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.setup import held_part_inertia

    mass, c_P, _ = held_part_inertia(CellConfig().replace(**held_cell_values()))
    g = np.array([0.0, 0.0, -9.81])
    contact = {(w["header"]["stamp"]["sec"], w["header"]["stamp"]["nanosec"]): w["wrench"]
               for w in m["/contact/wrench"]}
    S, T = pm.getFrameId("ft_sensor"), pm.getFrameId("tcp")
    readings = m["/ft_sensor/wrench"]
    assert readings and {r["header"]["frame_id"] for r in readings} == {"ft_sensor"}
    compared = loaded = 0
    for r in readings:
        key = (r["header"]["stamp"]["sec"], r["header"]["stamp"]["nanosec"])
        js, w = states.get(key), contact.get(key)
        if js is None or w is None:
            continue
        q = np.array([js["position"][js["name"].index(pm.names[k])] for k in range(1, pm.njoints)])
        pin.framesForwardKinematics(pm, data, q)
        oS, oT = data.oMf[S], data.oMf[T]
        f_tool = np.array([w["force"][a] for a in "xyz"])
        t_tool = np.array([w["torque"][a] for a in "xyz"])
        f_part, t_part = -oT.rotation @ f_tool, -oT.rotation @ t_tool
        c_W = (oS.homogeneous @ X_hP @ np.r_[c_P, 1.0])[:3]
        F_W = mass * g + f_part
        T_W = np.cross(c_W - oS.translation, mass * g) + np.cross(oT.translation - oS.translation, f_part) + t_part
        ref = np.r_[oS.rotation.T @ F_W, oS.rotation.T @ T_W]
        got = np.array([r["wrench"]["force"][a] for a in "xyz"] + [r["wrench"]["torque"][a] for a in "xyz"])
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * max(1.0, np.abs(ref).max()))
        compared += 1
        loaded += bool(np.linalg.norm(f_tool) > 1.0)
    assert compared >= 100 and loaded >= 50, (compared, loaded)

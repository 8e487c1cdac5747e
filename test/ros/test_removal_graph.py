"""The removal map of the node graph is contact_solver_node's own, on the job's grid (issue 26): one
short pass of the curved panel planned for a 5 um depth, run by ``grinding simulate --target-depth
--graph`` in process and then through real node processes (bringup sim with the plan: the node is
given the plan file and builds the in-process job's grid over the passes' region).

Both bags are read with the ``mcap`` library and ``cdr_reader`` (neither the package's bag reader
nor ``rosbags``, the writer): the in-process job's map (its bag's ``/grinding/removal_nodes`` and last
``/grinding/removal_depth``) and the node's (the graph bag's, what the recorder received from
contact_solver_node):

- the node's grid is the job's: the same nodes (positions within 1 nm), faces and layout;
- the node's depths are the in-process job's within 3 % (2-norm over the face's nodes; 0.9 % when
  written), the deepest node and the volume within 2 %: the node samples one state every
  ``removal_interval`` (5 ms) of the graph's run, the job integrates every step of its own;
- summary.json's ``graph_vs_inprocess.removal`` is the node's map (its deepest node) and its
  cross-check, the map replayed from the graph bag's joint states and wrenches, is within 3 % of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cdr_reader import read_mcap

pytestmark = pytest.mark.ros

FIELDS = ("x", "y", "z", "normal_x", "normal_y", "normal_z", "area", "face", "row", "col", "inside")
NODES, DEPTH = "/grinding/removal_nodes", "/grinding/removal_depth"


def removal_map(bag: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """(node rows (N, 11), the last depth message's depths (N,) m, the number of depth messages)."""
    m = read_mcap(bag, [NODES, DEPTH])
    assert m[NODES] and m[DEPTH], f"{bag}: no removal map ({len(m[NODES])} nodes, {len(m[DEPTH])} depth messages)"
    cloud, depth = m[NODES][-1], m[DEPTH][-1]
    assert [f["name"] for f in cloud["fields"]] == list(FIELDS)
    assert all(f["datatype"] == 8 and f["offset"] == 8 * j for j, f in enumerate(cloud["fields"]))  # float64
    n = cloud["width"] * cloud["height"]
    rows = np.frombuffer(bytes(bytearray(cloud["data"])), dtype="<f8").reshape(n, len(FIELDS))
    (dim,) = depth["layout"]["dim"]
    assert dim["label"] == "node" and dim["size"] == n
    return rows, np.asarray(depth["data"], dtype=float), len(m[DEPTH])


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("removal") / "run"
    env = {**os.environ, "GRINDING_GRAPH_DOMAIN_ID": os.environ["ROS_DOMAIN_ID"], "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", "simulate", "--max-passes", "1",
                        "--pass-length", "0.02", "--target-depth", "5e-6", "--graph", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def test_the_graph_removal_map_is_the_nodes_on_the_jobs_grid(job: Path) -> None:
    rows_in, depth_in, _ = removal_map(job / "bag")
    rows_graph, depth_graph, messages = removal_map(job / "graph_bag")
    # the node's grid is the job's: positions, faces, layout, the nodes on the face
    assert rows_graph.shape == rows_in.shape
    np.testing.assert_allclose(rows_graph[:, :3], rows_in[:, :3], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(rows_graph[:, 7:], rows_in[:, 7:])
    np.testing.assert_allclose(rows_graph[:, 6], rows_in[:, 6], rtol=1e-9)
    inside = rows_in[:, 10] > 0.5
    area = rows_in[:, 6]
    deep_in, deep_graph = depth_in[inside].max(), depth_graph[inside].max()
    diff = np.linalg.norm((depth_graph - depth_in)[inside]) / np.linalg.norm(depth_in[inside])
    vol_in, vol_graph = float(depth_in[inside] @ area[inside]), float(depth_graph[inside] @ area[inside])
    print(f"removal: in-process deepest {deep_in * 1e6:.4f} um, volume {vol_in * 1e9:.5f} mm^3; graph (the node's "
          f"map, {messages} depth messages) {deep_graph * 1e6:.4f} um, {vol_graph * 1e9:.5f} mm^3; difference "
          f"{diff:.2%} (2-norm)")
    assert deep_in > 0.3e-6  # a groove was ground
    assert diff <= 0.03
    assert deep_graph == pytest.approx(deep_in, rel=0.02)
    assert vol_graph == pytest.approx(vol_in, rel=0.02)
    # the summary's figures are the node's map; its cross-check (the replay of the graph's bag) agrees
    removal = json.loads((job / "summary.json").read_text())["graph_vs_inprocess"]["removal"]
    assert "contact_solver_node" in removal["how"]
    assert removal["max_depth_m"] == pytest.approx(deep_graph, rel=1e-12)
    assert removal["volume_m3"] == pytest.approx(vol_graph, rel=1e-9)
    print(f"the replay of the graph bag: {removal['replay']['relative_difference']:.2%} from the node's map")
    assert removal["replay"]["relative_difference"] <= 0.03

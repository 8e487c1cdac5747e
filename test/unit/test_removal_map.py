"""The removal map over several faces and as messages (core.contact.preston.join_grids,
core.record.removal_map): what contact_solver_node publishes and the job's bag holds.

- A grid of two faces keeps each face's (u, v) layout as a block: its display mesh is the two
  faces' own display meshes side by side, and each block is the face's own grid.
- Written into a bag (rosbags), the map is read back by the ``mcap`` library and the test's own
  CDR decoder (``cdr_reader``: no code shared with the writer): the nodes' fields, their packing
  and the depths are what the grid holds; and read back by the package into the same grid (layout,
  faces, inside, depth).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cdr_reader import read_mcap

from robot_grinding_sim.core.contact.preston import RemovalGrid, join_grids
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bagwriter import BagWriter
from robot_grinding_sim.core.record.removal_map import (
    DEPTH_TOPIC,
    NODE_FIELDS,
    NODES_TOPIC,
    grid_from_table,
    node_table,
    read_removal_map,
    write_removal_map,
)

SPACING = 2e-4


def face(rows: int, cols: int, origin: tuple[float, float, float], seed: int) -> RemovalGrid:
    """A flat face's grid (rows along y, columns along x) with a random depth and a few nodes off it."""
    g = np.stack(np.meshgrid(np.arange(rows) * SPACING, np.arange(cols) * SPACING, indexing="ij"), -1).reshape(-1, 2)
    pts = np.column_stack([g[:, 1], g[:, 0], np.zeros(len(g))]) + origin
    grid = RemovalGrid(pts, np.full(len(g), SPACING**2), np.tile([0.0, 0.0, 1.0], (len(g), 1)), (rows, cols),
                       preston_coefficient=2e-12)
    rng = np.random.default_rng(seed)
    grid.inside = rng.random(len(g)) > 0.1
    grid.depth[:] = np.where(rng.random(len(g)) > 0.5, rng.random(len(g)) * 1e-6, 0.0)
    return grid


def two_faces() -> tuple[RemovalGrid, RemovalGrid, RemovalGrid]:
    a, b = face(30, 40, (0.0, 0.0, 0.0), 1), face(25, 17, (0.0, 0.1, 0.02), 2)
    joined = join_grids([a, b], [7, 3])
    joined.depth[:] = np.concatenate([a.depth, b.depth])
    return a, b, joined


def test_a_grid_of_two_faces_keeps_each_face_layout() -> None:
    a, b, g = two_faces()
    assert g.shape is None and g.blocks == [(7, 0, 30, 40), (3, 1200, 25, 17)]
    np.testing.assert_array_equal(g.node_face, [7] * 1200 + [3] * 425)
    (fa, da), (fb, db) = g.block_arrays(g.depth)
    assert (fa, fb) == (7, 3)
    np.testing.assert_array_equal(da, a.depth.reshape(30, 40))
    np.testing.assert_array_equal(db, b.depth.reshape(25, 17))
    # the display mesh: each face's own, side by side
    V, T, d = g.display_mesh(6e-4)
    (Va, Ta, da_), (Vb, Tb, db_) = a.display_mesh(6e-4), b.display_mesh(6e-4)
    np.testing.assert_array_equal(V, np.vstack([Va, Vb]))
    np.testing.assert_array_equal(T, np.vstack([Ta, Tb + len(Va)]))
    np.testing.assert_array_equal(d, np.concatenate([da_, db_]))
    assert len(Ta) and len(Tb)
    # one face: the face's grid as it was
    one = join_grids([a], [7])
    assert one.shape == (30, 40) and one.blocks == [(7, 0, 30, 40)]


def test_the_map_in_a_bag_is_read_back_by_a_reader_that_did_not_write_it(tmp_path: Path) -> None:
    _, _, g = two_faces()
    with BagWriter(tmp_path / "bag", storage="mcap") as bag:
        write_removal_map(bag, g, "base_link", 2_500_000_000)
    m = read_mcap(tmp_path / "bag", [NODES_TOPIC, DEPTH_TOPIC])
    (cloud,), (depth,) = m[NODES_TOPIC], m[DEPTH_TOPIC]
    assert cloud["header"]["frame_id"] == "base_link" and cloud["header"]["stamp"] == {"sec": 2, "nanosec": 5e8}
    assert [(f["name"], f["offset"], f["datatype"], f["count"]) for f in cloud["fields"]] == [
        (n, 8 * j, 8, 1) for j, n in enumerate(NODE_FIELDS)]  # 8: PointField.FLOAT64
    assert (cloud["height"], cloud["width"], cloud["point_step"]) == (1, 1625, 88) and not cloud["is_bigendian"]
    rows = np.frombuffer(bytes(bytearray(cloud["data"])), dtype="<f8").reshape(1625, len(NODE_FIELDS))
    np.testing.assert_array_equal(rows[:, :3], g.points)
    np.testing.assert_array_equal(rows[:, 6], g.areas)
    np.testing.assert_array_equal(rows[:, 7], g.node_face)
    k = np.arange(1200)
    np.testing.assert_array_equal(rows[:1200, 8], k // 40)
    np.testing.assert_array_equal(rows[:1200, 9], k % 40)
    np.testing.assert_array_equal(rows[:, 10], g.inside)
    assert [(d["label"], d["size"], d["stride"]) for d in depth["layout"]["dim"]] == [("node", 1625, 1625)]
    np.testing.assert_array_equal(depth["data"], g.depth)
    # the package's reader: the same grid
    back, t_ns = read_removal_map(tmp_path / "bag", 2e-12)
    assert t_ns == 2_500_000_000 and back.blocks == g.blocks and back.shape is None
    for name in ("points", "areas", "normals", "inside", "depth", "node_face"):
        np.testing.assert_array_equal(getattr(back, name), getattr(g, name))


def test_node_rows_that_are_not_a_layout_are_refused() -> None:
    _, _, g = two_faces()
    rows = node_table(g)
    rows[5, 9] += 1.0  # a column index out of row-major order
    with pytest.raises(InputError, match="face 7 .* not a row-major"):
        grid_from_table(rows)
    with pytest.raises(InputError, match="1624 depths for 1625 nodes"):
        grid_from_table(node_table(g), np.zeros(1624))
    # a grid without a layout: no blocks, read back as such
    flat = RemovalGrid(g.points, g.areas)
    back = grid_from_table(node_table(flat))
    assert back.blocks == [] and back.shape is None and back.node_face is None


def test_a_two_face_map_is_written_per_face_and_drawn_per_face(tmp_path: Path) -> None:
    """plan.json's predicted map and removal.png of a grid over two faces: each face's (u, v) block
    (its shape, corners, depths row-major: the face's own grid), and one image per face beside the
    cross-section (the png three panels wide; it drew the nodes as points in one panel)."""
    import struct
    from types import SimpleNamespace

    from robot_grinding_sim.core.job.removal import map_entry, middle_cross_section, plot_removal

    a, b, g = two_faces()
    m = map_entry(g)
    assert [f["face"] for f in m["faces"]] == [7, 3] and "shape" not in m
    for entry, grid in zip(m["faces"], (a, b), strict=True):
        rows, cols = grid.shape
        P = grid.points.reshape(rows, cols, 3)
        assert entry["shape"] == [rows, cols]
        np.testing.assert_array_equal(entry["corners_m"], [P[0, 0], P[0, -1], P[-1, 0]])
        np.testing.assert_allclose(entry["depth_um"], np.where(grid.inside, grid.depth, 0.0) * 1e6, atol=5e-4)
    one = map_entry(join_grids([a], [7]))
    assert one["shape"] == [30, 40] and one["depth_um"] == one["faces"][0]["depth_um"]
    # removal.png: a stand-in job (the middle pass along x over face 7) for the cross-section
    xs = np.linspace(0.0, 0.006, 7)
    line = SimpleNamespace(index=0, row=0, points=np.column_stack([xs, np.full(7, 0.003), np.zeros(7)]), arc=xs,
                           normals=np.tile([0.0, 0.0, 1.0], (7, 1)))
    setup = SimpleNamespace(plan=SimpleNamespace(passes=[line]), X_BP=np.eye(4))
    # the profile is across the pass at its middle waypoint's surface point: the nodes at x = 3 mm
    _, point, (offset, depth) = middle_cross_section(g, setup)
    np.testing.assert_array_equal(point, [0.003, 0.003, 0.0])
    column = g.inside & (np.abs(g.points[:, 0] - 0.003) <= 0.5 * SPACING)  # on both faces
    np.testing.assert_allclose(np.sort(offset), np.sort(g.points[column, 1] - 0.003), atol=1e-12)
    assert len(offset) == column.sum() > 20
    widths = {}
    for name, grid in (("two", g), ("one", join_grids([a], [7]))):
        # against a target depth: each face's region outlined, its nodes out of the band marked
        region = grid.inside & (grid.depth > 0)
        figures = {"target_depth_m": 5e-7, "band": 0.1, "region_nodes": int(region.sum()), "in_region": region,
                   "out_of_band": region & (np.abs(grid.depth - 5e-7) > 5e-8), "within_band": 0.5,
                   "end_of_pass_ratio": 1.0}
        if name == "two":  # per face target depths: each face drawn against its own
            figures["faces"] = {"7": {"target_depth_m": 5e-7, "within_band": 0.5, "region_nodes": 10},
                                "3": {"target_depth_m": 8e-7, "within_band": 0.4, "region_nodes": 10}}
        plot_removal(tmp_path / f"{name}.png", grid, setup, figures)
        head = (tmp_path / f"{name}.png").read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        widths[name] = struct.unpack(">I", head[16:20])[0]  # the IHDR's width, px
    assert widths["two"] == pytest.approx(1.5 * widths["one"], rel=0.02)  # 3 panels of 6 in, against 2

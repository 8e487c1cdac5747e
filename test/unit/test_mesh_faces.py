"""Mesh parts (issue 24 item 6): an STL/OBJ part is split into faces (regions of smooth normal, sharp
edges between them) that ``--list-faces`` lists and ``--face`` selects, and passes are planned on
the mesh with the coverage figures of CAD faces.

The meshes are made here with numpy and written by numpy-stl (STL) and as OBJ text: not by the
library that reads them (trimesh). Coverage is measured independently on the analytic surfaces
the meshes approximate (an upright cylinder, a dome), sampled densely; the planner's mesh plays no
part in it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.planning import planner
from robot_grinding_sim.core.planning.passes import PassParameters

mesh_stl = pytest.importorskip("stl.mesh")

STEP, SPACING, MARGIN = 0.005, 0.002, 0.005
R, H, SIDES = 0.05, 0.08, 96


def cylinder_triangles() -> np.ndarray:
    """(T, 3, 3) m: a closed upright prism of SIDES sides round a cylinder r R, height H, on z = 0,
    triangles wound outwards."""
    a = np.linspace(0.0, 2 * math.pi, SIDES + 1)
    ring = np.column_stack([R * np.cos(a), R * np.sin(a)])
    tris = []
    for k in range(SIDES):
        p0, p1 = ring[k], ring[k + 1]
        b0, b1, t0, t1 = [*p0, 0.0], [*p1, 0.0], [*p0, H], [*p1, H]
        tris += [[b0, b1, t1], [b0, t1, t0]]
        tris += [[[0.0, 0.0, H], t0, t1], [[0.0, 0.0, 0.0], b1, b0]]
    return np.array(tris, dtype=float)


def write_stl(path: Path, tris: np.ndarray, scale: float = 1.0) -> None:
    m = mesh_stl.Mesh(np.zeros(len(tris), dtype=mesh_stl.Mesh.dtype))
    m.vectors[:] = tris * scale
    m.save(str(path))


def dome_height(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The dome's top, m: 30 mm thick block with a 12 mm rise over 160 x 120 mm."""
    return 0.03 + 0.012 * (1 - (x / 0.08) ** 2) * (1 - (y / 0.06) ** 2)


def write_dome_obj(path: Path, n: int = 41) -> None:
    """A closed block 160 x 120 mm whose top is the dome (an n x n grid), as OBJ text (1-based)."""
    xs, ys = np.linspace(-0.08, 0.08, n), np.linspace(-0.06, 0.06, n)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    top = np.column_stack([X.ravel(), Y.ravel(), dome_height(X, Y).ravel()])
    bottom = top.copy()
    bottom[:, 2] = 0.0
    V = np.vstack([top, bottom])
    idx = np.arange(n * n).reshape(n, n)
    F = []
    for i in range(n - 1):
        for j in range(n - 1):
            a, b, c, d = idx[i, j], idx[i + 1, j], idx[i + 1, j + 1], idx[i, j + 1]
            F += [[a, b, c], [a, c, d]]  # top, outwards (+z)
            F += [[a + n * n, c + n * n, b + n * n], [a + n * n, d + n * n, c + n * n]]  # bottom, -z
    border = [*idx[:, 0], *idx[-1, 1:], *idx[::-1, -1][1:], *idx[0, ::-1][1:-1]]  # around the rim
    for k in range(len(border)):
        a, b = border[k], border[(k + 1) % len(border)]
        F += [[a, a + n * n, b + n * n], [a, b + n * n, b]]
    lines = [f"v {x:.9f} {y:.9f} {z:.9f}" for x, y, z in V] + [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in F]
    path.write_text("\n".join(lines) + "\n")


def _coverage(points: np.ndarray, normals: np.ndarray, w: np.ndarray, keep: np.ndarray,
              polylines: list[np.ndarray]) -> float:
    from scipy.spatial import cKDTree

    dense = []
    for p in polylines:
        seg = np.linalg.norm(np.diff(p, axis=0), axis=1)
        s = np.r_[0.0, np.cumsum(seg)]
        t = np.linspace(0.0, s[-1], max(2, int(s[-1] / (STEP / 20)) + 2))
        dense.append(np.column_stack([np.interp(t, s, p[:, k]) for k in range(3)]))
    d = cKDTree(np.vstack(dense)).query(points[keep])[0]
    return float(w[keep][d <= 0.6 * STEP].sum() / w[keep].sum())


def test_an_stl_cylinder_is_split_into_its_side_and_caps_and_the_side_is_covered(tmp_path: Path) -> None:
    write_stl(tmp_path / "cyl.stl", cylinder_triangles(), scale=1000.0)  # millimetres
    out = run("plan", "cyl.stl", "--unit", "mm", "--list-faces", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    faces = json.loads(out.stdout)
    assert len(faces) == 3  # the side (smooth: 3.75 deg between facets) and two caps (90 deg edges)
    areas = sorted(f["area"] for f in faces)
    side_area = SIDES * 2 * R * math.sin(math.pi / SIDES) * H
    cap_area = 0.5 * SIDES * R * R * math.sin(2 * math.pi / SIDES)
    np.testing.assert_allclose(areas, [cap_area, cap_area, side_area], rtol=1e-6)
    side = next(f["index"] for f in faces if abs(f["area"] - side_area) < 1e-9)
    part = parts.load_part(str(tmp_path / "cyl.stl"), "mm")
    res = planner.plan(part, [side], PassParameters(stepover=STEP, spacing=SPACING, margin=MARGIN), robot=None)
    # the planner's own figure and an independent one: the true cylinder's half towards the robot
    # (the part frame's -x at the default pose), farther than the margin from the rims
    assert res.coverage.coverage >= 0.98
    a, z = np.meshgrid(np.linspace(0, 2 * math.pi, 720, endpoint=False), np.linspace(0, H, 160), indexing="ij")
    pts = np.column_stack([R * np.cos(a).ravel(), R * np.sin(a).ravel(), z.ravel()])
    nrm = np.column_stack([np.cos(a).ravel(), np.sin(a).ravel(), np.zeros(a.size)])
    keep = (nrm[:, 0] <= 0.0) & (pts[:, 2] > MARGIN) & (pts[:, 2] < H - MARGIN)
    cov = _coverage(pts, nrm, np.ones(len(pts)), keep, [p.points for p in res.passes])
    print(f"STL cylinder side: planner {res.coverage.coverage:.4f}, independent {cov:.4f}")
    assert cov >= 0.98, f"independent coverage {cov:.4f}"
    assert res.coverage.coverage == pytest.approx(cov, abs=0.015)
    wp = np.vstack([p.points for p in res.passes])
    assert np.hypot(wp[:, 0], wp[:, 1]).max() <= R + 1e-9  # on the facets (inside the circumscribed circle)
    assert np.hypot(wp[:, 0], wp[:, 1]).min() >= R * math.cos(math.pi / SIDES) - 1e-9
    assert wp[:, 2].min() >= MARGIN - 1e-4 and wp[:, 2].max() <= H - MARGIN + 1e-4


def test_an_obj_dome_plans_on_its_top_by_default_with_coverage(tmp_path: Path) -> None:
    write_dome_obj(tmp_path / "dome.obj")
    out = run("plan", "dome.obj", "--unit", "m", "--robot", "none", "--stepover", str(STEP), "--spacing",
              str(SPACING), "--margin", str(MARGIN), "--out", "plan.json", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    data = json.loads((tmp_path / "plan.json").read_text())
    assert summary["coverage"]["coverage"] >= 0.98
    pts = [np.array([w["surface_point"] for w in p["waypoints"]]) for p in data["passes"]]
    allp = np.vstack(pts)
    # on the dome (the mesh's chords sag below the analytic top by < 0.1 mm on a 4 mm grid)
    assert np.abs(allp[:, 2] - dome_height(allp[:, 0], allp[:, 1])).max() < 1e-4
    xs, ys = np.meshgrid(np.linspace(-0.08, 0.08, 321), np.linspace(-0.06, 0.06, 241), indexing="ij")
    P = np.column_stack([xs.ravel(), ys.ravel(), dome_height(xs, ys).ravel()])
    keep = (np.abs(P[:, 0]) < 0.08 - MARGIN) & (np.abs(P[:, 1]) < 0.06 - MARGIN)
    cov = _coverage(P, np.zeros_like(P), np.ones(len(P)), keep, pts)
    print(f"OBJ dome: planner {summary['coverage']['coverage']:.4f}, independent {cov:.4f}")
    assert cov >= 0.98, f"independent coverage {cov:.4f}"


def test_a_mesh_face_index_out_of_range_is_one_error(tmp_path: Path) -> None:
    write_stl(tmp_path / "cyl.stl", cylinder_triangles())
    with pytest.raises(InputError, match=r"face index 7 out of range 0\.\.2"):
        planner.plan(parts.load_part(str(tmp_path / "cyl.stl"), "m"), [7], robot=None)


def test_slivers_are_cut_along_their_length_into_a_closed_mesh_of_the_same_area() -> None:
    """An STL tube as CAD exporters write cylinders: 512 strips 1.2 mm wide and 200 mm long. Cut at
    h = 2 mm: every piece at most h long along the strip (no halving of the short edges: a linear count),
    the area kept, the mesh still closed and consistently wound (trimesh, which did not cut it)."""
    import trimesh

    from robot_grinding_sim.core.planning.surface_mesh import split_slivers

    sides, length, h = 512, 0.2, 0.002
    a = np.linspace(0.0, 2 * math.pi, sides + 1)
    ring = np.column_stack([0.1 * np.cos(a), 0.1 * np.sin(a)])
    tris = []
    for k in range(sides):
        (y0, z0), (y1, z1) = ring[k], ring[k + 1]
        b0, b1, t0, t1 = [-0.1, y0, z0], [-0.1, y1, z1], [0.1, y0, z0], [0.1, y1, z1]
        tris += [[b0, b1, t1], [b0, t1, t0], [[0.1, 0.0, 0.0], t0, t1], [[-0.1, 0.0, 0.0], b1, b0]]
    src_mesh = trimesh.Trimesh(np.array(tris).reshape(-1, 3), np.arange(3 * len(tris)).reshape(-1, 3), process=True)
    assert src_mesh.is_watertight and src_mesh.is_winding_consistent
    V, F, src = split_slivers(np.asarray(src_mesh.vertices), np.asarray(src_mesh.faces), h)
    cut = trimesh.Trimesh(V, F, process=True)
    assert cut.is_watertight and cut.is_winding_consistent
    assert cut.area == pytest.approx(src_mesh.area, rel=1e-12)
    assert cut.volume == pytest.approx(src_mesh.volume, rel=1e-12)
    strips = np.flatnonzero(np.ptp(np.asarray(src_mesh.triangles)[:, :, 0], axis=1) > 0.1)  # along x
    assert len(strips) == 2 * sides
    pieces = np.isin(src, strips)
    # each strip's 2 triangles become ceil(200 / 2) pieces on each long edge: 2 x 100 + 2 triangles' worth
    assert pieces.sum() <= 2 * sides * (2 * math.ceil(length / h) + 2)
    along = np.ptp(V[F[pieces]][:, :, 0], axis=1)
    assert along.max() <= h * (1 + 1e-9)
    # every piece lies in its source strip's plane (the points stay on the part's triangles)
    n = np.asarray(src_mesh.face_normals)[src[pieces]]
    off = np.einsum("kj,kij->ki", n, V[F[pieces]] - np.asarray(src_mesh.triangles)[src[pieces]][:, :1, :])
    assert np.abs(off).max() < 1e-12

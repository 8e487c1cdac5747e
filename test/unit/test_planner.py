"""Pass generation and plans, checked against analytic geometry and OpenCascade's own algorithms.

Independent checks: OpenCascade's point projection (GeomAPI_ProjectPointOnSurf), face classifier
(BRepClass_FaceClassifier) and shape distance (BRepExtrema_DistShapeShape); analytic planes,
cylinders and spheres.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from robot_grinding_sim.core.errors import InputError, PlanningError
from robot_grinding_sim.core.geometry import cad, cad_face, occ_adapter, parts, shapes
from robot_grinding_sim.core.planning import plan_io, planner
from robot_grinding_sim.core.planning.passes import PassParameters, generate_passes, polyline_distance

RNG = np.random.default_rng(11)


def _deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), np.sum(a * b, axis=1)))


def _all(passes, attr: str) -> np.ndarray:
    return np.vstack([getattr(p, attr) for p in passes])


def _occ_distance_to_edges(face: cad_face.CadFace, points: np.ndarray) -> np.ndarray:
    """OpenCascade's exact distance from points to the edges of ``face`` (BRepExtrema)."""
    builder = occ_adapter.occ("BRep").BRep_Builder()
    comp = occ_adapter.occ("TopoDS").TopoDS_Compound()
    builder.MakeCompound(comp)
    for e in face.edges():
        builder.Add(comp, e)
    out = []
    for p in points:
        v = occ_adapter.occ("BRepBuilderAPI").BRepBuilderAPI_MakeVertex(occ_adapter.occ("gp").gp_Pnt(*p)).Vertex()
        d = occ_adapter.occ("BRepExtrema").BRepExtrema_DistShapeShape(v, comp)
        assert d.IsDone()
        out.append(d.Value())
    return np.array(out)


def _sample(n_total: int, k: int) -> np.ndarray:
    return np.unique(np.linspace(0, n_total - 1, min(k, n_total)).astype(int))


def _row_gaps(passes) -> np.ndarray:
    """Distance from every waypoint to the next row's pass curve (interior nearest points only)."""
    rows: dict[int, list] = {}
    for p in passes:
        rows.setdefault(p.row, []).append(p)
    gaps = []
    for r in sorted(rows)[:-1]:
        A = np.vstack([p.points for p in rows[r]])
        for q in rows[r + 1]:
            d, interior = polyline_distance(A, q.points)
            gaps.append(d[interior])
    return np.concatenate(gaps)


@pytest.fixture(scope="module")
def panel() -> cad.CadPart:
    return parts.load_part("curved_panel")


@pytest.fixture(scope="module")
def sphere_cap() -> tuple[cad.CadPart, int]:
    c, R = np.zeros(3), 0.1
    shape = shapes.cut(shapes.make_sphere(R, c), shapes.make_box((0.4, 0.4, 0.4), (-0.2, -0.2, 0.06 - 0.4)))
    part = cad.CadPart(shape, source="sphere_cap")
    (idx,) = [f.index for f in part.faces if f.type == "sphere"]
    return part, idx


# -------------------------------------------------------------------------------- surface -----
@pytest.mark.parametrize("name,generator", [
    ("curved_panel", "raster"), ("curved_panel", "iso"), ("cylinder_section", "raster"),
    ("cylinder_section", "iso"), ("flat_plate", "raster"), ("plate_with_hole", "raster"),
])
def test_waypoints_lie_on_the_cad_surface(name: str, generator: str) -> None:
    part = parts.load_part(name)
    face_idx = planner.default_face(part)
    passes = generate_passes(part, [face_idx], PassParameters(stepover=0.004, spacing=0.003, margin=0.004,
                                                              generator=generator))
    pts, nrm = _all(passes, "points"), _all(passes, "normals")
    pick = _sample(len(pts), 150)
    _, proj, dist = part.face(face_idx).project(pts[pick])
    assert np.nanmax(dist) < 1e-6, f"{name}: waypoint off the surface by {np.nanmax(dist)} m"
    # the normal is the surface normal at the projected point, pointing out of the material
    for k, i in enumerate(pick[:40]):
        uv, _, _ = part.face(face_idx).project(proj[k : k + 1])
        _, n_occ = part.face(face_idx).occ_point_normal(*uv[0])
        assert _deg(nrm[i], n_occ)[0] < 0.01
    assert np.all(nrm[:, 2] > 0), "outward normals of the top face point up"


def test_plane_cylinder_sphere_exact(sphere_cap) -> None:
    plate = parts.load_part("flat_plate")
    passes = generate_passes(plate, [planner.default_face(plate)], PassParameters(stepover=0.01, spacing=0.005))
    pts, nrm = _all(passes, "points"), _all(passes, "normals")
    np.testing.assert_allclose(pts[:, 2], 0.01, atol=1e-9)
    assert _deg(nrm, np.array([[0, 0, 1.0]])).max() < 0.01

    cyl = parts.load_part("cylinder_section")
    for gen in ("raster", "iso"):
        passes = generate_passes(cyl, [0], PassParameters(stepover=0.006, spacing=0.004, generator=gen))
        pts, nrm = _all(passes, "points"), _all(passes, "normals")
        radial = pts * [0.0, 1.0, 1.0]
        r = np.linalg.norm(radial, axis=1)
        np.testing.assert_allclose(r, 0.1, atol=1e-6)
        assert _deg(nrm, radial / r[:, None]).max() < 0.01

    part, idx = sphere_cap
    passes = generate_passes(part, [idx], PassParameters(stepover=0.004, spacing=0.003, margin=0.003))
    pts, nrm = _all(passes, "points"), _all(passes, "normals")
    r = np.linalg.norm(pts, axis=1)
    np.testing.assert_allclose(r, 0.1, atol=1e-6)
    assert _deg(nrm, pts / r[:, None]).max() < 0.01
    assert pts[:, 2].min() > 0.06


# -------------------------------------------------------------------------------- spacing -----
@pytest.mark.parametrize("name,generator", [
    ("flat_plate", "raster"), ("cylinder_section", "raster"), ("cylinder_section", "iso"),
    ("curved_panel", "raster"), ("curved_panel", "iso"), ("plate_with_hole", "raster"),
])
def test_adjacent_passes_one_stepover_apart(name: str, generator: str) -> None:
    part = parts.load_part(name)
    s = 0.005
    passes = generate_passes(part, [planner.default_face(part)],
                             PassParameters(stepover=s, spacing=0.002, margin=0.004, generator=generator))
    gaps = _row_gaps(passes)
    assert len(gaps) > 100
    # chord versus arc on a 100 mm radius at 5 mm: 1e-4 relative; the rest is the surface metric
    assert np.all(np.abs(gaps / s - 1.0) < 0.01), (gaps.min(), gaps.max())
    assert abs(gaps.mean() / s - 1.0) < 1e-3


def test_iso_passes_along_v_on_the_cylinder() -> None:
    part = parts.load_part("cylinder_section")
    passes = generate_passes(part, [0], PassParameters(stepover=0.005, spacing=0.002, margin=0.004,
                                                       generator="iso", iso_direction="v"))
    pts = _all(passes, "points")
    # along v (the axis, x here) on the cylinder: straight lines at constant angle
    for p in passes:
        assert np.ptp(p.points[:, 1]) < 1e-9 and np.ptp(p.points[:, 2]) < 1e-9
    gaps = _row_gaps(passes)
    assert np.all(np.abs(gaps / 0.005 - 1.0) < 0.01)
    assert np.abs(pts[:, 0]).max() <= 0.1 - 0.004 + 1e-9


def test_sphere_stepover_mean(sphere_cap) -> None:
    part, idx = sphere_cap
    passes = generate_passes(part, [idx], PassParameters(stepover=0.004, spacing=0.002, margin=0.003))
    gaps = _row_gaps(passes)
    assert abs(gaps.mean() / 0.004 - 1.0) < 0.01


@pytest.mark.parametrize("generator", ["raster", "iso"])
def test_waypoint_spacing_by_arc_length(panel, generator: str) -> None:
    passes = generate_passes(panel, [4], PassParameters(stepover=0.01, spacing=0.002, generator=generator))
    for p in passes:
        steps = np.linalg.norm(np.diff(p.points, axis=0), axis=1)
        # one end step (the end of the pass at the margin; the start of a reversed pass) may be shorter
        short = 0 if steps[0] < steps[-1] else len(steps) - 1
        np.testing.assert_allclose(np.delete(steps, short), 0.002, rtol=1e-3)
        assert steps[short] <= 0.002 * (1 + 1e-3)
        np.testing.assert_allclose(p.arc, np.r_[0, np.cumsum(steps)], atol=1e-12)
        travel = np.diff(p.points, axis=0)
        assert np.all(np.sum(travel * p.tangents[:-1], axis=1) > 0), "tangents point along the travel"
        assert np.abs(np.sum(p.tangents * p.normals, axis=1)).max() < 1e-9


# -------------------------------------------------------------------------- margin / holes -----
def test_margin_against_opencascade_distance(panel) -> None:
    m = 0.006
    passes = generate_passes(panel, [4], PassParameters(stepover=0.005, spacing=0.002, margin=m))
    pts = _all(passes, "points")
    face = panel.face(4)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    near = (pts[:, 0] < lo[0] + 0.002) | (pts[:, 0] > hi[0] - 0.002) | (pts[:, 1] < lo[1] + 0.002) | (
        pts[:, 1] > hi[1] - 0.002)
    d = _occ_distance_to_edges(face, pts[near][_sample(int(near.sum()), 120)])
    assert d.min() >= m - 1e-9
    assert d.min() < m + 0.002, "the passes reach the margin (to within one dense step)"


def test_no_waypoint_over_the_hole_or_in_its_margin() -> None:
    part = parts.load_part("plate_with_hole")
    face_idx = planner.default_face(part)
    m = 0.004
    passes = generate_passes(part, [face_idx], PassParameters(stepover=0.003, spacing=0.002, margin=m))
    pts = _all(passes, "points")
    r = np.hypot(pts[:, 0], pts[:, 1])
    assert r.min() >= 0.02 + m - 1e-9
    assert r.min() < 0.02 + m + 0.003
    assert np.abs(pts[:, 0]).max() <= 0.1 - m + 1e-9 and np.abs(pts[:, 1]).max() <= 0.075 - m + 1e-9
    uv = _all(passes, "uv")
    face = part.face(face_idx)
    assert all(face.occ_classify(tuple(x)) == "in" for x in uv[_sample(len(uv), 200)])
    rows_split = {p.row for p in passes if p.segment == 1}
    assert rows_split, "rows crossing the hole are split into two segments"


# ------------------------------------------------------------------------ order / angle --------
def test_zigzag_oneway_reverse_and_angle() -> None:
    plate = parts.load_part("flat_plate")
    f = planner.default_face(plate)
    zig = generate_passes(plate, [f], PassParameters(stepover=0.01, spacing=0.005))
    for a, b in zip(zig[:-1], zig[1:], strict=True):
        assert np.dot(a.tangents[0], b.tangents[0]) < -0.99
        assert np.linalg.norm(a.points[-1] - b.points[0]) < 0.0101
    one = generate_passes(plate, [f], PassParameters(stepover=0.01, spacing=0.005, order="oneway"))
    assert all(np.dot(p.tangents[0], [1, 0, 0]) > 0.99 for p in one)
    rev = generate_passes(plate, [f], PassParameters(stepover=0.01, spacing=0.005, order="oneway", reverse=True))
    assert all(np.dot(p.tangents[0], [-1, 0, 0]) > 0.99 for p in rev)
    turned = generate_passes(plate, [f], PassParameters(stepover=0.01, spacing=0.005, angle=math.pi / 2))
    assert all(abs(np.dot(p.tangents[0], [0, 1, 0])) > 0.99 for p in turned)
    angled = generate_passes(plate, [f], PassParameters(stepover=0.01, spacing=0.005, angle=math.radians(30)))
    d = np.array([math.cos(math.radians(30)), math.sin(math.radians(30)), 0.0])
    assert all(abs(np.dot(p.tangents[0], d)) > 0.999 for p in angled)


# ----------------------------------------------------------------------------- face sets -------
def _roof() -> cad.CadPart:
    """Two inclined planes sharing a ridge along y (a prism of a pentagon), 200 x 150 mm."""
    gp = occ_adapter.occ("gp")
    poly = occ_adapter.occ("BRepBuilderAPI").BRepBuilderAPI_MakePolygon()
    for x, z in [(-0.1, 0.0), (0.1, 0.0), (0.1, 0.01), (0.0, 0.03), (-0.1, 0.01)]:
        poly.Add(gp.gp_Pnt(x, 0.0, z))
    poly.Close()
    face = occ_adapter.occ("BRepBuilderAPI").BRepBuilderAPI_MakeFace(poly.Wire()).Face()
    return cad.CadPart(shapes.make_prism(face, (0.0, 0.15, 0.0)), source="roof")


def test_raster_across_adjacent_faces() -> None:
    roof = _roof()
    def centre_normal(f: cad_face.CadFace) -> np.ndarray:
        u0, u1, v0, v1 = f.uv_bounds
        return f.evaluate(0.5 * (u0 + u1), 0.5 * (v0 + v1))[1][0]

    up = [f.index for f in roof.faces if centre_normal(f)[2] > 0.05 and abs(centre_normal(f)[0]) > 0.05]
    assert len(up) == 2
    m = 0.004
    passes = generate_passes(roof, up, PassParameters(stepover=0.01, spacing=0.002, margin=m, generator="raster"))
    for p in passes:
        assert set(np.unique(p.face)) == set(up), "each pass runs over both faces"
        steps = np.linalg.norm(np.diff(p.points, axis=0), axis=1)
        assert steps.max() <= 0.002 * (1 + 1e-3), "no gap at the shared ridge"
    pts = _all(passes, "points")
    assert np.abs(pts[:, 0]).max() > 0.1 - m - 0.002 and np.abs(pts[:, 0]).max() <= 0.1 - m + 1e-9
    # on the ridge line (x = 0) points are fine: the shared edge is not a boundary
    assert np.abs(pts[:, 0]).min() < 0.002
    with pytest.raises(InputError, match="share no edge"):
        generate_passes(parts.load_part("flat_plate"), [4, 5], PassParameters())
    with pytest.raises(InputError, match="iso generator"):
        generate_passes(roof, up, PassParameters(generator="iso"))


# ------------------------------------------------------------------------------- bad input -----
@pytest.mark.parametrize("kwargs,match", [
    ({"stepover": 0.0}, "stepover"), ({"stepover": -0.001}, "stepover"), ({"spacing": 0.0}, "spacing"),
    ({"stepover": float("nan")}, "stepover"), ({"margin": -1e-3}, "margin"), ({"generator": "spiral"}, "generator"),
    ({"order": "random"}, "order"), ({"stepover": 5.0}, r"'passes.stepover': 5.0 is above the maximum 1.0"),
])
def test_bad_pass_parameters(kwargs: dict, match: str) -> None:
    with pytest.raises(InputError, match=match):
        planner.plan("flat_plate", pass_params=PassParameters(**kwargs), link_clearance_check=False)


def test_face_out_of_range_and_margin_too_big() -> None:
    with pytest.raises(InputError, match="face index 17 out of range"):
        planner.plan("flat_plate", faces=17)
    with pytest.raises(PlanningError, match="margin"):
        planner.plan("flat_plate", pass_params=PassParameters(margin=0.09), link_clearance_check=False)


# ------------------------------------------------------------------------------ tcp / moves ----
def test_tcp_pose_rule(panel) -> None:
    tool = planner.ToolParameters(radius=0.02, target_force=8.0, stiffness=2e5)
    res = planner.plan(panel, [4], PassParameters(stepover=0.02, spacing=0.01), tool)
    d = 8.0 / 2e5
    from scipy.spatial.transform import Rotation

    prev_x = None
    for p, pos, q in zip(res.passes, res.tcp_positions, res.tcp_quaternions, strict=True):
        np.testing.assert_allclose(pos, p.points + (0.02 - d) * p.normals, atol=1e-12)
        R = Rotation.from_quat(q).as_matrix()
        assert _deg(R[:, :, 2], -p.normals).max() < 1e-6  # tool z into the surface
        # x along the travel, or against it: a ball keeps the roll of the pass before (zigzag)
        along = _deg(R[:, :, 0], p.tangents).max() < 1e-6
        assert along or _deg(R[:, :, 0], -p.tangents).max() < 1e-6
        if prev_x is not None:
            assert float(prev_x @ R[0, :, 0]) > 0.9, "no half turn of the wrist between passes"
        prev_x = R[-1, :, 0]
    assert len(res.passes) > 2
    # the link between zigzag passes turns the tool by little (not half a turn)
    for m in res.moves:
        if m.kind == "link":
            r = Rotation.from_quat(m.quaternions)
            assert (r[0].inv() * r[-1]).magnitude() < 0.5
    tilted = planner.plan(panel, [4], PassParameters(stepover=0.02, spacing=0.01),
                          planner.ToolParameters(lead=math.radians(10.0), tilt=math.radians(5.0)))
    for p, q in zip(tilted.passes, tilted.tcp_quaternions, strict=True):
        R = Rotation.from_quat(q).as_matrix()
        assert _deg(R[:, :, 0] - np.sum(R[:, :, 0] * p.normals, axis=1)[:, None] * p.normals,
                    p.tangents).max() < 1e-6  # with lead or tilt, x stays along the travel (no flip)
        # lead turns the axis in the travel plane, tilt across it: angle to -n is their composition
        expected = math.degrees(math.acos(math.cos(math.radians(10)) * math.cos(math.radians(5))))
        np.testing.assert_allclose(_deg(R[:, :, 2], -p.normals), expected, atol=1e-6)
        assert np.all(np.sum(R[:, :, 2] * p.tangents, axis=1) > 0)  # positive lead: axis leans along travel


def test_moves_approach_retreat_and_clear_links() -> None:
    part = parts.load_part("plate_with_hole")
    tool = planner.ToolParameters()
    res = planner.plan(part, None, PassParameters(stepover=0.01, spacing=0.004), tool)
    kinds = [m.kind for m in res.moves]
    assert kinds[:3] == ["approach", "pass", "retreat"] and kinds.count("pass") == len(res.passes)
    mesh = part.tessellate()
    import trimesh

    for m in res.moves:
        if m.kind in ("approach", "retreat"):
            seg = m.positions[1] - m.positions[0]
            n = res.passes[m.pass_index].normals[0 if m.kind == "approach" else -1]
            np.testing.assert_allclose(np.linalg.norm(seg), tool.approach, rtol=1e-9)
            assert _deg(seg * (-1 if m.kind == "approach" else 1), n)[0] < 1e-6
        if m.kind == "link":
            _, dist, _ = trimesh.proximity.closest_point(mesh, m.positions)
            assert dist.min() >= tool.radius + tool.clearance - 1e-6


# ------------------------------------------------------------------------------- files ---------
def test_plan_json_and_csv_read_back(tmp_path, panel) -> None:
    res = planner.plan(panel, [4], PassParameters(stepover=0.02, spacing=0.01))
    path = plan_io.write_plan(res, tmp_path / "plan.json")
    data = json.loads(path.read_text())  # plain json, not our reader
    assert data["schema"] == "robot_grinding_sim/plan" and data["version"] == 2
    wp = data["passes"][0]["waypoints"][3]
    np.testing.assert_allclose(wp["surface_point"], res.passes[0].points[3], atol=1e-12)
    np.testing.assert_allclose(wp["normal"], res.passes[0].normals[3], atol=1e-12)
    assert set(wp) >= {"surface_point", "normal", "travel", "pass_index", "arc_length", "tcp"}
    assert sum(len(p["waypoints"]) for p in data["passes"]) == res.n_waypoints
    assert plan_io.read_plan(path)["summary"]["waypoints"] == res.n_waypoints
    import csv

    rows = list(csv.DictReader(plan_io.write_csv(res, tmp_path / "plan.csv").open()))
    assert len(rows) == res.n_waypoints
    np.testing.assert_allclose([float(rows[5][k]) for k in ("x", "y", "z")], res.passes[0].points[5], atol=1e-11)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "robot_grinding_sim/plan", "version": 99, "passes": []}')
    with pytest.raises(InputError, match="version 99"):
        plan_io.read_plan(bad)


def test_mesh_part_plans_with_a_warning(tmp_path) -> None:
    mesh = parts.load_part("flat_plate").tessellate()
    path = tmp_path / "plate.stl"
    mesh.export(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = planner.plan(str(path), None, PassParameters(stepover=0.01, spacing=0.005), unit="m")
    assert any("approximate" in str(w.message) for w in caught)
    # the mesh is split into its faces (the plate's six sides); the default is the top, planned by
    # the default generator (geodesic, on the mesh) with its coverage figures
    assert len(res.faces) == 1 and res.pass_params.generator == "geodesic"
    assert res.coverage is not None and res.coverage.coverage >= 0.98
    pts = np.vstack([p.points for p in res.passes])
    np.testing.assert_allclose(pts[:, 2], 0.01, atol=1e-9)
    assert np.abs(pts[:, 0]).max() <= 0.1 - 0.005 + 1e-9


# ------------------------------------------------------------------------- robot: IK, timing ----
@pytest.fixture(scope="module")
def robot_plan():
    from robot_grinding_sim.core.robot.ik import default_urdf, load_robot

    model = load_robot("default")
    res = planner.plan("curved_panel", None, PassParameters(stepover=0.03, spacing=0.004),
                       planner.ToolParameters(feed=0.02), robot=model)
    return res, model, default_urdf()


def test_joint_trajectory_reaches_the_tcp_poses_pinocchio(robot_plan) -> None:
    import pinocchio as pin
    from scipy.spatial.transform import Rotation

    res, model, urdf = robot_plan
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId("tcp")
    traj = res.trajectory
    assert [pm.names[i] for i in range(1, pm.njoints)] == traj.joint_names
    X_BP = res.workpiece_pose

    def pose(q: np.ndarray) -> pin.SE3:
        pin.framesForwardKinematics(pm, data, q)
        return data.oMf[fid].copy()

    passes = [s for s in traj.segments if s["kind"] == "pass"]
    assert [s["pass_index"] for s in passes] == [p.index for p in res.passes]
    for seg in passes:
        p = res.passes[seg["pass_index"]]
        q = traj.positions[seg["start"]:seg["stop"]]
        arc = traj.arc[seg["start"]:seg["stop"]]
        assert np.all(np.diff(arc) > 0) and np.all(np.diff(arc) <= 5e-4 + 1e-12)  # resampled every 0.5 mm
        tcp = res.tcp_positions[seg["pass_index"]]
        tcp_arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(tcp, axis=0), axis=1))]  # along the TCP path
        for k in range(0, len(p), 5):  # every waypoint is a knot of the trajectory
            j = int(np.argmin(np.abs(arc - tcp_arc[k])))
            assert abs(arc[j] - tcp_arc[k]) < 1e-9
            T = pose(q[j])
            target = X_BP[:3, :3] @ res.tcp_positions[seg["pass_index"]][k] + X_BP[:3, 3]
            assert np.linalg.norm(T.translation - target) < 1e-8
            R_target = X_BP[:3, :3] @ Rotation.from_quat(res.tcp_quaternions[seg["pass_index"]][k]).as_matrix()
            assert Rotation.from_matrix(T.rotation.T @ R_target).magnitude() < 1e-7
    # the approach ends at the first waypoint, from `approach` m out along its normal
    for seg in (s for s in traj.segments if s["kind"] == "approach"):
        p = res.passes[seg["pass_index"]]
        top, bottom = pose(traj.positions[seg["start"]]), pose(traj.positions[seg["stop"] - 1])
        n = X_BP[:3, :3] @ p.normals[0]
        np.testing.assert_allclose(top.translation - bottom.translation, res.tool.approach * n, atol=1e-8)
    rep = res.reachability
    assert rep["knots"] == len(traj.times) and rep["min_joint_limit_margin_rad"] > 0 and rep["duration_s"] > 0


def test_trajectory_respects_limits_and_keeps_the_feed(robot_plan) -> None:
    import pinocchio as pin

    res, model, urdf = robot_plan
    traj = res.trajectory
    t, q = traj.times, traj.positions
    assert np.all(np.diff(t) > 0)
    v = np.diff(q, axis=0) / np.diff(t)[:, None]  # finite differences, not the stored velocities
    vmax = np.asarray(model.velocity_limits)
    assert np.all(np.abs(v) <= vmax * (1 + 1e-6))
    tm = 0.5 * (t[1:] + t[:-1])
    a = np.diff(v, axis=0) / np.diff(tm)[:, None]
    amax = np.asarray(res.reachability["acceleration_limits"])
    assert np.all(np.abs(a) <= amax * 1.05)
    pm = pin.buildModelFromUrdf(str(urdf))
    data = pm.createData()
    fid = pm.getFrameId("tcp")
    for seg in [s for s in traj.segments if s["kind"] == "pass"][:3]:
        qs = q[seg["start"]:seg["stop"]]
        P = []
        for qq in qs:
            pin.framesForwardKinematics(pm, data, qq)
            P.append(data.oMf[fid].translation.copy())
        speed = np.linalg.norm(np.diff(P, axis=0), axis=1) / np.diff(t[seg["start"]:seg["stop"]])
        assert np.mean(np.abs(speed / res.tool.feed - 1) < 0.01) > 0.9  # constant feed but for the end ramps
        assert speed.max() <= res.tool.feed * 1.001
    # a ball keeps its roll from pass to pass: the last wrist joint hardly moves
    assert np.ptp(q[:, 5]) < 0.5 * math.pi
    # moves start and stop at rest: velocity is zero at every segment boundary
    for seg in traj.segments:
        assert np.abs(traj.velocities[seg["start"]]).max() < 1e-9
        assert np.abs(traj.velocities[seg["stop"] - 1]).max() < 1e-9


def test_unreachable_workpiece_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(PlanningError, match=r"all \d+ waypoints of the passes are unreachable for the arm .*"
                       r"move the workpiece closer"):
        planner.plan("flat_plate", None, PassParameters(stepover=0.03, spacing=0.01), robot="default",
                     workpiece_pose=(2.5, 0.0, 0.0, 0.0, 0.0, 0.0))


def test_collision_check_finds_a_link_in_the_part(robot_plan) -> None:
    import trimesh

    res, model, _ = robot_plan
    traj = res.trajectory
    assert res.collision["checked_samples"] == len(traj.times)
    assert res.collision["min_clearance_m"] > 0
    # an obstacle around the elbow at the middle of the trajectory, given as the "part"
    i = len(traj.times) // 2
    elbow = model.link_poses(traj.positions[i])["forearm_link"][:3, 3]
    box = trimesh.creation.box(extents=(0.3, 0.3, 0.3))
    box.apply_translation(elbow)
    with pytest.raises(PlanningError, match=r"collision: robot link .* pass"):
        planner.check_trajectory_collisions(model, traj, box, np.eye(4))


def test_a_link_whose_tool_axis_swings_goes_over_the_part_and_turns_there() -> None:
    """Two passes on a block, one on its top (tool axis -z) and one on its side (tool axis -x): the
    tool axis swings 90 deg, so the link rises along "up" to the safe height (the block's top +
    R + clearance + approach), turns there and comes down with the side pass's orientation: every
    link point below the safe height keeps the orientation of the pass it is next to. Two passes
    side by side on the top (no swing, clear): the straight line."""
    from scipy.spatial.transform import Rotation

    from robot_grinding_sim.core.planning.waypoints import Pass

    block = cad.CadPart(shapes.make_box((0.2, 0.2, 0.1), (-0.1, -0.1, -0.1)), source="block")
    tool = planner.ToolParameters()
    clearance = planner._Clearance(block)
    up = np.array([0.0, 0.0, 1.0])

    def one(index: int, points: np.ndarray, normal: np.ndarray, travel: np.ndarray) -> tuple:
        n = len(points)
        p = Pass(index, index, 0, points, np.tile(normal, (n, 1)), np.tile(travel, (n, 1)),
                 np.linspace(0.0, float(np.linalg.norm(points[-1] - points[0])), n), np.full((n, 2), np.nan),
                 np.zeros(n, dtype=np.int64))
        R = np.column_stack([travel, np.cross(-normal, travel), -normal])  # tool z into the surface
        return p, points + tool.radius * normal, np.tile(Rotation.from_matrix(R).as_quat(), (n, 1))

    line = np.linspace(-0.05, 0.05, 6)
    top = one(0, np.column_stack([line, np.zeros(6), np.zeros(6)]), up, np.array([1.0, 0.0, 0.0]))
    side = one(1, np.column_stack([np.full(6, 0.1), line[::-1], np.full(6, -0.05)]), np.array([1.0, 0.0, 0.0]),
               np.array([0.0, -1.0, 0.0]))
    moves = planner.build_moves([top[0], side[0]], [top[1], side[1]], [top[2], side[2]], tool, up, clearance)
    (link,) = [m for m in moves if m.kind == "link"]
    safe_h = 0.0 + tool.radius + tool.clearance + tool.approach
    assert link.positions[:, 2].max() == pytest.approx(safe_h, abs=1e-9)
    below = link.positions[:, 2] < safe_h - 1e-9
    first_top = int(np.argmax(~below))
    q_prev, q_next = top[2][-1], side[2][0]
    for k in np.flatnonzero(below):  # rising with the top pass's orientation, descending with the side's
        q = q_prev if k < first_top else q_next
        assert abs(abs(float(link.quaternions[k] @ q)) - 1.0) < 1e-12, k
    np.testing.assert_allclose(link.positions[0], top[1][-1] + tool.approach * up, atol=1e-12)
    np.testing.assert_allclose(link.positions[-1], side[1][0] + tool.approach * np.array([1.0, 0.0, 0.0]),
                               atol=1e-12)
    # no swing and clear of the part: straight
    beside = one(1, np.column_stack([line[::-1], np.full(6, 0.01), np.zeros(6)]), up, np.array([-1.0, 0.0, 0.0]))
    moves = planner.build_moves([top[0], beside[0]], [top[1], beside[1]], [top[2], beside[2]], tool, up, clearance)
    (link,) = [m for m in moves if m.kind == "link"]
    d = link.positions - link.positions[0]
    chord = link.positions[-1] - link.positions[0]
    assert np.linalg.norm(np.cross(d, chord), axis=1).max() < 1e-12  # every point on the chord


# --------------------------------------------------------------------------------------------------
# the ball's reach: no waypoint where the ball would cut into the part elsewhere


def _occ_distance_to_shape(shape, points: np.ndarray) -> np.ndarray:
    """OpenCascade's exact distance from points (outside the solid) to the shape (BRepExtrema)."""
    out = []
    for p in points:
        v = occ_adapter.occ("BRepBuilderAPI").BRepBuilderAPI_MakeVertex(occ_adapter.occ("gp").gp_Pnt(*p)).Vertex()
        d = occ_adapter.occ("BRepExtrema").BRepExtrema_DistShapeShape(v, shape)
        assert d.IsDone()
        out.append(d.Value())
    return np.array(out)


def test_floor_next_to_a_wall_is_ground_only_where_the_ball_fits() -> None:
    """A floor (z 10 mm, y 0..50 mm) next to a wall (y 50..60 mm, 40 mm high), ball r 20 mm: the ball
    touching the floor at y > 30 mm cuts into the wall. Kept waypoints: the ball's centre is at least
    r - 0.25 mm from the part by OpenCascade's exact distance; the floor beyond y = 30 mm is reported
    as unreachable (15 of the 40 mm inside the 5 mm margin) and coverage is measured on the rest."""
    shape = shapes.cut(shapes.make_box((0.08, 0.06, 0.04)), shapes.make_box((0.1, 0.06, 0.05), (-0.01, -0.01, 0.01)))
    part = cad.CadPart(shape)
    floor = next(f.index for f in part.faces if f.type == "plane" and abs(f.bounds[0][2] - 0.01) < 1e-9
                 and abs(f.bounds[1][2] - 0.01) < 1e-9)
    tool = planner.ToolParameters(radius=0.02)
    result = planner.plan(part, [floor], PassParameters(stepover=0.005, spacing=0.002, margin=0.005), tool)
    pts = np.vstack([p.points for p in result.passes])
    nrm = np.vstack([p.normals for p in result.passes])
    assert pts[:, 1].max() <= 0.030 + 2.5e-4 + 1e-6 and pts[:, 1].max() > 0.025
    centres = pts + tool.radius * nrm
    assert _occ_distance_to_shape(shape, centres[_sample(len(centres), 60)]).min() >= tool.radius - 2.5e-4
    cov = result.coverage
    # the share of the floor inside the margin (y 5..45 mm) beyond y = 30 mm: 15 / 40
    assert cov.unreachable_area / (cov.unreachable_area + cov.area) == pytest.approx(15.0 / 40.0, rel=0.1)
    assert cov.coverage >= 0.98 and cov.tool_reach["dropped_waypoints"] > 0


def test_a_channel_narrower_than_the_ball_is_refused() -> None:
    """A concave channel r 15 mm cannot be touched by a r 20 mm ball anywhere; r 30 mm loses nothing."""
    for r, fits in ((0.015, False), (0.03, True)):
        block = shapes.make_box((0.08, 0.07, 0.04))
        shape = shapes.cut(block, shapes.make_cylinder(r, 0.12, (-0.02, 0.035, 0.04), axis=(1.0, 0.0, 0.0)))
        part = cad.CadPart(shape)
        face = next(f.index for f in part.faces if f.type == "cylinder")
        params = PassParameters(stepover=0.004, margin=0.003)
        if fits:
            result = planner.plan(part, [face], params, planner.ToolParameters(radius=0.02))
            assert result.coverage.unreachable_area == 0.0 and result.coverage.tool_reach["dropped_waypoints"] == 0
        else:
            with pytest.raises(PlanningError, match="cannot touch them anywhere without cutting into the part"):
                planner.plan(part, [face], params, planner.ToolParameters(radius=0.02))

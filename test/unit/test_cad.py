"""The OpenCascade adapter against analytic geometry and against OpenCascade's own algorithms.

Files are written here with OpenCascade's writers directly (not through the adapter) and read
back through the adapter, so a unit or scale mistake on either side shows.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from robot_grinding_sim.core.errors import GeometryError, InputError
from robot_grinding_sim.core.geometry import cad, cad_face, occ_adapter, parts, shapes

RNG = np.random.default_rng(7)


def _write_step_direct(shape, path: Path, unit: str) -> None:
    """Write ``shape`` (in OpenCascade's session unit, mm) with STEPControl_Writer in ``unit``."""
    occ_adapter.silence_occ()
    with occ_adapter.session_unit_mm():
        occ_adapter.static(occ_adapter.occ("Interface").Interface_Static, "SetCVal")("write.step.unit", unit)
        writer = occ_adapter.occ("STEPControl").STEPControl_Writer()
        writer.Transfer(shape, occ_adapter.occ("STEPControl").STEPControl_AsIs)
        assert int(writer.Write(str(path))) == int(occ_adapter.occ("IFSelect").IFSelect_RetDone)
    occ_adapter.static(occ_adapter.occ("Interface").Interface_Static, "SetCVal")("write.step.unit", "MM")


def _box_mm():
    gp = occ_adapter.occ("gp")
    return occ_adapter.occ("BRepPrimAPI").BRepPrimAPI_MakeBox(gp.gp_Pnt(10.0, 20.0, 0.0), 200.0, 150.0, 10.0).Shape()


def test_backend_is_one_of_the_two_bindings() -> None:
    assert occ_adapter.BACKEND in ("OCC.Core", "OCP")


@pytest.mark.parametrize("unit", ["MM", "M", "INCH"])
def test_step_round_trip_mm_to_metres(tmp_path: Path, unit: str) -> None:
    path = tmp_path / f"box_{unit}.step"
    _write_step_direct(_box_mm(), path, unit)
    part = cad.read_cad(path)
    lo, hi = part.bounds
    np.testing.assert_allclose(lo, [0.010, 0.020, 0.0], atol=1e-9)
    np.testing.assert_allclose(hi, [0.210, 0.170, 0.010], atol=1e-9)
    areas = sorted(f.area for f in part.faces)
    expected = sorted([0.2 * 0.15] * 2 + [0.2 * 0.01] * 2 + [0.15 * 0.01] * 2)
    np.testing.assert_allclose(areas, expected, rtol=1e-9)
    assert part.unit == {"MM": "millimetre", "M": "metre", "INCH": "inch"}[unit]


@pytest.mark.parametrize("unit", ["MM", "IN", "M"])
def test_iges_round_trip_mm_to_metres(tmp_path: Path, unit: str) -> None:
    occ_adapter.silence_occ()
    path = tmp_path / "box.igs"
    with occ_adapter.session_unit_mm():
        writer = occ_adapter.occ("IGESControl").IGESControl_Writer(unit, 1)
        writer.AddShape(_box_mm())
        writer.ComputeModel()
        assert writer.Write(str(path))
    global_section = "".join(line[:72] for line in path.read_text().splitlines() if line[72:73] == "G")
    assert {"MM": "2HMM", "IN": "4HINCH", "M": "1HM"}[unit] in global_section  # the file's own unit
    part = cad.read_cad(path)
    lo, hi = part.bounds
    np.testing.assert_allclose(lo, [0.010, 0.020, 0.0], atol=1e-9)
    np.testing.assert_allclose(hi, [0.210, 0.170, 0.010], atol=1e-9)


@pytest.mark.parametrize("session_unit", ["M", "INCH"])
def test_reads_and_writes_do_not_depend_on_the_process_wide_occ_unit(tmp_path: Path, session_unit: str) -> None:
    """OpenCascade's ``xstep.cascade.unit`` is global to the process: another library or script may
    set it to metres. The package's readers and writers give the same metres whatever it is, and
    leave the caller's value as it was."""
    static = occ_adapter.static
    owner = occ_adapter.occ("Interface").Interface_Static
    part = parts.build_part("plate_with_hole")
    static(occ_adapter.occ("STEPControl").STEPControl_Controller, "Init")()
    static(owner, "SetCVal")("xstep.cascade.unit", session_unit)
    try:
        for name in ("p.step", "p.iges"):
            back = cad.read_cad(part.write(tmp_path / name, unit="mm"))
            np.testing.assert_allclose(back.bounds[1], [0.1, 0.075, 0.01], atol=1e-8, err_msg=name)
            # the file itself says millimetres with millimetre numbers (read by text, not by OCC)
            text = (tmp_path / name).read_text()
            assert ("SI_UNIT(.MILLI.,.METRE.)" in text) if name.endswith("step") else ("2HMM" in text)
        assert static(owner, "CVal")("xstep.cascade.unit") == session_unit
    finally:
        static(owner, "SetCVal")("xstep.cascade.unit", "MM")


def test_adapter_writer_round_trips_step_iges_brep(tmp_path: Path) -> None:
    part = parts.build_part("plate_with_hole")
    ref = sorted(f.area for f in part.faces)
    for name, unit in (("p.step", "mm"), ("p.iges", "mm"), ("p.brep", "mm"), ("p_in.step", "in")):
        path = part.write(tmp_path / name, unit=unit)
        back = cad.read_cad(path, unit="mm" if name.endswith(".brep") else None)
        np.testing.assert_allclose(sorted(f.area for f in back.faces), ref, rtol=1e-7, err_msg=name)
        np.testing.assert_allclose(back.bounds[1], [0.1, 0.075, 0.01], atol=1e-8, err_msg=name)


def test_unitless_step_is_an_error_unless_the_unit_is_given(tmp_path: Path) -> None:
    good = tmp_path / "box.step"
    _write_step_direct(_box_mm(), good, "MM")
    text = good.read_text()
    m = re.search(r"GLOBAL_UNIT_ASSIGNED_CONTEXT\s*\(\(\s*(#\d+)\s*,", text)
    assert m, "writer output changed: no unit context found"
    unitless = tmp_path / "unitless.step"
    unitless.write_text(text.replace(m.group(0), "GLOBAL_UNIT_ASSIGNED_CONTEXT(("))
    with pytest.raises(GeometryError, match="no length unit"):
        cad.read_cad(unitless)
    part = cad.read_cad(unitless, unit="mm")
    np.testing.assert_allclose(part.bounds[1], [0.210, 0.170, 0.010], atol=1e-9)


@pytest.mark.parametrize("content", ["", "garbage\nnot a step file\n", "ISO-10303-21;\nHEADER;\nENDSEC;\n"])
def test_malformed_or_empty_step(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.step"
    path.write_text(content)
    with pytest.raises(GeometryError, match="bad.step"):
        cad.read_cad(path)


@pytest.mark.parametrize("name", ["bad.igs", "bad.iges", "bad.brep"])
def test_malformed_iges_and_brep_fail_quietly(tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str) -> None:
    path = tmp_path / name
    path.write_text("garbage\nnot a CAD file\n")
    with pytest.raises(GeometryError, match=name):
        cad.read_cad(path, unit="mm")
    out, _ = capfd.readouterr()
    assert out == "", "OpenCascade printed on stdout (breaks --json and one-line errors)"


def test_missing_file_and_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        cad.read_cad(tmp_path / "nope.step")
    odd = tmp_path / "part.xyz"
    odd.write_text("x")
    with pytest.raises(InputError, match="unknown file type"):
        cad.read_cad(odd)
    brep = tmp_path / "part.brep"
    brep.write_text("x")
    with pytest.raises(InputError, match="unknown length unit"):
        cad.read_cad(brep, unit="furlong")


def test_brep_needs_a_unit(tmp_path: Path) -> None:
    path = parts.build_part("flat_plate").write(tmp_path / "p.brep")
    with pytest.raises(InputError, match="no length unit"):
        cad.read_cad(path)


def test_face_index_out_of_range() -> None:
    part = parts.load_part("flat_plate")
    with pytest.raises(InputError, match="out of range 0..5"):
        part.face(6)
    with pytest.raises(InputError, match="out of range"):
        part.face(-1)


def test_unknown_builtin_name() -> None:
    with pytest.raises(InputError, match="built-in"):
        parts.load_part("no_such_part")


def _random_uv(face: cad_face.CadFace, n: int, inset: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    u0, u1, v0, v1 = face.uv_bounds
    du, dv = inset * (u1 - u0), inset * (v1 - v0)
    return RNG.uniform(u0 + du, u1 - du, n), RNG.uniform(v0 + dv, v1 - dv, n)


def _deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (deg) between rows of a and b, accurate near zero (atan2, not arccos)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), np.sum(a * b, axis=1)))


def test_sphere_points_and_outward_normals_are_exact() -> None:
    c, R = np.array([0.01, -0.02, 0.03]), 0.07
    part = cad.CadPart(shapes.make_sphere(R, c), source="sphere")
    (face,) = [f for f in part.faces if f.type == "sphere"]
    u, v = _random_uv(face, 500)
    p, n = face.evaluate(u, v)
    np.testing.assert_allclose(np.linalg.norm(p - c, axis=1), R, atol=1e-12)
    assert _deg(n, (p - c) / R).max() < 1e-6  # outward


def test_cylinder_plane_normals_against_analytic() -> None:
    part = parts.load_part("cylinder_section")
    outer = part.face(0)
    assert outer.type == "cylinder"
    u, v = _random_uv(outer, 500)
    p, n = outer.evaluate(u, v)
    radial = p.copy()
    radial[:, 0] = 0.0  # axis is the x axis
    np.testing.assert_allclose(np.linalg.norm(radial, axis=1), 0.1, atol=1e-12)
    assert _deg(n, radial / 0.1).max() < 0.01
    inner = [f for f in part.faces if f.type == "cylinder" and f.index != 0]
    for f in inner:
        p, n = f.evaluate(*_random_uv(f, 100))
        radial = p * [0, 1, 1]
        inward = -radial / np.linalg.norm(radial, axis=1, keepdims=True)
        assert _deg(n, inward).max() < 0.01  # out of the wall, towards the axis
    plate = parts.load_part("flat_plate")
    for f in plate.faces:
        p, n = f.evaluate(*_random_uv(f, 50))
        centre = np.array([0.0, 0.0, 0.005])
        # outward: the normal points from the box centre towards the face
        assert np.all(np.sum((p - centre) * n, axis=1) > 0)
        assert _deg(n, np.broadcast_to(n[0], n.shape)).max() < 1e-9


def test_bspline_evaluation_matches_opencascade() -> None:
    part = parts.load_part("curved_panel")
    for face in part.faces:
        u, v = _random_uv(face, 40, inset=0.0)
        p, n = face.evaluate(u, v)
        for k in range(len(u)):
            po, no = face.occ_point_normal(u[k], v[k])
            assert np.linalg.norm(p[k] - po) < 1e-12
            assert _deg(n[k : k + 1], no[None])[0] < 1e-7


def test_cone_torus_and_fallback_faces_match_opencascade() -> None:
    gp = occ_adapter.occ("gp")
    prim = occ_adapter.occ("BRepPrimAPI")
    ax = gp.gp_Ax2(gp.gp_Pnt(0.01, 0.02, 0.03), gp.gp_Dir(0.3, -0.2, 0.9))
    solids = [prim.BRepPrimAPI_MakeCone(ax, 0.05, 0.02, 0.08).Shape(),
              prim.BRepPrimAPI_MakeTorus(ax, 0.1, 0.03).Shape(),
              shapes.make_prism(shapes.make_bspline_face(cad_panel_poles()), (0.0, 0.0, -0.003))]
    kinds = set()
    for shape in solids:
        for face in cad.CadPart(shape, source="test").faces:
            kinds.add(face.type)
            u, v = _random_uv(face, 15)
            p, n = face.evaluate(u, v)
            for k in range(len(u)):
                po, no = face.occ_point_normal(u[k], v[k])
                assert np.linalg.norm(p[k] - po) < 1e-12, face.type
                assert _deg(n[k], no)[0] < 1e-7, face.type
    assert {"cone", "torus", "extrusion", "bspline", "plane"} <= kinds


def cad_panel_poles() -> np.ndarray:
    return parts.curved_panel_poles()


def test_project_recovers_points_and_parameters() -> None:
    face = parts.load_part("curved_panel").face(4)
    assert face.type == "bspline"
    u, v = _random_uv(face, 30, inset=0.1)
    p, n = face.evaluate(u, v)
    uv, q, dist = face.project(p + 0.002 * n)
    np.testing.assert_allclose(dist, 0.002, atol=1e-9)
    np.testing.assert_allclose(q, p, atol=1e-9)
    np.testing.assert_allclose(uv, np.column_stack([u, v]), atol=1e-7)


def test_contains_matches_opencascade_classifier_with_hole() -> None:
    part = parts.load_part("plate_with_hole")
    (top,) = [f for f in part.faces if f.type == "plane" and f.evaluate(*_random_uv(f, 1))[1][0, 2] > 0.99]
    u0, u1, v0, v1 = top.uv_bounds
    uv = np.column_stack([RNG.uniform(u0, u1, 400), RNG.uniform(v0, v1, 400)])
    p, _ = top.evaluate(uv[:, 0], uv[:, 1])
    radius = np.hypot(p[:, 0], p[:, 1])
    mine = top.contains(uv)
    far = np.abs(radius - 0.02) > 1e-4
    occ_in = np.array([top.occ_classify(tuple(x)) == "in" for x in uv])
    assert np.array_equal(mine[far], occ_in[far])
    assert np.array_equal(mine[far], radius[far] > 0.02)


def test_tessellation_is_close_to_the_exact_surface() -> None:
    part = parts.load_part("curved_panel")
    mesh = part.tessellate(deflection=5e-5)
    assert mesh.is_watertight
    top, bottom = part.face(4), part.face(5)
    sample = mesh.vertices[::5]
    dist = np.fmin(top.project(sample)[2], bottom.project(sample)[2])
    on_skins = dist < 1e-6
    assert on_skins.mean() > 0.5  # most vertices are on the two B-spline skins...
    assert np.max(dist[on_skins]) < 1e-7  # ...exactly (the rest lie on the side walls)
    assert mesh.volume == pytest.approx(0.003 * top.area, rel=0.01)


def test_intersect_lines_hits_the_surface_on_the_lines() -> None:
    face = parts.load_part("curved_panel").face(4)
    origins = np.column_stack([RNG.uniform(-0.09, 0.09, 200), RNG.uniform(-0.07, 0.07, 200), np.zeros(200)])
    d = np.array([0.1, -0.05, 1.0])
    d /= np.linalg.norm(d)
    uv, p, n, ok = face.intersect_lines(origins, d)
    assert ok.mean() > 0.95
    rel = p[ok] - origins[ok]
    off_line = np.linalg.norm(rel - (rel @ d)[:, None] * d, axis=1)
    assert off_line.max() < 1e-9
    _, _, dist = face.project(p[ok][:50])
    assert np.nanmax(dist) < 1e-9


def test_mesh_input_needs_unit_and_warns(tmp_path: Path) -> None:
    mesh = parts.load_part("flat_plate").tessellate()
    mesh.apply_scale(1000.0)
    path = tmp_path / "plate.stl"
    mesh.export(path)
    with pytest.raises(InputError, match="no length unit"):
        cad.read_cad(path)
    with pytest.warns(UserWarning, match="approximate"):
        part = cad.read_cad(path, unit="mm")
    np.testing.assert_allclose(part.bounds[1], [0.1, 0.075, 0.01], atol=1e-6)
    assert part.list_faces()[0].type == "mesh"
    empty = tmp_path / "empty.stl"
    empty.write_bytes(b"")
    with pytest.raises(GeometryError, match="empty"):
        cad.read_cad(empty, unit="mm")


@pytest.mark.parametrize("name", list(parts.BUILTIN_PARTS))
def test_shipped_builtin_parts_match_their_definition(name: str) -> None:
    shipped = parts.load_part(name)
    built = parts.build_part(name)
    assert shipped.unit == "millimetre"
    assert [f.type for f in shipped.faces] == [f.type for f in built.faces]
    np.testing.assert_allclose([f.area for f in shipped.faces], [f.area for f in built.faces], rtol=1e-9)
    size = np.subtract(*shipped.bounds[::-1]) * 1e3
    np.testing.assert_allclose(size, parts.BUILTIN_PARTS[name].size_mm, atol=0.1)
    assert parts.part_path(name).stat().st_size < 100_000


def test_builtin_part_geometry() -> None:
    panel = parts.load_part("curved_panel")
    assert panel.face(4).type == "bspline"
    lo, hi = panel.bounds
    np.testing.assert_allclose(hi[:2] - lo[:2], [0.2, 0.15], atol=1e-6)  # optimal box, tolerance-padded
    hole = parts.load_part("plate_with_hole")
    assert sum(f.type == "cylinder" for f in hole.faces) == 1
    top = max(hole.faces, key=lambda f: f.bounds[1][2] + f.area)
    assert top.area == pytest.approx(0.2 * 0.15 - math.pi * 0.02**2, rel=1e-9)

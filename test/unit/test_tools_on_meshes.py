"""The wheel, the pad and the disc on mesh parts and on several CAD faces (issue 24): the triangles
are the surface (no exact surface to project on), and each tool's contact is the same closed form
as on a CAD plane.

The meshes are made here with numpy and written by numpy-stl; read by the package through trimesh.
References, written here independently of the code (as test_tools.py's, on the mesh's plane):
- pad flat on a plane: F = k_w A d; half of it over the edge of the top face: k_w (A / 2) d;
- wheel side-on on a plane: line contact across its width L, F = k_w L times the integral of the
  penetration d - (R - sqrt(R^2 - x^2)) across the chord (scipy quad);
- pad across the axis of a finely faceted cylinder: F = k_w times the integral of the penetration
  over the face (quad), within the facets' sag.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
from robot_grinding_sim.core.geometry.tools import cell_tool
from robot_grinding_sim.core.job.setup import load_robot_model
from robot_grinding_sim.core.planning.planner import default_face

mesh_stl = pytest.importorskip("stl.mesh")

URDF = Path(__file__).resolve().parents[2] / "urdf"
K_W = 2.0e8  # N/m^3
TOP = 0.01  # the slab's top, m
#: an STL stores float32: the slab's top is 0.01 m to within 1e-9 m, and so is every depth under it
F32 = 1e-9


def write_stl(path: Path, tris: np.ndarray) -> Path:
    m = mesh_stl.Mesh(np.zeros(len(tris), dtype=mesh_stl.Mesh.dtype))
    m.vectors[:] = tris
    m.save(str(path))
    return path


def box_triangles(lo: tuple[float, float, float], hi: tuple[float, float, float]) -> np.ndarray:
    """(12, 3, 3) m: a box, triangles wound outwards."""
    (x0, y0, z0), (x1, y1, z1) = lo, hi

    def v(i: int, j: int, k: int) -> list[float]:
        return [(x0, x1)[i], (y0, y1)[j], (z0, z1)[k]]

    quads = [((0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)), ((0, 0, 0), (0, 1, 0), (1, 1, 0), (1, 0, 0)),
             ((0, 0, 0), (1, 0, 0), (1, 0, 1), (0, 0, 1)), ((0, 1, 0), (0, 1, 1), (1, 1, 1), (1, 1, 0)),
             ((0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 1, 0)), ((1, 0, 0), (1, 1, 0), (1, 1, 1), (1, 0, 1))]
    tris = []
    for q in quads:
        a, b, c, d = (v(*i) for i in q)
        tris += [[a, b, c], [a, c, d]]
    return np.array(tris, dtype=float)


def tube_triangles(radius: float, length: float, sides: int) -> np.ndarray:
    """A closed prism of ``sides`` sides round a cylinder of ``radius`` along x from -length/2 to
    length/2, triangles wound outwards (m)."""
    a = np.linspace(0.0, 2 * math.pi, sides + 1)
    ring = np.column_stack([radius * np.cos(a), radius * np.sin(a)])  # (y, z)
    h = 0.5 * length
    tris = []
    for k in range(sides):
        (y0, z0), (y1, z1) = ring[k], ring[k + 1]
        b0, b1, t0, t1 = [-h, y0, z0], [-h, y1, z1], [h, y0, z0], [h, y1, z1]
        tris += [[b0, b1, t1], [b0, t1, t0], [[h, 0.0, 0.0], t0, t1], [[-h, 0.0, 0.0], b1, b0]]
    return np.array(tris, dtype=float)


def tool(name: str, shape: str, spacing: float, angle: float = 0.0):
    return cell_tool(load_robot_model(str(URDF / f"ur10e_{name}.urdf"), "tcp"), "tcp", "abrasive_head", shape,
                     spacing, *([angle] if angle else []))


def query_on(path: Path, shape, faces: list[int] | None = None) -> ToolContactQuery:
    part = parts.load_part(str(path), "m")
    scene, exact = workpiece_scene(part, faces or [0], np.eye(4), shape.radius)
    assert not exact  # the mesh answers: no exact surface
    return ToolContactQuery(scene, shape=shape, pressure_stiffness=K_W, floor_area=1e-9)


def pose_on(point, normal, travel, shape, depth: float) -> np.ndarray:
    """The tcp pose that puts the tool ``depth`` into the surface at point with the planner's rule."""
    z = -np.asarray(normal, float) / np.linalg.norm(normal)
    x = np.asarray(travel, float) - (np.asarray(travel, float) @ z) * z
    x /= np.linalg.norm(x)
    X = np.eye(4)
    X[:3, :3] = np.column_stack([x, np.cross(z, x), z]) @ shape.rule
    X[:3, 3] = np.asarray(point, float) + (shape.standoff() - depth) * (-z)
    return X


@pytest.fixture(scope="module")
def slab(tmp_path_factory) -> Path:
    tris = box_triangles((-0.1, -0.075, 0.0), (0.1, 0.075, TOP))
    return write_stl(tmp_path_factory.mktemp("slab") / "slab.stl", tris)


@pytest.mark.parametrize("depth", [2e-5, 1e-4, 4e-4])
def test_pad_flat_on_a_mesh_plane_is_k_A_d_and_half_of_it_over_the_edge(slab: Path, depth: float) -> None:
    pad = tool("sanding_pad", "pad", 0.0025)
    q = query_on(slab, pad)
    A = 0.05 * 0.05
    g = q.query(pose_on([0.0, 0.0, TOP], [0, 0, 1], [1.0, 0.3, 0.0], pad, depth))
    assert g.stiffness == pytest.approx(K_W * A, rel=1e-9)
    assert -g.gap == pytest.approx(depth, abs=F32)
    assert np.allclose(g.normal, [0, 0, 1], atol=1e-9) and np.linalg.norm(g.point - [0, 0, TOP]) < 1e-6
    # the pad's centre on the top face's edge x = 0.1, its sides along the axes: half of it in contact
    g = q.query(pose_on([0.1, 0.0, TOP], [0, 0, 1], [1.0, 0.0, 0.0], pad, depth))
    assert g.stiffness == pytest.approx(K_W * A / 2, rel=1e-9)
    assert -g.gap == pytest.approx(depth, abs=F32)
    assert g.point[0] == pytest.approx(0.1 - 0.0125, abs=1e-6)  # the centre of pressure of the half inside


@pytest.mark.parametrize("depth", [5e-5, 2e-4, 1e-3])
def test_wheel_side_on_a_mesh_plane_is_a_line_contact(slab: Path, depth: float) -> None:
    wheel = tool("flap_wheel", "wheel", 0.001)
    q = query_on(slab, wheel)
    g = q.query(pose_on([0.0, 0.0, TOP], [0, 0, 1], [0.0, 1.0, 0.0], wheel, depth))
    R, L = 0.04, 0.025
    a = math.sqrt(2 * R * depth - depth * depth)
    section, _ = quad(lambda x: depth - (R - math.sqrt(R * R - x * x)), -a, a, epsabs=1e-16, epsrel=1e-12)
    rel = 2.0 * F32 / depth  # the force goes as depth^1.5, the patch as depth^0.5
    assert -g.gap * g.stiffness == pytest.approx(K_W * L * section, rel=rel)
    assert g.stiffness == pytest.approx(K_W * L * 2 * a, rel=rel)
    assert np.allclose(g.normal, [0, 0, 1], atol=1e-9)


@pytest.mark.parametrize("depth", [2e-4, 8e-4])
def test_pad_across_a_faceted_tube_against_numerical_integration(tmp_path: Path, depth: float) -> None:
    Rc, sides = 0.1, 2048  # the facets sag Rc (1 - cos(pi / sides)) = 0.12 um under the cylinder
    path = write_stl(tmp_path / "tube.stl", tube_triangles(Rc, 0.2, sides))
    pad = tool("sanding_pad", "pad", 0.001)
    part = parts.load_part(str(path), "m")
    side = max(part.list_faces(), key=lambda f: f.area).index
    q = query_on(path, pad, [side])
    g = q.query(pose_on([0.0, 0.0, Rc], [0, 0, 1], [1.0, 0.0, 0.0], pad, depth))
    half = math.sqrt(2 * Rc * depth - depth * depth)
    across, _ = quad(lambda y: depth - (Rc - math.sqrt(Rc * Rc - y * y)), -half, half, epsabs=1e-16, epsrel=1e-12)
    F_ref = K_W * 0.05 * across  # the strip runs the whole pad length along the axis
    assert -g.gap * g.stiffness == pytest.approx(F_ref, rel=0.01)
    assert g.stiffness == pytest.approx(K_W * 0.05 * 2 * half, rel=0.06)  # the grid's resolution of the strip
    assert np.allclose(g.normal, [0.0, 0.0, 1.0], atol=1e-4)


def test_a_pad_on_several_cad_faces_presses_as_on_one() -> None:
    """The flat plate's top and a side face: the tessellated part answers (a plane's tessellation is
    the plane), the pad's force is k_w A d as on the top alone."""
    pad = tool("sanding_pad", "pad", 0.0025)
    part = parts.load_part("flat_plate")
    top = default_face(part)
    side = next(f.index for f in part.list_faces() if f.index != top)
    scene, exact = workpiece_scene(part, [top, side], np.eye(4), pad.radius)
    assert not exact
    q = ToolContactQuery(scene, shape=pad, pressure_stiffness=K_W, floor_area=1e-9)
    depth, z = 1e-4, float(part.bounds[1][2])
    g = q.query(pose_on([0.0, 0.0, z], [0, 0, 1], [1.0, 0.0, 0.0], pad, depth))
    assert -g.gap == pytest.approx(depth, abs=1e-12)
    assert g.stiffness == pytest.approx(K_W * 0.05 * 0.05, rel=1e-9)


def test_a_mesh_without_an_outside_is_refused_in_one_line(tmp_path: Path) -> None:
    tris = box_triangles((-0.1, -0.075, 0.0), (0.1, 0.075, TOP))
    tris[0] = tris[0][::-1]  # one triangle wound the other way: no consistent outside
    path = write_stl(tmp_path / "bad.stl", tris)
    pad = tool("sanding_pad", "pad", 0.0025)
    part = parts.load_part(str(path), "m")
    scene, _ = workpiece_scene(part, [0], np.eye(4), pad.radius)
    with pytest.raises(InputError, match="the pad tool needs a workpiece whose surface has an outside, and this "
                       "mesh has none .*inconsistent face winding"):
        ToolContactQuery(scene, shape=pad, pressure_stiffness=K_W, floor_area=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("tool_file", ["disc_grinder", "sanding_pad"])
def test_plan_then_simulate_on_a_mesh_part_reaches_the_target_force(tool_file: str, tmp_path: Path) -> None:
    """`grinding plan` + `grinding simulate` of the shipped tool on an STL tube's side (curved, 2048
    facets): the plan's offsets optimised by simulation, written, read back and run: the pass within
    5 % of the target; the removal map holds k_p times the work."""
    import json

    from robot_grinding_sim.core.config import load_cell_config
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig
    from robot_grinding_sim.core.planning import plan_io

    path = write_stl(tmp_path / "tube.stl", tube_triangles(0.1, 0.2, 2048))
    side = max(parts.load_part(str(path), "m").list_faces(), key=lambda f: f.area).index
    cfg_dir = Path(__file__).resolve().parents[2] / "config"
    cell = load_cell_config([str(cfg_dir / "cell.yaml"), str(cfg_dir / "tools" / f"{tool_file}.yaml")],
                            {"workpiece.part": str(path), "workpiece.unit": "m", "workpiece.faces": [side],
                             "process.dwell": 0.1})
    plan = plan_job(cell, max_passes=1, pass_length=0.02)
    data = json.loads(plan_io.write_plan(plan, tmp_path / "plan.json").read_text())
    result = run_job(JobConfig(cell=plan_io.cell_of(data), plan_file=str(tmp_path / "plan.json")))
    assert len(result.passes) == 1
    for p in result.passes:
        assert abs(p.mean - 5.0) <= 0.05 * 5.0
    removal = result.removal_summary()
    assert removal["volume_m3"] > 0.0
    assert removal["volume_m3"] == pytest.approx(cell.removal.kp * removal["work_n_m"], rel=1e-9)

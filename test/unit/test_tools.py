"""Tool shapes (core/geometry/tools.py): each tool's contact against a closed form or an independent
numerical integral, its geometry read from the shipped URDFs (parsed here with the standard library's
XML reader), its orientation rule and standoff, and the refusals. The end-to-end runs (plan +
simulate to the target force) are the slow tests at the end.

References, written here independently of the code:
- pad flat on a plane: F = k_w A d (every point of the face d deep);
- wheel side-on on a plane: line contact across its width L; the penetration under the wheel is
  d - (R - sqrt(R^2 - x^2)) across the chord, F = k_w L times its integral (scipy quad);
- pad over a cylinder of radius Rc (the built-in cylinder_section, axis along x): the penetration at
  y across the axis is d - (Rc - sqrt(Rc^2 - y^2)), F = k_w times its integral over the face (quad).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import quad

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry import parts
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
from robot_grinding_sim.core.geometry.tools import SHAPES, cell_tool
from robot_grinding_sim.core.job.setup import load_robot_model
from robot_grinding_sim.core.planning.planner import default_face

URDF = Path(__file__).resolve().parents[2] / "urdf"
WHEEL_URDF = URDF / "ur10e_flap_wheel.urdf"
PAD_URDF = URDF / "ur10e_sanding_pad.urdf"
K_W = 2.0e8  # N/m^3


def collision_primitive(path: Path, link: str, kind: str, name: str) -> tuple[dict[str, float], float]:
    """The <collision> ``name`` (a ``kind``) of ``link`` in the URDF: its attributes and its origin's z."""
    root = ET.parse(path).getroot()
    for lk in root.iter("link"):
        if lk.get("name") != link:
            continue
        for col in lk.iter("collision"):
            g = col.find("geometry/" + kind) if col.get("name") == name else None
            if g is not None:
                z = float(col.find("origin").get("xyz").split()[2])
                return {k: v for k, v in g.attrib.items()}, z
    raise AssertionError(f"no {kind} in {link}")


@pytest.fixture(scope="module")
def wheel():
    return cell_tool(load_robot_model(str(WHEEL_URDF), "tcp"), "tcp", "abrasive_head", "auto", 0.001)


@pytest.fixture(scope="module")
def pad():
    return cell_tool(load_robot_model(str(PAD_URDF), "tcp"), "tcp", "abrasive_head", "auto", 0.0025)


def query_on(part_name: str, tool, floor: float = 1e-9):
    part = parts.load_part(part_name)
    face = default_face(part)
    scene, exact = workpiece_scene(part, [face], np.eye(4), tool.radius)
    assert exact
    return part.face(face), ToolContactQuery(scene, shape=tool, pressure_stiffness=K_W, floor_area=floor)


def pose_on(point: np.ndarray, normal: np.ndarray, travel: np.ndarray, tool, depth: float) -> np.ndarray:
    """The tcp pose that puts the tool ``depth`` into the surface at point with the planner's rule."""
    z = -normal / np.linalg.norm(normal)
    x = travel - (travel @ z) * z
    x /= np.linalg.norm(x)
    F0 = np.column_stack([x, np.cross(z, x), z])
    X = np.eye(4)
    X[:3, :3] = F0 @ tool.rule
    X[:3, 3] = point + (tool.standoff() - depth) * (-z)
    return X


def test_the_tools_come_from_the_urdf_geometry(wheel, pad) -> None:
    attrs, z_wheel = collision_primitive(WHEEL_URDF, "abrasive_head", "cylinder", "wheel")
    assert wheel.shape == "wheel" and wheel.radius == pytest.approx(float(attrs["radius"]))
    assert wheel.dims["length"] == pytest.approx(float(attrs["length"]))
    # the tcp at the wheel centre: its standoff on a surface is the radius, its axis across the feed
    assert wheel.standoff() == pytest.approx(float(attrs["radius"]), abs=1e-12)
    assert np.allclose(wheel.rule @ np.array([0.0, 0.0, 1.0]), [0.0, 1.0, 0.0])
    sizes, _ = collision_primitive(PAD_URDF, "abrasive_head", "box", "pad")
    # the box nearest the tcp is the pad (not the backing plate), its working face at the tcp
    pad_size = [float(v) for v in sizes["size"].split()]
    assert pad.shape == "pad" and pad.pad_area == pytest.approx(pad_size[0] * pad_size[1], rel=1e-12)
    assert pad.standoff() == pytest.approx(0.0, abs=1e-12)
    assert np.allclose(pad.rule, np.eye(3))
    ball = cell_tool(load_robot_model("", "tcp"), "tcp", "abrasive_head")
    assert ball.shape == "ball" and ball.standoff() == pytest.approx(0.02)
    assert set(SHAPES) >= {"ball", "wheel", "pad"}


@pytest.mark.parametrize("depth", [2e-5, 1e-4, 4e-4])
def test_pad_flat_on_a_plane_is_k_A_d(pad, depth: float) -> None:
    face, q = query_on("flat_plate", pad)
    p, n = face.evaluate(np.array([np.mean(face.uv_bounds[:2])]), np.array([np.mean(face.uv_bounds[2:])]))
    g = q.query(pose_on(p[0], n[0], np.array([1.0, 0.3, 0.0]), pad, depth))
    A = 0.05 * 0.05
    assert g.stiffness == pytest.approx(K_W * A, rel=1e-9)  # the whole face in contact
    assert -g.gap * g.stiffness == pytest.approx(K_W * A * depth, rel=1e-9)
    assert np.allclose(g.normal, n[0], atol=1e-9)
    assert np.linalg.norm(g.point - p[0]) < 1e-6  # the centre of pressure under the tcp


@pytest.mark.parametrize("depth", [5e-5, 2e-4, 1e-3])
def test_wheel_side_on_a_plane_is_a_line_contact(wheel, depth: float) -> None:
    face, q = query_on("flat_plate", wheel)
    p, n = face.evaluate(np.array([np.mean(face.uv_bounds[:2])]), np.array([np.mean(face.uv_bounds[2:])]))
    g = q.query(pose_on(p[0], n[0], np.array([0.0, 1.0, 0.0]), wheel, depth))
    R, L = 0.04, 0.025
    a = math.sqrt(2 * R * depth - depth * depth)
    section, _ = quad(lambda x: depth - (R - math.sqrt(R * R - x * x)), -a, a, epsabs=1e-16, epsrel=1e-12)
    assert -g.gap * g.stiffness == pytest.approx(K_W * L * section, rel=1e-7)
    # the patch: the chord 2a across the whole width L (a line contact, not a point)
    assert g.stiffness == pytest.approx(K_W * L * 2 * a, rel=1e-7)
    assert np.allclose(g.normal, n[0], atol=1e-9)
    # the closed form the planner inverts for its penetration agrees
    assert wheel.plane_force(depth, K_W) == pytest.approx(K_W * L * section, rel=1e-9)
    assert wheel.static_penetration(None, K_W * L * section, K_W) == pytest.approx(depth, rel=1e-8)


@pytest.mark.parametrize("depth", [2e-4, 8e-4])
def test_pad_over_a_cylinder_against_numerical_integration(depth: float) -> None:
    tool = cell_tool(load_robot_model(str(PAD_URDF), "tcp"), "tcp", "abrasive_head", "pad", 0.001)
    face, q = query_on("cylinder_section", tool)
    # the top of the tube (outer radius 100 mm, axis along x), the pad square on it, feed along x
    Rc = 0.1
    g = q.query(pose_on(np.array([0.0, 0.0, Rc]), np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0]), tool,
                        depth))
    half = math.sqrt(2 * Rc * depth - depth * depth)  # the contact strip's half width across the axis
    across, _ = quad(lambda y: depth - (Rc - math.sqrt(Rc * Rc - y * y)), -half, half, epsabs=1e-16, epsrel=1e-12)
    F_ref = K_W * 0.05 * across  # the strip runs the whole pad length along the axis
    assert -g.gap * g.stiffness == pytest.approx(F_ref, rel=0.01)
    assert g.stiffness == pytest.approx(K_W * 0.05 * 2 * half, rel=0.06)  # the grid's resolution of the strip
    assert np.allclose(g.normal, [0.0, 0.0, 1.0], atol=1e-6)
    # the force follows the area in contact: far less than flat on a plane at the same depth
    assert -g.gap * g.stiffness < 0.5 * K_W * 0.05 * 0.05 * depth


def test_patch_out_of_contact_gives_the_nearest_gap(pad) -> None:
    face, q = query_on("flat_plate", pad, floor=1e-4)
    p, n = face.evaluate(np.array([np.mean(face.uv_bounds[:2])]), np.array([np.mean(face.uv_bounds[2:])]))
    g = q.query(pose_on(p[0], n[0], np.array([1.0, 0.0, 0.0]), pad, -3e-4))
    assert g.gap == pytest.approx(3e-4, rel=1e-9)
    assert g.stiffness == pytest.approx(K_W * 1e-4)


def test_refusals_name_the_parameter() -> None:
    from robot_grinding_sim.core.config import CellConfig, ContactConfig, RobotConfig, ToolConfig
    from robot_grinding_sim.core.job.setup import job_tool

    model = load_robot_model(str(WHEEL_URDF), "tcp")
    cell = CellConfig(robot=RobotConfig(description_file=str(WHEEL_URDF)))
    with pytest.raises(InputError, match="contact.model winkler"):
        job_tool(model, cell)
    ball_cell = CellConfig(contact=ContactConfig(model="winkler"))
    with pytest.raises(InputError, match="point law"):
        job_tool(load_robot_model("", "tcp"), ball_cell)
    with pytest.raises(InputError, match="no box collision geometry of link 'abrasive_head' .*tool.link"):
        cell_tool(model, "tcp", "abrasive_head", "pad")
    with pytest.raises(InputError, match="tool.shape"):
        cell_tool(model, "tcp", "abrasive_head", "cone")
    assert ToolConfig().shape == "auto"


@pytest.mark.parametrize("which", ["pad", "wheel"])
def test_removal_footprint_of_a_straight_pass(which: str, pad, wheel) -> None:
    """Preston over the tool's own patch: a tool fed straight along x over a plane with force F and
    no spindle leaves a groove of depth k_p F / W across its width W (the time integral of the
    pressure under a node is the force per width over the feed: sum over the pass of p v dt),
    flat-bottomed, nothing beyond the width."""
    from robot_grinding_sim.core.contact.preston import RemovalGrid

    tool = pad if which == "pad" else wheel
    width = 0.05 if which == "pad" else 0.025
    depth = 1e-4
    h = 0.001
    xs, ys = np.arange(-0.07, 0.07 + h / 2, h), np.arange(-0.04, 0.04 + h / 2, h)
    Y, Xg = np.meshgrid(ys, xs, indexing="ij")
    P = np.column_stack([Xg.ravel(), Y.ravel(), np.zeros(Xg.size)])
    kp, F, v, dt = 1e-12, 5.0, 0.01, 0.005
    grid = RemovalGrid(P, np.full(len(P), h * h), None, Xg.shape, preston_coefficient=kp)
    z = np.array([0.0, 0.0, -1.0])
    x = np.array([1.0, 0.0, 0.0])
    X = np.eye(4)
    X[:3, :3] = np.column_stack([x, np.cross(z, x), z]) @ tool.rule
    for cx in np.arange(-0.045, 0.045, v * dt):
        X[:3, 3] = [cx, 0.0, tool.standoff() - depth]
        point = np.array([cx, 0.0, 0.0])
        nodes = grid.nodes_near(point, tool.footprint_radius(depth) + h)
        grid.accumulate_footprint(nodes, tool.penetration_at(grid.points[nodes], X), point, -z, F, X[:3, 3],
                                  np.zeros(3), v * x, dt)
    mid = np.abs(P[:, 0]) < 0.5 * h
    inner = mid & (np.abs(P[:, 1]) < 0.5 * width - 1.5 * h)
    outer = mid & (np.abs(P[:, 1]) > 0.5 * width + 1.5 * h)
    assert grid.depth[inner] == pytest.approx(kp * F / width, rel=0.03)
    assert np.all(grid.depth[outer] == 0.0)
    assert grid.volume() == pytest.approx(kp * F * 0.09, rel=0.01)  # k_p * integral of F v dt


@pytest.mark.slow
@pytest.mark.parametrize("tool_file, part", [("flap_wheel", "curved_panel"), ("sanding_pad", "flat_plate"),
                                             ("sanding_pad", "curved_panel"), ("disc_grinder", "curved_panel")])
def test_plan_then_simulate_reaches_the_target_force(tool_file: str, part: str, tmp_path) -> None:
    """`grinding plan` + `grinding simulate` with the shipped tool's URDF and parameters: the plan's
    offsets optimised by simulation, written, read back and run: each pass within 5 % of the target;
    the removal map under the tool's footprint holds k_p times the work."""
    import json

    from robot_grinding_sim.core.config import load_cell_config
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.job.run import run_job
    from robot_grinding_sim.core.job.setup import JobConfig
    from robot_grinding_sim.core.planning import plan_io

    cfg_dir = Path(__file__).resolve().parents[2] / "config"
    cell = load_cell_config([str(cfg_dir / "cell.yaml"), str(cfg_dir / "tools" / f"{tool_file}.yaml")],
                            {"workpiece.part": part, "process.dwell": 0.1})
    plan = plan_job(cell, max_passes=1, pass_length=0.02)
    assert plan.tool.shape == {"flap_wheel": "wheel", "sanding_pad": "pad", "disc_grinder": "disc"}[tool_file]
    path = plan_io.write_plan(plan, tmp_path / "plan.json")
    data = json.loads(path.read_text())
    result = run_job(JobConfig(cell=plan_io.cell_of(data), plan_file=str(path)))
    for p in result.passes:
        assert abs(p.mean - 5.0) <= 0.05 * 5.0
    removal = result.removal_summary()
    assert removal["volume_m3"] > 0.0
    assert removal["volume_m3"] == pytest.approx(cell.removal.kp * removal["work_n_m"], rel=1e-9)


DISC_URDF = URDF / "ur10e_disc_grinder.urdf"


@pytest.mark.parametrize("depth, angle", [(5e-5, 0.2), (1.5e-4, 0.2), (4e-4, 0.5)])
def test_tilted_disc_on_a_plane_is_the_chord_and_its_segment(depth: float, angle: float) -> None:
    """A disc's face at ``angle`` to a plane, its low rim ``depth`` under it: the face under the plane
    is the circular segment h = depth / sin(angle) high (the chord), each point of it s beyond the
    chord s sin(angle) deep; the Winkler force is k_w times that depth over the segment's area
    projected on the plane (dblquad over the segment in the face's plane, cos(angle) dA)."""
    from scipy.integrate import dblquad

    tool = cell_tool(load_robot_model(str(DISC_URDF), "tcp"), "tcp", "abrasive_head", "disc", 0.0002, angle)
    attrs, _ = collision_primitive(DISC_URDF, "abrasive_head", "cylinder", "disc")
    R = float(attrs["radius"])
    face, q = query_on("flat_plate", tool)
    p, n = face.evaluate(np.array([np.mean(face.uv_bounds[:2])]), np.array([np.mean(face.uv_bounds[2:])]))
    X = pose_on(p[0], n[0], np.array([1.0, 0.0, 0.0]), tool, depth)
    ox, oy = tool.contact_offset()
    X[:3, 3] -= ox * np.array([1.0, 0.0, 0.0]) + oy * np.array([0.0, -1.0, 0.0])  # F0 x = +x, y = -y here
    g = q.query(X)
    h = depth / math.sin(angle)
    u = R - h

    def half(x: float) -> float:
        return math.sqrt(max(R * R - x * x, 0.0))

    moment, _ = dblquad(lambda y, x: (x - u), u, R, lambda x: -half(x), half, epsabs=1e-18, epsrel=1e-10)
    area, _ = dblquad(lambda y, x: 1.0, u, R, lambda x: -half(x), half, epsabs=1e-18, epsrel=1e-10)
    F_ref = K_W * math.sin(angle) * math.cos(angle) * moment
    assert -g.gap * g.stiffness == pytest.approx(F_ref, rel=2e-3)  # strips 0.2 mm wide across the chord
    assert g.stiffness == pytest.approx(K_W * math.cos(angle) * area, rel=2e-3)
    assert np.allclose(g.normal, n[0], atol=1e-9)
    # the contact is where the planner put it: the low rim's middle on the waypoint
    assert np.linalg.norm((g.point - p[0])[:2]) < 0.5 * h + 1e-4
    assert tool.plane_force(depth, K_W) == pytest.approx(F_ref, rel=1e-8)
    assert tool.static_penetration(None, F_ref, K_W) == pytest.approx(depth, rel=1e-7)
    assert tool.standoff() == pytest.approx(R * math.sin(angle), rel=1e-12)


@pytest.mark.parametrize("urdf, shape, k_w, rel", [(WHEEL_URDF, "wheel", 2e8, 1e-6), (PAD_URDF, "pad", 2e7, 1e-6),
                                                   (DISC_URDF, "disc", 1e10, 1e-3)])
def test_the_planned_tcp_presses_the_target_force_on_a_plane(urdf: Path, shape: str, k_w: float, rel: float) -> None:
    """The planner's rule for each tool (orientation, standoff, the first-touching point's offset,
    the penetration for the force, the edge margin): at every planned waypoint on the flat plate the
    tool's contact gives the target force, its patch wholly on the face (the disc: to its 1 mm strips
    across the chord; the planner's closed form is the exact segment)."""
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.planning import planner

    tool = cell_tool(load_robot_model(str(urdf), "tcp"), "tcp", "abrasive_head", shape, 0.001)
    cell = CellConfig().replace(**{"contact.model": "winkler", "contact.stiffness": k_w,
                                   "passes.stepover": 0.04})
    params = planner.tool_parameters(cell, tool)
    plan = planner.plan("flat_plate", None, cell.passes, params, robot=None, link_clearance_check=False)
    part = parts.load_part("flat_plate")
    scene, _ = workpiece_scene(part, plan.faces, np.eye(4), tool.radius)
    q = ToolContactQuery(scene, shape=tool, pressure_stiffness=k_w, floor_area=1e-9)
    from scipy.spatial.transform import Rotation

    forces = []
    for pos, quat in zip(plan.tcp_positions, plan.tcp_quaternions, strict=True):
        for i in (0, len(pos) // 2, len(pos) - 1):
            X = np.eye(4)
            X[:3, :3] = Rotation.from_quat(quat[i]).as_matrix()
            X[:3, 3] = pos[i]
            g = q.query(X)
            forces.append(-g.gap * g.stiffness)
    assert forces == pytest.approx([5.0] * len(forces), rel=rel)


@pytest.mark.parametrize("name, shape", [("flap_wheel", "wheel"), ("sanding_pad", "pad"), ("disc_grinder", "disc")])
def test_the_shipped_tool_files_describe_their_tool(name: str, shape: str) -> None:
    """config/tools/NAME.yaml over config/cell.yaml: a valid cell whose URDF (a package:// URI) holds
    the tool it names, with the Winkler law; the planner's penetration for the target force is well
    inside the tool."""
    from robot_grinding_sim.core.config import load_cell_config
    from robot_grinding_sim.core.job.setup import cell_robot_model, job_tool

    cfg = Path(__file__).resolve().parents[2] / "config"
    cell = load_cell_config([str(cfg / "cell.yaml"), str(cfg / "tools" / f"{name}.yaml")])
    assert cell.robot.description_file.startswith("package://robot_grinding_sim/urdf/")
    tool = job_tool(cell_robot_model(cell), cell)
    assert tool.shape == shape
    d = tool.static_penetration(None, cell.process.target_force, cell.contact.stiffness)
    assert 1e-5 < d < 0.01 * tool.radius


@pytest.mark.parametrize("urdf, shape", [(WHEEL_URDF, "wheel"), (PAD_URDF, "pad"), (DISC_URDF, "disc")])
def test_each_pass_presses_along_the_axis_the_graph_comparison_reads(urdf: Path, shape: str, tmp_path: Path) -> None:
    """The per-pass pressing axis the graph comparison reads the force along
    (core.record.pass_forces.plan_pressing_axes, from plan.json's waypoints): at the planned tcp
    poses of every pass on the flat plate (written to plan.json and read back), the contact's
    outward normal, found by the tool's query on the exact surface, points back along it in tcp
    axes. The wheel keeps its roll from pass to pass (half a turn about its axis on the way back):
    its axis is across tcp z and flips with the passes; the pad's is its tcp z."""
    import json

    from scipy.spatial.transform import Rotation

    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.planning import plan_io, planner
    from robot_grinding_sim.core.record.pass_forces import plan_pressing_axes

    tool = cell_tool(load_robot_model(str(urdf), "tcp"), "tcp", "abrasive_head", shape, 0.001)
    cell = CellConfig().replace(**{"contact.model": "winkler", "contact.stiffness": 2e8, "passes.stepover": 0.04})
    plan = planner.plan("flat_plate", None, cell.passes, planner.tool_parameters(cell, tool), robot=None,
                        link_clearance_check=False)
    data = json.loads(plan_io.write_plan(plan, tmp_path / "plan.json").read_text())
    axes = plan_pressing_axes(data)
    assert sorted(axes) == list(range(len(plan.passes))) and len(axes) >= 2
    part = parts.load_part("flat_plate")
    scene, _ = workpiece_scene(part, plan.faces, np.eye(4), tool.radius)
    q = ToolContactQuery(scene, shape=tool, pressure_stiffness=2e8, floor_area=1e-9)
    for ps in data["passes"]:
        for w in ps["waypoints"][:: max(1, len(ps["waypoints"]) // 4)]:
            X = np.eye(4)
            X[:3, :3] = Rotation.from_quat(w["tcp"]["orientation"]).as_matrix()
            X[:3, 3] = w["tcp"]["position"]
            g = q.query(X)
            assert g.gap < 0.0  # pressing
            np.testing.assert_allclose(X[:3, :3].T @ g.normal, -axes[ps["index"]], atol=1e-6)
    if shape == "pad":
        np.testing.assert_allclose(axes[0], [0.0, 0.0, 1.0], atol=1e-9)
    elif shape == "wheel":
        assert abs(axes[0][2]) < 1e-9 and axes[0] @ axes[1] == pytest.approx(-1.0, abs=1e-9)

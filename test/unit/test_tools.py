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
        cell_tool(model, "tcp", "abrasive_head", "disc")
    assert ToolConfig().shape == "auto"

"""URDF loading: chain extraction, lumping, limits, collision geometry, URI resolution, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as _pin  # only to locate example-robot-data, installed with it
import pytest
from lxml import etree
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError, ModelError
from robot_grinding_sim.core.robot.dynamics import RobotModel
from robot_grinding_sim.core.robot.model import load_chain, resolve_uri

REPO = Path(__file__).resolve().parents[2]
for _parent in Path(_pin.__file__).resolve().parents:
    if (_parent / "share" / "example-robot-data" / "robots").is_dir():
        SHARE = _parent / "share"
        break
ROBOTS = SHARE / "example-robot-data" / "robots"
UR5 = ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf"

INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>'


def urdf(body: str, name: str = "r") -> str:
    return f'<?xml version="1.0"?>\n<robot name="{name}">\n{body}\n</robot>\n'


def link(name: str, inertial: bool = True, extra: str = "") -> str:
    return f'<link name="{name}">{INERTIAL if inertial else ""}{extra}</link>'


def joint(name: str, parent: str, child: str, kind: str = "revolute", origin: str = "", axis: str = "0 0 1") -> str:
    lim = '<limit lower="-2" upper="2" effort="10" velocity="3"/>' if kind in ("revolute", "prismatic") else ""
    ax = f'<axis xyz="{axis}"/>' if axis is not None else ""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f"{origin}{ax}{lim}</joint>")


TWO_LINK = urdf(
    link("base", False) + link("l1") + link("l2") + link("tcp", False)
    + joint("j1", "base", "l1") + joint("j2", "l1", "l2", origin='<origin xyz="1 0 0"/>')
    + joint("jt", "l2", "tcp", "fixed", '<origin xyz="0.5 0 0"/>')
)


def write(tmp_path: Path, text: str, name: str = "robot.urdf") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------------------------------------
# third-party URDF: attributes read back against the XML with lxml (independent of yourdfpy)


def test_ur5_attributes_match_the_xml() -> None:
    m = RobotModel.from_urdf(UR5, tip_link="tool0", package_dirs=[SHARE])
    root = etree.parse(str(UR5)).getroot()
    xml_joints = {j.get("name"): j for j in root.findall("joint")}
    assert m.root_link == "world" and m.tip_link == "tool0" and m.nq == 6
    assert m.joint_names == ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
                             "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
    for i, name in enumerate(m.joint_names):
        lim = xml_joints[name].find("limit")
        assert m.lower[i] == float(lim.get("lower")) and m.upper[i] == float(lim.get("upper"))
        assert m.velocity_limits[i] == float(lim.get("velocity"))
        assert m.effort_limits[i] == float(lim.get("effort"))
    assert set(m.link_names) == {lk.get("name") for lk in root.findall("link")}
    # every link has its collision elements, and every mesh resolves to an existing file
    n_xml = sum(len(lk.findall("collision")) for lk in root.findall("link"))
    assert len(m.collision_geometry) == n_xml > 0
    meshes = [g for g in m.collision_geometry if g.kind == "mesh"]
    assert len(meshes) >= 6
    for g in meshes:
        assert g.params["filename"].startswith("package://")
        assert g.mesh_path is not None and Path(g.mesh_path).is_file()
        assert g.mesh_path.endswith(g.params["filename"].split("/", 3)[-1])


def test_default_tip_is_tcp_else_deepest(tmp_path: Path) -> None:
    m = RobotModel.from_urdf_string(TWO_LINK)
    assert m.tip_link == "tcp" and m.nq == 2
    # without tcp: the link below the most moving joints (here l2's fixed child "flange")
    text = TWO_LINK.replace('"tcp"', '"flange"')
    assert RobotModel.from_urdf_string(text).tip_link == "flange"
    assert RobotModel.from_urdf_string(text, tip_link="l1").nq == 1


def test_default_robot_loads_with_tcp() -> None:
    m = RobotModel.from_urdf(REPO / "urdf" / "ur10e_grinding.urdf")
    assert m.tip_link == "tcp" and m.nq == 6
    assert {"tool0", "ft_sensor", "tcp"} <= set(m.link_names)
    assert m.root_link == "base_link"
    assert all(g.kind != "mesh" or g.mesh_path for g in m.collision_geometry)


def test_rpy_origins_and_axis_normalisation() -> None:
    rpy = (0.3, -0.7, 1.1)
    text = urdf(
        link("base", False) + link("a")
        + joint("j", "base", "a", origin=f'<origin xyz="0.1 0.2 0.3" rpy="{rpy[0]} {rpy[1]} {rpy[2]}"/>',
                axis="0 0 2")
    )
    m = RobotModel.from_urdf_string(text)
    q = 0.4
    R_origin = Rotation.from_euler("xyz", rpy).as_matrix()  # URDF rpy: fixed axes x, y, z
    expected = R_origin @ Rotation.from_rotvec([0, 0, q]).as_matrix()
    T = m.fk([q], "a")
    np.testing.assert_allclose(T[:3, :3], expected, atol=1e-14)
    np.testing.assert_allclose(T[:3, 3], [0.1, 0.2, 0.3], atol=1e-14)
    # an axis of length 2 behaves like the unit axis: the angular Jacobian column is unit length
    np.testing.assert_allclose(m.jacobian([q], "a")[3:, 0], R_origin[:, 2], atol=1e-14)


def test_fixed_and_locked_links_are_lumped(tmp_path: Path) -> None:
    # two point masses on fixed children and one on a locked (off-chain) revolute joint
    pm = '<inertial><origin xyz="{x} 0 0"/><mass value="{m}"/><inertia ixx="0" ixy="0" ixz="0" ' \
         'iyy="0" iyz="0" izz="0"/></inertial>'
    text = urdf(
        link("base", False)
        + f'<link name="arm">{pm.format(x=0.5, m=2.0)}</link>'
        + f'<link name="weight">{pm.format(x=0.0, m=1.0)}</link>'
        + f'<link name="finger">{pm.format(x=0.0, m=1.0)}</link>'
        + link("tcp", False)
        + joint("j", "base", "arm", axis="0 0 1")
        + joint("w", "arm", "weight", "fixed", '<origin xyz="1 0 0"/>')
        + joint("f", "arm", "finger", "revolute", '<origin xyz="0 1 0"/>')
        + joint("t", "arm", "tcp", "fixed", '<origin xyz="1 0 0"/>')
    )
    m = RobotModel.from_urdf_string(text)
    assert m.nq == 1 and m.locked_joints == ["f"]
    assert set(m.link_names) == {"base", "arm", "weight", "finger", "tcp"}
    # point masses about the z axis: I = 2 * 0.5^2 + 1 * 1^2 + 1 * 1^2
    np.testing.assert_allclose(m.mass_matrix([0.3]), [[2.5]], rtol=1e-14)
    np.testing.assert_allclose(m.chain.mass, [4.0])
    np.testing.assert_allclose(m.chain.com[0], [0.5, 0.25, 0.0])
    np.testing.assert_allclose(m.fk([np.pi / 2], "finger")[:3, 3], [-1.0, 0.0, 0.0], atol=1e-15)


def test_continuous_joint_has_no_position_limits() -> None:
    text = urdf(link("base", False) + link("a") + joint("c", "base", "a", "continuous"))
    m = RobotModel.from_urdf_string(text)
    assert m.lower[0] == -np.inf and m.upper[0] == np.inf


def test_collision_primitives(tmp_path: Path) -> None:
    geoms = (
        '<collision><origin xyz="0 0 0.1" rpy="0 0 1"/><geometry><box size="0.1 0.2 0.3"/></geometry></collision>'
        '<collision><geometry><cylinder radius="0.05" length="0.2"/></geometry></collision>'
        '<collision><geometry><sphere radius="0.02"/></geometry></collision>'
        '<collision><geometry><mesh filename="meshes/part.stl" scale="0.001 0.001 0.001"/></geometry></collision>'
        '<collision><geometry><mesh filename="missing.stl"/></geometry></collision>'
    )
    (tmp_path / "meshes").mkdir()
    (tmp_path / "meshes" / "part.stl").write_text("solid x\nendsolid x\n")
    text = urdf(link("base", False) + link("a", extra=geoms) + joint("j", "base", "a"))
    m = RobotModel.from_urdf(write(tmp_path, text))
    kinds = [(g.link, g.kind) for g in m.collision_geometry]
    assert kinds == [("a", "box"), ("a", "cylinder"), ("a", "sphere"), ("a", "mesh"), ("a", "mesh")]
    box, cyl, sph, mesh, missing = m.collision_geometry
    np.testing.assert_allclose(box.params["size"], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(box.origin[:3, 3], [0, 0, 0.1])
    np.testing.assert_allclose(box.origin[:3, :3], Rotation.from_euler("z", 1.0).as_matrix(), atol=1e-15)
    assert cyl.params == {"radius": 0.05, "length": 0.2} and sph.params == {"radius": 0.02}
    assert mesh.mesh_path == str((tmp_path / "meshes" / "part.stl").resolve())
    np.testing.assert_allclose(mesh.params["scale"], [0.001] * 3)
    assert missing.mesh_path is None


# ------------------------------------------------------------------------------------------------
# URI resolution


def test_resolve_package_uri_layouts(tmp_path: Path) -> None:
    rel = "meshes/a.stl"
    # 1) <dir>/pkg/rel
    (tmp_path / "src" / "my_pkg" / "meshes").mkdir(parents=True)
    f1 = tmp_path / "src" / "my_pkg" / rel
    f1.write_text("x")
    assert resolve_uri("package://my_pkg/" + rel, [tmp_path / "src"]) == str(f1.resolve())
    # 2) the directory is the package itself
    assert resolve_uri("package://my_pkg/" + rel, [tmp_path / "src" / "my_pkg"]) == str(f1.resolve())
    # 3) ament install prefix: <prefix>/share/pkg/rel
    (tmp_path / "install" / "share" / "other_pkg" / "meshes").mkdir(parents=True)
    f3 = tmp_path / "install" / "share" / "other_pkg" / rel
    f3.write_text("x")
    assert resolve_uri("package://other_pkg/" + rel, [tmp_path / "install"]) == str(f3.resolve())
    # 4) file:// absolute, relative to the URDF directory, and not found
    assert resolve_uri(f1.resolve().as_uri(), []) == str(f1.resolve())
    assert resolve_uri(rel, [], base_dir=str(tmp_path / "src" / "my_pkg")) == str(f1.resolve())
    assert resolve_uri("package://nowhere/" + rel, [tmp_path]) is None


def test_resolve_package_uri_from_the_urdf_location(tmp_path: Path) -> None:
    (tmp_path / "my_pkg" / "urdf").mkdir(parents=True)
    (tmp_path / "my_pkg" / "meshes").mkdir()
    (tmp_path / "my_pkg" / "meshes" / "a.stl").write_text("x")
    found = resolve_uri("package://my_pkg/meshes/a.stl", [], base_dir=str(tmp_path / "my_pkg" / "urdf"))
    assert found == str((tmp_path / "my_pkg" / "meshes" / "a.stl").resolve())


# ------------------------------------------------------------------------------------------------
# errors name the problem


BAD = {
    "missing parent": (
        urdf(link("base", False) + link("a") + joint("j", "ghost", "a")), "'ghost'"),
    "two parents (loop)": (
        urdf(link("base", False) + link("a") + link("b") + joint("j1", "base", "a") + joint("j2", "a", "b")
             + joint("j3", "base", "b")), "kinematic loop"),
    "cycle": (
        urdf(link("base", False) + link("a") + link("b") + joint("j2", "b", "a") + joint("j3", "a", "b")),
        "loop"),
    "two roots": (urdf(link("base", False) + link("a") + link("island") + joint("j", "base", "a")), "root links"),
    "floating": (urdf(link("base", False) + link("a") + joint("j", "base", "a", "floating")), "floating"),
    "planar": (urdf(link("base", False) + link("a") + joint("j", "base", "a", "planar")), "planar"),
    "unknown type": (urdf(link("base", False) + link("a") + joint("j", "base", "a", "ball")), "unknown type"),
    "zero axis": (urdf(link("base", False) + link("a") + joint("j", "base", "a", axis="0 0 0")), "zero axis"),
    "no inertial": (urdf(link("base", False) + link("a", False) + joint("j", "base", "a")), "no <inertial>"),
    "negative mass": (
        urdf(link("base", False) + link("a").replace('value="1"', 'value="-1"') + joint("j", "base", "a")),
        "negative mass"),
    "malformed xml": ('<robot name="r"><link name="a"></robot>', "not well-formed"),
    "not a robot": ("<model/>", "<robot>"),
    "duplicate link": (urdf(link("base", False) + link("a") + link("a") + joint("j", "base", "a")), "twice"),
    "no moving joint": (urdf(link("base", False) + link("a") + joint("j", "base", "a", "fixed")), "no moving"),
    "joint without child": (
        urdf(link("base", False) + '<joint name="j" type="fixed"><parent link="base"/></joint>'), "<child"),
    "NaN origin": (
        urdf(link("base", False) + link("a") + joint("j", "base", "a", origin='<origin xyz="nan 0 0"/>')),
        "not finite"),
    "lower above upper": (
        urdf(link("base", False) + link("a") + joint("j", "base", "a").replace('lower="-2"', 'lower="3"')),
        "lower limit"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_urdf_raises_model_error_naming_it(case: str, tmp_path: Path) -> None:
    text, fragment = BAD[case]
    path = write(tmp_path, text)
    with pytest.raises(ModelError) as exc:
        RobotModel.from_urdf(path)
    assert fragment in str(exc.value)
    assert str(path) in str(exc.value)


def test_missing_file_and_unknown_tip(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        RobotModel.from_urdf(tmp_path / "nope.urdf")
    with pytest.raises(ModelError, match="is not a file"):
        load_chain(tmp_path)
    with pytest.raises(ModelError, match="'ghost'"):
        RobotModel.from_urdf_string(TWO_LINK, tip_link="ghost")
    assert issubclass(ModelError, InputError)

"""Third-party arms (example-robot-data, installed with Pinocchio) with a grinding ball tool attached.

:func:`arm_with_ball_tool` writes a URDF: the arm's own file with a tool added at its flange under
link names the package never uses (``probe_mount``, ``grinder``, ``grit_ball``, ``tip``), so that a job
on it runs only from the cell's configuration (:func:`cell_values`). The arm's meshes keep their
``package://example-robot-data/...`` URIs: the file is written away from the package, so they
resolve only through ``robot.package_dirs`` (``--package-dir``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pinocchio as _pin  # only to locate example-robot-data, installed with it
from lxml import etree

for _parent in Path(_pin.__file__).resolve().parents:
    if (_parent / "share" / "example-robot-data" / "robots").is_dir():
        SHARE = _parent / "share"
        break
ROBOTS = SHARE / "example-robot-data" / "robots"
#: the ``robot.package_dirs`` entry that resolves the arms' ``package://example-robot-data/`` meshes
PACKAGE_DIR = f"example-robot-data={SHARE / 'example-robot-data'}"


@dataclass(frozen=True)
class Arm:
    """An arm of example-robot-data: its file, flange link, links to drop (a gripper), home pose and
    a workpiece pose it reaches the curved panel from."""

    urdf: Path
    flange: str
    drop: tuple[str, ...]
    home: tuple[float, ...]
    part_pose: tuple[float, ...]


ARMS = {
    # Franka Emika Panda: 7 joints; its hand and fingers are removed (the tool takes their place)
    "panda": Arm(ROBOTS / "panda_description" / "urdf" / "panda.urdf", "panda_link8",
                 ("panda_hand", "panda_hand_tcp", "panda_leftfinger", "panda_rightfinger"),
                 (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, 0.785), (0.5, 0.0, 0.0, 0.0, 0.0, 0.0)),
    # Universal Robots UR5 (the CB-series model): 6 joints, root link 'world'
    "ur5": Arm(ROBOTS / "ur_description" / "urdf" / "ur5_robot.urdf", "tool0", (),
               (0.0, -1.2, 1.9, -2.27, -1.57, 0.0), (0.5, 0.0, 0.0, 0.0, 0.0, 0.0)),
}

TOOL = """
  <link name="probe_mount">
    <inertial><origin xyz="0 0 0.01"/><mass value="0.25"/>
      <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1.6e-4"/></inertial>
    <collision><origin xyz="0 0 0.01"/><geometry><cylinder radius="0.035" length="0.02"/></geometry></collision>
  </link>
  <joint name="flange-probe_mount" type="fixed"><parent link="{flange}"/><child link="probe_mount"/>
    <origin xyz="0 0 0"/></joint>
  <link name="grinder">
    <inertial><origin xyz="0 0 0.06"/><mass value="1.0"/>
      <inertia ixx="1.3e-3" ixy="0" ixz="0" iyy="1.3e-3" iyz="0" izz="3e-4"/></inertial>
    <collision><origin xyz="0 0 0.06"/><geometry><cylinder radius="0.025" length="0.12"/></geometry></collision>
  </link>
  <joint name="probe_mount-grinder" type="fixed"><parent link="probe_mount"/><child link="grinder"/>
    <origin xyz="0 0 0.02"/></joint>
  <link name="grit_ball">
    <inertial><origin xyz="0 0 0.035"/><mass value="0.06"/>
      <inertia ixx="1e-5" ixy="0" ixz="0" iyy="1e-5" iyz="0" izz="8e-6"/></inertial>
    {ball}
  </link>
  <joint name="grinder-grit_ball" type="fixed"><parent link="grinder"/><child link="grit_ball"/>
    <origin xyz="0 0 0.12"/></joint>
  {tip}
"""
BALL = ('<collision><origin xyz="0 0 0.0125"/><geometry><cylinder radius="0.003" length="0.025"/></geometry>'
        '</collision><collision><origin xyz="0 0 0.04"/><geometry><sphere radius="0.015"/></geometry></collision>')
TIP = ('<link name="tip"/><joint name="grit_ball-tip" type="fixed"><parent link="grit_ball"/>'
       '<child link="tip"/><origin xyz="0 0 0.04"/></joint>')
#: the ball's radius, m
BALL_RADIUS = 0.015


def arm_with_ball_tool(name: str, out: Path, ball: bool = True, tip: bool = True,
                       no_inertial: str | None = None) -> Path:
    """Write ``out`` (a URDF): arm ``name`` of :data:`ARMS` with the ball tool at its flange.
    ``ball`` False: the ball link without collision geometry; ``tip`` False: without the tcp frame;
    ``no_inertial``: that link's <inertial> removed."""
    arm = ARMS[name]
    root = etree.parse(str(arm.urdf)).getroot()
    for el in root.findall("link"):
        if el.get("name") == no_inertial:
            el.remove(el.find("inertial"))
    for el in list(root):
        if el.tag == "link" and el.get("name") in arm.drop:
            root.remove(el)
        if el.tag == "joint" and el.find("child").get("link") in arm.drop:
            root.remove(el)
    tool = TOOL.format(flange=arm.flange, ball=BALL if ball else "", tip=TIP if tip else "")
    for el in etree.fromstring(f"<robot>{tool}</robot>"):
        root.append(el)
    out.write_bytes(etree.tostring(root, xml_declaration=True, encoding="utf-8"))
    return out


def cell_values(name: str, urdf: Path) -> dict[str, object]:
    """The cell parameters of a job on arm ``name`` with its tool (:func:`arm_with_ball_tool`)."""
    arm = ARMS[name]
    return {"robot.description_file": str(urdf), "robot.home": list(arm.home),
            "robot.package_dirs": [PACKAGE_DIR], "tool.tcp_link": "tip", "tool.link": "grit_ball",
            "tool.links": ["grinder", "grit_ball"], "ft_sensor.frame": "probe_mount",
            "workpiece.pose": list(arm.part_pose)}

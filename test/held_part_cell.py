"""Test helper: a robot-holds-the-part cell (issue 24 item 3) made from the package's UR10e URDF.

The spindle and its ball (links ``spindle``, ``abrasive_head``, ``tcp``) are taken off the F/T
sensor and stand in the cell on the root link, the tool's axis (z out of the tool) pointing up;
the arm holds the part at its F/T sensor's face (``ft_sensor``), the part's face looking down at
the ball. Not used by the package.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from robot_grinding_sim.core.resources import default_urdf

#: where the tool's spindle stands (base_link, m); the ball's centre is 0.205 m above it
TOOL_AT = (0.75, 0.0, 0.0)
#: the part frame in ft_sensor: its +z (out of the face to grind) along the sensor's z, away from
#: the flange; its origin 0.13 m from the sensor's face (a holder between them)
GRASP = (0.0, 0.0, 0.13, 0.0, 0.0, 0.0)


def held_part_urdf(out: Path, tool_at: tuple[float, float, float] = TOOL_AT, part_mass: bool = False) -> Path:
    """Write ``out``: the UR10e with its spindle and ball fixed to base_link at ``tool_at``;
    ``part_mass``: with the part's inertia on the sensor (link ``held_part``)."""
    root = etree.parse(str(default_urdf())).getroot()
    for j in root.findall("joint"):
        if j.find("child").get("link") == "spindle":
            j.find("parent").set("link", "base_link")
            j.find("origin").set("xyz", " ".join(str(v) for v in tool_at))
            j.find("origin").set("rpy", "0 0 0")
    if part_mass:  # the part's inertia carried by the sensor (the curved panel, aluminium, 200 x 150 x 3 mm)
        m, (a, b, c) = 0.243, (0.2, 0.15, 0.003)
        xyz = " ".join(str(v) for v in GRASP[:3])
        for el in etree.fromstring(f"""<robot>
  <link name="held_part"><inertial><mass value="{m}"/><origin xyz="0 0 0" rpy="0 0 0"/>
    <inertia ixx="{m * (b * b + c * c) / 12}" ixy="0" ixz="0" iyy="{m * (a * a + c * c) / 12}" iyz="0"
             izz="{m * (a * a + b * b) / 12}"/></inertial></link>
  <joint name="ft_sensor-held_part" type="fixed"><parent link="ft_sensor"/><child link="held_part"/>
    <origin xyz="{xyz}" rpy="0 0 0"/></joint></robot>"""):
            root.append(el)
    out.write_bytes(etree.tostring(root, xml_declaration=True, encoding="utf-8"))
    return out


def held_cell_values(urdf: Path) -> dict[str, object]:
    """The cell parameters of the held-part cell of ``urdf`` (:func:`held_part_urdf`)."""
    return {"robot.description_file": str(urdf), "workpiece.link": "ft_sensor",
            "workpiece.grasp": list(GRASP), "ft_sensor.frame": "ft_sensor"}

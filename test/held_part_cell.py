"""Test helper: the package's robot-holds-the-part cell (issue 24 item 3), as it ships.

``urdf/ur10e_held_part.urdf`` (the UR10e of ``ur10e_grinding.urdf`` with the spindle and its ball,
links ``spindle``, ``abrasive_head``, ``tcp``, taken off the F/T sensor and standing on the root
link, axis up) and ``config/cells/held_part.yaml`` (the arm holds the part at its F/T sensor's face,
the part's face looking down at the ball). The tests read the shipped files, so what they check is
the example a user starts from.
"""

from __future__ import annotations

from pathlib import Path

from robot_grinding_sim.core.parameters import load_params_file

REPO = Path(__file__).resolve().parents[1]
#: the held-part cell's URDF and its parameter file (a ``--params`` overlay on config/cell.yaml)
HELD_URDF = REPO / "urdf" / "ur10e_held_part.urdf"
CELL_FILE = REPO / "config" / "cells" / "held_part.yaml"
#: where the tool's spindle stands in HELD_URDF (base_link, m); the ball's centre is 0.205 m above it
TOOL_AT = (0.75, 0.0, 0.0)
#: the part frame in ft_sensor (CELL_FILE's workpiece.grasp): its +z (out of the face to grind) along
#: the sensor's z, away from the flange; its origin 0.13 m from the sensor's face (a holder between them)
GRASP = tuple(float(v) for v in load_params_file(CELL_FILE)["workpiece.grasp"])


def held_cell_values() -> dict[str, object]:
    """The cell parameters of CELL_FILE, with the URDF as a plain path (for Pinocchio and a
    parameter file written elsewhere)."""
    return {**load_params_file(CELL_FILE), "robot.description_file": str(HELD_URDF)}

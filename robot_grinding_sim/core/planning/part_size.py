"""The part's size against the robot cell: a part whose size does not fit is refused before
anything is meshed or planned (what a wrong length unit gives). Metres."""

from __future__ import annotations

from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError

#: the largest part any robot cell grinds, m, when the robot is not known (10 x the reach of a
#: large arm): a part larger than this is a unit mistake (millimetre numbers read as metres)
MAX_PART_SIZE = 20.0
#: with a robot: a part larger than this many times its reach is refused
REACH_FACTOR = 10.0


def robot_reach(model: Any) -> float:
    """An upper bound of the arm's reach, m: the lengths of its chain (joint to joint, then to the tip
    link) added up (UR10e with the ball tool: 1.86 m)."""
    tip = np.asarray(model.chain.link_offset[model.tip_link])[:3, 3]
    return float(np.linalg.norm(model.chain.p0, axis=1).sum() + np.linalg.norm(tip))


def check_part_size(part: Any, tool_radius: float, reach: float | None = None) -> float:
    """Refuse a part whose size does not fit a robot cell, before anything is meshed or planned.

    The size is the longest side of the part's bounding box (m, after its file's unit was applied).
    Too large: more than ``REACH_FACTOR`` x ``reach`` (the robot's, :func:`robot_reach`), or than
    ``MAX_PART_SIZE`` without a robot. Too small: smaller than the tool's radius. Both are what a
    wrong unit gives (a STEP file that declares metres around millimetre numbers is 1000 x too large).

    Returns:
        The size, m.

    Raises:
        InputError: naming the part, its size and the unit its file declares (or the caller stated).
    """
    lo, hi = (np.asarray(b, dtype=float) for b in part.bounds)
    size = float(np.max(hi - lo))
    unit = getattr(part, "unit", "m") or "m"
    what = f"{getattr(part, 'source', 'the part')}: the part is {size:.4g} m across (its unit: {unit})"
    limit = MAX_PART_SIZE if reach is None else REACH_FACTOR * reach
    if not np.isfinite(size) or size > limit:
        whose = "" if reach is None else f", {REACH_FACTOR:g} x the robot's reach of {reach:.3g} m"
        raise InputError(f"{what}, larger than a robot cell grinds ({limit:.3g} m{whose}): is the length unit "
                         "right? (millimetre numbers in a file that declares metres read 1000 x too large)")
    if size < tool_radius:
        raise InputError(f"{what}, smaller than the tool (radius {tool_radius:.4g} m): is the length unit right? "
                         "(metre numbers in a file that declares millimetres read 1000 x too small)")
    return size


__all__ = ["MAX_PART_SIZE", "REACH_FACTOR", "check_part_size", "robot_reach"]

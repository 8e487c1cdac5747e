"""The job's progress for a 3D viewer, ROS-free: how much of each pass is ground, and a status line.

``/grinding/progress`` (docs/compare.md) is a Float64MultiArray that neither RViz nor Foxglove's 3D
panel can draw. grinding_executive therefore also publishes ``grinding/progress_markers``
(visualization_msgs/MarkerArray, frame the robot's root link), and the in-process job's bag
carries the same topic (:mod:`robot_grinding_sim.core.job.viewer`):

- namespace ``ground``, id = pass index: a LINE_STRIP (green, 2 mm wide, over the blue pass lines
  of planner_node's markers) of the pass's surface points ground so far: whole for the passes
  before the current one, up to the arc length reached on the current one;
- namespace ``status``, id 0: a TEXT_VIEW_FACING 5 cm above the passes (along their mean normal),
  e.g. ``running: pass 2/3, 12.0 / 30.0 mm``.

The arc length of ``/grinding/progress`` runs along the TCP path of a pass; each surface point of
the plan belongs to one TCP waypoint, so the ground part ends at the surface point of the TCP
arc reached (interpolated between waypoints). Positions in m, root frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

TOPIC = "grinding/progress_markers"
#: default rate of the markers while a job runs, Hz (grinding_executive's marker_rate, the job bag's)
MARKER_RATE = 5.0
GROUND_COLOUR = (0.1, 0.85, 0.2, 1.0)
GROUND_WIDTH = 0.002
TEXT_COLOUR = (1.0, 1.0, 1.0, 1.0)
#: height of the status text's letters, m
TEXT_HEIGHT = 0.015
#: how far above the passes the status text sits, m
TEXT_LIFT = 0.05


@dataclass(frozen=True)
class PassTrace:
    """One pass for display: surface points (N, 3) m in the root frame and the TCP arc length (N,)
    m at each (the ``/grinding/progress`` arc)."""

    index: int
    points: FloatArray
    arc: FloatArray

    @property
    def length(self) -> float:
        """TCP arc length of the whole pass, m."""
        return float(self.arc[-1])

    def ground(self, arc: float) -> FloatArray:
        """The surface points (k, 3) up to TCP arc ``arc`` (m), ending on the interpolated point."""
        a = float(np.clip(arc, 0.0, self.length))
        k = int(np.searchsorted(self.arc, a, side="right"))
        if k >= len(self.arc):
            return self.points.copy()
        end = np.array([np.interp(a, self.arc, self.points[:, j]) for j in range(3)])
        return np.vstack([self.points[:k], end[None]])


def pass_traces(plan: Any) -> list[PassTrace]:
    """The passes of a :class:`~robot_grinding_sim.core.planning.planner.Plan` for display."""
    X = np.asarray(plan.workpiece_pose, dtype=float)
    R, o = X[:3, :3], X[:3, 3]
    out = []
    for p, tcp in zip(plan.passes, plan.tcp_positions, strict=True):
        tcp = np.asarray(tcp, dtype=float)
        arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(tcp, axis=0), axis=1))]
        out.append(PassTrace(int(p.index), np.asarray(p.points, dtype=float) @ R.T + o, arc))
    return out


def status_anchor(plan: Any) -> FloatArray:
    """Where the status text goes (3,) m, root frame: :data:`TEXT_LIFT` above the passes' centroid
    along their mean outward normal."""
    X = np.asarray(plan.workpiece_pose, dtype=float)
    pts = np.vstack([p.points for p in plan.passes]) @ X[:3, :3].T + X[:3, 3]
    n = np.sum(np.vstack([p.normals for p in plan.passes]), axis=0) @ X[:3, :3].T
    norm = float(np.linalg.norm(n))
    up = n / norm if norm > 0 else np.array([0.0, 0.0, 1.0])
    return pts.mean(axis=0) + TEXT_LIFT * up


@dataclass
class ProgressView:
    """What has been ground, from the ``/grinding/progress`` samples in order.

    Passes run in order: a sample on pass k completes every pass before it; :meth:`finish`
    completes them all (the job ran to its end). A stopped job leaves its pass partly ground.
    """

    traces: list[PassTrace]
    current: int = -1
    reached: float = 0.0
    complete: set[int] = field(default_factory=set)

    def update(self, pass_index: int, arc: float) -> None:
        """One progress sample (pass index, TCP arc m); index -1 (off the passes) changes nothing."""
        if pass_index < 0:
            return
        if pass_index != self.current:
            self.complete.update(t.index for t in self.traces if t.index < pass_index)
            self.current, self.reached = pass_index, 0.0
        self.reached = max(self.reached, float(arc))

    def finish(self) -> None:
        self.complete.update(t.index for t in self.traces)

    def lines(self) -> list[tuple[int, FloatArray]]:
        """(pass index, ground points (k, 3)) of every pass with something ground (k >= 2)."""
        out = []
        for t in self.traces:
            if t.index in self.complete:
                out.append((t.index, t.points.copy()))
            elif t.index == self.current:
                pts = t.ground(self.reached)
                if len(pts) >= 2:
                    out.append((t.index, pts))
        return out

    def text(self, state: str, pass_index: int = -1, arc: float = 0.0) -> str:
        """The status line: the job's state and where it is (``pass_index`` -1: between passes)."""
        n = len(self.traces)
        by_index = {t.index: t for t in self.traces}
        if pass_index >= 0 and pass_index in by_index:
            t = by_index[pass_index]
            return f"{state}: pass {pass_index + 1}/{n}, {arc * 1e3:.1f} / {t.length * 1e3:.1f} mm"
        return f"{state}: {len(self.complete)}/{n} passes ground"

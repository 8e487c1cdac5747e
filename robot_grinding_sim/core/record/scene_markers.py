"""The scene for viewers as ``rosbags`` messages: the part, the passes, the removal map and the
robot description, the same topics, namespaces and colours the node graph publishes; ROS-free.

A bag with these and ``/tf`` (:mod:`robot_grinding_sim.core.record.tf_tree`) replays the job in
Foxglove (or RViz after ``ros2 bag play``) where no ROS is installed:

- ``/planner_node/markers`` (visualization_msgs/MarkerArray, frame the robot's root link):
  namespace ``part`` (the tessellated part, one TRIANGLE_LIST, grey) and ``passes`` (one
  LINE_STRIP of surface points per pass, blue, 1 mm wide), as planner_node publishes them;
- ``/grinding/removal`` (MarkerArray): the removal map's display mesh, one TRIANGLE_LIST
  vertex-coloured by depth (black at 0 through red and yellow to white at the largest), as
  contact_solver_node publishes it;
- ``/grinding/progress_markers`` (MarkerArray): the ground part of each pass and the status text,
  as grinding_executive publishes them (:mod:`robot_grinding_sim.core.record.progress_view`);
- ``/robot_description`` (std_msgs/String): the URDF text;
- ``/contact/force_marker`` (visualization_msgs/Marker, ns ``force``): the contact force on the
  tool as an ARROW from the contact point, :data:`FORCE_ARROW_SCALE` m per N, red as RViz's Wrench
  display draws ``/contact/wrench`` (Foxglove's 3D panel has no wrench display); a DELETE while
  there is no contact. The in-process job's bag only: the graph has ``/contact/wrench`` for RViz.

Positions in m, in the frame given (every marker here is in the robot's root link, ``base_link``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

MARKER_ARRAY_TYPE = "visualization_msgs/msg/MarkerArray"
STRING_TYPE = "std_msgs/msg/String"
PLANNER_MARKERS_TOPIC = "/planner_node/markers"
REMOVAL_TOPIC = "/grinding/removal"
PROGRESS_MARKERS_TOPIC = "/grinding/progress_markers"
DESCRIPTION_TOPIC = "/robot_description"
FORCE_MARKER_TOPIC = "/contact/force_marker"
MARKER_TYPE = "visualization_msgs/msg/Marker"

#: visualization_msgs/Marker type and action constants (the message's own values)
ARROW, LINE_STRIP, TEXT_VIEW_FACING, TRIANGLE_LIST = 0, 4, 9, 11
ADD, DELETE, DELETEALL = 0, 2, 3
PART_COLOUR = (0.75, 0.75, 0.78, 1.0)
PASS_COLOUR = (0.0, 0.0, 1.0, 1.0)
PASS_WIDTH = 0.001
FORCE_COLOUR = (0.8, 0.2, 0.2, 1.0)
#: length of the force arrow per newton, m/N (5 N: 5 cm)
FORCE_ARROW_SCALE = 0.01


def depth_colours(depth: FloatArray) -> FloatArray:
    """RGBA (K, 4) in [0, 1] per depth value (K,): black at 0, red, yellow, white at the largest."""
    d = np.asarray(depth, dtype=float)
    top = float(np.max(d)) if d.size else 0.0
    x = np.clip(d / (top or 1.0), 0.0, 1.0)
    return np.column_stack([np.clip(3 * x, 0, 1), np.clip(3 * x - 1, 0, 1), np.clip(3 * x - 2, 0, 1), np.ones_like(x)])


def triangle_points(vertices: FloatArray, faces: NDArray[np.int64], X: FloatArray | None = None) -> FloatArray:
    """Corner positions (3 F, 3) of triangles ``faces`` (F, 3) over ``vertices`` (V, 3), moved by
    the pose ``X`` (4, 4) if given: the ``points`` of a TRIANGLE_LIST marker."""
    P = np.asarray(vertices, dtype=float)[np.asarray(faces, dtype=np.int64).ravel()]
    if X is not None:
        P = P @ X[:3, :3].T + X[:3, 3]
    return P


class SceneMessages:
    """Builds the messages of the module docstring with a ``rosbags`` type store.

    Args:
        typestore: the bag's type store (ROS 2 Kilted's by default in
            :class:`~robot_grinding_sim.core.record.bagwriter.BagWriter`).
        frame: frame of every marker (the robot's root link).
    """

    def __init__(self, typestore: Any, frame: str) -> None:
        self.typestore = typestore
        self.frame = frame
        self.types = typestore.types

    def stamp(self, stamp_ns: int) -> Any:
        return self.types["builtin_interfaces/msg/Time"](sec=int(stamp_ns // 1_000_000_000),
                                                         nanosec=int(stamp_ns % 1_000_000_000))

    def marker(self, ns: str, mid: int, kind: int, stamp_ns: int, points: FloatArray | None = None,
               colour: Sequence[float] = (1.0, 1.0, 1.0, 1.0), colours: FloatArray | None = None,
               scale: float | Sequence[float] = 1.0, action: int = ADD, text: str = "",
               position: Sequence[float] = (0.0, 0.0, 0.0)) -> Any:
        """One visualization_msgs/Marker: pose at ``position`` (m, no rotation), ``points`` (K, 3) m
        (None: none), ``colour`` RGBA or per-point ``colours`` (K, 4), ``scale`` (line width of a
        LINE_STRIP, 1 for triangles; x y z for an ARROW: shaft and head diameter, head length, m; z
        the letter height of a text), ``text`` (TEXT_VIEW_FACING), no lifetime limit."""
        T = self.types
        P, C = T["geometry_msgs/msg/Point"], T["std_msgs/msg/ColorRGBA"]
        rgba = [float(c) for c in colour]
        sx, sy, sz = [float(scale)] * 3 if np.ndim(scale) == 0 else [float(v) for v in scale]  # type: ignore[union-attr]
        xyz = np.zeros((0, 3)) if points is None else np.asarray(points, dtype=float).reshape(-1, 3)
        pts = [P(x, y, z) for x, y, z in xyz.tolist()]  # Python floats (tolist): 5x faster than per element
        cols = [] if colours is None else [C(r, g, b, a)
                                           for r, g, b, a in np.asarray(colours, dtype=float).reshape(-1, 4).tolist()]
        return T["visualization_msgs/msg/Marker"](
            header=T["std_msgs/msg/Header"](stamp=self.stamp(stamp_ns), frame_id=self.frame),
            ns=ns, id=int(mid), type=int(kind), action=int(action),
            pose=T["geometry_msgs/msg/Pose"](position=P(x=float(position[0]), y=float(position[1]),
                                                        z=float(position[2])),
                                             orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)),
            scale=T["geometry_msgs/msg/Vector3"](x=sx, y=sy, z=sz),
            color=C(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3]),
            lifetime=T["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
            frame_locked=False, points=pts, colors=cols, texture_resource="",
            texture=T["sensor_msgs/msg/CompressedImage"](
                header=T["std_msgs/msg/Header"](stamp=self.stamp(0), frame_id=""), format="",
                data=np.zeros(0, dtype=np.uint8)),
            uv_coordinates=[], text=text, mesh_resource="",
            mesh_file=T["visualization_msgs/msg/MeshFile"](filename="", data=np.zeros(0, dtype=np.uint8)),
            mesh_use_embedded_materials=False)

    def marker_array(self, markers: Iterable[Any]) -> Any:
        return self.types[MARKER_ARRAY_TYPE](markers=list(markers))

    def plan_markers(self, stamp_ns: int, part_triangles: FloatArray | None,
                     passes: Sequence[FloatArray]) -> Any:
        """planner_node's ``part`` and ``passes`` markers: a DELETEALL, the part's triangle corners
        (3 F, 3) (None: no part marker), one LINE_STRIP per pass of its surface points (N_i, 3)."""
        out = [self.marker("", 0, 0, stamp_ns, action=DELETEALL)]
        for k, pts in enumerate(passes):
            out.append(self.marker("passes", k, LINE_STRIP, stamp_ns, pts, PASS_COLOUR, scale=PASS_WIDTH))
        if part_triangles is not None and len(part_triangles):
            out.append(self.marker("part", 0, TRIANGLE_LIST, stamp_ns, part_triangles, PART_COLOUR))
        return self.marker_array(out)

    def removal_markers(self, stamp_ns: int, vertices: FloatArray, triangles: NDArray[np.int64],
                        depth: FloatArray) -> Any:
        """contact_solver_node's ``removal`` marker: the display mesh (vertices (M, 3) m, triangles
        (T, 3), depth (M,) m) as one vertex-coloured TRIANGLE_LIST."""
        idx = np.asarray(triangles, dtype=np.int64).ravel()
        pts = np.asarray(vertices, dtype=float)[idx]
        cols = depth_colours(np.asarray(depth, dtype=float))[idx]
        return self.marker_array([self.marker("removal", 0, TRIANGLE_LIST, stamp_ns, pts, colours=cols)])

    def progress_markers(self, stamp_ns: int, lines: Sequence[tuple[int, FloatArray]], anchor: FloatArray,
                         text: str) -> Any:
        """grinding_executive's ``grinding/progress_markers``
        (:mod:`~robot_grinding_sim.core.record.progress_view`): a DELETEALL, one ``ground``
        LINE_STRIP per (pass index, points (k, 3)) and the ``status`` text at ``anchor`` (3,)."""
        from robot_grinding_sim.core.record import progress_view as pv

        out = [self.marker("", 0, 0, stamp_ns, action=DELETEALL)]
        for index, pts in lines:
            out.append(self.marker("ground", index, LINE_STRIP, stamp_ns, pts, pv.GROUND_COLOUR, scale=pv.GROUND_WIDTH))
        out.append(self.marker("status", 0, TEXT_VIEW_FACING, stamp_ns, colour=pv.TEXT_COLOUR,
                               scale=(0.0, 0.0, pv.TEXT_HEIGHT), text=text, position=anchor))
        return self.marker_array(out)

    def progress_markers_cdr(self, stamp_ns: int, lines: Sequence[tuple[int, FloatArray]], anchor: FloatArray,
                             text: str, fixed: Iterable[int] = (), cache: dict[Any, bytes] | None = None) -> bytes:
        """``serialize(progress_markers(...))``, the same bytes, where the ``ground`` marker of a pass
        in ``fixed`` (its points do not change any more) is serialized once per alignment into
        ``cache`` and only restamped: a job's progress markers repeat every finished pass."""
        from robot_grinding_sim.core.record import progress_view as pv

        cache = {} if cache is None else cache
        fixed = set(fixed)
        items: list[tuple[Any, Any]] = [(None, lambda: self.marker("", 0, 0, stamp_ns, action=DELETEALL))]
        for index, pts in lines:
            items.append((index if index in fixed else None, lambda index=index, pts=pts: self.marker(
                "ground", index, LINE_STRIP, stamp_ns, pts, pv.GROUND_COLOUR, scale=pv.GROUND_WIDTH)))
        items.append((None, lambda: self.marker("status", 0, TEXT_VIEW_FACING, stamp_ns, colour=pv.TEXT_COLOUR,
                                                scale=(0.0, 0.0, pv.TEXT_HEIGHT), text=text, position=anchor)))
        stamp = (int(stamp_ns // 1_000_000_000).to_bytes(4, "little", signed=True)
                 + int(stamp_ns % 1_000_000_000).to_bytes(4, "little"))
        out = bytearray(b"\x00\x01\x00\x00" + len(items).to_bytes(4, "little"))
        for key, make in items:
            out += bytes(-(len(out) - 4) % 4)  # a Marker starts 4-aligned (CDR: from the end of the 4-byte header)
            parity = (len(out) - 4) % 8
            if key is not None and (key, parity) in cache:
                out += stamp + cache[key, parity][8:]
                continue
            marker = make()
            if parity == 0:
                data = bytes(self.typestore.serialize_cdr(marker, MARKER_TYPE))[4:]
            else:  # the only marker of an array: it starts at 4 mod 8
                data = bytes(self.typestore.serialize_cdr(self.marker_array([marker]), MARKER_ARRAY_TYPE))[8:]
            if key is not None:
                cache[key, parity] = data
            out += data
        return bytes(out)

    def force_arrow(self, stamp_ns: int, point: FloatArray, force: FloatArray) -> Any:
        """The ``force`` marker: an ARROW from ``point`` (3,) m along ``force`` (3,) N, both in the
        marker frame; a DELETE for a force below 1 uN."""
        f = np.asarray(force, dtype=float)
        if not np.linalg.norm(f) > 1e-6:
            return self.marker("force", 0, ARROW, stamp_ns, action=DELETE)
        p = np.asarray(point, dtype=float)
        return self.marker("force", 0, ARROW, stamp_ns, np.vstack([p, p + FORCE_ARROW_SCALE * f]), FORCE_COLOUR,
                           scale=(0.002, 0.004, 0.006))

    def description(self, urdf: str) -> Any:
        """std_msgs/String holding the URDF text."""
        return self.types[STRING_TYPE](data=urdf)

    def serialize(self, msg: Any, msgtype: str) -> bytes:
        return bytes(self.typestore.serialize_cdr(msg, msgtype))

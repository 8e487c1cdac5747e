"""The removal map as messages: what contact_solver_node publishes and the in-process job's bag holds.

Two standard messages carry a :class:`~robot_grinding_sim.core.contact.preston.RemovalGrid` (the
job's grid, :func:`~robot_grinding_sim.core.job.removal.pass_grid`) and its depth, so a bag can be
read back into the map without the plan:

- :data:`NODES_TOPIC` (sensor_msgs/PointCloud2, latched, frame ``base_link``; once): one point per
  node of the grid, unordered (height 1), the fields of :data:`NODE_FIELDS` packed as little-endian
  float64: the node (x, y, z, m), its outward unit normal, the surface area it stands for (m^2),
  its face index, its (row, col) in that face's (u, v) layout (rows along v, columns along u) and
  ``inside`` (1 on the trimmed face, 0 a node kept only to hold the layout regular). Nodes of one
  face are contiguous and row-major: the face's rows x cols block.
- :data:`DEPTH_TOPIC` (std_msgs/Float64MultiArray): the depth removed so far at each node, m, in the
  order of the nodes message (``layout.dim``: one dimension labelled :data:`DEPTH_LABEL`, size and
  stride the node count). The last message is the map at the end of the run.

No ROS import here: the job writes them with ``rosbags`` (:func:`write_removal_map`) and any bag is
read with :func:`read_removal_map`; the node builds the same rows with :func:`node_table`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.contact.preston import RemovalGrid
from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

NODES_TOPIC = "/grinding/removal_nodes"
DEPTH_TOPIC = "/grinding/removal_depth"
NODES_TYPE = "sensor_msgs/msg/PointCloud2"
DEPTH_TYPE = "std_msgs/msg/Float64MultiArray"
#: the fields of the nodes message, in order (each a little-endian float64)
NODE_FIELDS = ("x", "y", "z", "normal_x", "normal_y", "normal_z", "area", "face", "row", "col", "inside")
#: label of the depth message's one layout dimension
DEPTH_LABEL = "node"


def node_table(grid: RemovalGrid) -> FloatArray:
    """(N, len(NODE_FIELDS)) the nodes message's rows of ``grid`` (see the module docstring); the
    nodes of a grid without a (u, v) layout have row and col -1, a face not known is -1."""
    n = len(grid.points)
    face, row, col = np.full(n, -1.0), np.full(n, -1.0), np.full(n, -1.0)
    for f, off, rows, cols in grid.blocks:
        k = np.arange(rows * cols)
        face[off:off + rows * cols], row[off:off + rows * cols], col[off:off + rows * cols] = f, k // cols, k % cols
    if grid.node_face is not None:
        face = grid.node_face.astype(float)
    normals = grid.normals if grid.normals is not None else np.full((n, 3), np.nan)
    return np.column_stack([grid.points, normals, grid.areas, face, row, col, grid.inside.astype(float)])


def grid_from_table(table: FloatArray, depth: FloatArray | None = None, preston_coefficient: float = 1e-12,
                    pressure: str = "hertz") -> RemovalGrid:
    """The :class:`RemovalGrid` of a nodes message's rows (N, len(NODE_FIELDS)) with ``depth`` (N,)
    m: its faces' (u, v) blocks from the face/row/col fields (a face's nodes contiguous, row-major,
    as :func:`node_table` writes them). InputError naming the problem for rows that are not such a
    layout."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[1] != len(NODE_FIELDS) or len(t) == 0:
        raise InputError(f"removal map: expected (N, {len(NODE_FIELDS)}) node rows {list(NODE_FIELDS)}, "
                         f"got {t.shape}")
    face, row, col = (t[:, 7 + j].astype(np.int64) for j in range(3))
    normals = None if np.isnan(t[:, 3:6]).any() else t[:, 3:6]
    blocks, off = [], 0
    starts = np.r_[0, np.flatnonzero(np.diff(face) != 0) + 1, len(t)]
    layout = bool(np.all(row >= 0))
    for a, b in zip(starts[:-1], starts[1:], strict=True) if layout else ():
        rows, cols = int(row[b - 1]) + 1, int(col[b - 1]) + 1
        k = np.arange(b - a)
        if rows * cols != b - a or not (np.array_equal(row[a:b], k // cols) and np.array_equal(col[a:b], k % cols)):
            raise InputError(f"removal map: the nodes of face {int(face[a])} (rows {a}..{b - 1}) are not a row-major "
                             f"(u, v) layout")
        blocks.append((int(face[a]), off, rows, cols))
        off = b
    grid = RemovalGrid(t[:, :3], t[:, 6], normals, (blocks[0][2], blocks[0][3]) if len(blocks) == 1 else None,
                       preston_coefficient=preston_coefficient, pressure=pressure)
    grid.blocks = blocks
    if np.all(face >= 0):
        grid.node_face = face.copy()
    grid.inside = t[:, 10] > 0.5
    if depth is not None:
        d = np.asarray(depth, dtype=float).reshape(-1)
        if d.shape != (len(t),):
            raise InputError(f"removal map: {len(d)} depths for {len(t)} nodes")
        grid.depth = d.copy()
    return grid


def write_removal_map(bag: Any, grid: RemovalGrid, frame_id: str, stamp_ns: int) -> None:
    """Add :data:`NODES_TOPIC` (latched) and one :data:`DEPTH_TOPIC` message (the grid's depth) at
    ``stamp_ns`` to an open :class:`~robot_grinding_sim.core.record.bagwriter.BagWriter`."""
    from robot_grinding_sim.core.record.bagwriter import TopicQos

    ts = bag.typestore
    Header, Time = ts.types["std_msgs/msg/Header"], ts.types["builtin_interfaces/msg/Time"]
    PointCloud2, PointField = ts.types[NODES_TYPE], ts.types["sensor_msgs/msg/PointField"]
    table = node_table(grid)
    k = len(NODE_FIELDS)
    stamp = Time(sec=int(stamp_ns // 1_000_000_000), nanosec=int(stamp_ns % 1_000_000_000))
    cloud = PointCloud2(
        header=Header(stamp=stamp, frame_id=frame_id), height=1, width=len(table),
        fields=[PointField(name=f, offset=8 * j, datatype=8, count=1) for j, f in enumerate(NODE_FIELDS)],
        is_bigendian=False, point_step=8 * k, row_step=8 * k * len(table),
        data=np.frombuffer(np.ascontiguousarray(table, dtype="<f8").tobytes(), dtype=np.uint8), is_dense=False)
    bag.add_topic(NODES_TOPIC, NODES_TYPE, qos=[TopicQos(reliable=True, transient_local=True, depth=1)])
    bag.write(NODES_TOPIC, int(stamp_ns), bytes(ts.serialize_cdr(cloud, NODES_TYPE)))
    bag.add_topic(DEPTH_TOPIC, DEPTH_TYPE)
    bag.write(DEPTH_TOPIC, int(stamp_ns), bytes(ts.serialize_cdr(depth_message(ts, grid.depth), DEPTH_TYPE)))


def depth_message(typestore: Any, depth: FloatArray) -> Any:
    """The :data:`DEPTH_TOPIC` message (a ``rosbags`` object of ``typestore``) of ``depth`` (N,) m."""
    Layout, Dim = typestore.types["std_msgs/msg/MultiArrayLayout"], typestore.types["std_msgs/msg/MultiArrayDimension"]
    d = np.ascontiguousarray(depth, dtype=np.float64)
    return typestore.types[DEPTH_TYPE](
        layout=Layout(dim=[Dim(label=DEPTH_LABEL, size=len(d), stride=len(d))], data_offset=0), data=d)


def read_removal_map(path: str | os.PathLike[str], preston_coefficient: float = 1e-12, pressure: str = "hertz"
                     ) -> tuple[RemovalGrid, int]:
    """(the grid of the bag's last :data:`NODES_TOPIC` message with the depth of its last
    :data:`DEPTH_TOPIC` message, that message's log time in ns). InputError naming the bag when it
    has no such map or the two do not match."""
    from robot_grinding_sim.core.record.bag import read_messages

    table, depth, t_last = None, None, -1
    for _, msg in read_messages(path, NODES_TOPIC, (NODES_TYPE,), "the removal map's nodes"):
        table = cloud_rows(msg, path)
    for t_ns, msg in read_messages(path, DEPTH_TOPIC, (DEPTH_TYPE,), "the removal map's depths"):
        depth, t_last = msg.data, t_ns
    depth = None if depth is None else np.asarray(depth, dtype=float)
    if table is None or depth is None:
        raise InputError(f"bag {path}: no removal map ({NODES_TOPIC} and {DEPTH_TOPIC})")
    if len(depth) != len(table):
        raise InputError(f"bag {path}: {DEPTH_TOPIC} has {len(depth)} depths for the {len(table)} nodes of "
                         f"{NODES_TOPIC}")
    return grid_from_table(table, depth, preston_coefficient, pressure), t_last


def cloud_rows(msg: Any, what: Any = "removal map") -> FloatArray:
    """(N, len(NODE_FIELDS)) of a nodes message (the packed float64 layout of the module docstring)."""
    k = len(NODE_FIELDS)
    names = [(f.name, int(f.offset), int(f.datatype)) for f in msg.fields]
    n = int(msg.width) * int(msg.height)
    raw = np.asarray(msg.data, dtype=np.uint8).tobytes()
    if names != [(f, 8 * j, 8) for j, f in enumerate(NODE_FIELDS)] or msg.is_bigendian or len(raw) != 8 * k * n:
        raise InputError(f"{what}: {NODES_TOPIC} is not the packed float64 fields {list(NODE_FIELDS)}")
    return np.frombuffer(raw, dtype="<f8").reshape(n, k).astype(float)

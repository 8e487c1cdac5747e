"""What a 3D viewer needs to replay the in-process job, written into its bag (no ROS needed).

:func:`write_viewer_topics` adds to the job's rosbag2 (:func:`robot_grinding_sim.core.job.outputs.write_bag`):

- ``/robot_description`` (std_msgs/String): the URDF text, at the first stamp;
- ``/tf_static`` (tf2_msgs/msg/TFMessage): the URDF's fixed joints and ``base_link -> workpiece``
  (the part's pose X_BP), at the first stamp; ``/tf``: the moving joints from the recorded joint
  positions, :data:`~robot_grinding_sim.core.record.tf_tree.DEFAULT_TF_RATE` Hz, each with the
  stamp of its ``/joint_states`` message (:mod:`robot_grinding_sim.core.record.tf_tree`);
- ``/planner_node/markers`` (visualization_msgs/MarkerArray, frame ``base_link``): the part
  (TRIANGLE_LIST of its tessellation at ``workpiece.deflection``) and one LINE_STRIP per pass, as
  planner_node publishes them, at the first stamp;
- ``/grinding/progress_markers`` (MarkerArray): the ground part of each pass and the status text,
  5 Hz of sim time (``marker_rate``), as grinding_executive publishes them;
- ``/grinding/removal`` (MarkerArray): the final removal map (Preston, when ``removal.enabled``)
  as contact_solver_node draws it, at the last stamp; and the map itself as contact_solver_node
  publishes it, ``/grinding/removal_nodes`` and ``/grinding/removal_depth``
  (:mod:`robot_grinding_sim.core.record.removal_map`: the grid's nodes and their depths);
- ``/contact/force_marker`` (visualization_msgs/Marker, frame ``base_link``): the contact force on
  the tool (``/contact/wrench`` in base axes) as an arrow from the contact point, 1 cm per N, with
  every ``/tf`` (Foxglove's 3D panel draws no WrenchStamped).

Opened in Foxglove (3D panel: a URDF layer from topic ``/robot_description``, the marker topics
on), the bag shows the arm grinding the part, the passes, the contact force (``/contact/wrench``,
frame ``tcp``) and at the end the removal map.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.record.cdr_batch import BLOCK
from robot_grinding_sim.core.record.progress_view import MARKER_RATE
from robot_grinding_sim.core.record.scene_markers import (
    DESCRIPTION_TOPIC,
    FORCE_MARKER_TOPIC,
    MARKER_ARRAY_TYPE,
    MARKER_TYPE,
    PLANNER_MARKERS_TOPIC,
    PROGRESS_MARKERS_TOPIC,
    REMOVAL_TOPIC,
    STRING_TYPE,
    SceneMessages,
    triangle_points,
)
from robot_grinding_sim.core.record.tf_tree import (
    DEFAULT_TF_RATE,
    TF_STATIC_TOPIC,
    TF_TOPIC,
    RobotTf,
    TfStream,
    add_tf_topics,
)
from robot_grinding_sim.core.sim.held_part import PART_FRAME, output_frame, part_transforms

#: frame of the part (its pose in the robot's root link: workpiece.pose / the plan's)
WORKPIECE_FRAME = PART_FRAME
#: cell of the removal map's display mesh, m (contact_solver_node's removal_marker_cell default)
REMOVAL_DISPLAY_CELL = 0.001


def part_mesh(part: Any, deflection: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(vertices (V, 3) m, faces (F, 3)) of the whole part in its own frame, or None."""
    mesh = part.tessellate(deflection=deflection) if hasattr(part, "tessellate") else getattr(part, "mesh", None)
    if mesh is None:
        return None
    return np.asarray(mesh.vertices, dtype=float), np.asarray(mesh.faces, dtype=np.int64)


def write_viewer_topics(bag: Any, result: Any, tf_rate: float = DEFAULT_TF_RATE) -> None:
    """Add the module docstring's topics to an open BagWriter ``bag`` for a job ``result``
    (:class:`~robot_grinding_sim.core.job.run.JobResult`); stamps are sim time from 0 (ns)."""
    from robot_grinding_sim.core.record.bagwriter import TopicQos

    setup = result.setup
    model, rec = setup.model, result.record
    urdf = Path(model.source).read_text()
    X_BP = np.asarray(setup.X_BP, dtype=float)
    root = output_frame(model)  # a held part's: its nominal frame (sim/held_part.py)
    latched = [TopicQos(reliable=True, transient_local=True, depth=1)]
    scene = SceneMessages(bag.typestore, root)
    stamps = np.round(np.asarray(rec["ts"], dtype=float) * 1e9).astype(np.int64)
    t0 = int(stamps[0]) if len(stamps) else 0

    bag.add_topic(DESCRIPTION_TOPIC, STRING_TYPE, qos=latched)
    bag.write(DESCRIPTION_TOPIC, t0, scene.serialize(scene.description(urdf), STRING_TYPE))

    add_tf_topics(bag)
    stream = TfStream(RobotTf(model, urdf, part_transforms(model, X_BP)), bag.typestore, tf_rate)
    tf_steps: list[int] = []
    for s in range(0, len(stamps), BLOCK):
        e = min(len(stamps), s + BLOCK)
        static, idx, rows = stream.add_many(stamps[s:e], rec["q"][s:e])
        if static is not None:
            bag.write(TF_STATIC_TOPIC, int(stamps[s]), static)
        bag.write_many([TF_TOPIC], stamps[s:e][idx], [rows])
        tf_steps += (s + idx).tolist()
    write_force_arrows(bag, scene, result, stamps, tf_steps)

    mesh = part_mesh(setup.part, setup.cell.workpiece.deflection)
    tris = None if mesh is None else triangle_points(mesh[0], mesh[1], X_BP)
    passes = [p.points @ X_BP[:3, :3].T + X_BP[:3, 3] for p in setup.plan.passes]
    bag.add_topic(PLANNER_MARKERS_TOPIC, MARKER_ARRAY_TYPE, qos=latched)
    bag.write(PLANNER_MARKERS_TOPIC, t0, scene.serialize(scene.plan_markers(t0, tris, passes), MARKER_ARRAY_TYPE))

    write_progress_markers(bag, scene, result, latched)

    removal = getattr(result, "removal", None)
    if removal is not None:
        from robot_grinding_sim.core.record.removal_map import write_removal_map

        t1 = int(stamps[-1]) if len(stamps) else 0
        write_removal_map(bag, removal[0], root, t1)
        V, T, depth = removal[0].display_mesh(REMOVAL_DISPLAY_CELL)
        if len(T):
            bag.add_topic(REMOVAL_TOPIC, MARKER_ARRAY_TYPE, qos=latched)
            bag.write(REMOVAL_TOPIC, t1, scene.serialize(scene.removal_markers(t1, V, T, depth), MARKER_ARRAY_TYPE))


def write_progress_markers(bag: Any, scene: SceneMessages, result: Any, qos: Any,
                           rate: float = MARKER_RATE) -> None:
    """``/grinding/progress_markers`` at ``rate`` Hz of sim time from the job's progress samples, and
    once at the end (every pass ground, ``done``)."""
    from robot_grinding_sim.core.planning.trajectory import progress_samples
    from robot_grinding_sim.core.record.progress_view import ProgressView, pass_traces, status_anchor

    plan = result.setup.plan
    view, anchor = ProgressView(pass_traces(plan)), status_anchor(plan)
    bag.add_topic(PROGRESS_MARKERS_TOPIC, MARKER_ARRAY_TYPE, qos=qos)

    cache: dict = {}  # finished passes' markers, serialized once

    def put(t: float, text: str) -> None:
        ns = int(round(t * 1e9))
        bag.write(PROGRESS_MARKERS_TOPIC, ns, scene.progress_markers_cdr(ns, view.lines(), anchor, text,
                                                                         view.complete, cache))

    samples = progress_samples(result.trajectory)
    last = -math.inf
    for t, idx, arc in samples:
        view.update(int(idx), float(arc))
        if t - last >= 1.0 / rate:
            put(float(t), view.text("running", int(idx), float(arc)))
            last = float(t)
    view.finish()
    put(float(result.trajectory.times[-1]), view.text("done"))


def write_force_arrows(bag: Any, scene: SceneMessages, result: Any, stamps: np.ndarray, steps: list[int]) -> None:
    """``/contact/force_marker`` at the joint-state ``steps`` (indices into ``stamps``, ns): the
    contact force of the output sample at that time, from the contact point (tcp + lever)."""
    rec = result.record
    model, tcp = result.setup.model, result.setup.cell.tool.tcp_link
    t_ns = np.round(np.asarray(rec["t"], dtype=float) * 1e9).astype(np.int64)
    bag.add_topic(FORCE_MARKER_TOPIC, MARKER_TYPE)
    for step in steps:
        ns = int(stamps[step])
        k = int(np.searchsorted(t_ns, ns))
        if k >= len(t_ns) or t_ns[k] != ns:
            continue  # no force sample at this stamp (an output period that is not the step)
        j = int(rec["step_index"][k])
        point = model.fk(rec["q"][j], tcp)[:3, 3] + rec["lever"][j]
        bag.write(FORCE_MARKER_TOPIC, ns, scene.serialize(scene.force_arrow(ns, point, rec["force"][k]), MARKER_TYPE))

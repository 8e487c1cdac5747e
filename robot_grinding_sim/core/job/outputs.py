"""Outputs of the simulated grinding job: rosbag2 (MCAP), force plot, summary.json, plan.json.

Everything is written into a temporary directory next to ``out`` and renamed into place at the
end (:func:`write_outputs`), so a failure leaves nothing partial.

Bag topics (sim time from 0):

- ``/joint_states`` (sensor_msgs/JointState: position, velocity, effort) every step;
- ``/contact/wrench`` (geometry_msgs/WrenchStamped, frame ``tcp``): the contact wrench on the tool
  (normal + tangential force, torque about the tcp), every output sample (1 kHz by default);
- ``/ft_sensor/wrench`` (WrenchStamped, frame ``ft_sensor``): the F/T sensor model's reading of it
  (core.ft: moved to the sensor frame; bias/noise/filter as configured), same samples;
- ``/grinding/progress`` (std_msgs/Float64MultiArray, ``[pass_index, arc_length_m, stamp_s]``,
  docs/compare.md) at 100 Hz on passes, -1 elsewhere;
- ``/dynamics_node/tool_pose`` (geometry_msgs/PoseStamped, frame ``base_link``) every step;
- for 3D viewers (Foxglove, RViz after ``ros2 bag play``; :mod:`robot_grinding_sim.core.job.viewer`):
  ``/robot_description`` (the URDF), ``/tf_static`` and ``/tf`` (tf2_msgs/msg/TFMessage: fixed
  joints and ``base_link -> workpiece``; moving joints at 100 Hz from the joint states),
  ``/planner_node/markers`` (the part and the passes) and ``/grinding/removal`` (the final
  removal map, when it is computed).

``plan.json`` is the plan that ran (passes, the job trajectory with the per-pass offsets, the
predicted mean forces, the cell configuration): ``grinding simulate --plan`` runs it again and a
cell executes it unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.jsonsafe import json_safe
from robot_grinding_sim.core.record.cdr_batch import BLOCK

TOPICS = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/contact/wrench": "geometry_msgs/msg/WrenchStamped",
    "/ft_sensor/wrench": "geometry_msgs/msg/WrenchStamped",
    "/grinding/progress": "std_msgs/msg/Float64MultiArray",
    "/dynamics_node/tool_pose": "geometry_msgs/msg/PoseStamped",
}


def check_out_dir(out: Path) -> None:
    """The output directory may exist (and be empty of our files) or be new; its parent must exist."""
    from robot_grinding_sim.core.outfiles import check_output

    out = Path(out)
    check_output(out, "--out", kind="dir")  # a folder through a file, a read-only file system
    if (out / "bag").exists():
        raise InputError(f"output {out / 'bag'} exists already; choose a new --out or remove it")


def tcp_poses(result: Any, steps: Any = slice(None)) -> np.ndarray:
    """The tcp pose (S, 4, 4) in base_link after the run's ``steps`` (a slice or indices; default
    every step)."""
    model, tcp = result.setup.model, result.setup.cell.tool.tcp_link
    q = np.asarray(result.record["q"], dtype=np.float64).reshape(-1, model.nq)[steps]
    return model.fk(q, tcp) if len(q) else np.zeros((0, 4, 4))


def ft_readings(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """(contact wrenches in tcp (K, 6), F/T readings in ft_sensor (K, 6)) at the output samples,
    with the tool's orientation at each sample's step end (:func:`tcp_poses`).

    The sensor model is the cell's (:func:`~robot_grinding_sim.core.sim.ft.ft_sensor_model`: the
    tool's mass from the URDF, bias, noise, filter), the same builder contact_solver_node uses; a
    sensor that carries a held part takes the arm's kinematics at each sample (``sensor_inputs``).
    """
    from robot_grinding_sim.core.sim.ft import ft_sensor_model, sensor_inputs

    rec = result.record
    model, frame = result.setup.model, result.setup.cell.ft_sensor.frame
    ft = ft_sensor_model(result.setup.cell, model)
    q = np.asarray(rec["q"], dtype=np.float64).reshape(-1, model.nq)
    K = len(rec["t"])
    w_tcp, out = np.empty((K, 6)), np.empty((K, 6))
    for s in range(0, K, BLOCK):
        e = min(K, s + BLOCK)
        steps = rec["step_index"][s:e]
        R = tcp_poses(result, steps)[:, :3, :3]
        w_tcp[s:e, :3] = np.einsum("kji,kj->ki", R, rec["force"][s:e])  # R^T f
        w_tcp[s:e, 3:] = np.einsum("kji,kj->ki", R, rec["torque"][s:e])
        R_WS, X_S_tcp = sensor_inputs(ft, model, frame, q[steps], R)
        out[s:e] = ft.measure_many(w_tcp[s:e], R_WS, rec["t"][s:e], X_S_tcp)
    return w_tcp, out


def stamps_ns(t: np.ndarray) -> np.ndarray:
    """Times (s) as integer ns, rounded to nearest (even on ties, as ``round``)."""
    return np.round(np.asarray(t, dtype=np.float64) * 1e9).astype(np.int64)


def write_bag(path: Path, result: Any, w_tcp: np.ndarray, w_ft: np.ndarray) -> dict[str, int]:
    """Write the job's bag (see the module docstring); returns message counts per topic."""
    from robot_grinding_sim.core.planning.trajectory import progress_samples
    from robot_grinding_sim.core.record import cdr_batch
    from robot_grinding_sim.core.record.bagwriter import BagWriter
    from robot_grinding_sim.core.sim.held_part import output_frame

    rec = result.record
    model = result.setup.model
    with BagWriter(path, storage="mcap") as bag:
        for topic, typ in TOPICS.items():
            bag.add_topic(topic, typ)
        joint_state = cdr_batch.joint_state(list(model.joint_names))
        tool_pose = cdr_batch.pose_stamped(output_frame(model))  # a held part's: its nominal frame
        ns = stamps_ns(rec["ts"])
        for s in range(0, len(ns), BLOCK):
            e = min(len(ns), s + BLOCK)
            tcp = tcp_poses(result, slice(s, e))
            quats = Rotation.from_matrix(tcp[:, :3, :3]).as_quat()
            bag.write_many(["/joint_states", "/dynamics_node/tool_pose"], ns[s:e], [
                joint_state.pack(ns[s:e], np.hstack([rec["q"][s:e], rec["qd"][s:e], rec["tau"][s:e]])),
                tool_pose.pack(ns[s:e], np.hstack([tcp[:, :3, 3], quats]))])
        cell = result.setup.cell
        contact, sensor = cdr_batch.wrench_stamped(cell.tool.tcp_link), cdr_batch.wrench_stamped(cell.ft_sensor.frame)
        ns = stamps_ns(rec["t"])
        for s in range(0, len(ns), BLOCK):
            e = min(len(ns), s + BLOCK)
            bag.write_many(["/contact/wrench", "/ft_sensor/wrench"], ns[s:e],
                           [contact.pack(ns[s:e], w_tcp[s:e]), sensor.pack(ns[s:e], w_ft[s:e])])
        progress = np.asarray(progress_samples(result.trajectory), dtype=np.float64).reshape(-1, 3)
        ns = stamps_ns(progress[:, 0])
        bag.write_many(["/grinding/progress"], ns, [
            cdr_batch.float64_multi_array(3).pack(ns, progress[:, [1, 2, 0]])])
        from robot_grinding_sim.core.job.viewer import write_viewer_topics

        write_viewer_topics(bag, result)
        counts = dict(bag.counts)
    return counts


def plot_forces(path: Path, result: Any, w_ft: np.ndarray) -> None:
    """Normal force vs time per pass against the target band, plus the F/T reading's force norm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = result.record
    cell = result.setup.cell
    F, tol = cell.process.target_force, cell.optimise.tolerance
    passes = result.passes
    n = max(1, len(passes))
    fig, axes = plt.subplots(n + 1, 1, figsize=(10, 2.6 * (n + 1)), squeeze=False)
    ax0 = axes[0, 0]
    ax0.plot(rec["t"], rec["fn"], lw=0.8, label="normal contact force (sim)")
    ax0.plot(rec["t"], np.linalg.norm(w_ft[:, :3], axis=1), lw=0.6, alpha=0.7,
             label="|F| F/T sensor reading (raw: with the tool's weight)")
    ax0.axhspan(F * (1 - tol), F * (1 + tol), color="g", alpha=0.15, label=f"target {F:g} N +- {tol:.0%}")
    for p in passes:
        ax0.axvspan(p.t0, p.t1, color="0.85", alpha=0.4)
    ax0.set_ylabel("force [N]")
    ax0.set_xlabel("time [s]")
    ax0.legend(fontsize=7, loc="upper right")
    ax0.set_title(f"{result.setup.source}: whole job ({len(passes)} passes, step {cell.sim.dt * 1e3:g} ms)")
    for k, p in enumerate(passes):
        ax = axes[k + 1, 0]
        sel = (rec["t"] >= p.t0 - 0.3) & (rec["t"] <= p.t1 + 0.1)
        ax.plot(rec["t"][sel] - p.t0, rec["fn"][sel], lw=0.8, label="normal force")
        ax.plot(rec["t"][sel] - p.t0, np.linalg.norm(w_ft[sel, :3], axis=1), lw=0.6, alpha=0.7, label="|F| F/T (raw)")
        ax.axhspan(F * (1 - tol), F * (1 + tol), color="g", alpha=0.15)
        ax.axhline(p.mean, color="k", ls="--", lw=0.8, label=f"mean {p.mean:.3f} N ({(p.mean - F) / F:+.2%})")
        ax.axvspan(0, p.t1 - p.t0, color="0.85", alpha=0.3)
        ax.set_ylabel(f"pass {p.index} [N]")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time from pass start [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(out: Path, result: Any, summary: dict[str, Any], bag: bool = True) -> dict[str, str]:
    """bag/ (unless not ``bag``: a study keeps the figures, not the 1 kHz streams), force.png,
    summary.json and plan.json into ``out`` (atomically: temp dir, then rename)."""
    from robot_grinding_sim.core.outfiles import staged_dir
    from robot_grinding_sim.core.planning.plan_io import plan_to_dict

    out = Path(out)
    check_out_dir(out)
    with staged_dir(out, "--out") as tmp:
        w_tcp, w_ft = ft_readings(result)
        counts = write_bag(tmp / "bag", result, w_tcp, w_ft) if bag else None
        del w_tcp  # the peak memory of the job is in its outputs
        plot_forces(tmp / "force.png", result, w_ft)
        (tmp / "plan.json").write_text(json.dumps(plan_to_dict(result.plan()), separators=(",", ":"),
                                                  allow_nan=False))
        outputs = {"plot": str(out / "force.png"), "summary": str(out / "summary.json"),
                   "plan": str(out / "plan.json")}
        if bag:
            outputs = {"bag": str(out / "bag"), **outputs}
        if result.removal is not None:
            from robot_grinding_sim.core.job.removal import plot_removal

            plot_removal(tmp / "removal.png", result.removal[0], result.setup, result.removal_figures)
            outputs["removal_plot"] = str(out / "removal.png")
        summary["outputs"] = outputs
        if counts is not None:
            summary["bag_counts"] = counts
        summary["ft_mean_force_norm_on_passes_n"] = [
            float(np.linalg.norm(w_ft[(result.record["t"] >= p.t0) & (result.record["t"] <= p.t1), :3], axis=1).mean())
            if p.samples else None for p in result.passes]
        (tmp / "summary.json").write_text(json.dumps(json_safe(summary), indent=2))
    return outputs

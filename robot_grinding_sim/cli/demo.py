"""``grinding demo``: the main job available today, run in one process without a ROS graph.

The default UR10e with its grinding tool follows a joint-space motion (home -> over the part ->
down to the grinding pose -> back) under computed-torque control, integrated by forward dynamics
at 1 kHz (``core.arm_sim``). It writes, under ``--out``:

- ``joint_motion.png``: reference and simulated joint positions, tracking error, joint torques
  against the effort limits, and the tcp height;
- ``bag/``: a rosbag2 (MCAP) with ``/joint_states`` (position, velocity, effort) and
  ``/dynamics_node/tool_pose``, readable by ``ros2 bag`` and by ``grinding report``;
- ``summary.json``: the figures printed on stdout (also printed alone with ``--json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np

from robot_grinding_sim.cli.common import emit_json, json_option, progress
from robot_grinding_sim.core.errors import InputError

#: Waypoints of the demo motion, rad, UR10e joint order (shoulder_pan ... wrist_3): home, then
#: the tool vertical (tcp z down) over a part in front of the robot at tcp (0.70, 0.15, 0.25) m,
#: down to (0.70, 0.15, 0.05) m, a pass across to (0.70, -0.15, 0.05) m, up and home. Solved
#: with damped least squares on ``RobotModel.jacobian``; every waypoint is a stop.
WAYPOINTS = np.array(
    [
        [0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0],
        [-0.0346, -1.5124, 1.8527, -1.9112, -1.5708, -1.6054],
        [-0.0346, -1.3350, 2.0504, -2.2862, -1.5708, -1.6054],
        [-0.4568, -1.3350, 2.0504, -2.2862, -1.5708, -2.0276],
        [-0.4568, -1.5124, 1.8527, -1.9112, -1.5708, -2.0276],
        [0.0, -1.5708, 1.5708, -1.5708, -1.5708, 0.0],
    ]
)
TIMES = np.array([0.0, 1.5, 2.5, 4.5, 5.5, 7.0])


def run_demo(out: Path, rate: float = 1000.0, show_progress: bool = True) -> dict:
    """Simulate the demo motion; write the plot, the bag and summary.json under ``out``."""
    from robot_grinding_sim.core.arm_sim import ArmSimulator
    from robot_grinding_sim.core.dynamics import RobotModel
    from robot_grinding_sim.resources import package_file

    if not rate > 0:
        raise InputError(f"--rate must be > 0 Hz, got {rate}")
    bag_dir = out / "bag"
    if bag_dir.exists():
        raise InputError(f"output {bag_dir} exists already; choose a new --out or remove it")
    urdf = package_file("urdf/ur10e_grinding.urdf")
    model = RobotModel.from_urdf(urdf)
    sim = ArmSimulator(model, WAYPOINTS[0])
    zeros = np.zeros_like(WAYPOINTS)  # stop at every waypoint: quintic segments, smooth torque
    sim.command_trajectory(model.joint_names, TIMES, WAYPOINTS, zeros, zeros)
    dt = 1.0 / rate
    n_steps = int(round((TIMES[-1] + 0.5) / dt))
    log_t = np.empty(n_steps)
    log_q = np.empty((n_steps, model.nq))
    log_qd = np.empty_like(log_q)
    log_ref = np.empty_like(log_q)
    log_tau = np.empty_like(log_q)
    log_tcp = np.empty((n_steps, 4, 4))
    wall0 = time.perf_counter()
    with progress(n_steps, "simulating", enabled=show_progress) as bar:
        for k in range(n_steps):
            st = sim.step(dt)
            log_t[k], log_q[k], log_qd[k], log_ref[k], log_tau[k] = st.t, st.q, st.qd, st.q_ref, st.tau
            log_tcp[k] = model.fk(st.q, model.tip_link)
            if k % 100 == 0:
                bar.update(k + 1)
    wall = time.perf_counter() - wall0

    out.mkdir(parents=True, exist_ok=True)
    err = log_q - log_ref
    limits = np.asarray(model.effort_limits, dtype=float)
    summary = {
        "robot": str(urdf),
        "joints": list(model.joint_names),
        "steps": n_steps,
        "step_s": dt,
        "simulated_s": float(log_t[-1]),
        "wall_time_s": wall,
        "real_time_factor": float(log_t[-1] / wall) if wall > 0 else None,
        "max_tracking_error_rad": np.abs(err).max(axis=0).tolist(),
        "final_error_rad": np.abs(log_q[-1] - WAYPOINTS[-1]).tolist(),
        "peak_torque_nm": np.abs(log_tau).max(axis=0).tolist(),
        "torque_limit_nm": limits.tolist(),
        "peak_torque_fraction_of_limit": (np.abs(log_tau).max(axis=0) / limits).tolist(),
        "tcp_min_height_m": float(log_tcp[:, 2, 3].min()),
        "outputs": {"plot": str(out / "joint_motion.png"), "bag": str(bag_dir)},
    }
    _write_bag(bag_dir, model, log_t, log_q, log_qd, log_tau, log_tcp, every=max(1, int(rate // 250)))
    _plot(out / "joint_motion.png", model, log_t, log_q, log_ref, log_tau, log_tcp)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _write_bag(path, model, t, q, qd, tau, tcp, every: int) -> None:
    """Write /joint_states and the tool pose as a rosbag2 (MCAP), decimated to ``every`` steps."""
    from scipy.spatial.transform import Rotation

    from robot_grinding_sim.core.bagwriter import BagWriter

    with BagWriter(path, storage="mcap") as bag:
        ts = bag.typestore
        Header = ts.types["std_msgs/msg/Header"]
        Time = ts.types["builtin_interfaces/msg/Time"]
        JointState = ts.types["sensor_msgs/msg/JointState"]
        PoseStamped = ts.types["geometry_msgs/msg/PoseStamped"]
        Pose = ts.types["geometry_msgs/msg/Pose"]
        Point = ts.types["geometry_msgs/msg/Point"]
        Quaternion = ts.types["geometry_msgs/msg/Quaternion"]
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        bag.add_topic("/dynamics_node/tool_pose", "geometry_msgs/msg/PoseStamped")
        for k in range(0, len(t), every):
            ns = int(round(t[k] * 1e9))
            stamp = Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
            js = JointState(
                header=Header(stamp=stamp, frame_id=""),
                name=list(model.joint_names),
                position=q[k].astype(np.float64),
                velocity=qd[k].astype(np.float64),
                effort=tau[k].astype(np.float64),
            )
            bag.write("/joint_states", ns, bag.serialize(js, "sensor_msgs/msg/JointState"))
            x, y, z, w = Rotation.from_matrix(tcp[k, :3, :3]).as_quat()
            pose = PoseStamped(
                header=Header(stamp=stamp, frame_id=model.root_link),
                pose=Pose(
                    position=Point(x=float(tcp[k, 0, 3]), y=float(tcp[k, 1, 3]), z=float(tcp[k, 2, 3])),
                    orientation=Quaternion(x=float(x), y=float(y), z=float(z), w=float(w)),
                ),
            )
            bag.write("/dynamics_node/tool_pose", ns, bag.serialize(pose, "geometry_msgs/msg/PoseStamped"))


def _plot(path, model, t, q, ref, tau, tcp) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
    for j, name in enumerate(model.joint_names):
        (line,) = ax[0].plot(t, q[:, j], label=name)
        ax[0].plot(t, ref[:, j], "--", color=line.get_color(), linewidth=0.8)
        ax[1].plot(t, np.degrees(q[:, j] - ref[:, j]), color=line.get_color())
        ax[2].plot(t, tau[:, j] / model.effort_limits[j] * 100.0, color=line.get_color())
    ax[0].set_ylabel("position [rad]\n(dashed: reference)")
    ax[0].legend(fontsize=7, ncol=3)
    ax[1].set_ylabel("tracking error [deg]")
    ax[2].set_ylabel("torque [% of limit]")
    ax[3].plot(t, tcp[:, 2, 3] * 1000.0, color="k")
    ax[3].set_ylabel("tcp height [mm]")
    ax[3].set_xlabel("time [s]")
    for a in ax:
        a.grid(alpha=0.3)
    fig.suptitle("UR10e grinding tool: computed-torque tracking, forward dynamics at 1 kHz")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@click.command("demo")
@click.option("--out", type=click.Path(file_okay=False), default="demo_out", show_default=True,
              help="Output directory (the bag sub-directory must not exist yet).")
@click.option("--rate", type=float, default=1000.0, show_default=True, help="Control and integration rate, Hz.")
@json_option
def demo(out: str, rate: float, as_json: bool) -> None:
    """Run the main job: the default arm follows a joint-space motion; plot, bag and summary."""
    summary = run_demo(Path(out), rate, show_progress=not as_json)
    if as_json:
        emit_json(summary)
        return
    click.echo(f"robot: {summary['robot']}")
    click.echo(
        f"simulated {summary['simulated_s']:.2f} s in {summary['steps']} steps of {summary['step_s'] * 1e3:g} ms"
        f" ({summary['wall_time_s']:.2f} s wall, {summary['real_time_factor']:.1f}x real time)"
    )
    click.echo(f"{'joint':<22}{'max err [deg]':>14}{'peak tau [Nm]':>15}{'limit [Nm]':>12}")
    for j, name in enumerate(summary["joints"]):
        click.echo(
            f"{name:<22}{np.degrees(summary['max_tracking_error_rad'][j]):>14.3f}"
            f"{summary['peak_torque_nm'][j]:>15.1f}{summary['torque_limit_nm'][j]:>12.0f}"
        )
    click.echo(f"plot: {summary['outputs']['plot']}\nbag:  {summary['outputs']['bag']}")

"""The parameter schema of every node: its own parameters plus the cell groups it uses.

No rclpy here: ``grinding check-config``, ``grinding bringup`` and the tests validate parameter
files against these schemas without ROS. The cell's parameters (``contact.*``, ``servo.*``,
``workpiece.*``, ...) are not written here: they come from their one definition in
:mod:`robot_grinding_sim.core.config`, and ``config/cell.yaml`` holds their values for every node
(each node reads the groups it declares; ``config/<node>.yaml`` holds the node's own).
"""

from __future__ import annotations

import dataclasses

from robot_grinding_sim.core.config import cell_specs
from robot_grinding_sim.core.parameters import ParamSpec
from robot_grinding_sim.core.record.bagwriter import STORAGES
from robot_grinding_sim.core.record.progress_view import MARKER_RATE
from robot_grinding_sim.core.robot.command_guard import GuardParams
from robot_grinding_sim.core.robot.safety import SafetyLimits
from robot_grinding_sim.hardware.addresses import DEFAULT_FT_SENSOR_IP, DEFAULT_ROBOT_IP
from robot_grinding_sim.hardware.ft_backend import FT_BACKENDS

#: What the recorder records by default: the force comparison's topics, what a 3D viewer needs to
#: replay the job (robot, TF, part, passes, contacts, removal map and its depths), and the executive's commands and
#: diagnostics (commanded against measured joints; why a job stopped); in real mode the driver's raw
#: F/T reading too (weight and bias in: what `grinding calibrate` fits).
DEFAULT_TOPICS = ["/joint_states", "/contact/wrench", "/ft_sensor/wrench", "/grinding/progress", "/tf", "/tf_static",
                  "/robot_description", "/planner_node/markers", "/collision_node/markers", "/grinding/path",
                  "/grinding/removal", "/grinding/removal_nodes", "/grinding/removal_depth",
                  "/grinding/progress_markers", "/joint_trajectory_controller/joint_trajectory", "/diagnostics",
                  "/hardware_driver/wrench_raw"]

BASE_FRAME = ParamSpec("base_frame", "", "frame of the node's outputs; empty: the URDF's root link", read_only=True)

#: cell groups each node declares
NODE_GROUPS: dict[str, tuple[str, ...]] = {
    # workpiece, contact, ft_sensor: coupling local only (the contact and the F/T sensor in the arm's process)
    # process: process.target_force, the onset stiffness of a tool with a patch (core.job.setup.contact_query)
    # removal: removal.material, the density of a part the robot holds (its mass in the arm's dynamics)
    "dynamics_node": ("robot", "tool", "servo", "sim", "workpiece", "contact", "ft_sensor", "process", "removal"),
    "collision_node": ("robot", "workpiece", "tool", "contact", "process"),
    "contact_solver_node": ("robot", "workpiece", "tool", "contact", "ft_sensor", "sim", "removal"),
    "planner_node": ("robot", "workpiece", "tool", "contact", "servo", "sim", "ft_sensor", "passes", "process",
                     "optimise"),
    # workpiece: for a part the robot holds (workpiece.link: the tool centre relative to the part)
    "grinding_executive": ("robot", "tool", "process", "execution", "workpiece"),
    "recorder": ("robot", "workpiece"),
    "description_publisher": ("robot", "workpiece"),
    # sim: for sim.gravity only (the tool's weight in the F/T compensation); admittance: force_control;
    # process: for process.max_tcp_speed only (the guard's limit is the planner's); workpiece, removal: a
    # part the robot holds (workpiece.link: its weight on the sensor, removal.material its density)
    "hardware_driver": ("robot", "tool", "ft_sensor", "sim", "admittance", "process", "workpiece", "removal"),
    # grinding emulate's Net F/T: no cell parameters (it serves what the emulated sensor model reads)
    "netft_emulator": (),
}

_GUARD = GuardParams()
_SAFETY = SafetyLimits()

_NODE_OWN: dict[str, list[ParamSpec]] = {
    "dynamics_node": [
        BASE_FRAME,
        ParamSpec("joint_names", [], "joint order of joint_states and of position commands; empty: the URDF's",
                  type="string_array", read_only=True),
        ParamSpec("plan_file", "", "a plan.json: the arm starts at rest on its job trajectory's first knot, where "
                  "the in-process job starts (grinding bringup sim --plan-file and sim.launch.py plan_file:=... "
                  "set it); empty: at robot.home", read_only=True),
        ParamSpec("update_rate", 250.0, "wall-clock timer rate that advances the simulation, Hz",
                  range=(1.0, 2000.0), read_only=True),
        ParamSpec("real_time_factor", 1.0, "sim seconds per wall second", range=(0.01, 100.0)),
        ParamSpec("max_steps_per_update", 100, "at most this many steps per timer tick (then sim time slows)",
                  range=(1, 100000)),
        ParamSpec("publish_clock", True, "publish /clock: this node owns sim time", read_only=True),
        ParamSpec("clock_rate", 100.0, "with publish_clock: publish /clock at most this often, Hz of wall time "
                  "(every node of the graph takes it; joint states carry every step's time)",
                  range=(1.0, 2000.0), read_only=True),
        ParamSpec("joint_state_decimation", 1, "publish joint_states every N-th step", range=(1, 10000)),
        ParamSpec("tool_pose_rate", 100.0, "rate of ~/tool_pose and ~/inverse_dynamics in sim time, Hz; 0: off",
                  range=(0.0, 10000.0)),
        ParamSpec("command_velocity_scale", 0.5, "position commands move at most this fraction of the velocity "
                  "limits", range=(0.01, 1.0)),
        ParamSpec("command_min_duration", 0.01, "shortest motion for a position command, s", range=(0.0, 60.0)),
        ParamSpec("coupling", "model", "how the contact acts on the arm: 'model' integrates contact/model (the "
                  "reduced-order model) in closed form, the in-process job's step; 'force' applies contact/wrench "
                  "as it is; 'none' ignores contact; 'local' computes the contact in this node on the workpiece "
                  "(workpiece.*, contact.*) at every step, the in-process job's step exactly (an emulated arm: "
                  "grinding emulate)", choices=("model", "force", "none", "local"), read_only=True),
        ParamSpec("publish_ft", False, "with coupling local: publish ft_sensor/wrench, the F/T sensor model's "
                  "reading (ft_sensor.*) of the contact at each joint state (an emulated arm's sensor)",
                  read_only=True),
        ParamSpec("lockstep", True, "sim time waits for the contact side: a step from t needs a contact model "
                  "(or wrench) computed at a state no older than t - exchange_interval", read_only=True),
        ParamSpec("wait_for_contact", True, "with lockstep, sim time starts only once the contact side has "
                  "answered (the joint state at t = 0 is republished until then), so a job cannot start before "
                  "contact is computed; false: the arm runs free until then", read_only=True),
        ParamSpec("exchange_interval", 0.001, "H: the oldest contact model (or wrench) a step may use, s of sim "
                  "time; 0: the model of the step's own state (exactly the in-process job)", range=(0.0, 10.0),
                  read_only=True),
        ParamSpec("contact_timeout", 0.1, "without lockstep: drop a contact model or wrench not renewed for this "
                  "long, s of sim time; 0: hold forever", range=(0.0, 1e6)),
        ParamSpec("max_lag", 0.0, "with publish_clock false (wall-clock stamps: an emulated arm, grinding emulate): "
                  "when sim time falls behind the wall clock by more than this, the time not simulated (waiting for "
                  "the contact side, a machine that cannot keep up) is skipped and the stamps jump to wall time, as a "
                  "real arm's driver stamps its joint states; a trajectory being followed then runs that much late; "
                  "0: never (the stamps fall behind), s", range=(0.0, 3600.0), read_only=True),
        ParamSpec("hold_at", 0.0, "a breakpoint: sim time does not run past this stamp (s, on the joint states' "
                  "stamp scale; set at run time, e.g. by a test that must act at a given point of a job however "
                  "late it observes it, then cleared); 0: never", range=(0.0, 1e12)),
    ],
    "collision_node": [
        BASE_FRAME,
        ParamSpec("contact_margin", 0.005, "publish the tool's contact while its gap to the part is below this, m "
                  "(negative depth: a near contact, so the contact side sees it coming)", range=(0.0, 1.0),
                  read_only=True),
        ParamSpec("min_distance_rate", 10.0, "rate of ~/min_distance in stamp time, Hz (every arm link against "
                  "the part); 0: off", range=(0.0, 10000.0)),
        ParamSpec("marker_rate", 10.0, "rate of ~/markers in stamp time, Hz; 0: off", range=(0.0, 1000.0)),
    ],
    "contact_solver_node": [
        BASE_FRAME,
        ParamSpec("plan_file", "", "a plan.json: the removal map is on the job's own grid (the passes' region of "
                  "every face they touch, the grid of the in-process job's map and of the plan's prediction); "
                  "empty: the whole of the first face (grinding bringup --plan-file sets it)", read_only=True),
        ParamSpec("publish_ft", True, "publish ft_sensor/wrench from the F/T sensor model", read_only=True),
        ParamSpec("removal_marker_rate", 1.0, "rate of grinding/removal (the removal map) in ROS time, Hz; 0: off",
                  range=(0.0, 100.0), read_only=True),
        ParamSpec("removal_marker_cell", 0.001, "cell of the removal map's display mesh, m", range=(1e-4, 0.1),
                  read_only=True),
        ParamSpec("removal_marker_max_triangles", 10000, "the removal map's display mesh grows its cells beyond "
                  "removal_marker_cell to stay within this many triangles (40 bytes each in the marker)",
                  range=(100, 10_000_000), read_only=True),
        ParamSpec("removal_interval", 0.005, "the removal map takes one state every removal_interval s of stamp "
                  "time, its force and sliding speed held over the interval (a display: the job's summary "
                  "integrates every sample); 0: every state", range=(0.0, 0.1), read_only=True),
    ],
    "grinding_executive": [
        BASE_FRAME,
        ParamSpec("plan_file", "", "plan.json to run (with its job trajectory); empty: the planner's latched "
                  "grinding/plan. Set at run time (not while a job runs) to load another plan; a file that is "
                  "not a plan is refused with the reason"),
        ParamSpec("autostart", False, "start the job as soon as a plan and a joint state are there and the "
                  "controller subscribes to the command topic"),
        ParamSpec("progress_rate", 100.0, "rate of grinding/progress while a job runs and of the supervision, Hz "
                  "of ROS time", range=(1.0, 10000.0), read_only=True),
        ParamSpec("diagnostics_rate", 1.0, "rate of /diagnostics, Hz (and on every change of state)",
                  range=(0.01, 100.0), read_only=True),
        ParamSpec("marker_rate", MARKER_RATE, "rate of grinding/progress_markers while a job runs, Hz of ROS time (and "
                  "on every change of state)", range=(0.1, 100.0), read_only=True),
    ],
    "recorder": [
        ParamSpec("topics", DEFAULT_TOPICS, "Topics to record (absolute names; the leading slash is optional).",
                  type="string_array"),
        ParamSpec("all_topics", False, "Record every topic on the graph (except those in 'exclude')."),
        ParamSpec("exclude", ["/rosout", "/parameter_events"], "Topics never recorded with all_topics.",
                  type="string_array"),
        ParamSpec("output", "", "Bag directory to create (must not exist); empty: "
                  "rosbag2_YYYY_MM_DD-HH_MM_SS in the working directory.", read_only=True),
        ParamSpec("storage", "mcap", "Storage plugin of the bag.", choices=STORAGES, read_only=True),
        ParamSpec("flush_period", 1.0, "Checkpoint period, s: a killed recorder loses at most this much.",
                  range=(0.05, 60.0)),
        ParamSpec("discovery_period", 0.5, "How often the graph is searched for the topics' publishers, s.",
                  range=(0.05, 10.0)),
        ParamSpec("qos_depth", 10000, "History depth of each subscription (messages).", range=(1, 1_000_000),
                  read_only=True),
        ParamSpec("max_duration", 0.0, "Stop recording after this many seconds; 0: until SIGINT/SIGTERM.",
                  range=(0.0, None)),
        ParamSpec("rosbag2_version", 8, "rosbag2 metadata version (8: Jazzy and later read it; 9: Kilted).",
                  choices=(8, 9), read_only=True),
        ParamSpec("computed_tf_rate", 100.0, "While no node publishes /tf (the pip path has no "
                  "robot_state_publisher) and /tf is recorded: compute /tf from /joint_states with the URDF "
                  "(robot.description_file) at most this often, Hz of the joint states' stamps, and /tf_static once "
                  "(fixed joints, base_link -> workpiece at workpiece.pose); 0: never.", range=(0.0, 10000.0),
                  read_only=True),
    ],
    "description_publisher": [],
    "hardware_driver": [
        BASE_FRAME,
        ParamSpec("robot_ip", DEFAULT_ROBOT_IP, "address of the robot controller (its ros2_control driver talks to "
                  "it; here it names the hardware in /diagnostics)", read_only=True),
        ParamSpec("output_topic", "/scaled_joint_trajectory_controller/joint_trajectory", "where accepted commands "
                  "and holds go: the arm's joint_trajectory_controller (trajectory_msgs/JointTrajectory)",
                  read_only=True),
        ParamSpec("control_rate", 500.0, "the arm controller's rate, Hz: a stop goes out within 2 periods, the "
                  "hold's time_from_start is one period, and the timeouts are checked at this rate",
                  range=(1.0, 10000.0), read_only=True),
        ParamSpec("autostart", True, "configure and activate at start-up (as ros2_control's controller_manager "
                  "brings hardware to active); a failed configure then ends the node naming the parameter. false: "
                  "wait unconfigured for the lifecycle transitions (ros2 lifecycle set /hardware_driver configure, "
                  "then activate)", read_only=True),
        ParamSpec("ft_backend", "netft", "F/T source (hardware/ft_backend.py registry): 'netft' (ATI Net F/T over UDP "
                  "RDT at ft_sensor_ip:ft_port), 'topic' (geometry_msgs/WrenchStamped on ft_topic), 'ur_builtin' "
                  "(a UR e-series arm's own sensor as the UR ROS 2 driver publishes it: "
                  "/force_torque_sensor_broadcaster/wrench in tool0) or 'ft_broadcaster' (ros2_controllers' "
                  "force_torque_sensor_broadcaster named ft_broadcaster: /<ft_broadcaster>/wrench). A topic's "
                  "wrench is moved from its header's frame into ft_sensor.frame by the robot's kinematics",
                  choices=tuple(FT_BACKENDS), read_only=True),
        ParamSpec("ft_sensor_ip", DEFAULT_FT_SENSOR_IP, "IPv4 address of the Net F/T (ft_backend netft; required "
                  "there: no default, so that nothing is sent to a guessed address)",
                  read_only=True),
        ParamSpec("ft_port", 49152, "UDP port of the Net F/T's RDT interface", range=(1, 65535), read_only=True),
        ParamSpec("counts_per_force", 1.0e6, "Net F/T counts per N (the sensor's calibration, its web page)",
                  range=(1e-6, 1e12), read_only=True),
        ParamSpec("counts_per_torque", 1.0e6, "Net F/T counts per N m (the sensor's calibration)", range=(1e-6, 1e12),
                  read_only=True),
        ParamSpec("ft_topic", "/force_torque_sensor_broadcaster/wrench", "raw readings (geometry_msgs/WrenchStamped; "
                  "ft_backend topic), in their header's frame (a link of the URDF)", read_only=True),
        ParamSpec("ft_broadcaster", "force_torque_sensor_broadcaster", "name of the ros2_controllers "
                  "force_torque_sensor_broadcaster (ft_backend ft_broadcaster): its readings come on "
                  "/<name>/wrench, in the frame of its frame_id parameter", read_only=True),
        ParamSpec("ft_frame_aliases", [], "FRAME=LINK: a wrench header's frame that is not a link of the URDF, "
                  "and the link it is (ft_backend ur_builtin has tool0_controller=tool0: right when the teach "
                  "pendant's TCP offset is zero)", type="string_array", read_only=True),
        ParamSpec("ft_rate", 1000.0, "rate of the F/T readings (the Net F/T's RDT output rate, or the topic's), Hz: "
                  "the low-pass filter's sample rate and, for the Net F/T, the clock its records are dated by",
                  range=(1.0, 20000.0), read_only=True),
        ParamSpec("max_force", _SAFETY.max_force, "stop when |F| of the compensated wrench exceeds this, N",
                  range=(1e-3, 1e5), read_only=True),
        ParamSpec("max_torque", _SAFETY.max_torque, "stop when |T| of the compensated wrench (about the sensor's "
                  "origin) exceeds this, N m", range=(1e-3, 1e5), read_only=True),
        ParamSpec("ft_timeout", _SAFETY.ft_timeout, "stop when the newest F/T reading is older than this (from "
                  "when the sensor took it: the sensor silent, or its data late), s", range=(1e-3, 60.0),
                  read_only=True),
        ParamSpec("joint_states_timeout", _SAFETY.joint_states_timeout, "stop when no joint state arrives for longer "
                  "than this, s", range=(1e-3, 60.0), read_only=True),
        ParamSpec("position_margin", _GUARD.position_margin, "commands keep this far inside the URDF position "
                  "limits, rad (m for prismatic joints)", range=(0.0, 1.0), read_only=True),
        ParamSpec("velocity_factor", _GUARD.velocity_factor, "commands keep within this fraction of the URDF velocity "
                  "limits", range=(0.01, 1.0), read_only=True),
        ParamSpec("workspace_min", _GUARD.workspace_min.tolist(), "lower corner of the box the TCP (a held part: "
                  "its frame's origin) must stay in, base frame, m", length=3, range=(-100.0, 100.0), read_only=True),
        ParamSpec("workspace_max", _GUARD.workspace_max.tolist(), "upper corner of the TCP box, base frame, m",
                  length=3, range=(-100.0, 100.0), read_only=True),
        ParamSpec("start_tolerance", 0.05, "a command's first knot at time 0 may be this far (any joint) from the "
                  "measured position, rad: the executive stamps commands ahead, so that knot is where its "
                  "reference will be, not where the arm is", range=(0.0, 3.2), read_only=True),
        ParamSpec("tracking_tolerance", _GUARD.tracking_tolerance, "how far the measured TCP may be from its "
                  "reference, m: the chord from where the arm is to a command's first knot later than 0 may be "
                  "this much longer than the planned motion (its speed over process.max_tcp_speed by this over "
                  "the knot's time)", range=(0.0, 0.1), read_only=True),
        ParamSpec("diagnostics_rate", 1.0, "rate of /diagnostics, Hz (and on every stop, reset and refusal)",
                  range=(0.01, 100.0), read_only=True),
        ParamSpec("force_control", False, "force control along the surface normal (admittance.*): instead of "
                  "forwarding the executive's trajectories the driver follows them itself and streams, every control "
                  "period, one point admittance.horizon ahead, corrected along the plan's normal (latched "
                  "grinding/plan) from the measured force to hold the plan's target force (docs/hardware.md)",
                  read_only=True),
    ],
    "netft_emulator": [
        ParamSpec("port", 49152, "UDP port of the emulated Net F/T's RDT interface on 127.0.0.1 (the driver's "
                  "ft_port)", range=(1, 65535), read_only=True),
        ParamSpec("rate", 1000.0, "RDT record rate while streaming, Hz (the driver's ft_rate)", range=(1.0, 20000.0),
                  read_only=True),
        ParamSpec("counts_per_force", 1.0e6, "counts per N of the emulated sensor's calibration (the driver's "
                  "counts_per_force)", range=(1e-6, 1e12), read_only=True),
        ParamSpec("counts_per_torque", 1.0e6, "counts per N m of the emulated sensor's calibration (the driver's "
                  "counts_per_torque)", range=(1e-6, 1e12), read_only=True),
        ParamSpec("wrench_topic", "ft_sensor/wrench", "the emulated F/T sensor model's readings it serves "
                  "(geometry_msgs/WrenchStamped, sensor frame; relative: in the node's namespace)", read_only=True),
        ParamSpec("drop_fraction", 0.0, "fault: probability that a record is not sent (settable at run time)",
                  range=(0.0, 1.0)),
        ParamSpec("reorder_fraction", 0.0, "fault: probability that a record is swapped with the next one "
                  "(settable at run time)", range=(0.0, 1.0)),
        ParamSpec("corrupt_fraction", 0.0, "fault: probability that a wrong-size datagram replaces a record "
                  "(settable at run time)", range=(0.0, 1.0)),
        ParamSpec("silent_after", -1.0, "fault: send nothing from this many seconds after start, s; < 0: never",
                  range=(-1.0, None), read_only=True),
        ParamSpec("seed", 0, "seed of the fault generator", range=(0, 2**31 - 1), read_only=True),
        ParamSpec("max_hold", 0.05, "the sensor samples on the emulated arm's clock (its readings' stamps) and "
                  "follows an arm lagging the wall clock by at most this; an arm further behind has its newest "
                  "reading served this far behind the wall clock (keep it below the driver's ft_timeout), s",
                  range=(0.001, 10.0), read_only=True),
    ],
    "planner_node": [
        BASE_FRAME,
        ParamSpec("check_collisions", True, "check the robot's trajectory against the part"),
        ParamSpec("plan_on_start", True, "plan once at start-up (else wait for ~/plan)"),
        ParamSpec("plan_file", "", "publish this plan.json (path, trajectory, markers, grinding/plan) instead of "
                  "planning; ~/plan reads it again; empty: plan from the cell's parameters"),
        ParamSpec("output_file", "", "write plan.json here after every successful plan; empty: none"),
        ParamSpec("marker_normal_every", 10, "an arrow marker every n-th waypoint", range=(1, 100000)),
    ],
}


def node_specs(node: str, writable: bool = False) -> list[ParamSpec]:
    """Every parameter ``node`` declares (its own, then the cell groups it uses).

    ``writable``: the cell's parameters may be changed at run time (a node that reads them anew for
    every request, like planner_node); otherwise they are read-only, read once at start-up.
    """
    if node not in _NODE_OWN:
        raise KeyError(f"no schema for node {node!r} (known: {', '.join(NODE_GROUPS)})")
    cell = cell_specs(NODE_GROUPS[node])
    if writable:
        cell = [dataclasses.replace(s, read_only=s.name == "robot.description_file") for s in cell]
    return [*_NODE_OWN[node], *cell]


def own_specs(node: str) -> list[ParamSpec]:
    """The node's own parameters (those of config/<node>.yaml)."""
    return list(_NODE_OWN[node])


def node_yaml(node: str) -> str:
    """config/<node>.yaml: the node's own parameters with their defaults, each with its description."""
    import yaml

    lines = [f"# {node}: its own parameters (the cell's are in config/cell.yaml; every parameter is described",
             f"# by `ros2 param describe /{node} <name>` and `grinding check-config --list`).",
             "/**:", "  ros__parameters:" + ("" if own_specs(node) else " {}")]
    for s in own_specs(node):
        text = yaml.safe_dump(s.default, default_flow_style=True, width=1000).strip().removesuffix("...").strip()
        lines.append(f"    {s.name}: {text}  # {s.description}")
    return "\n".join(lines) + "\n"

"""The node graph of the grinding cell, for ``sim`` and ``real``: one description, two launchers.

``launch/sim.launch.py`` / ``launch/real.launch.py`` (ROS 2 installs, ``ros2 launch``) and
``grinding bringup sim|real`` (pip installs, :mod:`robot_grinding_sim.cli.bringup`) both call
:func:`graph` and start exactly the nodes it returns, with the same names, parameter files,
parameter overrides and remappings. No ROS import here.

Each :class:`NodeSpec` says: package and executable, node name, the modes that run it, its
parameter files (``config/<node>.yaml`` in the package's share directory; a missing file is
skipped), parameter overrides (applied after the files), remappings, and whether it is optional
(started only when asked for, e.g. the recorder or RViz). Nodes of other packages
(``robot_state_publisher``, ``rviz2``) exist only on a ROS install; the pip launcher skips them,
and it skips, with a warning, a node of this package whose module does not exist yet. A node that
stands in for another package's node (``description_publisher`` publishes ``/robot_description``
in place of robot_state_publisher) is started by the pip launcher only; the launch files start the
original.

Topic names inside nodes are relative; every node runs in the root namespace, so
``joint_states`` is ``/joint_states`` and ``~/tool_pose`` is ``/dynamics_node/tool_pose``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.resources import URDF_DEFAULT, package_file, share_dirs  # noqa: F401 (re-exported)

PACKAGE = "robot_grinding_sim"
MODES = ("sim", "real")

#: Default robot and sensor addresses for ``real`` (placeholders: always pass the real ones).
DEFAULT_ROBOT_IP = "192.168.56.101"
DEFAULT_FT_SENSOR_IP = "192.168.56.102"

RVIZ_CONFIG = "config/grinding.rviz"


@dataclass(frozen=True)
class NodeSpec:
    """One node of the graph.

    Attributes:
        executable: the ``ros2 run`` executable (for this package also the module
            ``robot_grinding_sim.nodes.<executable>``).
        name: the node name (``__node`` remap).
        modes: the modes that run it.
        description: what it does (printed by ``grinding bringup --print``).
        package: the ROS package providing the executable.
        params_files: package-relative yaml files, applied in order; missing ones are skipped.
        parameters: overrides applied after the files (name -> value).
        remappings: (from, to) topic/service remaps.
        optional: started only when asked for (``record``, ``rviz``).
        stands_in_for: the package whose node this one replaces where that package is not installed
            (the pip path); ``ros2 launch`` starts that package's node instead of this one.
    """

    executable: str
    name: str
    modes: tuple[str, ...]
    description: str
    package: str = PACKAGE
    params_files: tuple[str, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    optional: str | None = None
    stands_in_for: str | None = None

    @property
    def module(self) -> str | None:
        """The Python module of this package's node, or None for other packages' nodes."""
        return f"{PACKAGE}.nodes.{self.executable}" if self.package == PACKAGE else None

    def module_available(self) -> bool:
        """True if the node's module exists (checked without importing it)."""
        if self.module is None:
            return False
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def existing_params_files(self) -> list[Path]:
        """Absolute paths of the parameter files that exist."""
        out = []
        for rel in self.params_files:
            p = package_file(rel, must_exist=False)
            if p.exists():
                out.append(p)
        return out

    def ros_args(self, extra_params_files: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
        """``--ros-args ...`` for a command line: node name, parameter files, overrides, remaps."""
        args = ["--ros-args", "-r", f"__node:={self.name}"]
        for p in [*self.existing_params_files(), *extra_params_files]:
            args += ["--params-file", str(p)]
        for k, v in self.parameters.items():
            args += ["-p", f"{k}:={yaml_value(v)}"]
        for src, dst in self.remappings:
            args += ["-r", f"{src}:={dst}"]
        return args


def yaml_value(v: Any) -> str:
    """A parameter value as rcl reads it after ``-p name:=`` (YAML flow style)."""
    import yaml

    if isinstance(v, str):
        # plain if YAML reads it back as the same string, else quoted
        if v and v.strip() == v and yaml.safe_load(v) == v:
            return v
        return yaml.safe_dump(v).strip().splitlines()[0]
    return yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()


#: The cell's parameter file (every physical parameter; robot_grinding_sim/core/config.py defines them).
CELL_CONFIG = "config/cell.yaml"


def _cfg(executable: str) -> tuple[str, ...]:
    """A node's parameter files: the cell's, then its own (config/<node>.yaml)."""
    return (CELL_CONFIG, f"config/{executable}.yaml")


def graph(
    mode: str,
    robot_ip: str | None = None,
    ft_sensor_ip: str | None = None,
    record: str | None = None,
    rviz: bool = False,
    robot_description_file: str | None = None,
    use_sim_time: bool | None = None,
    plan_file: str | None = None,
    start: bool = False,
) -> list[NodeSpec]:
    """The nodes of ``mode`` (``"sim"`` or ``"real"``), in start order.

    Args:
        mode: "sim" (dynamics_node simulates the arm and owns /clock) or "real" (hardware_driver
            talks to the robot's ros2_control controllers and the F/T sensor).
        robot_ip, ft_sensor_ip: addresses for the real arm and sensor (real mode only).
        record: output directory of the recorder; None: no recorder.
        rviz: include RViz (ROS installs only).
        robot_description_file: URDF for every node that loads one (default the package's
            ``urdf/ur10e_grinding.urdf``; empty string: each node's own default).
        use_sim_time: default True in sim (the nodes follow dynamics_node's /clock), False in real.
        plan_file: plan.json for grinding_executive (None: it runs the planner's latched plan, and
            planner_node plans at start-up; given: planner_node waits for ~/plan).
        start: the executive starts the job as soon as it has a plan and a joint state.

    Raises:
        ValueError: an unknown mode, or an IP address in sim mode.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    sim = mode == "sim"
    if sim and (robot_ip or ft_sensor_ip):
        raise ValueError("robot_ip / ft_sensor_ip apply to mode 'real' only")
    sim_time = sim if use_sim_time is None else bool(use_sim_time)
    urdf = robot_description_file
    if urdf is None:
        urdf = str(package_file(URDF_DEFAULT, must_exist=False))
    common: dict[str, Any] = {"use_sim_time": sim_time}
    with_urdf: dict[str, Any] = {**common, **({"robot.description_file": urdf} if urdf else {})}

    nodes: list[NodeSpec] = [
        NodeSpec(
            "dynamics_node",
            "dynamics_node",
            ("sim",),
            "simulated arm: computed-torque control on RNEA dynamics; /joint_states, /clock",
            params_files=_cfg("dynamics_node"),
            # it owns sim time, so it must not wait for a /clock itself
            parameters={**with_urdf, "use_sim_time": False, "publish_clock": sim_time},
        ),
        NodeSpec(
            "hardware_driver",
            "hardware_driver",
            ("real",),
            "real arm and F/T sensor: forwards commands after safety checks; /ft_sensor/wrench",
            params_files=_cfg("hardware_driver"),
            parameters={
                **common,
                "robot_ip": robot_ip or DEFAULT_ROBOT_IP,
                "ft_sensor_ip": ft_sensor_ip or DEFAULT_FT_SENSOR_IP,
            },
        ),
        NodeSpec(
            "collision_node",
            "collision_node",
            MODES,
            "python-fcl tool/part contacts on /joint_states -> /contact/points",
            params_files=_cfg("collision_node"),
            parameters=with_urdf,
        ),
        NodeSpec(
            "contact_solver_node",
            "contact_solver_node",
            MODES,
            "contact force model -> /contact/wrench (and the simulated /ft_sensor/wrench in sim)",
            params_files=_cfg("contact_solver_node"),
            parameters=with_urdf,
            # in real mode the measured /ft_sensor/wrench comes from hardware_driver: the model's
            # sensor output is kept apart as the prediction
            remappings=() if sim else (("ft_sensor/wrench", "ft_sensor/predicted_wrench"),),
        ),
        NodeSpec(
            "planner_node",
            "planner_node",
            MODES,
            "passes on the CAD surface (or the plan_file's) -> /grinding/path, /grinding/trajectory, markers",
            params_files=_cfg("planner_node"),
            # with a plan file it publishes that plan (the one the executive runs) for RViz and the bag
            parameters={**with_urdf, **({"plan_file": str(Path(plan_file).resolve())} if plan_file else {})},
        ),
        NodeSpec(
            "grinding_executive",
            "grinding_executive",
            MODES,
            "streams the plan to the arm through the ros2_control topics; ~/start, ~/stop",
            params_files=_cfg("grinding_executive"),
            parameters={**with_urdf, "autostart": bool(start),
                        **({"plan_file": str(Path(plan_file).resolve())} if plan_file else {})},
        ),
        NodeSpec(
            "robot_state_publisher",
            "robot_state_publisher",
            MODES,
            "TF from /joint_states and the URDF (ROS installs only)",
            package="robot_state_publisher",
            parameters=common,
        ),
        NodeSpec(
            "description_publisher",
            "description_publisher",
            MODES,
            "/robot_description from the URDF where robot_state_publisher is missing (pip path only)",
            params_files=_cfg("description_publisher"),
            parameters=with_urdf,
            stands_in_for="robot_state_publisher",
        ),
    ]
    if record is not None:
        nodes.append(
            NodeSpec(
                "recorder",
                "recorder",
                MODES,
                "records the graph's topics into an MCAP bag (computing /tf where nobody publishes it)",
                params_files=_cfg("recorder"),
                parameters={**with_urdf, "output": str(record)},
                optional="record",
            )
        )
    if rviz:
        nodes.append(
            NodeSpec(
                "rviz2",
                "rviz2",
                MODES,
                "RViz with config/grinding.rviz (ROS installs only)",
                package="rviz2",
                parameters=common,
                optional="rviz",
            )
        )
    return [n for n in nodes if mode in n.modes]


#: Launch arguments of launch/<mode>.launch.py: name -> (default, description). Empty string: unset.
LAUNCH_ARGUMENTS: dict[str, dict[str, tuple[str, str]]] = {
    mode: {
        "use_sim_time": (
            "true" if mode == "sim" else "false",
            "Nodes follow /clock (sim: published by dynamics_node); false: wall clock.",
        ),
        "params_file": ("", "Extra parameter yaml applied to every node after its config/<node>.yaml."),
        "robot_description_file": ("", "URDF of the arm and tool; empty: the package's default URDF."),
        "rviz": ("false", "Start RViz with config/grinding.rviz (true/false)."),
        "record": ("", "Directory for an MCAP bag written by the recorder node; empty: no recording."),
        "plan_file": ("", "plan.json for grinding_executive; empty: the plan planner_node makes at start-up."),
        "start": ("false", "The executive starts the job once it has a plan and joint states (true/false)."),
        "discovery_range": (
            "LOCALHOST" if mode == "sim" else "",
            "ROS_AUTOMATIC_DISCOVERY_RANGE for the nodes (LOCALHOST, SUBNET, OFF, SYSTEM_DEFAULT); "
            + ("sim keeps DDS on this machine." if mode == "sim"
               else "empty: the environment's (a real cell sets SUBNET), LOCALHOST when unset."),
        ),
        **(
            {
                "robot_ip": (DEFAULT_ROBOT_IP, "Address of the robot controller (ros2_control driver)."),
                "ft_sensor_ip": (DEFAULT_FT_SENSOR_IP, "Address of the force-torque sensor (ATI Net F/T)."),
            }
            if mode == "real"
            else {}
        ),
    }
    for mode in MODES
}


def _truthy(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"launch argument {name}: expected true or false, got {value!r}")


def graph_from_launch_arguments(mode: str, values: Mapping[str, str]) -> list[NodeSpec]:
    """:func:`graph` for the string values of the launch arguments (missing ones take defaults)."""
    args = {k: str(values.get(k, default)) for k, (default, _) in LAUNCH_ARGUMENTS[mode].items()}
    return graph(
        mode,
        robot_ip=args.get("robot_ip") or None,
        ft_sensor_ip=args.get("ft_sensor_ip") or None,
        record=args["record"] or None,
        rviz=_truthy(args["rviz"], "rviz"),
        robot_description_file=args["robot_description_file"] or None,
        use_sim_time=_truthy(args["use_sim_time"], "use_sim_time"),
        plan_file=args["plan_file"] or None,
        start=_truthy(args["start"], "start"),
    )


def launch_description(mode: str) -> Any:
    """The ``LaunchDescription`` of ``launch/<mode>.launch.py``: its arguments and the graph's nodes.

    Imports launch lazily: the pip path never calls this.
    """
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    from launch import LaunchDescription

    arguments = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in LAUNCH_ARGUMENTS[mode].items()
    ]
    return LaunchDescription(
        [*arguments, OpaqueFunction(function=lambda context, *a, **k: launch_actions(mode, context))]
    )


def package_installed(package: str) -> bool:
    """True if the ament index of this ROS install knows ``package`` (False without ament_index_python)."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return False
    try:
        get_package_prefix(package)
    except PackageNotFoundError:
        return False
    return True


def launch_actions(mode: str, context: Any) -> list[Any]:
    """launch_ros ``Node`` actions for the graph (called from an ``OpaqueFunction`` in launch/).

    ``context.launch_configurations`` holds the launch arguments' values. Imports launch_ros
    lazily: the pip path never calls this.
    """
    from launch_ros.actions import Node

    values = dict(getattr(context, "launch_configurations", {}) or {})
    specs = graph_from_launch_arguments(mode, values)
    extra = [values["params_file"]] if values.get("params_file") else []
    actions: list[Any] = []
    discovery = values.get("discovery_range", LAUNCH_ARGUMENTS[mode]["discovery_range"][0]).strip()
    if discovery:
        from launch.actions import SetEnvironmentVariable

        from robot_grinding_sim.ros.environment import DISCOVERY_RANGES, DISCOVERY_VAR

        if discovery not in DISCOVERY_RANGES:
            raise ValueError(f"launch argument discovery_range: expected one of {DISCOVERY_RANGES}, got {discovery!r}")
        actions.append(SetEnvironmentVariable(DISCOVERY_VAR, discovery))
    installed = {s.package: package_installed(s.package) for s in specs if s.package != PACKAGE}
    for s in specs:
        if s.stands_in_for is not None and installed.get(s.stands_in_for, True):
            continue  # the ROS install has the original (robot_state_publisher)
        if s.package != PACKAGE and not installed[s.package]:
            # launch would stop at the first missing package and leave the nodes it started running
            from launch.actions import LogInfo

            actions.append(LogInfo(msg=f"robot_grinding_sim: package {s.package} is not installed; {s.name} skipped"))
            continue
        if s.package == PACKAGE and not s.module_available():
            if mode == "real":  # a real cell without its driver would send the plan to nobody
                raise RuntimeError(f"robot_grinding_sim: the real graph needs {s.executable}, which this "
                                   "installation does not have (not written yet): nothing launched")
            # not written yet (see the README): leave it out rather than fail the whole launch
            from launch.actions import LogInfo

            actions.append(LogInfo(msg=f"robot_grinding_sim: node {s.executable} is not available yet; skipped"))
            continue
        params: list[Any] = [str(p) for p in s.existing_params_files()] + [dict(s.parameters)] + extra
        kwargs: dict[str, Any] = {}
        if s.package == "robot_state_publisher":
            urdf = values.get("robot_description_file") or str(package_file(URDF_DEFAULT))
            params.insert(0, {"robot_description": Path(urdf).read_text()})
        if s.package == "rviz2":
            kwargs["arguments"] = ["-d", str(package_file(RVIZ_CONFIG))]
        actions.append(
            Node(
                package=s.package,
                executable=s.executable,
                name=s.name,
                parameters=params,
                remappings=list(s.remappings),
                output="screen",
                **kwargs,
            )
        )
    return actions


def describe(mode: str, **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`graph` as plain dicts (for ``--json`` and tests)."""
    out = []
    for n in graph(mode, **kwargs):
        out.append(
            {
                "name": n.name,
                "package": n.package,
                "executable": n.executable,
                "description": n.description,
                "params_files": [str(p) for p in n.existing_params_files()],
                "parameters": dict(n.parameters),
                "remappings": [list(r) for r in n.remappings],
                "available": n.module_available() if n.package == PACKAGE else None,
                "stands_in_for": n.stands_in_for,
            }
        )
    return out

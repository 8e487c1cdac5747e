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

import atexit
import functools
import importlib.util
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.resources import URDF_DEFAULT, package_file, share_dirs  # noqa: F401 (re-exported)

# the robot and sensor addresses for ``real`` when none is given (placeholders: always pass the real ones)
from robot_grinding_sim.hardware.addresses import DEFAULT_FT_SENSOR_IP, DEFAULT_ROBOT_IP

PACKAGE = "robot_grinding_sim"
MODES = ("sim", "real")

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

    from robot_grinding_sim.core.parameters import yaml_load

    if isinstance(v, str):
        # plain if YAML reads it back as the same string (1e5 is a number to rcl), else quoted
        if v and v.strip() == v and yaml_load(v) == v:
            return v
        return yaml.safe_dump(v, default_style="'").strip().splitlines()[0]
    return yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("...").strip()


#: The cell's parameter file (every physical parameter; robot_grinding_sim/core/config.py defines them).
CELL_CONFIG = "config/cell.yaml"


def config_files(executable: str) -> tuple[str, ...]:
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
        robot_description_file: URDF for every node that loads one, an override of the parameter
            files' (None or empty: theirs, a ``--params-file``'s ``robot.description_file`` or
            config/cell.yaml's, the package's ``urdf/ur10e_grinding.urdf``).
        use_sim_time: default True in sim (the nodes follow dynamics_node's /clock), False in real.
        plan_file: plan.json for grinding_executive (None: it runs the planner's latched plan, and
            planner_node plans at start-up; given: planner_node publishes it, and dynamics_node starts
            at rest on its first knot).
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
    # the URDF as an override (-p) only when given: it would beat the --params-file of the cell, whose
    # robot.description_file (config/cell.yaml's empty one: the package's) names the arm otherwise
    urdf = robot_description_file
    common: dict[str, Any] = {"use_sim_time": sim_time}
    with_urdf: dict[str, Any] = {**common, **({"robot.description_file": urdf} if urdf else {})}

    nodes: list[NodeSpec] = [
        NodeSpec(
            "dynamics_node",
            "dynamics_node",
            ("sim",),
            "simulated arm: computed-torque control on RNEA dynamics; /joint_states, /clock",
            params_files=config_files("dynamics_node"),
            # it owns sim time, so it must not wait for a /clock itself; with a plan it starts at rest
            # on the plan's first knot, where the in-process job starts
            parameters={**with_urdf, "use_sim_time": False, "publish_clock": sim_time,
                        **({"plan_file": str(Path(plan_file).resolve())} if plan_file else {})},
        ),
        NodeSpec(
            "hardware_driver",
            "hardware_driver",
            ("real",),
            "real arm and F/T sensor: forwards commands after safety checks; /ft_sensor/wrench",
            params_files=config_files("hardware_driver"),
            parameters={
                **common,
                # a lifecycle node: it configures and activates itself, as ros2_control brings
                # hardware to active (docs/hardware.md, "The driver's lifecycle")
                "autostart": True,
                "robot_ip": robot_ip or DEFAULT_ROBOT_IP,
                "ft_sensor_ip": ft_sensor_ip or DEFAULT_FT_SENSOR_IP,
            },
        ),
        NodeSpec(
            "collision_node",
            "collision_node",
            MODES,
            "python-fcl tool/part contacts on /joint_states -> /contact/points",
            params_files=config_files("collision_node"),
            parameters=with_urdf,
        ),
        NodeSpec(
            "contact_solver_node",
            "contact_solver_node",
            MODES,
            "contact force model -> /contact/wrench (and the simulated /ft_sensor/wrench in sim)",
            params_files=config_files("contact_solver_node"),
            # with a plan file its removal map is on the job's grid (the in-process map's)
            parameters={**with_urdf, **({"plan_file": str(Path(plan_file).resolve())} if plan_file else {})},
            # in real mode the measured /ft_sensor/wrench comes from hardware_driver: the model's
            # sensor output is kept apart as the prediction
            remappings=() if sim else (("ft_sensor/wrench", "ft_sensor/predicted_wrench"),),
        ),
        NodeSpec(
            "planner_node",
            "planner_node",
            MODES,
            "passes on the CAD surface (or the plan_file's) -> /grinding/path, /grinding/trajectory, markers",
            params_files=config_files("planner_node"),
            # with a plan file it publishes that plan (the one the executive runs) for RViz and the bag
            parameters={**with_urdf, **({"plan_file": str(Path(plan_file).resolve())} if plan_file else {})},
        ),
        NodeSpec(
            "grinding_executive",
            "grinding_executive",
            MODES,
            "streams the plan to the arm through the ros2_control topics; ~/start, ~/stop",
            params_files=config_files("grinding_executive"),
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
            params_files=config_files("description_publisher"),
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
                params_files=config_files("recorder"),
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
                "ft_sensor_ip": (DEFAULT_FT_SENSOR_IP, "IPv4 address of the force-torque sensor (ATI Net F/T); "
                                 "required: hardware_driver refuses to start without it."),
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


def _enabling_values(mode: str) -> dict[str, str]:
    """Launch-argument values under which :func:`graph` returns every node and parameter key it can:
    every boolean argument true, every argument that is empty by default given (record, plan_file)."""
    return {
        name: "true" if default in ("true", "false") else default or f"/{name}"
        for name, (default, _) in LAUNCH_ARGUMENTS[mode].items()
    }


def _launch_substitution(describe: str, perform: Callable[[Mapping[str, str]], str]) -> Any:
    """A launch ``Substitution`` whose text ``perform`` computes from the launch arguments' values.

    It lets the launch description hold the nodes while their argument-dependent values still
    come from :func:`graph` (one definition; nothing re-derived here). ``describe`` is what
    ``ros2 launch -p`` shows for it.
    """
    from launch import Substitution

    class FromLaunchArguments(Substitution):
        """Text computed from ``context.launch_configurations`` (the launch arguments)."""

        def describe(self) -> str:
            return describe

        def perform(self, context: Any) -> str:
            return perform(dict(context.launch_configurations))

    return FromLaunchArguments()


def _node_spec(mode: str, values: Mapping[str, str], name: str) -> NodeSpec | None:
    """The graph's node ``name`` for these launch-argument values (None: not in that graph)."""
    return next((s for s in graph_from_launch_arguments(mode, values) if s.name == name), None)


def _parameter_value(mode: str, name: str, key: str, example: Any) -> Any:
    """A launch_ros ``ParameterValue`` of ``name``'s override ``key``, evaluated by :func:`graph`.

    ``example`` is the value under :func:`_enabling_values`: its type is the parameter's. A key
    that the graph sets only for some arguments (plan_file) is left at its configured value
    otherwise; a parameter dict cannot leave a key out at launch time, so it gets '' there, which
    is what config/<node>.yaml and the node give it ("empty: ...").
    """
    from launch_ros.parameter_descriptions import ParameterValue

    scalar = type(example) if type(example) in (bool, int, float, str) else None

    def perform(values: Mapping[str, str]) -> str:
        spec = _node_spec(mode, values, name)
        if spec is None or key not in spec.parameters:
            if scalar is str:
                return ""
            raise RuntimeError(f"robot_grinding_sim: graph() left out {name}'s {key}; no neutral value for it")
        value = spec.parameters[key]
        return value if isinstance(value, str) else yaml_value(value)

    return ParameterValue(_launch_substitution(f"graph('{mode}')['{name}'].{key}", perform), value_type=scalar)


def _in_graph(mode: str, name: str) -> Any:
    """An ``IfCondition`` that holds when the launch arguments put node ``name`` in the graph."""
    from launch.conditions import IfCondition

    def perform(values: Mapping[str, str]) -> str:
        return "true" if _node_spec(mode, values, name) is not None else "false"

    return IfCondition(_launch_substitution(f"'{name}' in graph('{mode}')", perform))


@functools.cache
def no_params_file() -> str:
    """A parameter file that sets nothing: the last parameter file of every node when params_file
    is empty (a launch_ros Node cannot drop a parameter-file entry at launch time, and an empty
    path would be skipped with a warning on every launch). Written once per process."""
    fd, path = tempfile.mkstemp(prefix="robot_grinding_sim_no_params_", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write("/**:\n  ros__parameters: {}\n")
    atexit.register(lambda: Path(path).unlink(missing_ok=True))  # the nodes read it at start-up
    return path


def _check_launch_arguments(mode: str, values: Mapping[str, str], missing_own: Sequence[str]) -> None:
    """Refuse bad launch arguments before any node starts (the launch description's first action).

    Raises:
        ValueError: naming the argument (a boolean that is not one, an unknown discovery_range).
        RuntimeError: real mode without one of this package's nodes (``missing_own``): the
            executive would send the plan to nobody, so nothing is launched.
    """
    graph_from_launch_arguments(mode, values)  # the booleans, named by graph's own conversion
    discovery = values.get("discovery_range", "").strip()
    if discovery:
        from robot_grinding_sim.environment import DISCOVERY_RANGES

        if discovery not in DISCOVERY_RANGES:
            raise ValueError(f"launch argument discovery_range: expected one of {DISCOVERY_RANGES}, got {discovery!r}")
    if mode == "real" and missing_own:
        raise RuntimeError(f"robot_grinding_sim: the real graph needs {', '.join(missing_own)}, which this "
                           "installation does not have (not written yet): nothing launched")


def launch_description(mode: str) -> Any:
    """The ``LaunchDescription`` of ``launch/<mode>.launch.py``: its arguments and the graph's nodes.

    The description holds one launch_ros ``Node`` per node :func:`graph` can start in ``mode``, so
    ``ros2 launch -p`` shows them. What depends on the launch arguments is evaluated at launch time
    by :func:`graph` itself, through substitutions on the launch configurations: each parameter
    override, and an ``IfCondition`` for the optional nodes (recorder: ``record:=DIR``, rviz2:
    ``rviz:=true``). The entities, in order:

    1. the ``DeclareLaunchArgument`` of :data:`LAUNCH_ARGUMENTS`;
    2. an ``OpaqueFunction`` that only checks the arguments (:func:`_check_launch_arguments`),
       so a bad value or the real graph without its driver launches nothing;
    3. ``SetEnvironmentVariable`` of ROS_AUTOMATIC_DISCOVERY_RANGE unless discovery_range is empty,
       before the first node;
    4. per node: a ``Node``, or a ``LogInfo`` saying why it is skipped. Other packages' nodes
       missing from the ament index (robot_state_publisher, rviz2) are skipped, since launch would
       stop at the first and leave the started ones running; description_publisher stands in for a
       missing robot_state_publisher. This package's nodes that are not written are skipped in sim
       (real refuses in step 2). Decided here: the ament index and the modules are known now.

    Parameters of a Node: its config files, the graph's overrides, then the params_file argument's
    file (:func:`no_params_file` when it is empty). Imports launch lazily: the pip path never calls
    this.
    """
    from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, SetEnvironmentVariable
    from launch.conditions import IfCondition
    from launch_ros.actions import Node
    from launch_ros.parameter_descriptions import ParameterValue

    from launch import LaunchDescription
    from robot_grinding_sim.environment import DISCOVERY_VAR

    specs = graph_from_launch_arguments(mode, _enabling_values(mode))
    default_names = {s.name for s in graph_from_launch_arguments(mode, {})}
    installed = {s.package: package_installed(s.package) for s in specs if s.package != PACKAGE}
    missing_own = [s.executable for s in specs if s.package == PACKAGE and not s.module_available()]

    entities: list[Any] = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, (default, description) in LAUNCH_ARGUMENTS[mode].items()
    ]
    entities.append(OpaqueFunction(
        function=lambda context, *_a, **_k: _check_launch_arguments(mode, context.launch_configurations, missing_own)
    ))
    entities.append(SetEnvironmentVariable(
        DISCOVERY_VAR,
        _launch_substitution("LaunchConfig('discovery_range')", lambda v: v["discovery_range"].strip()),
        condition=IfCondition(_launch_substitution(
            "LaunchConfig('discovery_range') != ''", lambda v: "true" if v["discovery_range"].strip() else "false"
        )),
    ))
    extra = _launch_substitution(
        "LaunchConfig('params_file') or no_params_file()", lambda v: v["params_file"] or no_params_file()
    )
    for s in specs:
        # an optional node (recorder, rviz2) starts only when its argument puts it in the graph
        condition = None if s.name in default_names else _in_graph(mode, s.name)
        if s.stands_in_for is not None and installed.get(s.stands_in_for, True):
            continue  # the ROS install has the original (robot_state_publisher)
        if s.package != PACKAGE and not installed[s.package]:
            entities.append(LogInfo(msg=f"robot_grinding_sim: package {s.package} is not installed; {s.name} skipped",
                                    condition=condition))
            continue
        if s.package == PACKAGE and not s.module_available() and mode != "real":
            # not written yet: leave it out rather than fail the whole launch
            entities.append(LogInfo(msg=f"robot_grinding_sim: node {s.executable} is not available yet; skipped",
                                    condition=condition))
            continue
        # in real mode a missing node of this package stays in the description: step 2 refuses the launch
        overrides = {k: _parameter_value(mode, s.name, k, v) for k, v in s.parameters.items()}
        params: list[Any] = [*(str(p) for p in s.existing_params_files()), overrides, extra]
        kwargs: dict[str, Any] = {}
        if s.package == "robot_state_publisher":
            # its URDF is the text of the file, which robot_description_file names (read at launch)
            urdf = _launch_substitution(
                "read(LaunchConfig('robot_description_file') or URDF_DEFAULT)",
                lambda v: Path(v.get("robot_description_file") or package_file(URDF_DEFAULT)).read_text(),
            )
            params.insert(0, {"robot_description": ParameterValue(urdf, value_type=str)})
        if s.package == "rviz2":
            kwargs["arguments"] = ["-d", str(package_file(RVIZ_CONFIG))]
        entities.append(Node(
            package=s.package,
            executable=s.executable,
            name=s.name,
            parameters=params,
            remappings=list(s.remappings),
            output="screen",
            condition=condition,
            **kwargs,
        ))
    return LaunchDescription(entities)


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

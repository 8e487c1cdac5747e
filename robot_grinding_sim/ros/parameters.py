"""One parameter schema per node -> declared ROS parameters with descriptors, validated at start-up.

A node lists its parameters once as :class:`ParamSpec` entries; :func:`declare_parameters`
declares each with an ``rcl_interfaces/ParameterDescriptor`` (description, type, read-only flag,
``FloatingPointRange`` / ``IntegerRange`` where both bounds are finite), reads the value (from
``--ros-args --params-file config/<node>.yaml`` / ``-p name:=value`` or the default), validates it
(type, finite, range, choices, array length, existing path) and raises :class:`ParameterError`
naming the parameter and the problem. :func:`robot_grinding_sim.ros.node_base.run_node` turns that
error into one FATAL log line and exit code 1: a bad value stops the node at start-up.

The validation itself (:func:`validate_value`, :func:`validate_params`) is pure Python, so tests
and ``grinding bringup`` can check a yaml file against a node's schema without ROS.

Conveniences over plain rclpy:
- an integer given for a double parameter (``control_rate: 1000`` in yaml) is accepted as 1000.0,
  and an integer array for a double array likewise (rclpy would refuse the type);
- an empty-list default declares a typed empty array (rclpy cannot infer a type from ``[]``);
- run-time ``ros2 param set`` goes through the same validation (an invalid value is refused with
  the same message).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from robot_grinding_sim.core.errors import InputError

#: Parameter type names of the schema (the rcl_interfaces ParameterType names, lower case).
TYPES = (
    "bool",
    "int",
    "double",
    "string",
    "bool_array",
    "int_array",
    "double_array",
    "string_array",
)


class ParameterError(InputError):
    """A parameter value that the node cannot start (or run) with; the message names it.

    Attributes:
        name: the parameter's name.
        node_name: the node that refused it, when known.
    """

    def __init__(self, name: str, problem: str, node_name: str | None = None) -> None:
        self.name = name
        self.problem = problem
        self.node_name = node_name
        super().__init__(f"parameter '{name}': {problem}")


@dataclass(frozen=True)
class ParamSpec:
    """One declared parameter.

    Attributes:
        name: parameter name (dots allowed for groups, e.g. ``gains.kp``).
        default: default value; its Python type gives the parameter type unless ``type`` is set.
        description: one line for ``ros2 param describe``; put the unit in it.
        type: one of :data:`TYPES`; needed when the default is an empty list.
        range: ``(min, max)`` or ``(min, max, step)``, inclusive; for arrays it applies to every
            element. ``None`` bounds mean unbounded on that side (no descriptor range is set then).
        choices: allowed values (scalars) or allowed elements (arrays).
        read_only: declared read-only (cannot be changed after start-up).
        length: required array length (None: any).
        min_length: minimum array length.
        path: ``"file"`` or ``"dir"``: a non-empty string must name an existing file/directory.
        required: a string or array must not be empty.
        additional_constraints: free text shown in the descriptor.
    """

    name: str
    default: Any
    description: str
    type: str | None = None
    range: tuple[float | None, float | None] | tuple[float | None, float | None, float] | None = None
    choices: tuple[Any, ...] | None = None
    read_only: bool = False
    length: int | None = None
    min_length: int = 0
    path: str | None = None
    required: bool = False
    additional_constraints: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.param_type not in TYPES:
            raise ValueError(f"ParamSpec {self.name!r}: type must be one of {TYPES}, got {self.param_type!r}")
        if self.path not in (None, "file", "dir"):
            raise ValueError(f"ParamSpec {self.name!r}: path must be None, 'file' or 'dir'")
        if self.range is not None and len(self.range) not in (2, 3):
            raise ValueError(f"ParamSpec {self.name!r}: range must be (min, max) or (min, max, step)")

    @property
    def param_type(self) -> str:
        """The schema type name (explicit ``type`` or inferred from ``default``)."""
        return self.type if self.type is not None else infer_type(self.default, self.name)

    @property
    def is_array(self) -> bool:
        return self.param_type.endswith("_array")

    @property
    def element_type(self) -> str:
        return self.param_type.removesuffix("_array")


def infer_type(value: Any, name: str = "?") -> str:
    """Schema type name of a Python value (bool before int: bool is an int subclass)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"ParamSpec {name!r}: an empty-list default needs an explicit type")
        return infer_type(value[0], name) + "_array"
    raise ValueError(f"ParamSpec {name!r}: unsupported default {value!r}")


def _describe(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _coerce_scalar(spec: ParamSpec, etype: str, v: Any, where: str) -> Any:
    if etype == "bool":
        if not isinstance(v, bool):
            raise ParameterError(spec.name, f"{where}expected a bool, got {_describe(v)}")
        return v
    if etype == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ParameterError(spec.name, f"{where}expected an integer, got {_describe(v)}")
        return int(v)
    if etype == "double":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ParameterError(spec.name, f"{where}expected a number, got {_describe(v)}")
        x = float(v)
        if not math.isfinite(x):
            raise ParameterError(spec.name, f"{where}must be finite, got {x}")
        return x
    if etype == "string":
        if not isinstance(v, str):
            raise ParameterError(spec.name, f"{where}expected a string, got {_describe(v)}")
        return v
    raise ParameterError(spec.name, f"unsupported type {etype}")  # pragma: no cover


def _check_range(spec: ParamSpec, v: Any, where: str) -> None:
    if spec.range is None or spec.element_type not in ("int", "double"):
        return
    lo, hi = spec.range[0], spec.range[1]
    if lo is not None and v < lo:
        raise ParameterError(spec.name, f"{where}{v} is below the minimum {lo}")
    if hi is not None and v > hi:
        raise ParameterError(spec.name, f"{where}{v} is above the maximum {hi}")


def validate_value(spec: ParamSpec, value: Any) -> Any:
    """Check ``value`` against ``spec`` and return it normalised (ints -> float for doubles, lists).

    Raises:
        ParameterError: wrong type, NaN/inf, out of range, not one of the choices, wrong array
            length, empty where required, or a path that does not exist.
    """
    if spec.is_array:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            if hasattr(value, "tolist"):
                value = value.tolist()
            else:
                raise ParameterError(
                    spec.name, f"expected a list of {spec.element_type}, got {_describe(value)}"
                )
        out = [_coerce_scalar(spec, spec.element_type, v, f"element {i}: ") for i, v in enumerate(value)]
        if spec.length is not None and len(out) != spec.length:
            raise ParameterError(spec.name, f"expected {spec.length} elements, got {len(out)}")
        if len(out) < spec.min_length:
            raise ParameterError(spec.name, f"expected at least {spec.min_length} elements, got {len(out)}")
        if spec.required and not out:
            raise ParameterError(spec.name, "must not be empty")
        for i, v in enumerate(out):
            _check_range(spec, v, f"element {i}: ")
            if spec.choices is not None and v not in spec.choices:
                raise ParameterError(spec.name, f"element {i}: {v!r} is not one of {list(spec.choices)}")
        return out
    v = _coerce_scalar(spec, spec.param_type, value, "")
    _check_range(spec, v, "")
    if spec.choices is not None and v not in spec.choices:
        raise ParameterError(spec.name, f"{v!r} is not one of {list(spec.choices)}")
    if spec.param_type == "string":
        if spec.required and not v.strip():
            raise ParameterError(spec.name, "must not be empty")
        if spec.path and v:
            p = os.path.expanduser(v)
            if spec.path == "file" and not os.path.isfile(p):
                raise ParameterError(spec.name, f"file not found: {v}")
            if spec.path == "dir" and not os.path.isdir(p):
                raise ParameterError(spec.name, f"directory not found: {v}")
    return v


def validate_params(
    specs: Iterable[ParamSpec], values: Mapping[str, Any], allow_unknown: bool = False
) -> dict[str, Any]:
    """Validate a mapping of values (e.g. a yaml file's ``ros__parameters``) against a schema.

    Missing names take their default (the default is validated too). Unknown names raise
    :class:`ParameterError` unless ``allow_unknown`` (ROS itself ignores undeclared overrides, but
    a typo in a config file should not pass a test silently).

    Returns:
        name -> normalised value, for every spec.
    """
    specs = list(specs)
    names = {s.name for s in specs}
    if not allow_unknown:
        unknown = sorted(set(values) - names)
        if unknown:
            raise ParameterError(unknown[0], f"unknown parameter (known: {', '.join(sorted(names))})")
    return {s.name: validate_value(s, values.get(s.name, s.default)) for s in specs}


def flatten_ros_parameters(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested yaml dicts into dotted parameter names (``{'a': {'b': 1}}`` -> ``{'a.b': 1}``)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_ros_parameters(value, name + "."))
        else:
            out[name] = value
    return out


def load_params_file(path: str | os.PathLike[str], node_name: str | None = None) -> dict[str, Any]:
    """Read a ROS 2 parameter yaml file and return the flattened parameters that apply to a node.

    Sections ``/**``, ``**``, ``<node_name>`` and ``/<node_name>`` are merged in that order
    (later wins), like rcl does for a node in the root namespace.

    Raises:
        InputError: the file is missing, not yaml, or has no ``ros__parameters`` section.
    """
    import yaml

    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except FileNotFoundError as exc:
        raise InputError(f"parameter file not found: {path}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"parameter file {path} is not valid yaml: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise InputError(f"parameter file {path}: expected a mapping at the top level")
    keys = ["/**", "**"] + ([node_name, "/" + node_name] if node_name else [])
    found = False
    out: dict[str, Any] = {}
    for key in keys:
        section = doc.get(key)
        if isinstance(section, Mapping) and isinstance(section.get("ros__parameters"), Mapping):
            found = True
            out.update(flatten_ros_parameters(section["ros__parameters"]))
    if not found:
        who = node_name or "any node"
        raise InputError(f"parameter file {path}: no '/**: ros__parameters:' section for {who}")
    return out


# --------------------------------------------------------------------------------------------------
# rclpy side (imported lazily so the pure part above works without ROS)


def _ros_type(spec: ParamSpec) -> Any:
    from rclpy.parameter import Parameter

    return getattr(Parameter.Type, spec.param_type.upper().replace("INT", "INTEGER"))


def make_descriptor(spec: ParamSpec) -> Any:
    """The ``rcl_interfaces/ParameterDescriptor`` of a spec (range only where both bounds are finite)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    desc = ParameterDescriptor(
        name=spec.name,
        type=int(_ros_type(spec)),
        description=spec.description,
        read_only=spec.read_only,
    )
    constraints = [spec.additional_constraints] if spec.additional_constraints else []
    if spec.choices is not None:
        constraints.append(f"one of {list(spec.choices)}")
    if spec.length is not None:
        constraints.append(f"{spec.length} elements")
    if spec.path:
        constraints.append(f"an existing {spec.path} (or empty for the default)" if not spec.required else "")
    rng = spec.range
    if rng is not None:
        lo, hi = rng[0], rng[1]
        step = rng[2] if len(rng) == 3 else 0
        if spec.is_array:
            constraints.append(f"every element in [{lo}, {hi}]")
        elif lo is not None and hi is not None:
            if spec.element_type == "double":
                desc.floating_point_range = [
                    FloatingPointRange(from_value=float(lo), to_value=float(hi), step=float(step))
                ]
            elif spec.element_type == "int":
                desc.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=int(step))]
        else:
            constraints.append(f">= {lo}" if lo is not None else f"<= {hi}")
    desc.additional_constraints = "; ".join(c for c in constraints if c)
    return desc


def _fix_int_overrides(node: Any, spec: ParamSpec) -> None:
    """Turn an integer override of a double (array) parameter into a double one.

    rcl reads ``1000`` from yaml as INTEGER and rclpy would then refuse it for a DOUBLE parameter;
    every ROS user writes ``control_rate: 1000``. Uses the node's override table (present in rclpy
    from Foxy to Kilted); when absent the type error below still names the parameter.
    """
    from rclpy.parameter import Parameter

    overrides = getattr(node, "_parameter_overrides", None)
    if not isinstance(overrides, dict) or spec.name not in overrides:
        return
    ov = overrides[spec.name]
    if spec.param_type == "double" and ov.type_ == Parameter.Type.INTEGER:
        overrides[spec.name] = Parameter(spec.name, Parameter.Type.DOUBLE, float(ov.value))
    elif spec.param_type == "double_array" and ov.type_ == Parameter.Type.INTEGER_ARRAY:
        overrides[spec.name] = Parameter(spec.name, Parameter.Type.DOUBLE_ARRAY, [float(x) for x in ov.value])


def declare_parameters(node: Any, specs: Iterable[ParamSpec], validate_on_set: bool = True) -> dict[str, Any]:
    """Declare every spec on ``node``, read and validate the values; return name -> value.

    Args:
        node: an ``rclpy.node.Node``.
        specs: the node's schema.
        validate_on_set: also refuse invalid run-time changes (``ros2 param set``) with the same
            validation (a parameters callback).

    Raises:
        ParameterError: the first invalid parameter (type, range, NaN, choices, length, path).
    """
    from rclpy.exceptions import (
        InvalidParameterTypeException,
        InvalidParameterValueException,
        ParameterUninitializedException,
    )
    from rclpy.parameter import Parameter

    specs = list(specs)
    node_name = node.get_name()
    values: dict[str, Any] = {}
    for spec in specs:
        # Validate the default first: a schema bug must not look like a user error later.
        default = validate_value(spec, spec.default)
        _fix_int_overrides(node, spec)
        desc = make_descriptor(spec)
        empty_array = spec.is_array and len(default) == 0
        try:
            if empty_array:
                node.declare_parameter(spec.name, _ros_type(spec), desc)
            else:
                node.declare_parameter(spec.name, default, desc)
        except InvalidParameterTypeException:
            override = getattr(node, "_parameter_overrides", {}).get(spec.name)
            got = f"{override.value!r} of type {override.type_.name.lower()}" if override is not None else "?"
            problem = f"expected type {spec.param_type}, got {got}"
            raise ParameterError(spec.name, problem, node_name) from None
        except InvalidParameterValueException as exc:
            # rclpy's own range check (from the descriptor): re-validate to get our message.
            override = getattr(node, "_parameter_overrides", {}).get(spec.name)
            if override is not None:
                try:
                    validate_value(spec, override.value)
                except ParameterError as perr:
                    perr.node_name = node_name
                    raise perr from None
            raise ParameterError(spec.name, str(exc), node_name) from None
        try:
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:
            node.set_parameters([Parameter(spec.name, _ros_type(spec), list(default))])
            value = list(default)
        try:
            values[spec.name] = validate_value(spec, value)
        except ParameterError as exc:
            exc.node_name = node_name
            raise
    if validate_on_set:
        install_validator(node, specs)
    return values


def install_validator(node: Any, specs: Iterable[ParamSpec]) -> None:
    """Refuse run-time parameter changes that fail :func:`validate_value` (reason names the parameter)."""
    from rcl_interfaces.msg import SetParametersResult

    by_name = {s.name: s for s in specs}

    def _on_set(params: list[Any]) -> Any:
        for p in params:
            spec = by_name.get(p.name)
            if spec is None:
                continue
            try:
                validate_value(spec, p.value)
            except ParameterError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(_on_set)

"""Declared ROS parameters from the core's schemas: descriptors with ranges, validated at start-up.

The schema itself (:class:`ParamSpec`, validation, yaml loading, the configuration dataclasses'
specs) is ROS-free and lives in :mod:`robot_grinding_sim.core.parameters`. Here,
:func:`declare_parameters` declares each spec on a node with an ``rcl_interfaces/ParameterDescriptor``
(description, type, read-only flag, ``FloatingPointRange`` / ``IntegerRange`` where both bounds are
finite), reads the value (``--params-file`` / ``-p name:=value`` or the default), validates it and
raises :class:`ParameterError` naming the parameter;
:func:`robot_grinding_sim.ros.node_base.run_node` turns that into one FATAL line and exit code 1.

Conveniences over plain rclpy:
- an integer given for a double parameter (``control_rate: 1000`` in yaml) is accepted as 1000.0,
  and an integer array for a double array likewise (rclpy would refuse the type);
- an empty-list default declares a typed empty array (rclpy cannot infer a type from ``[]``);
- run-time ``ros2 param set`` goes through the same validation (an invalid value is refused with
  the same message).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from robot_grinding_sim.core.parameters import (
    ParameterError,
    ParamSpec,
    validate_value,
)

__all__ = ["ParamSpec", "ParameterError", "declare_parameters", "install_validator", "make_descriptor"]


# --------------------------------------------------------------------------------------------------
# rclpy side (imported lazily so the pure part above works without ROS)


def _ros_type(spec: ParamSpec) -> Any:
    from rclpy.parameter import Parameter

    return getattr(Parameter.Type, spec.param_type.upper().replace("INT", "INTEGER"))


def make_descriptor(spec: ParamSpec) -> Any:
    """The ``rcl_interfaces/ParameterDescriptor`` of a spec (range only where both bounds are finite)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    from robot_grinding_sim.ros.compat import parameter_type_id

    desc = ParameterDescriptor(
        name=spec.name,
        type=parameter_type_id(_ros_type(spec)),
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

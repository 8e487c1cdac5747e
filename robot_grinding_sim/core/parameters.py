"""Parameter schemas without ROS: one :class:`ParamSpec` per parameter, validation, yaml files.

A parameter is defined once, as a field of a configuration dataclass (:mod:`robot_grinding_sim.core.config`)
declared with :func:`param` (default, description, unit, range, choices). :func:`specs_of` turns
a dataclass into ParamSpecs named ``<group>.<field>`` (the ROS parameter names, dotted groups as
rcl reads nested yaml), :func:`config_from_values` builds the dataclass back from validated values.
:mod:`robot_grinding_sim.ros.parameters` declares the same specs on a node, with descriptors and
ranges; ``grinding check-config`` and the tests validate yaml files with them, without rclpy.

Validation (:func:`validate_value`, :func:`validate_params`): type, finite, range, choices, array
length, existing path; an integer given for a double (``stiffness: 100000`` in yaml) is accepted.
Every problem raises :class:`ParameterError`, whose message names the parameter.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from robot_grinding_sim.core.errors import InputError

T = TypeVar("T")

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
            if spec.path == "file" and p.startswith("package://"):
                from robot_grinding_sim.core.resources import resolve_package_uri

                try:
                    p = resolve_package_uri(p)
                except InputError as exc:
                    raise ParameterError(spec.name, str(exc)) from None
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


#: numbers as users write them that YAML 1.1 (PyYAML) reads as strings: an exponent without a dot
#: (``1e5``, ``2E-3``, ``+1e+5``), which rcl's parameter parser (strtod) reads as a double
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


@functools.cache
def _yaml_loader() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """yaml.SafeLoader that reads ``1e5`` as a number (see :func:`yaml_load`)."""

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))
    return Loader


def yaml_load(stream: Any) -> Any:
    """Parse YAML (a string or a file) the way parameter values are meant: ``yaml.safe_load``, but a
    number with an exponent and no dot (``1e5``, ``3E-4``) is a float, as rcl reads it, not the
    string YAML 1.1 makes of it. Every parameter file and ``--set`` value goes through here."""
    import yaml

    return yaml.load(stream, Loader=_yaml_loader())  # a SafeLoader subclass


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
            doc = yaml_load(fh)
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
# configuration dataclasses: one field = one parameter


PARAM_KEY = "robot_grinding_sim.param"


@dataclass(frozen=True)
class ParamInfo:
    """What :func:`param` attaches to a dataclass field (see :class:`ParamSpec` for the meaning)."""

    description: str
    unit: str = ""
    range: tuple[float | None, float | None] | None = None
    choices: tuple[Any, ...] | None = None
    length: int | None = None
    min_length: int = 0
    type: str | None = None
    path: str | None = None
    read_only: bool = True


def param(default: Any, description: str, *, unit: str = "", range: tuple[float | None, float | None] | None = None,
          choices: Sequence[Any] | None = None, length: int | None = None, min_length: int = 0,
          type: str | None = None, path: str | None = None, read_only: bool = True) -> Any:
    """A dataclass field that is also a parameter (frozen configuration dataclasses).

    Array defaults are stored as tuples (immutable); :func:`specs_of` hands them to ROS as lists.
    ``unit`` is appended to the description (``"contact stiffness K, N/m"``).
    """
    info = ParamInfo(description, unit, range, tuple(choices) if choices is not None else None, length,
                     min_length, type, path, read_only)
    if isinstance(default, list):
        default = tuple(default)
    return field(default=default, metadata={PARAM_KEY: info})


def _fields(cls: Any) -> list[Any]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a configuration dataclass")
    return [f for f in dataclasses.fields(cls) if PARAM_KEY in f.metadata]


def _ros_default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def specs_of(cls: Any, prefix: str) -> list[ParamSpec]:
    """The ParamSpecs of a configuration dataclass (an instance gives its values as defaults).

    Names are ``<prefix>.<field>`` (``prefix`` empty: the field names alone).
    """
    out = []
    for f in _fields(cls):
        info: ParamInfo = f.metadata[PARAM_KEY]
        default = getattr(cls, f.name) if not isinstance(cls, type) else f.default
        desc = info.description + (f", {info.unit}" if info.unit else "")
        out.append(ParamSpec(f"{prefix}.{f.name}" if prefix else f.name, _ros_default(default), desc,
                             type=info.type, range=info.range, choices=info.choices, read_only=info.read_only,
                             length=info.length, min_length=info.min_length, path=info.path))
    return out


def config_from_values(cls: type[T], values: Mapping[str, Any], prefix: str) -> T:
    """Build a configuration dataclass from (validated) parameter values named ``<prefix>.<field>``.

    Missing names keep the dataclass default; arrays become tuples.
    """
    kw = {}
    for f in _fields(cls):
        name = f"{prefix}.{f.name}" if prefix else f.name
        if name in values:
            v = values[name]
            kw[f.name] = tuple(v) if isinstance(v, list) else v
    return cls(**kw)


def config_values(obj: Any, prefix: str) -> dict[str, Any]:
    """The parameter values of a configuration dataclass instance, ``<prefix>.<field>`` -> value."""
    return {(f"{prefix}.{f.name}" if prefix else f.name): _ros_default(getattr(obj, f.name)) for f in _fields(obj)}

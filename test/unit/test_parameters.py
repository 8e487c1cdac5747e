"""The parameter schema: pure validation, yaml loading, and the config files against the node schemas."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from robot_grinding_sim.core.parameters import (
    ParameterError,
    ParamSpec,
    flatten_ros_parameters,
    infer_type,
    load_params_file,
    validate_params,
    validate_value,
)

REPO = Path(__file__).resolve().parents[2]


def test_infer_type() -> None:
    assert infer_type(True) == "bool"
    assert infer_type(3) == "int"
    assert infer_type(3.0) == "double"
    assert infer_type("x") == "string"
    assert infer_type([1.0, 2.0]) == "double_array"
    assert infer_type(["a"]) == "string_array"
    with pytest.raises(ValueError, match="explicit type"):
        ParamSpec("e", [], "empty")


def test_double_accepts_int_and_rejects_nan_bool_string() -> None:
    spec = ParamSpec("control_rate", 1000.0, "Hz", range=(1.0, 1e5))
    assert validate_value(spec, 500) == 500.0
    assert isinstance(validate_value(spec, 500), float)
    for bad, text in ((math.nan, "finite"), (math.inf, "finite"), (True, "number"), ("fast", "number")):
        with pytest.raises(ParameterError, match=text) as err:
            validate_value(spec, bad)
        assert "control_rate" in str(err.value)


@pytest.mark.parametrize(("value", "text"), [(-5.0, "below the minimum 1.0"), (2e5, "above the maximum")])
def test_range_names_parameter_and_bound(value: float, text: str) -> None:
    spec = ParamSpec("control_rate", 1000.0, "Hz", range=(1.0, 1e5))
    with pytest.raises(ParameterError) as err:
        validate_value(spec, value)
    assert str(err.value).startswith("parameter 'control_rate': ")
    assert text in str(err.value)
    assert err.value.name == "control_rate"


def test_open_range_and_int_type() -> None:
    spec = ParamSpec("k", 1.0, "", range=(0.0, None))
    assert validate_value(spec, 1e12) == 1e12
    with pytest.raises(ParameterError, match="below"):
        validate_value(spec, -1e-9)
    ispec = ParamSpec("n", 3, "", range=(1, 10))
    with pytest.raises(ParameterError, match="integer"):
        validate_value(ispec, 2.5)
    with pytest.raises(ParameterError, match="integer"):
        validate_value(ispec, True)


def test_arrays_length_range_elements() -> None:
    spec = ParamSpec("kp", [1.0] * 6, "1/s^2", range=(0.0, 1e6), length=6)
    assert validate_value(spec, [1, 2, 3, 4, 5, 6]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    with pytest.raises(ParameterError, match="expected 6 elements, got 5"):
        validate_value(spec, [1.0] * 5)
    with pytest.raises(ParameterError, match="element 2: -1.0 is below"):
        validate_value(spec, [1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ParameterError, match="element 0: must be finite"):
        validate_value(spec, [math.nan] + [1.0] * 5)
    with pytest.raises(ParameterError, match="list"):
        validate_value(spec, 3.0)
    names = ParamSpec("joints", [], "", type="string_array", required=True)
    with pytest.raises(ParameterError, match="must not be empty"):
        validate_value(names, [])


def test_choices_and_paths(tmp_path: Path) -> None:
    mode = ParamSpec("mode", "sim", "", choices=("sim", "real"))
    assert validate_value(mode, "real") == "real"
    with pytest.raises(ParameterError, match="'fake' is not one of"):
        validate_value(mode, "fake")
    f = tmp_path / "robot.urdf"
    f.write_text("<robot/>")
    pspec = ParamSpec("robot_description_file", "", "", path="file")
    assert validate_value(pspec, "") == ""  # empty: the node's default applies
    assert validate_value(pspec, str(f)) == str(f)
    with pytest.raises(ParameterError, match="file not found"):
        validate_value(pspec, str(tmp_path / "missing.urdf"))
    with pytest.raises(ParameterError, match="file not found"):
        validate_value(pspec, str(tmp_path))  # a directory is not a file
    dspec = ParamSpec("out", "", "", path="dir", required=True)
    with pytest.raises(ParameterError, match="must not be empty"):
        validate_value(dspec, "  ")


def test_validate_params_defaults_and_unknown() -> None:
    specs = [ParamSpec("a", 1.0, ""), ParamSpec("b", "x", "")]
    assert validate_params(specs, {"a": 2}) == {"a": 2.0, "b": "x"}
    with pytest.raises(ParameterError, match="'c': unknown parameter"):
        validate_params(specs, {"c": 1})
    assert validate_params(specs, {"c": 1}, allow_unknown=True) == {"a": 1.0, "b": "x"}


def test_load_params_file_merges_sections(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "/**:\n  ros__parameters:\n    a: 1\n    group:\n      b: 2.0\n"
        "my_node:\n  ros__parameters:\n    a: 3\n"
        "other:\n  ros__parameters:\n    a: 4\n"
    )
    assert load_params_file(f) == {"a": 1, "group.b": 2.0}
    assert load_params_file(f, "my_node") == {"a": 3, "group.b": 2.0}
    assert flatten_ros_parameters({"x": {"y": {"z": 1}}}) == {"x.y.z": 1}
    with pytest.raises(ValueError, match="not found"):
        load_params_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(ValueError, match="not valid yaml"):
        load_params_file(bad)
    empty = tmp_path / "empty.yaml"
    empty.write_text("foo:\n  bar: 1\n")
    with pytest.raises(ValueError, match="ros__parameters"):
        load_params_file(empty)

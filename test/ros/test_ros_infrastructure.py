"""The shared ROS helpers with rclpy in this process: declare_parameters, guarded, run_node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import compat
from robot_grinding_sim.ros.node_base import guarded
from robot_grinding_sim.ros.parameters import ParameterError, ParamSpec, declare_parameters

pytestmark = pytest.mark.ros

SPECS = [
    ParamSpec("rate", 500.0, "Hz", range=(1.0, 1e5)),
    ParamSpec("gains", [0.0], "gains", type="double_array"),
    ParamSpec("names", [], "names", type="string_array"),
    ParamSpec("mode", "a", "mode", choices=("a", "b")),
    ParamSpec("count", 3, "count", range=(0, 10)),
]


def _node(*ros_args: str) -> Any:
    import rclpy
    from rclpy.node import Node

    ctx = rclpy.context.Context()
    rclpy.init(args=["test", "--ros-args", *ros_args], context=ctx)
    return Node("param_test", context=ctx), ctx


def test_declare_reads_yaml_and_coerces_ints(tmp_path: Path) -> None:
    from rclpy.parameter import Parameter

    f = tmp_path / "p.yaml"
    f.write_text("/**:\n  ros__parameters:\n    rate: 1000\n    gains: [1, 2]\n")
    node, ctx = _node("--params-file", str(f))
    try:
        values = declare_parameters(node, SPECS)
        assert values == {"rate": 1000.0, "gains": [1.0, 2.0], "names": [], "mode": "a", "count": 3}
        assert node.get_parameter("rate").type_ == Parameter.Type.DOUBLE
        assert node.get_parameter("names").type_ == Parameter.Type.STRING_ARRAY
        desc = node.describe_parameter("rate")
        assert desc.floating_point_range[0].to_value == 1e5 and desc.description == "Hz"
        # run-time changes go through the same validation
        (res,) = node.set_parameters([Parameter("mode", Parameter.Type.STRING, "c")])
        assert not res.successful and "'c' is not one of" in res.reason
        (res,) = node.set_parameters([Parameter("count", Parameter.Type.INTEGER, 7)])
        assert res.successful
    finally:
        node.destroy_node()
        compat.shutdown(ctx)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["-p", "rate:=-5.0"], "parameter 'rate': -5.0 is below the minimum 1.0"),
        (["-p", "rate:=nan"], "parameter 'rate': must be finite"),
        (["-p", "mode:=c"], "parameter 'mode': 'c' is not one of ['a', 'b']"),
        (["-p", "count:=11"], "parameter 'count': 11 is above the maximum 10"),
        (["-p", "count:=1.5"], "parameter 'count': expected type int, got 1.5"),
    ],
)
def test_bad_values_raise_parameter_error(
    rclpy_context: Any, tmp_path: Path, args: list[str], text: str
) -> None:

    node, ctx = _node(*args)
    try:
        with pytest.raises(ParameterError) as err:
            declare_parameters(node, SPECS)
        assert text in str(err.value)
        assert err.value.node_name == "param_test"
    finally:
        node.destroy_node()
        compat.shutdown(ctx)


class _Logger:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def warning(self, msg: str) -> None:
        self.lines.append(("warn", msg))

    def error(self, msg: str) -> None:
        self.lines.append(("error", msg))


class _FakeNode:
    def __init__(self) -> None:
        self.logger = _Logger()

    def get_logger(self) -> _Logger:
        return self.logger


def test_guarded_logs_throttles_and_swallows() -> None:
    node = _FakeNode()
    calls = []

    @guarded(node, "topic", throttle_s=60.0)
    def callback(x: float) -> float:
        calls.append(x)
        if x < 0:
            raise InputError(f"negative value {x}")
        if x == 0:
            raise ZeroDivisionError("boom")
        return 2 * x

    assert callback(2.0) == 4.0
    assert callback(-1.0) is None and callback(-1.0) is None  # same message twice: logged once
    assert callback(-2.0) is None
    assert callback(0.0) is None
    kinds = [k for k, _ in node.logger.lines]
    assert kinds == ["warn", "warn", "error"]
    assert node.logger.lines[0][1] == "topic: rejected: negative value -1.0"
    assert "ZeroDivisionError: boom" in node.logger.lines[2][1]
    assert len(calls) == 5


def test_run_node_exit_codes(tmp_path: Path) -> None:
    """run_node: a bad parameter -> one FATAL line and exit 1 (in a child process)."""
    code = (
        "import sys\n"
        "from rclpy.node import Node\n"
        "from robot_grinding_sim.ros.node_base import run_node\n"
        "from robot_grinding_sim.ros.parameters import ParamSpec, declare_parameters\n"
        "class N(Node):\n"
        "    NODE_NAME = 'infra_node'\n"
        "    def __init__(self):\n"
        "        super().__init__('infra_node')\n"
        "        declare_parameters(self, [ParamSpec('rate', 5.0, 'Hz', range=(1.0, 10.0))])\n"
        "sys.exit(run_node(N))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--ros-args", "-r", "__node:=renamed", "-p", "rate:=50.0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert (
        len(fatal) == 1
        and "[renamed]" in fatal[0]
        and "parameter 'rate': 50.0 is above the maximum" in fatal[0]
    )

"""ROS parameter descriptors made from the core's ParamSpec: type, range, read-only, description.

Needs rcl_interfaces (a ROS message package), so it lives with the ROS tests.
"""

from __future__ import annotations

from robot_grinding_sim.core.parameters import ParamSpec


def test_descriptor_carries_range_and_description() -> None:
    from rcl_interfaces.msg import ParameterType

    from robot_grinding_sim.ros.parameters import make_descriptor

    spec = ParamSpec("control_rate", 1000.0, "control rate [Hz]", range=(1.0, 1e5), read_only=True)
    d = make_descriptor(spec)
    assert d.type == ParameterType.PARAMETER_DOUBLE
    assert d.read_only and d.description == "control rate [Hz]"
    assert (d.floating_point_range[0].from_value, d.floating_point_range[0].to_value) == (1.0, 1e5)
    i = make_descriptor(ParamSpec("n", 3, "", range=(0, 10, 1)))
    assert (i.integer_range[0].from_value, i.integer_range[0].to_value, i.integer_range[0].step) == (0, 10, 1)
    open_ = make_descriptor(ParamSpec("k", 1.0, "", range=(0.0, None)))
    assert not open_.floating_point_range and ">= 0.0" in open_.additional_constraints
    arr = make_descriptor(ParamSpec("kp", [1.0, 2.0], "", range=(0.0, 5.0)))
    assert arr.type == ParameterType.PARAMETER_DOUBLE_ARRAY and "every element" in arr.additional_constraints

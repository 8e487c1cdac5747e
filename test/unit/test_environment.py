"""Discovery range: nodes keep the user's ROS_AUTOMATIC_DISCOVERY_RANGE; launchers set theirs.

A real cell runs with SUBNET so RViz and the drivers on other hosts see the nodes; a node that
overwrote it with LOCALHOST would cut the cell off. Only an unset (or empty) variable defaults to
LOCALHOST. The package's own launchers set the range explicitly (LOCALHOST unless asked).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from robot_grinding_sim.bringup import LAUNCH_ARGUMENTS
from robot_grinding_sim.environment import DISCOVERY_VAR, default_discovery_range, localhost_env


def test_a_node_keeps_the_range_the_user_set() -> None:
    env = {DISCOVERY_VAR: "SUBNET"}
    assert default_discovery_range(env) == "SUBNET"
    assert env[DISCOVERY_VAR] == "SUBNET"


@pytest.mark.parametrize("env", [{}, {DISCOVERY_VAR: ""}])
def test_a_node_defaults_to_localhost_only_when_unset(env: dict[str, str]) -> None:
    assert default_discovery_range(env) == "LOCALHOST"
    assert env[DISCOVERY_VAR] == "LOCALHOST"


def test_launchers_set_the_range_explicitly() -> None:
    base = {DISCOVERY_VAR: "SUBNET", "ROS_DOMAIN_ID": "7"}
    assert localhost_env(base=base)[DISCOVERY_VAR] == "LOCALHOST"
    assert localhost_env(base=base)["ROS_DOMAIN_ID"] == "7"
    assert localhost_env(3, base=base, discovery_range="SUBNET")[DISCOVERY_VAR] == "SUBNET"
    assert localhost_env(3, base=base)["ROS_DOMAIN_ID"] == "3"
    assert base[DISCOVERY_VAR] == "SUBNET"  # a copy: the caller's mapping is untouched
    with pytest.raises(ValueError, match="ROS_AUTOMATIC_DISCOVERY_RANGE .* got 'LAN'"):
        localhost_env(base=base, discovery_range="LAN")
    with pytest.raises(ValueError, match="ROS_DOMAIN_ID must be in 0..101, got 102"):
        localhost_env(102, base=base)


def test_launch_files_keep_sim_on_loopback_and_leave_a_real_cell_to_its_environment() -> None:
    assert LAUNCH_ARGUMENTS["sim"]["discovery_range"][0] == "LOCALHOST"
    assert LAUNCH_ARGUMENTS["real"]["discovery_range"][0] == ""


def test_bringup_sets_localhost_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from robot_grinding_sim.cli.bringup import bringup

    monkeypatch.setenv(DISCOVERY_VAR, "SUBNET")
    runner = CliRunner()
    out = runner.invoke(bringup, ["sim", "--print", "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["ros_automatic_discovery_range"] == "LOCALHOST"
    out = runner.invoke(bringup, ["real", "--print", "--json", "--discovery-range", "SUBNET"],
                        catch_exceptions=False)
    assert json.loads(out.output)["ros_automatic_discovery_range"] == "SUBNET"

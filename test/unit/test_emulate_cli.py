"""``grinding emulate``'s graph (robot_grinding_sim.emulated_cell.emulated_cell) and command line, without ROS."""

from __future__ import annotations

import pytest

from robot_grinding_sim import emulated_cell as ec
from robot_grinding_sim.cli import main


def test_the_emulated_cell_shares_only_the_arm_topics() -> None:
    specs = {s.name: s for s in ec.emulated_cell(overrides={"contact.stiffness": 2e5}, netft={"port": 50000})}
    assert list(specs) == ["dynamics_node", "netft_emulator"]
    for s in specs.values():
        remaps = dict(s.remappings)
        assert remaps["__ns"] == "/emulated"
        # nothing but the arm's interface leaves the namespace
        shared = {"joint_states": "/joint_states"} if s.name != "netft_emulator" else {}
        if s.name == "dynamics_node":
            shared["joint_trajectory_controller/joint_trajectory"] = ec.CONTROLLER_TOPIC
        assert {k: v for k, v in remaps.items() if v.startswith("/") and k != "__ns"} == shared
        assert s.parameters["use_sim_time"] is False
        assert s.module_available()
    arm = specs["dynamics_node"]
    assert dict(arm.remappings)["joint_trajectory_controller/joint_trajectory"] == ec.CONTROLLER_TOPIC
    assert arm.parameters["publish_clock"] is False and arm.parameters["max_lag"] > 0
    # the contact and the sensor are physics of the arm: computed in its process at every step
    assert arm.parameters["coupling"] == "local" and arm.parameters["publish_ft"] is True
    assert arm.params_files[-1] == ec.EMULATED_CELL_CONFIG
    assert arm.parameters["contact.stiffness"] == 2e5
    assert specs["netft_emulator"].parameters["port"] == 50000
    with pytest.raises(ValueError, match="namespace"):
        ec.emulated_cell(namespace="emulated")


def test_print_and_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emulate", "--print", "--set", "contact.stiffness=3e5", "--servo-bandwidth", "150",
                 "--port", "50001", "--drop", "0.1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert "-p contact.stiffness:=300000.0" in out[0] and "-p servo.bandwidth:=150.0" in out[0]
    assert "-r __ns:=/emulated" in out[0] and "-r joint_states:=/joint_states" in out[0]
    assert "-p port:=50001" in out[1] and "-p drop_fraction:=0.1" in out[1]
    assert main(["emulate", "--print", "--set", "contact.stifness=3"]) == 2
    assert "--set contact.stifness: unknown cell parameter" in capsys.readouterr().err
    assert main(["emulate", "--print", "--servo-bandwidth", "1000"]) == 2  # unstable at sim.dt
    assert "too long for the servo" in capsys.readouterr().err


def test_a_niced_node_has_its_autogroup_niced_too() -> None:
    """Issue 21: under autogroup scheduling a process's niceness only weighs within its session, and
    each node runs in a session of its own (Child), so the emulated arm at -10 kept one session's equal
    share beside other sessions' work (0.46x real time under load). Its autogroup gets the niceness
    too (checked against the kernel's /proc/PID/autogroup; 5: raising it needs no privilege)."""
    import os
    import sys
    from pathlib import Path

    from robot_grinding_sim.cli.processes import Child

    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no autogroup scheduling in this kernel")
    child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), nice=5)
    try:
        assert child.nice_error is None, child.nice_error
        assert os.getpriority(os.PRIO_PROCESS, child.proc.pid) == 5
        group = Path(f"/proc/{child.proc.pid}/autogroup").read_text().split()
        assert group[-2:] == ["nice", "5"], group
        # not this session's group; a process in a non-root cpu cgroup (a CI container) reads an
        # empty file, being in no autogroup at all
        own = Path("/proc/self/autogroup").read_text().split()
        assert not own or group[0] != own[0], (group, own)
    finally:
        child.proc.kill()
        child.proc.wait()
        child.join()

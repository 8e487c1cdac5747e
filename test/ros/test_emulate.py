"""Real mode against the emulated cell (issue 10): ``grinding emulate`` + ``grinding bringup real``.

``grinding emulate`` starts the emulated arm (dynamics_node on wall time, following
/scaled_joint_trajectory_controller/joint_trajectory, publishing /joint_states), its contact side
with the emulated cell's true parameters (config/emulated_cell.yaml: contact stiffness 3e5 N/m,
3x the 1e5 of config/cell.yaml that real mode's prediction uses; an F/T bias of 0.5 N along z and
0.05 N of noise) and a Net F/T on 127.0.0.1 serving its sensor model. ``grinding bringup real
--robot-ip 127.0.0.1 --ft-sensor-ip 127.0.0.1 --plan-file --record`` runs a one-pass plan through
hardware_driver and records. The test starts the job (``~/start``) once both graphs are up rather
than with ``--start --until-done``: the executive's autostart does not wait for the prediction,
whose collision_node loads the CAD part in 10 to 25 s on two busy cores.

Checked from the bag (mcap + cdr_reader): the job ran to its end, the measured /ft_sensor/wrench
(the driver's, compensated) and the predicted /contact/wrench both exist, and the measured normal
force on the pass is about 3x the predicted one: both come from the same measured depth (the
prediction runs on the emulated arm's /joint_states), so a Kelvin-Voigt contact 3x as stiff gives
3x the elastic force (the damping term, sqrt(3)x, is small while the depth is steady). Both
commands exit 0 on SIGINT.

Test-only settings (a params file for bringup real), because two graphs of Python nodes share two
busy cores (while the real graph starts, the emulated arm is starved for tens of ms at a time,
skips that time (dynamics_node max_lag) and catches up with its servo; joint states arrive late):
the driver's joint_states_timeout and ft_timeout at 2 s instead of 0.1 s, the executive's
tracking_error_limit at 0.3 rad instead of 0.05, its joint_states_timeout at 3 s and its
move_velocity_scale at 0.1 (a skip of 0.1 s on a move at 1 rad/s is a 0.1 rad jump). Also the
driver's ft_port at the emulated sensor's free port, and removal off in the prediction (start-up
time), and the F/T at 500 Hz (emulate --ft-rate, the driver's ft_rate), the rate of the arm's
joint states. The emulated cell is stopped first and the real graph once its recorder has caught
up (it records seconds behind on busy cores). The plan dwells 3 s at the pass start (the force settles before the feed).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdr_reader import header_stamp, read_mcap

pytestmark = pytest.mark.ros

#: contact.stiffness of config/emulated_cell.yaml over config/cell.yaml's
STIFFNESS_RATIO = 3.0
#: the plan's dwell at the pass start, s
DWELL = 3.0


def _grinding() -> list[str]:
    script = Path(sys.executable).with_name("grinding")
    return [str(script)] if script.exists() else [sys.executable, "-m", "robot_grinding_sim.cli"]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    path = tmp_path_factory.mktemp("emulate") / "plan.json"
    cell = CellConfig().replace(**{"process.dwell": DWELL})
    plan_io.write_plan(plan_job(cell, optimise=False, max_passes=1, pass_length=0.01, check_collisions=False), path)
    return path


def _wait(what: str, pred: Any, timeout: float, logs: list[Path], procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        dead = [p for p in procs if p.poll() is not None]
        if time.monotonic() > deadline or dead:
            tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in logs if p.exists())
            pytest.fail(f"{'a process exited' if dead else 'timed out'} waiting for {what}\n{tails}")
        time.sleep(0.2)


def test_real_mode_runs_the_job_on_the_emulated_cell(plan_file: Path, tmp_path: Path, probe: Any) -> None:
    from std_srvs.srv import Trigger

    port = _free_udp_port()
    params = tmp_path / "real.yaml"
    params.write_text(
        "hardware_driver:\n  ros__parameters:\n"
        f"    ft_port: {port}\n    ft_rate: 500.0\n    joint_states_timeout: 2.0\n    ft_timeout: 2.0\n"
        "contact_solver_node:\n  ros__parameters:\n    removal:\n      enabled: false\n"
        "grinding_executive:\n  ros__parameters:\n    execution:\n      tracking_error_limit: 0.3\n"
        "      joint_states_timeout: 3.0\n      move_velocity_scale: 0.1\n")
    domain = os.environ["ROS_DOMAIN_ID"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    emu_log, real_log, bag = tmp_path / "emulate.log", tmp_path / "real.log", tmp_path / "bag"
    procs: list[subprocess.Popen[bytes]] = []

    def has(log: Path, *texts: str) -> bool:
        text = log.read_text(errors="replace") if log.exists() else ""
        return all(t in text for t in texts)

    try:
        with emu_log.open("wb") as fh:
            emu = subprocess.Popen([*_grinding(), "emulate", "--domain-id", domain, "--port", str(port),
                                    "--ft-rate", "500"], stdout=fh,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=env)
        procs.append(emu)
        # the real graph starts once the arm runs and its Net F/T streams
        _wait("the emulated cell", lambda: has(emu_log, "cell ready"), 600, [emu_log], procs)
        with real_log.open("wb") as fh:
            real = subprocess.Popen(
                [*_grinding(), "bringup", "real", "--domain-id", domain, "--robot-ip", "127.0.0.1", "--ft-sensor-ip",
                 "127.0.0.1", "--plan-file", str(plan_file), "--record", str(bag), "--params-file", str(params)],
                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        procs.append(real)
        # the job starts once the prediction runs (its collision_node loads the CAD part; the
        # executive's autostart would not wait for it) and the recorder records
        _wait("the real graph", lambda: has(real_log, "[collision_node] [INFO]", "[contact_solver_node] [INFO]",
                                            "job ready", "[recorder] [INFO]", "recording /"), 900,
              [emu_log, real_log], procs)

        def started() -> bool:
            r = probe.call(Trigger, "/grinding_executive/start", timeout=120)
            assert r.success or "no joint states yet" in r.message or "nobody subscribes" in r.message, r.message
            return r.success

        probe.wait_for(started, timeout=300, what="the job started")
        _wait("the job's end", lambda: has(real_log, "job done") or has(real_log, "job failed")
              or has(real_log, "job stopped"), 900, [emu_log, real_log], procs)
        # the cell first (its streams end), then the real graph once the recorder has caught up with
        # them: on two busy cores it records seconds behind, and what it has not taken when it stops
        # is lost. Caught up: the bag's checkpoints stop growing (only /diagnostics at 1 Hz is left).
        os.killpg(emu.pid, signal.SIGINT)
        emu.wait(timeout=120)
        sizes: list[int] = []

        def recorder_idle() -> bool:
            sizes.append(sum(f.stat().st_size for f in bag.glob("*")))
            return len(sizes) > 10 and sizes[-1] - sizes[-11] < 20_000  # under 10 kB/s over 2 s

        _wait("the recorder to catch up", recorder_idle, 600, [emu_log, real_log], [real])
    finally:
        for p in procs:  # SIGINT, as Ctrl-C in each terminal
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
        codes = [p.wait(timeout=120) for p in procs]
    logs = emu_log.read_text(errors="replace") + real_log.read_text(errors="replace")
    assert codes == [0, 0], logs[-6000:]
    assert "Traceback" not in logs
    assert "job done" in real_log.read_text()
    during = real_log.read_text().split("job done")[0]
    assert "STOP" not in during, "the driver stopped the arm during the job"

    m = read_mcap(bag, ["/contact/wrench", "/ft_sensor/wrench", "/grinding/progress", "/joint_states"])
    assert len(m["/joint_states"]) > 1000
    # the pass: the dwell at its start (from 0.5 s into it, the force settled) and the feed, from the
    # executive's progress (stamps on the arm's wall-clock time)
    t_pass = [p["data"][2] for p in m["/grinding/progress"] if p["data"][0] == 0]
    assert t_pass, "no progress on pass 0"
    t0, t1 = min(t_pass) - DWELL + 0.5, max(t_pass) - 0.2
    predicted = np.array([(header_stamp(w), -w["wrench"]["force"]["z"]) for w in m["/contact/wrench"]])
    measured = np.array([(header_stamp(w), -w["wrench"]["force"]["z"]) for w in m["/ft_sensor/wrench"]])
    assert len(predicted) > 100 and len(measured) > 1000
    # the driver assumes no sensor bias (nobody tared): its offset is what it reads at rest, before
    # the job (the tool's weight is compensated with the same URDF inertials as the emulated sensor's)
    rest = measured[measured[:, 0] < measured[0, 0] + 1.0, 1]
    offset = float(np.median(rest))
    f_pred = predicted[(predicted[:, 0] >= t0) & (predicted[:, 0] <= t1), 1]
    f_meas = measured[(measured[:, 0] >= t0) & (measured[:, 0] <= t1), 1] - offset
    assert len(f_pred) > 50 and len(f_meas) > 50, (len(f_pred), len(f_meas))
    # medians: a starved emulated arm skips time and catches up with a jolt (force spikes)
    pred, meas = float(np.median(f_pred)), float(np.median(f_meas))
    ratio = meas / pred
    print(f"pass {t1 - t0:.2f} s: predicted {pred:.3f} N ({len(f_pred)} samples), measured {meas:.3f} N "
          f"({len(f_meas)} samples; offset at rest {offset:+.3f} N), ratio {ratio:.3f} (stiffness ratio "
          f"{STIFFNESS_RATIO:g})")
    assert pred > 0.5, "no predicted contact on the pass"
    assert 0.8 * STIFFNESS_RATIO < ratio < 1.2 * STIFFNESS_RATIO

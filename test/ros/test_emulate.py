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

Test-only settings for two Python graphs on two busy cores: test/emulated_session.py (real_params).
The emulated cell is stopped first and the real graph once its recorder has caught up (it records
seconds behind on busy cores). The plan dwells 3 s at the pass start (the force settles before the
feed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdr_reader import header_stamp, read_mcap
from emulated_session import EmulatedSession, real_params

pytestmark = pytest.mark.ros

#: contact.stiffness of config/emulated_cell.yaml over config/cell.yaml's
STIFFNESS_RATIO = 3.0
#: the plan's dwell at the pass start, s
DWELL = 3.0


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    path = tmp_path_factory.mktemp("emulate") / "plan.json"
    cell = CellConfig().replace(**{"process.dwell": DWELL})
    plan_io.write_plan(plan_job(cell, optimise=False, max_passes=1, pass_length=0.01, check_collisions=False), path)
    return path


def test_real_mode_runs_the_job_on_the_emulated_cell(plan_file: Path, tmp_path: Path, probe: Any) -> None:
    bag = tmp_path / "bag"
    with EmulatedSession(tmp_path) as session:
        session.start_cell()
        session.start_real(plan_file, [real_params(tmp_path / "real.yaml", session.port)], bag)
        session.start_job(probe)
        session.wait_job_end()
        session.stop_cell_then_recorder(bag)
    session.assert_clean()
    real_log = session.real_log
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

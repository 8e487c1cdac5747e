"""Real mode with a part the robot holds, against the emulated cell (issue 24): ``grinding emulate``
and ``grinding bringup real`` on the held-part cell (test/held_part_cell.py: the UR10e holds the
curved panel at its F/T sensor's face against the ball standing in the cell), one short pass.

The emulated arm starts at ``robot.home`` as a real one does: the executive's move to the plan's
start is checked against the part (and goes over it where the straight one hits). The emulated
sensor (dynamics_node's model, served as a Net F/T) carries the part: it reads the part's weight
(0.243 kg of aluminium, 2.4 N) and the contact on it. Checked from the bag (mcap + cdr_reader):
the job ran to its end without a stop; before the job, at rest, hardware_driver's compensated
reading is the emulated sensor's bias alone (the part's weight taken out at the sensor's
orientation from the measured joints; without it the reading would be off by the weight); on the
pass the measured contact force is about 3x the predicted one (the emulated contact is 3x as
stiff, config/emulated_cell.yaml), the magnitude of the force, which the frames do not change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdr_reader import header_stamp, read_mcap
from emulated_session import EmulatedSession, real_params
from held_part_cell import CELL_FILE, held_cell_values

pytestmark = pytest.mark.ros

STIFFNESS_RATIO = 3.0
DWELL = 3.0
#: config/emulated_cell.yaml's F/T bias, N (force) and its noise, N
BIAS_F, NOISE = np.array([0.3, -0.2, 0.5]), 0.05


@pytest.fixture(scope="module")
def cell_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    tmp = tmp_path_factory.mktemp("held_emulated")
    cell = CellConfig().replace(**held_cell_values(), **{"process.dwell": DWELL})
    plan = tmp / "plan.json"
    plan_io.write_plan(plan_job(cell, optimise=False, max_passes=1, pass_length=0.01, check_collisions=False), plan)
    return CELL_FILE, plan  # the shipped cell file, as a user passes it


def test_real_mode_runs_a_held_part_on_the_emulated_cell(cell_files: tuple[Path, Path], tmp_path: Path,
                                                         probe: Any) -> None:
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.job.setup import held_part_inertia

    held, plan = cell_files
    bag = tmp_path / "bag"
    with EmulatedSession(tmp_path) as session:
        session.start_cell("--params-file", str(held))
        session.start_real(plan, [held, real_params(tmp_path / "real.yaml", session.port)], bag)
        session.start_job(probe)
        session.wait_job_end()
        session.stop_cell_then_recorder(bag)
    session.assert_clean()
    log = session.real_log.read_text()
    assert "job done" in log, log[-4000:]
    assert "STOP" not in log.split("job done")[0], "the driver stopped the arm during the job"
    print("\n" + "\n".join(ln for ln in log.splitlines() if "move to the plan's start" in ln or "sent start" in ln))

    m = read_mcap(bag, ["/contact/wrench", "/ft_sensor/wrench", "/grinding/progress"])
    measured = np.array([[header_stamp(w)] + [w["wrench"]["force"][a] for a in "xyz"] for w in m["/ft_sensor/wrench"]])
    assert len(measured) > 1000
    assert {w["header"]["frame_id"] for w in m["/ft_sensor/wrench"]} == {"ft_sensor"}
    # at rest before the job: the bias alone, the part's weight compensated
    mass = held_part_inertia(CellConfig().replace(**held_cell_values()))[0]
    rest = np.median(measured[measured[:, 0] < measured[0, 0] + 1.0, 1:], axis=0)
    print(f"at rest: {np.round(rest, 3).tolist()} N (bias {BIAS_F.tolist()} N; the part weighs {mass * 9.81:.2f} N)")
    assert np.linalg.norm(rest - BIAS_F) < 0.1 * mass * 9.81
    # on the pass: the measured contact force 3x the predicted one
    t_pass = [p["data"][2] for p in m["/grinding/progress"] if p["data"][0] == 0]
    assert t_pass, "no progress on pass 0"
    t0, t1 = min(t_pass) - DWELL + 0.5, max(t_pass) - 0.2
    pred = np.array([[header_stamp(w)] + [w["wrench"]["force"][a] for a in "xyz"] for w in m["/contact/wrench"]])
    f_pred = np.linalg.norm(pred[(pred[:, 0] >= t0) & (pred[:, 0] <= t1), 1:], axis=1)
    inside = (measured[:, 0] >= t0) & (measured[:, 0] <= t1)
    f_meas = np.linalg.norm(measured[inside, 1:] - rest, axis=1)
    assert len(f_pred) > 50 and len(f_meas) > 50, (len(f_pred), len(f_meas))
    ratio = float(np.median(f_meas) / np.median(f_pred))
    print(f"pass: predicted {np.median(f_pred):.3f} N, measured {np.median(f_meas):.3f} N, ratio {ratio:.3f}")
    assert np.median(f_pred) > 0.5
    assert 0.8 * STIFFNESS_RATIO < ratio < 1.2 * STIFFNESS_RATIO

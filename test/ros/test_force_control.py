"""hardware_driver's force control along the normal (issue 10) on the emulated cell.

The emulated cell's contact is 3x as stiff as the cell real mode plans with (config/emulated_cell.yaml:
3e5 N/m against 1e5), so the plan's penetration (5 N at 1e5 N/m) gives far more than the 5 N target
on the emulated part. The same one-pass plan runs twice in real mode (test/emulated_session.py:
grinding emulate + grinding bringup real, the driver on the emulated Net F/T, tared before the job):

- ``force_control: false``: the driver forwards the executive's trajectory; the measured mean normal
  force on the pass is far off the target (more than OFF_BY);
- ``force_control: true``: the driver streams the trajectory corrected along the plan's normal by
  the admittance (admittance.* defaults); the measured mean force on the pass's feed is the target
  within TOLERANCE and its median over the dwell before it within DWELL_TOLERANCE; the correction
  (the driver's ~/admittance, recorded) stays within admittance.max_correction, is outward (the part
  is stiffer than planned) and the law runs all along the pass.

Measured force: the driver's compensated /ft_sensor/wrench, -Fz in the sensor frame (the tool's
axis is the inward normal on this pass: the normal force), minus its median while the arm waits
in the air for the start command's stamp (what ~/tare left of the bias). The pass: the executive's
grinding/progress on pass 0 (the feed), from FEED_SKIP s after its start to 0.2 s before its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cdr_reader import header_stamp, read_mcap
from emulated_session import EmulatedSession, real_params

from robot_grinding_sim.core.config import AdmittanceConfig, CellConfig
from robot_grinding_sim.ros.schemas import DEFAULT_TOPICS

pytestmark = pytest.mark.ros

#: |mean measured - target| / target on the pass with force control
TOLERANCE = 0.10
#: without force control the mean is off by more than this fraction of the target (3x stiffness)
OFF_BY = 0.4
FEED_SKIP = 0.1
#: the plan's dwell at the pass start, s (the force settles before the feed)
DWELL = 3.0
#: the executive's execution.command_lead here, s (0.5 by default): on two busy cores it took up to
#: 4.8 s from stamping the start to publishing it (load 15); a start stamped in the past begins late at the arm,
#: behind the executive's reference, and its tracking supervision stops the job
COMMAND_LEAD = 10.0
#: |median measured - target| / target over the dwell at the pass start (the tool at rest on the part):
#: -1.3 % .. +3.3 % over five runs on two cores loaded 5-6x by other work (without force control +80 %)
DWELL_TOLERANCE = 0.05
DWELL_SKIP = 1.0


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 10 mm pass of the default cell (no force-target optimisation), dwelling DWELL s at its start."""
    from robot_grinding_sim.core.job.plan_job import plan_job
    from robot_grinding_sim.core.planning import plan_io

    path = tmp_path_factory.mktemp("force_control") / "plan.json"
    cell = CellConfig().replace(**{"process.dwell": DWELL})
    plan_io.write_plan(plan_job(cell, optimise=False, max_passes=1, pass_length=0.01, check_collisions=False), path)
    return path


@pytest.mark.parametrize("force_control", [False, True], ids=["forwarded", "force_control"])
def test_force_control_holds_the_target_on_a_stiffer_part(plan_file: Path, tmp_path: Path, probe: Any,
                                                          force_control: bool) -> None:
    from std_srvs.srv import Trigger

    target = CellConfig().process.target_force
    topics = [*DEFAULT_TOPICS, "/hardware_driver/admittance"]
    recorder = "recorder:\n  ros__parameters:\n    topics: [" + ", ".join(topics) + "]\n"

    def tare() -> None:  # the tool is in the air at the arm's home: the reading is bias and weight
        def tared() -> bool:
            r = probe.call(Trigger, "/hardware_driver/tare", timeout=60)
            return bool(r.success)

        probe.wait_for(tared, timeout=120, what="~/tare")

    bag = tmp_path / "bag"
    with EmulatedSession(tmp_path) as session:
        params = real_params(tmp_path / "real.yaml", session.port,
                             driver=f"    force_control: {'true' if force_control else 'false'}\n",
                             executive=f"      command_lead: {COMMAND_LEAD}\n")
        (tmp_path / "recorder.yaml").write_text(recorder)
        session.start_cell()
        session.start_real(plan_file, [params, tmp_path / "recorder.yaml"], bag)
        tare()
        session.start_job(probe)
        session.wait_job_end()
        session.stop_cell_then_recorder(bag)
    session.assert_clean()
    real = session.text(session.real_log)
    assert "job done" in real, real[-6000:]
    assert "STOP" not in real.split("job done")[0], "the driver stopped the arm during the job"
    assert ("FORCE CONTROL" in real) == force_control

    m = read_mcap(bag, ["/ft_sensor/wrench", "/grinding/progress", "/hardware_driver/admittance",
                        "/joint_trajectory_controller/joint_trajectory"])
    t_pass = [p["data"][2] for p in m["/grinding/progress"] if p["data"][0] == 0]
    assert t_pass, "no progress on pass 0"
    t0, t1 = min(t_pass) + FEED_SKIP, max(t_pass) - 0.2
    measured = np.array([(header_stamp(w), -w["wrench"]["force"]["z"]) for w in m["/ft_sensor/wrench"]])
    # what ~/tare left of the bias: the arm at rest in the air after it, waiting for the start
    # command's stamp (COMMAND_LEAD after it was sent)
    t_start = header_stamp(m["/joint_trajectory_controller/joint_trajectory"][0])
    rest = measured[(measured[:, 0] > t_start - COMMAND_LEAD + 0.2) & (measured[:, 0] < t_start - 0.2), 1]
    assert len(rest) > 100, len(rest)
    offset = float(np.median(rest))
    f = measured[(measured[:, 0] >= t0) & (measured[:, 0] <= t1), 1] - offset
    assert len(f) > 100, len(f)
    mean, median = float(np.mean(f)), float(np.median(f))
    error = (mean - target) / target
    # the dwell before the feed, from DWELL_SKIP s after it starts (the tool on the part at rest)
    d0, d1 = min(t_pass) - DWELL + DWELL_SKIP, min(t_pass)
    dwell = float(np.median(measured[(measured[:, 0] >= d0) & (measured[:, 0] <= d1), 1] - offset))
    line = (f"force_control {force_control}: pass {t1 - t0:.2f} s, measured mean {mean:.3f} N, median {median:.3f} N, "
            f"sd {np.std(f):.3f} N ({len(f)} samples, rest offset {offset:+.3f} N), target {target:g} N: "
            f"{100 * error:+.1f} %; dwell median {dwell:.3f} N ({100 * (dwell - target) / target:+.1f} %)")
    adm = m["/hardware_driver/admittance"]
    if force_control:
        a = np.array([msg["data"] for msg in adm])
        assert len(a) > 100, "no ~/admittance recorded"
        on = (a[:, 0] >= t0) & (a[:, 0] <= t1)
        x = a[:, 4]
        line += (f"; correction on the pass {1e6 * np.median(x[on]):.1f} um (max |x| {1e6 * np.max(np.abs(x)):.1f} um, "
                 f"bound {1e6 * AdmittanceConfig().max_correction:.0f} um), measured normal force seen by the "
                 f"driver {np.median(a[on, 2]):.3f} N")
        print(line)
        assert abs(error) < TOLERANCE, line
        assert abs(dwell - target) < DWELL_TOLERANCE * target, line
        assert np.max(np.abs(x)) <= AdmittanceConfig().max_correction
        assert np.median(x[on]) > 0.0, "a stiffer part than planned: the tool must be moved out"
        assert a[on, 6].all(), "the law was not running on the pass"
    else:
        print(line)
        assert not adm
        assert error > OFF_BY, line

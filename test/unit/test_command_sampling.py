"""The compiled command sampler (core/planning/commands.sample_knots) against scipy's
CubicHermiteSpline and the job-time bookkeeping it replaces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.interpolate import CubicHermiteSpline

from robot_grinding_sim.core.planning import commands as cmds


@pytest.fixture
def command() -> cmds.Command:
    rng = np.random.default_rng(7)
    times = np.r_[0.0, np.cumsum(rng.uniform(0.001, 0.05, 400))]
    q = rng.normal(size=(len(times), 6))
    qd = rng.normal(size=(len(times), 6))
    job = times + 3.0
    job[100:150] = math.nan  # a move off the job
    return cmds.Command(times, q, qd, job, "start")


def test_positions_and_velocities_are_scipys_cubic_hermite(command: cmds.Command) -> None:
    spline = CubicHermiteSpline(command.times, command.positions, command.velocities)
    rng = np.random.default_rng(1)
    for t in np.r_[rng.uniform(0, command.duration, 2000), command.times[1:-1]]:
        q, qd, _ = cmds.sample(command, float(t))
        np.testing.assert_allclose(q, spline(t), rtol=0, atol=1e-11)
        np.testing.assert_allclose(qd, spline(t, 1), rtol=0, atol=1e-9)


def test_the_ends_clamp_and_rest_after_the_end(command: cmds.Command) -> None:
    q, qd, tau = cmds.sample(command, -1.0)
    np.testing.assert_array_equal(q, command.positions[0])
    np.testing.assert_array_equal(qd, command.velocities[0])
    assert tau == command.job_times[0]
    q, qd, tau = cmds.sample(command, command.duration + 1.0)
    np.testing.assert_array_equal(q, command.positions[-1])
    assert not qd.any() and tau == command.job_times[-1]
    # hermite (the job trajectory's sampler) keeps the last knot's velocity
    _, qd = cmds.hermite(command.times, command.positions, command.velocities, command.duration + 1.0)
    np.testing.assert_array_equal(qd, command.velocities[-1])


def test_job_time_is_linear_on_the_job_and_nan_off_it(command: cmds.Command) -> None:
    t = 0.5 * (command.times[10] + command.times[11])
    assert cmds.sample(command, t)[2] == pytest.approx(t + 3.0, abs=1e-12)
    t = 0.5 * (command.times[120] + command.times[121])
    assert math.isnan(cmds.sample(command, t)[2])
    # a knot at the edge of the move off the job still says its own job time
    assert cmds.sample(command, float(command.times[150]))[2] == pytest.approx(command.times[150] + 3.0)


def test_one_knot_is_a_hold() -> None:
    c = cmds.hold(np.arange(6.0))
    q, qd, tau = cmds.sample(c, 2.0)
    np.testing.assert_array_equal(q, np.arange(6.0))
    assert not qd.any() and math.isnan(tau)

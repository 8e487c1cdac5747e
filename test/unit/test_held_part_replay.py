"""A measured run of a held-part cell read back as the contact wrench on the standing tool (issue 24):
``grinding replay``, ``register`` and ``calibrate --replay`` take a measured wrench through
:func:`~robot_grinding_sim.core.job.replay.measured_contact_wrench`.

The readings are made here from Pinocchio's frame placements of the shipped held-part URDF
(test_held_part_driver's ``_reading``: a bias, the steel plate's weight at its centre of mass, and
the opposite of the contact wrench on the tool acting on the part at the standing tool centre).
Read back, raw or compensated, in the sensor's frame or the tcp's, they must give the wrench on
the tool that made them.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from held_part_cell import HELD_URDF
from test_held_part_driver import _params, _reading

from robot_grinding_sim.core.config import config_from_mapping
from robot_grinding_sim.core.job.replay import measured_contact_wrench
from robot_grinding_sim.core.job.setup import cell_robot_model

BIAS = np.array([3.0, -1.5, 7.0, 0.2, -0.1, 0.05])


def test_the_measured_wrench_of_a_held_part_is_the_contact_on_the_standing_tool() -> None:
    cell = config_from_mapping(_params(HELD_URDF, **{"ft_sensor.bias": BIAS.tolist()}), allow_unknown=True)
    model = cell_robot_model(cell)
    pm = pin.buildModelFromUrdf(str(HELD_URDF))
    data = pm.createData()
    rng = np.random.default_rng(7)
    q = np.array([0.3, -1.2, 1.6, -2.0, -1.4, 0.5]) + rng.uniform(-0.3, 0.3, (5, 6))
    w_tool = rng.uniform(-1.0, 1.0, (5, 6)) * [2.0, 2.0, 15.0, 0.05, 0.05, 0.02]
    raw = np.array([_reading(pm, data, qk, BIAS, wk) for qk, wk in zip(q, w_tool, strict=True)])
    weight = np.array([_reading(pm, data, qk, np.zeros(6), np.zeros(6)) for qk in q])
    scale = np.abs(raw).max()
    frame = cell.ft_sensor.frame
    np.testing.assert_allclose(measured_contact_wrench(cell, model, frame, True, raw, q), w_tool,
                               rtol=0, atol=1e-9 * scale)
    # compensated (weight and bias out, as the driver's /ft_sensor/wrench): the wrench on the part
    np.testing.assert_allclose(measured_contact_wrench(cell, model, frame, False, raw - BIAS - weight, q), w_tool,
                               rtol=0, atol=1e-9 * scale)
    # already at the tool centre (the driver's ~/wrench_tcp): as it is
    np.testing.assert_allclose(measured_contact_wrench(cell, model, cell.tool.tcp_link, False, w_tool, q), w_tool,
                               rtol=0, atol=1e-12)


def test_a_weight_fit_below_a_sensor_carrying_the_part_is_refused_in_one_line() -> None:
    """calibrate's fits of the weight below the sensor would take the held part's weight for the
    tool's: refused, naming the input, the sensor and the holder; the default cell is not."""
    from types import SimpleNamespace

    import pytest

    from robot_grinding_sim.core.calibration.calibrate import refuse_part_side
    from robot_grinding_sim.core.calibration.measured import fit_tool
    from robot_grinding_sim.core.config import CellConfig
    from robot_grinding_sim.core.errors import InputError

    cell = config_from_mapping(_params(HELD_URDF), allow_unknown=True)
    model = cell_robot_model(cell)
    run = SimpleNamespace(raw=True, bag="run.mcap", frame=cell.ft_sensor.frame)
    one_line = (r"^bag run.mcap: a raw reading: the F/T sensor \(ft_sensor.frame 'ft_sensor'\) carries the part "
                r"the robot holds \(workpiece.link 'ft_sensor'\)")
    with pytest.raises(InputError, match=one_line) as e:
        fit_tool(SimpleNamespace(cell=cell, model=model), run)
    assert "\n" not in str(e.value)
    default = CellConfig()
    refuse_part_side(default, cell_robot_model(default), "bag x")  # a sensor carrying the tool: no refusal

"""Kernel arrays declared once (core/layout.py) and the contact/model wire kept as it was.

The wire's element order and law ids are written here literally, as docs/contact.md documents
them (and as issue 23 found them): a change of the declaration that moves a field or renumbers a
law fails here, not in a node graph of mixed versions.
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.layout import STATUS, Layout
from robot_grinding_sim.core.sim import compiled_step as cstep
from robot_grinding_sim.core.sim.coupled_step import LAYOUT, NormalContactModel

#: contact/model's data before issue 23 (coupled_step.LAYOUT then), with the tangential law's sliding,
#: force_ratio and slip_speed appended (issue 24 item 3: the arm step takes that force implicitly)
WIRE = ("t", "model", "stiffness", "damping", "cr", "exponent", "v_floor", "mass", "gap", "rate",
        "normal_x", "normal_y", "normal_z", "point_x", "point_y", "point_z",
        "centre_x", "centre_y", "centre_z", "tangential_x", "tangential_y", "tangential_z",
        "sliding_x", "sliding_y", "sliding_z", "force_ratio", "slip_speed")


def test_contact_model_wire_is_unchanged() -> None:
    assert LAYOUT == WIRE and cstep.ROM.size == 27
    assert registry.names()[:4] == ("kelvin_voigt", "hunt_crossley", "lankarani_nikravesh", "flores")
    R = cstep.R
    assert (R.gap, R.normal, R.point, R.centre, R.tangential, R.sliding, R.slip_speed) == (8, 10, 13, 16, 19, 22, 26)


def test_layout_generates_indices_names_and_a_view_of_the_array() -> None:
    lay = Layout("demo", (("a", 1, "m", "first"), ("v", 3, "m/s", "a vector"), ("b", 1)))
    with pytest.raises(ValueError, match="array"):
        Layout("bad", (("array", 1),))
    assert lay.size == 5 and tuple(lay.index) == (0, 1, 4)
    assert lay.names == ("a", "v_x", "v_y", "v_z", "b")
    View = lay.view("View")
    arr = np.arange(5.0)
    w = View(arr)
    assert w.a == 0.0 and w.b == 4.0
    np.testing.assert_array_equal(w.v, [1.0, 2.0, 3.0])
    w.b = 9.0
    w.v = [7.0, 8.0, 6.0]
    np.testing.assert_array_equal(arr, [0.0, 7.0, 8.0, 6.0, 9.0])  # the array itself, no copy
    assert lay.table()[1] == ("1-3", "v", "a vector, m/s")


def test_contact_model_is_a_view_of_its_array() -> None:
    a = np.zeros(27)
    a[cstep.R.model], a[cstep.R.stiffness], a[cstep.R.mass], a[cstep.R.normal + 2] = 1.0, 2e7, 3.0, 1.0
    rom = NormalContactModel.from_array(a)
    assert rom.to_array() is a and rom.model == "hunt_crossley" and rom.law_id == 1
    a[cstep.R.gap] = -1e-5
    assert rom.gap == -1e-5


def test_status_codes_are_one_table() -> None:
    codes = STATUS.code
    assert codes.ok == 0 and len(set(codes)) == len(codes)
    # the clash issue 23 found: 2 meant two things (arm step, run_batch)
    assert codes.mass_not_pd != codes.normal_mass_singular
    assert "positive definite" in STATUS.message(codes.mass_not_pd)
    assert STATUS.message(99) == "unknown kernel status 99"
    for name in ("state_not_finite", "mass_not_pd", "normal_mass_singular", "engine_stalled", "integration_failed"):
        assert STATUS.name(getattr(codes, name)) == name


@pytest.mark.parametrize("bad", [np.zeros(21), np.r_[np.zeros(1), 9.0, np.zeros(20)]])
def test_bad_arrays_are_refused(bad) -> None:
    from robot_grinding_sim.core.errors import InputError

    with pytest.raises(InputError, match="contact model"):
        NormalContactModel.from_array(bad)

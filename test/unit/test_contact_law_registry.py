"""A contact law is one unit: a law defined here, registered with one line, runs everywhere.

The law below (an elastic Hertz spring, ``F = K d^n``, no damping) exists only in this file: its
compiled kernel, its Python model and its :class:`ContactLaw`. Registered, it runs through the
bouncing-ball engine (``grinding bounce``'s), the in-process coupled step (the compiled batch of
the grinding job) and the node graph's code path (``ContactSide`` + ``ArmContactStepper``), with
no other file knowing it. The checks are independent of its code: Hertz's closed forms for the
impact (maximum penetration ``((n+1) m v0^2 / (2K))^(1/(n+1))``, contact time
``2.9432 d_max / v0``), restitution 1 and energy conservation for an elastic law, and the package's
own Hunt-Crossley law at ``c_r = 1`` (alpha = 0: the same force, another kernel) on the grinding job.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from numba import njit

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.contact.engine import NormalContactEngine
from robot_grinding_sim.core.contact.hunt_crossley import hertz_contact_time, hertz_max_penetration
from robot_grinding_sim.core.contact.law import (
    ENGAGE,
    FAMILY,
    FORCE,
    FORCE_RATE,
    IMPACT,
    INTEGRATED,
    LAW_SIG,
    LP,
    RELEASE,
    ContactLaw,
    ContactModel,
)
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.job.simulation import simulate
from robot_grinding_sim.core.planning.trajectory import episode_trajectory
from robot_grinding_sim.core.sim.coupled_step import ArmContactStepper, ContactSide, NormalContactModel

P = LP.index
NAME = "hertz_elastic"


@njit(LAW_SIG, cache=True)
def hertz_kernel(op, lp, a, b, c, d, e):
    """F = K d^n (b: d); never pulls, so it never releases inside the surface nor re-engages."""
    if op == FORCE:
        return lp[P.stiffness] * b ** lp[P.exponent]
    if op == IMPACT:
        return 0.0
    if op == ENGAGE:
        return math.inf
    if op == RELEASE:
        return 1.0
    if op == FORCE_RATE:
        return lp[P.stiffness] * lp[P.exponent] * b ** (lp[P.exponent] - 1.0) * c
    if op == FAMILY:
        return float(INTEGRATED)
    return math.nan


class Hertz(ContactModel):
    name = NAME

    def __init__(self, stiffness: float, exponent: float = 1.5, **_: object) -> None:
        self.stiffness, self.exponent = float(stiffness), float(exponent)
        self.law = LAW

    def kernel_parameters(self, mass: float = 1.0) -> np.ndarray:
        lp = LP.zeros()
        lp[P.law], lp[P.family], lp[P.clamped] = registry.law_id(NAME), INTEGRATED, 1.0
        lp[P.stiffness], lp[P.exponent], lp[P.v_floor] = self.stiffness, self.exponent, 1e-3
        return lp

    def static_penetration(self, force: float) -> float:
        return (force / self.stiffness) ** (1.0 / self.exponent)

    def potential(self, d):
        d = np.maximum(np.asarray(d, dtype=float), 0.0)
        return self.stiffness * d ** (self.exponent + 1.0) / (self.exponent + 1.0)

    def contact_time(self, mass: float, v0: float) -> float:
        return hertz_contact_time(mass, self.stiffness, v0)


LAW = ContactLaw(NAME, INTEGRATED, ("stiffness", "exponent"), hertz_kernel, Hertz, "F = K d^n, elastic",
                 static_exponent=lambda cfg: cfg.exponent)


@pytest.fixture
def hertz_law():
    law_id = registry.register(LAW)  # the one line that adds the law
    try:
        yield law_id
    finally:
        registry.unregister(NAME)


def test_registered_law_bounces_as_hertz_says(hertz_law) -> None:
    assert registry.names()[hertz_law] == NAME and registry.get(NAME) is LAW
    m, K, h, g = 1.0, 1.4e8, 1.0, 9.81
    model = registry.get(NAME).model(stiffness=K, exponent=1.5)
    # one free impact (no gravity): Hertz's maximum penetration and contact time, restitution 1
    v0 = 4.42945
    eng = NormalContactEngine(model, m, 0.0, x0=0.0, v0=-v0)
    res = eng.run(0.01, 1e-3, contact_output_dt=1e-7)
    (c,) = res.contacts
    d_max = hertz_max_penetration(m, K, v0)
    assert c.max_penetration == pytest.approx(d_max, rel=1e-9)
    assert c.peak_force == pytest.approx(K * d_max**1.5, rel=1e-9)
    assert c.contact_duration == pytest.approx(hertz_contact_time(m, K, v0), rel=1e-4)
    assert c.v_out / c.v_in == pytest.approx(1.0, abs=1e-9)
    # the ball under gravity at a long step: every bounce back to the same height, energy kept
    ball = NormalContactEngine(model, m, -m * g, x0=h)
    res = ball.run(3.3, 0.128)
    assert len(res.contacts) >= 3
    assert np.ptp(res.energy) < 1e-9 * m * g * h
    for c in res.contacts:
        if c.v_out is not None:
            assert c.v_out / c.v_in == pytest.approx(1.0, abs=1e-9)


def test_unknown_and_duplicate_laws_are_refused(hertz_law) -> None:
    with pytest.raises(InputError, match="already registered"):
        registry.register(LAW)
    with pytest.raises(InputError, match="unknown contact law 'nope'"):
        registry.get("nope")


@pytest.fixture(scope="module")
def job():
    cell = CellConfig().replace(**{"passes.stepover": 0.01, "contact.model": "hunt_crossley", "contact.cr": 1.0,
                                   "contact.stiffness": 2e7})
    setup = setup_job(JobConfig(cell=cell, max_passes=1, pass_length=0.02, optimise=False))
    traj = episode_trajectory(setup.model, setup.paths.passes[0], cell.process, 0.0, setup.penetration,
                              setup.q_home)
    return setup, traj


def test_registered_law_runs_the_coupled_step_as_hunt_crossley_at_cr_1(job, hertz_law) -> None:
    """The grinding job's compiled steps and the node graph's code path with the new law give the
    forces of Hunt-Crossley at c_r = 1 (alpha = 0: the same force K d^n through the package's kernel)."""
    setup, traj = job
    cell = setup.cell
    hertz_cell = dataclasses.replace(cell, contact=dataclasses.replace(cell.contact, model=NAME))
    t_end = float(traj.times[next(s for s in traj.segments if s["kind"] == "pass")["start"]]) + 0.3
    runs = {}
    for name, c in (("hunt_crossley", cell), (NAME, hertz_cell)):
        s = dataclasses.replace(setup, cfg=dataclasses.replace(setup.cfg, cell=c))
        runs[name] = simulate(s, traj.interpolator(setup.model), traj.positions[0], t_end).record
    ref, new = runs["hunt_crossley"], runs[NAME]
    assert ref["fn"].max() > 1.0, "the run must reach the contact"
    np.testing.assert_allclose(new["fn"], ref["fn"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(new["q"], ref["q"], rtol=0, atol=1e-12)
    # the node graph's code path: the contact side's model over its message layout, the arm side
    side = ContactSide(setup.model, hertz_cell.contact, cell.tool.tcp_link, cell.tool.spindle_speed, setup.query)
    arm = ArmContactStepper(setup.model, traj.positions[0], cell.servo, cell.sim.gravity, cell.tool.tcp_link)
    arm.arm.set_trajectory(traj.interpolator(setup.model), 0.0)
    fn, forces = [], []
    while arm.state.t < t_end - 1e-9:
        st = arm.state
        rom = side.evaluate(st.t, st.q, st.qd, cell.sim.dt)
        if rom is not None:
            rom = NormalContactModel.from_array(rom.to_array().copy())
            assert rom.model == NAME
            forces.append(side.normal_force(rom))
        fn.append(arm.step(cell.sim.dt, rom).force)
    np.testing.assert_allclose(fn, ref["fn_mean"][: len(fn)], rtol=1e-9, atol=1e-9)
    assert max(forces) > 1.0

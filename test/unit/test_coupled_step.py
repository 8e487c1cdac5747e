"""One physics: the node graph's code path and the in-process job's step give the same force.

The node path is what collision_node, contact_solver_node and dynamics_node run, without rclpy:
the contact rows of the tool (``ToolContactQuery.rows``, collision_node), the contact side from
those rows at the joint state (``ContactSide.from_rows``, contact_solver_node), the model through
its message layout (``NormalContactModel.to_array`` / ``from_array``: the data of contact/model),
and the arm side (``ArmContactStepper.step``, dynamics_node). The in-process path is
``CoupledStep``. Both follow the same job trajectory from rest onto the curved panel and along a
pass; every step's mean force and the normal contact force agree to 1e-9 (relative, 1 N floor), the
arm state to 1e-12 rad.
"""

from __future__ import annotations

import numpy as np
import pytest

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.contact.engine import NormalContactEngine
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.geometry.tool_contact import ToolContactQuery, workpiece_scene
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.job.simulation import coupled_step, simulate
from robot_grinding_sim.core.planning.trajectory import episode_trajectory
from robot_grinding_sim.core.sim import compiled_step as cstep
from robot_grinding_sim.core.sim.coupled_step import (
    LAYOUT,
    ArmContactStepper,
    ContactSide,
    NormalContactModel,
)

#: the collision_node default: rows while the gap is below 5 mm
MARGIN = 0.005


@pytest.fixture(scope="module")
def panel():
    cell = CellConfig().replace(**{"passes.stepover": 0.01})
    setup = setup_job(JobConfig(cell=cell, max_passes=1, pass_length=0.02, optimise=False))
    g = setup.paths.passes[0]
    traj = episode_trajectory(setup.model, g, cell.process, 0.0, setup.penetration, setup.q_home)
    return setup, traj


def _node_side(setup):
    """The node graph's pieces: a scene of its own (collision_node), a contact side without a
    query (contact_solver_node), an arm side (dynamics_node)."""
    cell = setup.cell
    scene, exact = workpiece_scene(setup.part, setup.faces, setup.X_BP, setup.tool_radius, cell.workpiece.deflection)
    assert exact
    query = ToolContactQuery(scene)
    side = ContactSide(setup.model, cell.contact, cell.tool.tcp_link, cell.tool.spindle_speed)
    return query, side


def test_node_code_path_gives_the_in_process_force(panel) -> None:
    setup, traj = panel
    cell = setup.cell
    tcp = cell.tool.tcp_link
    ref = traj.interpolator(setup.model)
    inproc = coupled_step(setup, traj.positions[0])
    inproc.arm.arm.set_trajectory(ref, 0.0)
    query, side = _node_side(setup)
    arm = ArmContactStepper(setup.model, traj.positions[0], cell.servo, cell.sim.gravity, tcp)
    arm.arm.set_trajectory(ref, 0.0)
    dt = cell.sim.dt
    t_slide = float(traj.times[next(s for s in traj.segments if s["kind"] == "pass")["start"]]) + 0.1
    t_end = t_slide + 0.4  # approach, engagement, dwell and half a second of the pass
    forces, in_contact = [], 0
    while inproc.state.t < t_end:
        a = inproc.step()
        st = arm.state
        rows = query.rows(setup.model.fk(st.q, tcp)[:3, 3], MARGIN)  # collision_node
        rom = side.from_rows(st.t, st.q, st.qd, rows)  # contact_solver_node
        if rom is not None:  # through contact/model's data and back (dynamics_node)
            msg = rom.to_array()
            rom = NormalContactModel.from_array(msg)
            assert len(msg) == len(LAYOUT)
        b = arm.step(dt, rom)
        assert abs(a.force - b.force) <= 1e-9 * max(a.force, 1.0), f"t = {a.t0:.3f} s: {a.force} N, {b.force} N"
        np.testing.assert_allclose(arm.state.q, inproc.state.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(arm.state.qd, inproc.state.qd, rtol=0, atol=1e-9)
        if a.rom is not None and b.rom is not None and a.force > 0:
            in_contact += 1
            # the wrench contact_solver_node publishes equals the in-process one at that state: the
            # normal force to 1e-9 N. The tangential force's direction follows the sliding velocity,
            # which includes the spindle's 1,047 rad/s times the contact point's offset from the tool
            # axis (a fraction of a micrometre): contact points that agree to 1e-12 m give sliding
            # velocities that agree to ~1e-9 m/s, so the tangential force agrees to ~1e-7 of its size
            # while sliding at 10 mm/s (and is ill-conditioned at rest, in the dwell).
            wa, wb = inproc.contact.wrench(a.rom), side.wrench(b.rom)
            fa = inproc.contact.normal_force(a.rom)
            assert abs(fa - side.normal_force(b.rom)) <= 1e-9 * max(fa, 1.0)
            if a.t0 > t_slide:
                assert np.linalg.norm(wb - wa) <= 1e-6 * np.linalg.norm(wa), (wa, wb)
        forces.append(a.force)
    forces = np.array(forces)
    assert in_contact > 500 and forces.max() > 4.0, "the comparison must cover the contact"


def test_contact_model_layout_round_trip_and_bad_arrays(panel) -> None:
    setup, traj = panel
    cell = setup.cell
    query, side = _node_side(setup)
    q = traj.positions[-40]
    rows = query.rows(setup.model.fk(q, cell.tool.tcp_link)[:3, 3], MARGIN)
    rom = side.from_rows(1.25, q, np.zeros_like(q), rows)
    back = NormalContactModel.from_array(rom.to_array())
    for name in [f.name for f in NormalContactModel.layout.fields] + ["model"]:
        np.testing.assert_array_equal(getattr(back, name), getattr(rom, name))
    good = rom.to_array()
    for bad, text in ((good[:-1], "expected 27 values"), (np.r_[good[:5], np.nan, good[6:]], "NaN"),
                      (np.r_[good[:1], 7.0, good[2:]], "unknown law id"),
                      (np.r_[good[:10], 2.0 * good[10:13], good[13:]], "unit vector")):
        with pytest.raises(InputError, match=text):
            NormalContactModel.from_array(bad)
    assert side.from_rows(0.0, q, np.zeros_like(q), np.zeros((0, 7))) is None
    with pytest.raises(InputError, match="unit vector"):
        side.from_rows(0.0, q, np.zeros_like(q), np.array([[0, 0, 0, 0, 0, 2.0, 1e-5]]))


def test_a_plane_runs_compiled_as_the_wrappers_step() -> None:
    """On the flat plate (a plane face) the in-process job runs the compiled batch; the step-by-step
    wrappers (ContactSide, ArmContactStepper) on the scene's own geometry give the same run."""
    cell = CellConfig().replace(**{"workpiece.part": "flat_plate", "passes.stepover": 0.05})
    setup = setup_job(JobConfig(cell=cell, max_passes=1, pass_length=0.01, optimise=False))
    assert setup.query.compiled is not None
    g = setup.paths.passes[0]
    traj = episode_trajectory(setup.model, g, cell.process, 0.0, setup.penetration, setup.q_home)
    t_end = float(traj.times[next(s for s in traj.segments if s["kind"] == "pass")["start"]]) + 0.2
    ref = traj.interpolator(setup.model)
    fast = simulate(setup, ref, traj.positions[0], t_end)
    compiled, setup.query.compiled = setup.query.compiled, None
    try:
        slow = simulate(setup, ref, traj.positions[0], t_end)
    finally:
        setup.query.compiled = compiled
    a, b = fast.record, slow.record
    assert fast.steps == slow.steps and fast.event_steps == slow.event_steps
    assert a["fn"].max() > 4.0, "the comparison must cover the contact"
    np.testing.assert_allclose(a["fn"], b["fn"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-12)


def test_hunt_crossley_steps_run_compiled_as_the_engine_does(panel) -> None:
    """A Hunt-Crossley step in contact throughout runs compiled (kind ``hc_contact``: the contact
    phase of hc_kernels, the integrator behind hc_integrate): its end state and its samples are
    those of NormalContactEngine started from the same state, to the bit; onset and release steps
    are ``event`` steps (the engine's whole step, compiled too: test_engine_compiled checks them
    against the Python engine they replaced)."""
    setup, traj = panel
    cell = setup.cell.replace(**{"contact.model": "hunt_crossley", "contact.stiffness": 2e7})
    tcp = cell.tool.tcp_link
    side = ContactSide(setup.model, cell.contact, tcp, cell.tool.spindle_speed, setup.query)
    arm = ArmContactStepper(setup.model, traj.positions[0], cell.servo, cell.sim.gravity, tcp)
    arm.sample_dt = cell.sim.output_dt / 2  # samples inside the step too
    arm.arm.set_trajectory(traj.interpolator(setup.model), 0.0)
    dt = cell.sim.dt
    t_end = float(traj.times[next(s for s in traj.segments if s["kind"] == "pass")["start"]]) + 0.1
    kinds: dict[str, int] = {}
    while arm.state.t < t_end:
        st = arm.state
        rom = side.evaluate(st.t, st.q, st.qd, dt)
        res = arm.step(dt, rom)
        kinds[res.kind] = kinds.get(res.kind, 0) + 1
        if res.kind != "hc_contact":
            continue
        eng = NormalContactEngine(arm.law_of(rom), res.sv[cstep.V.m], res.sv[cstep.V.f_ext], x0=res.gap0, v0=res.rate0,
                                  t0=0.0)
        eng.output_dt = arm.sample_dt
        eng.step(dt)
        r = eng.result()
        assert (eng.x, eng.v) == (res.gap1, res.rate1)
        for a, b in zip(res.engine, (r.t, r.force, r.x), strict=True):
            np.testing.assert_array_equal(a, b)
    assert kinds.get("hc_contact", 0) > 300 and 0 < kinds.get("event", 0) < 20, kinds

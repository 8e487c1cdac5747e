"""The variable-step engine on the paper's bouncing ball (T-000-TS in the papers digest, section 1.4).

Oracles: free fall t = sqrt(2 h / g), elastic peak force v0 sqrt(K m), energy conservation at
c_r = 1, the realised restitution of the clamped closed form, the resting penetration m g / K, a
scipy solve_ivp reference of the whole hybrid motion, and the explicit-stability negative control.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from robot_grinding_sim.core.contact.engine import (
    NormalContactEngine,
    effective_mass_callback,
    semi_implicit_euler_penalty,
)
from robot_grinding_sim.core.contact.hunt_crossley import HuntCrossley
from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt
from robot_grinding_sim.core.errors import InputError

M, K, G, H = 1.0, 1.4e8, 9.81, 1.0
T_IMPACT = math.sqrt(2 * H / G)  # 0.451524 s
V_IMPACT = math.sqrt(2 * G * H)  # 4.42945 m/s


def ball(model, dt, duration, mass=M, **kw):
    eng = NormalContactEngine(model, mass, -M * G, H, 0.0)
    return eng, eng.run(duration, dt, **kw)


def test_oracle_constants():
    assert T_IMPACT == pytest.approx(0.451524, abs=1e-6)
    assert V_IMPACT == pytest.approx(4.42945, abs=1e-5)


@pytest.mark.parametrize("dt", [1e-3, 16e-3, 128e-3, 256e-3])
def test_elastic_energy_drift_over_ten_bounces(dt):
    _, res = ball(KelvinVoigt(K, 1.0), dt, 9.5)
    assert len(res.contacts) >= 10
    e0 = M * G * H
    drift = np.max(np.abs(res.energy - e0)) / e0
    assert drift < 1e-3  # requirement: 0.1 %
    assert drift < 1e-9  # what the exact flight + closed-form contact actually give
    for c in res.contacts[:10]:
        assert c.v_out / c.v_in == pytest.approx(1.0, abs=1e-9)
    # no tunnelling: the deepest point is the elastic penetration, never more
    assert res.penetration.max() < 1.01 * V_IMPACT * math.sqrt(M / K)
    # ten bounces, period 2 sqrt(2h/g)
    t_imp = np.array([c.t_impact for c in res.contacts[:10]])
    period = 2 * T_IMPACT + res.contacts[0].contact_duration
    assert np.allclose(np.diff(t_imp), period, atol=1e-9)


@pytest.mark.parametrize("dt", [1 / 32 * 1e-3, 0.25e-3, 1e-3, 2e-3, 0.0137, 16e-3, 128e-3, 256e-3, 1.0])
def test_first_impact_exact_at_any_step(dt):
    _, res = ball(KelvinVoigt(K, 1.0), dt, 0.46)
    c = res.contacts[0]
    assert c.t_impact == pytest.approx(T_IMPACT, abs=1e-9)  # requirement: 1e-6 s
    assert c.v_in == pytest.approx(V_IMPACT, rel=1e-12)


def test_elastic_peak_force_penetration_and_duration():
    _, res = ball(KelvinVoigt(K, 1.0), 128e-3, 1.0)
    c = res.contacts[0]
    # gravity during the 0.27 ms contact changes these at the 2e-4 level only (digest 1.2)
    assert c.peak_force == pytest.approx(V_IMPACT * math.sqrt(K * M), rel=5e-4)
    assert c.max_penetration == pytest.approx(V_IMPACT * math.sqrt(M / K), rel=5e-4)
    assert c.contact_duration == pytest.approx(math.pi * math.sqrt(M / K), rel=5e-4)


@pytest.mark.parametrize("cr", [0.2, 0.4, 0.6, 0.8, 1.0])
@pytest.mark.parametrize("dt", [1e-3, 128e-3])
def test_realised_restitution_clamped_kv(cr, dt):
    _, res = ball(KelvinVoigt(K, cr), dt, 1.0)
    c = res.contacts[0]
    assert c.v_out / c.v_in == pytest.approx(cr, rel=1e-2)  # requirement: 1 %
    assert c.v_out / c.v_in == pytest.approx(cr, rel=1e-3)  # gravity is the only departure (~1e-4)


@pytest.mark.parametrize("cr", [0.2, 0.6, 0.9])
def test_realised_restitution_unclamped_kv_and_hunt_crossley(cr):
    for model in (KelvinVoigt(K, cr, clamped=False), HuntCrossley(K, cr, 1.5, "exact")):
        _, res = ball(model, 64e-3, 1.0)
        c = res.contacts[0]
        assert c.v_out / c.v_in == pytest.approx(cr, rel=1e-2)
    # the unclamped convention pulls at the end of the contact
    _, res = ball(KelvinVoigt(K, 0.2, clamped=False), 1.0, 0.46, contact_output_dt=1e-6)
    assert res.force.min() < -1000.0


def test_lankarani_nikravesh_realises_its_own_restitution():
    _, res = ball(HuntCrossley(K, 0.5, 1.5, "lankarani_nikravesh"), 128e-3, 1.0)
    c = res.contacts[0]
    assert c.v_out / c.v_in == pytest.approx(0.725, abs=3e-3)


def test_dense_output_inside_one_long_step_equals_fine_stepping():
    grid = 2e-6
    _, coarse = ball(KelvinVoigt(K, 0.6), 0.256, 0.46, contact_output_dt=grid)
    _, fine = ball(KelvinVoigt(K, 0.6), 7e-6, 0.46, contact_output_dt=grid)
    sel_c = coarse.penetration > 0
    t = coarse.t[sel_c]
    # both runs sample the same global grid; compare on shared times
    common, ic, jf = np.intersect1d(np.round(t / grid, 6), np.round(fine.t / grid, 6), return_indices=True)
    assert common.size > 50
    fc = coarse.force[sel_c][ic]
    ff = fine.force[jf]
    assert np.max(np.abs(fc - ff)) < 1e-7 * np.max(fc)


def test_whole_bounce_against_solve_ivp_reference():
    cr = 0.6
    model = KelvinVoigt(K, cr)
    d = model.damping(M)

    def rhs(_t, y):
        pen = -y[0]
        fc = max(K * pen + d * (-y[1]), 0.0) if pen > 0 else 0.0
        return [y[1], -G + fc / M]

    def touch(_t, y):
        return y[0]
    touch.direction = -1
    touch.terminal = True

    def release(_t, y):
        return K * (-y[0]) + d * (-y[1])
    release.direction = -1
    release.terminal = True
    s1 = solve_ivp(rhs, (0, 1), [H, 0.0], method="DOP853", rtol=1e-12, atol=1e-14, events=[touch])
    t1, y1 = s1.t_events[0][0], s1.y_events[0][0]
    s2 = solve_ivp(rhs, (t1, t1 + 1e-3), y1, method="DOP853", rtol=1e-12, atol=1e-15, events=[release],
                   max_step=1e-6)
    t2, y2 = s2.t_events[0][0], s2.y_events[0][0]
    _, res = ball(model, 0.05, 1.0)
    c = res.contacts[0]
    assert c.t_impact == pytest.approx(t1, abs=1e-10)
    assert c.t_impact + c.contact_duration == pytest.approx(t2, abs=1e-10)
    assert c.v_out == pytest.approx(y2[1], rel=1e-8)


def test_ball_comes_to_rest_at_mg_over_k():
    eng, res = ball(KelvinVoigt(K, 0.5), 10e-3, 6.0)
    assert res.in_contact_at_end
    assert eng.x == pytest.approx(-M * G / K, rel=1e-6)  # 7.0e-8 m
    assert abs(eng.v) < 1e-9
    n = len(res.contacts)
    # no chattering: more time at rest adds no new contacts
    eng.run(5.0, 10e-3)
    assert len(eng.contacts) == n


def test_hertz_ball_elastic():
    _, res = ball(HuntCrossley(K, 1.0, 1.5), 256e-3, 3.0)
    c = res.contacts[0]
    dmax = (5 * M * V_IMPACT**2 / (4 * K)) ** 0.4
    assert c.max_penetration == pytest.approx(dmax, rel=1e-3)
    assert c.contact_duration == pytest.approx(2.9433 * dmax / V_IMPACT, rel=1e-3)
    assert np.max(np.abs(res.energy - M * G * H)) / (M * G * H) < 1e-6


def test_effective_mass_callback_is_used():
    class FakeArm:
        calls = 0

        def effective_mass(self, q, link, point, direction):
            FakeArm.calls += 1
            assert link == "tool0" and q.shape == (6,)
            assert np.allclose(direction, [0, 0, 1])
            return 4.0

    arm = FakeArm()
    mass = effective_mass_callback(arm, lambda t: np.full(6, t), "tool0", np.zeros(3), np.array([0, 0, 1.0]))
    eng = NormalContactEngine(KelvinVoigt(K, 1.0), mass, -M * G, H, 0.0)
    res = eng.run(0.5, 0.1)
    assert FakeArm.calls == res.steps + 1  # once at construction, then once per outer step
    # the arm pushes with m_eff = 4 kg but the same external force: v_in = sqrt(2 (g/4) h)
    v_in = math.sqrt(2 * G / 4 * H)
    assert res.contacts == []  # t_impact = sqrt(2 h / (g/4)) = 0.903 s
    eng.run(1.0, 0.1)
    c = eng.contacts[0]
    assert c.v_in == pytest.approx(v_in, rel=1e-9)
    assert c.peak_force == pytest.approx(v_in * math.sqrt(K * 4.0), rel=1e-3)


def test_negative_control_semi_implicit_euler_is_unstable_at_large_steps():
    limit = 2 * math.sqrt(M / K)
    assert limit == pytest.approx(0.169e-3, abs=1e-6)
    e0 = M * G * H
    for dt in (1.01 * limit, 0.25e-3):
        out = semi_implicit_euler_penalty(K, 0.0, M, -M * G, H, 0.0, dt, 0.6)
        e_after = out["energy"][np.isfinite(out["energy"])]
        assert (not np.all(np.isfinite(out["energy"]))) or e_after[-1] > 2 * e0
    # while at a small step it does bounce back to about the same energy
    out = semi_implicit_euler_penalty(K, 0.0, M, -M * G, H, 0.0, 1e-5, 0.6)
    assert out["energy"][-1] == pytest.approx(e0, rel=0.05)
    # and the closed-form engine is exact at the unstable step
    _, res = ball(KelvinVoigt(K, 1.0), 0.25e-3, 0.6)
    assert res.energy[-1] == pytest.approx(e0, rel=1e-9)


def test_bad_input():
    with pytest.raises(InputError, match="dt"):
        NormalContactEngine(KelvinVoigt(K, 1.0), M, -G, H).run(1.0, 0.0)
    with pytest.raises(InputError, match="mass"):
        NormalContactEngine(KelvinVoigt(K, 1.0), -1.0, -G, H)
    with pytest.raises(InputError, match="duration"):
        NormalContactEngine(KelvinVoigt(K, 1.0), M, -G, H).run(-1.0, 0.1)
    with pytest.raises(InputError, match="model"):
        NormalContactEngine("kv", M, -G, H)
    with pytest.raises(InputError, match="x0"):
        NormalContactEngine(KelvinVoigt(K, 1.0), M, -G, float("nan"))


def test_arm_effective_mass_from_the_robot_model():
    """The tool of the default arm (RobotModel) pressed into a surface: m_eff from the dynamics."""
    from robot_grinding_sim.cli.dynamics import default_urdf
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    robot = RobotModel.from_urdf(default_urdf())
    q = np.array([0.1, -1.2, 1.4, -1.8, -1.57, 0.3])[: robot.nq]
    tip = robot.tip_link
    tcp = robot.fk(q, tip)[:3, 3]
    normal = np.array([0.0, 0.0, 1.0])
    m_eff = robot.effective_mass(q, tip, tcp, normal)
    assert 0.5 < m_eff < 1e3
    mass = effective_mass_callback(robot, lambda _t: q, tip, tcp, normal)
    k, v_approach = 1e6, 0.05
    # the tool 1 mm above the part, approaching at 5 cm/s, no external force along the normal
    eng = NormalContactEngine(KelvinVoigt(k, 1.0), mass, 0.0, 1e-3, -v_approach)
    res = eng.run(0.1, 0.01)
    c = res.contacts[0]
    assert c.t_impact == pytest.approx(1e-3 / v_approach, rel=1e-12)
    assert c.peak_force == pytest.approx(v_approach * math.sqrt(k * m_eff), rel=1e-9)
    assert c.contact_duration == pytest.approx(math.pi * math.sqrt(m_eff / k), rel=1e-9)


def _hybrid_reference(k, dmp, m, f_ext, x0, v0, t_end):
    """solve_ivp of the clamped KV contact as a hybrid system, restarted at every event (DOP853).

    Returns (x(t) evaluator from the dense outputs, final state)."""
    t, y = 0.0, np.array([x0, v0], dtype=float)
    segments = []

    def force(yy):
        pen = -yy[0]
        return max(k * pen - dmp * yy[1], 0.0) if pen > 0 else 0.0

    def rhs(_t, yy):
        return [yy[1], (f_ext + force(yy)) / m]

    def ev_surface(_t, yy):
        return yy[0]

    def ev_force(_t, yy):
        return k * (-yy[0]) - dmp * yy[1] if yy[0] < 0 else 1.0

    ev_surface.terminal = ev_force.terminal = True
    guard = 0
    while t < t_end and guard < 500:
        guard += 1
        sol = solve_ivp(rhs, (t, t_end), y, method="DOP853", rtol=1e-12, atol=[1e-15, 1e-12],
                        events=[ev_surface, ev_force], dense_output=True)
        segments.append((t, sol.t[-1], sol.sol))
        y = sol.y[:, -1]
        if sol.status == 1:
            # step a hair past the event so that it does not fire again at once
            t = sol.t[-1] + 1e-13
            y = y + 1e-13 * np.array(rhs(t, y))
        else:
            t = t_end

    def x_of(ts):
        out = np.empty(len(ts))
        for i, tt in enumerate(ts):
            for a, b, fn in segments:
                if a <= tt <= b + 1e-13:
                    out[i] = fn(min(tt, b))[0]
                    break
            else:
                out[i] = np.nan
        return out

    return x_of, y


@pytest.mark.parametrize("case", [
    # (m, K, zeta, f_ext, x0, v0): strong push-in force, heavily damped: never releases
    (1.0, 1e4, 0.9, -50.0, 0.01, -2.0),
    # overdamped contact under a pushing force (an arm pressing a tool in)
    (3.0, 1e5, 2.5, -30.0, 0.002, -0.5),
    # a force pulling the body away while in contact (retract): loose phases, then free
    (0.5, 2e4, 0.3, +5.0, -1e-3, 0.0),
    # light damping, gravity-like load: bounces, releases inside the surface, ends at rest
    (1.0, 1e4, 0.2, -9.81, 0.05, 0.0),
    # a release inside the surface followed by re-engagement before leaving
    (1.0, 1e4, 0.4, -9.81, 0.0, -2.0),
])
@pytest.mark.parametrize("dt", [3e-4, 0.05])
def test_engine_matches_hybrid_reference(case, dt):
    m, k, zeta, f_ext, x0, v0 = case
    dmp = 2 * zeta * math.sqrt(k * m)
    t_end = 60 * math.sqrt(m / k) + 0.1
    eng = NormalContactEngine(KelvinVoigt(k, damping=dmp), m, f_ext, x0, v0)
    res = eng.run(t_end, dt, output_dt=t_end / 40)
    x_ref, y_end = _hybrid_reference(k, dmp, m, f_ext, x0, v0, t_end)
    scale = max(abs(x0), abs(f_ext) / k, abs(v0) * math.sqrt(m / k), 1e-6)
    assert eng.x == pytest.approx(y_end[0], abs=1e-6 * scale)
    assert eng.v == pytest.approx(y_end[1], abs=1e-6 * scale * math.sqrt(k / m))
    # and along the way, on the engine's dense-output grid
    assert np.max(np.abs(res.x - x_ref(res.t))) < 1e-6 * scale
    if case == (1.0, 1e4, 0.4, -9.81, 0.0, -2.0):  # the re-engagement path was taken
        last = res.contacts[-1]
        assert last.releases >= 1 and last.t_exit is None and res.in_contact_at_end


def test_hunt_crossley_contact_split_over_many_steps_matches_one_step():
    # the 1.4 ms Hertz contact spread over ~14 steps of 0.1 ms vs inside one 256 ms step
    model = HuntCrossley(K, 0.6, 1.5, "exact")
    _, fine = ball(model, 1e-4, 0.6)
    _, coarse = ball(model, 0.256, 0.6)
    a, b = fine.contacts[0], coarse.contacts[0]
    assert a.v_out == pytest.approx(b.v_out, rel=1e-8)
    assert a.contact_duration == pytest.approx(b.contact_duration, rel=1e-8)
    assert a.peak_force == pytest.approx(b.peak_force, rel=1e-8)
    assert a.max_penetration == pytest.approx(b.max_penetration, rel=1e-8)

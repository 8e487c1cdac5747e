"""Contact models against closed forms, scipy reference integrations and the papers digest oracles.

Oracles: /work/shared/reference/papers_digest.md sections 1.2, 3 and 7 (numbers marked "computed"
there come from independent sympy / solve_ivp checks).
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from robot_grinding_sim.core.contact import hunt_crossley as hc
from robot_grinding_sim.core.contact import kelvin_voigt as kv
from robot_grinding_sim.core.contact import laws as c
from robot_grinding_sim.core.errors import InputError

M, K, G = 1.0, 1.4e8, 9.81
V0 = math.sqrt(2.0 * G * 1.0)  # 4.42945 m/s: the ball dropped through 1 m


def _reference_kv(k, d, m, f, d0, v0, t_end, clamp_event=False, t_eval=None):
    """solve_ivp (DOP853, rtol 1e-12) of m d'' = f - K d - D d', plus the force integral as a state."""

    def rhs(_t, y):
        fc = k * y[0] + d * y[1]
        return [y[1], (f - fc) / m, fc]

    events = None
    if clamp_event:
        def ev(_t, y):
            return k * y[0] + d * y[1]
        ev.terminal, ev.direction = True, -1
        events = [ev]
    scale_d = max(abs(d0), abs(v0) * math.sqrt(m / k), abs(f) / k, 1e-12)
    scale_v = max(abs(v0), scale_d * math.sqrt(k / m))
    return solve_ivp(rhs, (0.0, t_end), [d0, v0, 0.0], method="DOP853", rtol=1e-13,
                     atol=[1e-15 * scale_d, 1e-15 * scale_v, 1e-15 * scale_v * m], events=events,
                     dense_output=t_eval is None, t_eval=t_eval)


# ---- Kelvin-Voigt restitution (digest section 1.2 table, section 7 items 1-4) -------------------

UNCLAMPED = {  # requested c_r: (D, clamped realised c_r with the same D, t_c (a) ms, t_s (b) ms)
    0.2: (10789.7, 0.324863, 0.29833, 0.20841),
    0.4: (6625.96, 0.472014, 0.27658, 0.22661),
    0.6: (3797.96, 0.632291, 0.26900, 0.24140),
    0.8: (1676.62, 0.808099, 0.26618, 0.25417),
    0.95: (386.32, 0.950507, 0.26555, 0.26279),
}
CLAMPED_ZETA = {0.2: 0.73125, 0.4: 0.35451, 0.6: 0.18086, 0.8: 0.07436, 0.95: 0.01650}


@pytest.mark.parametrize("cr", sorted(UNCLAMPED))
def test_unclamped_damping_and_the_clamped_error(cr):
    d_ref, clamped_realised, tc_ms, ts_ms = UNCLAMPED[cr]
    d = kv.kv_damping_unclamped(cr, K, M)
    assert d == pytest.approx(d_ref, rel=2e-5)
    zeta = d / (2.0 * math.sqrt(K * M))
    assert kv.kv_restitution_unclamped(zeta) == pytest.approx(cr, abs=1e-12)
    assert kv.kv_restitution_clamped(zeta) == pytest.approx(clamped_realised, abs=2e-6)
    wn = math.sqrt(K / M)
    assert math.pi / (wn * math.sqrt(1 - zeta**2)) * 1e3 == pytest.approx(tc_ms, abs=1e-5)
    assert kv.kv_separation_time_clamped(zeta, wn) * 1e3 == pytest.approx(ts_ms, abs=1e-5)
    # the closed-form motion realises both: d = 0 crossing (unclamped) and F = 0 crossing (clamped)
    sol = kv.KVSolution(K, d, M, 0.0, 0.0, V0)
    t_u = sol.separation_time(1.0, clamp=False)
    assert t_u * 1e3 == pytest.approx(tc_ms, abs=1e-5)
    assert -sol.state(t_u)[1] / V0 == pytest.approx(cr, abs=1e-9)
    t_c = sol.separation_time(1.0, clamp=True)
    assert t_c * 1e3 == pytest.approx(ts_ms, abs=1e-5)
    assert -sol.state(t_c)[1] / V0 == pytest.approx(clamped_realised, abs=2e-6)


@pytest.mark.parametrize("cr", sorted(CLAMPED_ZETA))
def test_clamped_inverse_realises_the_request(cr):
    zeta = kv.kv_zeta_clamped(cr)
    assert zeta == pytest.approx(CLAMPED_ZETA[cr], abs=1e-5)
    model = kv.KelvinVoigt(K, cr)
    assert model.damping(M) == pytest.approx(2 * zeta * math.sqrt(K * M), rel=1e-14)
    # independent check: solve_ivp with an event at K d + D d' = 0
    ref = _reference_kv(K, model.damping(M), M, 0.0, 0.0, V0, 1e-2, clamp_event=True)
    assert -ref.y_events[0][0][1] / V0 == pytest.approx(cr, rel=1e-9)


@pytest.mark.parametrize("zeta, realised", [(1.5, 0.0756), (2.0, 0.0478), (5.0, 0.0093)])
def test_overdamped_clamped_restitution(zeta, realised):
    assert kv.kv_restitution_clamped(zeta) == pytest.approx(realised, abs=6e-5)
    d = 2 * zeta * math.sqrt(K * M)
    ref = _reference_kv(K, d, M, 0.0, 0.0, V0, 1e-2, clamp_event=True)
    assert -ref.y_events[0][0][1] / V0 == pytest.approx(kv.kv_restitution_clamped(zeta), rel=1e-9)
    assert ref.t_events[0][0] == pytest.approx(kv.kv_separation_time_clamped(zeta, math.sqrt(K / M)), rel=1e-9)
    # below e^-2 needs zeta > 1, and the inverse finds it
    assert kv.kv_zeta_clamped(kv.kv_restitution_clamped(zeta)) == pytest.approx(zeta, rel=1e-10)


def test_restitution_is_continuous_and_monotone_through_critical_damping():
    zs = np.concatenate([np.linspace(0, 0.999, 400), [1 - 1e-7, 1.0, 1 + 1e-7], np.linspace(1.001, 20, 400)])
    crs = np.array([kv.kv_restitution_clamped(z) for z in zs])
    assert np.all(np.diff(crs) < 0)
    assert kv.kv_restitution_clamped(1.0) == pytest.approx(math.exp(-2), rel=1e-12)
    assert kv.kv_restitution_clamped(1 - 1e-7) == pytest.approx(math.exp(-2), rel=1e-6)


def test_elastic_kv_oracles():
    sol = kv.KelvinVoigt(K, 1.0).solve(M, 0.0, V0, 0.0)
    ts = sol.separation_time(1.0)
    assert ts * 1e3 == pytest.approx(0.26551, abs=1e-5)
    assert sol.max_penetration(ts)[0] * 1e6 == pytest.approx(374.36, abs=0.01)
    assert sol.peak_force(ts)[0] == pytest.approx(V0 * math.sqrt(K * M), rel=1e-12)
    assert sol.peak_force(ts)[0] / 1e3 == pytest.approx(52.41, abs=0.01)


def test_eq10_sign_regression_damping_dissipates():
    # the paper's eq (10) as printed: F = -D d' + K d, i.e. negative damping
    d = kv.kv_damping_unclamped(0.6, K, M)
    literal = kv.KVSolution(K, -d, M, 0.0, 0.0, V0)
    t = literal.separation_time(1.0, clamp=False)
    assert -literal.state(t)[1] / V0 == pytest.approx(1 / 0.6, rel=1e-6)  # energy injected: 1.667
    ours = kv.KelvinVoigt(K, 0.6).solve(M, 0.0, V0, 0.0)
    t = ours.separation_time(1.0)
    d_end, v_end = ours.state(t)
    energy_out = 0.5 * M * v_end**2 + 0.5 * K * d_end**2
    assert energy_out < 0.5 * M * V0**2
    assert -v_end / V0 == pytest.approx(0.6, rel=1e-9)
    # and along the way the energy never grows
    ts = np.linspace(0, t, 200)
    dd, vv = ours.state(ts)
    e = 0.5 * M * vv**2 + 0.5 * K * dd**2
    assert np.all(np.diff(e) <= 1e-9 * e[0])


# ---- closed form vs reference integration (digest item 8) ---------------------------------------


@pytest.mark.parametrize("regime", ["under", "critical", "over"])
def test_closed_form_matches_reference_integration(regime):
    # zeta <= 5: beyond, the explicit reference itself loses digits on the fast mode (see the
    # 40-digit test below, which covers zeta up to 50)
    rng = np.random.default_rng({"under": 1, "critical": 2, "over": 3}[regime])
    for _ in range(12):
        m = 10 ** rng.uniform(-1, 1.5)
        k = 10 ** rng.uniform(3, 8)
        zeta = {"under": rng.uniform(0.0, 0.95), "critical": 1.0, "over": rng.uniform(1.05, 5)}[regime]
        dmp = 2 * zeta * math.sqrt(k * m)
        f = rng.uniform(-2, 2) * m * 9.81 * 10
        d0 = rng.uniform(-1, 1) * 1e-3
        v0 = rng.uniform(-3, 3)
        t_end = rng.uniform(0.2, 5) * 2 * math.pi * math.sqrt(m / k)
        sol = kv.KVSolution(k, dmp, m, f, d0, v0)
        ts = np.linspace(0, t_end, 9)
        yr = _reference_kv(k, dmp, m, f, d0, v0, t_end, t_eval=ts).y
        d_cf, v_cf = sol.state(ts)
        scale_d = np.max(np.abs(yr[0])) + abs(f) / k
        scale_v = np.max(np.abs(yr[1]))
        assert np.max(np.abs(d_cf - yr[0])) / scale_d < 1e-9
        assert np.max(np.abs(v_cf - yr[1])) / scale_v < 1e-9
        # impulse identity integral(F) = f t - m (v(t) - v0) against the integrated force
        imp = sol.impulse(ts)
        assert np.max(np.abs(imp - yr[2])) / (np.max(np.abs(yr[2])) + m * scale_v) < 1e-9


def test_overdamped_closed_form_against_40_digit_arithmetic():
    # stiff overdamped cases are where a solver reference is weakest: check against exact exponentials
    getcontext().prec = 40
    rng = np.random.default_rng(11)
    for _ in range(10):
        m, k, zeta = 10 ** rng.uniform(-1, 1.5), 10 ** rng.uniform(3, 8), rng.uniform(1.001, 50)
        dmp, f = 2 * zeta * math.sqrt(k * m), rng.uniform(-20, 20) * m
        d0, v0 = rng.uniform(-1, 1) * 1e-3, rng.uniform(-3, 3)
        ts = np.linspace(0, rng.uniform(0.2, 5) * 2 * math.pi * math.sqrt(m / k), 7)
        kk, dd, mm, ff = Decimal(k), Decimal(dmp), Decimal(m), Decimal(f)
        sq = (dd * dd - 4 * kk * mm).sqrt()
        s1, s2 = (-dd + sq) / (2 * mm), (-dd - sq) / (2 * mm)
        y0 = Decimal(d0) - ff / kk
        c1 = (Decimal(v0) - s2 * y0) / (s1 - s2)
        c2 = y0 - c1
        e1 = [(s1 * Decimal(t)).exp() for t in ts]
        e2 = [(s2 * Decimal(t)).exp() for t in ts]
        d_ex = np.array([float(ff / kk + c1 * a + c2 * b) for a, b in zip(e1, e2, strict=True)])
        v_ex = np.array([float(c1 * s1 * a + c2 * s2 * b) for a, b in zip(e1, e2, strict=True)])
        d_cf, v_cf = kv.KVSolution(k, dmp, m, f, d0, v0).state(ts)
        assert np.max(np.abs(d_cf - d_ex)) <= 1e-13 * np.max(np.abs(d_ex))
        assert np.max(np.abs(v_cf - v_ex)) <= 1e-13 * np.max(np.abs(v_ex))


def test_separation_time_with_external_force_matches_event_location():
    rng = np.random.default_rng(7)
    for _ in range(10):
        zeta = rng.uniform(0.05, 3.0)
        m = rng.uniform(0.5, 5)
        k = 10 ** rng.uniform(5, 8)
        dmp = 2 * zeta * math.sqrt(k * m)
        f = m * 9.81 * rng.uniform(0, 1)
        v0 = rng.uniform(1, 4)
        sol = kv.KVSolution(k, dmp, m, f, 0.0, v0)
        ts = sol.separation_time(1.0)
        ref = _reference_kv(k, dmp, m, f, 0.0, v0, 1.0, clamp_event=True)
        assert ts == pytest.approx(ref.t_events[0][0], abs=1e-12)
        assert float(sol.contact_force(ts, clamp=False)) == pytest.approx(0.0, abs=1e-9 * dmp * v0 + 1e-9)


def test_separation_none_for_resting_contact_and_immediate_for_release():
    m, k = 1.0, 1e6
    dmp = 2 * 0.3 * math.sqrt(k * m)
    # at rest on the spring under gravity: never separates
    rest = kv.KVSolution(k, dmp, m, m * G, m * G / k, 0.0)
    assert rest.separation_time(10.0) is None
    # starting with a pulling force and moving out: ends at once
    out = kv.KVSolution(k, dmp, m, 0.0, 1e-6, -5.0)
    assert out.separation_time(1.0) == 0.0


def test_kv_input_errors():
    with pytest.raises(InputError, match="restitution"):
        kv.KelvinVoigt(K, 0.0)
    with pytest.raises(InputError, match="restitution"):
        kv.KelvinVoigt(K, 1.2)
    with pytest.raises(InputError, match="stiffness"):
        kv.KelvinVoigt(-1.0, 0.5)
    with pytest.raises(InputError, match="mass"):
        kv.KelvinVoigt(K, 0.5).damping(-1.0)


# ---- Hunt-Crossley (digest section 3, item 6 and 7) ---------------------------------------------


def test_hc_exact_relation_oracles():
    assert hc.hc_realised_restitution(1.0) == pytest.approx(0.5936243, abs=1e-7)
    assert hc.hc_u_exact(0.5) == pytest.approx(1.432751, abs=1e-6)
    assert hc.hc_u_exact(0.8) == pytest.approx(0.373146, abs=1e-6)
    assert hc.hc_u_exact(1.0) == 0.0
    assert hc.hc_realised_restitution(0.0) == 1.0
    for e in (0.01, 0.1, 0.3, 0.7, 0.99, 0.999999):
        assert hc.hc_realised_restitution(hc.hc_u_exact(e)) == pytest.approx(e, rel=1e-9)


@pytest.mark.parametrize("law, realised", [
    ("exact", {0.1: 0.1, 0.5: 0.5, 0.8: 0.8}),
    ("lankarani_nikravesh", {0.1: 0.665, 0.5: 0.725, 0.8: 0.847}),
    ("flores", {0.1: 0.069, 0.5: 0.470, 0.8: 0.789}),
    ("hunt_crossley_1971", {0.1: 0.516, 0.5: 0.663, 0.8: 0.833}),
])
def test_hc_laws_realised_restitution(law, realised):
    for e, expect in realised.items():
        u = hc.hc_alpha(law, e, 2.0) * 2.0
        assert hc.hc_realised_restitution(u) == pytest.approx(expect, abs=6e-4)


@pytest.mark.parametrize("n, k, m, v0", [(1.5, 1.4e8, 1.0, V0), (1.0, 1e6, 0.3, 1.0), (1.5, 3e9, 12.5, 0.05)])
@pytest.mark.parametrize("law", hc.HC_LAWS)
def test_hc_integration_realises_the_law(law, n, k, m, v0):
    model = hc.HuntCrossley(k, 0.5, n, law)
    phase = hc.hc_integrate(model, model.alpha(v0), m, 0.0, v0, 0.0, 1.0)
    assert phase.reason == "exit"
    expect = hc.hc_realised_restitution(model.alpha(v0) * v0)
    assert -phase.v / v0 == pytest.approx(expect, rel=1e-8)
    if law == "lankarani_nikravesh":
        assert -phase.v / v0 == pytest.approx(0.725, abs=6e-4)
    if law == "exact":
        assert -phase.v / v0 == pytest.approx(0.5, rel=1e-8)


def test_hertz_elastic_oracles():
    model = hc.HuntCrossley(K, 1.0, 1.5)
    phase = hc.hc_integrate(model, 0.0, M, 0.0, V0, 0.0, 1.0)
    assert phase.max_penetration * 1e3 == pytest.approx(1.98332, abs=1e-5)
    assert hc.hertz_max_penetration(M, K, V0) * 1e3 == pytest.approx(1.98332, abs=1e-5)
    assert phase.t_end * 1e3 == pytest.approx(1.3179, abs=1e-4)
    assert phase.t_end * V0 / phase.max_penetration == pytest.approx(2.9433, abs=1e-4)
    assert hc.hertz_contact_time(M, K, V0) == pytest.approx(phase.t_end, rel=1e-8)
    assert -phase.v / V0 == pytest.approx(1.0, rel=1e-9)  # position-only force: e = 1 (Engelson 4.4)
    # peak force of the elastic impact: K d_max^1.5
    assert phase.peak_force == pytest.approx(K * phase.max_penetration**1.5, rel=1e-9)


def test_hc_input_errors():
    with pytest.raises(InputError, match="law"):
        hc.HuntCrossley(K, 0.5, law="bogus")
    with pytest.raises(InputError, match="impact speed"):
        hc.hc_alpha("exact", 0.5, 0.0)


def test_two_body_effective_mass():
    assert c.two_body_effective_mass(1.0, 1.0) == 0.5
    assert c.two_body_effective_mass(2.0, None) == 2.0
    assert c.two_body_effective_mass(1.0, 10.0) == pytest.approx(0.909090909, rel=1e-8)


# ---- tangential grinding force ------------------------------------------------------------------


def test_friction_bounded_and_opposes_sliding():
    rng = np.random.default_rng(3)
    for _ in range(200):
        v = rng.normal(size=3) * 10 ** rng.uniform(-6, 1)
        fn = rng.uniform(0, 100)
        mu = rng.uniform(0, 1)
        ft = c.regularised_coulomb(v, fn, mu, v_reg=1e-3)
        assert np.linalg.norm(ft) <= mu * fn * (1 + 1e-12)
        assert np.dot(ft, v) <= 0.0
        if np.linalg.norm(v) > 0.1:
            assert np.linalg.norm(ft) == pytest.approx(mu * fn, rel=1e-4)
            assert np.allclose(np.cross(ft, v), 0.0, atol=1e-9 * fn)
    # negative normal force (separated) gives no friction
    assert np.all(c.regularised_coulomb([1.0, 0, 0], -5.0, 0.5) == 0.0)


def test_friction_continuous_at_zero_speed():
    vs = np.linspace(-1e-5, 1e-5, 2001)
    ft = c.regularised_coulomb(vs, 10.0, 0.3, v_reg=1e-3)
    assert ft[1000] == 0.0
    assert np.max(np.abs(np.diff(ft))) < 1e-4  # no jump
    assert np.all(np.sign(ft[vs != 0]) == -np.sign(vs[vs != 0]))


def test_sliding_block_oracle():
    mu, v0, m = 0.3, 2.0, 1.0

    def rhs(_t, y):
        return [y[1], float(c.regularised_coulomb(y[1], m * G, mu, v_reg=1e-5)) / m]

    def stopped(_t, y):
        return y[1] - 1e-4
    stopped.terminal = True
    sol = solve_ivp(rhs, (0, 2), [0.0, v0], method="LSODA", rtol=1e-10, atol=1e-12, events=[stopped])
    assert sol.t_events[0][0] == pytest.approx(0.680, abs=1e-3)
    assert sol.y_events[0][0][0] == pytest.approx(0.680, abs=1e-3)
    assert v0 / (mu * G) == pytest.approx(0.680, abs=1e-3)


def test_abrasive_sliding_velocity_and_grinding_ratio():
    # spindle about z at 1000 rad/s, tool radius 0.02 m, contact point at -z... use offset along -y
    w = np.array([0.0, 0.0, 1000.0])
    r = np.array([0.0, -0.02, 0.0])
    feed = np.array([0.0, 0.0, 0.01])
    v = c.abrasive_sliding_velocity(w, r, feed)
    assert np.allclose(v, [20.0, 0.0, 0.01])
    vt = c.abrasive_sliding_velocity(w, r, feed, normal=[0, 0, 1])
    assert np.allclose(vt, [20.0, 0.0, 0.0])
    ft = c.grinding_tangential_force(vt, 10.0, 0.4)
    assert np.allclose(ft, [-4.0, 0.0, 0.0], rtol=1e-6)
    with pytest.raises(InputError):
        c.abrasive_sliding_velocity(w, r, feed, normal=[0, 0, 0])


def test_spherical_patch():
    a, p = c.spherical_patch(0.02, 1e-4, 10.0)
    assert a == pytest.approx(math.sqrt(2 * 0.02 * 1e-4))
    assert p == pytest.approx(10.0 / (math.pi * a * a))
    a_exact, _ = c.spherical_patch(0.02, 1e-4, 10.0, exact=True)
    assert a_exact == pytest.approx(math.sqrt(2 * 0.02 * 1e-4 - 1e-8))
    # the cap radius is the distance from the axis to the sphere at height R - d
    assert a_exact == pytest.approx(math.sqrt(0.02**2 - (0.02 - 1e-4) ** 2), rel=1e-12)
    assert c.spherical_patch(0.02, 0.0) == (0.0, 0.0)
    with pytest.raises(InputError, match="depth"):
        c.spherical_patch(0.02, -1e-3)

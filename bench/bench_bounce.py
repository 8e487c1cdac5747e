"""Bouncing-ball benchmark: our variable-step engine beside MuJoCo and PyBullet, in one run.

The paper's ball (section 4.1, Table 1): sphere 1 kg, radius 0.1 m, released at rest with its
lowest point 1.0 m above a rigid plane, g = 9.81 m/s^2, K = 1.4e8 N/m, c_r = 1 (D = 0). The outer
step is scanned from 1/32 ms, doubling. A step is *stable* when the ball never tunnels (its centre
stays above the plane) and the apex after the third bounce is within 5 % of the expected height
(c_r^6 x 1.0 m). Apex heights are measured the same way for every engine, from the sampled states
in free flight: gap + v^2 / (2 g) (exact for ballistic flight, so the sampling rate does not bias
it). Prints, per engine, the largest stable step and the wall time per simulated second.

Parameter mapping (see docs/contact.md):
- ours: KelvinVoigt(K, c_r), effective mass = ball mass.
- MuJoCo: a slide joint along z; solref = (-K/m, -D/m) (negative solref = direct stiffness and
  damping, which MuJoCo applies as accelerations, i.e. per unit effective mass), the same on both
  geoms (MuJoCo mixes the two geoms' parameters), solimp = (0.9999, 0.9999, 0.001, 0.5, 2) so the
  impedance is constant and close to 1, condim 1 (frictionless), Euler integrator.
- PyBullet ("pybullet"): contactStiffness = K, contactDamping = D on both bodies (Bullet turns
  them into ERP = dt K/(dt K + D) and CFM = 1/(dt K + D): an implicit spring, mass-free, direct
  for m = 1 kg), restitution 0, no linear/angular damping, frictionless, sleeping disabled.
- PyBullet ("pybullet_restitution"): rigid contact with Bullet's restitution = c_r (velocity
  threshold 0), the engine's native way to request a coefficient of restitution.

Usage: .venv/bin/python bench/bench_bounce.py [--cr 1.0] [--max-dt-ms 1024] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable

import numpy as np

M, R, H, G, K = 1.0, 0.1, 1.0, 9.81, 1.4e8


def _damping(cr: float) -> float:
    from robot_grinding_sim.core.contact.kelvin_voigt import kv_damping_clamped

    return kv_damping_clamped(cr, K, M)


Run = tuple[np.ndarray, np.ndarray, np.ndarray, bool, float]  # t, gap, v, no failure flagged, wall (s)


def run_ours(dt: float, duration: float, cr: float) -> Run:
    from robot_grinding_sim.core.contact.engine import NormalContactEngine
    from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt

    eng = NormalContactEngine(KelvinVoigt(K, cr), M, -M * G, H, 0.0)
    w0 = time.perf_counter()
    res = eng.run(duration, dt)
    return res.t, res.x, res.v, True, time.perf_counter() - w0


def run_mujoco(dt: float, duration: float, cr: float) -> Run:
    import mujoco

    k, d = K / M, _damping(cr) / M
    sol = f'solref="{-k!r} {-d!r}" solimp="0.9999 0.9999 0.001 0.5 2" condim="1"'
    xml = f"""<mujoco><option timestep="{dt!r}" gravity="0 0 {-G}" integrator="Euler"/>
<worldbody><geom name="floor" type="plane" size="5 5 0.1" {sol}/>
<body name="ball" pos="0 0 {R + H}"><joint name="z" type="slide" axis="0 0 1"/>
<geom type="sphere" size="{R}" mass="{M}" {sol}/></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    n = int(math.ceil(duration / dt - 1e-9))
    z = np.empty(n + 1)
    v = np.empty(n + 1)
    z[0], v[0] = data.qpos[0], data.qvel[0]
    w0 = time.perf_counter()
    for i in range(1, n + 1):
        mujoco.mj_step(model, data)
        z[i], v[i] = data.qpos[0], data.qvel[0]
    wall = time.perf_counter() - w0
    # MuJoCo resets the state when accelerations blow up: that is a failure, not a bounce
    ok = int(data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number) == 0
    return np.arange(n + 1) * dt, H + z, v, ok, wall  # gap = slide displacement + initial gap


def run_pybullet(dt: float, duration: float, cr: float, compliant: bool = True) -> Run:
    """PyBullet ball; ``compliant``: contactStiffness/contactDamping = (K, D), else a rigid contact
    with Bullet's own restitution = c_r (its native way to ask for a coefficient of restitution)."""
    import pybullet as p

    cid = p.connect(p.DIRECT)
    try:
        p.setGravity(0, 0, -G, physicsClientId=cid)
        p.setTimeStep(dt, physicsClientId=cid)
        plane = p.createMultiBody(0, p.createCollisionShape(p.GEOM_PLANE, physicsClientId=cid),
                                  physicsClientId=cid)
        ball = p.createMultiBody(M, p.createCollisionShape(p.GEOM_SPHERE, radius=R, physicsClientId=cid),
                                 basePosition=[0, 0, R + H], physicsClientId=cid)
        p.setPhysicsEngineParameter(restitutionVelocityThreshold=0.0, physicsClientId=cid)
        contact = {"contactStiffness": K, "contactDamping": _damping(cr), "restitution": 0.0} if compliant \
            else {"restitution": cr}
        for body in (plane, ball):
            p.changeDynamics(body, -1, lateralFriction=0.0, spinningFriction=0.0, rollingFriction=0.0,
                             linearDamping=0.0, angularDamping=0.0,
                             activationState=p.ACTIVATION_STATE_DISABLE_SLEEPING, physicsClientId=cid,
                             **contact)
        n = int(math.ceil(duration / dt - 1e-9))
        z = np.empty(n + 1)
        v = np.empty(n + 1)
        z[0], v[0] = R + H, 0.0
        w0 = time.perf_counter()
        for i in range(1, n + 1):
            p.stepSimulation(physicsClientId=cid)
            z[i] = p.getBasePositionAndOrientation(ball, physicsClientId=cid)[0][2]
            v[i] = p.getBaseVelocity(ball, physicsClientId=cid)[0][2]
        wall = time.perf_counter() - w0
    finally:
        p.disconnect(cid)
    return np.arange(n + 1) * dt, z - R, v, True, wall  # gap = centre height - radius


def assess(gap: np.ndarray, v: np.ndarray, cr: float, ok: bool) -> dict[str, object]:
    """Stable = no tunnelling and the third apex within 5 % of c_r^6 H."""
    expected = cr**6 * H
    finite = bool(np.all(np.isfinite(gap)) and np.all(np.isfinite(v)))
    out: dict[str, object] = {"apex3": None, "stable": False, "why": ""}
    if not (ok and finite):
        out["why"] = "blew up"
        return out
    if gap.min() < -R:
        out["why"] = f"tunnelled (gap {gap.min():.3g} m)"
        return out
    bounces = np.nonzero((v[:-1] <= 0.0) & (v[1:] > 0.0))[0] + 1
    gain = float(np.max(G * gap + 0.5 * v * v) / (G * H))  # mechanical energy / initial
    if bounces.size < 3:
        out["why"] = f"{bounces.size} bounces" + (f", energy x{gain:.3g}" if gain > 1.05 else "")
        return out
    j0 = bounces[2]
    j1 = bounces[3] if bounces.size > 3 else gap.size
    sel = np.arange(j0, j1)
    sel = sel[gap[sel] >= 0.0]
    if sel.size == 0:
        out["why"] = "no free flight sampled"
        return out
    apex = float(np.median(gap[sel] + v[sel] ** 2 / (2 * G)))
    out["apex3"] = apex
    out["stable"] = abs(apex - expected) <= 0.05 * expected
    if not out["stable"]:
        out["why"] = f"apex {apex:.3f} m"
    return out


ENGINES: dict[str, Callable[[float, float, float], Run]] = {
    "ours": run_ours,
    "mujoco": run_mujoco,
    "pybullet": run_pybullet,
    "pybullet_restitution": lambda dt, duration, cr: run_pybullet(dt, duration, cr, compliant=False),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cr", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=3.3, help="simulated time (s): covers the third apex")
    ap.add_argument("--max-dt-ms", type=float, default=1024.0)
    ap.add_argument("--engines", default="ours,mujoco,pybullet,pybullet_restitution")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    names = [n for n in args.engines.split(",") if n]
    dts = []
    dt = 1e-3 / 32
    while dt <= args.max_dt_ms * 1e-3 * (1 + 1e-9):
        dts.append(dt)
        dt *= 2
    rows = []
    for dt in dts:
        row: dict[str, object] = {"dt_ms": dt * 1e3}
        for name in names:
            # the stepping loop only (set-up excluded); short runs are repeated (best of up to 5,
            # within ~0.3 s) so that timer noise on a busy machine does not dominate the figure
            walls: list[float] = []
            while not walls or (len(walls) < 5 and sum(walls) < 0.3):
                t, gap, v, ok, w = ENGINES[name](dt, args.duration, args.cr)
                walls.append(w)
            wall = min(walls)
            res = assess(gap, v, args.cr, ok)
            res["wall_per_sim_s"] = wall / args.duration
            row[name] = res
        rows.append(row)
        if not args.json:
            cells = []
            for name in names:
                r = row[name]
                apex = f"{r['apex3']:.4f}" if r["apex3"] is not None else "-"
                cells.append(f"{name}: {'ok ' if r['stable'] else 'BAD'} apex {apex:>7} "
                             f"{r['wall_per_sim_s'] * 1e3:9.2f} ms/s {r['why']}")
            print(f"dt {dt * 1e3:9.5f} ms | " + " | ".join(cells), flush=True)
    summary = {}
    for name in names:
        stable = [r["dt_ms"] for r in rows if r[name]["stable"]]
        largest = max(stable) if stable else None
        # the largest step below which every scanned step is stable
        contiguous = None
        for r in rows:
            if not r[name]["stable"]:
                break
            contiguous = r["dt_ms"]
        at = next((r[name] for r in rows if r["dt_ms"] == largest), None)
        at1 = next((r[name] for r in rows if abs(r["dt_ms"] - 1.0) < 1e-9), None)
        summary[name] = {"largest_stable_dt_ms": largest, "all_stable_up_to_ms": contiguous,
                         "wall_per_sim_s_at_largest": at["wall_per_sim_s"] if at else None,
                         "wall_per_sim_s_at_1ms": at1["wall_per_sim_s"] if at1 else None}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=2))
        return 0
    print()
    print(f"c_r = {args.cr}, {args.duration} s simulated per run; stable = no tunnelling and the third "
          f"apex within 5 % of {args.cr ** 6:.4f} m; scan {dts[0] * 1e3:g} ... {dts[-1] * 1e3:g} ms "
          f"(a largest stable step equal to the scan's end means 'at least')")
    print(f"{'engine':<10} {'largest stable step':>20} {'all stable up to':>17} {'wall/sim s at it':>17} "
          f"{'wall/sim s at 1 ms':>19}")
    for name, s in summary.items():
        def fmt(x: object, unit: str, scale: float = 1.0) -> str:
            return "-" if x is None else f"{x * scale:.5g} {unit}"  # type: ignore[operator]
        print(f"{name:<10} {fmt(s['largest_stable_dt_ms'], 'ms'):>20} "
              f"{fmt(s['all_stable_up_to_ms'], 'ms'):>17} "
              f"{fmt(s['wall_per_sim_s_at_largest'], 'ms', 1e3):>17} "
              f"{fmt(s['wall_per_sim_s_at_1ms'], 'ms', 1e3):>19}")
    if "ours" in summary:
        ours = summary["ours"]
        for name in names:
            if name == "ours":
                continue
            s = summary[name]
            if s["largest_stable_dt_ms"] and ours["largest_stable_dt_ms"]:
                print(f"ratio largest stable step ours/{name}: "
                      f"{ours['largest_stable_dt_ms'] / s['largest_stable_dt_ms']:.4g}")
            if s["wall_per_sim_s_at_largest"] and ours["wall_per_sim_s_at_largest"]:
                print(f"ratio wall per simulated s, each at its largest stable step, {name}/ours: "
                      f"{s['wall_per_sim_s_at_largest'] / ours['wall_per_sim_s_at_largest']:.4g}")
            if s["wall_per_sim_s_at_1ms"] and ours["wall_per_sim_s_at_1ms"]:
                print(f"ratio wall per simulated s at 1 ms, {name}/ours: "
                      f"{s['wall_per_sim_s_at_1ms'] / ours['wall_per_sim_s_at_1ms']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

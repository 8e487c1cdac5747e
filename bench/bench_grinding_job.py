"""Benchmark: the demo grinding job in one process, force output at 1 kHz, real-time factor.

The job is ``grinding demo``'s as it was before the depth plan (``demo_config(3, **FORCE_ONLY)``:
curved panel, 3 passes of 30 mm, UR10e with the ball tool, Kelvin-Voigt K = 1e5 N/m, c_r = 0.5). For
each step length the final run (approach, dwell, pass, retreat, links; every step: collision on the
exact CAD surface, effective mass, closed-form normal contact, tangential force, computed-torque
arm, forward dynamics) is timed; the force is output every 1 ms whatever the step (samples inside a
step come from the closed form). Printed: simulated time / wall time (real-time factor, DESIGN
target >= 10x), microseconds per step, and the mean force per pass against the 1 ms run (the larger
steps must give the same answer). The whole demo (with its force-target optimisation) is timed once
at the default step. Run: ``.venv/bin/python bench/bench_grinding_job.py [--dts 0.001,0.002]
[--profile] [--set KEY=VALUE ...]`` (``--set contact.model=hunt_crossley --set
contact.stiffness=2e7``: the same job with another cell value).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import pstats
import time

import numpy as np

from robot_grinding_sim.cli.demo import FORCE_ONLY, demo_config
from robot_grinding_sim.core.job.run import run_job
from robot_grinding_sim.core.job.setup import setup_job


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dts", default="0.001,0.002,0.003", help="step lengths to time, s (comma separated)")
    ap.add_argument("--profile", action="store_true", help="cProfile the 1 ms final run (top 20 by own time)")
    ap.add_argument("--skip-demo", action="store_true", help="do not time the whole demo with optimisation")
    ap.add_argument("--repeats", type=int, default=3, help="runs per step length; best and median are printed")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a cell value for the job (e.g. contact.model=hunt_crossley); repeatable")
    args = ap.parse_args()
    dts = [float(x) for x in args.dts.split(",")]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    cfg = dataclasses.replace(demo_config(3, **FORCE_ONLY), optimise=False)  # the figures' job (3 passes)
    if args.set:
        values = {}
        for item in args.set:
            key, _, value = item.partition("=")
            try:
                values[key] = float(value)
            except ValueError:
                values[key] = value
        cfg = dataclasses.replace(cfg, cell=cfg.cell.replace(**values))
        print("cell values: " + ", ".join(f"{k} = {v}" for k, v in values.items()))
    base = setup_job(cfg)
    print(f"setup (load, plan, scene): {sum(base.timings.values()):.2f} s; {len(base.paths.passes)} passes; "
          f"exact CAD surface: {base.exact_surface}")
    # warm-up: JIT of every kernel, first-call costs
    run_job(base.cfg, base)
    ref = None
    print(f"{'step ms':>8} {'steps':>7} {'sim s':>7} {'wall s':>7} {'x real time best (median)':>26} "
          f"{'us/step':>8} {'samples':>8}  mean force per pass [N] (vs 1 ms)   load   engine steps")
    for dt in dts:
        cfg = dataclasses.replace(base.cfg, cell=base.cell.replace(**{"sim.dt": dt}))
        setup = dataclasses.replace(base, cfg=cfg)
        walls = []
        for _ in range(max(1, args.repeats)):
            res = run_job(setup.cfg, setup)
            walls.append(res.run.wall_time_s)
        best, med = min(walls), float(np.median(walls))
        means = np.array([p.mean for p in res.passes])
        ref = means if ref is None else ref
        dev = (means - ref) / ref
        sim_s, steps = res.run.simulated_s, res.run.steps
        rtf = f"{sim_s / best:.2f} ({sim_s / med:.2f})"
        print(f"{dt * 1e3:>8.3g} {steps:>7} {sim_s:>7.2f} {best:>7.2f} {rtf:>26} "
              f"{best / steps * 1e6:>8.1f} {len(res.record['t']):>8}  "
              + " ".join(f"{m:.3f} ({d:+.2%})" for m, d in zip(means, dev, strict=True))
              + f"   {os.getloadavg()[0]:.1f}   engine steps {res.run.event_steps}")
    if args.profile:
        pr = cProfile.Profile()
        pr.enable()
        run_job(base.cfg, base)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(20)
    if not args.skip_demo:
        t0 = time.perf_counter()
        cfg = dataclasses.replace(base.cfg, optimise=True)
        res = run_job(cfg, dataclasses.replace(base, cfg=cfg))
        wall = time.perf_counter() - t0
        s = res.summary()
        o = s["optimisation"]
        print(f"whole demo job with optimisation (1 ms): {wall:.1f} s wall (optimisation {o['wall_time_s']:.1f} s "
              f"for {o['simulated_s']:.1f} s simulated, {sum(o['iterations'])} pass runs; "
              f"final run {s['wall_time_s']:.1f} s); pass means "
              + ", ".join(f"{p['mean_n']:.9f}" for p in s["passes"]))


if __name__ == "__main__":
    main()

"""Benchmark: ``grinding plan`` with the force-target optimisation on a freeform face of a file, one core.

The face is written here like a third-party part: an OpenCascade B-spline surface fitted through
a 21 x 21 grid of points (``GeomAPI_PointsToBSplineSurface``, so its knots are not the uniform ones
of the built-in parts) of a cambered, twisted blade-like sheet, 100 x 100 mm (about 10,000 mm^2),
written to a STEP file in mm. ``grinding plan FILE --face 0`` then plans it with the cell's
defaults (geodesic passes, stepover 5 mm: 20 passes), the job trajectory and the optimisation,
in this process, one core, no workers.

Printed: the load average, the face's area, the pass count, the wall and CPU time (user + system
of this process: on a shared machine the wall time moves with the load, the CPU time much less) of
the command and (``--profile``) the cProfile table of its largest costs, timed in CPU seconds.
``--workers 1,2`` runs the command with each ``--workers`` in turn (alternating over ``--repeat``;
the optimisation's passes on local processes, issue 27 item 3) and prints the ratio,
with a check that the plans are equal.

Run: ``.venv/bin/python bench/bench_plan_freeform.py [--profile] [--repeat N] [--workers 1,2]``
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import tempfile
import time
from pathlib import Path


def write_blade(path: Path) -> tuple[Path, float]:
    """The fitted face (:func:`~robot_grinding_sim.core.geometry.parts.fitted_blade_face`) as STEP (mm)
    at ``path``; returns (path, area m^2)."""
    from robot_grinding_sim.core.geometry.parts import fitted_blade_face

    part = fitted_blade_face()
    part.write(path, unit="mm")
    return path, float(part.faces[0].area)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="print the cProfile table (cumulative)")
    ap.add_argument("--repeat", type=int, default=1, help="runs (the best is printed)")
    ap.add_argument("--top", type=int, default=40, help="rows of the profile")
    ap.add_argument("--set", action="append", default=[], help="extra --set NAME=VALUE for grinding plan")
    ap.add_argument("--save", type=Path, help="write the (first) plan.json here, to compare plans of two trees")
    ap.add_argument("--workers", default="1", help="comma-separated --workers values to compare, e.g. 1,2")
    args = ap.parse_args()
    from robot_grinding_sim.cli import main as grinding

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        step, area = write_blade(Path(tmp) / "blade.step")
        # 20 passes: stepover 4.5 mm over the face less its 5 mm margins
        base = ["plan", str(step), "--face", "0", "--stepover", "0.0045", "--json"]
        for s in args.set:
            base += ["--set", s]
        counts = [int(w) for w in args.workers.split(",")]
        walls: dict[int, list[float]] = {w: [] for w in counts}
        cpus: dict[int, list[float]] = {w: [] for w in counts}
        plans: dict[int, dict] = {}
        prof = None
        for _ in range(args.repeat):
            for w in counts:
                out_file = Path(tmp, f"plan_{w}.json")
                argv = [*base, "--out", str(out_file)] + (["--workers", str(w)] if counts != [1] else [])
                prof = cProfile.Profile(time.process_time) if args.profile else None
                t0, c0 = time.perf_counter(), cpu_seconds()
                with contextlib.redirect_stdout(io.StringIO()):
                    if prof:
                        prof.enable()
                    rc = grinding(argv)
                    if prof:
                        prof.disable()
                walls[w].append(time.perf_counter() - t0)
                cpus[w].append(cpu_seconds() - c0)  # with --workers > 1 the workers' CPU is not counted
                if rc:
                    raise SystemExit(f"grinding plan failed ({rc})")
                plans[w] = json.loads(out_file.read_text())
    plan = plans[counts[0]]
    if args.save:
        args.save.write_text(json.dumps(plan))
    ft = plan.get("force_target") or {}
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"freeform blade face {area * 1e6:.0f} mm^2, {len(plan.get('passes', []))} passes, "
          f"{sum(ft.get('iterations') or [])} pass simulations in the optimisation")
    for w in counts:
        runs = ", ".join(f"{x:.1f}" for x in walls[w])
        cpu = ", ".join(f"{x:.1f}" for x in cpus[w])
        print(f"grinding plan --workers {w}: best {min(walls[w]):.1f} s wall ({runs}); "
              f"best {min(cpus[w]):.1f} s CPU of this process ({cpu})")
    if len(counts) > 1:
        a, b = counts[0], counts[-1]
        same = plans[a].get("force_target") == plans[b].get("force_target")
        print(f"ratio --workers {a} / --workers {b}: {min(walls[a]) / min(walls[b]):.2f}x; "
              f"offsets and predicted forces identical: {same}")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(args.top)
        print(s.getvalue())
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
        print(s.getvalue())


if __name__ == "__main__":
    main()

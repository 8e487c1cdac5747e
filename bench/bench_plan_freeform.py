"""Benchmark: ``grinding plan`` with the force-target optimisation on a freeform face of a file, one core.

The face is written here like a third-party part: an OpenCascade B-spline surface fitted through
a 21 x 21 grid of points (``GeomAPI_PointsToBSplineSurface``, so its knots are not the uniform ones
of the built-in parts) of a cambered, twisted blade-like sheet, 100 x 100 mm (about 10,000 mm^2),
written to a STEP file in mm. ``grinding plan FILE --face 0`` then plans it with the cell's
defaults (geodesic passes, stepover 5 mm: 20 passes), the job trajectory and the optimisation,
in this process, one core, no workers.

Printed: the load average, the face's area, the pass count, the wall time of the command and
(``--profile``) the cProfile table of its largest cumulative costs.

Run: ``.venv/bin/python bench/bench_plan_freeform.py [--profile] [--repeat N]``
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np


def blade_points(n: int = 21, size: float = 0.1) -> np.ndarray:
    """(n, n, 3) m: a cambered (8 mm), twisted (+-6 deg over the span) sheet of size x size m."""
    s = np.linspace(-0.5 * size, 0.5 * size, n)
    X, Y = np.meshgrid(s, s, indexing="ij")
    camber = 0.008 * (1.0 - (2.0 * X / size) ** 2)
    twist = np.radians(6.0) * (2.0 * Y / size)
    Z = camber + X * np.tan(twist) * 0.5 + 0.002 * np.sin(3.0 * np.pi * Y / size)
    return np.stack([X, Y, Z], axis=-1)


def write_blade(path: Path) -> tuple[Path, float]:
    """The fitted face as STEP (mm) at ``path``; returns (path, area m^2)."""
    from robot_grinding_sim.core.geometry.cad import CadPart
    from robot_grinding_sim.core.geometry.occ_adapter import occ, occ_class, occ_collection

    P = blade_points()
    n = P.shape[0]
    arr = occ_collection("Array2_gp_Pnt")(1, n, 1, n)
    gp = occ("gp")
    for i in range(n):
        for j in range(n):
            arr.SetValue(i + 1, j + 1, gp.gp_Pnt(*map(float, P[i, j])))
    fit = occ_class("GeomAPI", "GeomAPI_PointsToBSplineSurface")(arr, 3, 8, occ("GeomAbs").GeomAbs_C2, 1e-6)
    face = occ_class("BRepBuilderAPI", "BRepBuilderAPI_MakeFace")(fit.Surface(), 1e-9).Face()
    part = CadPart(face, source="blade")
    part.write(path, unit="mm")
    return path, float(part.faces[0].area)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="store_true", help="print the cProfile table (cumulative)")
    ap.add_argument("--repeat", type=int, default=1, help="runs (the best is printed)")
    ap.add_argument("--top", type=int, default=40, help="rows of the profile")
    ap.add_argument("--set", action="append", default=[], help="extra --set NAME=VALUE for grinding plan")
    args = ap.parse_args()
    from robot_grinding_sim.cli import main as grinding

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        step, area = write_blade(Path(tmp) / "blade.step")
        argv = ["plan", str(step), "--face", "0", "--out", str(Path(tmp) / "plan.json"), "--json"]
        for s in args.set:
            argv += ["--set", s]
        # once untimed: numba's kernels from the cache, OpenCascade's and the modules' imports
        walls = []
        for _ in range(args.repeat):
            prof = cProfile.Profile() if args.profile else None
            out = io.StringIO()
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(out):
                if prof:
                    prof.enable()
                rc = grinding(argv)
                if prof:
                    prof.disable()
            walls.append(time.perf_counter() - t0)
            if rc:
                raise SystemExit(f"grinding plan failed ({rc})")
        plan = json.loads(Path(tmp, "plan.json").read_text())
    passes = plan.get("passes", [])
    opt = plan.get("optimisation") or {}
    print(f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"freeform blade face {area * 1e6:.0f} mm^2, {len(passes)} passes; grinding plan with the optimisation: "
          f"best {min(walls):.1f} s wall of {len(walls)} ({', '.join(f'{w:.1f}' for w in walls)}); "
          f"optimisation {opt.get('wall_time_s', float('nan')):.1f} s")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(args.top)
        print(s.getvalue())
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
        print(s.getvalue())


if __name__ == "__main__":
    main()

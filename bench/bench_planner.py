"""Planner benchmark: passes on a 200 x 200 mm freeform B-spline face at 1 mm stepover and spacing.

Ours: :func:`robot_grinding_sim.core.planning.passes.generate_passes` on the exact surface (geodesic,
raster and iso generators), margin 2 mm; for the geodesic generator also its own coverage figure.
Timed after one warm-up call (numba kernels are compiled once and cached on disk); the figure is
the median of ``--repeat`` runs, wall clock and process CPU time.

Peer, in the same run: the mesh pipeline that mesh planners (noether's plane slicer) use:
tessellate the face (OpenCascade, 0.01 mm deflection) and slice the mesh with the same planes
(``trimesh.intersections.mesh_multiplane``), chaining segments into polylines and resampling
them at 1 mm. Its time excludes the tessellation (reported apart). Both results are then checked
against the exact surface with OpenCascade's projection: the distance of sampled waypoints from
the surface and the angle of their normals.

Usage: .venv/bin/python bench/bench_planner.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

SIZE, STEP, MARGIN = 0.2, 0.001, 0.002


def _timed(fn, repeat: int) -> tuple[float, float, object]:
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus), out


def _check(face, points: np.ndarray, normals: np.ndarray, n: int = 400) -> tuple[float, float]:
    pick = np.unique(np.linspace(0, len(points) - 1, n).astype(int))
    uv, _, dist = face.project(points[pick])
    worst_angle = 0.0
    for k, i in enumerate(pick[:100]):
        _, n_exact = face.occ_point_normal(*uv[k])
        c = np.clip(abs(float(np.dot(n_exact, normals[i]))), -1.0, 1.0)
        worst_angle = max(worst_angle, float(np.degrees(np.arctan2(np.linalg.norm(np.cross(n_exact, normals[i])), c))))
    return float(np.nanmax(dist)), worst_angle


def _peer(mesh, d: np.ndarray, side: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import trimesh

    lines, to_3d, faces = trimesh.intersections.mesh_multiplane(mesh, np.zeros(3), side, offsets)
    pts_all, nrm_all = [], []
    for segs2, T, fidx in zip(lines, to_3d, faces, strict=True):
        if len(segs2) == 0:
            continue
        flat = segs2.reshape(-1, 2)
        segs = (flat @ T[:3, :2].T + T[:3, 3]).reshape(-1, 2, 3)
        # order the segments along the raster direction (a height field: one chain per plane)
        mid = segs.mean(axis=1) @ d
        order = np.argsort(mid)
        segs, fidx = segs[order], fidx[order]
        a = segs[:, 0] @ d > segs[:, 1] @ d
        segs[a] = segs[a][:, ::-1]
        chain = np.vstack([segs[:, 0], segs[-1:, 1]])
        chord = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(chain, axis=0), axis=1))]
        keep = (chord >= MARGIN) & (chord <= chord[-1] - MARGIN)
        targets = np.arange(chord[keep][0], chord[keep][-1], STEP)
        pts = np.column_stack([np.interp(targets, chord, chain[:, k]) for k in range(3)])
        seg_of = np.clip(np.searchsorted(chord, targets) - 1, 0, len(fidx) - 1)
        pts_all.append(pts)
        nrm_all.append(mesh.face_normals[fidx[seg_of]])
    return np.vstack(pts_all), np.vstack(nrm_all)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from robot_grinding_sim.core.geometry.parts import freeform_face
    from robot_grinding_sim.core.planning.passes import PassGenerator, PassParameters, generate_passes

    part = freeform_face(SIZE)
    face = part.face(0)
    results = {}
    for gen in ("geodesic", "raster", "iso"):
        params = PassParameters(stepover=STEP, spacing=STEP, margin=MARGIN, generator=gen)
        generate_passes(part, [0], params)  # warm-up: numba cache, OpenCascade wires

        def run(params: PassParameters = params) -> PassGenerator:
            g = PassGenerator(part, [0], params)
            g.passes = g.generate()
            return g

        wall, cpu, g = _timed(run, args.repeat)
        passes = g.passes
        pts = np.vstack([p.points for p in passes])
        nrm = np.vstack([p.normals for p in passes])
        err, ang = _check(face, pts, nrm)
        results[gen] = {"wall_s": wall, "cpu_s": cpu, "passes": len(passes), "waypoints": len(pts),
                        "max_surface_error_m": err, "max_normal_error_deg": ang}
        if g.coverage is not None:
            results[gen]["coverage"] = g.coverage.coverage

    # peer: the mesh pipeline with the same planes
    gen = PassGenerator(part, [0], PassParameters(stepover=STEP, spacing=STEP, margin=MARGIN))
    d, side = gen.raster_frame()
    lo, hi = gen.extent(side)
    offsets = np.arange(lo + MARGIN, hi - MARGIN, STEP)
    w0 = time.perf_counter()
    mesh = part.tessellate(deflection=1e-5, angular=0.1)
    tess = time.perf_counter() - w0
    _peer(mesh, d, side, offsets[:5])
    wall, cpu, (ppts, pnrm) = _timed(lambda: _peer(mesh, d, side, offsets), args.repeat)
    err, ang = _check(face, ppts, pnrm)
    results["peer_mesh_slicer"] = {"wall_s": wall, "cpu_s": cpu, "tessellation_s": tess, "triangles": len(mesh.faces),
                                   "waypoints": len(ppts), "max_surface_error_m": err, "max_normal_error_deg": ang}
    ours = results["geodesic"]["wall_s"]
    results["ratio_raster_vs_peer"] = results["raster"]["wall_s"] / results["peer_mesh_slicer"]["wall_s"]
    results["target_s"] = 2.0
    results["load_average_1min"] = os.getloadavg()[0]
    results["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"200 x 200 mm freeform B-spline face, stepover = spacing = 1 mm, margin 2 mm (median of {args.repeat}; "
          f"load average {results['load_average_1min']:.1f} on {results['cpus']} CPUs)")
    for name, r in results.items():
        if not isinstance(r, dict):
            continue
        extra = ""
        if "tessellation_s" in r:
            extra = f", tessellation {r['tessellation_s']:.2f} s ({r['triangles']} triangles)"
        if "coverage" in r:
            extra += f", coverage {r['coverage'] * 100:.2f} % (own mesh)"
        print(f"  {name:17s} {r['wall_s']:6.3f} s wall, {r['cpu_s']:6.3f} s CPU, {r['waypoints']} waypoints; "
              f"surface error {r['max_surface_error_m']:.2e} m, "
              f"normal error {r['max_normal_error_deg']:.2e} deg{extra}")
    print(f"  ratio ours (raster) / mesh slicer: {results['ratio_raster_vs_peer']:.2f}x; target < 2 s (geodesic, "
          f"the default): {'met' if ours < 2.0 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

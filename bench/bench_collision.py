"""Benchmark: sphere tool against a 20,000-triangle part, exact contact depth, beside python-fcl
and trimesh in the same run.

The part is a freeform sheet (0.2 m x 0.2 m, 100 x 100 quads = 20,000 triangles, waves of 5 mm).
The tool (a sphere of radius 20 mm) follows a raster pass 0.1 mm into the surface with a step of
0.05 mm (50 mm/s at 1 kHz): every query is a contact. Per query we time

- ours: ``scene.set_pose(tool, T)`` + ``scene.contacts(tool, part)`` (the public API, exact depth),
- python-fcl: ``setTransform`` + ``fcl.distance`` (sphere vs BVH, nearest points) and ``fcl.collide``
  (whose depth is wrong: negative),
- trimesh: ``trimesh.proximity.closest_point`` (one point per call, as a tool loop would),
- a grinding wheel (cylinder, face down) on the same pass: ours vs python-fcl ``collide``.

Accuracy is checked at the same time: our depth against ``R - distance`` from a brute-force
closest point over all triangles.

Run: ``.venv/bin/python bench/bench_collision.py`` (``--queries N`` to change the count).
"""

from __future__ import annotations

import argparse
import time

import fcl
import numpy as np
import trimesh

from robot_grinding_sim.core.geometry.collision import CollisionScene
from robot_grinding_sim.core.geometry.meshquery import closest_point_bruteforce

RADIUS = 0.02
DEPTH = 1e-4


def freeform_sheet(n: int = 100, size: float = 0.2, amp: float = 0.005):
    x = np.linspace(-size / 2, size / 2, n + 1)
    X, Y = np.meshgrid(x, x)

    def height(x, y):
        return amp * np.sin(2 * np.pi * x / 0.1) * np.cos(2 * np.pi * y / 0.13)

    V = np.c_[X.ravel(), Y.ravel(), height(X, Y).ravel()]
    idx = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()
    F = np.r_[np.c_[a, b, c], np.c_[a, c, d]]
    return V, F


def best_of(fn, repeats: int = 5) -> float:
    """Smallest wall time of ``repeats`` runs (s): the machine is shared, the minimum is the cost."""
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--trimesh-queries", type=int, default=100)
    args = ap.parse_args()

    V, F = freeform_sheet()
    mesh = trimesh.Trimesh(V, F, process=False)
    scene = CollisionScene()
    prepared = scene.add_mesh("part", V, F)
    scene.add_sphere("tool", RADIUS)
    print(f"part: {len(prepared.faces)} triangles; tool: sphere R = {RADIUS * 1e3:.0f} mm")

    # Raster pass: tool centres 0.1 mm into the surface along its normal (from trimesh's
    # closest point, independent of ours), 0.05 mm apart.
    n = args.queries
    xs = np.linspace(-0.05, -0.05 + 0.05e-3 * (n - 1), n)
    guess = np.c_[xs, np.full(n, 0.013), np.zeros(n)]
    surf, _, tri = trimesh.proximity.closest_point(mesh, guess)
    normals = mesh.face_normals[tri]
    centres = surf + (RADIUS - DEPTH) * normals
    poses = np.repeat(np.eye(4)[None], n, axis=0)
    poses[:, :3, 3] = centres

    # -- ours
    depths = np.empty(n)

    def ours():
        for k in range(n):
            scene.set_pose("tool", poses[k])
            cs = scene.contacts("tool", "part")
            depths[k] = cs[0].depth if cs else -1.0

    ours()  # compile / warm
    t_ours = best_of(ours) / n

    # -- python-fcl
    bvh = fcl.BVHModel()
    bvh.beginModel(len(V), len(F))
    bvh.addSubModel(V, F)
    bvh.endModel()
    part = fcl.CollisionObject(bvh, fcl.Transform())
    tool = fcl.CollisionObject(fcl.Sphere(RADIUS), fcl.Transform())
    dreq = fcl.DistanceRequest(enable_nearest_points=True)
    creq = fcl.CollisionRequest(num_max_contacts=1, enable_contact=True)
    fcl_depth = np.empty(n)

    def fcl_distance():
        for k in range(n):
            tool.setTransform(fcl.Transform(centres[k]))
            fcl.distance(tool, part, dreq, fcl.DistanceResult())

    def fcl_collide():
        for k in range(n):
            tool.setTransform(fcl.Transform(centres[k]))
            res = fcl.CollisionResult()
            fcl.collide(tool, part, creq, res)
            fcl_depth[k] = res.contacts[0].penetration_depth if res.contacts else np.nan

    t_fcl_dist = best_of(fcl_distance, 3) / n
    t_fcl_coll = best_of(fcl_collide, 3) / n

    # -- trimesh
    m = min(args.trimesh_queries, n)

    def tm():
        for k in range(m):
            trimesh.proximity.closest_point(mesh, centres[k:k + 1])

    t_tm = best_of(tm, 2) / m

    # -- a grinding wheel (cylinder r 25 mm x 10 mm, face down) on the same pass: ours (support
    # point iteration on the exact closest point) vs python-fcl collide (its normals are wrong)
    scene.add_cylinder("wheel", 0.025, 0.01)
    wheel_poses = poses.copy()
    wheel_poses[:, :3, 3] = surf + (0.005 - DEPTH) * normals
    wheel_poses[:, :3, :3] = [trimesh.geometry.align_vectors([0, 0, 1], nn)[:3, :3] for nn in normals]
    wheel_depth = np.empty(n)
    wheel_exact = np.zeros(n, dtype=bool)

    def ours_wheel():
        for k in range(n):
            scene.set_pose("wheel", wheel_poses[k])
            cs = scene.contacts("wheel", "part")
            wheel_depth[k] = cs[0].depth if cs else -1.0
            wheel_exact[k] = bool(cs) and cs[0].exact

    ours_wheel()
    t_wheel = best_of(ours_wheel, 3) / n
    wheel = fcl.CollisionObject(fcl.Cylinder(0.025, 0.01), fcl.Transform())
    creq_many = fcl.CollisionRequest(num_max_contacts=16, enable_contact=True)
    fcl_wheel_err = []

    def fcl_wheel():
        fcl_wheel_err.clear()
        for k in range(n):
            T = wheel_poses[k]
            wheel.setTransform(fcl.Transform(T[:3, :3], T[:3, 3]))
            res = fcl.CollisionResult()
            fcl.collide(wheel, part, creq_many, res)
            if res.contacts:
                fcl_wheel_err.append(max(np.degrees(np.arccos(np.clip(abs(c.normal @ normals[k]), -1, 1)))
                                         for c in res.contacts))

    t_fcl_wheel = best_of(fcl_wheel, 3) / n

    # -- accuracy against brute force over all triangles
    ref = np.array([RADIUS - np.sqrt(closest_point_bruteforce(c, prepared.vertices, prepared.faces)[0])
                    for c in centres])
    err = np.abs(depths - ref).max()

    print(f"{'method':<44}{'us/query':>10}{'ratio (peer/ours)':>20}")
    print(f"{'ours: set_pose + contacts (exact depth)':<44}{t_ours * 1e6:>10.1f}{1.0:>20.2f}")
    print(f"{'python-fcl distance (sphere vs BVH)':<44}{t_fcl_dist * 1e6:>10.1f}{t_fcl_dist / t_ours:>20.2f}")
    print(f"{'python-fcl collide (depth wrong)':<44}{t_fcl_coll * 1e6:>10.1f}{t_fcl_coll / t_ours:>20.2f}")
    print(f"{'trimesh closest_point (1 point)':<44}{t_tm * 1e6:>10.1f}{t_tm / t_ours:>20.2f}")
    print(f"{'ours: wheel (cylinder) set_pose + contacts':<44}{t_wheel * 1e6:>10.1f}{1.0:>20.2f}")
    print(f"{'python-fcl collide, cylinder vs BVH':<44}{t_fcl_wheel * 1e6:>10.1f}{t_fcl_wheel / t_wheel:>20.2f}")
    print(f"wheel (face-down on a curved sheet: an area contact): ours depth {wheel_depth.min():.3e} .. "
          f"{wheel_depth.max():.3e} m, flagged exact in {wheel_exact.sum()}/{n} (flat under the face); "
          f"python-fcl normals off the face normal by up to {max(fcl_wheel_err):.1f} deg")
    print(f"depth: ours max |error| vs brute force = {err:.2e} m over {n} queries "
          f"(expected depth {DEPTH:.1e} m +- tessellation)")
    print(f"depth: python-fcl collide reports {np.nanmin(fcl_depth):.3e} .. {np.nanmax(fcl_depth):.3e} m")
    print(f"target <= 100 us: {'met' if t_ours <= 100e-6 else 'NOT met'} ({t_ours * 1e6:.1f} us)")


if __name__ == "__main__":
    main()

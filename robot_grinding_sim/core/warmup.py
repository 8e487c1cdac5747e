"""Compile the package's numba kernels into the on-disk cache: ``python -m robot_grinding_sim.core.warmup``.

The kernels are compiled with ``cache=True`` the first time a process uses them (15-60 s on a
busy 2-core machine). Running this once after installing keeps that cost out of node start-up,
where it would otherwise delay the first ``joint_states`` or contact message.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def warm_up() -> dict[str, float]:
    """Exercise every cached kernel once on small inputs; returns seconds per stage."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    from robot_grinding_sim.core.resources import package_file
    from robot_grinding_sim.core.robot.dynamics import RobotModel

    model = RobotModel.from_urdf(package_file("urdf/ur10e_grinding.urdf"))
    q = np.zeros(model.nq)
    model.fk(q, model.tip_link)
    model.jacobian(q, model.tip_link)
    model.rnea(q, q, q)
    model.rnea(np.zeros((2, model.nq)), np.zeros((2, model.nq)), np.zeros((2, model.nq)))
    model.mass_matrix(q)
    model.forward_dynamics(q, q, q)
    model.effective_mass(q, model.tip_link, model.fk(q, model.tip_link)[:3, 3], (0.0, 0.0, 1.0))
    timings["dynamics_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    import trimesh

    from robot_grinding_sim.core.geometry.collision import CollisionScene

    scene = CollisionScene()
    part = trimesh.creation.icosphere(subdivisions=3, radius=0.1)  # watertight, large enough for the BVH
    scene.add_mesh("part", part.vertices, part.faces)
    scene.add_sphere("tool", 0.02)
    scene.add_box("box", (0.05, 0.05, 0.05))
    scene.add_cylinder("wheel", 0.025, 0.01)
    for name in ("tool", "box", "wheel"):
        pose = np.eye(4)
        pose[2, 3] = 0.115
        scene.set_pose(name, pose)
        scene.contacts(name, "part")
        scene.distance(name, "part")
    timings["collision_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from robot_grinding_sim.core.geometry import parts

    face = parts.freeform_face(0.05).face(0)  # B-spline evaluation kernels of the planner
    face.intersect_lines(np.array([[0.0, 0.0, 0.1], [0.01, 0.0, 0.1]]), np.array([0.0, 0.0, 1.0]))
    timings["cad_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    from robot_grinding_sim.core.contact.preston import RemovalGrid

    grid = RemovalGrid(np.array([[x, y, 0.0] for x in (-1e-3, 0.0, 1e-3) for y in (-1e-3, 0.0, 1e-3)]),
                       np.full(9, 1e-6))
    grid.accumulate(np.zeros(3), np.array([0.0, 0.0, 1.0]), 1.0, 2e-3, np.array([0.0, 0.0, 0.02]), np.zeros(3),
                    np.array([0.01, 0.0, 0.0]), 1e-3)
    timings["removal_s"] = time.perf_counter() - t0
    return timings


def main() -> int:
    timings = warm_up()
    print("numba kernels cached: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

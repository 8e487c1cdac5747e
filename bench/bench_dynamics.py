"""Benchmark: robot_grinding_sim.core.robot.dynamics against Pinocchio, in the same process.

Run:  .venv/bin/python bench/bench_dynamics.py [--urdf PATH] [--batch 10000]

Prints a Markdown table (part | figure | ours | peer | ratio | target | command) for docs/performance.md.
Each figure is the best of several repeats (the least disturbed by other processes on a shared
machine), in microseconds per call; the ratio is ours / peer (below 1: we are faster). The batched
RNEA row compares our one call over B states with Pinocchio called from Python in a loop over the
same states. Both sides are checked to agree before anything is timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit
from pathlib import Path

import numpy as np
import pinocchio as pin

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from robot_grinding_sim.core.robot.dynamics import RobotModel  # noqa: E402

COMMAND = "`.venv/bin/python bench/bench_dynamics.py`"


def best_us(fn, number: int, repeat: int = 40) -> float:
    """Best-of-``repeat`` time of one call of ``fn`` in microseconds (many short repeats: on a
    shared machine the best one is the least disturbed)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urdf", default=str(REPO / "urdf" / "ur10e_grinding.urdf"))
    ap.add_argument("--batch", type=int, default=10000, help="states in the batched RNEA call")
    ap.add_argument("--number", type=int, default=500, help="calls per timing repeat (40 repeats)")
    args = ap.parse_args(argv)

    load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    model = RobotModel.from_urdf(args.urdf)
    t_load = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-2, 2, (3, model.nq))
    t0 = time.perf_counter()
    model.rnea(q, qd, qdd), model.mass_matrix(q), model.forward_dynamics(q, qd, qdd)  # JIT / cache load
    t_jit = time.perf_counter() - t0

    pm = pin.buildModelFromUrdf(args.urdf)
    lock = [pm.getJointId(n) for n in pm.names[1:] if n not in model.joint_names]
    if lock:
        pm = pin.buildReducedModel(pm, lock, pin.neutral(pm))
    pd = pm.createData()
    assert list(pm.names[1:]) == model.joint_names and pm.nq == model.nq, "continuous joints not supported here"

    # agreement first
    tau = model.rnea(q, qd, qdd)
    assert np.allclose(tau, pin.rnea(pm, pd, q, qd, qdd), rtol=1e-9, atol=1e-9)
    assert np.allclose(model.forward_dynamics(q, qd, tau), pin.aba(pm, pd, q, qd, tau), rtol=1e-9, atol=1e-9)
    wrench = {model.tip_link: rng.normal(size=6)}

    n = args.number
    rows = []

    def row(part, figure, ours, peer, target):
        rows.append((part, figure, ours, peer, target))

    row("dynamics", f"RNEA, one call, {model.nq} joints [us]",
        best_us(lambda: model.rnea(q, qd, qdd), n), best_us(lambda: pin.rnea(pm, pd, q, qd, qdd), n), "<= 20 us")
    row("dynamics", "RNEA with a tool wrench, one call [us]",
        best_us(lambda: model.rnea(q, qd, qdd, f_ext=wrench), n), None, "-")

    B = args.batch
    Q, QD, QDD = rng.uniform(-2, 2, (3, B, model.nq))
    ours_batch = best_us(lambda: model.rnea(Q, QD, QDD), 1, 15) / B

    def pin_loop() -> None:
        for i in range(B):
            pin.rnea(pm, pd, Q[i], QD[i], QDD[i])

    peer_batch = best_us(pin_loop, 1, 15) / B
    row("dynamics", f"RNEA batched, {B} states, per state [us]", ours_batch, peer_batch,
        ">= peer throughput (ratio <= 1)")
    M_ours = best_us(lambda: model.mass_matrix(q), n)
    row("dynamics", "mass matrix (CRBA), one call [us]", M_ours, best_us(lambda: pin.crba(pm, pd, q), n), "<= 50 us")
    row("dynamics", "forward dynamics, one call [us]", best_us(lambda: model.forward_dynamics(q, qd, tau), n),
        best_us(lambda: pin.aba(pm, pd, q, qd, tau), n), "<= 50 us")

    def pin_fk() -> None:
        pin.framesForwardKinematics(pm, pd, q)

    fid = pm.getFrameId(model.tip_link)
    row("dynamics", "tip pose (FK), one call [us]", best_us(lambda: model.fk(q), n), best_us(pin_fk, n), "-")

    def pin_jac() -> None:
        pin.computeFrameJacobian(pm, pd, q, fid, pin.LOCAL_WORLD_ALIGNED)

    row("dynamics", "tip Jacobian, one call [us]", best_us(lambda: model.jacobian(q), n), best_us(pin_jac, n), "-")

    T = model.fk(q)
    point, normal = T[:3, 3], T[:3, 2]

    def pin_meff() -> float:
        pin.computeJointJacobians(pm, pd, q)
        pin.updateFramePlacements(pm, pd)
        J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        x = J.T @ normal
        return 1.0 / (x @ np.linalg.solve(M, x))

    assert abs(model.effective_mass(q, model.tip_link, point, normal) / pin_meff() - 1) < 1e-9
    row("dynamics", "effective mass along the tool axis, one call [us]",
        best_us(lambda: model.effective_mass(q, model.tip_link, point, normal), n), best_us(pin_meff, n),
        "-")

    print(f"load average before/after: {load0} / {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs")
    print(f"model: {args.urdf} ({model.root_link} -> {model.tip_link}, nq={model.nq}); "
          f"URDF load {t_load * 1e3:.0f} ms, first calls (numba JIT or cache load) {t_jit * 1e3:.0f} ms; "
          f"pinocchio {pin.__version__}")
    print()
    print("| part | figure | ours | peer | ratio | target | command |")
    print("|---|---|---|---|---|---|---|")
    for part, figure, ours, peer, target in rows:
        peer_s = f"{peer:.2f} (Pinocchio)" if peer is not None else "-"
        ratio = f"{ours / peer:.2f}" if peer is not None else "-"
        print(f"| {part} | {figure} | {ours:.2f} | {peer_s} | {ratio} | {target} | {COMMAND} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

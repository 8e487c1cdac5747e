"""Peers on the grinding scene: our coupled step, MuJoCo and Drake, in one run.

The scene (every engine builds it from the same files): the package's UR10e with the 20 mm ball
tool (urdf/ur10e_grinding.urdf, link ``tcp`` at the ball centre), tool pointing down over the
centre of the flat plate (parts/flat_plate.step at the cell's workpiece pose; the peers get a box
whose top face is the plate's top face), held at rest by the same joint servo in every engine:
computed torque with the engine's own dynamics, tau = M(q) (Kp (q_ref - q) - Kd qd) + bias(q, qd),
Kp = w^2, Kd = 2 zeta w (the cell's servo: w = 200 rad/s, zeta = 1), computed from the state at the
start of each step and held over it (the torque of a digital servo; clipped to the URDF effort
limits as ours). The spindle is off and the contact frictionless (tangential force ratio 0): the
force is the normal contact force alone. Gravity (-9.81 m/s^2 along base_link z) is compensated
by the servo's bias term.

Expected force. The servo is a spring along the normal: at rest M Kp (q_ref - q) = -J^T f, so the
tool moves by f / (Kp m) along the normal (m = 1 / (n^T J M^-1 J^T n), the effective mass of the
tool centre along n). In series with a contact of static stiffness K (F = K x at rest), a reference
that puts the ball d_cmd into the plate holds F = d_cmd / (1/K + 1/(Kp m)). d_cmd is chosen with
our m for F = 5 N; each peer's expected force uses its own m (its own mass matrix and Jacobian of
the same URDF: the same to ~1e-9). Every engine is given the static stiffness K = contact.stiffness
(1e5 N/m, 5 N at 50 um) and the Kelvin-Voigt damping D of the cell's restitution for m:
- ours: KelvinVoigt(K, c_r = contact.cr), D for the effective mass (core.contact.kelvin_voigt).
- MuJoCo: solref = (-(1 - d) K A, -(1 - d) D A) with a constant impedance solimp d = d0 and A
  MuJoCo's approximate inverse mass of the contact row (diagApprox, read from efc_R at the hold
  pose: A = R d / (1 - d)); condim 1, Euler. Why: MuJoCo's soft constraint obeys
  a1 + d (b v + k r) = (1 - d) a0, so at rest it holds a load with r = (1 - d) a0 / (d k): with the
  bench_bounce mapping (-K/m, -D/m) and d -> 1 its static stiffness is K / (1 - d) (1e4 K at
  d = 0.9999), not K (checked: a 1 kg ball at rest on (-1e5, -300) sinks 50 um at d = 0.5 and
  10 um at d = 0.9). With the scaling above the static stiffness is exactly K, and as d -> 0 the
  dynamics become m x'' + D x' + K x = f (the Kelvin-Voigt contact, but applied explicitly).
  ``mujoco`` uses d0 = 0.001 (Kelvin-Voigt dynamics); ``mujoco_d09`` MuJoCo's default impedance
  d0 = 0.9 (the same static stiffness; the contact then moves like a 1/(1 - d) = 10x heavier mass).
- Drake: a discrete MultibodyPlant (SAP solver, point contact), the ball's point_contact_stiffness
  K and relaxation_time D / K (SAP's linear Kelvin-Voigt dissipation: F = K x + tau K x'), the
  plate 1e15 N/m and tau 0 (stiffnesses combine in series, relaxation times add), friction 0.
  ``drake_tamsi``: the TAMSI solver (Hunt-Crossley dissipation d = D / F_exp: the same damping
  at the static force).
Only the ball and the plate collide (every other geometry of the arm is removed from contact).

A step passes when the force is finite and, over the last quarter of a 2 s hold from rest at the
hold pose, its mean is within 5 % of the expected force and its oscillation (max - min) / 2 too.
Prints, per engine, the largest passing step of the scan and the wall time per simulated second
there (the stepping loop only: servo, step, force read-out; set-up excluded; best of up to 3 runs
within ~1 s), and the ratios ours / peer. The servo alone limits every engine to w dt < ~0.83
(explicit torque held over the step: 4 ms at w = 200 rad/s); ``--bandwidth`` changes w.

Usage: .venv/bin/python bench/bench_peers.py [--engines ours,mujoco,mujoco_d09,drake,drake_tamsi]
       [--min-dt-ms 0.0625] [--max-dt-ms 16] [--hold 2.0] [--bandwidth 200] [--json]
Peers: pip install -e '.[bench]' (mujoco, drake).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from robot_grinding_sim.core.config import CellConfig
from robot_grinding_sim.core.contact.kelvin_voigt import KelvinVoigt
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.job.setup import JobConfig, setup_job
from robot_grinding_sim.core.job.simulation import simulate
from robot_grinding_sim.core.planning.path_ik import solve_ik
from robot_grinding_sim.core.robot.joint_trajectory import TrajectoryInterpolator

TARGET = 5.0  # N
TOL = 0.05
PEER_PACKAGES = {"mujoco": "mujoco", "mujoco_d09": "mujoco", "drake": "pydrake", "drake_tamsi": "pydrake"}
INSTALL = "pip install -e '.[bench]'   (or: pip install 'mujoco>=3' 'drake>=1.30')"


@dataclasses.dataclass
class Scene:
    """The shared scene: set-up, hold configuration, plate, contact and servo parameters."""

    setup: Any
    urdf: str
    q: np.ndarray  # (6,) hold configuration (reference and start), rad
    normal: np.ndarray  # (3,) plate normal (up), base_link
    top: np.ndarray  # (3,) point of the plate's top face under the ball, base_link
    R_plate: np.ndarray  # (3, 3) plate frame (z = normal)
    d_cmd: float  # commanded penetration of the ball's reference, m
    K: float  # contact stiffness, N/m
    D: float  # Kelvin-Voigt damping for the effective mass, N s/m
    m: float  # effective mass along the normal (ours), kg
    kp: float
    kd: float
    effort: np.ndarray  # (6,) torque limits, N m
    radius: float


def expected_force(sc: Scene, m: float) -> float:
    """Steady normal force (N): the commanded penetration over the contact and servo in series."""
    return sc.d_cmd / (1.0 / sc.K + 1.0 / (sc.kp * m))


def effective_mass(M: np.ndarray, J: np.ndarray, n: np.ndarray) -> float:
    """1 / (n^T J M^-1 J^T n): J (3, 6) translational Jacobian of the ball centre, M (6, 6)."""
    Jn = n @ J
    return 1.0 / float(Jn @ np.linalg.solve(M, Jn))


def build_scene(bandwidth: float, stiffness: float | None = None) -> Scene:
    values: dict[str, Any] = {"workpiece.part": "flat_plate", "passes.stepover": 0.05, "tool.spindle_speed": 0.0,
                              "contact.force_ratio": 0.0, "servo.bandwidth": bandwidth}
    if stiffness is not None:
        values["contact.stiffness"] = stiffness
    cell = CellConfig().replace(**values)
    setup = setup_job(JobConfig(cell=cell, max_passes=1, pass_length=0.01, optimise=False))
    model = setup.model
    X = setup.X_BP
    n = X[:3, :3] @ np.array([0.0, 0.0, 1.0])
    top = X[:3, :3] @ np.array([0.0, 0.0, 0.01]) + X[:3, 3]  # the plate's top face (part frame z = 10 mm)
    q_home = np.array(cell.robot.home)
    tcp = cell.tool.tcp_link
    K = cell.contact.stiffness
    kp, kd = cell.servo.kp, cell.servo.kd

    def ik(depth: float) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = X[:3, :3] @ np.diag([1.0, -1.0, -1.0])  # tool axis (tcp z) down the normal
        T[:3, 3] = top + (setup.tool_radius - depth) * n
        return solve_ik(model, T[None], q_home, "hold pose")[0]

    q = ik(0.0)
    J = model.jacobian(q, tcp)[:3]
    m = effective_mass(model.mass_matrix(q), J, n)
    d_cmd = TARGET * (1.0 / K + 1.0 / (kp * m))
    q = ik(d_cmd)
    J = model.jacobian(q, tcp)[:3]
    m = effective_mass(model.mass_matrix(q), J, n)
    law = KelvinVoigt(K, cr=cell.contact.cr)
    return Scene(setup, str(model.source), q, n, top, X[:3, :3], d_cmd, K, float(law.damping(m)), m, kp, kd,
                 np.asarray(model.effort_limits, dtype=float), setup.tool_radius)


# --------------------------------------------------------------------------------------------------
# engines: each returns (force samples (k,) N at the end of each step, expected force N, wall s)

Result = tuple[np.ndarray, float, float]


def run_ours(sc: Scene, dt: float, duration: float) -> Result:
    s = sc.setup
    try:
        cell = s.cell.replace(**{"sim.dt": dt, "sim.output_dt": dt})
    except InputError:  # the configuration refuses a step the servo cannot hold (w dt >= 0.83)
        return np.full(1, math.nan), expected_force(sc, sc.m), 0.0
    s = dataclasses.replace(s, cfg=dataclasses.replace(s.cfg, cell=cell))
    run = simulate(s, TrajectoryInterpolator.hold(sc.q), sc.q, duration)
    return np.asarray(run.record["fn"]), expected_force(sc, sc.m), run.wall_time_s


def _mujoco_model(sc: Scene, dt: float, d0: float) -> tuple[Any, Any, int, int]:
    import mujoco

    with open(sc.urdf, encoding="utf-8") as f:
        text = f.read()
    # MuJoCo's URDF reader: keep the fixed-joint links as bodies (tcp), no visuals, no mesh dirs
    text = text.replace("<robot name=\"ur10e_grinding\">", "<robot name=\"ur10e_grinding\"><mujoco><compiler "
                        "discardvisual=\"true\" fusestatic=\"false\" balanceinertia=\"false\"/></mujoco>", 1)
    text = re.sub(r'<collision name="[^"]*">', "<collision>", text)  # (MuJoCo warns on repeated names)
    spec = mujoco.MjSpec.from_string(text)
    spec.option.timestep = dt
    spec.option.gravity = list(sc.setup.cell.sim.gravity)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    ball = None
    for g in spec.geoms:
        g.contype = g.conaffinity = 0
        if g.type == mujoco.mjtGeom.mjGEOM_SPHERE and abs(g.size[0] - sc.radius) < 1e-9:
            ball = g
    if ball is None:
        raise RuntimeError(f"{sc.urdf}: MuJoCo loaded no sphere of radius {sc.radius} m (the ball tool)")
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(sc.R_plate).reshape(-1))
    plate = spec.worldbody.add_geom()
    plate.name = "plate"
    plate.type = mujoco.mjtGeom.mjGEOM_BOX
    plate.size = [0.15, 0.15, 0.01]
    plate.pos = (sc.top - 0.01 * sc.normal).tolist()
    plate.quat = quat.tolist()
    for g in (ball, plate):
        g.contype = g.conaffinity = 1
        g.condim = 1
        g.solimp = [d0, d0, 0.001, 0.5, 2.0]
        g.solref = [-sc.K, -sc.D]  # placeholder: scaled below once MuJoCo's diagApprox is known
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[:] = sc.q
    mujoco.mj_forward(model, data)
    if data.nefc != 1:
        raise RuntimeError(f"MuJoCo: expected one contact row at the hold pose, got {data.nefc}")
    A = float(data.efc_R[0]) * d0 / (1.0 - d0)  # R = (1 - d) / d * diagApprox
    ref = [-(1.0 - d0) * sc.K * A, -(1.0 - d0) * sc.D * A]
    for gid in (mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "plate"), ball_id(model, sc.radius)):
        model.geom_solref[gid] = ref
    tcp = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "tcp")
    return model, data, tcp, data.nefc


def ball_id(model: Any, radius: float) -> int:
    import mujoco

    for i in range(model.ngeom):
        if model.geom_type[i] == mujoco.mjtGeom.mjGEOM_SPHERE and abs(model.geom_size[i, 0] - radius) < 1e-9 \
                and model.geom_contype[i]:
            return i
    raise RuntimeError("MuJoCo: the ball geom is gone")


def run_mujoco(sc: Scene, dt: float, duration: float, d0: float = 1e-3) -> Result:
    import mujoco

    model, data, tcp, _ = _mujoco_model(sc, dt, d0)
    mujoco.mj_resetData(model, data)
    data.qpos[:] = sc.q
    mujoco.mj_forward(model, data)
    Jp = np.zeros((3, model.nv))
    mujoco.mj_jacBody(model, data, Jp, None, tcp)
    M = np.zeros((model.nv, model.nv))
    mujoco.mj_fullM(model, data, M)
    expected = expected_force(sc, effective_mass(M, Jp, sc.normal))
    n_steps = int(math.ceil(duration / dt - 1e-9))
    f = np.empty(n_steps)
    q_ref, kp, kd, lim = sc.q, sc.kp, sc.kd, sc.effort
    qacc = np.zeros(model.nv)
    tau = np.zeros(model.nv)
    f6 = np.zeros(6)
    w0 = time.perf_counter()
    for i in range(n_steps):
        mujoco.mj_step1(model, data)  # kinematics, inertia, bias forces, contacts at the step's start
        qacc[:] = kp * (q_ref - data.qpos) - kd * data.qvel
        mujoco.mj_mulM(model, data, tau, qacc)
        data.qfrc_applied[:] = np.clip(tau + data.qfrc_bias, -lim, lim)
        mujoco.mj_step2(model, data)
        fn = 0.0
        for c in range(data.ncon):
            mujoco.mj_contactForce(model, data, c, f6)
            fn += f6[0]
        f[i] = fn
    wall = time.perf_counter() - w0
    if int(data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number) > 0:
        f[-1] = math.nan  # MuJoCo reset the state: a failure
    return f, expected, wall


def run_drake(sc: Scene, dt: float, duration: float, solver: str = "sap") -> Result:
    from pydrake.geometry import AddContactMaterial, Box, ProximityProperties, Role, RoleAssign
    from pydrake.math import RigidTransform, RotationMatrix
    from pydrake.multibody.parsing import Parser
    from pydrake.multibody.plant import AddMultibodyPlant, CoulombFriction, MultibodyPlantConfig
    from pydrake.multibody.tree import JacobianWrtVariable
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    cfg = MultibodyPlantConfig(time_step=dt, contact_model="point", discrete_contact_approximation=solver)
    plant, sg = AddMultibodyPlant(cfg, builder)
    (robot,) = Parser(plant).AddModels(sc.urdf)
    plant.WeldFrames(plant.world_frame(), plant.GetFrameByName("base_link", robot))
    plant.mutable_gravity_field().set_gravity_vector(np.asarray(sc.setup.cell.sim.gravity, dtype=float))
    src = plant.get_source_id()
    insp = sg.model_inspector()
    F_exp_static = TARGET
    ball = None
    for body_index in plant.GetBodyIndices(robot):
        body = plant.get_body(body_index)
        for gid in plant.GetCollisionGeometriesForBody(body):
            shape = insp.GetShape(gid)
            if type(shape).__name__ == "Sphere" and abs(shape.radius() - sc.radius) < 1e-9:
                ball = gid
            else:
                sg.RemoveRole(src, gid, Role.kProximity)
    if ball is None:
        raise RuntimeError(f"{sc.urdf}: Drake loaded no sphere of radius {sc.radius} m (the ball tool)")
    props = ProximityProperties()
    dissipation = sc.D / F_exp_static if solver == "tamsi" else 0.0  # Hunt-Crossley: D at the static force
    AddContactMaterial(dissipation=dissipation, point_stiffness=sc.K, friction=CoulombFriction(0.0, 0.0),
                       properties=props)
    props.AddProperty("material", "relaxation_time", sc.D / sc.K)
    sg.AssignRole(src, ball, props, RoleAssign.kReplace)
    plate = ProximityProperties()
    AddContactMaterial(dissipation=0.0, point_stiffness=1e15, friction=CoulombFriction(0.0, 0.0), properties=plate)
    plate.AddProperty("material", "relaxation_time", 0.0)
    X_WP = RigidTransform(RotationMatrix(sc.R_plate), sc.top - 0.01 * sc.normal)
    plant.RegisterCollisionGeometry(plant.world_body(), X_WP, Box(0.3, 0.3, 0.02), "plate", plate)
    plant.Finalize()
    diagram = builder.Build()
    sim = Simulator(diagram)
    ctx = sim.get_mutable_context()
    pctx = plant.GetMyMutableContextFromRoot(ctx)
    plant.SetPositions(pctx, sc.q)
    plant.SetVelocities(pctx, np.zeros(plant.num_velocities()))
    tcp = plant.GetFrameByName("tcp", robot)
    Jv = plant.CalcJacobianTranslationalVelocity(pctx, JacobianWrtVariable.kV, tcp, np.zeros(3),
                                                 plant.world_frame(), plant.world_frame())
    expected = expected_force(sc, effective_mass(plant.CalcMassMatrix(pctx), Jv, sc.normal))
    port = plant.get_applied_generalized_force_input_port()
    contact_port = plant.get_contact_results_output_port()
    sim.Initialize()
    n_steps = int(math.ceil(duration / dt - 1e-9))
    f = np.empty(n_steps)
    q_ref, kp, kd, lim, nrm = sc.q, sc.kp, sc.kd, sc.effort, sc.normal
    w0 = time.perf_counter()
    for i in range(n_steps):
        q, v = plant.GetPositions(pctx), plant.GetVelocities(pctx)
        M = plant.CalcMassMatrix(pctx)
        bias = plant.CalcBiasTerm(pctx) - plant.CalcGravityGeneralizedForces(pctx)
        port.FixValue(pctx, np.clip(M @ (kp * (q_ref - q) - kd * v) + bias, -lim, lim))
        sim.AdvanceTo((i + 1) * dt)
        res = contact_port.Eval(pctx)
        fn = 0.0
        for c in range(res.num_point_pair_contacts()):
            info = res.point_pair_contact_info(c)
            fw = info.contact_force()  # on body B, world frame
            fn += abs(float(fw @ nrm))
        f[i] = fn
        if not math.isfinite(fn):
            break
    wall = time.perf_counter() - w0
    return f, expected, wall


ENGINES: dict[str, Callable[[Scene, float, float], Result]] = {
    "ours": run_ours,
    "mujoco": run_mujoco,
    "mujoco_d09": lambda sc, dt, T: run_mujoco(sc, dt, T, d0=0.9),
    "drake": run_drake,
    "drake_tamsi": lambda sc, dt, T: run_drake(sc, dt, T, solver="tamsi"),
}


def assess(f: np.ndarray, expected: float) -> dict[str, Any]:
    """Mean and half peak-to-peak over the last quarter; passes when both within TOL of expected."""
    tail = f[int(0.75 * f.size):]
    if f.size == 1 and math.isnan(f[0]):
        return {"ok": False, "mean": None, "amp": None, "why": "refused (servo: w dt >= 0.83)"}
    if tail.size == 0 or not np.all(np.isfinite(f)):
        return {"ok": False, "mean": None, "amp": None, "why": "blew up"}
    mean, amp = float(tail.mean()), float(0.5 * (tail.max() - tail.min()))
    why = []
    if abs(mean - expected) > TOL * expected:
        why.append(f"mean {mean:.4g} N")
    if amp > TOL * expected:
        why.append(f"oscillates +-{amp:.3g} N")
    return {"ok": not why, "mean": mean, "amp": amp, "why": ", ".join(why)}


def check_peers(names: list[str]) -> None:
    """Exit non-zero naming the install command when a requested peer is not installed."""
    import importlib.util

    missing = sorted({PEER_PACKAGES[n] for n in names if n in PEER_PACKAGES
                      and importlib.util.find_spec(PEER_PACKAGES[n]) is None})
    if missing:
        print(f"bench_peers: peer package(s) not installed: {', '.join(missing)}. Install: {INSTALL}", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="ours,mujoco,mujoco_d09,drake,drake_tamsi")
    ap.add_argument("--min-dt-ms", type=float, default=0.0625)
    ap.add_argument("--max-dt-ms", type=float, default=16.0)
    ap.add_argument("--hold", type=float, default=2.0, help="simulated hold, s")
    ap.add_argument("--bandwidth", type=float, default=200.0, help="servo bandwidth w, rad/s")
    ap.add_argument("--stiffness", type=float, default=None,
                    help="contact stiffness K, N/m [default: the cell's contact.stiffness, 1e5]")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    names = [n for n in args.engines.split(",") if n]
    unknown = [n for n in names if n not in ENGINES]
    if unknown:
        ap.error(f"unknown engine(s) {unknown}; choose from {list(ENGINES)}")
    check_peers(names)
    sc = build_scene(args.bandwidth, args.stiffness)
    dts = []
    dt = args.min_dt_ms * 1e-3
    while dt <= args.max_dt_ms * 1e-3 * (1 + 1e-9):
        dts.append(dt)
        dt *= 2
    if not args.json:
        print(f"scene: hold q = {np.round(sc.q, 4).tolist()}, ball {sc.d_cmd * 1e6:.2f} um into the plate, "
              f"K = {sc.K:.3g} N/m, D = {sc.D:.4g} N s/m, m = {sc.m:.4f} kg, servo w = {args.bandwidth} rad/s "
              f"(k = Kp m = {sc.kp * sc.m:.4g} N/m); expected {expected_force(sc, sc.m):.4f} N; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    from robot_grinding_sim.cli.common import progress

    rows: list[dict[str, Any]] = []
    # every (step, engine) run costs about the same per simulated step: weight by 1/dt for the ETA
    total = sum(1.0 / d for d in dts) * len(names)
    with progress(total, "bench_peers", enabled=not args.json) as bar:
        for dt in dts:
            row: dict[str, Any] = {"dt_ms": dt * 1e3}
            for name in names:
                walls: list[float] = []
                while not walls or (len(walls) < 3 and sum(walls) < 1.0):
                    f, expected, w = ENGINES[name](sc, dt, args.hold)
                    walls.append(w)
                res = assess(f, expected)
                res["expected"] = expected
                res["wall_per_sim_s"] = min(walls) / args.hold
                row[name] = res
                bar.advance(1.0 / dt)
            rows.append(row)
            if not args.json:
                cells = []
                for name in names:
                    r = row[name]
                    mean = f"{r['mean']:.4f}" if r["mean"] is not None else "-"
                    cells.append(f"{name}: {'ok ' if r['ok'] else 'BAD'} {mean:>7} N {r['wall_per_sim_s'] * 1e3:9.1f} "
                                 f"ms/s {r['why']}")
                print(f"dt {dt * 1e3:8.4f} ms | " + " | ".join(cells), flush=True)
    summary: dict[str, Any] = {}
    for name in names:
        good = [r["dt_ms"] for r in rows if r[name]["ok"]]
        largest = max(good) if good else None
        at = next((r[name] for r in rows if r["dt_ms"] == largest), None)
        summary[name] = {"largest_ok_dt_ms": largest, "wall_per_sim_s": at["wall_per_sim_s"] if at else None,
                         "expected_n": rows[0][name]["expected"], "mean_n": at["mean"] if at else None}
    if args.json:
        json.dump({"rows": rows, "summary": summary, "d_cmd_m": sc.d_cmd, "m_kg": sc.m, "K": sc.K, "D": sc.D},
                  sys.stdout, indent=1)
        print()
        return 0
    print("\nengine        expected N  largest step within 5 %   wall s per sim s there   ours / peer "
          "(largest step; wall per sim s: > 1 ours slower)")
    ours = summary.get("ours")
    for name, s in summary.items():
        step = f"{s['largest_ok_dt_ms']:.4g} ms" if s["largest_ok_dt_ms"] else "none"
        wall = f"{s['wall_per_sim_s']:.4g}" if s["wall_per_sim_s"] else "-"
        ratio = ""
        if ours and name != "ours" and ours["largest_ok_dt_ms"] and s["largest_ok_dt_ms"]:
            ratio = (f"step {ours['largest_ok_dt_ms'] / s['largest_ok_dt_ms']:.3g}x, "
                     f"wall {ours['wall_per_sim_s'] / s['wall_per_sim_s']:.3g}x")
        print(f"{name:13s} {s['expected_n']:10.4f}  {step:>24s}   {wall:>22s}   {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

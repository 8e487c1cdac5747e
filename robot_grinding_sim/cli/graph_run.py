"""The job through the node graph: ``grinding demo --graph`` (and ``simulate --graph``).

After the in-process run has written ``plan.json`` and its bag, the same plan runs through real
node processes: ``grinding bringup sim --plan-file plan.json --start --until-done --record
graph_bag`` (dynamics_node, collision_node, contact_solver_node, planner_node on standby,
grinding_executive, recorder; DDS on loopback, a domain id of its own), with the plan's cell
parameters given to every node; on a terminal a progress bar follows the job (cli/job_watch.py).
Then both bags are read back and each pass's mean force along the
tool's pressing axis compared (:mod:`robot_grinding_sim.core.record.pass_forces`); ``summary.json`` gets
``graph_vs_inprocess``. The graph's output is kept in ``graph.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import FiniteRange

#: the graph runs slower than real time (lockstep over DDS): give up after this long, s
GRAPH_TIMEOUT = 3600.0
#: the node's removal map and the one replayed from the graph's bag agree within this (2-norm,
#: relative; 0.9 % on one pass, test/ros/test_removal_graph.py): beyond it the run's output says so
REPLAY_AGREEMENT = 0.03


def graph_domain_id() -> int:
    """A ROS_DOMAIN_ID for the graph: ``GRINDING_GRAPH_DOMAIN_ID`` if set, else one from the process id
    (1..100; tests and CI set their own ROS_DOMAIN_ID, which this keeps clear of by default)."""
    env = os.environ.get("GRINDING_GRAPH_DOMAIN_ID")
    if env:
        return int(env)
    return 1 + os.getpid() % 100


def exchange_parameters(cell: Any, interval: float | None) -> dict[str, Any]:
    """dynamics_node's parameters for an exchange interval H (s; None: its default): every
    contact model at most H old, the contact side seeing every round(H / sim.dt)-th state."""
    if interval is None:
        return {}
    dt = cell.sim.dt
    k = round(interval / dt)
    if k < 1 or abs(k * dt - interval) > 1e-9:
        raise click.BadParameter(f"{interval:g} s is not a multiple of sim.dt = {dt:g} s (for a shorter interval "
                                 f"set sim.dt to it: --set sim.dt={interval:g})", param_hint="--exchange-interval")
    return {"exchange_interval": float(interval), "joint_state_decimation": int(k)}


def graph_options(fn: Any) -> Any:
    """``--graph`` and ``--exchange-interval``, for ``demo`` and ``simulate``."""
    fn = click.option("--exchange-interval", type=FiniteRange(min=0.0, min_open=True), default=None,
                      help="With --graph: H, the contact exchange interval of the graph, s (a multiple of sim.dt) "
                           "[default: dynamics_node's, 0.001].")(fn)
    return click.option("--graph", is_flag=True,
                        help="Then run the same plan.json through the ROS 2 node graph (real processes, DDS on "
                             "loopback) and compare the per-pass force with the in-process run (minutes).")(fn)


def graph_dynamics(cell: Any, graph: bool, interval: float | None) -> dict[str, Any] | None:
    """dynamics_node's parameters for ``--graph`` (None without it); a bad ``--exchange-interval``
    fails here, before minutes of simulation."""
    if interval is not None and not graph:
        raise click.UsageError("--exchange-interval needs --graph")
    return exchange_parameters(cell, interval) if graph else None


def then_through_graph(summary: dict[str, Any], out: Path, cell: Any, dynamics: dict[str, Any] | None,
                       as_json: bool) -> None:
    """After the in-process run: with ``--graph`` (``dynamics`` not None) run the plan through the
    graph and add ``graph_vs_inprocess`` to ``summary``; with ``--json`` print the summary then."""
    if dynamics is None:
        return
    summary["graph_vs_inprocess"] = run_through_graph(Path(out), cell, as_json, dynamics)
    if as_json:
        from robot_grinding_sim.cli.common import emit_json

        emit_json(summary)


def _run_logged(cmd: list[str], log: Path, domain: int, enabled: bool) -> int:
    """Run the bringup command with its output into ``log``; on a terminal a progress bar follows
    the job (cli/job_watch.py). Returns the exit code (-1: timed out, the graph stopped)."""
    from robot_grinding_sim.cli.common import progress
    from robot_grinding_sim.cli.job_watch import JobClock, ProgressListener
    from robot_grinding_sim.environment import localhost_env

    clock = JobClock()
    with log.open("wb") as fh, progress(None, "graph: waiting for the start", enabled, plain=False) as bar:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

        def copy() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                fh.write(raw)
                if b"[grinding_executive]" in raw:
                    clock.feed_line(raw.decode(errors="replace"))

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        listener = None
        if bar.active:
            try:
                listener = ProgressListener(localhost_env(domain), clock.feed_progress, clock.feed_clock)
            except Exception as e:  # a bar is not worth a failed run
                click.echo(f"graph: no progress bar: {e}", err=True)
        deadline = time.monotonic() + GRAPH_TIMEOUT
        shown_total = None
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if (st := clock.state()) is not None:
                    bar.update(st[0], st[1] if st[1] != shown_total else None, description=f"graph {st[2]}")
                    shown_total = st[1]
                time.sleep(0.2)
            if proc.poll() is None:  # timed out: bringup stops its nodes on SIGINT
                proc.send_signal(signal.SIGINT)
                return -1
            return proc.returncode
        finally:
            if listener is not None:
                listener.close()
            try:  # bringup stops its nodes (Ctrl-C reaches it too): give it the time to
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            reader.join(timeout=10)


def run_through_graph(out: Path, cell: Any, as_json: bool = False,
                      dynamics: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``out/plan.json`` through the node graph, record ``out/graph_bag``, compare per pass with
    ``out/bag`` and add ``graph_vs_inprocess`` to ``out/summary.json``; returns that entry.

    ``dynamics``: extra parameters of dynamics_node (e.g. :func:`exchange_parameters`).

    Raises:
        click.ClickException: the graph did not run the job to its end (the log is named).
    """
    from robot_grinding_sim.core.config import cell_yaml
    from robot_grinding_sim.core.planning.plan_io import atomic_write
    from robot_grinding_sim.core.record.pass_forces import (
        compare_pass_forces,
        pass_force_means,
        plan_pass_timing,
        plan_pressing_axes,
    )

    out = Path(out)
    plan, bag, log = out / "plan.json", out / "graph_bag", out / "graph.log"
    if bag.exists():
        raise click.ClickException(f"{bag} exists already; choose a new --out or remove it")
    domain = graph_domain_id()
    cell = ran_cell(plan, cell)
    if cell.workpiece.link:
        # the robot holds the part: the executive's move from robot.home to the plan's start is a
        # joint move, not checked against the tool standing in the cell (it swung the part through
        # the ball); the arm starts where the in-process run starts, at the plan's first point
        from robot_grinding_sim.core.planning.plan_io import read_plan

        start = read_plan(plan)["trajectory"]["positions"][0]
        cell = cell.replace(**{"robot.home": [float(v) for v in start]})
    with tempfile.TemporaryDirectory(prefix="grinding_graph_") as tmp:
        params = Path(tmp) / "cell.yaml"
        text = cell_yaml(cell, header="the plan's cell, for every node of the graph run")
        if dynamics:
            import yaml

            text += yaml.safe_dump({"dynamics_node": {"ros__parameters": dict(dynamics)}})
        params.write_text(text)
        cmd = [sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--plan-file", str(plan), "--start",
               "--until-done", "--record", str(bag), "--domain-id", str(domain), "--params-file", str(params)]
        if not as_json:
            click.echo(f"graph: running {plan} through the node graph (ROS_DOMAIN_ID={domain}; output in {log}) ...",
                       err=True)
        t0 = time.monotonic()
        code = _run_logged(cmd, log, domain, enabled=not as_json)
        wall = time.monotonic() - t0
    if code != 0:
        last = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
        raise click.ClickException(f"the node graph did not run the job to its end (exit code {code}); see {log}"
                                   + (f" (its last line: {last[0]})" if last else ""))
    data = json.loads(plan.read_text())
    axes, timing = plan_pressing_axes(data), plan_pass_timing(data)
    # over each pass at full force (between its lead-in and lead-out), the window of the in-process
    # per-pass table: the whole segment's mean counts the ramps and reads about 3.5 N for 5 N
    lead = cell.process.lead_in
    rows = compare_pass_forces(pass_force_means(out / "bag", axes=axes, timing=timing, lead_in=lead),
                               pass_force_means(bag, axes=axes, timing=timing, lead_in=lead))
    entry = {"passes": rows,
             "max_abs_relative_difference": max(abs(r["relative_difference"]) for r in rows),
             "wall_time_s": wall, "dynamics_node": dict(dynamics or {}), "bag": str(bag), "log": str(log),
             "ros_domain_id": domain,
             "force": "mean of -F . a of /contact/wrench (tcp frame) over each pass at full force (the plan's pass "
                      "segment between its lead-in and lead-out, placed on the bag's clock by its progress samples), "
                      "a the pass's pressing axis (its waypoints' inward normal in tcp axes; the ball's: -F_z)"}
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text())
    if ((summary.get("removal") or {}).get("uniformity")) is not None:  # a depth was planned: the graph's map
        entry["removal"] = graph_removal(plan, bag, cell)
    summary["graph_vs_inprocess"] = entry
    summary.setdefault("outputs", {})["graph_bag"] = str(bag)
    atomic_write(summary_path, json.dumps(summary, indent=2))
    if not as_json:
        click.echo(f"graph vs in-process (force along the tool's pressing axis, each pass at full force, "
                   f"{wall:.0f} s wall):")
        click.echo(f"{'pass':>4} {'in-process N':>13} {'graph N':>9} {'diff':>8}")
        for r in rows:
            click.echo(f"{r['pass']:>4} {r['inprocess_mean_n']:>13.4f} {r['graph_mean_n']:>9.4f} "
                       f"{r['relative_difference']:>+8.3%}")
        if "removal" in entry:
            from robot_grinding_sim.core.planning.depth import uniformity_text

            for line in uniformity_text(entry["removal"]["uniformity"], "graph removal"):
                click.echo(line)
            if "replay" in entry["removal"]:
                rel = entry["removal"]["replay"]["relative_difference"]
                click.echo(f"graph removal: contact_solver_node's map; the map replayed from the bag is within "
                           f"{rel:.2%} of it" + (f" (more than {REPLAY_AGREEMENT:.0%}: the node's map or the bag "
                                                 f"is not what the run did; see {log})" if rel > REPLAY_AGREEMENT
                                                else ""))
    return entry


def ran_cell(plan: Path, cell: Any) -> Any:
    """The cell the in-process run ran with: ``plan``'s own (plan.json ``cell``: the depth plan's
    stepover, feed and lead-in, the offsets' cell values), else ``cell``. The caller's cell is the
    one before planning: with it the graph's nodes and its removal figures would use another
    stepover and lead-in than the run they are compared with."""
    from robot_grinding_sim.core.planning.plan_io import cell_of, read_plan

    return cell_of(read_plan(plan), plan) or cell


def graph_removal(plan: Path, bag: Path, cell: Any) -> dict[str, Any]:
    """graph_vs_inprocess ``removal``: the uniformity against the plan's target depth of the map
    contact_solver_node built in the graph (its last ``/grinding/removal_depth`` on its
    ``/grinding/removal_nodes`` in ``bag``, :func:`~robot_grinding_sim.core.record.removal_map.read_removal_map`;
    the node's grid must be the job's, :func:`~robot_grinding_sim.core.job.removal.job_grid`), and
    as a cross-check the map replayed from the bag's /joint_states and /contact/wrench
    (:func:`~robot_grinding_sim.core.job.removal.replay_removal`, the joint velocities by
    differences): ``replay`` holds its figures and how far the two maps are apart. A bag without the
    node's map (a mesh part, removal off) gets the replay's figures, and ``how`` says so."""
    import numpy as np

    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.core.job.removal import depth_figures, job_grid, replay_removal
    from robot_grinding_sim.core.job.setup import JobConfig, setup_job
    from robot_grinding_sim.core.planning.depth import public
    from robot_grinding_sim.core.record.bag import has_topic, read_joint_states, read_wrench
    from robot_grinding_sim.core.record.removal_map import DEPTH_TOPIC, NODES_TOPIC, read_removal_map

    setup = setup_job(JobConfig(cell=ran_cell(plan, cell), plan_file=str(plan)))
    t, names, q = read_joint_states(bag)
    order = [names.index(n) for n in setup.model.joint_names]
    q = q[:, order]
    keep = np.r_[True, np.diff(t) > 0]
    t, q = t[keep], q[keep]
    qd = np.gradient(q, t, axis=0) if len(t) > 2 else np.zeros_like(q)
    w = read_wrench(bag, "/contact/wrench")
    force = np.column_stack([np.interp(t, w.t, w.force[:, k], left=0.0, right=0.0) for k in range(3)])
    replayed = replay_removal(setup, t, q, qd, force)

    def entry(grid: Any) -> dict[str, Any]:
        figures = depth_figures(setup, grid)
        return {"uniformity": public(figures) if figures is not None else None, "volume_m3": grid.volume(),
                "max_depth_m": float(grid.depth[grid.inside].max(initial=0.0))}

    if not (has_topic(bag, NODES_TOPIC) and has_topic(bag, DEPTH_TOPIC)):
        return {**entry(replayed), "how": f"replayed from graph_bag's /joint_states and /contact/wrench on the "
                                          f"job's grid (the bag has no {NODES_TOPIC} / {DEPTH_TOPIC})"}
    rc = setup.cell.removal
    node_map, _ = read_removal_map(bag, rc.kp, rc.pressure)
    ref = job_grid(setup)
    if len(node_map.points) != len(ref.points) or not np.allclose(node_map.points, ref.points, rtol=0.0, atol=1e-9):
        raise InputError(f"{bag}: contact_solver_node's removal map ({len(node_map.points)} nodes) is not on the "
                         f"job's grid ({len(ref.points)} nodes): was it given the plan (plan_file)?")
    node_map.node_face = ref.node_face
    out = {**entry(node_map), "how": f"contact_solver_node's map: the last {DEPTH_TOPIC} on its {NODES_TOPIC} in "
                                     f"graph_bag (the job's grid)"}
    inside = ref.inside
    diff = float(np.linalg.norm((replayed.depth - node_map.depth)[inside]))
    norm = float(np.linalg.norm(node_map.depth[inside]))
    out["replay"] = {**entry(replayed), "relative_difference": diff / norm if norm > 0 else 0.0,
                     "how": "the cross-check: the map replayed from graph_bag's /joint_states and /contact/wrench "
                            "on the job's grid; relative_difference = |replay - node map| / |node map| over the "
                            "face's nodes (2-norms)"}
    return out

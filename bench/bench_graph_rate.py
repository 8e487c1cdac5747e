"""The node graph at 1 kHz lockstep: real-time factor and each node's CPU work per step.

Runs a plan through ``grinding bringup sim --plan-file PLAN --start`` (dynamics_node in lockstep
with collision_node and contact_solver_node over DDS on loopback, grinding_executive, planner_node
on standby, description_publisher; with ``--record`` also the recorder), and over a window of
``--window`` s of wall time from the moment the job runs measures:

- the graph's real-time factor: sim time advanced (from ``/clock``, which dynamics_node owns) /
  wall time;
- each node's CPU time (user + system, from /proc) per simulated step of ``sim.dt``: the work a
  node does per step, callbacks, serialisation and DDS included. At 1x real time a node whose work
  per step is <= 500 us at 1 ms steps leaves 2x headroom;
- the "cannot keep up" warnings dynamics_node logged in the window.

Without ``--plan`` it first writes the full default plan (``grinding plan --no-optimise``, all
passes of curved_panel: longer than any window). Several minutes on 2 cores.

Run: ``.venv/bin/python bench/bench_graph_rate.py [--window 60] [--record] [--plan plan.json]
[--params-file F] [--fine] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> dict[int, str]:
    """Direct children of ``pid``: {pid: node module name (or the command line)}."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            m = re.search(r"robot_grinding_sim\.nodes\.(\w+)", cmd)
            out[int(d.name)] = m.group(1) if m else cmd[:60]
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far, s (0 once it is gone)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / CLK_TCK


class ClockWatch:
    """(wall, sim) pairs of /clock, from a node of this process (EventsExecutor, a thread)."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.experimental import EventsExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        rclpy.init(args=[])
        self.node = Node("bench_graph_rate_clock")
        self.last: tuple[float, float] | None = None
        self.history: list[tuple[float, float]] = []  # every (wall, sim) heard, for the lag over the window
        self.node.create_subscription(Clock, "/clock", self._on_clock,
                                      QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.ex = EventsExecutor()
        self.ex.add_node(self.node)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _on_clock(self, msg) -> None:
        self.last = (time.monotonic(), msg.clock.sec + msg.clock.nanosec * 1e-9)
        self.history.append(self.last)

    def _spin(self) -> None:
        while not self.stop.is_set():
            self.ex.spin_once(timeout_sec=0.1)

    def close(self) -> None:
        from robot_grinding_sim.ros import compat

        self.stop.set()
        self.thread.join(timeout=2.0)
        self.ex.shutdown()
        self.node.destroy_node()
        compat.shutdown()


def snapshot(pids: dict[int, str]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for pid, name in pids.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", type=Path, help="plan.json to run (default: the full default plan, written first)")
    ap.add_argument("--window", type=float, default=60.0, help="wall seconds measured from the job's start")
    ap.add_argument("--record", action="store_true", help="also run the recorder (an MCAP bag in a temp dir)")
    ap.add_argument("--params-file", action="append", default=[], help="extra ROS parameter yaml for every node")
    ap.add_argument("--dt", type=float, default=0.001, help="sim.dt of the graph (for the per-step figures), s")
    ap.add_argument("--fine", action="store_true", help="also print the lag every 0.1 s for the window's first 4 s")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
    env.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_DOMAIN_ID")})
    with tempfile.TemporaryDirectory(prefix="bench_graph_rate_") as tmp:
        plan = args.plan
        if plan is None:
            plan = Path(tmp) / "plan.json"
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "robot_grinding_sim.cli", "plan", "--no-optimise", "--out",
                            str(plan)], check=True, capture_output=True, env=env)
            if not args.json:
                print(f"planned the full default job in {time.monotonic() - t0:.0f} s: {plan}", flush=True)
        cmd = [sys.executable, "-m", "robot_grinding_sim.cli", "bringup", "sim", "--plan-file", str(plan), "--start",
               "--domain-id", env["ROS_DOMAIN_ID"]]
        for f in args.params_file:
            cmd += ["--params-file", f]
        if args.record:
            cmd += ["--record", str(Path(tmp) / "bag")]
        clock = ClockWatch()
        lines: list[str] = []
        running = threading.Event()
        done = threading.Event()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                start_new_session=True)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(f"{time.monotonic():.3f} {line}")
                if "job running" in line:
                    running.set()
                if "job done" in line or "job failed" in line or "job stopped" in line:
                    done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            if not running.wait(timeout=300.0):
                raise SystemExit("the job did not start within 300 s:\n" + "".join(lines[-20:]))
            pids = children(proc.pid)
            t_wall0, c0 = time.monotonic(), snapshot(pids)
            first_line = len(lines)
            while clock.last is None and time.monotonic() - t_wall0 < 30:
                time.sleep(0.05)
            s0 = clock.last
            done.wait(timeout=args.window)
            t_wall1, c1 = time.monotonic(), snapshot(pids)
            s1 = clock.last
            window_lines = lines[first_line:]
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            reader.join(timeout=5)
            clock.close()
    if s0 is None or s1 is None:
        raise SystemExit("no /clock heard")
    wall = t_wall1 - t_wall0
    sim = s1[1] - s0[1]
    steps = max(sim / args.dt, 1.0)
    rows = sorted(((name, (c1[name] - c0[name]) / steps * 1e6) for name in c0), key=lambda r: -r[1])
    def since_start(ln: str, digits: int = 1) -> str:
        """A log line as '+t s: text', t s after the window's start (its first field is the reader's clock)."""
        at, text = ln.split(" ", 1)
        return f"+{float(at) - t_wall0:.{digits}f} s: {text.strip()}"

    warnings = [since_start(ln) for ln in window_lines if "cannot keep up" in ln]
    # how far sim time fell behind the wall clock (x the asked factor, 1), s: the worst and when
    lag = [((w - s0[0]) - (s - s0[1]), w - t_wall0) for w, s in clock.history if s0[0] <= w <= t_wall1]
    worst_lag, worst_at = max(lag, default=(0.0, 0.0))
    keep_up = len(warnings)
    result = {"wall_s": wall, "simulated_s": sim, "real_time_factor": sim / wall, "dt_s": args.dt,
              "record": args.record, "work_per_step_us": dict(rows),
              "headroom_at_1x": min(args.dt * 1e6 / us for _, us in rows if us > 0),
              "cannot_keep_up_warnings": warnings, "worst_lag_s": worst_lag, "worst_lag_at_s": worst_at,
              "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"window {wall:.1f} s wall, {sim:.2f} s simulated: {sim / wall:.2f}x real time at {args.dt * 1e3:g} ms "
          f"steps{' with the recorder' if args.record else ''} (load average {result['load_average']:.1f}, "
          f"{os.cpu_count()} cores)")
    print(f"{'node':<24} {'CPU us per step':>16} {'headroom at 1x':>15}")
    for name, us in rows:
        print(f"{name:<24} {us:>16.0f} {args.dt * 1e6 / us if us > 0 else float('inf'):>14.1f}x")
    print(f"sim time's worst lag behind the wall clock in the window: {worst_lag * 1e3:.0f} ms at +{worst_at:.1f} s")
    marks = [next((f"{l * 1e3:.0f}" for l, at in lag if at >= m), "-") for m in range(5, int(wall) + 1, 5)]
    print(f"lag every 5 s, ms: {' '.join(marks)}")
    if args.fine:
        fine = [next((f"{l * 1e3:.0f}" for l, at in lag if at >= m / 10), "-") for m in range(1, 40)]
        print(f"lag every 0.1 s for 4 s, ms: {' '.join(fine)}")
    print(f"'cannot keep up' warnings in the window: {keep_up}")
    for ln in warnings[:5]:
        print(f"  {ln}")
    if os.environ.get("GRINDING_SLOW_CALLBACK_MS"):
        slow = [since_start(ln, 2) for ln in window_lines if "callback" in ln and " ms" in ln]
        print(f"slow callbacks in the window: {len(slow)}")
        for ln in slow[:400]:
            print(f"  {ln}")


if __name__ == "__main__":
    main()

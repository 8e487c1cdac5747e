"""hardware_driver's hold latency end to end, from the sensor's event, under CPU load.

The promise (DESIGN.md, issue 10 and 22): a stop command within 2 control periods of its cause.
This measures it from outside, from the event itself (not from when the driver saw it):

- the cell: the emulated arm, dynamics_node on wall time publishing /joint_states at 500 Hz and
  following the driver's output (``--cell arm``, the default: no contact; ``--cell emulate``: all of
  ``grinding emulate``, whose arm computes its contact at every step: on two shared cores it cannot
  keep up even before the hogs start, and its silences are the arm's, not the driver's);
- ``hardware_driver`` in real mode with config/hardware_driver.yaml (control_rate 500 Hz: 2 ms
  periods; ft_timeout and joint_states_timeout 0.1 s), reading
- the sensor: an :class:`~robot_grinding_sim.hardware.rdt_emulator.RDTEmulator` (the Net F/T's
  protocol on 127.0.0.1, ``--ft-rate`` 1 kHz) in a process of its own, which injects the events at
  instants known on ``time.monotonic()`` (one clock for every process here);
- ``--hogs`` (2) CPU-bound processes (``while True: pass``) beside them, on this machine's cores.

Events, ``--trials`` of each, in turn, each from a calm, reset driver:

- over-force: the sensor reads 200 N from emulator time t on; the event is the first sample at or
  after t (``epoch + k / rate``);
- silence: the sensor stops sending; the event is when its last record sent passes ``ft_timeout``
  (``epoch + last sample + ft_timeout``): the hold is due then;
- e-stop: ``~/emergency_stop`` true; the event is the service call here.

Latency: the hold's arrival here (a subscription to the driver's output topic, time.monotonic())
minus the event: so it includes one DDS hop and this process's scheduling, an upper bound of the
driver's own. Printed per event in ms and control periods (median, 90th percentile, max; how many
within 2 periods), with the driver's own ``hold_after_s`` (/diagnostics) beside it, and the stops
nobody caused (spurious: a cause other than the event's, e.g. "F/T stale" or "joint states silent"
at the 0.1 s defaults under load) with their causes, over the run's duration.

``--driver-path DIR`` runs the driver (only) from another checkout (PYTHONPATH=DIR), to measure an
older driver against the same sensor, cell and load.

    .venv/bin/python bench/bench_driver_hold.py [--trials 20] [--hogs 2] [--cell emulate|arm]
        [--ft-rate 1000] [--domain-id 51] [--driver-path DIR]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT_TOPIC = "/scaled_joint_trajectory_controller/joint_trajectory"
OVER_FORCE_N = 200.0


# -- the sensor, in a process of its own -------------------------------------------------------------
def sensor_main(conn: Any, rate: float) -> None:
    """An RDTEmulator driven by commands on ``conn``; answers each with a value."""
    import numpy as np

    from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator

    calm = np.array([0.5, -0.3, 2.0, 0.01, 0.02, 0.0])
    state: dict[str, Any] = {"at": math.inf, "to": calm, "sent_at": None}

    def source(t: float) -> np.ndarray:  # called as each record is built, right before it is sent
        if t >= state["at"]:
            if state["sent_at"] is None:
                state["sent_at"] = time.monotonic()
            return state["to"]
        return calm

    with RDTEmulator(source, rate_hz=rate, counts_per_force=1e6, counts_per_torque=1e6) as emu:
        conn.send(("ready", emu.address[1], emu.epoch))
        while True:
            cmd, arg = conn.recv()
            if cmd == "quit":
                break
            if cmd == "step":  # arg: delay from now, s -> the event's time.monotonic()
                t = emu.clock() + arg
                state["sent_at"] = None
                state["at"], state["to"] = t, calm + np.array([0.0, 0.0, OVER_FORCE_N, 0, 0, 0])
                conn.send(emu.epoch + math.ceil(t * rate - 1e-9) / rate)
            elif cmd == "sent_at":  # when the first record of the step was sent (time.monotonic())
                conn.send(state["sent_at"])
            elif cmd == "calm":
                state["at"] = math.inf
                conn.send(None)
            elif cmd == "silence":
                emu.silence(bool(arg))
                conn.send(None)
            elif cmd == "last_sample":
                conn.send(None if emu.last_sample is None else emu.epoch + emu.last_sample)
            elif cmd == "counters":
                conn.send({"sent": emu.sent, "late_skips": emu.late_skips, "skipped": emu.skipped})


class Sensor:
    def __init__(self, rate: float) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=sensor_main, args=(child, rate), daemon=True)
        self.proc.start()
        _, self.port, self.epoch = self.conn.recv()

    def ask(self, cmd: str, arg: Any = None) -> Any:
        self.conn.send((cmd, arg))
        return self.conn.recv()

    def close(self) -> None:
        try:
            self.conn.send(("quit", None))
        except OSError:
            pass
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


# -- processes --------------------------------------------------------------------------------------
def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(cmd: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    # cwd: ``python -m`` puts it first on sys.path (before PYTHONPATH)
    with log.open("ab") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=cwd)


def stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGINT)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def wait_log(log: Path, text: str, procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise SystemExit(f"waiting for {text!r} in {log}: " + (log.read_text(errors="replace")[-3000:]
                                                                    if log.exists() else "no log"))
        time.sleep(0.2)


# -- the probe ------------------------------------------------------------------------------------------
class Probe:
    """An rclpy node here: the driver's output (holds, with their arrival time), its /diagnostics,
    and its services."""

    def __init__(self) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import SetBool, Trigger
        from trajectory_msgs.msg import JointTrajectory

        rclpy.init()
        self.node = rclpy.create_node(f"bench_driver_hold_{os.getpid()}")
        self.holds: list[float] = []
        self.diag: dict[str, str] = {}
        self.lock = threading.Lock()
        from geometry_msgs.msg import WrenchStamped

        self.node.create_subscription(JointTrajectory, OUT_TOPIC, self._on_out, 100)
        # the driver's raw readings: (arrival, the driver's date of the reading as time.monotonic(), Fz)
        self.raw: list[tuple[float, float, float]] = []
        self.node.create_subscription(WrenchStamped, "/hardware_driver/wrench_raw", self._on_raw, 1000)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 100)
        self.estop = self.node.create_client(SetBool, "/hardware_driver/emergency_stop")
        self.reset = self.node.create_client(Trigger, "/hardware_driver/reset")
        self.SetBool, self.Trigger = SetBool, Trigger
        self.ex = SingleThreadedExecutor()
        self.ex.add_node(self.node)
        self.thread = threading.Thread(target=self.ex.spin, daemon=True)
        self.thread.start()

    def _on_out(self, msg: Any) -> None:
        t = time.monotonic()
        if len(msg.points) == 1 and not any(msg.points[0].velocities):
            with self.lock:
                self.holds.append(t)

    def _on_raw(self, msg: Any) -> None:
        t = time.monotonic()
        dated = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec - (time.time() - time.monotonic())
        with self.lock:
            self.raw.append((t, dated, msg.wrench.force.z))
            del self.raw[:-2000]

    def _on_diag(self, msg: Any) -> None:
        for s in msg.status:
            if s.name.endswith("hardware_driver: safety"):
                with self.lock:
                    self.diag = {**{k.key: k.value for k in s.values}, "message": s.message}

    def n_holds(self) -> int:
        with self.lock:
            return len(self.holds)

    def call(self, client: Any, request: Any, timeout: float = 30.0) -> Any:
        if not client.wait_for_service(timeout_sec=timeout):
            raise SystemExit(f"no service {client.srv_name}")
        fut = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not fut.done():
            if time.monotonic() > deadline:
                raise SystemExit(f"{client.srv_name}: no answer in {timeout} s")
            time.sleep(0.001)
        return fut.result()

    def wait(self, pred: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            time.sleep(0.002)

    def close(self) -> None:
        import rclpy

        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown()


# -- the run ----------------------------------------------------------------------------------------------
def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="events of each kind")
    ap.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside the cell")
    ap.add_argument("--cell", choices=("emulate", "arm"), default="arm",
                    help="arm: dynamics_node alone (no contact); emulate: grinding emulate (contact at every step)")
    ap.add_argument("--ft-rate", type=float, default=1000.0, help="the sensor's record rate, Hz")
    ap.add_argument("--domain-id", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "51")))
    ap.add_argument("--driver-path", type=Path, default=None, help="run the driver from this checkout")
    ap.add_argument("--settle", type=float, default=1.0, help="calm time before each event, s")
    args = ap.parse_args()

    os.environ.update(ROS_DOMAIN_ID=str(args.domain_id), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RCUTILS_COLORIZED_OUTPUT": "0"}
    tmp = Path(tempfile.mkdtemp(prefix="bench_driver_hold_"))
    sensor = Sensor(args.ft_rate)  # before rclpy: a spawned process, its own interpreter
    procs: list[subprocess.Popen[bytes]] = []
    hogs: list[subprocess.Popen[bytes]] = []
    probe = None
    try:
        grinding = [sys.executable, "-m", "robot_grinding_sim.cli"]
        cell_log = tmp / "cell.log"
        if args.cell == "emulate":
            procs.append(spawn([*grinding, "emulate", "--domain-id", str(args.domain_id), "--port",
                                str(free_udp_port())], cell_log, env, tmp))
            wait_log(cell_log, "cell ready", procs, 900)
        else:
            procs.append(spawn([sys.executable, "-m", "robot_grinding_sim.nodes.dynamics_node", "--ros-args",
                                "--params-file", str(REPO / "config" / "cell.yaml"), "--params-file",
                                str(REPO / "config" / "dynamics_node.yaml"), "-p", "publish_clock:=false",
                                "-p", "use_sim_time:=false", "-p", "coupling:=none", "-p", "max_lag:=1.0",
                                "-p", "joint_state_decimation:=2", "-p", "wait_for_contact:=false",
                                "-r", "joint_trajectory_controller/joint_trajectory:=" + OUT_TOPIC],
                               cell_log, env, tmp))
            wait_log(cell_log, "simulating", procs, 600)
        drv_env = dict(env)
        if args.driver_path is not None:
            drv_env["PYTHONPATH"] = str(args.driver_path.resolve())
        drv_log = tmp / "driver.log"
        procs.append(spawn([sys.executable, "-m", "robot_grinding_sim.nodes.hardware_driver", "--ros-args",
                            "--params-file", str(REPO / "config" / "cell.yaml"), "--params-file",
                            str(REPO / "config" / "hardware_driver.yaml"), "-p", "ft_sensor_ip:=127.0.0.1",
                            "-p", f"ft_port:={sensor.port}", "-p", f"ft_rate:={args.ft_rate}",
                            "-p", "diagnostics_rate:=5.0"], drv_log, drv_env,
                           args.driver_path.resolve() if args.driver_path else tmp))
        wait_log(drv_log, "ready:", procs, 600)
        probe = Probe()
        probe.wait(lambda: probe.diag.get("state") in ("ok", "stopped"), 300, "the driver's diagnostics")
        period = float(probe.diag.get("control_period_s", "0.002"))
        ft_timeout = float(probe.diag.get("ft_timeout_s", "0.1"))
        hogs += [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
        print(f"driver {'from ' + str(args.driver_path) if args.driver_path else 'of this checkout'}; cell "
              f"{args.cell}; F/T {args.ft_rate:g} Hz; control period {period * 1e3:g} ms; ft_timeout {ft_timeout:g} s; "
              f"{args.hogs} CPU hogs; logs in {tmp}", flush=True)

        results: dict[str, list[tuple[float, float | None]]] = {"over-force": [], "silence": [], "e-stop": []}
        spurious: list[str] = []
        sensor_lag: list[float] = []  # over-force: the emulated sensor's own delay in sending the event
        dating: list[float] = []  # over-force: the driver's sample time of the event's reading - the true one
        rng = random.Random(0)

        def calm_and_reset() -> None:
            """Wait until the driver resets (it refuses while a cause persists)."""
            deadline = time.monotonic() + 120
            while True:
                r = probe.call(probe.reset, probe.Trigger.Request())
                if r.success and probe.diag.get("state") != "stopped":
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"the driver does not reset: {r.message}")
                time.sleep(0.05)

        def settle() -> None:
            """``--settle`` s with no stop; a stop meanwhile is spurious (counted, reset, again)."""
            while True:
                n0 = probe.n_holds()
                t_end = time.monotonic() + args.settle * (0.5 + rng.random())
                while time.monotonic() < t_end and probe.n_holds() == n0:
                    time.sleep(0.005)
                if probe.n_holds() == n0:
                    return
                time.sleep(0.3)  # the diagnostics of the stop
                spurious.append(probe.diag.get("causes", "?"))
                calm_and_reset()

        def hold_after(n0: int, what: str) -> float:
            probe.wait(lambda: probe.n_holds() > n0, 60, f"the hold after {what}")
            with probe.lock:
                return probe.holds[n0]

        def own() -> float | None:
            time.sleep(0.3)
            v = probe.diag.get("hold_after_s", "")
            return float(v) if v else None

        calm_and_reset()  # a stop while it started (an older driver latches one)
        t_start = time.monotonic()
        for trial in range(args.trials):
            # over-force
            settle()
            n0 = probe.n_holds()
            t_event = sensor.ask("step", 0.01 + 0.02 * rng.random())
            t_hold = hold_after(n0, "the over-force")
            results["over-force"].append((t_hold - t_event, own()))
            sent_at = sensor.ask("sent_at")
            if sent_at is not None:
                sensor_lag.append(sent_at - t_event)
            with probe.lock:  # the driver's date of the event's reading against the truth
                first = next(((a, d) for a, d, fz in probe.raw if fz > OVER_FORCE_N / 2 and d >= t_event - 0.05), None)
            if first is not None:
                dating.append(first[1] - t_event)
            if "over-force" not in probe.diag.get("causes", ""):
                spurious.append(probe.diag.get("causes", "?"))
            sensor.ask("calm")
            time.sleep(0.2)
            calm_and_reset()
            # silence
            settle()
            n0 = probe.n_holds()
            sensor.ask("silence", True)
            t_hold = hold_after(n0, "the silence")
            last = sensor.ask("last_sample")
            results["silence"].append((t_hold - (last + ft_timeout), own()))
            sensor.ask("silence", False)
            time.sleep(0.2)
            calm_and_reset()
            # e-stop
            settle()
            n0 = probe.n_holds()
            t_call = time.monotonic()
            probe.call(probe.estop, probe.SetBool.Request(data=True))
            t_hold = hold_after(n0, "the e-stop")
            results["e-stop"].append((t_hold - t_call, own()))
            calm_and_reset()
            print(f"trial {trial + 1}/{args.trials}: " + ", ".join(
                f"{k} {v[-1][0] * 1e3:.1f} ms" for k, v in results.items()), flush=True)
        duration = time.monotonic() - t_start
        counters = sensor.ask("counters")
        cell_text = cell_log.read_text(errors="replace")

        print(f"\nhold latency from the sensor's event (arrival here), {args.trials} trials, control period "
              f"{period * 1e3:g} ms, {args.hogs} CPU hogs:")
        print(f"{'event':<11} {'median':>8} {'p90':>8} {'max':>8} ms   {'median':>6} {'p90':>6} {'max':>6} periods  "
              f"within 2 periods   driver's own median / max")
        for k, v in results.items():
            lat = [x for x, _ in v]
            owns = [o for _, o in v if o is not None]
            within = sum(x <= 2 * period for x in lat)
            own_txt = (f"{percentile(owns, 0.5) * 1e3:.1f} / {max(owns) * 1e3:.1f} ms" if owns else "-")
            print(f"{k:<11} {percentile(lat, 0.5) * 1e3:8.1f} {percentile(lat, 0.9) * 1e3:8.1f} {max(lat) * 1e3:8.1f}"
                  f"      {percentile(lat, 0.5) / period:6.1f} {percentile(lat, 0.9) / period:6.1f} "
                  f"{max(lat) / period:6.1f}          {within}/{len(lat)}          {own_txt}")
        if sensor_lag:
            print(f"over-force: the emulated sensor sent the event's first record "
                  f"{percentile(sensor_lag, 0.5) * 1e3:.1f} ms (median; max {max(sensor_lag) * 1e3:.1f} ms) after its "
                  "sample instant (its process starved)")
        if dating:
            print(f"over-force: the driver dated the event's reading {percentile(dating, 0.5) * 1e3:+.2f} ms (median; "
                  f"{min(dating) * 1e3:+.2f} to {max(dating) * 1e3:+.2f} ms) from its true sample instant (its own "
                  "figure counts from that date)")
        load = os.getloadavg()
        print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} cores)")
        print(f"spurious stops: {len(spurious)} in {duration:.0f} s"
              + (f" ({', '.join(f'{c}: {spurious.count(c)}' for c in sorted(set(spurious)))})" if spurious else ""))
        # the emulated devices share the cores too: a starved sensor or arm is silent for real
        print(f"the emulated sensor fell behind its clock {counters['late_skips']} times ({counters['skipped']} "
              f"samples skipped of {counters['sent'] + counters['skipped']}); the emulated arm warned "
              f"{cell_text.count('cannot keep up')} times that it could not keep up")
        return 0
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if probe is not None:
            probe.close()
        for p in reversed(procs):
            stop(p)
        sensor.close()


if __name__ == "__main__":
    sys.exit(main())

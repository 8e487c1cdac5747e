"""Recorder benchmark: a 1 kHz WrenchStamped stream for N minutes, published against recorded.

This process publishes ``/bench/wrench`` (geometry_msgs/WrenchStamped, reliable, history depth
``--depth``: by default what the package's own 1 kHz publishers keep, ``wire.STREAM_DEPTH``) at
``--rate`` Hz, paced on the monotonic clock, with ``force.z`` = the message's sequence number. A
publish that DDS refuses is retried with the same number and counted.
The ``recorder`` node runs as a separate process (as in use) and writes an MCAP (or sqlite3) bag.
At the end the recorder is stopped with SIGINT and the bag is read back with ``rosbags``: every
sequence number must be there exactly once (0 lost, 0 duplicated, in order), and what the recorder
reports lost (its metadata.yaml, core/record/loss.py) must be what the bag lacks.

A reliable publisher of depth N keeps only its last N samples: a subscriber that has not taken a
sample before N more are written loses it (Fast DDS's shared-memory transport hands readers the
writer's own buffers, which the writer reuses). At 1 kHz and depth 1000 the recorder's process
has a second of slack (at the former 50: 50 ms).

``ros2 bag record`` (the natural peer) is not installable on the pip path, so there is no peer
column; the figure is the loss count against the target of 0.

Usage::

    .venv/bin/python bench/bench_recorder.py                 # 10 minutes at 1 kHz
    .venv/bin/python bench/bench_recorder.py --minutes 0.5   # a short run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

TOPIC = "/bench/wrench"


def metadata_count(bag: Path) -> int:
    try:
        doc = yaml.safe_load((bag / "metadata.yaml").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return 0
    return int(doc["rosbag2_bagfile_information"]["message_count"])


PEER = r"""
import os, sys, rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import WrenchStamped
topic, out = sys.argv[1], sys.argv[2]
rclpy.init()
node = rclpy.create_node("bench_recorder_peer")
n = [0]
def on_message(data):
    n[0] += 1
qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10000, reliability=ReliabilityPolicy.RELIABLE)
node.create_subscription(WrenchStamped, topic, on_message, qos, raw=True)
def dump():
    with open(out + ".tmp", "w") as fh:
        fh.write(str(n[0]))
    os.replace(out + ".tmp", out)
node.create_timer(0.5, dump)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
dump()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="stream duration (default 10)")
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second (default 1000)")
    ap.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    ap.add_argument("--depth", type=int, default=None,
                    help="the publisher's history depth (default: wire.STREAM_DEPTH, the package's own 1 kHz "
                         "publishers')")
    ap.add_argument("--out", default=None, help="bag directory (default: a temporary one, deleted)")
    ap.add_argument("--stall", type=float, default=0.0,
                    help="halfway, the publisher stalls this long (s) and then sends what fell due at once, as a "
                         "descheduled publisher does (default 0: only what the machine's load causes)")
    ap.add_argument("--no-peer", action="store_true",
                    help="skip the peer run (a bare rclpy raw subscriber that only counts)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    from robot_grinding_sim.environment import localhost_env

    env = localhost_env(domain_id=int(os.environ.get("BENCH_DOMAIN_ID", 1 + os.getpid() % 100)))
    os.environ.update(env)

    import rclpy

    from robot_grinding_sim.ros.wire import STREAM_DEPTH

    if args.depth is None:
        args.depth = STREAM_DEPTH
    tmp = None
    if args.out:
        bag = Path(args.out)
        work = bag.parent
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_recorder_")
        work = Path(tmp.name)
        bag = work / "bag"
    work.mkdir(parents=True, exist_ok=True)
    rclpy.init()
    node = rclpy.create_node("bench_recorder_publisher")
    try:
        # 1. the recorder
        cmd = [
            sys.executable, "-m", "robot_grinding_sim.nodes.recorder", "--ros-args",
            "-p", f"output:={bag}", "-p", f"storage:={args.storage}", "-p", f"topics:=['{TOPIC}']",
        ]
        ours = _phase(args, node, TOPIC, cmd, work / "recorder.log", env, lambda: metadata_count(bag))
        from rosbags.highlevel import AnyReader

        seen = []
        with AnyReader([bag]) as r:
            for conn, _, raw in r.messages():
                seen.append(int(r.deserialize(raw, conn.msgtype).wrench.force.z))
        unique = len(set(seen))
        from robot_grinding_sim.core.record.bag import recording_report

        report = (recording_report(bag) or {}).get("topics", {}).get(TOPIC, {})
        ours.update(
            recorded=len(seen),
            lost=ours["published"] - unique,
            duplicated=len(seen) - unique,
            in_order=all(a < b for a, b in zip(seen, seen[1:], strict=False)),
            bag_bytes=sum(f.stat().st_size for f in bag.iterdir()),
            reported_lost=report.get("lost"),
            reported_dds_sample_lost=report.get("dds_sample_lost"),
        )
        # 2. the peer: the floor of a Python subscriber on this machine (same QoS, same executor)
        peer = None
        if not args.no_peer:
            count_file = work / "peer.count"

            def peer_count() -> int:
                try:
                    return int(count_file.read_text() or 0)
                except (FileNotFoundError, ValueError):
                    return 0

            cmd = [sys.executable, "-c", PEER, TOPIC + "_peer", str(count_file)]
            peer = _phase(args, node, TOPIC + "_peer", cmd, work / "peer.log", env, peer_count)
            peer.update(recorded=peer_count(), lost=peer["published"] - peer_count())
    finally:
        node.destroy_node()
        rclpy.shutdown()

    result = {"minutes": args.minutes, "rate_hz": args.rate, "storage": args.storage, "publisher_depth": args.depth,
              "stall_s": args.stall,
              "recorder": ours,
              "peer_bare_rclpy_counter": peer}
    if peer:
        result["cpu_ratio_recorder_over_peer"] = ours["subscriber_cpu_fraction"] / peer["subscriber_cpu_fraction"]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"recorder bench: {args.minutes:g} min at {args.rate:g} Hz ({args.storage}, publisher depth "
              f"{args.depth}): published {ours['published']}, recorded {ours['recorded']}, lost {ours['lost']} "
              f"(the recorder reports {ours['reported_lost']}; DDS sample-lost {ours['reported_dds_sample_lost']}), "
              f"duplicated {ours['duplicated']}, in order {ours['in_order']}; achieved "
              f"{ours['publish_rate_hz']:.1f} Hz, "
              f"recorder CPU {100 * ours['subscriber_cpu_fraction']:.0f} % of one core, "
              f"bag {ours['bag_bytes'] / 1e6:.1f} MB")
        if peer:
            print(f"peer (bare rclpy raw subscriber, counts only): received {peer['recorded']} of "
                  f"{peer['published']}, CPU {100 * peer['subscriber_cpu_fraction']:.0f} % of one core; "
                  f"recorder/peer CPU ratio {result['cpu_ratio_recorder_over_peer']:.2f}")
    if tmp is not None:
        tmp.cleanup()
    ok = ours["lost"] == 0 and ours["duplicated"] == 0 and ours["exit_code"] == 0 and ours["reported_lost"] == 0
    return 0 if ok else 1


def _phase(args: argparse.Namespace, node: Any, topic: str, cmd: list[str], log_path: Path,
           env: dict[str, str], done: Any) -> dict[str, Any]:
    """Start the subscriber process ``cmd``, stream to ``topic``, wait for ``done()``, stop it."""
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=args.depth, reliability=ReliabilityPolicy.RELIABLE)
        pub = node.create_publisher(WrenchStamped, topic, qos)
        deadline = time.monotonic() + 60.0
        while pub.get_subscription_count() < 1:
            if proc.poll() is not None or time.monotonic() > deadline:
                print(log_path.read_text()[-3000:], file=sys.stderr)
                raise SystemExit(f"the subscriber of {topic} did not subscribe")
            time.sleep(0.05)
        total = int(round(args.minutes * 60.0 * args.rate))
        msg = WrenchStamped()
        msg.header.frame_id = "ft_sensor"
        clock = node.get_clock()
        sent = 0
        t0 = time.monotonic()
        next_report = t0 + 60.0
        late_max = 0.0
        refused = 0
        load = []
        stall_at = total // 2 if args.stall > 0 else -1
        while sent < total:
            if sent == stall_at:
                time.sleep(args.stall)
                stall_at = -1
            now = time.monotonic()
            due = min(total, int((now - t0) * args.rate) + 1)
            late_max = max(late_max, (due - sent - 1) / args.rate)
            while sent < due:
                msg.header.stamp = clock.now().to_msg()
                msg.wrench.force.z = float(sent)
                try:
                    pub.publish(msg)
                except Exception as exc:  # rclpy RCLError: DDS refused the sample; retry it shortly
                    refused += 1
                    if refused <= 3:
                        print(f"  publish {sent} refused ({exc}); retrying", file=sys.stderr, flush=True)
                    time.sleep(0.001)
                    continue
                sent += 1
            if now >= next_report:
                load.append(os.getloadavg()[0])
                print(f"  {topic}: {sent} published, {done()} stored, load {load[-1]:.1f}",
                      file=sys.stderr, flush=True)
                next_report += 60.0
            time.sleep(max(0.0, t0 + sent / args.rate - time.monotonic()))
        t_pub = time.monotonic() - t0
        # Wait until the subscriber has everything (or stops making progress), then stop it.
        last, still = -1, time.monotonic()
        while True:
            n = done()
            if n >= total:
                break
            if n != last:
                last, still = n, time.monotonic()
            elif time.monotonic() - still > 20.0:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
        node.destroy_publisher(pub)
    finally:
        if proc.poll() is None:  # never leave the subscriber behind
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "published": sent,
        "publish_rate_hz": sent / t_pub,
        "max_publisher_lateness_s": late_max,
        "publishes_refused_and_retried": refused,
        "load_average_1min_max": max(load, default=os.getloadavg()[0]),
        "exit_code": code,
        "subscriber_cpu_s": cpu,
        "subscriber_cpu_fraction": cpu / t_pub,
    }


if __name__ == "__main__":
    raise SystemExit(main())

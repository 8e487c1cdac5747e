"""Recorder benchmark: a 1 kHz WrenchStamped stream for N minutes, published against recorded.

This process publishes ``/bench/wrench`` (geometry_msgs/WrenchStamped, reliable, depth 10000) at
``--rate`` Hz, paced on the monotonic clock, with ``force.z`` = the message's sequence number. A
publish that DDS refuses (a starved subscriber has not acknowledged 10 s of samples) is retried
with the same number and counted. The ``recorder`` node runs as a separate process (as in use)
and writes an MCAP (or sqlite3) bag. At the end the recorder is stopped with SIGINT and the bag is
read back with ``rosbags``: every sequence number must be there exactly once (0 lost, 0
duplicated, in order).

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="stream duration (default 10)")
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second (default 1000)")
    ap.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    ap.add_argument("--out", default=None, help="bag directory (default: a temporary one, deleted)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    from robot_grinding_sim.ros.environment import localhost_env

    env = localhost_env(domain_id=int(os.environ.get("BENCH_DOMAIN_ID", 1 + os.getpid() % 100)))
    os.environ.update(env)

    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    tmp = None
    if args.out:
        bag = Path(args.out)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="bench_recorder_")
        bag = Path(tmp.name) / "bag"
    log_path = bag.parent / "recorder.log"
    cmd = [
        sys.executable, "-m", "robot_grinding_sim.nodes.recorder", "--ros-args",
        "-p", f"output:={bag}", "-p", f"storage:={args.storage}", "-p", f"topics:=['{TOPIC}']",
    ]
    bag.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        rec = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    try:
        rclpy.init()
        node = rclpy.create_node("bench_recorder_publisher")
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10000, reliability=ReliabilityPolicy.RELIABLE)
        pub = node.create_publisher(WrenchStamped, TOPIC, qos)
        deadline = time.monotonic() + 60.0
        while pub.get_subscription_count() < 1:
            if rec.poll() is not None or time.monotonic() > deadline:
                print(log_path.read_text()[-3000:], file=sys.stderr)
                raise SystemExit("the recorder did not subscribe")
            time.sleep(0.05)
        return _run(args, node, pub, rec, bag, tmp)
    finally:
        if rec.poll() is None:  # never leave the recorder behind
            rec.send_signal(signal.SIGINT)
            try:
                rec.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rec.kill()


def _run(args: argparse.Namespace, node: Any, pub: Any, rec: subprocess.Popen[bytes], bag: Path,
         tmp: Any) -> int:
    import rclpy
    from geometry_msgs.msg import WrenchStamped

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
    while sent < total:
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
            print(f"  {sent} published, {metadata_count(bag)} checkpointed, load {load[-1]:.1f}",
                  file=sys.stderr, flush=True)
            next_report += 60.0
        nxt = t0 + sent / args.rate
        time.sleep(max(0.0, nxt - time.monotonic()))
    t_pub = time.monotonic() - t0

    # Wait until the recorder's checkpoints stop growing (or have everything), then stop it.
    last, still = -1, time.monotonic()
    while True:
        n = metadata_count(bag)
        if n >= total:
            break
        if n != last:
            last, still = n, time.monotonic()
        elif time.monotonic() - still > 20.0:
            break
        time.sleep(0.2)
    rec.send_signal(signal.SIGINT)
    code = rec.wait(timeout=120)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    node.destroy_node()
    rclpy.shutdown()

    from rosbags.highlevel import AnyReader

    seen = []
    with AnyReader([bag]) as r:
        for conn, _, raw in r.messages():
            seen.append(int(r.deserialize(raw, conn.msgtype).wrench.force.z))
    recorded = len(seen)
    unique = len(set(seen))
    in_order = all(a < b for a, b in zip(seen, seen[1:], strict=False))
    size = sum(f.stat().st_size for f in bag.iterdir())
    result = {
        "minutes": args.minutes,
        "rate_hz": args.rate,
        "storage": args.storage,
        "published": sent,
        "recorded": recorded,
        "lost": sent - unique,
        "duplicated": recorded - unique,
        "in_order": in_order,
        "publish_rate_achieved_hz": sent / t_pub,
        "max_publisher_lateness_s": late_max,
        "publishes_refused_and_retried": refused,
        "load_average_1min_max": max(load, default=os.getloadavg()[0]),
        "recorder_exit_code": code,
        "recorder_cpu_s": usage.ru_utime + usage.ru_stime,
        "recorder_cpu_fraction": (usage.ru_utime + usage.ru_stime) / t_pub,
        "bag_bytes": size,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"recorder bench: {args.minutes:g} min at {args.rate:g} Hz ({args.storage}): "
              f"published {sent}, recorded {recorded}, lost {result['lost']}, duplicated "
              f"{result['duplicated']}, in order {in_order}; achieved "
              f"{result['publish_rate_achieved_hz']:.1f} Hz, recorder CPU "
              f"{100 * result['recorder_cpu_fraction']:.0f} % of one core, bag {size / 1e6:.1f} MB")
    if tmp is not None:
        tmp.cleanup()
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 and code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

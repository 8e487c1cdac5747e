"""The floor of a lockstep loop of Python nodes over DDS on this machine: no physics, only messages.

Three processes stand for dynamics_node, collision_node and contact_solver_node: ``arm`` publishes a
JointState (6 joints) on ``ring/joint_states``, ``collision`` takes it and publishes a one-point
PointCloud2 (7 float64 fields) on ``ring/points``, ``solver`` takes that and publishes a
Float64MultiArray (22 values) on ``ring/model``, and ``arm`` publishes the next state as soon as
the model arrives: the graph's lockstep exchange with the work of each node taken out. With
``--listeners N`` more processes (an executive, a recorder) subscribe to ``ring/joint_states`` too.
Same stack as the nodes: rclpy, rmw_fastrtps_cpp, EventsExecutor, raw subscriptions and messages
written as CDR bytes (robot_grinding_sim/ros/wire.py).

Prints the wall time per round (one exchange of three messages), the rounds per second (the
highest lockstep rate any Python graph of this shape reaches here) and each process's CPU per
round. The graph's own figure (bench_graph_rate.py) is that plus the nodes' work.

    python bench/bench_dds_ring.py [--rounds 20000] [--listeners 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROLES = ("arm", "collision", "solver", "listener")


def run_role(role: str, rounds: int, warmup: int) -> None:
    """One process of the ring; ``arm`` prints the figures when done."""
    import rclpy
    from rclpy.experimental import EventsExecutor
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState, PointCloud2, PointField
    from std_msgs.msg import Float64MultiArray

    from robot_grinding_sim.ros import compat

    rclpy.init()
    node = rclpy.create_node(f"ring_{role}_{os.getpid()}")
    js = JointState(name=[f"joint_{i}" for i in range(6)], position=[0.1] * 6, velocity=[0.2] * 6, effort=[0.0] * 6)
    pc = PointCloud2(fields=[PointField(name=f, offset=8 * i, datatype=PointField.FLOAT64, count=1)
                             for i, f in enumerate(("x", "y", "z", "normal_x", "normal_y", "normal_z", "depth"))],
                     height=1, width=1, point_step=56, row_step=56, data=bytes(56), is_dense=True)
    model = Float64MultiArray(data=[0.5] * 22)
    js_bytes, pc_bytes, model_bytes = (serialize_message(m) for m in (js, pc, model))
    ex = EventsExecutor()
    ex.add_node(node)
    state = {"n": 0, "t0": 0.0, "c0": 0.0, "done": False}

    if role == "arm":
        pub = node.create_publisher(JointState, "ring/joint_states", 50)

        def on_model(_data: bytes) -> None:
            state["n"] += 1
            if state["n"] == warmup:
                state["t0"], state["c0"] = time.perf_counter(), time.process_time()
            if state["n"] == warmup + rounds:
                wall, cpu = time.perf_counter() - state["t0"], time.process_time() - state["c0"]
                print(f"RESULT arm {wall / rounds * 1e6:.1f} {cpu / rounds * 1e6:.1f}", flush=True)
                state["done"] = True
                return
            pub.publish(js_bytes)

        node.create_subscription(Float64MultiArray, "ring/model", on_model, 50, raw=True)
        listeners = int(os.environ.get("RING_LISTENERS", "0"))
        while (pub.get_subscription_count() < 1 + listeners or node.count_publishers("ring/points") < 1
               or node.count_publishers("ring/model") < 1):
            ex.spin_once(timeout_sec=0.05)
        last = [-1]

        def kick() -> None:  # a first state lost before every match was made: send another
            if state["n"] == last[0] and not state["done"]:
                pub.publish(js_bytes)
            last[0] = state["n"]

        node.create_timer(1.0, kick)
        pub.publish(js_bytes)
    elif role in ("collision", "solver"):
        out_type, out_topic, out_bytes, in_type, in_topic = (
            (PointCloud2, "ring/points", pc_bytes, JointState, "ring/joint_states") if role == "collision"
            else (Float64MultiArray, "ring/model", model_bytes, PointCloud2, "ring/points"))
        pub = node.create_publisher(out_type, out_topic, 50)

        def relay(_data: bytes) -> None:
            state["n"] += 1
            if state["n"] == warmup:
                state["c0"] = time.process_time()
            if state["n"] == warmup + rounds - 1:
                print(f"RESULT {role} 0 {(time.process_time() - state['c0']) / rounds * 1e6:.1f}", flush=True)
            pub.publish(out_bytes)

        node.create_subscription(in_type, in_topic, relay, 50, raw=True)
    else:
        def listen(_data: bytes) -> None:
            state["n"] += 1
            if state["n"] == warmup:
                state["c0"] = time.process_time()
            if state["n"] == warmup + rounds - 1:
                print(f"RESULT listener 0 {(time.process_time() - state['c0']) / rounds * 1e6:.1f}", flush=True)

        node.create_subscription(JointState, "ring/joint_states", listen, 50, raw=True)
    try:
        while not state["done"] and rclpy.ok():
            ex.spin_once(timeout_sec=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        compat.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--listeners", type=int, default=1, help="extra subscribers of ring/joint_states")
    ap.add_argument("--role", choices=ROLES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role:
        run_role(a.role, a.rounds, a.warmup)
        return 0
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "79"), "RING_LISTENERS": str(a.listeners),
           "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "PYTHONUNBUFFERED": "1"}
    roles = ["solver", "collision"] + ["listener"] * a.listeners + ["arm"]
    procs = [subprocess.Popen([sys.executable, __file__, "--role", r, "--rounds", str(a.rounds),
                               "--warmup", str(a.warmup)], env=env, stdout=subprocess.PIPE, text=True)
             for r in roles]
    arm = procs[-1]
    out_arm, _ = arm.communicate(timeout=1800)
    results = [line.split() for line in out_arm.splitlines() if line.startswith("RESULT")]
    for p in procs[:-1]:
        p.send_signal(2)
    for p in procs[:-1]:
        out, _ = p.communicate(timeout=30)
        results += [line.split() for line in out.splitlines() if line.startswith("RESULT")]
    wall = next(float(r[2]) for r in results if r[1] == "arm")
    print(f"ring of 3 Python processes + {a.listeners} listener(s), {a.rounds} rounds, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"  wall per round {wall:.1f} us -> at most {1e6 / wall:.0f} lockstep rounds/s "
          f"({1e3 / wall:.2f}x real time at a 1 ms exchange)")
    total = 0.0
    for r in results:
        total += float(r[3])
        print(f"  {r[1]:10} CPU {float(r[3]):6.1f} us per round")
    print(f"  all processes: {total:.1f} us CPU per round")
    return 0


if __name__ == "__main__":
    sys.exit(main())

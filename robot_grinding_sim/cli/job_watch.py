"""A job's progress as ``grinding bringup --until-done`` shows it: a bar with an ETA.

Two sources, both the executive's (nodes/grinding_executive.py):

* its log line when a command goes out, ``sent start: N points, D s from t = T s`` (also
  ``resume``): the job's sim-time window [T0, T + D] (:class:`JobClock`, fed from the child's
  output, no ROS);
* ``grinding/progress`` (std_msgs/Float64MultiArray ``[pass_index, arc_length_m, stamp_s]``, sent
  while a pass runs) and ``/clock`` (sim mode; also between passes), read by a small rclpy node in
  this process (:class:`ProgressListener`) on the graph's domain and discovery range, so the bar
  moves at the rate sim time does.

The bar shows sim seconds done of the job's total, so its ETA includes the graph's real-time
factor.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping

#: grinding_executive's line when it sends a command (see ``_publish_command``)
SENT = re.compile(r"\bsent (\w+): (\d+) points, ([0-9.]+) s from t = (-?[0-9.]+) s")
#: commands that (re)start the job and set its end
JOB_COMMANDS = ("start", "resume")


class JobClock:
    """The job's sim-time window from the executive's log, and where a progress stamp is in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.t0: float | None = None  # sim time the job started, s
        self.end: float | None = None  # sim time it ends as last sent, s
        self.pass_index = -1
        self.stamp: float | None = None

    def feed_line(self, line: str) -> None:
        """One line of the executive's output; a ``sent start|resume`` line sets the window."""
        m = SENT.search(line)
        if m is None or m.group(1) not in JOB_COMMANDS:
            return
        duration, t = float(m.group(3)), float(m.group(4))
        with self._lock:
            if m.group(1) == "start" or self.t0 is None:
                self.t0 = t
            self.end = t + duration

    def feed_progress(self, pass_index: float, stamp: float) -> None:
        """One ``grinding/progress`` sample: the pass (-1: none) and its sim time stamp, s."""
        with self._lock:
            self.pass_index = int(pass_index)
            self.stamp = max(float(stamp), self.stamp or -float("inf"))

    def feed_clock(self, stamp: float) -> None:
        """One ``/clock`` message, s: time moves on between passes too."""
        with self._lock:
            self.stamp = max(float(stamp), self.stamp or -float("inf"))

    def state(self) -> tuple[float, float, str] | None:
        """(sim seconds done, sim seconds in all, description) once both sources have spoken, else None."""
        with self._lock:
            if self.t0 is None or self.end is None or self.stamp is None:
                return None
            total = max(self.end - self.t0, 1e-9)
            done = min(max(self.stamp - self.t0, 0.0), total)
            what = f"job: pass {self.pass_index}" if self.pass_index >= 0 else "job"
            return done, total, what


class ProgressListener:
    """``grinding/progress`` of a graph, read in a background thread by a node of its own context.

    The context is this process's only rclpy one: SIGINT/SIGTERM stay with the caller (rclpy's
    handlers are not installed); :meth:`close` shuts it down.
    """

    def __init__(self, env: Mapping[str, str], on_sample: Callable[[float, float], None],
                 on_clock: Callable[[float], None]) -> None:
        # rcl reads the domain and the discovery range from the environment when the context starts
        for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION"):
            if k in env:
                os.environ[k] = env[k]
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions
        from rosgraph_msgs.msg import Clock
        from std_msgs.msg import Float64MultiArray

        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("grinding_bringup_progress", context=self.context)

        def on_msg(msg: Float64MultiArray) -> None:
            if len(msg.data) >= 3:
                on_sample(msg.data[0], msg.data[2])

        self.node.create_subscription(Float64MultiArray, "grinding/progress", on_msg, 10)
        self.node.create_subscription(
            Clock, "/clock", lambda m: on_clock(m.clock.sec + 1e-9 * m.clock.nanosec), 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.2)
        except (ExternalShutdownException, RuntimeError):
            pass  # the context was shut down by close()

    def close(self) -> None:
        """Stop the thread and shut the context down."""
        try:
            self.context.try_shutdown()
        finally:
            self._thread.join(timeout=5)
            self.executor.shutdown(timeout_sec=1)
            self.node.destroy_node()

"""An F/T sensor whose driver publishes its readings on a topic, as a hardware_driver F/T backend
(``ft_backend: topic``; hardware/ft_backend.py says what a backend is).

``ft_topic`` (geometry_msgs/WrenchStamped, raw readings in ``ft_sensor.frame``, e.g. a
force_torque_sensor_broadcaster's), one reading a message, dated by ``header.stamp`` (the driver's
ROS clock; a stamp ahead counts as now; 0: on arrival). A message in another frame is refused
with a warning naming the frame. The subscription is made at the first :meth:`connect` and kept for
the node's life (an entity destroyed under a running EventsExecutor can crash it, ros2/rclpy#1644);
between :meth:`stop` and :meth:`start` its messages are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.hardware.ft_backend import FTBackend, FTContext
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded

__all__ = ["TopicFTBackend"]


class TopicFTBackend(FTBackend):
    """Raw readings from ``ft_topic`` (module docstring); ``context.node`` is the driver."""

    name = "topic"

    def __init__(self, params: Mapping[str, Any], context: FTContext) -> None:
        super().__init__(params, context)
        if context.node is None:
            raise InputError("the topic F/T backend needs the ROS node (FTContext.node)")
        self.node = context.node
        self.topic = params["ft_topic"]
        self.frame = params["ft_sensor.frame"]
        self.received = 0
        self._sub: Any = None

    def describe(self) -> str:
        return f"topic {self.node.resolve_topic_name(self.topic)}"

    def connect(self) -> None:
        if self._sub is None:
            self._sub = self.node.create_subscription(WrenchStamped, self.topic,
                                                      guarded(self.node, "ft_topic")(self._on_message), 100)

    def _on_message(self, msg: WrenchStamped) -> None:
        deliver = self._on_readings
        if deliver is None:
            return  # not streaming
        if msg.header.frame_id not in ("", self.frame):
            raise InputError(f"frame_id '{msg.header.frame_id}', expected '{self.frame}' (the sensor frame)")
        self.received += 1
        mono = self.context.monotonic()
        stamp = cv.time_to_sec(msg.header.stamp)
        # dated by its stamp (the driver's ROS clock; a stamp ahead counts as now), else on arrival
        now = self.node.get_clock().now().nanoseconds * 1e-9
        sampled = mono - max(0.0, now - stamp) if stamp > 0.0 else mono
        deliver(FTReadings(cv.wrench_to_array(msg)[None], np.array([sampled]), mono, np.zeros(1, dtype=np.int64)))

    def diagnostics(self) -> dict[str, str]:
        return {"ft_topic": self.topic, "ft_received": str(self.received)}

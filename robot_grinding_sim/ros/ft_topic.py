"""F/T sensors whose drivers publish their readings on a topic, as hardware_driver F/T backends
(hardware/ft_backend.py says what a backend is):

- ``topic``: ``ft_topic`` (geometry_msgs/WrenchStamped), any publisher;
- ``ur_builtin``: the force/torque sensor built into UR e-series arms as the UR ROS 2 driver
  (Universal_Robots_ROS2_Driver) publishes it: its ros2_controllers force_torque_sensor_broadcaster,
  named ``force_torque_sensor_broadcaster`` in the driver's ur_controllers.yaml, on
  ``/force_torque_sensor_broadcaster/wrench``, in frame ``tool0`` (the driver's Humble and Jazzy
  releases) or ``tool0_controller`` (later ones: the flange with the TCP offset set on the teach
  pendant). ``tool0_controller`` is not a link of the URDF: it is taken as ``tool0`` unless
  ``ft_frame_aliases`` says otherwise (right when the pendant's TCP offset is zero);
- ``ft_broadcaster``: a sensor published by ros2_controllers' force_torque_sensor_broadcaster named
  ``ft_broadcaster`` (the controller's name): ``/<ft_broadcaster>/wrench``, in the frame of its
  ``frame_id`` parameter.

One reading a message, dated by ``header.stamp`` (the driver's ROS clock; a stamp ahead counts as
now; 0: on arrival). The frame a wrench comes in is read from its header, never assumed: a reading
in ``ft_sensor.frame`` (or with no frame) is taken as it is; one in another link of the robot
(``ft_frame_aliases`` FRAME=LINK first) is moved into ``ft_sensor.frame`` through the robot's
kinematics at the measured joint positions (the driver's ``FTContext.to_sensor_frame``); a frame
that is not a link is refused with a warning naming it. The subscription is made at the first
:meth:`connect` and kept for the node's life (an entity destroyed under a running EventsExecutor can
crash it, ros2/rclpy#1644); between :meth:`stop` and :meth:`start` its messages are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.hardware.ft_backend import FTBackend, FTContext
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded

__all__ = ["BroadcasterFTBackend", "TopicFTBackend", "URBuiltinFTBackend", "frame_aliases"]


def frame_aliases(entries: Any, defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """``ft_frame_aliases`` (FRAME=LINK strings) as {frame: link} over ``defaults``.

    Raises:
        ParameterError: an entry that is not FRAME=LINK, naming ``ft_frame_aliases``.
    """
    out = dict(defaults or {})
    for e in entries or ():
        frame, sep, link = str(e).partition("=")
        if not sep or not frame.strip() or not link.strip():
            raise ParameterError("ft_frame_aliases", f"{e!r}: expected FRAME=LINK (a wrench header's frame and the "
                                 "URDF link it is)")
        out[frame.strip()] = link.strip()
    return out


class TopicFTBackend(FTBackend):
    """Raw readings from ``ft_topic`` (module docstring); ``context.node`` is the driver."""

    name = "topic"
    #: header frames that are not links of the URDF, and the link each is (``ft_frame_aliases`` adds to them)
    ALIASES: dict[str, str] = {}

    def __init__(self, params: Mapping[str, Any], context: FTContext) -> None:
        super().__init__(params, context)
        if context.node is None:
            raise InputError("the topic F/T backend needs the ROS node (FTContext.node)")
        self.node = context.node
        self.topic = self.topic_of(params)
        self.frame = params["ft_sensor.frame"]
        self.aliases = frame_aliases(params.get("ft_frame_aliases"), self.ALIASES)
        self.received = 0
        self.frames: set[str] = set()  # the header frames seen
        self._sub: Any = None

    @classmethod
    def topic_of(cls, params: Mapping[str, Any]) -> str:
        """The topic the readings come on."""
        return str(params["ft_topic"])

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
        frame = msg.header.frame_id
        w = cv.wrench_to_array(msg)
        if frame not in ("", self.frame):
            move = self.context.to_sensor_frame
            if move is None:
                raise InputError(f"frame_id '{frame}', expected '{self.frame}' (the sensor frame)")
            w = move(self.aliases.get(frame, frame), w)  # InputError: a frame it cannot transform
        self.frames.add(frame)
        self.received += 1
        mono = self.context.monotonic()
        stamp = cv.time_to_sec(msg.header.stamp)
        # dated by its stamp (the driver's ROS clock; a stamp ahead counts as now), else on arrival
        now = self.node.get_clock().now().nanoseconds * 1e-9
        sampled = mono - max(0.0, now - stamp) if stamp > 0.0 else mono
        deliver(FTReadings(w[None], np.array([sampled]), mono, np.zeros(1, dtype=np.int64)))

    def diagnostics(self) -> dict[str, str]:
        return {"ft_topic": self.topic, "ft_received": str(self.received),
                "ft_frames": ", ".join(sorted(f or "(none)" for f in self.frames))}


class URBuiltinFTBackend(TopicFTBackend):
    """The UR e-series built-in sensor as the UR ROS 2 driver publishes it (module docstring)."""

    name = "ur_builtin"
    ALIASES = {"tool0_controller": "tool0"}

    @classmethod
    def topic_of(cls, params: Mapping[str, Any]) -> str:
        return "/force_torque_sensor_broadcaster/wrench"


class BroadcasterFTBackend(TopicFTBackend):
    """A ros2_controllers force_torque_sensor_broadcaster named ``ft_broadcaster`` (module docstring)."""

    name = "ft_broadcaster"

    @classmethod
    def topic_of(cls, params: Mapping[str, Any]) -> str:
        name = str(params["ft_broadcaster"]).strip().strip("/")
        if not name:
            raise ParameterError("ft_broadcaster", "empty (the force_torque_sensor_broadcaster controller's name)")
        return f"/{name}/wrench"

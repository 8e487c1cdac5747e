"""``recorder``: records topics into a rosbag2 (MCAP or sqlite3) without ``ros2 bag`` (the pip path).

Subscribes to the configured topics with the types found on the graph (re-checked every
``discovery_period`` so late publishers are picked up), takes the messages as serialized CDR bytes
(``raw=True``: nothing is deserialized) and hands them through a queue to a writer thread that
appends them to the bag with :class:`robot_grinding_sim.core.record.bagwriter.BagWriter` (``rosbags``).

Each publisher is received with the QoS it offers: one subscription per reliability and
durability its publishers offer (a reliable publisher through a reliable subscription, a
best-effort one through a best-effort subscription, a latched one through a transient-local one),
added when a publisher with another QoS joins (at the next graph check, or at once on the
middleware's incompatible-QoS event). A message that reaches the recorder through two of them (a
best-effort subscription also matches reliable publishers) is written once: copies are told
apart by the publisher's sequence number (and its id, or the sample's source time where rclpy
gives no id).

No message is lost on purpose: a deep history (``qos_depth``), an unbounded queue, and a writer
thread that never blocks the executor. What is lost all the same is counted and reported
(core/record/loss.py): by the publishers' sequence numbers, by the middleware's sample-lost
events, and, where neither tells, by gaps in the stamps against the topic's rate; the counts go
into the bag's ``metadata.yaml`` (``custom_data``, key ``robot_grinding_sim.recorder``, a JSON
document per topic) at every checkpoint and at close, and into the closing line (``lost N
messages: ...``, and a warning). Every ``flush_period`` the bag is checkpointed (MCAP chunk +
footer written, sqlite3 committed, ``metadata.yaml`` rewritten), so a recorder killed with SIGKILL
leaves a bag readable up to its last checkpoint. SIGINT / SIGTERM stop it cleanly: the queue is
drained and the bag closed with its full summary and metadata. ``grinding record --repair BAG``
fixes a bag cut off in the middle of a checkpoint.

TF where nobody publishes it (``computed_tf_rate``, default 100 Hz): the pip path has no
robot_state_publisher and no tf2_msgs package, so nothing publishes ``/tf``. While no node on the
graph publishes ``/tf`` and ``/tf`` is recorded, the recorder computes it from ``/joint_states``
(subscribed for this even when not recorded) with the URDF of ``robot.description_file``
(:mod:`robot_grinding_sim.core.record.tf_tree`: the moving joints at most ``computed_tf_rate`` Hz of
the joint states' stamps, stamped like them) and ``/tf_static`` once (the URDF's fixed joints and
``base_link -> workpiece`` at ``workpiece.pose``), and writes them as tf2_msgs/msg/TFMessage through
``rosbags``' type store, at the receive time of the joint state they come from. Once a node
publishes ``/tf`` (robot_state_publisher on a ROS install), that is recorded instead. With
``/robot_description`` (description_publisher or robot_state_publisher) and the markers in
``topics``, the bag replays the job in Foxglove with no ROS installed.

Parameters (config/recorder.yaml): topics, all_topics, exclude, output, storage, flush_period,
discovery_period, qos_depth, max_duration, rosbag2_version, computed_tf_rate; ``robot.*`` and
``workpiece.*`` of config/cell.yaml (for the computed TF).

Subscribes: the configured topics (and ``/joint_states`` for the computed TF). Publishes: nothing.
"""

from __future__ import annotations

import importlib
import inspect
import json
import queue
import struct
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.subscription import Subscription

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import RECORDER_REPORT_KEY as REPORT_KEY
from robot_grinding_sim.core.record.bag import normalize_topic
from robot_grinding_sim.core.record.bagwriter import BagWriter, TopicQos
from robot_grinding_sim.core.record.loss import TopicLoss, loss_line
from robot_grinding_sim.core.record.tf_tree import TF_STATIC_TOPIC, TF_TOPIC, TF_TYPE, TfStream
from robot_grinding_sim.ros.node_base import at_abort, load_robot, request_stop, run_node
from robot_grinding_sim.ros.parameters import ParameterError, declare_parameters
from robot_grinding_sim.ros.schemas import DEFAULT_TOPICS, node_specs  # noqa: F401 (DEFAULT_TOPICS re-exported)

PARAMS = node_specs("recorder")
#: the joint states the computed TF comes from
JOINT_STATES = "/joint_states"

_STOP = object()
#: The writer thread drains the queue every this many seconds.
_BATCH_S = 0.01
#: callbacks that take the message's info (sequence number, publisher): rclpy from Humble's
#: successors on; without it nothing is counted by sequence numbers
_WITH_INFO = hasattr(getattr(Subscription, "CallbackType", None), "WithMessageInfo")
#: the signature rclpy reads to pass the message info (it tells by binding one or two arguments)
_MSG_AND_INFO = inspect.Signature([inspect.Parameter("msg", inspect.Parameter.POSITIONAL_ONLY),
                                   inspect.Parameter("info", inspect.Parameter.POSITIONAL_ONLY)])


def default_output(now: datetime | None = None) -> str:
    """The ``ros2 bag record`` default name: ``rosbag2_YYYY_MM_DD-HH_MM_SS``."""
    return (now or datetime.now()).strftime("rosbag2_%Y_%m_%d-%H_%M_%S")


def import_message(msgtype: str) -> Any:
    """The Python class of ``pkg/msg/Type`` (ImportError/AttributeError if not installed)."""
    pkg, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{pkg}.{kind}"), name)


_PRIMITIVES = {"boolean": "bool", "octet": "byte", "float": "float32", "double": "float64",
               "long double": "float64"}


def _msg_field_type(idl: str) -> str:
    """A rosidl Python field type (``sequence<double, 3>``, ``geometry_msgs/Vector3``) in .msg syntax."""
    if idl.startswith("sequence<") and idl.endswith(">"):
        inner = idl[len("sequence<"):-1]
        elem, _, bound = inner.rpartition(",") if inner.count(",") and not inner.endswith(">") else (inner, "", "")
        elem = elem.strip() if bound else inner
        return _msg_field_type(elem) + (f"[<={bound.strip()}]" if bound else "[]")
    if idl.endswith("]") and "[" in idl:
        base, _, size = idl[:-1].rpartition("[")
        return f"{_msg_field_type(base)}[{size}]"
    for s in ("string<", "wstring<"):  # bounded strings: rosidl 'string<255>', .msg 'string<=255'
        if idl.startswith(s) and idl.endswith(">"):
            return f"{s}={idl[len(s):-1]}"
    return _PRIMITIVES.get(idl, idl)


def register_message_class(typestore: Any, cls: Any, msgtype: str) -> None:
    """Teach a ``rosbags`` type store ``msgtype`` (and its nested types) from its Python class.

    For message types outside the type store's standard set (custom packages on a full ROS
    install): the definition is rebuilt from ``get_fields_and_field_types()`` (constants and
    default values are not part of it, nor of the RIHS01 hash).
    """
    from rosbags.typesys import get_types_from_msg

    todo = [(msgtype, cls)]
    found: dict[str, Any] = {}
    while todo:
        name, c = todo.pop()
        if name in found or name in typestore.fielddefs:
            continue
        lines = []
        for field_name, idl in c.get_fields_and_field_types().items():
            lines.append(f"{_msg_field_type(idl)} {field_name}")
            base = idl
            while base.startswith("sequence<"):
                base = base[len("sequence<"):].split(",")[0].rstrip(">").strip()
            base = base.split("[")[0]
            if "/" in base:
                pkg, tname = base.split("/")[0], base.split("/")[-1]
                todo.append((f"{pkg}/msg/{tname}", import_message(f"{pkg}/msg/{tname}")))
        found.update(get_types_from_msg("\n".join(lines), name))
    typestore.register(found)


class RecorderNode(Node):
    """Records topics into a rosbag2; see the module docstring."""

    NODE_NAME = "recorder"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(self.NODE_NAME, **kwargs)
        p = declare_parameters(self, PARAMS)
        self._all = bool(p["all_topics"])
        try:
            self._wanted = {normalize_topic(t) for t in p["topics"]}
            self._exclude = {normalize_topic(t) for t in p["exclude"]}
        except InputError as exc:
            raise ParameterError("topics", str(exc), self.get_name()) from None
        if not self._wanted and not self._all:
            raise ParameterError("topics", "empty: give topics or set all_topics", self.get_name())
        out = p["output"] or default_output()
        try:
            self._bag = BagWriter(Path(out).expanduser(), storage=p["storage"], version=p["rosbag2_version"])
        except InputError as exc:
            raise ParameterError("output", str(exc), self.get_name()) from None
        self.path = self._bag.path
        self._tf = self._tf_stream(p)
        self._tf_on = self._tf is not None  # until a node publishes /tf
        self._computed = 0
        self._flush_period = float(p["flush_period"])
        self._depth = int(p["qos_depth"])
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._subs: dict[str, dict[tuple[bool, bool], Any]] = {}  # topic -> (reliable, latched) -> subscription
        self._types: dict[str, tuple[str, Any]] = {}  # topic -> (type name, class)
        self._skipped: dict[str, str] = {}
        self._received: dict[str, int] = {}
        self._loss: dict[str, TopicLoss] = {}  # recorded topics' accounts
        self._header: dict[str, bool] = {}  # topic -> its type starts with a std_msgs/Header
        self._written = 0
        self._write_errors = 0
        self._closed = False
        # The bag is opened, written and closed in the writer thread only (sqlite3 connections
        # belong to the thread that made them); a failure to open it is reported back here.
        self._opened = threading.Event()
        self._open_error: BaseException | None = None
        self._writer = threading.Thread(target=self._write_loop, name="bag_writer", daemon=True)
        self._writer.start()
        self._opened.wait()
        if self._open_error is not None:
            self._closed = True
            raise ParameterError("output", f"cannot create {out}: {self._open_error}", self.get_name())
        at_abort(self._bag.discard)  # a stop before the node is up leaves no empty bag behind
        self._discover()
        # discovery runs on the wall clock: on sim time it would wait while /clock stands still
        # (a lockstep arm holding t = 0 for its contact side) and miss a job's first messages
        self._timer = self.create_timer(float(p["discovery_period"]), self._discover,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._stop_timer = None
        if p["max_duration"] > 0.0:
            self._stop_timer = self.create_timer(float(p["max_duration"]), self._on_max_duration)
        what = "every topic" if self._all else ", ".join(sorted(self._wanted))
        self.get_logger().info(f"recording {what} into {self.path} ({p['storage']})")

    def _records(self, topic: str) -> bool:
        """Whether messages of ``topic`` go into the bag (not only: feed the computed TF)."""
        return topic in self._wanted or (self._all and topic not in self._exclude)

    def _tf_stream(self, p: dict[str, Any]) -> TfStream | None:
        """The computed TF (module docstring), or None when /tf is not recorded or the rate is 0."""
        if p["computed_tf_rate"] <= 0.0 or not self._records(TF_TOPIC):
            return None
        from robot_grinding_sim.core.errors import GrindingSimError
        from robot_grinding_sim.core.record.tf_tree import RobotTf, static_pose
        from robot_grinding_sim.core.sim.held_part import part_transforms

        model = load_robot(p, self.get_name())
        try:
            X_BP = static_pose(p["workpiece.pose"])
        except InputError as exc:
            raise ParameterError("workpiece.pose", str(exc), self.get_name()) from None
        try:
            tree = RobotTf(model, Path(model.source).read_text(), part_transforms(model, X_BP))
        except (OSError, GrindingSimError) as exc:
            raise ParameterError("robot.description_file", str(exc), self.get_name()) from None
        return TfStream(tree, self._bag.typestore, float(p["computed_tf_rate"]))

    # -- discovery ------------------------------------------------------------------------------
    def _discover(self) -> None:
        try:
            graph = self.get_topic_names_and_types()
        except Exception as exc:  # the context is going down
            self.get_logger().debug(f"graph query failed: {exc}")
            return
        if self._tf_on and any(t == TF_TOPIC for t, _ in graph) and self.count_publishers(TF_TOPIC):
            self._tf_on = False  # read by the writer thread: it stops computing
            self.get_logger().info("a node publishes /tf: recording it instead of computing it")
        for topic, types in graph:
            if topic in self._skipped:
                continue
            if not (self._records(topic) or (topic == JOINT_STATES and self._tf is not None)):
                continue
            if topic in self._subs:
                self._match(topic)  # a publisher offering another QoS may have joined
            else:
                self._subscribe(topic, types)

    def _skip(self, topic: str, why: str) -> None:
        self._skipped[topic] = why
        self.get_logger().warning(f"not recording {topic}: {why}")

    def _subscribe(self, topic: str, types: list[str]) -> None:
        if len(types) != 1:
            self._skip(topic, f"published with several types {types}")
            return
        msgtype = types[0]
        try:
            cls = import_message(msgtype)
        except (ImportError, AttributeError, ValueError):
            self._skip(topic, f"message package of {msgtype} is not installed")
            return
        if not self._bag.knows_type(msgtype):
            try:
                register_message_class(self._bag.typestore, cls, msgtype)
            except Exception as exc:
                self._skip(topic, f"no message definition of {msgtype}: {exc}")
                return
        pubs = self.get_publishers_info_by_topic(topic)
        if not pubs:
            return  # a subscriber or a stale entry only: wait for a publisher to adapt the QoS
        offered = [
            TopicQos(
                reliable=i.qos_profile.reliability == ReliabilityPolicy.RELIABLE,
                transient_local=i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL,
                depth=int(i.qos_profile.depth),
            )
            for i in pubs
        ]
        # The topic is registered in the bag before any of its messages can be queued.
        if self._records(topic):
            self._queue.put(("add", topic, msgtype, offered))
        self._received[topic] = 0
        self._loss[topic] = TopicLoss(topic)
        fields = list(cls.get_fields_and_field_types().items())
        self._header[topic] = bool(fields) and fields[0] == ("header", "std_msgs/Header")
        self._types[topic] = (msgtype, cls)
        self._subs[topic] = {}
        self._match(topic, pubs)

    def _match(self, topic: str, pubs: list[Any] | None = None) -> None:
        """One subscription per (reliability, durability) that ``topic``'s publishers offer (module
        docstring); the sequence numbers stop counting when publishers cannot be told apart."""
        if pubs is None:
            try:
                pubs = self.get_publishers_info_by_topic(topic)
            except Exception:  # the context is going down
                return
        subs = self._subs[topic]
        loss = self._loss[topic]
        loss.publishers_on_graph = len(pubs)
        for reliable, latched in sorted({(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE,
                                          i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL)
                                         for i in pubs} - subs.keys()):
            qos = QoSProfile(
                history=HistoryPolicy.KEEP_LAST,
                depth=self._depth,
                reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
            )
            # a publisher this subscription cannot match: match it now rather than at the next check
            # (and not rclpy's warning that its messages will not be received: they will)
            on_incompatible = lambda _info, topic=topic: self._match(topic)  # noqa: E731
            events = SubscriptionEventCallbacks(
                message_lost=lambda info, loss=loss: loss.lost_event(info.total_count_change),
                incompatible_qos=on_incompatible)
            try:
                sub = self.create_subscription(self._types[topic][1], topic, self._callback(topic), qos, raw=True,
                                               event_callbacks=events)
            except UnsupportedEventTypeError:  # a middleware without the sample-lost event
                sub = self.create_subscription(self._types[topic][1], topic, self._callback(topic), qos, raw=True,
                                               event_callbacks=SubscriptionEventCallbacks(
                                                   incompatible_qos=on_incompatible))
            subs[(reliable, latched)] = sub
            self.get_logger().info(
                f"subscribed to {topic} ({self._types[topic][0]}, {'reliable' if reliable else 'best effort'}"
                f"{', transient local' if latched else ''}"
                f"{'; another subscription for publishers offering this QoS' if len(subs) > 1 else ''})"
            )

    def _callback(self, topic: str) -> Any:
        """The subscription callback of ``topic``: account (drop a second copy), queue, count."""
        put = self._queue.put
        received = self._received
        take = self._loss[topic].take
        if self.get_parameter("use_sim_time").value:
            clock = self.get_clock()

            def stamp() -> int:
                return clock.now().nanoseconds
        else:
            stamp = time.time_ns  # the node clock is the system clock: skip rclpy's Time objects

        if not _WITH_INFO:
            def on_message_only(data: bytes) -> None:
                if self._closed:  # a callback after close() (a caller spinning on): not received
                    return
                take(None, None)
                put((topic, stamp(), data, None, None))
                received[topic] += 1
            return on_message_only

        def on_message(*args: Any) -> None:
            # (data, info); rclpy's EventsExecutor (Jazzy, Kilted) hands over the pair as one tuple
            data, info = args[0] if len(args) == 1 else args
            if self._closed:
                return
            seq = info.get("publication_sequence_number")
            gid = info.get("publisher_gid")
            pub = gid["data"] if gid else None
            source = info.get("source_timestamp")
            if not take(pub, seq, (source, seq)):
                return  # the copy of a message already taken through another subscription
            put((topic, stamp(), data, pub, source))
            received[topic] += 1

        on_message.__signature__ = _MSG_AND_INFO  # type: ignore[attr-defined]  # rclpy: hand over the info
        return on_message

    def _on_max_duration(self) -> None:
        self.get_logger().info("max_duration reached: stopping")
        if self._stop_timer is not None:
            self._stop_timer.cancel()
        if not request_stop():  # not under run_node (a test spinning the node itself)
            self.context.try_shutdown()

    # -- writer thread --------------------------------------------------------------------------
    def _write_loop(self) -> None:
        bag = self._bag
        try:
            bag.open()
        except Exception as exc:
            self._open_error = exc
            return
        finally:
            self._opened.set()
        next_flush = time.monotonic() + self._flush_period
        stop = False
        while not stop:
            # Work in batches: sleeping between drains costs at most _BATCH_S of latency but saves
            # a thread wake-up (and a GIL hand-over with the executor) per message.
            time.sleep(_BATCH_S)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True  # everything queued before it has been written
                    break
                try:
                    if item[0] == "add":
                        _, topic, msgtype, offered = item
                        if not bag.has_topic(topic):
                            bag.add_topic(topic, msgtype, qos=offered)
                    else:
                        topic, t_ns, data, pub, source = item
                        if self._records(topic):
                            bag.write(topic, t_ns, data)
                            self._written += 1
                            loss = self._loss[topic]
                            if loss.lost_by_sequence is None or loss.untracked:
                                # no sequence numbers to count by: the stamps against the topic's rate
                                stamp = _header_stamp(data) if self._header[topic] else None
                                if stamp or source:
                                    loss.stamp(pub, stamp or source)
                        if topic == JOINT_STATES and self._tf_on and self._tf is not None:
                            self._write_tf(bag, t_ns, data)
                except Exception as exc:  # disk full, ...: keep recording what can be recorded
                    self._write_errors += 1
                    if self._write_errors <= 5 or self._write_errors % 1000 == 0:
                        self.get_logger().error(f"bag write failed ({self._write_errors}): {exc}")
            if not stop and time.monotonic() >= next_flush:
                try:
                    self._report_into(bag)
                    bag.flush()
                except Exception as exc:
                    self.get_logger().error(f"bag checkpoint failed: {exc}")
                next_flush = time.monotonic() + self._flush_period
        self._report_into(bag)
        bag.close()

    def report(self) -> dict[str, dict[str, Any]]:
        """The loss account of every recorded topic (core/record/loss.py), JSON-able."""
        return {t: loss.report() for t, loss in list(self._loss.items()) if self._records(t)}

    def _report_into(self, bag: BagWriter) -> None:
        """The report into the bag's metadata (written at its next checkpoint, and at close)."""
        bag.set_custom_data(REPORT_KEY, json.dumps({"topics": self.report(), "write_errors": self._write_errors},
                                                   sort_keys=True))

    def _write_tf(self, bag: BagWriter, stamp: int, data: bytes) -> None:
        """The computed /tf (and /tf_static, once) of one joint state, logged at its receive time."""
        assert self._tf is not None
        for topic, cdr in self._tf.add_cdr(data):
            if topic == TF_STATIC_TOPIC and not self._records(topic):
                continue
            if not bag.has_topic(topic):
                qos = TopicQos(reliable=True, transient_local=topic == TF_STATIC_TOPIC,
                               depth=1 if topic == TF_STATIC_TOPIC else 100)
                bag.add_topic(topic, TF_TYPE, qos=[qos])
            bag.write(topic, stamp, cdr)
            self._computed += 1

    # -- shutdown -------------------------------------------------------------------------------
    def close(self) -> None:
        """Write every queued message, close the bag, stop subscribing (called by run_node after
        the executor has stopped)."""
        if self._closed:
            return
        self._closed = True
        # The executor has stopped: no callback queues anything more. The bag is written out and
        # closed before the middleware is touched again, so a teardown that stalls cannot cost it.
        self._queue.put(_STOP)
        self._writer.join()
        for sub in [s for subs in self._subs.values() for s in subs.values()]:
            try:
                self.destroy_subscription(sub)
            except Exception:
                pass
        received = sum(n for t, n in self._received.items() if self._records(t))
        computed = f", {self._computed} computed (/tf, /tf_static from /joint_states)" if self._tf is not None else ""
        lost = loss_line(self.report())
        print(
            f"[recorder] closed {self.path}: {self._written} messages written, {received} received,"
            f" {self._write_errors} write errors{computed}; {lost or 'nothing lost'}",
            flush=True,
        )
        if lost:
            self.get_logger().warning(f"the bag is incomplete: {lost}")

    def messages_taken(self) -> int:
        """Messages taken from the subscriptions so far (run_node drains them after a stop until this
        stops growing: what the graph published just before it stopped is in the bag)."""
        return sum(self._received.values())

    @property
    def stats(self) -> dict[str, int]:
        """Messages received per recorded topic so far."""
        return {t: n for t, n in self._received.items() if self._records(t)}


def _header_stamp(data: bytes) -> int | None:
    """The header stamp (ns) of a serialized message whose first field is a std_msgs/Header
    (little-endian CDR: 4 bytes of encapsulation, then int32 sec, uint32 nanosec); None if not."""
    if len(data) < 12 or data[1] != 1:
        return None
    sec, nsec = struct.unpack_from("<iI", data, 4)
    return sec * 1_000_000_000 + nsec or None


def main(args: list[str] | None = None) -> int:
    return run_node(RecorderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())

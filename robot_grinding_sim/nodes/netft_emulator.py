"""netft_emulator: an ATI Net F/T on loopback that reads an emulated cell's F/T sensor topic.

Part of ``grinding emulate`` (robot_grinding_sim/cli/emulate.py): the emulated cell's
contact_solver_node publishes what its F/T sensor model reads (``ft_sensor/wrench``, in the
emulated cell's namespace, e.g. ``/emulated/ft_sensor/wrench``: contact wrench + tool weight +
bias + noise + filter with the cell's *true* parameters); this node serves the newest reading
through :class:`~robot_grinding_sim.hardware.rdt_emulator.RDTEmulator` (the Net F/T's RDT
protocol over UDP on 127.0.0.1 at ``port``), so that ``hardware_driver`` with ``ft_backend: netft``
and ``ft_sensor_ip: 127.0.0.1`` reads it as it reads a real sensor.

Subscribes: ``wrench_topic`` (geometry_msgs/WrenchStamped, N and N m in the sensor frame; default
the relative ``ft_sensor/wrench``).

Serves (UDP, 127.0.0.1 only; the emulator refuses any other address): RDT records at ``rate`` Hz
to the last start requester, converted to counts with ``counts_per_force`` / ``counts_per_torque``
(the sensor's calibration: set the driver's to the same values). Until the first reading arrives
the records carry status bit 31 (the sensor reports an error): the driver skips them and keeps
refusing commands ("waiting for F/T"), as with a sensor that is not ready.

Clock: the sensor samples on the emulated arm's clock, the readings' stamps
(:class:`~robot_grinding_sim.hardware.rdt_emulator.StampedReadings`): record k carries the reading
stamped at or before ``origin + k / rate`` (``origin``: the wall-clock stamp of the emulator's time 0)
and leaves once the arm has got that far. An emulated arm starved of CPU lags the wall clock (up to
its max_lag, longer within a slow catch-up); its sensor lags with it, by at most ``max_hold`` (the
driver judges a reading that old as late: keep it below the driver's ft_timeout; an arm further
behind has its newest reading served ``max_hold`` behind the wall clock), so the driver gets each
reading with the joint states of the same instant, as from a real arm and sensor that both keep
real time (served on the wall clock, the newest reading at each instant was up to the arm's lag
older than the joint states stamped then). Like a real sensor it keeps streaming its last reading,
on the wall clock, once the topic has been silent for :data:`SILENCE_TIMEOUT`.

Faults (RDTFaults, passed through): ``drop_fraction``, ``reorder_fraction``, ``corrupt_fraction``
(each record, seeded by ``seed``; the three settable at run time, ``ros2 param set``),
``silent_after`` (s after start; < 0: never). ``~/silence`` (std_srvs/SetBool): true, the sensor
falls silent at once (no record sent) until false; the answer says how many records were sent.

Exit: SIGINT/SIGTERM exit 0 (run_node); ``close()`` stops the server thread and closes the socket.
"""

from __future__ import annotations

import sys
from typing import Any

from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from std_srvs.srv import SetBool

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.ros import conversions as cv
from robot_grinding_sim.ros.node_base import guarded, run_node
from robot_grinding_sim.ros.parameters import ParameterError, declare_parameters
from robot_grinding_sim.ros.schemas import node_specs

NODE_NAME = "netft_emulator"
#: Net F/T status word with the error bit set: sent until the first reading arrives
STATUS_NOT_READY = 1 << 31
#: the wrench topic silent this long (s of wall time): the last reading streams on the wall clock
SILENCE_TIMEOUT = 0.5


class NetFTEmulatorNode(Node):
    """The emulated Net F/T (see the module docstring)."""

    NODE_NAME = NODE_NAME

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(NODE_NAME, **kwargs)
        p = declare_parameters(self, node_specs(NODE_NAME))
        self.p = p
        from robot_grinding_sim.hardware.rdt_emulator import RDTEmulator, RDTFaults, StampedReadings

        try:
            faults = RDTFaults(drop_fraction=p["drop_fraction"], reorder_fraction=p["reorder_fraction"],
                               corrupt_fraction=p["corrupt_fraction"],
                               silent_after=None if p["silent_after"] < 0 else p["silent_after"])
        except InputError as exc:
            name = next((n for n in ("drop_fraction", "reorder_fraction", "corrupt_fraction", "silent_after")
                         if n in str(exc)), "drop_fraction")
            raise ParameterError(name, str(exc), NODE_NAME) from None
        self.readings = StampedReadings(silence_timeout=SILENCE_TIMEOUT)
        self.received = 0
        try:
            self.emulator = RDTEmulator(self.readings.source, rate_hz=p["rate"], port=p["port"],
                                        counts_per_force=p["counts_per_force"],
                                        counts_per_torque=p["counts_per_torque"], status=STATUS_NOT_READY,
                                        faults=faults, seed=p["seed"], until=self.readings.until,
                                        max_hold=p["max_hold"])
        except InputError as exc:
            raise ParameterError("port", str(exc), NODE_NAME) from None
        self.emulator.start()
        # the stamp (ROS wall time) of emulator time 0
        self.readings.origin = self.get_clock().now().nanoseconds * 1e-9 - self.emulator.clock()
        self.create_subscription(WrenchStamped, p["wrench_topic"], guarded(self, "wrench")(self._on_wrench), 100)
        self.create_service(SetBool, "~/silence", self._on_silence)
        self.add_post_set_parameters_callback(self._faults_set)
        host, port = self.emulator.address
        self.get_logger().info(
            f"ready: Net F/T RDT on {host}:{port} at {p['rate']:g} Hz ({p['counts_per_force']:g} counts/N, "
            f"{p['counts_per_torque']:g} counts/N m) serving {self.resolve_topic_name(p['wrench_topic'])} on its "
            f"stamps' clock (at most {p['max_hold']:g} s behind the wall clock); faults: "
            f"drop {faults.drop_fraction:g}, reorder {faults.reorder_fraction:g}, corrupt "
            f"{faults.corrupt_fraction:g}, silent after "
            f"{'never' if faults.silent_after is None else f'{faults.silent_after:g} s'}")

    def _on_wrench(self, msg: WrenchStamped) -> None:
        w = cv.wrench_to_array(msg)  # NaN/inf: an InputError, logged by guarded; the last reading stays
        stamp = cv.time_to_sec(msg.header.stamp)
        # unstamped: dated on arrival
        self.readings.add(stamp if stamp > 0.0 else self.get_clock().now().nanoseconds * 1e-9, w)
        self.received += 1
        if self.received == 1:
            self.emulator.status = 0
            self.get_logger().info("first reading: streaming it (status 0)")

    def _on_silence(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.emulator.silence(request.data)
        response.success = True
        response.message = (f"{'silent' if request.data else 'streaming'} after {self.emulator.sent} records sent "
                            f"(emulator clock {self.emulator.clock():.6f} s)")
        self.get_logger().warning(f"~/silence {request.data}: {response.message}")
        return response

    def _faults_set(self, params: list[Any]) -> None:
        """``ros2 param set`` of a fault fraction (validated by its range already): the new faults at once."""
        names = ("drop_fraction", "reorder_fraction", "corrupt_fraction")
        changed = {prm.name: float(prm.value) for prm in params if prm.name in names}
        if not changed:
            return
        from robot_grinding_sim.hardware.rdt_emulator import RDTFaults

        old = self.emulator.faults
        self.emulator.faults = RDTFaults(**{n: changed.get(n, getattr(old, n)) for n in names},
                                         silent_after=old.silent_after)
        self.get_logger().warning(f"faults now: {', '.join(f'{n} {v:g}' for n, v in changed.items())}")

    def close(self) -> None:
        """Stop the RDT server thread and close its socket."""
        self.emulator.close()


def main(args: list[str] | None = None) -> int:
    """``ros2 run robot_grinding_sim netft_emulator [--ros-args ...]``."""
    return run_node(NetFTEmulatorNode, args, default_name=NODE_NAME)


if __name__ == "__main__":
    sys.exit(main())

"""The ATI Net F/T as a driver's F/T backend (``ft_backend: netft``): RDT over UDP, read by a thread.

Parameters (the driver's): ``ft_sensor_ip`` (an IPv4 address, checked here: no name lookup, no
multicast or broadcast), ``ft_port``, ``counts_per_force`` / ``counts_per_torque``, ``ft_rate`` (the
sensor's RDT output rate: the clock its records are dated by, hardware/ft_stream.py). Each read takes
every record queued (:meth:`~robot_grinding_sim.hardware.netft.NetFTClient.read_batch`: lost,
out-of-order and corrupt records are counted by the client and skipped); records whose status word
has bit 31 set (the sensor reports an error) are counted and not delivered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.parameters import ParameterError
from robot_grinding_sim.hardware.ft_backend import FTContext, ThreadedFTBackend
from robot_grinding_sim.hardware.ft_stream import FTReadings
from robot_grinding_sim.hardware.netft import NetFTClient

__all__ = ["STATUS_ERROR", "NetFTBackend", "ipv4_parameter"]

#: Net F/T status word: bit 31 set means the sensor reports an error
STATUS_ERROR = 1 << 31


def ipv4_parameter(value: str, name: str) -> str:
    """``value`` as the IPv4 address of one device; ParameterError naming ``name`` otherwise (no name lookup)."""
    if not value.strip():
        raise ParameterError(name, "empty: set the Net F/T's address (or ft_backend: topic)")
    try:
        ip = ipaddress.ip_address(value.strip())
    except ValueError:
        raise ParameterError(name, f"{value!r} is not an IP address") from None
    if ip.version != 4:
        raise ParameterError(name, f"{value!r}: the Net F/T speaks IPv4 only")
    if ip.is_multicast or ip.is_unspecified or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ParameterError(name, f"{value!r} is not the address of one device")
    return str(ip)


class NetFTBackend(ThreadedFTBackend):
    """ATI Net F/T over RDT (module docstring)."""

    name = "netft"

    def __init__(self, params: Mapping[str, Any], context: FTContext) -> None:
        super().__init__(params, context)
        self.ip = ipv4_parameter(params["ft_sensor_ip"], "ft_sensor_ip")
        self.port = int(params["ft_port"])
        self.client: NetFTClient | None = None
        self.status_errors = 0
        self._rate_warned = False

    def describe(self) -> str:
        return f"Net F/T at {self.ip}:{self.port}"

    def connect(self) -> None:
        if self.client is not None:
            return
        p = self.params
        try:
            self.client = NetFTClient(self.ip, self.port, p["counts_per_force"], p["counts_per_torque"],
                                      timeout=min(0.05, self.context.period), rate_hz=p["ft_rate"])
        except (InputError, OSError) as exc:
            raise ParameterError("ft_sensor_ip", f"{self.ip}:{self.port}: {exc}") from None

    def disconnect(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()

    def start_device(self) -> None:
        if self.client is None:
            raise RuntimeError("Net F/T: start before connect")
        try:
            self.client.start()
        except OSError as exc:  # the request could not be sent (no route, the address refused)
            raise ParameterError("ft_sensor_ip", f"{self.ip}:{self.port}: {exc}") from None

    def stop_device(self) -> None:
        if self.client is not None and self.client.streaming:
            self.client.stop()

    def read(self) -> FTReadings | None:
        client = self.client
        if client is None:
            raise RuntimeError("NetFTClient is closed")
        try:
            batch = client.read_batch()
        except TimeoutError:
            return None
        healthy = (batch.status & STATUS_ERROR) == 0
        self.status_errors += int((~healthy).sum())
        why = client.clock.rate_error if client.clock is not None else None
        if why is not None and not self._rate_warned:
            self._rate_warned = True
            self.context.log("warning", f"Net F/T: {why}")
        return batch.select(healthy)

    def diagnostics(self) -> dict[str, str]:
        c = self.client
        if c is None:
            return {"ft_sensor_ip": self.ip, "ft_status_errors": str(self.status_errors)}
        return {"ft_sensor_ip": c.host, "ft_received": str(c.received), "ft_lost": str(c.lost),
                "ft_out_of_order": str(c.out_of_order), "ft_bad_packets": str(c.bad_packets),
                "ft_superseded": str(c.superseded), "ft_status_errors": str(self.status_errors),
                "ft_rate_measured_hz": "" if c.clock is None else f"{c.clock.measured_rate():.6g}",
                "ft_rate_error": "" if c.clock is None else c.clock.rate_error or ""}

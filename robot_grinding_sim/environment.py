"""DDS discovery environment of the processes this package starts.

Two rules (REP-2009 variables, Jazzy and later):

* a node started by someone else (``ros2 run``, ``ros2 launch``, a user's script) keeps the
  ``ROS_AUTOMATIC_DISCOVERY_RANGE`` it was given, so a real cell set to SUBNET still reaches RViz
  and the drivers on other hosts; only when the variable is unset does the node default to
  LOCALHOST (:func:`default_discovery_range`);
* the package's own launchers (``grinding bringup``, ``grinding record``, ``grinding demo``), the
  tests and CI set the range explicitly, LOCALHOST unless told otherwise (:func:`localhost_env`).

No rclpy import here: launchers, tests and CI call this before any node exists.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The variable that scopes DDS discovery (ROS_LOCALHOST_ONLY is its deprecated pre-Jazzy spelling).
DISCOVERY_VAR = "ROS_AUTOMATIC_DISCOVERY_RANGE"
#: Its values (rmw's ``rmw_automatic_discovery_range_t``).
DISCOVERY_RANGES = ("SYSTEM_DEFAULT", "LOCALHOST", "SUBNET", "OFF")


def _check_range(value: str) -> str:
    if value not in DISCOVERY_RANGES:
        raise ValueError(f"{DISCOVERY_VAR} must be one of {', '.join(DISCOVERY_RANGES)}, got {value!r}")
    return value


def localhost_env(
    domain_id: int | None = None,
    base: MutableMapping[str, str] | None = None,
    legacy: bool = False,
    discovery_range: str = "LOCALHOST",
) -> dict[str, str]:
    """Return a copy of ``base`` (default ``os.environ``) for a process this package launches.

    Args:
        domain_id: ROS_DOMAIN_ID to set (0..101); None keeps the one in ``base``.
        base: the environment to start from.
        legacy: also set ROS_LOCALHOST_ONLY=1 for distributions older than Jazzy (LOCALHOST only).
        discovery_range: the ROS_AUTOMATIC_DISCOVERY_RANGE to set (a launcher's option; the
            package's launchers pass LOCALHOST unless the user asks for SUBNET).

    Raises:
        ValueError: naming the variable, for a domain id outside 0..101 or an unknown range.
    """
    env = dict(os.environ if base is None else base)
    env[DISCOVERY_VAR] = _check_range(discovery_range)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if legacy and discovery_range == "LOCALHOST":
        env["ROS_LOCALHOST_ONLY"] = "1"
    if domain_id is not None:
        if not 0 <= int(domain_id) <= 101:
            raise ValueError(f"ROS_DOMAIN_ID must be in 0..101, got {domain_id}")
        env["ROS_DOMAIN_ID"] = str(int(domain_id))
    return env


def apply_localhost_env(domain_id: int | None = None, discovery_range: str = "LOCALHOST") -> None:
    """Set this launcher process's discovery range and domain (call before ``rclpy.init``)."""
    os.environ.update(localhost_env(domain_id, base=os.environ, discovery_range=discovery_range))


def default_discovery_range(environ: MutableMapping[str, str] | None = None) -> str:
    """A node's default: LOCALHOST only when ROS_AUTOMATIC_DISCOVERY_RANGE is unset or empty.

    A value the user set (SUBNET on a real cell) is kept as it is. Returns the range in effect.
    """
    env = os.environ if environ is None else environ
    if not env.get(DISCOVERY_VAR):
        env[DISCOVERY_VAR] = "LOCALHOST"
    return env[DISCOVERY_VAR]

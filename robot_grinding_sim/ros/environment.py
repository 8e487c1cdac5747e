"""DDS environment for every process this package starts: discovery stays on loopback.

No rclpy import here: the launcher, the tests and CI call this before any node exists.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: Variables that keep DDS discovery on this machine (Jazzy and later; ROS_LOCALHOST_ONLY is the
#: pre-Jazzy spelling and is deprecated from Jazzy on, so it is set only where asked for).
LOCALHOST_ENV = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}


def localhost_env(
    domain_id: int | None = None,
    base: MutableMapping[str, str] | None = None,
    legacy: bool = False,
) -> dict[str, str]:
    """Return a copy of ``base`` (default ``os.environ``) with DDS confined to loopback.

    Args:
        domain_id: ROS_DOMAIN_ID to set (0..101); None keeps the one in ``base``.
        base: the environment to start from.
        legacy: also set ROS_LOCALHOST_ONLY=1 for distributions older than Jazzy.
    """
    env = dict(os.environ if base is None else base)
    env.update(LOCALHOST_ENV)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    if legacy:
        env["ROS_LOCALHOST_ONLY"] = "1"
    if domain_id is not None:
        if not 0 <= int(domain_id) <= 101:
            raise ValueError(f"ROS_DOMAIN_ID must be in 0..101, got {domain_id}")
        env["ROS_DOMAIN_ID"] = str(int(domain_id))
    return env


def apply_localhost_env(domain_id: int | None = None) -> None:
    """Confine this process's DDS traffic to loopback (call before ``rclpy.init``)."""
    os.environ.update(localhost_env(domain_id, base=os.environ))

"""Where rclpy differs between the ROS 2 distributions the package runs on (Jazzy, Kilted).

Every difference is detected from the installed rclpy (a function's signature, an attribute), never
from a version number, so a distribution not listed here works as soon as it has the features.
What each function does on each distribution:

=====================  ==============================================  ===============================
feature                Kilted (rclpy 9.x)                              Jazzy (rclpy 7.x)
=====================  ==============================================  ===============================
:func:`shutdown`       ``rclpy.try_shutdown(uninstall_handlers=False)``  ``rclpy.shutdown(uninstall_handlers=False)``
                                                                       if the context is still ok
                                                                       (Jazzy has no ``rclpy.try_shutdown``)
:func:`parameter_type_id`  ``int(Parameter.Type.X)`` (an ``IntEnum``)  ``Parameter.Type.X.value`` (an ``Enum``)
=====================  ==============================================  ===============================

Imported lazily by the nodes and launchers (it imports rclpy).
"""

from __future__ import annotations

import inspect
from typing import Any


def _accepts(fn: Any, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def shutdown(context: Any = None) -> None:
    """Shut ``context`` (default: rclpy's global one) down if it is still ok, leaving the process's
    SIGINT/SIGTERM handlers as they are (rclpy's ``shutdown`` would reset them to ``SIG_DFL``, and a
    second signal while the process exits would then kill it with -2 or -15).

    Kilted's ``rclpy.try_shutdown`` does this in one call; Jazzy has only ``rclpy.shutdown``, which
    raises once the context is shut down, so the context's state is checked first.
    """
    import rclpy

    kwargs: dict[str, Any] = {"context": context}
    try_shutdown = getattr(rclpy, "try_shutdown", None)
    if try_shutdown is not None:
        if _accepts(try_shutdown, "uninstall_handlers"):
            kwargs["uninstall_handlers"] = False
        try_shutdown(**kwargs)
        return
    ctx = context if context is not None else rclpy.get_default_context()
    if not ctx.ok():
        return
    if _accepts(rclpy.shutdown, "uninstall_handlers"):
        kwargs["uninstall_handlers"] = False
    try:
        rclpy.shutdown(**kwargs)
    except rclpy.exceptions.RCLError:  # another thread shut it down since ctx.ok()
        if ctx.ok():
            raise


def parameter_type_id(param_type: Any) -> int:
    """The ``rcl_interfaces/ParameterType`` number of an ``rclpy.parameter.Parameter.Type`` member
    (an ``IntEnum`` on Kilted, a plain ``Enum`` whose value is the number on Jazzy)."""
    return int(getattr(param_type, "value", param_type))


__all__ = ["parameter_type_id", "shutdown"]

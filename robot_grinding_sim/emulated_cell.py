"""The emulated cell of ``grinding emulate``: its node description, ROS-free like
:mod:`robot_grinding_sim.bringup` (whose NodeSpec it uses).

An emulated arm (dynamics_node with its contact and F/T sensor model in process) and an emulated
Net F/T that real mode
(hardware_driver and the rest of :func:`robot_grinding_sim.bringup.graph` for ``real``) drives
unchanged on loopback; see :func:`emulated_cell`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from robot_grinding_sim.bringup import (
    MODES,
    NodeSpec,
    config_files,
)

#: The emulated cell's true parameters (``grinding emulate``): applied after config/cell.yaml and the
#: node's own file, so the emulated arm, contact and sensor differ from what real mode's prediction assumes.
EMULATED_CELL_CONFIG = "config/emulated_cell.yaml"
#: Namespace of the emulated cell's internals (``grinding emulate``).
EMULATED_NAMESPACE = "/emulated"
#: The topic a UR's ros2_control driver reads trajectories on (hardware_driver's output_topic default).
CONTROLLER_TOPIC = "/scaled_joint_trajectory_controller/joint_trajectory"


def emulated_cell(
    namespace: str = EMULATED_NAMESPACE,
    controller_topic: str = CONTROLLER_TOPIC,
    robot_description_file: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    netft: Mapping[str, Any] | None = None,
) -> list[NodeSpec]:
    """The nodes of ``grinding emulate``: an emulated arm and Net F/T that real mode drives unchanged.

    Everything runs in ``namespace`` on wall time (use_sim_time false, no /clock), so nothing the
    emulated cell computes meets a topic of the real-mode graph (its /ft_sensor/wrench, tool pose and
    node names stay under the namespace). Only the arm's interface is shared, as with a real arm:
    ``dynamics_node`` reads trajectories on ``controller_topic`` (where hardware_driver forwards
    them) and publishes ``/joint_states``; it computes the contact with the part itself at every
    step (``coupling: local``) and publishes its F/T sensor model's reading. The F/T reading leaves
    the cell by UDP only: ``netft_emulator`` serves ``<namespace>/ft_sensor/wrench`` as a Net F/T on
    127.0.0.1.

    Args:
        namespace: absolute namespace of the emulated internals.
        controller_topic: the trajectory topic the emulated arm follows.
        robot_description_file: URDF (default: the parameter files', config/cell.yaml's the package's).
        overrides: cell parameters of the emulated cell (name -> value), applied to its arm after
            config/emulated_cell.yaml (e.g. ``{"contact.stiffness": 3e5}``).
        netft: netft_emulator's parameters (port, rate, counts, faults).
    """
    if not namespace.startswith("/") or namespace == "/":
        raise ValueError(f"namespace must be absolute and not the root, got {namespace!r}")
    if not controller_topic.startswith("/"):
        raise ValueError(f"controller_topic must be absolute, got {controller_topic!r}")
    # the URDF only when given: an override (-p) would beat the cell's own --params-file, whose
    # robot.description_file (config/cell.yaml's empty one: the package's) then names the arm
    urdf = robot_description_file
    cell = {"use_sim_time": False, **({"robot.description_file": urdf} if urdf else {}), **(overrides or {})}
    ns = ("__ns", namespace)
    arm_topics = (("joint_states", "/joint_states"),)

    def files(executable: str) -> tuple[str, ...]:
        return (*config_files(executable), EMULATED_CELL_CONFIG)

    return [
        NodeSpec(
            "dynamics_node",
            "dynamics_node",
            MODES,
            "emulated arm on wall time with its contact and F/T sensor: follows the controller topic, publishes "
            "/joint_states",
            params_files=files("dynamics_node"),
            # a real arm's time never stops and its contact is physics, not a message: the contact is
            # computed in the arm's process at every step (coupling local, the in-process job's step), so
            # a busy machine delays the cell's outputs but never changes its force. A backlog is caught
            # up rather than skipped: a skip moves the reference along the trajectory at once, a jolt
            # (48 N on an engagement after a 0.29 s skip; a tool 2.5 mm off its path on a retreat). Each
            # tick integrates up to now (max_steps_per_update at its bound: with 1000, a stall over 1 s
            # dropped the rest, which stayed a lag until skipped); only a stall over max_lag (1 s) is
            # skipped, and said. Joint states and the F/T reading at 500 Hz (a UR's rate)
            parameters={**cell, "publish_clock": False, "coupling": "local", "publish_ft": True,
                        "max_steps_per_update": 100000, "max_lag": 1.0, "joint_state_decimation": 2},
            remappings=(ns, *arm_topics, ("joint_trajectory_controller/joint_trajectory", controller_topic)),
        ),
        NodeSpec(
            "netft_emulator",
            "netft_emulator",
            MODES,
            "the emulated sensor's readings as an ATI Net F/T (RDT over UDP on 127.0.0.1)",
            params_files=("config/netft_emulator.yaml",),
            parameters={"use_sim_time": False, **(netft or {})},
            remappings=(ns,),
        ),
    ]

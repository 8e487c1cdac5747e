"""The robot holds the part; the tool stands in the cell (issue 24 item 3).

A cell for small parts: the tool (a ball, a belt, a fixed wheel) is fixed in the cell and the arm
carries the part past it. What grinds is the tool centre relative to the part, so the job is run
in the part's frame: :class:`HeldPartModel` is the cell's
:class:`~robot_grinding_sim.core.robot.dynamics.RobotModel` whose tool centre (its tip link,
``tool.tcp_link``) is the fixed tool centre *as seen from the held part*, carried to the part's
nominal pose X_BP0 (``workpiece.pose``, where the plan and the contact query put the part):

    X_tcp(q) = X_BP0 inv(X_BP(q)) X_BT,    X_BP(q) = X_B,holder(q) X_holder,P,

and its Jacobian J = diag(A, A) (J_tool - J_holder) at the tool centre (A = R_BP0 R_BP(q)^T,
J_tool = 0 for a tool fixed in the cell). The planner's IK, the trajectory, the coupled step's
contact (gap, rate, effective mass 1 / (n^T J M^-1 J^T n) with the real arm's M, the torques
J^T w), the removal and the outputs then run unchanged: they see the tool move over the part at
its nominal pose. One implementation: :func:`~robot_grinding_sim.core.robot.kernels.tcp_kinematics`
computes both, for the compiled step and for this class.

Units: m, rad; frames: the robot's root frame (base_link) unless named.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.robot.kernels import tcp_kinematics

FloatArray = NDArray[np.float64]

#: the compiled step's (hbody, H) when the part stands in the cell
NOT_HELD: tuple[int, FloatArray] = (-2, np.zeros((2, 4, 4)))
#: the part's frame (tf), as the viewers and the recorder name it
PART_FRAME = "workpiece"
#: the frame a held part's job writes its geometry in (the part at its nominal pose; see
#: :func:`output_frame`)
NOMINAL_FRAME = "workpiece_nominal"


def held_kernel(model: Any) -> tuple[int, FloatArray]:
    """(hbody, H (2, 4, 4)) of :func:`~robot_grinding_sim.core.robot.kernels.tcp_kinematics`
    for ``model``: a :class:`HeldPartModel`'s, or :data:`NOT_HELD`."""
    return getattr(model, "held_kernel", NOT_HELD)


class HeldPartModel:
    """A robot that holds the part against a tool fixed in the cell, as the job sees it.

    Args:
        robot: the RobotModel loaded with tip link ``holder_link`` (the arm's chain ends at the
            part's holder; the tool's links hang from the root).
        tcp_link: the tool centre point, a link fixed to the URDF's root (z out of the tool).
        holder_link: the link the part is fixed to (``workpiece.link``).
        X_hP: (4, 4) the part frame in ``holder_link`` (``workpiece.grasp``).
        X_BP0: (4, 4) the part's nominal pose in the root frame (``workpiece.pose``).

    Everything but :meth:`fk`, :meth:`jacobian` and :meth:`effective_mass` of the tool centre
    (and ``tip_link``, which names it) and :meth:`link_poses` is the robot's own, with the part's
    body (:meth:`hold`) lumped into the holder's inertia.

    Raises:
        InputError: the tcp is not fixed to the root, or the holder does not move with the arm.
    """

    def __init__(self, robot: Any, tcp_link: str, holder_link: str, X_hP: FloatArray, X_BP0: FloatArray) -> None:
        self.robot = robot
        body_t, X_t = robot.kernel_arrays(tcp_link)[4:]
        body_h, X_h = robot.kernel_arrays(holder_link)[4:]
        if body_t != -1:
            raise InputError(f"tool.tcp_link {tcp_link!r} moves with the arm in {robot.source}; with the part on "
                             f"the robot (workpiece.link {holder_link!r}) the tool must stand in the cell: attach "
                             f"its links to the root link {robot.root_link!r} with fixed joints")
        if body_h < 0:
            raise InputError(f"workpiece.link {holder_link!r} does not move with the arm in {robot.source}: name the "
                             "link the part is fixed to (the flange, or a gripper on it)")
        self.tip_link = tcp_link
        self.holder_link = holder_link
        self.X_hP = np.asarray(X_hP, dtype=float)
        self.X_BP0 = np.asarray(X_BP0, dtype=float)
        H = np.empty((2, 4, 4))
        H[0] = X_h @ self.X_hP  # the part frame in the holder's body
        H[1] = self.X_BP0
        self.held_kernel: tuple[int, FloatArray] = (int(body_h), H)
        self.X_BT = np.array(X_t, dtype=float)
        #: the held part's body: mass (kg), centre of mass (3,) and inertia about it (3, 3), part frame
        self.part_mass, self.part_com, self.part_inertia = 0.0, np.zeros(3), np.zeros((3, 3))
        self._bare = robot  # the arm without the part

    def hold(self, mass: float, com: FloatArray, inertia: FloatArray) -> None:
        """Carry the part's rigid body: mass (kg), centre of mass com (3,) and inertia (3, 3) about it
        in the part frame, lumped into the holder's inertia (the arm's dynamics, its mass matrix and
        the effective mass at the tool, carry the part) and weighed by an F/T sensor it hangs from
        (:func:`~robot_grinding_sim.core.sim.ft.ft_sensor_model`). Replaces a body held before."""
        base = self._bare
        com, inertia = np.asarray(com, dtype=float).reshape(3), np.asarray(inertia, dtype=float).reshape(3, 3)
        R, p = self.X_hP[:3, :3], self.X_hP[:3, 3]
        self.robot = base.with_body(self.holder_link, mass, R @ com + p, R @ inertia @ R.T) if mass > 0 else base
        self.part_mass, self.part_com, self.part_inertia = float(mass), com, inertia

    def __getattr__(self, name: str) -> Any:
        return getattr(self.robot, name)

    def __repr__(self) -> str:
        return f"HeldPartModel({self.robot!r}, tool {self.tip_link!r} fixed, part on {self.holder_link!r})"

    def _tcp(self, link: str | None) -> bool:
        return link is None or link == self.tip_link

    def _kin(self, q: FloatArray) -> tuple[FloatArray, FloatArray]:
        q = np.ascontiguousarray(q, dtype=float)
        if q.shape != (self.robot.nq,) or not np.isfinite(q).all():
            raise InputError(f"q must be {self.robot.nq} finite joint positions; got {q!r}")
        jt, jd, _, ws, body, X = self.robot.kernel_arrays(self.tip_link)
        hbody, H = self.held_kernel
        T, J = np.empty((4, 4)), np.empty((6, self.robot.nq))
        tcp_kinematics(q, jt, jd, ws, body, X, hbody, H, T, J)
        return T, J

    def fk(self, q: Any, link: str | None = None) -> FloatArray:
        """The tool centre's pose relative to the part at its nominal pose (module docstring) for
        the tcp (default); any other link's root-frame pose as the robot's. q (nq,) or (B, nq)."""
        if not self._tcp(link):
            return self.robot.fk(q, link)
        q = np.asarray(q, dtype=float)
        if q.ndim == 2:
            return np.array([self._kin(qk)[0] for qk in q]).reshape(len(q), 4, 4)
        return self._kin(q)[0]

    def jacobian(self, q: Any, link: str | None = None, point: Any = None) -> FloatArray:
        """(6, nq) [linear; angular] of the tool centre relative to the part (module docstring),
        in the nominal part's root-frame axes; any other link's as the robot's."""
        if not self._tcp(link):
            return self.robot.jacobian(q, link, point)
        if point is not None:
            raise InputError("HeldPartModel.jacobian: the tool centre's Jacobian refers to the tool centre (no point)")
        return self._kin(np.asarray(q, dtype=float))[1]

    def link_poses(self, q: Any) -> dict[str, FloatArray]:
        """Every link's pose seen from the held part, carried to its nominal pose,
        X_BP0 inv(X_BP(q)) X_BL(q): (4, 4) each at q (nq,), (B, 4, 4) for a batch (B, nq). The
        arm and the standing tool around the part at ``workpiece.pose``, as the collision checks
        against the part need them; the links' poses relative to each other (the tf tree) are the
        robot's own."""
        P = self.robot.link_poses(q)
        G = self.X_BP0 @ np.linalg.inv(P[self.holder_link] @ self.X_hP)
        return {name: G @ X for name, X in P.items()}

    def effective_mass(self, q: Any, link: str | None, point: Any, direction: Any) -> float:
        """The arm's mass felt along ``direction`` (nominal part axes) at the tool centre relative to
        the part: 1 / (n^T J M^-1 J^T n), M the real arm's (``point``: the tool centre's, unused)."""
        if not self._tcp(link):
            return self.robot.effective_mass(q, link, point, direction)
        n = np.asarray(direction, dtype=float)
        n = n / np.linalg.norm(n)
        Jn = n @ self.jacobian(q)[:3]
        s = float(Jn @ np.linalg.solve(self.robot.mass_matrix(q), Jn))
        return 1.0 / s if s > 0.0 else float("inf")


def output_frame(model: Any) -> str:
    """The frame of a job's geometry (contact points, tool poses, plan and removal markers): the
    robot's root link; for a :class:`HeldPartModel` the part's nominal frame :data:`NOMINAL_FRAME`
    (root-frame coordinates as if the part stood at ``workpiece.pose``: it moves with the part)."""
    return NOMINAL_FRAME if isinstance(model, HeldPartModel) else model.root_link


def part_transforms(model: Any, X_BP: FloatArray) -> list[tuple[str, str, FloatArray]]:
    """The static transforms (parent, child, X (4, 4) the child's pose in the parent) that place the
    part frame :data:`PART_FRAME` in a tf tree: at ``X_BP`` in the root link; for a held part in its
    holder link at the grasp, and the nominal frame in the part, inv(X_BP0) (a point p_N of the
    nominal frame is X_BP0 p_P of the part's own coordinates)."""
    if not isinstance(model, HeldPartModel):
        return [(model.root_link, PART_FRAME, np.asarray(X_BP, dtype=float))]
    return [(model.holder_link, PART_FRAME, model.X_hP), (PART_FRAME, NOMINAL_FRAME, np.linalg.inv(model.X_BP0))]


__all__ = ["NOMINAL_FRAME", "NOT_HELD", "PART_FRAME", "HeldPartModel", "held_kernel", "output_frame", "part_transforms"]

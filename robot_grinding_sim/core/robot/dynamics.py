"""Rigid-body dynamics of a fixed-base serial chain: FK, Jacobians, RNEA, CRBA, forward dynamics.

One implementation: every public method validates its input cheaply in Python (shapes; NaN/inf are
caught inside the kernels) and calls a numba kernel working on flat arrays. The single-state and
batched entry points run the same per-state functions (``rnea_sample``, ``crba_sample``,
``fd_sample``, ``link_pose`` in :mod:`~robot_grinding_sim.core.robot.kernels`), so the two paths
cannot drift apart. Kernels are compiled on first use and cached on disk next to their module
(``cache=True``; a fresh checkout pays ~15-30 s once).
A model owns one scratch workspace: calls on one model are serialised by the GIL (the kernels
do not release it), so sharing a model between threads is safe.

Frames and conventions
- All poses, points, directions and wrenches are in the root link's frame (the URDF's root link),
  SI units. ``q`` in rad (revolute/continuous) or m (prismatic).
- Jacobian rows are [linear (3); angular (3)]: ``[v_point; omega] = J(q) @ qd``.
- External wrenches ``f_ext`` are what the environment applies ON a link: ``[force (3); torque (3)]``
  in the root frame, the torque taken about the link's origin. Joint torques then satisfy
  ``M qdd + C qd + g = tau + J(q, link)^T w`` with ``J`` the Jacobian at the link origin, i.e.
  ``rnea(q, qd, qdd, f_ext={link: w}) == rnea(q, qd, qdd) - J^T w``. Accepted forms:
    * a dict ``{link_name: wrench}`` with each wrench (6,) or, for a batch, (B, 6);
    * an array (L, 6) or (B, L, 6) indexed like ``model.link_names`` (L = len(link_names)).
  A wrench on a link rigidly attached to the root moves no joint and is ignored.
- Gravity is a root-frame acceleration vector (m/s^2), default (0, 0, -9.81).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError, ModelError
from robot_grinding_sim.core.robot import kernels as kn
from robot_grinding_sim.core.robot.model import KinematicChain, load_chain, parse_chain
from robot_grinding_sim.core.robot.spatial import lump_inertias, spatial_inertia

__all__ = ["RobotModel"]

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
_F64 = np.dtype(np.float64)
_STRIDE1 = (8,)


def _plain(x: Any, shape: tuple[int]) -> bool:
    """The common case that needs no coercion: a contiguous float64 ndarray of exactly ``shape`` (1-D).

    (Strided views go through coercion so the kernels are only ever compiled for contiguous arrays.)"""
    return type(x) is np.ndarray and x.dtype is _F64 and x.shape == shape and x.strides == _STRIDE1


def _as_float(x: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numeric; got {x!r:.80}") from exc


_NAMES_RNEA = ("q", "qd", "qdd", "gravity", "f_ext")
_NAMES_FD = ("q", "qd", "tau", "gravity", "f_ext")


class RobotModel:
    """A fixed-base serial chain with lumped inertias, loaded from a URDF (see module docstring).

    Attributes:
        joint_names (list[str]), nq (int), lower, upper, velocity_limits, effort_limits ((nq,)
        arrays; +-inf where the URDF gives no limit), root_link, tip_link, link_names (every link
        whose pose :meth:`fk` gives), locked_joints (moving joints off the chain, held at 0),
        collision_geometry (list of :class:`~robot_grinding_sim.core.robot.model.CollisionGeometry`:
        link, kind, params, origin 4x4 in the link frame, resolved mesh path or None), chain (the underlying
        :class:`~robot_grinding_sim.core.robot.model.KinematicChain`).
    """

    def __init__(self, chain: KinematicChain) -> None:
        self.chain = chain
        self.source = chain.source
        self.root_link = chain.root_link
        self.tip_link = chain.tip_link
        self.joint_names = list(chain.joint_names)
        self.nq = chain.nq
        self.lower = chain.lower.copy()
        self.upper = chain.upper.copy()
        self.velocity_limits = chain.velocity_limits.copy()
        self.effort_limits = chain.effort_limits.copy()
        self.link_names = list(chain.link_names)
        self.locked_joints = list(chain.locked_joints)
        self.collision_geometry = list(chain.collision_geometry)
        c = chain
        n = self.nq
        self._mass = np.array(c.mass, dtype=float)
        self._com = np.array(c.com, dtype=float)
        I6 = [spatial_inertia(m, cc, ii) for m, cc, ii in zip(c.mass, c.com, c.inertia, strict=True)]
        # packed model arrays and workspace of the kernels (layout: see the kernels' header)
        self._jt = np.ascontiguousarray(c.jtype, dtype=np.int64)
        self._jd = np.ascontiguousarray(np.hstack([c.axis, c.R0.reshape(n, 9), c.p0]))
        self._bd = np.ascontiguousarray(np.hstack([c.mass[:, None], c.com, c.inertia.reshape(n, 9),
                                                   np.reshape(I6, (n, 36))]))  # fmt: skip
        self._ws = np.zeros((n, kn.WS_COLS))
        self._link_index = {name: k for k, name in enumerate(self.link_names)}
        self._link_body = np.array([c.link_body[name] for name in self.link_names], dtype=np.int64)
        self._link_X = np.array([c.link_offset[name] for name in self.link_names])
        self._link_off = np.ascontiguousarray(self._link_X[:, :3, 3])
        self._no_body = np.zeros(0, dtype=np.int64)
        self._no_off = np.zeros((0, 3))
        self._default_g = np.array(DEFAULT_GRAVITY)
        self._shape1 = (self.nq,)
        self._zero3 = np.zeros(3)
        self._ext_cache: dict[tuple[int, ...], np.ndarray] = {}
        self._ext_sel: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}

    # ---------------------------------------------------------------------------------------
    @classmethod
    def from_urdf(
        cls,
        path: str | os.PathLike,
        tip_link: str | None = None,
        package_dirs: Sequence[str | os.PathLike] = (),
    ) -> RobotModel:
        """Load the chain from the URDF's root link to ``tip_link`` (default ``tcp`` if present,
        else the deepest link). Raises ModelError naming the file and the problem."""
        return cls(load_chain(path, tip_link, package_dirs))

    @classmethod
    def from_urdf_string(
        cls,
        xml: str | bytes,
        tip_link: str | None = None,
        package_dirs: Sequence[str | os.PathLike] = (),
        base_dir: str | None = None,
    ) -> RobotModel:
        """Like :meth:`from_urdf` for URDF text; relative mesh paths resolve against ``base_dir``."""
        return cls(parse_chain(xml, tip_link, package_dirs, source="<string>", base_dir=base_dir))

    def __repr__(self) -> str:
        return f"RobotModel({self.root_link!r} -> {self.tip_link!r}, nq={self.nq}, joints={self.joint_names})"

    def with_body(self, link: str, mass: float, com: Any, inertia: Any) -> RobotModel:
        """A copy of the model with a rigid body fixed to ``link`` (a held part, a payload): lumped into
        the inertia of the body ``link`` moves with, as the URDF's inertials of that body are.

        Args:
            link: a link of the model that moves with a joint.
            mass: kg (>= 0). com: (3,) its centre of mass in ``link`` (m).
            inertia: (3, 3) its inertia about its centre of mass, ``link``'s axes (kg m^2).

        Raises:
            InputError: not a moving link, or a bad value.
        """
        c = self.chain
        b = c.link_body.get(link, -1) if link in self._link_index else None
        if b is None or b < 0:
            raise InputError(f"{self.source}: a body fixed to {link!r} needs a link that moves with a joint")
        m = float(mass)
        com = np.asarray(com, dtype=float).reshape(3)
        inertia = np.asarray(inertia, dtype=float).reshape(3, 3)
        if not (np.isfinite(m) and m >= 0.0 and np.isfinite(com).all() and np.isfinite(inertia).all()):
            raise InputError(f"{self.source}: the body on {link!r} needs a finite mass >= 0, centre of mass and "
                             "inertia")
        X = c.link_offset[link]  # the link in its body's frame
        R = X[:3, :3]
        masses, coms, inertias = c.mass.copy(), c.com.copy(), c.inertia.copy()
        masses[b], coms[b], inertias[b] = lump_inertias([c.mass[b], m], [c.com[b], X[:3, :3] @ com + X[:3, 3]],
                                                        [c.inertia[b], R @ inertia @ R.T])
        return RobotModel(dataclasses.replace(c, mass=masses, com=coms, inertia=inertias))

    # ---------------------------------------------------------------------------------------
    # input checks (cheap: shapes here, finiteness inside the kernels)

    def _js(self, x: Any, name: str) -> np.ndarray:
        """A joint-space array as float64, C-contiguous, shape (nq,) or (B, nq) (finiteness is
        checked inside the kernels)."""
        if type(x) is not np.ndarray or x.dtype is not _F64:
            x = _as_float(x, name)
        shape = x.shape
        if shape != self._shape1 and (len(shape) != 2 or shape[1] != self.nq):
            raise InputError(f"{name} must have shape ({self.nq},) or (B, {self.nq}); got {shape}")
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        return x

    def _states(self, **arrays: Any) -> tuple[list[np.ndarray], bool]:
        """Coerce joint-space arrays to float64 (B, nq); all must share one shape."""
        out = []
        first = None
        for name, x in arrays.items():
            a = self._js(x, name)
            if first is None:
                first = (name, a.shape)
            elif a.shape != first[1]:
                raise InputError(f"{name} has shape {a.shape} but {first[0]} has shape {first[1]}")
            out.append(a)
        batch = out[0].ndim == 2
        return ([a for a in out] if batch else [a.reshape(1, self.nq) for a in out]), batch

    def _same(self, arrays: tuple[np.ndarray, ...], names: tuple[str, ...]) -> bool:
        """True for one state (all (nq,)), False for a batch (all (B, nq)); else InputError."""
        shape = arrays[0].shape
        for k in range(1, len(arrays)):
            if arrays[k].shape != shape:
                raise InputError(f"{names[k]} has shape {arrays[k].shape} but {names[0]} has shape {shape}")
        return len(shape) == 1

    def _gravity(self, gravity: Any) -> np.ndarray:
        if gravity is DEFAULT_GRAVITY:
            return self._default_g
        g = np.ascontiguousarray(_as_float(gravity, "gravity"))
        if g.shape != (3,):
            raise InputError(f"gravity must be a 3-vector (m/s^2, root frame); got shape {g.shape}")
        return g

    def _link(self, link: str) -> int:
        try:
            return self._link_index[link]
        except (KeyError, TypeError):
            raise InputError(f"unknown link {link!r}; known links: {self.link_names}") from None

    def _ext(self, f_ext: Any, lead: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """f_ext -> (body (k,), link origin in the body frame (k, 3), wrenches (*lead, k, 6)).

        ``lead`` is () for a single state, (B,) for a batch."""
        if f_ext is None:
            arr = self._ext_cache.get(lead)
            if arr is None:
                arr = self._ext_cache[lead] = np.zeros((*lead, 0, 6))
            return self._no_body, self._no_off, arr
        if isinstance(f_ext, Mapping):
            key = tuple(f_ext)
            hit = self._ext_sel.get(key)
            if hit is None:  # the links' bodies and offsets, cached per set of link names
                idx = np.array([self._link(name) for name in key], dtype=np.int64)
                hit = (self._link_body[idx], np.ascontiguousarray(self._link_off[idx]))
                if len(self._ext_sel) < 256:
                    self._ext_sel[key] = hit
            W = np.empty((*lead, len(key), 6))
            for k, (name, wrench) in enumerate(f_ext.items()):
                w = wrench if type(wrench) is np.ndarray else _as_float(wrench, f"f_ext[{name!r}]")
                if w.shape != (6,) and w.shape != (*lead, 6):
                    raise InputError(f"f_ext[{name!r}] must have shape {(*lead, 6)} or (6,); got {w.shape}")
                try:
                    W[..., k, :] = w
                except (TypeError, ValueError) as exc:
                    raise InputError(f"f_ext[{name!r}] must be numeric: {exc}") from exc
            return hit[0], hit[1], W
        else:
            w = _as_float(f_ext, "f_ext")
            L = len(self.link_names)
            if w.shape == (L, 6) or w.shape == (*lead, L, 6):
                W = np.broadcast_to(w, (*lead, L, 6))
            else:
                raise InputError(
                    f"f_ext must be a dict {{link: (6,) wrench}} or an array ({L}, 6) / (B, {L}, 6) "
                    f"indexed like link_names; got shape {w.shape}"
                )
            sel = np.arange(L)
        return self._link_body[sel], self._link_off[sel], np.ascontiguousarray(W)

    def _check(self, code: int, names: tuple[str, ...]) -> None:
        if code >= 0:
            raise InputError(f"{names[code]} holds NaN or inf")

    # ---------------------------------------------------------------------------------------
    # kinematics

    def _frames(self, q: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        (Q,), batch = self._states(q=q)
        B = Q.shape[0]
        Rw = np.empty((B, self.nq, 3, 3))
        pw = np.empty((B, self.nq, 3))
        self._check(kn.fk_kernel(Q, self._jt, self._jd, self._ws, Rw, pw), ("q",))
        return Rw, pw, batch

    def fk(self, q: Any, link: str | None = None) -> np.ndarray:
        """Pose of ``link`` (default the tip link) in the root frame.

        Args:
            q: (nq,) or (B, nq) joint positions.
            link: any name of ``link_names``.

        Returns:
            (4, 4) homogeneous transform, or (B, 4, 4) for a batch.
        """
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
        if q.ndim == 1:
            T = np.empty((4, 4))
            code = kn.link_pose_single(q, self._link_body[k], self._link_X[k], self._jt, self._jd, self._ws, T)
        else:
            T = np.empty((q.shape[0], 4, 4))
            code = kn.link_pose_kernel(q, self._link_body[k], self._link_X[k], self._jt, self._jd, self._ws, T)
        if code >= 0:
            self._check(code, ("q",))
        return T

    def link_poses(self, q: Any) -> dict[str, np.ndarray]:
        """Root-frame poses of every link in ``link_names``: (4, 4) each at one configuration
        (nq,), or (B, 4, 4) each for a batch (B, nq)."""
        Rw, pw, batch = self._frames(q)
        B = Rw.shape[0]
        out = {}
        for k, name in enumerate(self.link_names):
            b, X = self._link_body[k], self._link_X[k]
            T = np.zeros((B, 4, 4))
            if b < 0:
                T[:] = X
            else:
                T[:, :3, :3] = Rw[:, b] @ X[:3, :3]
                T[:, :3, 3] = Rw[:, b] @ X[:3, 3] + pw[:, b]
                T[:, 3, 3] = 1.0
            out[name] = T if batch else T[0]
        return out

    def jacobian(self, q: Any, link: str | None = None, point: Any = None) -> np.ndarray:
        """Geometric Jacobian (6, nq), rows [linear; angular], root frame.

        Args:
            q: (nq,) joint positions.
            link: the link the point moves with (default the tip link).
            point: (3,) root-frame point the linear rows refer to; default the link's origin.
        """
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
            if q.ndim != 1:
                raise InputError(f"jacobian takes one configuration q of shape ({self.nq},); got {q.shape}")
        if point is None:
            pt, use = self._zero3, False
        else:
            pt, use = np.ascontiguousarray(_as_float(point, "point")), True
            if pt.shape != (3,):
                raise InputError(f"point must be a 3-vector in the root frame (m); got shape {pt.shape}")
        J = np.empty((6, self.nq))
        code = kn.jacobian_kernel(q, self._link_body[k], self._link_X[k], pt, use, self._jt, self._jd, self._ws, J)
        if code >= 0:
            if not np.isfinite(pt).all():
                raise InputError(f"point holds NaN or inf: {point!r}")
            self._check(code, ("q",))
        return J

    # ---------------------------------------------------------------------------------------
    # dynamics

    def rnea(
        self, q: Any, qd: Any, qdd: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY
    ) -> np.ndarray:
        """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q) - sum J_link^T w_link.

        Args:
            q, qd, qdd: (nq,) or (B, nq) joint positions, velocities, accelerations.
            f_ext: external wrenches ON links (module docstring: dict or array form), or None.
            gravity: (3,) root-frame gravity acceleration, m/s^2.

        Returns:
            (nq,) or (B, nq) joint torques (N m) / forces (N).
        """
        if not (_plain(q, self._shape1) and _plain(qd, self._shape1) and _plain(qdd, self._shape1)):
            q, qd, qdd = self._js(q, "q"), self._js(qd, "qd"), self._js(qdd, "qdd")
            self._same((q, qd, qdd), _NAMES_RNEA)
        g = self._default_g if gravity is DEFAULT_GRAVITY else self._gravity(gravity)
        if q.ndim == 1:
            out = np.empty(self.nq)
            eb, eo, W = self._ext(f_ext, ())
            code = kn.rnea_single(q, qd, qdd, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        else:
            out = np.empty(q.shape)
            eb, eo, W = self._ext(f_ext, q.shape[:1])
            code = kn.rnea_kernel(q, qd, qdd, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        if code >= 0:
            self._check(code, _NAMES_RNEA)
        return out

    def gravity_torques(self, q: Any, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """Joint torques holding the arm still against gravity: rnea(q, 0, 0). (nq,) or (B, nq)."""
        z = np.zeros(np.shape(q))
        return self.rnea(q, z, z, gravity=gravity)

    def bias_forces(self, q: Any, qd: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY) -> np.ndarray:
        """C(q, qd) qd + g(q) (minus J^T f_ext if given) = rnea(q, qd, 0). (nq,) or (B, nq)."""
        return self.rnea(q, qd, np.zeros(np.shape(qd)), f_ext=f_ext, gravity=gravity)

    def mass_matrix(self, q: Any) -> np.ndarray:
        """Joint-space inertia matrix M(q) by CRBA: (nq, nq), or (B, nq, nq) for a batch. SPD."""
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
        if q.ndim == 1:
            out = np.empty((self.nq, self.nq))
            code = kn.crba_single(q, self._jt, self._jd, self._bd, self._ws, out)
        else:
            out = np.empty((q.shape[0], self.nq, self.nq))
            code = kn.crba_kernel(q, self._jt, self._jd, self._bd, self._ws, out)
        if code >= 0:
            self._check(code, ("q",))
        return out

    def forward_dynamics(
        self, q: Any, qd: Any, tau: Any, f_ext: Any = None, gravity: Any = DEFAULT_GRAVITY
    ) -> np.ndarray:
        """Joint accelerations qdd = M^-1 (tau - C qd - g + sum J^T w): (nq,) or (B, nq).

        Same arguments as :meth:`rnea` with ``tau`` (joint torques/forces) in place of ``qdd``.
        Raises ModelError if M(q) is not positive definite (a URDF with massless bodies).
        """
        if not (_plain(q, self._shape1) and _plain(qd, self._shape1) and _plain(tau, self._shape1)):
            q, qd, tau = self._js(q, "q"), self._js(qd, "qd"), self._js(tau, "tau")
            self._same((q, qd, tau), _NAMES_FD)
        g = self._default_g if gravity is DEFAULT_GRAVITY else self._gravity(gravity)
        if q.ndim == 1:
            out = np.empty(self.nq)
            eb, eo, W = self._ext(f_ext, ())
            code = kn.fd_single(q, qd, tau, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        else:
            out = np.empty(q.shape)
            eb, eo, W = self._ext(f_ext, q.shape[:1])
            code = kn.fd_kernel(q, qd, tau, g, self._jt, self._jd, self._bd, eb, eo, W, self._ws, out)
        if code >= 10:
            bad = q if q.ndim == 1 else q[code - 10]
            raise ModelError(f"{self.source}: mass matrix not positive definite at q={bad.tolist()}")
        if code >= 0:
            self._check(code, _NAMES_FD)
        return out

    def kernel_arrays(self, link: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
        """The packed model for compiled callers of :mod:`.kernels` (layout in its header): (jt, jd, bd,
        the workspace ws, the body ``link`` is fixed to (-1: the root), its pose X (4, 4) in that body)."""
        k = self._link(link)
        return self._jt, self._jd, self._bd, self._ws, int(self._link_body[k]), self._link_X[k]

    def effective_mass(self, q: Any, link: str | None, point: Any, direction: Any) -> float:
        """Mass the environment feels when pushing ``point`` (moving with ``link``) along ``direction``.

        m = 1 / (n^T J M^-1 J^T n) with J the translational Jacobian (3, nq) of the root-frame
        ``point`` and n the unit root-frame ``direction``. Returns inf when no joint can move the
        point along n (the arm's structure takes the whole impulse).
        """
        n = _as_float(direction, "direction")
        norm = float(np.sqrt(n @ n)) if n.shape == (3,) else 0.0
        if not (1e-12 < norm < np.inf):
            raise InputError(f"direction must be a finite non-zero 3-vector; got {direction!r}")
        k = self._link(self.tip_link if link is None else link)
        if not _plain(q, self._shape1):
            q = self._js(q, "q")
            if q.ndim != 1:
                raise InputError(f"effective_mass takes one configuration q of shape ({self.nq},); got {q.shape}")
        pt = np.ascontiguousarray(_as_float(point, "point"))
        if pt.shape != (3,):
            raise InputError(f"point must be a 3-vector in the root frame (m); got shape {pt.shape}")
        m = kn.effective_mass_kernel(q, self._link_body[k], self._link_X[k], pt, n / norm, self._jt, self._jd,
                                   self._bd, self._ws)  # fmt: skip
        if m == -1.0:
            if not np.isfinite(pt).all():
                raise InputError(f"point holds NaN or inf: {point!r}")
            raise InputError("q holds NaN or inf")
        if m == -2.0:
            raise ModelError(f"{self.source}: mass matrix not positive definite at q={q.tolist()}")
        return float(m)

    # ---------------------------------------------------------------------------------------
    # energies (for checks and monitors)

    def kinetic_energy(self, q: Any, qd: Any) -> float | np.ndarray:
        """1/2 qd^T M(q) qd (J); scalar or (B,)."""
        (_, QD), batch = self._states(q=q, qd=qd)
        M = self.mass_matrix(np.asarray(q, dtype=float).reshape(-1, self.nq))
        e = 0.5 * np.einsum("bi,bij,bj->b", QD, M, QD)
        return e if batch else float(e[0])

    def potential_energy(self, q: Any, gravity: Any = DEFAULT_GRAVITY) -> float | np.ndarray:
        """Gravitational potential -sum_i m_i g . c_i (J), zero at the root origin; scalar or (B,)."""
        g = self._gravity(gravity)
        Rw, pw, batch = self._frames(q)
        c = np.einsum("bnij,nj->bni", Rw, self._com) + pw
        e = -np.einsum("n,bni,i->b", self._mass, c, g)
        return e if batch else float(e[0])

    def com(self, q: Any) -> np.ndarray:
        """Centre of mass (3,) of the moving bodies in the root frame (m)."""
        Rw, pw, batch = self._frames(q)
        if batch:
            raise InputError(f"com takes one configuration q of shape ({self.nq},)")
        c = np.einsum("nij,nj->ni", Rw[0], self._com) + pw[0]
        return (self._mass @ c) / self._mass.sum()

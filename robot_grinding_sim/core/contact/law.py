"""What a normal contact law is, once: its parameters, its compiled kernel and its Python model.

A law (:class:`ContactLaw`, one object per law, in the :mod:`~robot_grinding_sim.core.contact.registry`)
declares:

- its name (``contact.model``) and id (its place in the registry: the law id on ``contact/model``);
- the ``contact.*`` parameters it reads (:attr:`ContactLaw.params`; their units and ranges are the
  schema's, :class:`~robot_grinding_sim.core.config.ContactConfig`);
- its **family**: :data:`LINEAR` (``F = K d + D d'``: the closed form of
  :mod:`~robot_grinding_sim.core.contact.kelvin_voigt` advances it exactly over any step) or
  :data:`INTEGRATED` (any other force: DOP853 with event location,
  :mod:`~robot_grinding_sim.core.contact.hc_kernels`);
- its **compiled kernel** ``kernel(op, lp, a, b, c, d, e) -> float`` (numba, signature
  :data:`LAW_SIG`), the one place its force is written: ``op`` :data:`FORCE` (the force before the
  clamp at penetration d = b > 0, rate dd = c, impact state alpha = a), :data:`IMPACT` (the state
  fixed at an impact of speed a, e.g. Hunt-Crossley's alpha), :data:`ENGAGE` (first time in
  [0, e] at which the force re-engages along the ballistic arc d = b + c t + d t^2/2 inside the
  surface; inf if never), :data:`RELEASE` (the event function whose downward zero ends a contact
  inside the surface), :data:`FORCE_RATE` (dF/dt at acceleration d), :data:`FAMILY`;
- its Python model (:meth:`ContactLaw.model`: the object with the restitution, closed forms and
  potential, e.g. :class:`~robot_grinding_sim.core.contact.kelvin_voigt.KelvinVoigt`).

The kernels take the law's parameters as ``lp`` (:data:`LP`, the same for every law) and reach
its kernel as a first-class function: ``laws[int(lp[LP.law])]`` of the registry's typed list
(:func:`~robot_grinding_sim.core.contact.registry.kernels`). A call through it costs a few
nanoseconds inside a kernel (no inlining), and ~2 us where the list crosses from Python.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import float64, int64, njit, types
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.typed import List

from robot_grinding_sim.core.layout import Layout

# the kernels reach each law through numba's first-class functions (an experimental feature that
# warns at every compilation)
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)

#: the law's parameters in the compiled kernels (the engine's, the coupled step's)
LP = Layout("law_parameters", (
    ("law", 1, "", "law id (registry order)"),
    ("stiffness", 1, "N/m^exponent", "K"),
    ("damping", 1, "N s/m", "linear damping D for the effective mass (LINEAR family)"),
    ("exponent", 1, "", "exponent n of d"),
    ("u", 1, "", "impact coefficient u = alpha v_impact (Hunt-Crossley family; 0 otherwise)"),
    ("v_floor", 1, "m/s", "smallest impact speed for alpha"),
    ("clamped", 1, "", "1: F >= 0 (the contact ends where F = 0); 0: the force may pull"),
    ("family", 1, "", "LINEAR or INTEGRATED"),
))

#: the signature of every law kernel: (op, lp, a, b, c, d, e) -> float
LAW_SIG = float64(int64, float64[::1], float64, float64, float64, float64, float64)
LAW_TYPE = types.FunctionType(LAW_SIG)
LAW_LIST = types.ListType(LAW_TYPE)
#: kernel operations (module docstring)
FORCE, IMPACT, ENGAGE, RELEASE, FORCE_RATE, FAMILY = range(6)
#: families
LINEAR, INTEGRATED = 0, 1


# the registry's list of kernels, built by cached kernels (typed-list code compiled in a plain
# List.empty_list/append from Python costs ~2 s in every process)
@njit(LAW_LIST(LAW_TYPE), cache=True)
def new_law_list(kernel):
    """A typed list of law kernels holding ``kernel``."""
    lst = List.empty_list(LAW_TYPE)
    lst.append(kernel)
    return lst


@njit(types.void(LAW_LIST, LAW_TYPE), cache=True)
def append_law(lst, kernel):
    """``kernel`` appended to the list."""
    lst.append(kernel)


class ContactModel:
    """What every law's Python model has (mixed into the models of each law module).

    Subclasses set ``law`` (their :class:`ContactLaw`) and ``stiffness`` and implement
    :meth:`kernel_parameters` and :meth:`static_penetration`; the force comes from the law's kernel.
    """

    law: ContactLaw
    stiffness: float
    clamped: bool = True

    @property
    def u(self) -> float:
        """Impact coefficient u = alpha v_impact (0 unless the law fixes a state at impact)."""
        return 0.0

    def kernel_parameters(self, mass: float) -> np.ndarray:
        """The law's parameters for the kernels (:data:`LP`, (LP.size,)) at effective mass ``mass`` (kg)."""
        raise NotImplementedError

    def contact_damping(self) -> tuple[float, float]:
        """(fixed damping D (N s/m) or -1, damping ratio zeta): the compiled contact side's damping
        for an effective mass m is D if D >= 0, else 2 zeta sqrt(K m)."""
        return -1.0, 0.0

    def impact_state(self, v_impact: float, mass: float = 1.0) -> float:
        """The state the law fixes at an impact of speed ``v_impact`` (m/s; alpha, s/m, or 0)."""
        return float(self.law.kernel(IMPACT, self.kernel_parameters(mass), float(v_impact), 0.0, 0.0, 0.0, 0.0))

    def kernel_force(self, d: np.ndarray | float, dd: np.ndarray | float, state: float = 0.0, mass: float = 1.0
                     ) -> np.ndarray:
        """Contact force (N) at penetration d (m) and rate dd (m/s), arrays broadcast; 0 where d <= 0,
        clamped at 0 for clamped laws. ``state``: the impact state (:meth:`impact_state`)."""
        lp = self.kernel_parameters(mass)
        d_, dd_ = np.broadcast_arrays(np.asarray(d, dtype=float), np.asarray(dd, dtype=float))
        out = np.zeros(d_.shape)
        k = self.law.kernel
        for i in np.ndindex(d_.shape):
            if d_[i] > 0.0:
                f = k(FORCE, lp, float(state), float(d_[i]), float(dd_[i]), 0.0, 0.0)
                out[i] = max(f, 0.0) if self.clamped else f
        return out

    def static_force(self, d: float) -> float:
        """The force at rest at penetration d (m), N."""
        return float(self.law.kernel(FORCE, self.kernel_parameters(1.0), 0.0, float(d), 0.0, 0.0, 0.0))

    def static_penetration(self, force: float) -> float:
        """Inverse of :meth:`static_force`: the penetration (m) that holds ``force`` (N) at rest."""
        raise NotImplementedError

    def potential(self, d: np.ndarray | float) -> np.ndarray:
        """Elastic energy (J) at penetration d (m), 0 for d <= 0."""
        raise NotImplementedError

    def contact_time(self, mass: float, v0: float) -> float:
        """An estimate of an impact's duration at speed v0 (m/s) for mass (kg), s (for sampling)."""
        raise NotImplementedError


class ContactLaw:
    """One normal contact law (module docstring).

    Args:
        name: ``contact.model``.
        family: :data:`LINEAR` or :data:`INTEGRATED`.
        params: the ``contact.*`` parameters it reads.
        kernel: its compiled kernel (numba, :data:`LAW_SIG`).
        make: (keyword values of ``params``) -> its Python model.
        description: one line.
        static_exponent: n of the force at rest K d^n given the parameters (the planner's penetration).
    """

    def __init__(self, name: str, family: int, params: tuple[str, ...], kernel: Any,
                 make: Callable[..., ContactModel], description: str,
                 static_exponent: Callable[[Any], float]) -> None:
        if family not in (LINEAR, INTEGRATED):
            raise ValueError(f"law {name!r}: family must be LINEAR or INTEGRATED")
        self.name, self.family, self.params, self.kernel = name, family, tuple(params), kernel
        self._make, self.description, self._static_exponent = make, description, static_exponent

    def __repr__(self) -> str:
        return f"ContactLaw({self.name!r})"

    def model(self, **values: Any) -> ContactModel:
        """The Python model from parameter values by name (its :attr:`params` and options such as
        ``clamped``; values the law does not take are ignored)."""
        return self._make(**values)

    def from_config(self, cfg: Any) -> ContactModel:
        """The model of a :class:`~robot_grinding_sim.core.config.ContactConfig` (a negative damping:
        from the restitution)."""
        values = {p: getattr(cfg, p) for p in self.params}
        if "damping" in values and values["damping"] < 0:
            values["damping"] = None
        return self._make(**values)

    def static_exponent(self, cfg: Any) -> float:
        """n of the force at rest, K d^n, for the configuration ``cfg``."""
        return float(self._static_exponent(cfg))

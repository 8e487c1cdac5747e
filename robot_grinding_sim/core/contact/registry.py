"""The registry of normal contact laws: every other place asks it.

A law is one module that defines its :class:`~robot_grinding_sim.core.contact.law.ContactLaw`
(parameters, compiled kernel, Python model), plus one line in :data:`BUILTIN` below; its id (the
law id of ``contact/model``, docs/contact.md) is its place in the registry, so new laws go at the
end. A law defined elsewhere (a test, a plug-in) is added with :func:`register`.

This module imports no law until one is asked for (``contact.model``'s choices come from
:func:`names` without numba).
"""

from __future__ import annotations

import importlib
from typing import Any

from robot_grinding_sim.core.errors import InputError

#: the package's laws in id order: (name, "module:attribute" of its ContactLaw)
BUILTIN: tuple[tuple[str, str], ...] = (
    ("kelvin_voigt", "robot_grinding_sim.core.contact.kelvin_voigt:LAW"),
    ("hunt_crossley", "robot_grinding_sim.core.contact.hunt_crossley:HUNT_CROSSLEY"),
    ("lankarani_nikravesh", "robot_grinding_sim.core.contact.hunt_crossley:LANKARANI_NIKRAVESH"),
    ("flores", "robot_grinding_sim.core.contact.hunt_crossley:FLORES"),
    ("winkler", "robot_grinding_sim.core.contact.winkler:LAW"),
)

_names: list[str] = [n for n, _ in BUILTIN]
_where: dict[str, str] = dict(BUILTIN)
_laws: dict[str, Any] = {}
_kernels: Any = None
_integrators: dict[bool, Any] = {}


def names() -> tuple[str, ...]:
    """The registered laws' names in id order."""
    return tuple(_names)


def law_id(name: str) -> int:
    """The id of law ``name`` (its place in the registry); InputError naming the laws if unknown."""
    try:
        return _names.index(name)
    except ValueError:
        raise InputError(f"unknown contact law {name!r}; one of {', '.join(_names)}") from None


def get(law: str | int) -> Any:
    """The :class:`~robot_grinding_sim.core.contact.law.ContactLaw` named ``law`` (or of id ``law``)."""
    if not isinstance(law, str):
        k = int(law)
        if not 0 <= k < len(_names):
            raise InputError(f"unknown contact law id {law} (0..{len(_names) - 1}: {', '.join(_names)})")
        law = _names[k]
    found = _laws.get(law)
    if found is None:
        module, attr = _where[_names[law_id(law)]].split(":")
        found = _laws[law] = getattr(importlib.import_module(module), attr)
    return found


def register(law: Any) -> int:
    """Add a law defined elsewhere (a ContactLaw); returns its id. A name already registered is refused."""
    if law.name in _names:
        raise InputError(f"contact law {law.name!r} is already registered")
    global _kernels
    _names.append(law.name)
    _laws[law.name] = law
    if _kernels is not None:
        from robot_grinding_sim.core.contact.law import append_law

        append_law(_kernels, law.kernel)
    return len(_names) - 1


def unregister(name: str) -> None:
    """Remove the last registered law ``name`` (tests that register one clean up with it)."""
    global _kernels
    if not _names or _names[-1] != name or name in _where:
        raise InputError(f"only the last law added with register() can be removed, not {name!r}")
    _names.pop()
    _laws.pop(name, None)
    _kernels = None


def kernels() -> Any:
    """The laws' compiled kernels in id order (numba typed List of first-class functions): what the
    compiled engine and coupled step index with the law id."""
    global _kernels
    if _kernels is None:
        from robot_grinding_sim.core.contact.law import append_law, new_law_list

        lst = new_law_list(get(_names[0]).kernel)
        for n in _names[1:]:
            append_law(lst, get(n).kernel)
        _kernels = lst
    return _kernels


def integrator(law: str | int) -> Any:
    """The contact phase the kernels integrate law ``law`` with (name or id), as they take it: a numba
    typed List of one first-class function (``phases[0]``). The INTEGRATED family's: the compiled
    DOP853 (:func:`~robot_grinding_sim.core.contact.hc_kernels.hc_phase`, compiled here on first
    use); the LINEAR family's: a stub never called (closed form), so a Kelvin-Voigt job never
    compiles the integrator."""
    from robot_grinding_sim.core.contact.law import INTEGRATED

    need = get(law).family == INTEGRATED
    found = _integrators.get(need)
    if found is None:
        from robot_grinding_sim.core.contact import hc_kernels as hk

        if need:
            hk.hc_phase.compile(hk.PHASE_SIG)  # its first-class version (loaded from the cache after the first run)
        found = _integrators[need] = hk.new_phase_list(hk.hc_phase if need else hk.no_phase)
    return found


def model_from_config(cfg: Any) -> Any:
    """The Python model of a ContactConfig's law (:meth:`ContactLaw.from_config`)."""
    return get(cfg.model).from_config(cfg)

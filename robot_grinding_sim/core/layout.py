"""Flat float64 arrays with named fields, and the kernels' status codes: each declared once.

The compiled kernels (numba) take their parameters, state and results as flat float64 arrays. A
:class:`Layout` declares one such array once, and everything else is generated from it:

- ``LAYOUT.index``: the index of each field as a namedtuple of ints (``R = ROM.index`` then
  ``rom[R.gap]`` in a kernel: numba reads a global namedtuple as constants, so the access costs
  what a literal index does);
- ``LAYOUT.names``: the element names in order (a vector field ``normal`` of size 3 gives
  ``normal_x``, ``normal_y``, ``normal_z``), the layout of a message that carries the array;
- :meth:`Layout.view`: a Python class whose attributes read (and write) the array itself, so an
  array handed over by a kernel or a message needs no conversion.

:data:`STATUS` is the one table of the codes the kernels return (0 ok) and the message the Python
side raises for each.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

_AXES = ("x", "y", "z")


class Field:
    """One field of a :class:`Layout`: ``name``, ``size`` (1: a scalar; k: a vector of k elements),
    ``unit`` and ``description`` (for the docs and error messages)."""

    __slots__ = ("name", "size", "unit", "description")

    def __init__(self, name: str, size: int = 1, unit: str = "", description: str = "") -> None:
        if not name.isidentifier() or size < 1 or name in ("array", "layout"):
            raise ValueError(f"layout field {name!r} of size {size} (names array and layout are the view's)")
        self.name, self.size, self.unit, self.description = name, int(size), unit, description


class Layout:
    """A flat float64 array of named fields, declared once (module docstring).

    Args:
        name: what the array is (for error messages).
        fields: :class:`Field` objects, or (name, size, unit, description) tuples, in array order.
    """

    def __init__(self, name: str, fields: Sequence[Field | tuple]) -> None:
        self.name = name
        self.fields = tuple(f if isinstance(f, Field) else Field(*f) for f in fields)
        offsets, names, k = [], [], 0
        for f in self.fields:
            offsets.append(k)
            if f.size == 1:
                names.append(f.name)
            else:
                suffixes = _AXES if f.size == 3 else [str(i) for i in range(f.size)]
                names.extend(f"{f.name}_{s}" for s in suffixes)
            k += f.size
        #: the index of each field's first element (namedtuple of ints: numba constants)
        self.index = namedtuple(f"{name.title().replace('_', '')}Index",  # type: ignore[misc]
                                [f.name for f in self.fields])(*offsets)
        #: the element names in array order (the message layout)
        self.names = tuple(names)
        #: number of float64 elements
        self.size = k

    def __len__(self) -> int:
        return self.size

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def slice(self, name: str) -> slice:
        """The elements of field ``name``."""
        i = getattr(self.index, name)
        return slice(i, i + self.field(name).size)

    def zeros(self) -> np.ndarray:
        """A (size,) float64 array of zeros."""
        return np.zeros(self.size)

    def table(self) -> list[tuple[str, str, str]]:
        """(index range, field, unit and description) rows for the docs."""
        rows = []
        for f in self.fields:
            i = getattr(self.index, f.name)
            where = str(i) if f.size == 1 else f"{i}-{i + f.size - 1}"
            rows.append((where, f.name, ", ".join(s for s in (f.description, f.unit) if s)))
        return rows

    def view(self, cls_name: str, doc: str = "", base: type = object) -> type:
        """A class whose instances wrap one (size,) array ``array`` (the storage itself, no copy):
        scalar fields read as float and write into the array, vector fields read as views."""
        ns: dict[str, Any] = {"__slots__": ("array",), "__doc__": doc, "layout": self}

        def init(self_: Any, array: np.ndarray) -> None:
            self_.array = array

        ns["__init__"] = init
        for f in self.fields:
            i = getattr(self.index, f.name)
            if f.size == 1:
                ns[f.name] = property(lambda s, i=i: float(s.array[i]),
                                      lambda s, v, i=i: s.array.__setitem__(i, v), doc=f.description)
            else:
                sl = slice(i, i + f.size)
                ns[f.name] = property(lambda s, sl=sl: s.array[sl], lambda s, v, sl=sl: s.array.__setitem__(sl, v),
                                      doc=f.description)
        return type(cls_name, (base,), ns)


class StatusTable:
    """Codes (ints, 0 ok) with their messages: ``STATUS.code.<name>`` for the kernels (a namedtuple:
    numba constants), :meth:`message` for the Python side that raises."""

    def __init__(self, entries: Sequence[tuple[str, str]]) -> None:
        self.entries = tuple(entries)
        self.code = namedtuple("Status", [n for n, _ in self.entries])(*range(len(self.entries)))

    def message(self, code: int) -> str:
        """The message of ``code`` (an unknown code is named as such)."""
        code = int(code)
        if 0 <= code < len(self.entries):
            return self.entries[code][1]
        return f"unknown kernel status {code}"

    def name(self, code: int) -> str:
        return self.entries[int(code)][0] if 0 <= int(code) < len(self.entries) else str(code)


#: Every status code a compiled kernel returns (arm step, contact side, engine, batch of steps).
STATUS = StatusTable((
    ("ok", "ok"),
    ("state_not_finite", "NaN or inf in the arm's state or wrench"),
    ("mass_not_pd", "mass matrix not positive definite"),
    ("normal_mass_singular", "effective mass along the contact normal is singular (the arm cannot move the "
                             "tool along the normal)"),
    ("engine_stalled", "the contact engine stalled (no progress in 50 phases)"),
    ("integration_failed", "contact integration failed: the step size fell below the spacing of "
                           "floating-point times"),
))

"""A small ROS 2 message decoder for tests: CDR bytes decoded with the ``ros2msg`` schema text an
MCAP file carries, as Foxglove decodes a bag. It shares no code with the writers (``rosbags``):
a bag whose schema text or serialization is wrong fails here.

Supported: every primitive (bool, byte, char, int8 ... uint64, float32, float64, string, wstring
as bytes), ``time``/``duration`` and builtin_interfaces (sec int32, nanosec uint32), fixed arrays
``T[N]``, sequences ``T[]`` / ``T[<=N]``, bounded strings, nested types (``MSG: pkg/Type``
sections), constants (skipped). Little- and big-endian plain CDR (XCDR1).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

PRIMITIVES: dict[str, tuple[str, int]] = {
    "bool": ("?", 1), "byte": ("B", 1), "char": ("B", 1), "uint8": ("B", 1), "int8": ("b", 1),
    "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4), "uint32": ("I", 4),
    "int64": ("q", 8), "uint64": ("Q", 8), "float32": ("f", 4), "float64": ("d", 8),
}
TIME_FIELDS = [("sec", "int32", None), ("nanosec", "uint32", None)]
FIELD = re.compile(r"^([A-Za-z0-9_/]+(?:<=\d+)?)(\[(<=)?(\d*)\])?\s+([A-Za-z0-9_]+)$")


def parse_schema(name: str, text: str) -> dict[str, list[tuple[str, str, Any]]]:
    """Type name -> [(field, base type, array spec)] for the schema's main type (``name``, e.g.
    ``tf2_msgs/msg/TFMessage``) and every ``MSG:`` section. Array spec: None, ``("fixed", N)`` or
    ``("seq", bound or None)``."""
    types: dict[str, list[tuple[str, str, Any]]] = {}
    sections = re.split(r"^=+\s*$", text, flags=re.M)
    for k, sec in enumerate(sections):
        lines = [ln.split("#", 1)[0].strip() for ln in sec.strip().splitlines()]
        lines = [ln for ln in lines if ln]
        if k == 0:
            tname = name
        else:
            assert lines and lines[0].startswith("MSG: "), sec[:80]
            tname = lines.pop(0)[5:].strip()
        pkg = tname.split("/")[0]
        fields = []
        for ln in lines:
            if "=" in ln.split()[-1] or re.match(r"^\S+\s+[A-Z0-9_]+\s*=", ln):
                continue  # a constant
            m = FIELD.match(ln)
            assert m, f"{tname}: cannot parse field line {ln!r}"
            base, arr, bounded, size, fname = m.groups()
            base = base.split("<=")[0]
            if base not in PRIMITIVES and base not in ("string", "wstring", "time", "duration") and "/" not in base:
                base = "std_msgs/Header" if base == "Header" else f"{pkg}/{base}"
            spec = None if arr is None else (("seq", int(size) if size else None) if bounded or not size
                                             else ("fixed", int(size)))
            fields.append((fname, base, spec))
        types[norm(tname)] = fields
    return types


def norm(t: str) -> str:
    """``pkg/msg/Type`` and ``pkg/Type`` -> ``pkg/Type``."""
    parts = t.split("/")
    return f"{parts[0]}/{parts[-1]}"


class CdrReader:
    """Decodes one message: :meth:`decode` returns nested dicts (arrays of numbers as lists)."""

    def __init__(self, types: dict[str, list[tuple[str, str, Any]]], data: bytes) -> None:
        assert len(data) >= 4 and data[0] == 0 and data[1] in (0, 1), "not a plain CDR encapsulation"
        self.types = types
        self.end = "<" if data[1] == 1 else ">"
        self.buf = data[4:]
        self.pos = 0

    def align(self, n: int) -> None:
        self.pos += (-self.pos) % n

    def prim(self, t: str) -> Any:
        code, size = PRIMITIVES[t]
        self.align(size)
        (v,) = struct.unpack_from(self.end + code, self.buf, self.pos)
        self.pos += size
        return v

    def string(self) -> str:
        n = self.prim("uint32")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        assert n >= 1 and raw[-1:] == b"\x00", "string without its terminating NUL"
        return raw[:-1].decode()

    def value(self, base: str) -> Any:
        if base in PRIMITIVES:
            return self.prim(base)
        if base == "string":
            return self.string()
        if base == "wstring":
            n = self.prim("uint32")
            self.pos += 4 * n
            return None
        if base in ("time", "duration", "builtin_interfaces/Time", "builtin_interfaces/Duration"):
            return {f: self.prim(t) for f, t, _ in TIME_FIELDS}
        return self.struct(base)

    def struct(self, tname: str) -> dict[str, Any]:
        out = {}
        for fname, base, spec in self.types[norm(tname)]:
            if spec is None:
                out[fname] = self.value(base)
            else:
                n = spec[1] if spec[0] == "fixed" else self.prim("uint32")
                out[fname] = [self.value(base) for _ in range(n)]
        return out

    def decode(self, tname: str) -> dict[str, Any]:
        msg = self.struct(tname)
        assert len(self.buf) - self.pos < 4, f"{tname}: {len(self.buf) - self.pos} bytes left after decoding"
        return msg


def decode(schema_name: str, schema_text: str, data: bytes) -> dict[str, Any]:
    """Decode one CDR message with its MCAP schema (name and ``ros2msg`` text)."""
    return CdrReader(parse_schema(schema_name, schema_text), data).decode(schema_name)


def read_mcap(bag: Path, topics: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every message of ``topics`` in the bag directory's MCAP file, decoded here, by topic."""
    from mcap.reader import make_reader

    out: dict[str, list[dict[str, Any]]] = {t: [] for t in topics}
    (f,) = Path(bag).glob("*.mcap")
    with f.open("rb") as fh:
        for schema, channel, message in make_reader(fh).iter_messages(topics=topics):
            out[channel.topic].append(decode(schema.name, schema.data.decode(), message.data))
    return out


def header_stamp(m: dict[str, Any]) -> float:
    """A decoded message's header stamp, s (integer nanoseconds times 1e-9, rounded as the package's
    bag reader rounds them, so a sample stamped at a window's edge falls on the same side in both)."""
    s = m["header"]["stamp"]
    return (int(s["sec"]) * 1_000_000_000 + int(s["nanosec"])) * 1e-9


def pass_window(m: dict[str, list[dict[str, Any]]], pass_index: int = 0,
                plan: dict[str, Any] | None = None) -> tuple[float, float]:
    """Pass ``pass_index``'s window (s, the bag's clock) from ``read_mcap``'s /grinding/progress:
    without ``plan`` the first to last stamp of its records; with the plan.json (parsed) its pass
    segment at full force (the knots at least the plan's ``process.lead_in`` from both ends) shifted
    onto the bag's clock by the median over the records inside the pass's arc range of (stamp - the
    plan's time at the record's arc), which lost records do not move."""
    rec = [p["data"] for p in m["/grinding/progress"] if p["data"][0] == pass_index]
    if plan is None:
        return min(r[2] for r in rec), max(r[2] for r in rec)
    traj = plan["trajectory"]
    (seg,) = [s for s in traj["segments"] if s["kind"] == "pass" and s["pass_index"] == pass_index]
    tau = np.asarray(traj["times"][seg["start"]:seg["stop"]], dtype=float)
    arc = np.asarray(traj["arc_length"][seg["start"]:seg["stop"]], dtype=float)
    first = np.r_[True, np.diff(arc) > 0]  # where the arc moves, so time(arc) has one value
    shift = float(np.median([r[2] - np.interp(r[1], arc[first], tau[first]) for r in rec if arc[0] < r[1] < arc[-1]]))
    # the pass at full force: the knots at least the plan's lead-in from both ends of the pass
    lead = float((plan.get("cell") or {}).get("process.lead_in", 0.0))
    full = np.flatnonzero((arc >= lead) & (arc <= arc.max() - lead)) if lead > 0.0 else np.array([], dtype=int)
    a, b = (int(full[0]), int(full[-1])) if len(full) else (0, len(tau) - 1)
    return tau[a] + shift, tau[b] + shift


def pass_forces(m: dict[str, list[dict[str, Any]]], pass_index: int = 0,
                plan: dict[str, Any] | None = None) -> list[float]:
    """-F_z of /contact/wrench (N, the tool axis in tcp) over pass ``pass_index``'s window
    (:func:`pass_window`), from ``read_mcap``'s result holding both topics."""
    t0, t1 = pass_window(m, pass_index, plan)
    return [-w["wrench"]["force"]["z"] for w in m["/contact/wrench"] if t0 <= header_stamp(w) <= t1]

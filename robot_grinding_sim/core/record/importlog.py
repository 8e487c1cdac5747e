"""Measured logs from other cells into a rosbag2 (MCAP): joint states and a stamped wrench.

A log is a text table, one sample a row (docs/calibration.md, "Measured data from another cell"):

- a CSV with a header (delimiter ``,``, ``;`` or tab), its columns named by the header;
- whitespace-separated text without a header, its columns named on the command line or in a
  small YAML (:func:`load_format`);
- the CSV that UR's RTDE recording writes (``timestamp``, ``actual_q_0..5``, optionally
  ``actual_qd_0..5``, ``actual_TCP_force_0..5``) is recognised by its header and read by name:
  seconds, radians, N and N m, the wrench UR's ``actual_TCP_force`` (the payload compensated, at
  the TCP, in the base frame) unless declared otherwise.

Canonical column names (:data:`CANONICAL`): ``time``, ``sample`` (a counter), ``q0..q{n-1}``
(joint positions), ``qd0..`` (joint velocities, optional), ``fx fy fz tx ty tz`` (the wrench),
``skip`` (ignored; also ``_`` or ``-``). Time: a time column (unit ``time_unit``), else the sample
counter over ``rate`` Hz, else the row index over ``rate``.

Units are converted to SI at import (angles deg -> rad, torque N mm -> N m, force kN -> N, time
ms/us/ns -> s); what was declared (source, columns, units, the wrench's frame, whether it is raw or
compensated, the rate) goes into the bag's ``metadata.yaml`` ``custom_data`` under
:data:`IMPORT_KEY` as JSON, which :func:`declared` reads back (replay and calibrate act on it).

Written topics: ``/joint_states`` (sensor_msgs/JointState: position, and velocity when given) and
the wrench topic (geometry_msgs/WrenchStamped, header.frame_id the declared frame; default
``/ft_sensor/wrench``), both stamped with the sample's time.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robot_grinding_sim.core.errors import InputError

FloatArray = NDArray[np.float64]

#: metadata.yaml custom_data key of the import's declaration (JSON)
IMPORT_KEY = "robot_grinding_sim.import"
WRENCH = ("fx", "fy", "fz", "tx", "ty", "tz")
SKIP = ("skip", "_", "-")
ANGLE_UNITS = {"rad": 1.0, "deg": math.pi / 180.0}
FORCE_UNITS = {"N": 1.0, "kN": 1e3}
TORQUE_UNITS = {"Nm": 1.0, "Nmm": 1e-3}
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: the frame of UR's actual_TCP_force (the robot's base; "base_link" in the package's URDF is UR's
#: "base" turned by pi about z, so the declaration names UR's own frame, which the URDF has)
RTDE_FRAME = "base"


def canonical_names(n: int = 6) -> tuple[str, ...]:
    """Every canonical column name for an ``n``-joint arm."""
    return ("time", "sample", *(f"q{i}" for i in range(n)), *(f"qd{i}" for i in range(n)), *WRENCH)


CANONICAL = canonical_names()


def rtde_name(name: str) -> str | None:
    """The canonical name of an RTDE recording's column (None: not one the import uses)."""
    if name == "timestamp":
        return "time"
    m = re.fullmatch(r"actual_(q|qd|TCP_force)_(\d)", name)
    if not m:
        return None
    kind, i = m.group(1), int(m.group(2))
    if kind == "TCP_force":
        return WRENCH[i] if i < 6 else None
    return f"{kind}{i}"


@dataclass(frozen=True)
class LogFormat:
    """What the log is (see the module docstring); every field may come from a YAML or options.

    Attributes:
        columns: the canonical name of each column in order (None: from the header).
        rate: samples per second when there is no time column (Hz; None: needs a time column).
        time_unit, angle_unit, force_unit, torque_unit: units (keys of the *_UNITS tables).
        frame: the wrench's frame (a link of the robot: ``ft_sensor``, ``tool0``, ``tcp``, ``base``...).
        compensated: True if the wrench has the tool's weight and the sensor's bias removed already
            (the contact wrench), False for the raw reading; None: not declared (refused).
        joint_names: the joints of ``q0..`` in order (None: the robot's; the CLI fills it in).
        delimiter: ``auto``, ``,``, ``;``, ``tab`` or ``whitespace``.
        topic: the wrench topic written.
    """

    columns: tuple[str, ...] | None = None
    rate: float | None = None
    time_unit: str = "s"
    angle_unit: str = "rad"
    force_unit: str = "N"
    torque_unit: str = "Nm"
    frame: str | None = None
    compensated: bool | None = None
    joint_names: tuple[str, ...] | None = None
    delimiter: str = "auto"
    topic: str = "/ft_sensor/wrench"

    def check(self) -> LogFormat:
        """InputError naming the first field that is wrong."""
        for name, table in (("time_unit", TIME_UNITS), ("angle_unit", ANGLE_UNITS), ("force_unit", FORCE_UNITS),
                            ("torque_unit", TORQUE_UNITS)):
            if getattr(self, name) not in table:
                raise InputError(f"{name} {getattr(self, name)!r}: one of {', '.join(table)}")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise InputError(f"rate {self.rate!r}: a sample rate in Hz > 0")
        if self.delimiter not in ("auto", ",", ";", "tab", "whitespace"):
            raise InputError(f"delimiter {self.delimiter!r}: one of auto, ',', ';', tab, whitespace")
        if not self.topic.startswith("/"):
            raise InputError(f"topic {self.topic!r}: a topic name starting with '/'")
        return self


#: keys of the format YAML and their types
_YAML_KEYS = {"columns": list, "rate": (int, float), "time_unit": str, "angle_unit": str, "force_unit": str,
              "torque_unit": str, "frame": str, "compensated": bool, "joint_names": list, "delimiter": str,
              "topic": str}


def load_format(path: str | os.PathLike[str]) -> LogFormat:
    """A :class:`LogFormat` from a small YAML (its keys are the fields' names; ``columns`` a list or
    one whitespace-separated string)."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise InputError(f"--format {path}: not YAML ({_first_line(exc)})") from None
    if not isinstance(doc, dict):
        raise InputError(f"--format {path}: expected a mapping of {', '.join(_YAML_KEYS)}")
    kw: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in _YAML_KEYS:
            raise InputError(f"--format {path}: unknown key {key!r} (known: {', '.join(_YAML_KEYS)})")
        if key == "columns" and isinstance(value, str):
            value = value.split()
        if not isinstance(value, _YAML_KEYS[key]) or isinstance(value, bool) != (_YAML_KEYS[key] is bool):
            raise InputError(f"--format {path}: {key} {value!r} has the wrong type")
        kw[key] = tuple(str(v) for v in value) if isinstance(value, list) else value
    if "rate" in kw:
        kw["rate"] = float(kw["rate"])
    return LogFormat(**kw).check()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# --------------------------------------------------------------------------------------------------
# reading the table


@dataclass
class MeasuredLog:
    """A log read and converted to SI.

    Attributes:
        t: (N,) s, increasing. q: (N, n) rad. qd: (N, n) rad/s or None. wrench: (N, 6) N, N m in ``frame``.
        joint_names: (n,). declaration: what was declared and found (stored in the bag).
    """

    t: FloatArray
    q: FloatArray
    qd: FloatArray | None
    wrench: FloatArray
    joint_names: list[str]
    declaration: dict[str, Any] = field(default_factory=dict)


def _split(line: str, delimiter: str) -> list[str]:
    if delimiter == "whitespace":
        return line.split()
    return [c.strip() for c in line.split("\t" if delimiter == "tab" else delimiter)]


def _guess_delimiter(line: str) -> str:
    for d, name in ((",", ","), (";", ";"), ("\t", "tab")):
        if d in line:
            return name
    return "whitespace"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_log(path: str | os.PathLike[str], fmt: LogFormat, n_joints: int = 6) -> MeasuredLog:
    """Read a log (module docstring) into SI arrays.

    Raises:
        InputError: one line naming the file and what is missing or wrong (a line number for a bad row).
    """
    fmt = fmt.check()
    path = Path(path)
    text = path.read_text(errors="replace")
    lines = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"{path}: no data (empty, or only comments)")
    first_no, first = lines[0]
    delim = _guess_delimiter(first) if fmt.delimiter == "auto" else fmt.delimiter
    head = _split(first, delim)
    has_header = not all(_is_number(c) for c in head if c)
    rtde = False
    if has_header:
        rows = lines[1:]
        names = [c.strip() for c in head]
        mapped = [rtde_name(c) for c in names]
        rtde = any(m is not None for m in mapped) and "timestamp" in names
        if fmt.columns is not None:
            columns = list(fmt.columns)
            if len(columns) != len(names):
                raise InputError(f"{path}: the header has {len(names)} columns, the declared columns {len(columns)}")
        elif rtde:
            columns = [m if m is not None else "skip" for m in mapped]
        else:
            columns = [c if c in canonical_names(n_joints) else "skip" for c in names]
    else:
        rows = lines
        if fmt.columns is None:
            raise InputError(f"{path}: no header line; name the columns (--columns 'sample q0 .. q5 fx fy fz tx ty "
                             f"tz', or columns: in --format YAML; names: {', '.join(CANONICAL)}, skip)")
        columns = list(fmt.columns)
    known = set(canonical_names(n_joints))
    bad = [c for c in columns if c not in known and c not in SKIP]
    if bad:
        raise InputError(f"{path}: unknown column name {bad[0]!r} (names: {', '.join(CANONICAL)}, skip)")
    dup = sorted({c for c in columns if c not in SKIP and columns.count(c) > 1})
    if dup:
        raise InputError(f"{path}: column {dup[0]!r} named twice")
    need = [f"q{i}" for i in range(n_joints)] + list(WRENCH)
    missing = [c for c in need if c not in columns]
    if missing:
        raise InputError(f"{path}: no column {', '.join(missing)} (the log needs {n_joints} joint positions and "
                         "the 6 wrench components)")
    if "time" not in columns and fmt.rate is None:
        raise InputError(f"{path}: no time column and no sample rate (--rate HZ, or rate: in --format YAML)")
    if not rows:
        raise InputError(f"{path}: a header and no data rows")
    data = np.empty((len(rows), len(columns)))
    for k, (no, ln) in enumerate(rows):
        cells = _split(ln, delim)
        if len(cells) != len(columns):
            raise InputError(f"{path}, line {no}: {len(cells)} columns, expected {len(columns)}")
        try:
            data[k] = [float(c) if columns[j] not in SKIP else 0.0 for j, c in enumerate(cells)]
        except ValueError:
            j = next(j for j, c in enumerate(cells) if columns[j] not in SKIP and not _is_number(c))
            raise InputError(f"{path}, line {no}: column {j + 1} ({columns[j]}) is {cells[j]!r}, not a number") \
                from None
        if not np.isfinite(data[k]).all():
            j = int(np.flatnonzero(~np.isfinite(data[k]))[0])
            raise InputError(f"{path}, line {no}: column {j + 1} ({columns[j]}) is {cells[j]!r}")
    col = {c: data[:, j] for j, c in enumerate(columns) if c not in SKIP}
    if rtde:  # what UR's RTDE data are, unless declared otherwise
        defaults = {"frame": RTDE_FRAME, "compensated": True}
        fmt = replace(fmt, frame=fmt.frame or defaults["frame"],
                      compensated=defaults["compensated"] if fmt.compensated is None else fmt.compensated)
    if fmt.frame is None:
        raise InputError(f"{path}: the wrench's frame is not declared (--frame LINK, e.g. ft_sensor, tool0, tcp, "
                         "base; or frame: in --format YAML)")
    if fmt.compensated is None:
        raise InputError(f"{path}: not declared whether the wrench is raw or compensated (--raw: the sensor's "
                         "reading with tool weight and bias; --compensated: the contact wrench)")
    if "time" in col:
        t = col["time"] * TIME_UNITS[fmt.time_unit]
        time_from = "time column"
    elif "sample" in col:
        t = (col["sample"] - col["sample"][0]) / float(fmt.rate)  # type: ignore[arg-type]
        time_from = f"sample counter at {fmt.rate:g} Hz"
    else:
        t = np.arange(len(rows)) / float(fmt.rate)  # type: ignore[arg-type]
        time_from = f"row index at {fmt.rate:g} Hz"
    back = np.flatnonzero(np.diff(t) <= 0)
    if len(back):
        no = rows[int(back[0]) + 1][0]
        raise InputError(f"{path}, line {no}: time does not increase ({time_from}: {t[back[0]]:.9g} -> "
                         f"{t[back[0] + 1]:.9g} s)")
    if t[0] < 0:
        raise InputError(f"{path}: negative times ({t[0]:g} s); a bag's stamps start at 0")
    a = ANGLE_UNITS[fmt.angle_unit]
    q = np.stack([col[f"q{i}"] for i in range(n_joints)], axis=1) * a
    qd = None
    if all(f"qd{i}" in col for i in range(n_joints)):
        qd = np.stack([col[f"qd{i}"] for i in range(n_joints)], axis=1) * a
    w = np.stack([col[c] for c in WRENCH], axis=1)
    w[:, :3] *= FORCE_UNITS[fmt.force_unit]
    w[:, 3:] *= TORQUE_UNITS[fmt.torque_unit]
    if fmt.joint_names is None or len(fmt.joint_names) != n_joints:
        raise InputError(f"{path}: {n_joints} joint names needed for q0..q{n_joints - 1}, got "
                         f"{0 if fmt.joint_names is None else len(fmt.joint_names)}")
    period = float(np.median(np.diff(t))) if len(t) > 1 else math.nan
    decl = {
        "source": str(path), "format": "rtde" if rtde else ("csv" if has_header else "text"),
        "columns": columns, "time": time_from, "rate_hz": (1.0 / period) if period > 0 else None,
        "samples": len(t), "time_unit": fmt.time_unit, "angle_unit": fmt.angle_unit, "force_unit": fmt.force_unit,
        "torque_unit": fmt.torque_unit, "frame": fmt.frame, "compensated": bool(fmt.compensated),
        "joint_names": list(fmt.joint_names), "topic": fmt.topic, "joint_velocities": qd is not None,
    }
    return MeasuredLog(t, q, qd, w, list(fmt.joint_names), decl)


# --------------------------------------------------------------------------------------------------
# the bag


def write_log_bag(log: MeasuredLog, out: str | os.PathLike[str]) -> dict[str, int]:
    """Write the log as a rosbag2 (MCAP) at ``out`` (a new directory), staged: nothing partial is left
    on failure. Returns the message counts per topic."""
    from robot_grinding_sim.core.outfiles import staged_dir
    from robot_grinding_sim.core.record import cdr_batch
    from robot_grinding_sim.core.record.bagwriter import BagWriter

    topic = log.declaration["topic"]
    ns = np.round(log.t * 1e9).astype(np.int64)
    if Path(out).exists():
        raise InputError(f"--out {out} exists already; a bag needs a new directory")
    with staged_dir(out, "--out") as tmp:
        with BagWriter(Path(tmp) / "bag", storage="mcap") as bag:
            bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
            bag.add_topic(topic, "geometry_msgs/msg/WrenchStamped")
            bag.set_custom_data(IMPORT_KEY, json.dumps(log.declaration))
            n = log.q.shape[1]
            # position, velocity when the log has it, no effort (empty sequences: not measured)
            js = cdr_batch.CdrLayout().header("").u32(n)
            for name in log.joint_names:
                js.string(name)
            nv = n if log.qd is not None else 0
            js.f64_sequence(n).f64_sequence(nv).f64_sequence(0)
            js_rows = log.q if log.qd is None else np.hstack([log.q, log.qd])
            wr = cdr_batch.wrench_stamped(log.declaration["frame"])
            bag.write_many(["/joint_states", topic], ns, [js.pack(ns, js_rows), wr.pack(ns, log.wrench)])
            counts = dict(bag.counts)
        _move_up(Path(tmp))
    return counts


def _move_up(tmp: Path) -> None:
    """The staged directory is the bag: move the writer's files up from ``tmp/bag``."""
    inner = tmp / "bag"
    for f in inner.iterdir():
        f.rename(tmp / f.name)
    inner.rmdir()


def declared(bag: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The import's declaration stored in a bag (None: a bag not written by :func:`write_log_bag`)."""
    from robot_grinding_sim.core.record.bagwriter import custom_data

    p = Path(bag)
    data = custom_data(p if p.is_dir() else p.parent)
    if not data or IMPORT_KEY not in data:
        return None
    try:
        doc = json.loads(data[IMPORT_KEY])
    except ValueError:
        raise InputError(f"bag {bag}: metadata.yaml custom_data {IMPORT_KEY} is not JSON") from None
    return doc if isinstance(doc, dict) else None


def format_from_options(base: LogFormat, options: Mapping[str, Any]) -> LogFormat:
    """``base`` with the options that were given (None: keep); ``columns`` may be one string."""
    kw = {k: v for k, v in options.items() if v is not None}
    if isinstance(kw.get("columns"), str):
        kw["columns"] = tuple(kw["columns"].replace(",", " ").split())
    if isinstance(kw.get("joint_names"), str):
        kw["joint_names"] = tuple(kw["joint_names"].replace(",", " ").split())
    return replace(base, **kw).check()


def declaration_fields() -> Sequence[str]:
    """The fields a format declares (for docs and the CLI)."""
    return tuple(asdict(LogFormat()).keys())

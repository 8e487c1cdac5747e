"""The study file: parts and cell parameters, read, checked and expanded into jobs.

A study file is YAML (values read as ``--set`` reads them: ``1e5`` is a number)::

    name: stepover and force          # optional, for the plots' titles
    parts:                            # required: one entry or more
      - curved_panel                  # a built-in part (its default face)
      - part: cad/bracket.step        # a CAD or mesh file, relative to the study file
        faces: [3]                    # the faces ground together; [[3], [5]]: one job each
        unit: mm                      # for files that carry no unit (BREP, meshes)
      - folder: cad/panels            # every CAD/mesh file in it (sorted by name)
    params: cell.yaml                 # optional ROS 2 parameter file(s), as --params
    set:                              # optional cell parameters of every job, as --set
      sim.output_dt: 0.002
    plan:                             # optional plan options of every job (grinding simulate's)
      max_passes: 3                   #   plan only the first N passes
      pass_length: 0.03               #   keep the middle L m of each pass
      optimise: true                  #   force-target optimisation of each pass's offset
    grid:                             # every combination of these values
      process.target_force: [5, 10]
      passes.stepover: [0.005, 0.01]
    cases:                            # and/or listed combinations (each crossed with the grid)
      - {contact.stiffness: 1e5, contact.cr: 0.5}
      - {contact.stiffness: 2e5, max_passes: 1}

Names in ``set``, ``grid`` and ``cases`` are cell parameters (``grinding check-config --list``);
``grid`` and ``cases`` also take the plan options. The part and its faces come from ``parts``
(``workpiece.part``, ``workpiece.faces`` and ``workpiece.unit`` are refused elsewhere). Jobs are
numbered part by part, face selection by face selection, case by case, then through the grid
(its names in the file's order, the last one fastest). Every job's cell is validated when the
file is read, so a bad value is reported before any job runs, naming the file and the job.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.errors import InputError

#: plan options a study may set or sweep (the fields of core.job.setup.JobConfig), with their types
PLAN_OPTIONS: dict[str, type] = {"max_passes": int, "pass_length": float, "optimise": bool}
#: cell parameters that the parts section sets
BY_PART = ("workpiece.part", "workpiece.faces", "workpiece.unit")
TOP_KEYS = ("name", "parts", "params", "set", "plan", "grid", "cases")
PART_KEYS = ("part", "folder", "faces", "unit")


@dataclass(frozen=True)
class PartEntry:
    """One part of a study: ``name`` as the table shows it (a built-in name, or the path as the
    study file writes it), ``source`` the built-in name or the file's absolute path, ``builtin``,
    the face selections (one job each; ``(-1,)``: the largest face looking up) and the unit."""

    name: str
    source: str
    builtin: bool
    face_sets: tuple[tuple[int, ...], ...] = ((-1,),)
    unit: str = ""


@dataclass(frozen=True)
class JobSpec:
    """One job of a study: a part with one face selection, a whole cell and the plan options.

    Attributes:
        index: position in the study (0-based; changes when the study file changes: the results
            are stored by ``key``).
        part: the part entry.
        faces: the faces ground (workpiece.faces).
        cell: every cell parameter (``<group>.<field>`` -> value, as CellConfig.values() gives).
        plan: the plan options (``max_passes``, ``pass_length``, ``optimise``; None: the default).
        swept: the study's varied names (grid and cases) and this job's values, in the study's order.
        key: the hash of the job's inputs and the code (:func:`~.keys.job_key`), set by load_study.
        part_digest: sha256 of the part's file.
    """

    index: int
    part: PartEntry
    faces: tuple[int, ...]
    cell: Mapping[str, Any]
    plan: Mapping[str, Any]
    swept: tuple[tuple[str, Any], ...] = ()
    key: str = ""
    part_digest: str = ""

    def describe(self) -> str:
        """One line: ``job 3 (curved_panel faces [-1], process.target_force=10)``."""
        vals = ", ".join(f"{k}={_show(v)}" for k, v in self.swept)
        return f"job {self.index} ({self.part.name} faces {list(self.faces)}" + (f", {vals})" if vals else ")")

    @property
    def folder(self) -> str:
        """The job's folder under the study's output folder."""
        return f"jobs/{self.key[:16]}"


@dataclass
class Study:
    """A study read from its file: its parts, the names it varies and its jobs (in order)."""

    path: Path
    name: str
    parts: list[PartEntry]
    swept: list[str]
    jobs: list[JobSpec] = field(default_factory=list)


def _show(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _where(path: Path, what: str) -> str:
    return f"{path}: {what}"


def _faces(value: Any, where: str) -> tuple[tuple[int, ...], ...]:
    """faces: an int, a list of ints (one selection) or a list of lists (one job per selection)."""
    def ints(v: Any) -> tuple[int, ...]:
        items = v if isinstance(v, (list, tuple)) else [v]
        if not items or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
            raise InputError(f"{where}: faces must be face indices (integers), got {v!r}")
        return tuple(items)

    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple)) for v in value):
        return tuple(ints(v) for v in value)
    return (ints(value),)


def _read_parts(raw: Any, base: Path, path: Path) -> list[PartEntry]:
    """The parts section -> entries (a folder gives one entry per CAD/mesh file in it)."""
    from robot_grinding_sim.core.geometry.parts import BUILTIN_PARTS
    from robot_grinding_sim.core.geometry.units import CAD_SUFFIXES, MESH_SUFFIXES

    if not isinstance(raw, list) or not raw:
        raise InputError(_where(path, "'parts' must be a list of one part or more"))
    out: list[PartEntry] = []
    for k, entry in enumerate(raw):
        where = _where(path, f"parts[{k}]")
        if isinstance(entry, str):
            entry = {"part": entry}
        if not isinstance(entry, Mapping):
            raise InputError(f"{where}: expected a part name, a file, or a mapping with 'part' or 'folder'")
        unknown = sorted(set(entry) - set(PART_KEYS))
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(PART_KEYS)})")
        if ("part" in entry) == ("folder" in entry):
            raise InputError(f"{where}: give exactly one of 'part' (a built-in part or a file) and 'folder'")
        face_sets = _faces(entry.get("faces", -1), where)
        unit = entry.get("unit", "") or ""
        if not isinstance(unit, str):
            raise InputError(f"{where}: unit must be a string such as mm, got {unit!r}")
        if "part" in entry:
            name = str(entry["part"])
            if name in BUILTIN_PARTS:
                out.append(PartEntry(name, name, True, face_sets, unit))
                continue
            file = (base / name).resolve()
            if not file.is_file():
                raise InputError(f"{where}: {name}: no such file (relative to {base}), nor a built-in part "
                                 f"({', '.join(BUILTIN_PARTS)})")
            out.append(PartEntry(name, str(file), False, face_sets, unit))
        else:
            folder = (base / str(entry["folder"])).resolve()
            if not folder.is_dir():
                raise InputError(f"{where}: folder {entry['folder']}: no such folder (relative to {base})")
            suffixes = set(CAD_SUFFIXES) | MESH_SUFFIXES
            files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
            if not files:
                raise InputError(f"{where}: folder {entry['folder']} holds no CAD or mesh file "
                                 f"({', '.join(sorted(suffixes))})")
            for f in files:
                out.append(PartEntry(f"{str(entry['folder']).rstrip('/')}/{f.name}", str(f), False, face_sets,
                                     unit))
    return out


def _check_names(names: Sequence[str], where: str, allow_plan: bool) -> None:
    import difflib

    from robot_grinding_sim.core.config import cell_specs

    known = {s.name for s in cell_specs()}
    for name in names:
        if name in BY_PART:
            raise InputError(f"{where}: {name} comes from 'parts' (part, faces, unit), not from here")
        if name in PLAN_OPTIONS and allow_plan:
            continue
        if name not in known:
            pool = sorted(known) + (sorted(PLAN_OPTIONS) if allow_plan else [])
            close = difflib.get_close_matches(name, pool, n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            what = "cell parameter or plan option" if allow_plan else "cell parameter"
            raise InputError(f"{where}: unknown {what} {name!r}{hint}")


def _plan_value(name: str, value: Any, where: str) -> Any:
    """A plan option's value checked for its type (None: the job's default)."""
    if value is None:
        return None
    want = PLAN_OPTIONS[name]
    ok = (isinstance(value, bool) if want is bool else
          isinstance(value, int) and not isinstance(value, bool) if want is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
    if not ok:
        raise InputError(f"{where}: {name} must be {'true or false' if want is bool else want.__name__}, "
                         f"got {value!r}")
    return float(value) if want is float else value


def _mapping(raw: Any, what: str, path: Path) -> dict[str, Any]:
    from robot_grinding_sim.core.parameters import flatten_ros_parameters

    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(_where(path, f"'{what}' must be a mapping of names to values"))
    return flatten_ros_parameters(raw)


def read_study(path: str | Path) -> Study:
    """Read and check a study file and expand it into jobs (without keys: :func:`load_study`).

    Raises:
        InputError: the file is missing or not YAML, an unknown key or name, a part file or folder
            that does not exist, a value of the wrong type, or a job whose cell does not validate
            (the message names the file and the job).
    """
    import yaml

    from robot_grinding_sim.core.config import CellConfig, config_from_mapping
    from robot_grinding_sim.core.job.setup import JobConfig
    from robot_grinding_sim.core.parameters import load_params_file, yaml_load

    path = Path(path)
    if not path.is_file():
        raise InputError(f"study file {path}: no such file")
    try:
        doc = yaml_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"study file {path} is not valid YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise InputError(_where(path, "expected a mapping with 'parts' at the top level"))
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise InputError(_where(path, f"unknown key {unknown[0]!r} (known: {', '.join(TOP_KEYS)})"))
    if "parts" not in doc:
        raise InputError(_where(path, "no 'parts': name one part or more"))
    base = path.resolve().parent
    parts = _read_parts(doc["parts"], base, path)

    values = dict(CellConfig().values())
    files = doc.get("params") or []
    for f in [files] if isinstance(files, str) else files:
        loaded = load_params_file(base / str(f))
        _check_names(list(loaded), _where(path, f"params {f}"), allow_plan=False)
        values.update(loaded)
    fixed = _mapping(doc.get("set"), "set", path)
    _check_names(list(fixed), _where(path, "set"), allow_plan=False)
    values.update(fixed)
    plan_raw = _mapping(doc.get("plan"), "plan", path)
    bad = sorted(set(plan_raw) - set(PLAN_OPTIONS))
    if bad:
        raise InputError(_where(path, f"plan: unknown option {bad[0]!r} (known: {', '.join(PLAN_OPTIONS)})"))
    plan = {k: _plan_value(k, plan_raw.get(k), _where(path, "plan")) for k in PLAN_OPTIONS}

    grid = _mapping(doc.get("grid"), "grid", path)
    _check_names(list(grid), _where(path, "grid"), allow_plan=True)
    for name, vals in grid.items():
        if not isinstance(vals, list) or not vals:
            raise InputError(_where(path, f"grid: {name} must be a list of one value or more, got {vals!r}"))
    cases_raw = doc.get("cases") or []
    if not isinstance(cases_raw, list):
        raise InputError(_where(path, "'cases' must be a list of mappings"))
    cases = []
    for k, c in enumerate(cases_raw):
        case = _mapping(c, f"cases[{k}]", path)
        _check_names(list(case), _where(path, f"cases[{k}]"), allow_plan=True)
        both = sorted(set(case) & set(grid))
        if both:
            raise InputError(_where(path, f"cases[{k}]: {both[0]} is also in 'grid': vary it in one place"))
        cases.append(case)
    swept = list(dict.fromkeys([n for c in cases for n in c] + list(grid)))

    jobs: list[JobSpec] = []
    combos = [dict(zip(grid, vs, strict=True)) for vs in itertools.product(*grid.values())]
    for part in parts:
        for faces in part.face_sets:
            for case in cases or [{}]:
                for combo in combos:
                    varied = {**case, **combo}
                    cell_vals = {**values, **{k: v for k, v in varied.items() if k not in PLAN_OPTIONS},
                                 "workpiece.part": part.source, "workpiece.faces": list(faces),
                                 "workpiece.unit": part.unit}
                    job_plan = {**plan}
                    where = f"{path}: job {len(jobs)} ({part.name} faces {list(faces)}" + "".join(
                        f", {k}={_show(v)}" for k, v in varied.items()) + ")"
                    for k in PLAN_OPTIONS:
                        if k in varied:
                            job_plan[k] = _plan_value(k, varied[k], where)
                    try:
                        cell = config_from_mapping(cell_vals)
                        JobConfig(cell=cell, **job_plan).validate()
                    except InputError as exc:
                        raise InputError(f"{where}: {exc}") from None
                    checked = cell.values()
                    shown = tuple((n, job_plan[n] if n in PLAN_OPTIONS else checked[n]) for n in swept)
                    jobs.append(JobSpec(len(jobs), part, tuple(faces), checked, job_plan, shown))
    name = doc.get("name") or path.stem
    return Study(path, str(name), parts, swept, jobs)


def load_study(path: str | Path) -> Study:
    """:func:`read_study` with every job's key (:func:`~.keys.job_key`; reads each part file once).

    Raises:
        InputError: see :func:`read_study`; also two jobs with the same inputs (the same key).
    """
    from robot_grinding_sim.core.study.keys import code_version, job_key, part_digest

    study = read_study(path)
    code = code_version()
    digests = {p.source: part_digest(p) for p in study.parts}
    seen: dict[str, int] = {}
    jobs = []
    for job in study.jobs:
        d = digests[job.part.source]
        key = job_key(job, d, code)
        if key in seen:
            raise InputError(f"{study.path}: job {job.index} and job {seen[key]} are the same job (same part, "
                             f"faces and parameters): {job.describe()}")
        seen[key] = job.index
        jobs.append(JobSpec(job.index, job.part, job.faces, job.cell, job.plan, job.swept, key, d))
    study.jobs = jobs
    return study

"""Job keys: a hash of everything a job's result depends on, so that a study re-runs only what changed.

:func:`job_key` hashes (sha256, canonical JSON) the part (its file's bytes: a built-in part's
shipped STEP file, which its generator in core/geometry/parts.py writes; or the user's file), the
faces, every cell parameter's value (the contents of a file a parameter names, e.g.
``robot.description_file``, instead of its path), the plan options, and :func:`code_version`: a
hash of the package's Python sources, the default robot's URDF files and the versions of the
numerical libraries a job's figures depend on. Edit a parameter, the part, the code or upgrade
numpy, and the key changes; move the study folder, and it does not.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.errors import InputError

#: libraries whose version changes a job's numbers (their versions go into the code version)
LIBRARIES = ("numpy", "scipy", "numba", "cadquery-ocp-novtk", "python-fcl", "trimesh")


@functools.lru_cache(maxsize=256)
def _digest_cached(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes (cached per path, size and modification time)."""
    st = Path(path).stat()
    return _digest_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def _library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": ".".join(map(str, sys.version_info[:2]))}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def source_digest(folder: Path) -> str:
    """sha256 over the Python files under ``folder``: each one's path (relative, sorted) and bytes."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*.py")):
        if "__pycache__" not in p.parts:
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The package's code version: sha256 over its Python sources (path and bytes, sorted), the
    default robot's URDF folder and :data:`LIBRARIES`' versions. Computed once per process
    (about 150 files: milliseconds)."""
    from robot_grinding_sim.core.resources import default_urdf

    h = hashlib.sha256(source_digest(Path(__file__).resolve().parents[2]).encode())
    try:
        urdf_dir = default_urdf().parent
        for p in sorted(urdf_dir.glob("*.urdf")):
            h.update(b"urdf/" + p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    except (InputError, OSError):  # a package without its URDF cannot run jobs; the job says so
        h.update(b"urdf: missing")
    h.update(json.dumps(_library_versions(), sort_keys=True).encode())
    return h.hexdigest()


def part_digest(part: Any) -> str:
    """sha256 of a study part's file (a built-in part: its shipped STEP file)."""
    from robot_grinding_sim.core.geometry.parts import part_path

    return file_digest(part_path(part.source) if part.builtin else part.source)


def _file_params() -> set[str]:
    from robot_grinding_sim.core.config import cell_specs

    return {s.name for s in cell_specs() if s.path == "file"}


def job_inputs(job: Any, digest: str, code: str) -> dict[str, Any]:
    """What :func:`job_key` hashes: the document (JSON-able, sorted keys) of a job's inputs."""
    cell: dict[str, Any] = {k: v for k, v in job.cell.items() if k != "workpiece.part"}
    for name in _file_params():
        path = cell.get(name)
        if isinstance(path, str) and path:
            cell[name] = {"file_sha256": file_digest(path)} if Path(path).is_file() else {"missing": path}
    part = {"sha256": digest, "suffix": "" if job.part.builtin else Path(job.part.source).suffix.lower(),
            "builtin": job.part.name if job.part.builtin else None}
    return {"code": code, "part": part, "faces": list(job.faces), "cell": cell, "plan": dict(job.plan)}


def job_key(job: Any, digest: str, code: str) -> str:
    """sha256 (hex) of :func:`job_inputs`: the same for the same inputs on any machine."""
    doc = json.dumps(_canonical(job_inputs(job, digest, code)), sort_keys=True, separators=(",", ":"),
                     allow_nan=False)
    return hashlib.sha256(doc.encode()).hexdigest()


def _canonical(v: Any) -> Any:
    """Tuples as lists, floats by repr (JSON's own), mappings with string keys."""
    if isinstance(v, Mapping):
        return {str(k): _canonical(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canonical(x) for x in v]
    return v

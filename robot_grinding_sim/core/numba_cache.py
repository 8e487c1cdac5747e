"""Where the compiled numba kernels are cached, chosen once when the package is imported.

The kernels are compiled with ``cache=True``: the first process that runs one compiles it (the
first job of a fresh install: about a minute, README), and every later process loads it from the
cache in milliseconds, if it finds the cache. The cache's base folder, in order:

1. ``NUMBA_CACHE_DIR`` if the user set it (numba's own variable: every process that sees the same
   value shares one cache);
2. ``robot_grinding_sim/__pycache__/numba`` where the package's folder is writable (a source
   checkout, a venv's site-packages, a colcon workspace built by the user);
3. otherwise (a read-only install: a colcon/ROS install or a system site-packages owned by
   another user) the user's cache folder ``$XDG_CACHE_HOME/robot_grinding_sim/numba``
   (``~/.cache/robot_grinding_sim/numba``), so a user's second run finds what the first compiled.

The kernels go into ``robot_grinding_sim-<fingerprint>`` under that base, set as ``NUMBA_CACHE_DIR``
for this process and the processes it starts (the nodes, the study's workers). The fingerprint
(:func:`fingerprint`) hashes the source of every module that defines kernels and of the package's
modules they import. numba checks only the source file of the function it loads: a kernel whose
callee or constant in another file changed (an upgrade, a ``git pull``) was loaded from the cache
with the old callee compiled in (numba's documented caching limitation). A pad on a mesh part ran
the old ``surface_gap`` inside the cached step and failed with ZeroDivisionError. Folders of other
fingerprints that no process has used for :data:`KEEP_UNUSED_S` are removed.

:func:`configure` is called by ``robot_grinding_sim/__init__.py`` before anything imports numba;
it imports nothing heavy (reading the package and hashing the kernel sources: about 15 ms).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path

#: the package's folder (robot_grinding_sim/)
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _writable(folder: Path) -> bool:
    """Whether numba can write its in-tree cache (``folder/__pycache__``) under ``folder``."""
    cache = folder / "__pycache__"
    if cache.is_dir():
        return os.access(cache, os.W_OK | os.X_OK)
    return os.access(folder, os.W_OK | os.X_OK)


def user_cache_dir(environ: MutableMapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/robot_grinding_sim/numba`` (default ``~/.cache/...``)."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "robot_grinding_sim" / "numba"


#: the prefix of the cache folder of one version of the kernels' source (:func:`fingerprint`)
PREFIX = "robot_grinding_sim-"
#: the base folder chosen by the first process (its children keep it: their NUMBA_CACHE_DIR is the subfolder)
BASE_VAR = "ROBOT_GRINDING_SIM_NUMBA_CACHE_BASE"
#: a cache folder of another fingerprint unused this long (s) is removed
KEEP_UNUSED_S = 3600.0

_IMPORT = re.compile(r"^\s*(?:from|import)\s+robot_grinding_sim((?:\.\w+)+)(?:\s+import\s+([\w, ()]+))?", re.M)
#: a module that defines cached kernels (a numba decorator with cache=True: the others are never on disk)
_KERNELS = re.compile(r"^\s*@(?:numba\.)?(?:njit|jit|cfunc|vectorize|guvectorize)\(.*\bcache\s*=\s*True", re.M)


def kernel_sources(package_dir: Path) -> list[Path]:
    """The package's modules that define cached numba kernels, and the package's modules that those
    import (a kernel compiles its callees and module constants in), sorted."""
    root = package_dir.parent
    files = {p: p.read_text(encoding="utf-8", errors="replace") for p in package_dir.rglob("*.py")}
    out = {p for p, text in files.items() if _KERNELS.search(text)}
    for p in list(out):
        for m in _IMPORT.finditer(files[p]):
            base = root / package_dir.name / Path(*m.group(1).strip(".").split("."))
            names = [n.strip() for n in (m.group(2) or "").replace("(", " ").replace(")", " ").split(",")]
            for cand in [base.with_suffix(".py"), base / "__init__.py", *(base / f"{n}.py" for n in names if n)]:
                if cand in files:
                    out.add(cand)
    return sorted(out)


def fingerprint(package_dir: Path = PACKAGE_DIR) -> str:
    """16 hex digits of the SHA-256 of :func:`kernel_sources` (their paths in the package and bytes)."""
    h = hashlib.sha256()
    for p in kernel_sources(package_dir):
        h.update(p.relative_to(package_dir).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def choose_base(package_dir: Path, environ: MutableMapping[str, str],
                writable: Callable[[Path], bool] = _writable) -> str:
    """The cache's base folder for a package at ``package_dir`` (module docstring)."""
    inherited = environ.get(BASE_VAR)
    given = environ.get("NUMBA_CACHE_DIR")
    if inherited and given and Path(given).parent == Path(inherited):
        return inherited  # a process started by one that chose (its NUMBA_CACHE_DIR is the subfolder)
    if given:
        return given
    if writable(package_dir):
        return str(package_dir / "__pycache__" / "numba")
    return str(user_cache_dir(environ))


def choose_cache_dir(package_dir: Path, environ: MutableMapping[str, str],
                     writable: Callable[[Path], bool] = _writable, fp: str | None = None) -> str:
    """The numba cache folder for a package at ``package_dir``: ``<base>/robot_grinding_sim-<fingerprint>``."""
    return os.path.join(choose_base(package_dir, environ, writable), PREFIX + (fp or fingerprint(package_dir)))


def _tidy(folder: str, now: float) -> None:
    """Mark ``folder`` used now; remove its siblings of other fingerprints unused for :data:`KEEP_UNUSED_S`."""
    try:
        os.makedirs(folder, exist_ok=True)
        os.utime(folder, (now, now))
        base = Path(folder).parent
        for other in base.glob(PREFIX + "*"):
            if other.name != Path(folder).name and other.is_dir() and now - other.stat().st_mtime > KEEP_UNUSED_S:
                shutil.rmtree(other, ignore_errors=True)
    except OSError:
        pass  # a cache folder that cannot be written: numba says so when it compiles


def configure(package_dir: Path = PACKAGE_DIR, environ: MutableMapping[str, str] | None = None,
              writable: Callable[[Path], bool] = _writable, fp: str | None = None) -> str:
    """Apply :func:`choose_cache_dir`: set ``NUMBA_CACHE_DIR`` (and :data:`BASE_VAR`) in ``environ``
    (default os.environ; and numba's config if numba is imported already). Returns the folder."""
    env = os.environ if environ is None else environ
    folder = choose_cache_dir(package_dir, env, writable, fp)
    env[BASE_VAR] = os.path.dirname(folder)
    env["NUMBA_CACHE_DIR"] = folder
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is None:
        config.CACHE_DIR = folder  # numba read the environment at its import
    if environ is None:
        _tidy(folder, time.time())
    return folder

"""Where the compiled numba kernels are cached, chosen once when the package is imported.

The kernels are compiled with ``cache=True``: the first process that runs one compiles it (the
first job of a fresh install: about a minute, README), and every later process loads it from the
cache in milliseconds, if it finds the cache. The choice, in order:

1. ``NUMBA_CACHE_DIR`` if the user set it (numba's own variable: every process that sees the same
   value shares one cache);
2. numba's default, a ``__pycache__`` beside each source file, where the package's folder is
   writable (a source checkout, a venv's site-packages, a colcon workspace built by the user);
3. otherwise (a read-only install: a colcon/ROS install or a system site-packages owned by
   another user) the user's cache folder ``$XDG_CACHE_HOME/robot_grinding_sim/numba``
   (``~/.cache/robot_grinding_sim/numba``), set as ``NUMBA_CACHE_DIR`` for this process and the
   processes it starts (the nodes, the study's workers), so a user's second run finds what the
   first compiled.

:func:`configure` is called by ``robot_grinding_sim/__init__.py`` before anything imports numba;
it imports nothing heavy.
"""

from __future__ import annotations

import os
import sys
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


def choose_cache_dir(package_dir: Path, environ: MutableMapping[str, str],
                     writable: Callable[[Path], bool] = _writable) -> str | None:
    """The numba cache folder for a package at ``package_dir`` (module docstring); None: numba's
    in-tree default."""
    given = environ.get("NUMBA_CACHE_DIR")
    if given:
        return given
    if writable(package_dir):
        return None
    return str(user_cache_dir(environ))


def configure(package_dir: Path = PACKAGE_DIR, environ: MutableMapping[str, str] | None = None,
              writable: Callable[[Path], bool] = _writable) -> str | None:
    """Apply :func:`choose_cache_dir`: set ``NUMBA_CACHE_DIR`` in ``environ`` (default os.environ; and
    numba's config if numba is imported already) where the in-tree cache cannot be written.
    Returns the folder (None: in tree)."""
    env = os.environ if environ is None else environ
    folder = choose_cache_dir(package_dir, env, writable)
    if folder is None or env.get("NUMBA_CACHE_DIR") == folder:
        return folder
    env["NUMBA_CACHE_DIR"] = folder
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is None:
        config.CACHE_DIR = folder  # numba read the environment at its import
    return folder

"""Where the compiled kernels are cached: a read-only install caches in the user's folder, where
the user's second run finds it (core/numba_cache.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from robot_grinding_sim.core.numba_cache import choose_cache_dir, configure


def test_user_setting_wins(tmp_path: Path) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "mine"), "HOME": str(tmp_path)}
    assert choose_cache_dir(tmp_path, env, writable=lambda p: False) == str(tmp_path / "mine")


def test_writable_package_keeps_numbas_in_tree_cache(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert configure(tmp_path, env, writable=lambda p: True) is None
    assert "NUMBA_CACHE_DIR" not in env


def test_read_only_package_caches_in_the_users_folder(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    got = configure(tmp_path, env, writable=lambda p: False)
    assert got == str(tmp_path / "home" / ".cache" / "robot_grinding_sim" / "numba")
    assert env["NUMBA_CACHE_DIR"] == got
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert configure(tmp_path, env, writable=lambda p: False) == str(tmp_path / "xdg" / "robot_grinding_sim" / "numba")


# a process whose package folder is read-only (os.access says so: the tests may run as root, which
# writes anywhere), compiling one small cached kernel of the package; prints numba's cache folder,
# the kernel's cache hits and misses
_CHILD = textwrap.dedent("""
    import json, os, sys
    real = os.access
    pkg = sys.argv[1]
    os.access = lambda p, mode, **kw: False if str(p).startswith(pkg) and mode & os.W_OK else real(p, mode, **kw)
    import robot_grinding_sim  # noqa: F401  (chooses the cache folder)
    import numpy as np
    from numba.core import config
    from robot_grinding_sim.core.contact.kelvin_voigt import exp_basis
    exp_basis(-1.0, 1.0, 1.0, 1.0, 0.1)
    s = exp_basis.stats
    print(json.dumps({"dir": config.CACHE_DIR, "hits": sum(s.cache_hits.values()),
                      "misses": sum(s.cache_misses.values())}))
""")


def test_read_only_install_second_run_loads_from_the_user_cache(tmp_path: Path) -> None:
    import robot_grinding_sim

    pkg = str(Path(robot_grinding_sim.__file__).resolve().parent)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp_path)
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD, pkg], env=env, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    want = str(tmp_path / ".cache" / "robot_grinding_sim" / "numba")
    assert runs[0]["dir"] == want and runs[1]["dir"] == want
    assert any(Path(want).rglob("*.nbi")), "nothing cached in the user's folder"
    assert runs[0]["misses"] == 1 and runs[1]["hits"] == 1 and runs[1]["misses"] == 0

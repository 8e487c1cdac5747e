"""Where the compiled kernels are cached: a read-only install caches in the user's folder, where
the user's second run finds it; a change to a kernel's callee in another file is compiled, not
loaded stale from the cache (core/numba_cache.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from robot_grinding_sim.core.numba_cache import BASE_VAR, PREFIX, _tidy, choose_cache_dir, configure, fingerprint

FP = PREFIX + "0123456789abcdef"


def test_user_setting_wins(tmp_path: Path) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "mine"), "HOME": str(tmp_path)}
    got = choose_cache_dir(tmp_path, env, writable=lambda p: False, fp=FP[len(PREFIX):])
    assert got == str(tmp_path / "mine" / FP)


def test_writable_package_caches_in_its_pycache(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    got = configure(tmp_path, env, writable=lambda p: True, fp=FP[len(PREFIX):])
    assert got == str(tmp_path / "__pycache__" / "numba" / FP) == env["NUMBA_CACHE_DIR"]
    assert env[BASE_VAR] == str(tmp_path / "__pycache__" / "numba")


def test_read_only_package_caches_in_the_users_folder(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    got = configure(tmp_path, env, writable=lambda p: False, fp=FP[len(PREFIX):])
    assert got == str(tmp_path / "home" / ".cache" / "robot_grinding_sim" / "numba" / FP)
    assert env["NUMBA_CACHE_DIR"] == got
    # a process it starts inherits both variables and keeps the base (not a folder inside the folder)
    child = dict(env)
    assert configure(tmp_path, child, writable=lambda p: False, fp=FP[len(PREFIX):]) == got
    assert configure(tmp_path, child, writable=lambda p: False, fp="fedcba9876543210") == str(
        tmp_path / "home" / ".cache" / "robot_grinding_sim" / "numba" / (PREFIX + "fedcba9876543210"))
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert configure(tmp_path, env, writable=lambda p: False, fp=FP[len(PREFIX):]) == str(
        tmp_path / "xdg" / "robot_grinding_sim" / "numba" / FP)


def test_folders_of_other_sources_unused_for_an_hour_are_removed(tmp_path: Path) -> None:
    now = time.time()
    old, recent, foreign = tmp_path / (PREFIX + "old"), tmp_path / (PREFIX + "recent"), tmp_path / "someone_elses"
    for d, age in ((old, 7200.0), (recent, 600.0), (foreign, 7200.0)):
        (d / "x").mkdir(parents=True)
        os.utime(d, (now - age, now - age))
    _tidy(str(tmp_path / FP), now)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([FP, recent.name, foreign.name])


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
    want = str(tmp_path / ".cache" / "robot_grinding_sim" / "numba" / (PREFIX + fingerprint()))
    assert runs[0]["dir"] == want and runs[1]["dir"] == want
    assert any(Path(want).rglob("*.nbi")), "nothing cached in the user's folder"
    assert runs[0]["misses"] == 1 and runs[1]["hits"] == 1 and runs[1]["misses"] == 0


# a package of two kernel modules: ``caller.g`` calls ``callee.f``; prints g(), after choosing the cache
# folder the way the package does (or leaving numba's default, argv[2] == "plain")
_STALE_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    pkg = Path(sys.argv[1])
    if sys.argv[2] != "plain":
        from robot_grinding_sim.core.numba_cache import configure
        configure(pkg)
    sys.path.insert(0, str(pkg.parent))
    from kernelpkg.caller import g
    print(g(1.0))
""")


def test_a_callee_changed_in_another_file_is_compiled_again_not_loaded_stale(tmp_path: Path) -> None:
    pkg = tmp_path / "kernelpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text("from numba import njit\n\nfrom kernelpkg.callee import f\n\n\n"
                                   "@njit(cache=True)\ndef g(x):\n    return f(x) + 1.0\n")
    callee = pkg / "callee.py"

    def run(mode: str) -> float:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", BASE_VAR)}
        out = subprocess.run([sys.executable, "-c", _STALE_CHILD, str(pkg), mode], env=env, capture_output=True,
                             text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    for mode in ("plain", "fingerprint"):
        callee.write_text("from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return 10.0 * x\n")
        assert run(mode) == 11.0
        callee.write_text("from numba import njit\n\n\n@njit(cache=True)\ndef f(x):\n    return 20.0 * x\n")
        got = run(mode)
        if mode == "plain":
            assert got == 11.0  # numba's own cache: the caller's file did not change, the old f stays compiled in
        else:
            assert got == 21.0

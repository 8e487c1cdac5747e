"""Where the package's data files are: urdf/, config/, launch/, parts/ (no ROS import).

Looked up, in order, in the source tree this module runs from (editable installs and
``colcon build --symlink-install``), ``<prefix>/share/robot_grinding_sim`` for each prefix of
``AMENT_PREFIX_PATH`` (colcon installs) and ``sys.prefix/share/robot_grinding_sim`` (pip's
data_files).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = "robot_grinding_sim"

#: The default robot: UR10e, F/T sensor and ball-headed grinding tool with a ``tcp`` frame.
URDF_DEFAULT = "urdf/ur10e_grinding.urdf"


def share_dirs() -> list[Path]:
    """Candidate directories holding the package's data, in order of preference."""
    out = [Path(__file__).resolve().parents[2]]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            out.append(Path(prefix) / "share" / PACKAGE)
    out.append(Path(sys.prefix) / "share" / PACKAGE)
    return out


def package_file(relative: str | os.PathLike[str], must_exist: bool = True) -> Path:
    """The absolute path of a package data file such as ``urdf/ur10e_grinding.urdf``.

    Raises:
        FileNotFoundError: ``must_exist`` and no candidate directory holds it (names them all).
    """
    rel = Path(relative)
    for d in share_dirs():
        cand = d / rel
        if cand.exists():
            return cand
    if must_exist:
        raise FileNotFoundError(f"{rel} not found in {[str(d) for d in share_dirs()]}")
    return share_dirs()[0] / rel


def default_urdf() -> Path:
    """The default robot's URDF (:data:`URDF_DEFAULT`).

    Raises:
        InputError: not installed where :func:`share_dirs` looks (names the directories).
    """
    from robot_grinding_sim.core.errors import InputError

    try:
        return package_file(URDF_DEFAULT)
    except FileNotFoundError as exc:
        raise InputError(f"default robot: {exc}") from None


def resolve_package_uri(path: str) -> str:
    """``package://robot_grinding_sim/<relative>`` as the file's absolute path (:func:`package_file`);
    any other path as it is (the tool URDFs the package ships: ``package://robot_grinding_sim/urdf/...``)."""
    prefix = f"package://{PACKAGE}/"
    if not str(path).startswith(prefix):
        return path
    try:
        return str(package_file(str(path)[len(prefix):]))
    except FileNotFoundError as exc:
        from robot_grinding_sim.core.errors import InputError

        raise InputError(f"{path}: {exc}") from None

"""Output files that appear whole or not at all, and the check of an output path before a long run.

Every command that writes goes through here:

- :func:`check_output` before the work starts: the folder exists, is a folder (a path through a
  regular file is "not a directory"), and a file can be created in it (a read-only file system
  or a folder the user may not write to is refused at once, also for root, by creating and
  removing a probe file);
- :func:`write_files` / :func:`atomic_write` at the end: every file is written to a temporary
  name in its folder, and only when all of them are written are they renamed into place, so a
  full disk, a plot that fails or an interrupted run leaves no partial file and no half of a set
  (plan.json without its CSV);
- :func:`staged_dir`: a whole output folder built in a temporary folder beside it and moved in
  at the end.

Every failure is an :class:`~robot_grinding_sim.core.errors.InputError` whose message names the
path the user gave (not the temporary name) and the reason (``No space left on device``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from robot_grinding_sim.core.errors import InputError

__all__ = ["atomic_write", "check_output", "staged_dir", "write_files"]


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _missing_folder(path: Path, what: str) -> InputError:
    """The error for a folder of ``path`` that is not there: a file on the way, or missing."""
    folder = _folder(path)
    for anc in (folder, *folder.parents):
        if anc.exists() and not anc.is_dir():
            return InputError(f"{what}{path}: {anc} is a file, not a folder")
    return InputError(f"{what}{path}: folder {folder} does not exist")


def check_output(path: str | os.PathLike[str], what: str = "", kind: str = "file") -> Path:
    """Check that ``path`` can be written, before any work; returns it as a Path.

    Args:
        path: the output file (``kind="file"``) or folder (``kind="dir"``; it may exist).
        what: the option that named it, for the message (``"--out"``).
        kind: ``"file"`` or ``"dir"``.

    Raises:
        InputError: the path is a folder where a file is wanted (or a file where a folder is), its
            folder does not exist or runs through a regular file, or nothing can be created there
            (read-only file system, no permission, no space for a new entry).
    """
    path = Path(path)
    label = f"{what} " if what else ""
    if kind == "file" and path.is_dir():
        raise InputError(f"{label}{path}: is a directory, expected a file")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise InputError(f"{label}{path}: exists and is a file, not a directory")
    folder = _folder(path)
    if not folder.is_dir():
        raise _missing_folder(path, label)
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        raise InputError(f"{label}{path}: cannot write in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def write_files(files: Mapping[str | os.PathLike[str], str | bytes]) -> list[Path]:
    """Write several files all-or-nothing: each to a temporary name in its folder, then (only when
    every one is written) each renamed over its target. Text is written as UTF-8 with ``\\n``.

    Returns:
        The paths written, in the order given.

    Raises:
        InputError: a target is a folder, its folder is missing, or a write fails (the message
            names the target and the reason); no temporary file is left, no target is touched.
    """
    items = [(Path(p), data) for p, data in files.items()]
    for path, _ in items:
        if path.is_dir():
            raise InputError(f"{path}: is a directory, expected a file")
        if not _folder(path).is_dir():
            raise _missing_folder(path, "")
    umask = os.umask(0)
    os.umask(umask)
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in items:
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=_folder(path))
            except OSError as exc:
                raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
            temps.append((tmp, path))
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data.encode("utf-8") if isinstance(data, str) else data)
                    fh.flush()
                    os.fsync(fh.fileno())  # a full disk shows here, not after the rename
                os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary files
            except OSError as exc:
                raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
        for tmp, path in temps:
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    finally:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return [p for p, _ in items]


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write one file through a temporary name and a rename (see :func:`write_files`)."""
    return write_files({path: data})[0]


@contextlib.contextmanager
def staged_dir(out: str | os.PathLike[str], what: str = "") -> Iterator[Path]:
    """A folder to fill, moved into ``out`` at the end: yields a temporary folder beside ``out``;
    when the block ends without an exception, every entry of it replaces the same name in ``out``
    (created if missing; other entries of ``out`` are kept). On an exception nothing reaches
    ``out`` and the temporary folder is removed; an OSError becomes an InputError naming ``out``.
    """
    out = Path(out)
    check_output(out, what, kind="dir")
    label = f"{what} " if what else ""
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=_folder(out)))
    except OSError as exc:
        raise InputError(f"{label}{out}: cannot write ({exc.strerror or exc})") from None
    try:
        try:
            yield tmp
        except OSError as exc:
            raise InputError(f"{label}{out}: cannot write ({exc.strerror or exc})") from None
        try:
            out.mkdir(exist_ok=True)
            for entry in sorted(tmp.iterdir()):
                dst = out / entry.name
                if dst.is_dir() and not dst.is_symlink():
                    shutil.rmtree(dst)
                os.replace(entry, dst)
        except OSError as exc:
            raise InputError(f"{label}{out}: cannot write ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

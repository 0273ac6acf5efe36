"""Outputs written under a temporary sibling name and renamed when complete (:func:`atomic_path`).

Temporaries are ``.NAME.tmp-HEX8`` (and ``.NAME.old-HEX8`` for the output replaced), next
to ``NAME``. A writer holds a shared ``flock`` on their directory while it writes; the
next writer removes what a killed one left when it can take that lock exclusively (no
live writer there). What an output may replace is decided by :mod:`.guards` and
:mod:`.ownership`, whose public names the callers import from here too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from filelock import lock_descriptor

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale temporaries are left in place
    fcntl = None  # type: ignore[assignment]

from .guards import (
    check_file_output,
)
from .ownership import ForeignOutputError, write_marker


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str],
    overwrite: bool = False,
    kind: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    owned: Callable[..., bool] | None = None,
) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; rename it to ``path`` on success.

    Nothing is left at ``path`` (nor the temporary) if the body raises. An existing
    ``path`` is checked before and again at the swap (:func:`.guards.check_file_output`).
    With ``kind`` the output is an lswmkc directory: the marker is written into it, and
    a symbolic link is followed (the link stays, its target is replaced).

    Parameters
    ----------
    path : str or Path
        Final file or directory name.
    overwrite, inputs, owned
        As :func:`.guards.check_file_output`.
    kind : {"fit", "sweep", "compare", "kernel-store", "plots"}, optional
        The output is an lswmkc output directory of that kind.

    Raises
    ------
    FileExistsError, ProtectedOutputError, OutputInUseError
        As :func:`.guards.check_file_output`.
    """
    path = Path(path)
    if kind is not None and os.path.islink(path):  # a directory output through a link: the link stays, the
        path = Path(os.path.realpath(path))       # target is replaced (as a sweep directory is)
        if not path.exists():
            raise ForeignOutputError(f"output {path} is a symbolic link that points nowhere; choose another output")
    check_file_output(path, overwrite, inputs, owned, kind is not None, writable=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    held = _hold_directory(path.parent, path.name)  # exclusive: remove what killed writers left; then shared
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if kind is not None and tmp.is_dir():
            write_marker(tmp, kind)
        if os.path.lexists(path):
            if not overwrite:
                raise FileExistsError(f"output {path} appeared while writing; left it untouched")
            check_file_output(path, overwrite, inputs, owned, kind is not None, writable=False)
            trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, trash)
            os.replace(tmp, path)
            remove(trash)
        else:
            os.replace(tmp, path)
    finally:
        try:
            remove(tmp)
        finally:
            if held is not None:
                os.close(held)


def _hold_directory(directory, name):
    """The descriptor of ``directory`` holding the writers' shared flock (None where it cannot
    be taken), after removing the temporaries of output ``name`` if no live writer is at work there.
    """
    if fcntl is None:
        return None
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if lock_descriptor(fd, blocking=False):  # exclusive: no live writer in the directory
            remove_leftovers(directory, re.compile(re.escape(f".{name}.") + "(?:tmp|old)-[0-9a-f]{8}"))
        fcntl.flock(fd, fcntl.LOCK_SH)  # converts the exclusive lock (filelock has no shared flock)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove(path: str | os.PathLike[str]) -> None:
    """Remove the file or directory ``path`` quietly; a link is removed, never what it points to."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def remove_leftovers(
    directory: str | os.PathLike[str], pattern: re.Pattern[str], where: Callable[[Path], bool] | None = None
) -> list[Path]:
    """Remove what a killed process left in ``directory``: the entries whose whole names
    match ``pattern`` (and, with ``where``, for which ``where(path)`` is true), never a link.

    Returns
    -------
    list of Path
        The entries removed (none where ``directory`` cannot be listed).
    """
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    removed = [Path(e.path) for e in entries if pattern.fullmatch(e.name) and not os.path.islink(e.path)]
    removed = [p for p in removed if where is None or where(p)]
    for p in removed:
        remove(p)
    return removed

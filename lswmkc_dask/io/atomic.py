"""Outputs: written under a temporary sibling name and renamed when complete, marked as
lswmkc's own, and replaced only when they are.

Every output directory this package writes (a fit's report directory, a sweep
directory, a kernel store) holds a marker file ``.lswmkc-output`` (JSON: ``kind``,
``version``, ``created``). ``overwrite=True`` (``--overwrite``) replaces only

* a directory holding that marker (a kernel store whose ``zarr.json`` says format
  ``lswmkc-kernel-store/...`` counts too: stores written before the marker existed),
* or an empty directory,

and never a file, the working directory, the home directory, ``/``, an ancestor of
the working directory, a directory holding the input, or a directory in use by a
running sweep. Anything else is refused, with or without ``overwrite``: the package
deletes only what it wrote.

File outputs named by the user (``lswmkc verify --output X.json``, the PNGs of
``lswmkc plot``) follow the same rule (:func:`check_file_output`): a file is replaced
only if it carries this package's signature (a JSON object with ``"written_by":
"lswmkc-dask ..."``, a PNG whose ``Software`` text chunk says ``lswmkc-dask``), never
a directory, a symbolic link, an input or a file inside an input, whatever
``overwrite`` says. No output is ever written inside an input, nor inside a kernel
store (:func:`refuse_output_location`: a later ``prepare --overwrite`` of the store
would delete it), and a kernel store holding anything but its own members is never
replaced (:func:`store_foreign_entries`).

Temporaries of :func:`atomic_path` are named ``.NAME.tmp-HEX8`` (and ``.NAME.old-HEX8``
for the output being replaced), next to ``NAME``. A writer holds a shared ``flock`` on
the directory that holds them while it writes; the next writer of ``NAME`` removes
those a killed process left behind when it can take that lock exclusively, i.e. when
no live writer is at work in the directory (:func:`remove_stale_temporaries`).

This module holds the atomic writes and their temporaries; the markers and signatures
are in :mod:`.ownership`, the refusals of output locations in :mod:`.guards`. Their
public names are importable from here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..errors import with_message
from ._lockfile import ForeignOutputError

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale temporaries are left in place
    fcntl = None  # type: ignore[assignment]

from .guards import (
    OVERWRITE,
    OutputNotWritableError,
    ProtectedOutputError,
    check_file_output,
    check_new_output,
    check_replaceable,
    check_writable,
    enclosing_store,
    file_refusal,
    protected_reason,
    refuse_inside_input,
    refuse_output_location,
    store_foreign_entries,
)
from .ownership import MARKER, SIGNATURE, json_is_ours, marker_info, png_is_ours, write_marker
from .ownership import signature as signature  # read here by the command line and tables.py

__all__ = [
    "MARKER",
    "SIGNATURE",
    "check_file_output",
    "json_is_ours",
    "png_is_ours",
    "ForeignOutputError",
    "OutputNotWritableError",
    "ProtectedOutputError",
    "atomic_path",
    "check_new_output",
    "check_replaceable",
    "check_writable",
    "enclosing_store",
    "marker_info",
    "protected_reason",
    "refuse_output_location",
    "remove_stale_temporaries",
    "store_foreign_entries",
    "write_marker",
]


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str],
    overwrite: bool = False,
    kind: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    owned: Callable[..., bool] | None = None,
) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; rename it to ``path`` on success.

    Nothing is left at ``path`` (nor the temporary) if the body raises; temporaries
    that killed writers left in ``path``'s directory are removed first when no live
    writer is at work there (:func:`remove_stale_temporaries`). With ``kind``
    the output is a directory of this package: the marker is written into it, and an
    existing ``path`` is replaced only if :func:`check_replaceable` allows it (checked
    before and again at the swap); a symbolic link is followed (the link stays, its
    target is replaced). Without ``kind`` the output is a file: an existing
    directory, link or (with ``owned``) file this package did not write is never
    replaced (checked before and again at the swap), nor an input.

    Parameters
    ----------
    path : str or Path
        Final file or directory name.
    overwrite : bool
        Replace an existing ``path``; otherwise an existing ``path`` is an error.
    kind : {"fit", "sweep", "compare", "kernel-store", "plots"}, optional
        The output is an lswmkc output directory of that kind.
    inputs : sequence of paths
        With ``kind``: an existing ``path`` holding one of them is never replaced.
        Never written: ``path`` equal to one of them or inside one.
    owned : callable, optional
        File outputs: ``owned(path) -> bool`` says whether an existing file is this
        package's (see :func:`check_file_output`).

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False (checked before and after), or
        it may not be replaced (:func:`check_replaceable`, :func:`check_file_output`;
        a ``ForeignOutputError``).
    ProtectedOutputError
        ``path`` is an input or inside one.
    """
    path = Path(path)
    if kind is not None and os.path.islink(path):  # a directory output through a link: the link stays, the
        path = Path(os.path.realpath(path))       # target is replaced (as a sweep directory is)
        if not path.exists():
            raise ForeignOutputError(f"output {path} is a symbolic link that points nowhere; choose another output")
    refuse_inside_input(path, inputs)
    _check_existing(path, overwrite, kind, inputs, owned)
    path.parent.mkdir(parents=True, exist_ok=True)
    held = _hold_directory(path.parent, path.name)  # exclusive: remove what killed writers left; then shared while writing
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if kind is not None and tmp.is_dir():
            write_marker(tmp, kind)
        if os.path.lexists(path):
            if not overwrite:
                raise FileExistsError(f"output {path} appeared while writing; left it untouched")
            _check_existing(path, overwrite, kind, inputs, owned)
            trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, trash)
            os.replace(tmp, path)
            _remove(trash)
        else:
            os.replace(tmp, path)
    finally:
        try:
            if os.path.lexists(tmp):
                _remove(tmp)
        finally:
            if held is not None:
                os.close(held)


#: Temporaries of :func:`atomic_path` next to an output NAME: ``.NAME.tmp-HEX8`` and the
#: replaced output ``.NAME.old-HEX8`` (NAME is matched literally).
_TEMPORARY_SUFFIX = re.compile(r"(?:tmp|old)-[0-9a-f]{8}")


def _open_directory(directory):
    """A read-only descriptor of ``directory`` for flock, or None where it cannot be opened."""
    try:
        return os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def _try_flock(fd, flags):
    """flock: True, False if held by another, None where the file system (or OS) has none for a directory.

    (Hand code: a shared flock on a directory, which filelock does not offer.)
    """
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _hold_directory(directory, name=None):
    """Take the writers' lock of ``directory``; first remove stale temporaries of ``name`` (None: all).

    Returns the descriptor that holds a shared flock (close it when the write is
    done), or None where the directory cannot be locked.
    """
    fd = _open_directory(directory) if fcntl is not None else None
    if fd is None:
        return None
    if _try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB):  # no live writer in the directory
        _remove_matching(Path(directory), name)
    if not _try_flock(fd, fcntl.LOCK_SH):  # (converts the exclusive lock, if taken)
        os.close(fd)
        return None
    return fd


def _remove_matching(directory, name=None):
    """Remove ``.NAME.tmp-HEX8``/``.NAME.old-HEX8`` entries in ``directory`` (no links); the list removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        head, dot, suffix = entry.name.rpartition(".")
        if not (dot and head.startswith(".") and len(head) > 1 and _TEMPORARY_SUFFIX.fullmatch(suffix)):
            continue
        if (name is not None and head != f".{name}") or entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        else:
            continue
        removed.append(Path(entry.path))
    return removed


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries a killed writer of ``path`` left next to it.

    Only entries named ``.NAME.tmp-HEX8`` or ``.NAME.old-HEX8`` for ``NAME =
    path.name`` (what :func:`atomic_path` creates), never a symbolic link, and only
    when no live process writes in ``path``'s directory: every writer holds a shared
    ``flock`` on that directory while it writes, and this takes it exclusively
    without waiting (if it cannot, nothing is removed now; a later writer will). A
    process killed outright (SIGKILL) loses its flock, so what it left is removed. On
    a file system without flock nothing is removed. :func:`atomic_path` calls this
    (for every temporary in the directory) before it writes.

    Parameters
    ----------
    path : str or Path
        The output (file or directory) whose temporaries to remove; need not exist.

    Returns
    -------
    list of Path
        The entries removed.
    """
    path = Path(os.path.abspath(path))
    fd = _open_directory(path.parent) if fcntl is not None else None
    if fd is None:
        return []
    try:
        if not _try_flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB):
            return []
        return _remove_matching(path.parent, path.name)
    finally:
        os.close(fd)


def _check_existing(path, overwrite, kind, inputs, owned):
    """Raise unless an existing ``path`` may be replaced (nothing to do if it does not exist)."""
    if not os.path.lexists(path):
        return
    if not overwrite:
        if kind is None and file_refusal(path, owned):
            raise ForeignOutputError(file_refusal(path, owned))
        raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    if kind is not None:
        check_replaceable(path, inputs)
        return
    refusal = file_refusal(path, owned)
    if refusal:
        raise ForeignOutputError(refusal)


def _remove(p):
    p = Path(p)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()

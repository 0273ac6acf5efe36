"""Where an output may be written, and what it may replace.

Every output directory lswmkc writes holds its marker ``.lswmkc-output`` (:mod:`.ownership`).
``overwrite`` replaces only a directory holding it (or an old kernel store, known by its
``zarr.json``), or an empty one, never a file, the working or home directory, ``/``, an
ancestor of either, a directory holding an input, or one in use (:func:`check_replaceable`);
a kernel store holding anything but its own members is never replaced
(:func:`store_foreign_entries`). A file named by the user is replaced only when it carries
lswmkc's signature (:func:`check_file_output`), never a directory, a link or an input. No
output is written inside an input or a kernel store (:func:`refuse_output_location`), and
the location is checked for writability before any work (:func:`check_writable`). Each
refusal is an exception that names the path and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import Param, with_message
from ._lockfile import LOCK_NAME, ForeignOutputError, check_not_in_use
from .ownership import MARKER, is_empty_dir, marker_info

__all__ = ["OutputNotWritableError", "ProtectedOutputError", "check_existing", "check_file_output", "check_new_output",
           "check_replaceable", "check_writable", "enclosing_store", "protected_reason", "refuse_output_location",
           "store_foreign_entries"]


class ProtectedOutputError(ValueError):
    """The output is a directory that is never replaced (working/home directory, ``/`` ...)."""


class OutputNotWritableError(PermissionError):
    """The output's location cannot be written (read-only, full, no permission)."""


def protected_reason(path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = ()) -> str | None:
    """Why ``path`` must never be replaced, or None.

    The working directory, the home directory, ``/``, an ancestor of the working or
    home directory, and a directory holding one of ``inputs``.
    """
    p = Path(path).expanduser().resolve()
    cwd = Path.cwd().resolve()
    home = Path.home().resolve()
    if p == Path(p.anchor):
        return "it is the root directory"
    if p == cwd:
        return "it is the working directory"
    if p == home:
        return "it is the home directory"
    if cwd.is_relative_to(p):
        return f"it holds the working directory {cwd}"
    if home.is_relative_to(p):
        return f"it holds the home directory {home}"
    for inp, q in _local_inputs(inputs):
        if q.is_relative_to(p):
            return f"it holds the input {inp}"
        if p.is_relative_to(q):
            return f"it is inside the input {inp}"
    return None


def _resolved(path):
    """``path`` resolved (links, ``..``, ``~``), or None where it cannot be."""
    try:
        return Path(path).expanduser().resolve()
    except (TypeError, OSError, RuntimeError):
        return None


def _local_inputs(inputs):
    """``(input, resolved path)`` of each input on this file system (not None, not a URL)."""
    for inp in inputs:
        q = None if inp is None or (isinstance(inp, str) and "://" in inp) else _resolved(inp)
        if q is not None:
            yield inp, q


def enclosing_store(path: str | os.PathLike[str]) -> Path | None:
    """The kernel store that ``path`` lies strictly inside, or None.

    Parameters
    ----------
    path : str or Path
        Any path (need not exist); symbolic links and relative parts are resolved.

    Returns
    -------
    Path or None
        The nearest resolved ancestor of ``path`` that :func:`marker_info` calls a
        kernel store (``path`` itself does not count).
    """
    p = _resolved(path)
    for parent in p.parents if p is not None else ():
        if (marker_info(parent) or {}).get("kind") == "kernel-store":
            return parent
    return None


def refuse_output_location(
    path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = (), holds_inputs: bool = False
) -> None:
    """Refuse to write ``path`` where it would mix with an input; nothing is written.

    Symbolic links and relative paths are resolved first (``st.zarr/../st.zarr/x``).

    Parameters
    ----------
    path : str or Path
        The output (file or directory) to be written.
    inputs : sequence of paths
        The command's inputs (URLs and None are skipped).
    holds_inputs : bool
        Also refuse an output directory that holds one of ``inputs`` (a run directory
        written into over time, which a later ``--overwrite`` replaces whole).

    Raises
    ------
    ProtectedOutputError
        ``path`` is one of ``inputs``, lies inside one, lies inside a kernel store
        (:func:`enclosing_store`), or (``holds_inputs``) holds one; the message names
        the output and the input or store.
    """
    p = _resolved(path)
    if p is None:
        return
    pairs = list(_local_inputs(inputs))
    reason = next((f"it is {'the' if p == q else 'inside the'} input {inp}" for inp, q in pairs if p.is_relative_to(q)),
                  None)
    store = enclosing_store(p) if reason is None else None
    if store is not None:
        reason = (f"it is inside the kernel store {store} (a later `lswmkc prepare ... {store.name} --overwrite` "
                  "would delete it)")
    if reason is None and holds_inputs:
        reason = next((f"it holds the input {inp} (a later --overwrite would delete it)" for inp, q in pairs
                       if q.is_relative_to(p)), None)
    if reason:
        raise ProtectedOutputError(f"refusing to write output {path}: {reason}; choose an output outside it")


#: Members of a kernel store (zarr v3, :func:`lswmkc_dask.io.store.prepare`): top level,
#: the arrays ``kernels`` and ``statistics``, and their chunks ``kernels/c/I/J/K`` (digits only).
_STORE_TOP = {"zarr.json": "file", "kernels": "dir", "statistics": "dir", MARKER: "file", LOCK_NAME: "file"}
_STORE_ARRAY = {"zarr.json": "file", "c": "dir"}


def _foreign_in(directory, allowed, rel, out, limit):
    """Append to ``out`` the entries of ``directory`` not in ``allowed`` ({name: "file"/"dir"/"digits"})."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        if len(out) >= limit:
            return
        kind = allowed.get(e.name, "digits" if "*" in allowed and e.name.isdigit() else None)
        if (e.is_symlink() or kind is None or (kind == "file" and not e.is_file(follow_symlinks=False))
                or (kind == "dir" and not e.is_dir(follow_symlinks=False))):
            out.append(f"{rel}{e.name}")
        elif kind == "dir" or (kind == "digits" and e.is_dir(follow_symlinks=False)):
            sub = {"kernels": _STORE_ARRAY, "statistics": _STORE_ARRAY, "c": {"*": "digits"}}.get(e.name, {"*": "digits"})
            _foreign_in(e.path, sub, f"{rel}{e.name}/", out, limit)


def store_foreign_entries(path: str | os.PathLike[str], limit: int = 20) -> list[str]:
    """Entries of the kernel store ``path`` that are not a kernel store's own members.

    A store holds ``zarr.json``, the marker, the lock file, and the arrays ``kernels`` and
    ``statistics`` (``zarr.json`` and chunks ``c/<digits>/...`` each). Anything else (a
    sweep written into it, a user's file, a link anywhere) would be deleted with it.

    Parameters
    ----------
    path : str or Path
        A kernel store (directory).
    limit : int
        Stop after this many.

    Returns
    -------
    list of str
        Paths relative to the store, sorted per directory (empty if none).
    """
    out: list[str] = []
    _foreign_in(Path(path), _STORE_TOP, "", out, limit)
    return out


#: ``overwrite=True or --overwrite`` (``--overwrite`` on the command line).
OVERWRITE = Param("overwrite", True, hint="or")


def not_ours_error(path, prefix="", was="was"):
    """ForeignOutputError: ``path`` is not an output of lswmkc (``was``: "already exists and was")."""
    return with_message(
        ForeignOutputError, "{}{} {} not written by lswmkc (no {} marker); remove it yourself or choose another "
        "output ({} replaces only directories lswmkc wrote)", prefix, path, was, MARKER, Param("overwrite", True))


def check_replaceable(path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Raise unless ``overwrite`` may replace the existing ``path``.

    Raises
    ------
    ProtectedOutputError
        ``path`` is the working or home directory, ``/``, an ancestor of either, or
        holds one of ``inputs``.
    ForeignOutputError
        ``path`` is a file, or a non-empty directory without the lswmkc marker, or a
        kernel store holding entries that are not its own (named in the message,
        :func:`store_foreign_entries`).
    OutputInUseError
        A sweep is running in ``path`` (its lock is held).
    """
    path = Path(path)
    reason = protected_reason(path, inputs)
    if reason:
        raise ProtectedOutputError(f"refusing to replace output {path}: {reason}; choose another output")
    if not path.is_dir():
        raise ForeignOutputError(
            f"output {path} is a file, not a directory written by lswmkc; remove it yourself or choose another output"
        )
    info = marker_info(path)
    if not is_empty_dir(path) and info is None:
        raise not_ours_error(path, prefix="output ")
    if (info or {}).get("kind") == "kernel-store":
        foreign = store_foreign_entries(path)
        if foreign:
            raise ForeignOutputError(
                f"refusing to replace the kernel store {path}: it holds {', '.join(foreign)}, which lswmkc did not "
                "write as part of the store (replacing it would delete them); move them out or choose another output"
            )
    check_not_in_use(path)


def check_new_output(
    path: str | os.PathLike[str],
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> None:
    """Up-front check of the output of a fit or a kernel store (nothing written yet).

    Parameters
    ----------
    path : str or Path
        The output directory to be written (atomically, at the end).
    overwrite : bool
    inputs : sequence of paths
        Inputs of the run: an output holding one of them is never replaced.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False (the message says whether
        ``overwrite`` would be allowed to replace it).
    ProtectedOutputError, ForeignOutputError, OutputInUseError
        See :func:`check_replaceable`; ForeignOutputError also for a dangling symbolic link.
    OutputNotWritableError
        See :func:`check_writable`.
    """
    path = Path(path)
    refuse_output_location(path, inputs)
    if os.path.islink(path) and not path.exists():
        raise ForeignOutputError(f"output {path} is a dangling symbolic link (to {os.readlink(path)}, which does not "
                                 "exist); lswmkc does not replace links: remove it or choose another output")
    if os.path.lexists(path):
        if not overwrite:
            if path.is_dir() and (is_empty_dir(path) or marker_info(path) is not None):
                raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
            if path.is_dir():
                raise not_ours_error(path, prefix="output ", was="already exists and was")
            raise ForeignOutputError(f"output {path} already exists and is a file; choose another output")
        check_replaceable(path, inputs)
    check_writable(path)


def file_refusal(path, owned=None):
    """Why the existing ``path`` may not be replaced by a file output, or None."""
    if os.path.islink(path):
        return (f"output {path} is a symbolic link; lswmkc does not replace links or what they point to: "
                "choose another output")
    if path.is_dir():
        return (f"output {path} is a directory, and this output is a file; lswmkc never replaces a directory "
                "in its place: choose another output")
    if not path.is_file():
        return f"output {path} exists and is not a regular file; choose another output"
    if owned is not None and not owned(path):
        return (f"output {path} exists and was not written by lswmkc (it has no lswmkc-dask signature); "
                "lswmkc replaces only files it wrote: remove it yourself or choose another output")
    return None


def check_existing(path: Path, overwrite: bool, kind: str | None = None, inputs: Sequence[str | os.PathLike[str]] = (),
                   owned: Callable[..., bool] | None = None) -> None:
    """Raise unless an existing ``path`` may be replaced by a file output (``kind`` None,
    :func:`file_refusal`) or by an lswmkc directory of ``kind`` (:func:`check_replaceable`);
    nothing to do if it does not exist.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False, or (a ``ForeignOutputError``) it
        may not be replaced whatever ``overwrite`` says.
    ProtectedOutputError, OutputInUseError
        See :func:`check_replaceable`.
    """
    if not os.path.lexists(path):
        return
    refusal = file_refusal(path, owned) if kind is None else None
    if refusal:
        raise ForeignOutputError(refusal)
    if not overwrite:
        raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    if kind is not None:
        check_replaceable(path, inputs)


def check_file_output(
    path: str | os.PathLike[str],
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike[str]] = (),
    owned: Callable[..., bool] | None = None,
) -> None:
    """Up-front check of a file output named by the user (nothing written yet).

    A file is replaced only with ``overwrite`` and only if ``owned(path)`` says this
    package wrote it; a directory, a symbolic link, an input or anything inside an
    input never. The location must be writable.

    Parameters
    ----------
    path : str or Path
        The file to be written (atomically, at the end).
    overwrite : bool
        Replace an existing file that this package wrote.
    inputs : sequence of paths
        Inputs of the command: ``path`` may be neither one of them nor inside one.
    owned : callable, optional
        ``owned(path) -> bool`` (:func:`.ownership.json_is_ours`, :func:`.ownership.png_is_ours`).
        None: any regular file counts as the package's (inside its own output directories).

    Raises
    ------
    ProtectedOutputError
        ``path`` is an input or inside one.
    ForeignOutputError
        ``path`` is a directory, a link, or a file this package did not write.
    FileExistsError
        ``path`` is this package's file and ``overwrite`` is False.
    OutputNotWritableError
        See :func:`check_writable`.
    """
    path = Path(path)
    refuse_output_location(path, inputs)
    check_existing(path, overwrite, None, inputs, owned)
    check_writable(path)


#: Bytes written (and synced) by the writability probe: a full file system refuses them.
PROBE_BYTES = 64 * 1024
_WHY_NOT_WRITABLE = {errno.ENOSPC: "no space left on device", errno.EROFS: "read-only file system",
                     errno.EACCES: "permission denied", errno.EPERM: "permission denied"}


def check_writable(path: str | os.PathLike[str], inside: bool = False) -> None:
    """Raise unless files can be written where ``path`` will be created.

    Creates, fills with :data:`PROBE_BYTES` bytes, syncs and removes a temporary file
    in the nearest existing directory of ``path``'s parent (``inside``: in ``path``
    itself, when the run writes into an existing directory), so that a read-only or
    full file system, or a missing permission, is found before any work.

    Raises
    ------
    OutputNotWritableError
    """
    path = Path(path)
    base = path if inside and path.is_dir() else Path(os.path.abspath(path.parent))
    while not base.exists():
        base = base.parent
    probe = base / f".lswmkc-probe-{uuid.uuid4().hex[:8]}"
    fd = None
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        block = b"\0" * PROBE_BYTES
        done = 0
        while done < len(block):
            done += os.write(fd, block[done:])
        os.fsync(fd)
    except OSError as exc:
        why = _WHY_NOT_WRITABLE.get(exc.errno or 0) or exc.strerror or str(exc)
        raise OutputNotWritableError(f"cannot write output {path}: {why} at {base}") from None
    finally:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()

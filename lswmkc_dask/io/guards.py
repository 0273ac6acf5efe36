"""Where an output may be written, and what it may replace (:func:`check_file_output`).

The rules and their reasons are in docs/user-guide/refusals.md ("Outputs"): no output
inside an input or a kernel store, an existing output replaced only when lswmkc wrote it,
never a protected directory. Each refusal names the path and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import OutputNotWritableError, Param, ProtectedOutputError, with_message
from .ownership import LOCK_NAME, MARKER, ForeignOutputError, check_not_in_use, is_empty_dir, marker_info


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


def _protected_reason(path, inputs):
    """Why ``path`` must never be replaced (``/``, the working or home directory or an
    ancestor of either, a directory holding one of ``inputs`` or inside one), or None.
    """
    p = Path(path).expanduser().resolve()
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    for what, q in (("root directory", Path(p.anchor)), ("working directory", cwd), ("home directory", home)):
        if p == q:
            return f"it is the {what}"
    for what, q in (("working directory", cwd), ("home directory", home)):
        if q.is_relative_to(p):
            return f"it holds the {what} {q}"
    for inp, q in _local_inputs(inputs):
        if q.is_relative_to(p):
            return f"it holds the input {inp}"
        if p.is_relative_to(q):
            return f"it is inside the input {inp}"
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
        ``path`` is one of ``inputs``, lies inside one or inside a kernel store, or
        (``holds_inputs``) holds one; the message names the input or store.
    """
    p = _resolved(path)
    if p is None:
        return
    pairs = list(_local_inputs(inputs))
    reason = next((f"it is {'the' if p == q else 'inside the'} input {inp}" for inp, q in pairs if p.is_relative_to(q)),
                  None)
    store = None if reason else next((a for a in p.parents if (marker_info(a) or {}).get("kind") == "kernel-store"),
                                     None)
    if store is not None:
        reason = (f"it is inside the kernel store {store} (a later `lswmkc prepare ... {store.name} --overwrite` "
                  "would delete it)")
    if reason is None and holds_inputs:
        reason = next((f"it holds the input {inp} (a later --overwrite would delete it)" for inp, q in pairs
                       if q.is_relative_to(p)), None)
    if reason:
        raise ProtectedOutputError(f"refusing to write output {path}: {reason}; choose an output outside it")


#: Members of a kernel store (zarr v3, :func:`lswmkc_dask.io.store.prepare`), relative to it: the arrays
#: ``kernels`` and ``statistics`` with their chunks ``c/I/J/K`` (digits only); the files at the top.
_STORE_DIRS = re.compile(r"(?:kernels|statistics|train_features_\d+|feature_moments_\d+)(?:/c(?:/\d+)*)?")
_STORE_FILES = re.compile(rf"zarr\.json|{re.escape(MARKER)}|{re.escape(LOCK_NAME)}|(?:kernels|statistics|train_features_\d+|feature_moments_\d+)/(?:zarr\.json|c(?:/\d+)+)")


def _foreign_entries(store, limit=20):
    """The entries of the kernel store ``store`` that are not its own members (a link anywhere is), sorted."""
    out = []
    for root, dirs, files in os.walk(store):
        rel = Path(root).relative_to(store)
        for name in dirs + files:
            p, member = os.path.join(root, name), (rel / name).as_posix()
            if os.path.islink(p) or not (_STORE_DIRS if os.path.isdir(p) else _STORE_FILES).fullmatch(member):
                out.append(member)
        dirs[:] = [d for d in dirs if (rel / d).as_posix() not in out]
        if len(out) >= limit:
            break
    return sorted(out)[:limit]


#: ``overwrite=True or --overwrite`` (``--overwrite`` on the command line).
OVERWRITE = Param("overwrite", True, hint="or")


def not_ours_error(path, prefix="", was="was"):
    """ForeignOutputError: ``path`` is not an output of lswmkc (``was``: "already exists and was")."""
    return with_message(
        ForeignOutputError, "{}{} {} not written by lswmkc (no {} marker); remove it yourself or choose another "
        "output ({} replaces only directories lswmkc wrote)", prefix, path, was, MARKER, Param("overwrite", True))


def check_replaceable(
    path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = (), overwrite: bool = True
) -> None:
    """Raise unless the existing ``path`` is a free directory of lswmkc that may be
    replaced (``overwrite``) or resumed in.

    Parameters
    ----------
    path : str or Path
        An existing output directory.
    inputs : sequence of paths
        Inputs of the run: a directory holding one is never replaced.
    overwrite : bool
        ``path`` is to be replaced.

    Raises
    ------
    ProtectedOutputError
        ``overwrite``, and ``path`` is the working or home directory, ``/``, an ancestor
        of either, or holds one of ``inputs``.
    ForeignOutputError
        ``path`` is a file, a non-empty directory without the lswmkc marker, or
        (``overwrite``) a kernel store holding entries that are not its own (named).
    OutputInUseError
        An lswmkc process runs in ``path``.
    """
    path = Path(path)
    reason = _protected_reason(path, inputs) if overwrite else None
    if reason:
        raise ProtectedOutputError(f"refusing to replace output {path}: {reason}; choose another output")
    if not path.is_dir():
        raise ForeignOutputError(
            f"output {path} is a file, not a directory written by lswmkc; remove it yourself or choose another output"
        )
    info = marker_info(path)
    if not is_empty_dir(path) and info is None:
        raise not_ours_error(path, prefix="output ")
    foreign = _foreign_entries(path) if overwrite and (info or {}).get("kind") == "kernel-store" else []
    if foreign:
        raise ForeignOutputError(
            f"refusing to replace the kernel store {path}: it holds {', '.join(foreign)}, which lswmkc did not "
            "write as part of the store (replacing it would delete them); move them out or choose another output"
        )
    check_not_in_use(path)


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


def check_file_output(
    path: str | os.PathLike[str],
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike[str]] = (),
    owned: Callable[..., bool] | None = None,
    directory: bool = False,
    writable: bool = True,
) -> None:
    """Check an output before it is written: where it lies, what it would replace, and
    that its location is writable.

    Parameters
    ----------
    path : str or Path
        The file (or, ``directory``, the lswmkc directory) to be written.
    overwrite : bool
        Replace an existing file (only if ``owned`` says lswmkc wrote it) or an existing
        directory (as :func:`check_replaceable` allows).
    inputs : sequence of paths
        Inputs: ``path`` may be neither one of them nor inside one (nor hold one, to be replaced).
    owned : callable, optional
        Files: ``owned(path) -> bool`` (:func:`.ownership.json_is_ours`, ...); None: any regular file is ours.
    directory : bool
        The output is an lswmkc directory.
    writable : bool
        Probe the location (:func:`check_writable`).

    Raises
    ------
    FileExistsError
        ``path`` is lswmkc's and ``overwrite`` is False, or (a ``ForeignOutputError``)
        it is not, or is a link or (a file output) a directory, whatever ``overwrite`` says.
    ProtectedOutputError, OutputInUseError
        See :func:`refuse_output_location` and :func:`check_replaceable`.
    OutputNotWritableError
        See :func:`check_writable`.
    """
    path = Path(path)
    refuse_output_location(path, inputs)
    if os.path.lexists(path):
        _check_existing(path, overwrite, directory, inputs, owned)
    if writable:
        check_writable(path)


def _check_existing(path, overwrite, directory, inputs, owned):
    """Raise unless the existing ``path`` may be replaced (see :func:`check_file_output`)."""
    refusal = None if directory else file_refusal(path, owned)
    if directory and os.path.islink(path) and not path.exists():
        refusal = (f"output {path} is a dangling symbolic link (to {os.readlink(path)}, which does not exist); "
                   "lswmkc does not replace links: remove it or choose another output")
    elif directory and not overwrite and not is_empty_dir(path) and marker_info(path) is None:
        if path.is_dir():
            raise not_ours_error(path, prefix="output ", was="already exists and was")
        refusal = f"output {path} already exists and is a file; choose another output"
    if refusal:
        raise ForeignOutputError(refusal)
    if not overwrite:
        raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    if directory:
        check_replaceable(path, inputs)


def check_new_output(
    path: str | os.PathLike[str], overwrite: bool = False, inputs: Sequence[str | os.PathLike[str]] = ()
) -> None:
    """:func:`check_file_output` (parameters, errors) of the output directory of a fit or a kernel store."""
    check_file_output(path, overwrite, inputs, directory=True)


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

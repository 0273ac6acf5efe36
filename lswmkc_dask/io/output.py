"""Every output of lswmkc, checked and written through one door: :func:`check_output` and :func:`atomic_path`.

The rules and their reasons are in docs/user-guide/refusals.md ("Outputs"). A file output
(a model, a table, a JSON, a PNG) that exists is replaced only with ``overwrite``, and only
when it is a regular file that is not an input; never a directory, a link or a special file.
An output directory (a fit, a kernel store, a sweep or a comparison) carries the marker
``.lswmkc-output``: an existing directory without it is never written into nor replaced.
Outputs are written under a temporary sibling ``.NAME.tmp-HEX8`` (``.NAME.old-HEX8`` for the
one replaced), synced, and renamed when complete; a writer holds a shared ``flock`` on their
directory, and the next writer removes what a killed one left when no live writer is there.
A run directory is locked while a run works in it (:class:`DirectoryLock`, ``.lswmkc.lock``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import shutil
import socket
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock, MarkerSoftFileLock, Timeout, lock_descriptor

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale temporaries are left in place
    fcntl = None  # type: ignore[assignment]

from .._version import __version__
from ..errors import (
    ForeignOutputError,
    OutputInUseError,
    OutputNotWritableError,
    Param,
    ProtectedOutputError,
    with_message,
)
from .integrity.files import file_kind

#: Name of the marker file in every output directory written by this package.
MARKER = ".lswmkc-output"
#: The lock file of a run directory.
LOCK_NAME = ".lswmkc.lock"
#: Kinds of output directory (the ``kind`` of the marker); sweeps and comparisons are resumed in place.
KINDS = ("fit", "sweep", "compare", "kernel-store", "plots")
RUN_KINDS = ("sweep", "compare")
_STORE_FORMAT_PREFIX = "lswmkc-kernel-store"
_HOST = socket.gethostname()
#: Opens of the marker or a lock file: never through a link, never blocked by a FIFO, not inherited.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
#: flock errors that mean "no flock on this file system" (not "held by another").
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
#: ``overwrite=True or --overwrite`` (``--overwrite`` on the command line).
OVERWRITE = Param("overwrite", True, hint="or")


def utc_now() -> str:
    """The current time in UTC as ISO 8601 with a ``Z``, to the second (every timestamp lswmkc writes)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def signature() -> str:
    """``lswmkc-dask VERSION``: the ``written_by`` of this package's JSON files and the ``Software`` of its PNGs."""
    return f"lswmkc-dask {__version__}"


# --- the marker of an output directory ---------------------------------------------------------

def write_marker(directory: str | os.PathLike[str], kind: str) -> None:
    """Write ``directory/.lswmkc-output`` (JSON ``{kind, version, created}``).

    Parameters
    ----------
    directory : str or Path
        An existing directory.
    kind : {"fit", "sweep", "compare", "kernel-store", "plots"}

    Raises
    ------
    ForeignOutputError
        The marker's name is taken by a symbolic link, a directory or a special file (never written through).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    check_regular_entry(directory, MARKER, "the output marker of lswmkc")
    try:
        fd = os.open(Path(directory) / MARKER, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o644)
    except OSError:
        check_regular_entry(directory, MARKER, "the output marker of lswmkc")  # a link or FIFO put there meanwhile
        raise
    with open(fd, "w") as marker:
        marker.write(json.dumps({"kind": kind, "version": __version__, "created": utc_now()}) + "\n")


def _read_json(path):
    """The JSON in the regular file ``path``, None where missing or unreadable."""
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def marker_info(path: str | os.PathLike[str]) -> dict | None:
    """What lswmkc wrote at ``path``: the marker's JSON (``kind``, ``version``, ``created``), or None.

    A kernel store written before the marker existed (a ``zarr.json`` whose attributes'
    ``format`` starts with ``lswmkc-kernel-store``) gives ``{"kind": "kernel-store", "format": ...}``.
    """
    path = Path(path)
    info = _read_json(path / MARKER)  # (None for both where ``path`` is not a directory)
    if isinstance(info, dict) and info.get("kind") in KINDS:
        return info
    zmeta = _read_json(path / "zarr.json")
    attributes = zmeta.get("attributes") if isinstance(zmeta, dict) else None
    fmt = attributes.get("format") if isinstance(attributes, dict) else None
    if isinstance(fmt, str) and fmt.startswith(_STORE_FORMAT_PREFIX):
        return {"kind": "kernel-store", "format": fmt}
    return None


def is_empty_dir(path: str | os.PathLike[str]) -> bool:
    """An existing directory holding nothing but lswmkc's marker and lock files (regular files, not links)."""
    path = Path(path)
    return (path.is_dir() and not path.is_symlink()
            and all(n in (MARKER, LOCK_NAME) and (path / n).is_file() and not (path / n).is_symlink() for n in os.listdir(path)))


def check_regular_entry(
    directory: str | os.PathLike[str], name: str = LOCK_NAME, kind: str = "a lock file of lswmkc",
    st: os.stat_result | None = None,
) -> None:
    """Refuse ``directory/name`` (an entry lswmkc writes: its lock, its marker, a file output) when it
    exists and is not a regular file; it is left as it is.

    ``st``: what was opened there (``os.fstat``), judged in place of what the name holds now.

    Raises
    ------
    ForeignOutputError
        The entry is a symbolic link (its target named), a directory or a special file.
    """
    path = Path(directory) / name
    try:
        st = st or os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISREG(st.st_mode):
        return
    what = f"a symbolic link (to {os.readlink(path)})" if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)
    raise ForeignOutputError(f"{path} is {what}, not {kind}; lswmkc never writes through, replaces or removes it: "
                             "remove it yourself (if you did not put it there, check who did) or choose another output")


# --- where an output may go ----------------------------------------------------------------------

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


def refuse_output_location(
    path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = (), holds_inputs: bool = False
) -> None:
    """Refuse to write ``path`` (links and ``..`` resolved) where it would mix with an input.

    Parameters
    ----------
    path : str or Path
    inputs : sequence of paths
        The command's inputs (URLs and None are skipped).
    holds_inputs : bool
        Also refuse a directory that holds one of ``inputs`` (a run directory: a later
        ``--overwrite`` would delete the input with it).

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
    reasons = itertools.chain(  # (lazily: the first that holds)
        (f"it is {'the' if p == q else 'inside the'} input {inp}" for inp, q in pairs if p.is_relative_to(q)),
        (f"it is inside the kernel store {a} (a later `lswmkc prepare ... {a.name} --overwrite` would delete it)"
         for a in p.parents if (marker_info(a) or {}).get("kind") == "kernel-store"),
        (f"it holds the input {inp} (a later --overwrite would delete it)" for inp, q in pairs
         if holds_inputs and q.is_relative_to(p)))
    reason = next(reasons, None)
    if reason:
        raise ProtectedOutputError(f"refusing to write output {path}: {reason}; choose an output outside it")


def _protected_reason(path, inputs):
    """Why the directory ``path`` must never be replaced (``/``, the working or home directory or
    an ancestor of either, a directory holding one of ``inputs``), or None; one inside an input
    is refused before (:func:`refuse_output_location`).
    """
    p = Path(path).expanduser().resolve()
    places = (("working directory", Path.cwd().resolve()), ("home directory", Path.home().resolve()))
    for what, q in (("root directory", Path(p.anchor)), *places):
        if p == q:
            return f"it is the {what}"
    for what, q in places:
        if q.is_relative_to(p):
            return f"it holds the {what} {q}"
    for inp, q in _local_inputs(inputs):
        if q.is_relative_to(p):
            return f"it holds the input {inp}"
    return None


#: Members of a kernel store (zarr v3), relative to it: its arrays with their chunks ``c/I/J/K``; the top files.
_STORE_ARRAYS = r"(?:kernels|statistics|train_features_\d+|feature_moments_\d+)"
_STORE_DIRS = re.compile(rf"{_STORE_ARRAYS}(?:/c(?:/\d+)*)?")
_STORE_FILES = re.compile(rf"zarr\.json|{re.escape(MARKER)}|{re.escape(LOCK_NAME)}|{_STORE_ARRAYS}/(?:zarr\.json|c(?:/\d+)+)")


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


def not_ours_error(path: str | os.PathLike[str], was: str = "was") -> ForeignOutputError:
    """ForeignOutputError: the directory ``path`` is not an output of lswmkc (``was``: "already exists and was")."""
    return with_message(
        ForeignOutputError, "output {} {} not written by lswmkc (no {} marker); remove it yourself or choose another "
        "output ({} replaces only directories lswmkc wrote)", path, was, MARKER, Param("overwrite", True))


def check_replaceable(
    path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = (), overwrite: bool = True
) -> None:
    """Raise unless the existing ``path`` is a free directory of lswmkc that may be replaced (``overwrite``) or resumed in.

    Called by :func:`check_output` once ``path`` passed :func:`refuse_output_location` and
    :func:`check_regular_entry` (its lock and marker).

    Raises
    ------
    ProtectedOutputError
        ``overwrite``, and ``path`` is the working or home directory, ``/``, an ancestor
        of either, or holds one of ``inputs``.
    ForeignOutputError
        ``path`` is a file, a non-empty directory without the marker, or (``overwrite``) a
        kernel store holding entries that are not its own (named).
    OutputInUseError
        An lswmkc process runs in ``path`` (:func:`lock_holder`).
    """
    path = Path(path)
    reason = _protected_reason(path, inputs) if overwrite else None
    if reason:
        raise ProtectedOutputError(f"refusing to replace output {path}: {reason}; choose another output")
    if not path.is_dir():
        raise ForeignOutputError(f"output {path} is a file, not a directory written by lswmkc; remove it yourself or "
                                 "choose another output")
    info = marker_info(path)
    if not is_empty_dir(path) and info is None:
        raise not_ours_error(path)
    foreign = _foreign_entries(path) if overwrite and (info or {}).get("kind") == "kernel-store" else []
    if foreign:
        raise ForeignOutputError(f"refusing to replace the kernel store {path}: it holds {', '.join(foreign)}, which "
                                 "lswmkc did not write as part of the store (replacing it would delete them); move "
                                 "them out or choose another output")
    holder = lock_holder(path)
    if holder is not None:
        raise _in_use(path, holder, path / LOCK_NAME if holder.get("remote") else None)


def check_output(
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    kind: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    writable: bool = True,
) -> Path:
    """Check an output before it is written: where it lies, what it would replace, that it can be written.

    Parameters
    ----------
    path : str or Path
        A file (``kind`` None) or an lswmkc output directory.
    overwrite : bool
        Replace an existing regular file, or an existing directory of lswmkc.
    kind : {None, "fit", "kernel-store", "sweep", "compare", "plots"}
        The output directory's kind; a sweep or compare directory that exists is resumed
        without ``overwrite``. A directory output through a symbolic link is its target.
    inputs : sequence of paths
        The command's inputs: never an output, never holding one, never replaced.
    writable : bool
        Probe the location (:func:`check_writable`).

    Returns
    -------
    pathlib.Path
        The output to write (a directory's link resolved).

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False (a fit or store directory, a file);
        as a ``ForeignOutputError``, whatever ``overwrite`` says: a directory without the
        marker, a link, a directory or special file in place of a file output.
    ProtectedOutputError
        Inside an input or a kernel store, or a directory never replaced (:func:`check_replaceable`).
    OutputInUseError
        An lswmkc process runs in the directory.
    OutputNotWritableError
        See :func:`check_writable`.
    """
    path = Path(path)
    if kind is not None and os.path.islink(path):  # a directory output through a link: its target
        real = Path(os.path.realpath(path))
        if not real.exists():
            raise ForeignOutputError(f"output {path} is a dangling symbolic link (to {os.readlink(path)}, which does "
                                     "not exist); lswmkc does not replace links: remove it or choose another output")
        path = real
    refuse_output_location(path, inputs, holds_inputs=kind in RUN_KINDS)
    exists = os.path.lexists(path)
    if kind is None:
        check_regular_entry(path.parent, path.name, "a regular file (this output is a file)")
    else:
        check_regular_entry(path)
        check_regular_entry(path, MARKER, "the output marker of lswmkc")
    if exists and not overwrite and kind not in RUN_KINDS:
        if kind is not None and path.is_dir() and not is_empty_dir(path) and marker_info(path) is None:
            raise not_ours_error(path, was="already exists and was")
        if kind is not None and not path.is_dir():
            raise ForeignOutputError(f"output {path} already exists and is a file; choose another output")
        raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    if exists and kind is not None:
        check_replaceable(path, inputs, overwrite)
    if writable and exists and kind in RUN_KINDS:
        check_writable(path, inside=True)
    if writable and (not exists or overwrite):
        check_writable(path)  # (a replacement is built next to it)
    return path


#: Bytes written (and synced) by the writability probe: a full file system refuses them.
PROBE_BYTES = 64 * 1024
_WHY_NOT_WRITABLE = {errno.ENOSPC: "no space left on device", errno.EROFS: "read-only file system",
                     errno.EACCES: "permission denied", errno.EPERM: "permission denied"}


def check_writable(path: str | os.PathLike[str], inside: bool = False) -> None:
    """Raise unless files can be written where ``path`` will be created.

    Writes, syncs and removes :data:`PROBE_BYTES` bytes in the nearest existing directory of ``path``'s
    parent (``inside``: in ``path``): a read-only or full file system, or no permission, is found before any work.

    Raises
    ------
    OutputNotWritableError
    """
    path = Path(path)
    base = path if inside and path.is_dir() else Path(os.path.abspath(path.parent))
    while not base.exists():
        base = base.parent
    try:
        with _probe(base, os.O_WRONLY) as fd:
            with open(fd, "wb", closefd=False) as probe:  # (a buffered write writes it all, or raises)
                probe.write(b"\0" * PROBE_BYTES)
            os.fsync(fd)
    except OSError as exc:
        why = _WHY_NOT_WRITABLE.get(exc.errno or 0) or exc.strerror or str(exc)
        raise OutputNotWritableError(f"cannot write output {path}: {why} at {base}") from None


@contextlib.contextmanager
def _probe(directory, flags):
    """A scratch file ``.lswmkc-probe-HEX8`` made in ``directory``, open (``flags``) as the descriptor yielded; removed after."""
    probe = Path(directory) / f".lswmkc-probe-{uuid.uuid4().hex[:8]}"
    fd = os.open(probe, flags | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        yield fd
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()


# --- atomic writes -------------------------------------------------------------------------------

def _fsync(path):
    """Flush ``path`` (a file, or every file of a directory) to disk; quiet where it cannot be."""
    for p in [path] if not path.is_dir() else [q for q in path.rglob("*") if q.is_file() and not q.is_symlink()]:
        with contextlib.suppress(OSError):
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    kind: str | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; sync it and rename it to ``path`` on success.

    Nothing is left at ``path`` (nor the temporary) if the body raises. ``path`` is checked
    before (:func:`check_output`) and again at the swap. With ``kind`` the output is an
    lswmkc directory: the marker is written into it, and a symbolic link is followed (the
    link stays, its target is replaced).

    Parameters
    ----------
    path : str or Path
        Final file or directory name.
    overwrite, kind, inputs
        As :func:`check_output`.

    Raises
    ------
    FileExistsError, ForeignOutputError, ProtectedOutputError, OutputInUseError
        As :func:`check_output`.
    """
    path = check_output(path, overwrite=overwrite, kind=kind, inputs=inputs, writable=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    with _hold_directory(path.parent, path.name):  # exclusive: remove what killed writers left; then shared
        try:
            yield tmp
            if kind is not None and tmp.is_dir():
                write_marker(tmp, kind)
            _fsync(tmp)
            if os.path.lexists(path):
                if not overwrite:
                    raise FileExistsError(f"output {path} appeared while writing; left it untouched")
                check_output(path, overwrite=True, kind=kind, inputs=inputs, writable=False)
                trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
                os.replace(path, trash)
                os.replace(tmp, path)
                remove(trash)
            else:
                os.replace(tmp, path)
        finally:
            remove(tmp)


@contextlib.contextmanager
def _hold_directory(directory, name):
    """Hold the writers' shared flock on ``directory`` (none where it cannot be taken), after
    removing the temporaries of output ``name`` if no live writer is at work there.
    """
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError):
            if fcntl is not None:
                fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
                held.callback(os.close, fd)
                if lock_descriptor(fd, blocking=False):  # exclusive: no live writer in the directory
                    remove_leftovers(directory, re.compile(re.escape(f".{name}.") + "(?:tmp|old)-[0-9a-f]{8}"))
                fcntl.flock(fd, fcntl.LOCK_SH)  # converts the exclusive lock (filelock has no shared flock)
        yield


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
    """Remove what a killed process left in ``directory``: the entries whose whole names match
    ``pattern`` (and, with ``where``, for which ``where(path)`` is true), never a link.

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


# --- the lock of a run directory -------------------------------------------------------------------

def _holder_record(path, fd):
    """``{pid, host[, started]}`` of the lock file ``path`` open as ``fd``: lswmkc's JSON (written under
    flock), else filelock's owner record (a soft lock, where the file system has no flock); ``{}`` if neither.
    """
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        info = None
    if isinstance(info, dict):
        return info
    owner = MarkerSoftFileLock(path, thread_local=False).owner
    return {} if owner is None else {"pid": owner.pid, "host": owner.hostname}


def _in_use(directory, info, lock_path=None):
    """OutputInUseError ``"DIR is in use by PID N on HOST (started ...)"``; with ``lock_path`` (a lock
    written on another host, not checkable here) what to remove if it is stale.
    """
    pid, started = info.get("pid"), info.get("started")
    who = f"PID {pid} on {info.get('host')}" if pid is not None else "another lswmkc process"
    msg = f"{directory} is in use by {who}" + (f" (started {started})" if started else "")
    return OutputInUseError(msg + (f"; if that process has ended, remove {lock_path}" if lock_path else ""))


def lock_holder(directory: str | os.PathLike[str]) -> dict | None:
    """Who runs in ``directory``: its lock's ``{pid, host[, started]}``, or None if no one.

    A lock file whose flock is free was left by a dead process of this host: None. One
    written on another host counts as held (``remote`` set). Where the file system has no
    flock, the owner record's PID decides (alive on this host: held).
    """
    path = Path(directory) / LOCK_NAME
    try:  # (filelock cannot look at a lock without taking it)
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            free: bool | None = lock_descriptor(fd, blocking=False)  # dropped when fd is closed
        except OSError:  # no flock on this file system
            free = None
        info = _holder_record(path, fd)
    finally:
        os.close(fd)
    if free is False:
        return info
    if info.get("pid") is None:
        return None
    if info.get("host") != _HOST:
        return dict(info, remote=True)
    return info if free is None and psutil.pid_exists(info["pid"]) else None


def _has_flock(directory):
    """Whether the file system of ``directory`` has ``flock`` (tried on a scratch file, not the lock)."""
    with _probe(directory, os.O_RDWR) as fd:
        try:
            return lock_descriptor(fd, blocking=False) or True
        except OSError as exc:
            if exc.errno in _NO_FLOCK:
                return False
            raise


class DirectoryLock:
    """``DIR/.lswmkc.lock``, held by one process at a time.

    A :class:`filelock.FileLock` (``flock``, ``O_NOFOLLOW``) recording ``{pid, host,
    started}``; where the file system has no flock, a :class:`filelock.MarkerSoftFileLock`
    (filelock's owner record: PID, host, process start; a dead holder's marker on this host
    is taken over). A second process is told ``DIR is in use by PID N on HOST``. The lock of
    a dead process of this host is taken over; one written on another host is respected,
    and the message says which file to remove if it is stale.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.moved(directory)
        self._held: Any = None  # the filelock lock held
        self._written: Any = None  # os.stat_result of the lock file (held open, so its inode stays)

    def acquire(self) -> DirectoryLock:
        """Take the lock, or raise :class:`OutputInUseError` naming the holder.

        A link, FIFO or directory at the lock's name is refused with a
        :class:`ForeignOutputError` naming it; neither it nor its target is touched.
        """
        check_regular_entry(self.directory)
        soft = not _has_flock(self.directory)
        for _ in range(20):
            lock: Any = (MarkerSoftFileLock(self.path, mode=0o644, thread_local=False, blocking=False) if soft else
                         FileLock(self.path, mode=0o644, thread_local=False, blocking=False, on_acquired=self._claim))
            try:
                lock.acquire()
            except Timeout:
                holder = lock_holder(self.directory)
                if holder is None and not soft:  # its holder released (removed) it meanwhile
                    continue
                raise _in_use(self.directory, holder or {}) from None
            except OSError:
                check_regular_entry(self.directory)  # a link, FIFO or directory put there meanwhile: named
                raise
            self._written = os.lstat(self.path) if soft else self._written
            self._held = lock
            return self
        raise OutputInUseError(f"{self.directory} is in use (its lock {self.path} keeps changing)")

    def _claim(self, fd):
        """Once flocked (filelock's ``on_acquired``): refuse a lock of another host, write ours into ``fd``."""
        st = os.fstat(fd)
        check_regular_entry(self.directory, st=st)  # a FIFO put there between the check and the open
        info = _holder_record(self.path, fd)
        if info.get("pid") is not None and info.get("host") != _HOST:
            raise _in_use(self.directory, info, self.path)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": _HOST, "started": utc_now()}).encode(), 0)
        os.fsync(fd)
        self._written = st

    def moved(self, directory: str | os.PathLike[str]) -> None:
        """The (locked) directory is ``directory``, its lock file :attr:`path` in it (renamed: the lock moved with it)."""
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME

    def release(self) -> None:
        """Remove the lock file (if it is still ours) and drop the lock."""
        held, self._held = self._held, None
        if held is None:
            return
        try:  # removed while still held (filelock leaves it in place), never a link put in its place
            with contextlib.suppress(OSError):
                if os.path.samestat(self._written, os.lstat(self.path)):
                    os.unlink(self.path)
        finally:
            held.release()

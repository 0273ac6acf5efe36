"""What marks an output as lswmkc's, and the lock of a run directory.

An output directory holds the marker ``.lswmkc-output`` (:func:`write_marker`,
:func:`marker_info`); a JSON file carries ``"written_by": "lswmkc-dask ..."``
(:func:`json_is_ours`), a PNG a ``Software`` text chunk saying ``lswmkc-dask``
(:func:`png_is_ours`). A run directory's ``.lswmkc.lock`` (:class:`DirectoryLock`)
records its holder's PID, host and start time. This is the bottom of the output guards
(:mod:`.guards`, :mod:`.atomic`, :mod:`.locks`) and imports none of them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock, Timeout, lock_descriptor

from .._version import __version__
from ..errors import ForeignOutputError, OutputInUseError

#: Name of the marker file in every output directory written by this package.
MARKER = ".lswmkc-output"
#: The lock file of a run directory.
LOCK_NAME = ".lswmkc.lock"
#: Kinds of output directory (the ``kind`` of the marker).
KINDS = ("fit", "sweep", "compare", "kernel-store", "plots")
#: Files of this package that do not make a directory "foreign" (marker, run lock).
OWN_FILES = (MARKER, LOCK_NAME)
#: Prefix of :func:`signature`: how this package's files are recognised.
SIGNATURE = "lswmkc-dask"
_STORE_FORMAT_PREFIX = "lswmkc-kernel-store"
_HOST = socket.gethostname()
#: Opens of the marker or a lock file: never through a link, never blocked by a FIFO, not inherited.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
#: flock errors that mean "no flock on this file system" (not "held by another").
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def utc_now():
    """The current time in UTC as ISO 8601 with a ``Z``, to the second (every timestamp lswmkc writes)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def signature():
    """The ``written_by`` value of this package's JSON files and the ``Software`` of its PNGs."""
    return f"{SIGNATURE} {__version__}"


def json_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a JSON object file whose ``written_by`` names this package."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(16 * 2**20))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("written_by", "")).startswith(SIGNATURE)


def png_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a PNG file with a ``Software`` text chunk naming this package
    (read by Pillow, which comes with matplotlib, without decoding the image).

    Raises
    ------
    ModuleNotFoundError
        Pillow is not installed (with a message saying how to install it).
    """
    try:
        from PIL import Image
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"telling whether {path} is a PNG lswmkc wrote needs Pillow, which comes with "
                                  "matplotlib: pip install matplotlib (the 'plot' extra)", name="PIL") from exc
    try:
        with warnings.catch_warnings():  # a foreign PNG's size is no concern: its pixels are never decoded
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path, formats=["PNG"]) as image:
                software = image.info.get("Software")
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError):
        return False  # not a PNG, or a damaged one
    return isinstance(software, str) and software.startswith(SIGNATURE)


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
    text = json.dumps({"kind": kind, "version": __version__, "created": utc_now()}) + "\n"
    check_regular_entry(directory, MARKER, "the output marker")
    try:
        fd = os.open(Path(directory) / MARKER, os.O_WRONLY | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError:
        check_regular_entry(directory, MARKER, "the output marker")  # a link or FIFO put there meanwhile: named
        raise
    try:
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _read_json(path):
    """The JSON in the regular file ``path``, None where missing or unreadable."""
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def marker_info(path: str | os.PathLike[str]) -> dict | None:
    """What lswmkc wrote at ``path``: the marker's content, or None if not its output.

    A directory with a ``.lswmkc-output`` marker gives the marker's JSON (``kind``,
    ``version``, ``created``); a kernel store written before the marker existed (a
    ``zarr.json`` whose attributes' ``format`` starts with ``lswmkc-kernel-store``)
    gives ``{"kind": "kernel-store", "format": ...}``. Anything else gives None.
    """
    path = Path(path)
    if not path.is_dir():
        return None
    info = _read_json(path / MARKER)
    if isinstance(info, dict) and info.get("kind") in KINDS:
        return info
    zmeta = _read_json(path / "zarr.json")
    attributes = zmeta.get("attributes") if isinstance(zmeta, dict) else None
    fmt = attributes.get("format") if isinstance(attributes, dict) else None
    if isinstance(fmt, str) and fmt.startswith(_STORE_FORMAT_PREFIX):
        return {"kind": "kernel-store", "format": fmt}
    return None


def is_empty_dir(path):
    """An existing directory holding nothing but lswmkc's marker and lock files (regular files, not links)."""
    path = Path(path)
    return (path.is_dir() and not path.is_symlink()
            and all(n in OWN_FILES and (path / n).is_file() and not (path / n).is_symlink() for n in os.listdir(path)))


def _not_a_lock(path, what, kind="a lock file"):
    """The error for ``path``, which lswmkc writes itself, found to be ``what`` (a link ...)."""
    return ForeignOutputError(
        f"{path} is {what}, not {kind} of lswmkc; lswmkc never writes through or removes it: remove it yourself "
        "(if you did not put it there, check who did) or choose another output"
    )


def check_regular_entry(directory: str | os.PathLike[str], name: str = LOCK_NAME, kind: str = "a lock file") -> None:
    """Refuse ``directory/name`` (an entry lswmkc writes itself) when it exists and is not a regular file.

    Parameters
    ----------
    directory : str or Path
        A run directory (need not exist).
    name : str
        The entry's name (``.lswmkc.lock``, ``.lswmkc-output``).
    kind : str
        What lswmkc writes there, for the message.

    Raises
    ------
    ForeignOutputError
        The entry is a symbolic link (its target named), a directory or a special file;
        it is left as it is.
    """
    path = Path(directory) / name
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISLNK(st.st_mode):
        raise _not_a_lock(path, f"a symbolic link (to {os.readlink(path)})", kind)
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_lock(path, "a directory" if stat.S_ISDIR(st.st_mode) else "a special file", kind)


def _read_info(fd):
    """The ``{pid, host, started}`` of a lock file open as ``fd``, ``{}`` where unreadable."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def _pid_alive(pid):
    """Whether process ``pid`` exists on this host (True where that cannot be told)."""
    return not isinstance(pid, int) or psutil.pid_exists(pid)


def _in_use_message(directory, info, lock_path=None):
    """``"DIR is in use by PID N on HOST (started ...)"``; with ``lock_path`` (written on
    another host, so not checkable here) what to remove if it is stale.
    """
    pid, started = info.get("pid"), info.get("started")
    who = f"PID {pid} on {info.get('host')}" if pid is not None else "another lswmkc process"
    msg = f"{directory} is in use by {who}" + (f" (started {started})" if started else "")
    return msg + (f"; if that process has ended, remove {lock_path}" if lock_path is not None else "")


def lock_holder(directory: str | os.PathLike[str]) -> dict | None:
    """Who runs in ``directory``: its lock's ``{pid, host, started}``, or None if no one.

    A lock file whose flock is free was left by a dead process of this host: None. One
    written on another host counts as held (``remote`` set). Where the file system has no
    flock, the recorded PID decides.
    """
    try:  # (filelock cannot look at a lock without creating it)
        fd = os.open(Path(directory) / LOCK_NAME, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            free: bool | None = lock_descriptor(fd, blocking=False)  # dropped when fd is closed
        except OSError:  # no flock on this file system
            free = None
        info = _read_info(fd)
    finally:
        os.close(fd)
    if free is False:
        return info
    if info.get("pid") is None:
        return None
    if info.get("host") != _HOST:
        return dict(info, remote=True)
    return info if free is None and _pid_alive(info["pid"]) else None


def check_not_in_use(directory: str | os.PathLike[str]) -> None:
    """Raise :class:`OutputInUseError` if an lswmkc process runs in ``directory``.

    Raises
    ------
    OutputInUseError
        The directory's lock is held (or was written on another host).
    ForeignOutputError
        Its lock path is a symbolic link or not a regular file.
    """
    check_regular_entry(directory)
    holder = lock_holder(directory)
    if holder is not None:
        lock_path = Path(directory) / LOCK_NAME if holder.get("remote") else None
        raise OutputInUseError(_in_use_message(directory, holder, lock_path))


class DirectoryLock:
    """``DIR/.lswmkc.lock`` (PID, host, start time), held by one process at a time.

    A :class:`filelock.FileLock` (``flock``, ``O_NOFOLLOW``); a second process is told
    ``DIR is in use by PID N on HOST (started ...)``. The lock of a dead process of this
    host is taken over (the kernel dropped its flock); one written on another host is
    respected, and the message says which file to remove if it is stale.
    """

    def __init__(self, directory):
        self.directory = Path(directory)
        self._held: Any = None  # the FileLock held, or the descriptor of a lock file written without flock
        self._written: Any = None  # os.stat_result of the lock file written (held open, so its inode stays)

    @property
    def path(self):
        """The lock file's path (``directory / LOCK_NAME``)."""
        return self.directory / LOCK_NAME

    def acquire(self):
        """Take the lock, or raise :class:`OutputInUseError` naming the holder.

        A link, FIFO or directory at the lock's name is refused with a
        :class:`ForeignOutputError` naming it; neither it nor its target is touched.
        """
        check_regular_entry(self.directory)
        lock = FileLock(self.path, mode=0o644, thread_local=False, blocking=False, on_acquired=self._claim)
        for _ in range(20):
            try:
                lock.acquire()
            except Timeout:
                holder = lock_holder(self.directory)
                if holder is None:  # its holder released (removed) it meanwhile
                    continue
                raise OutputInUseError(_in_use_message(self.directory, holder)) from None
            except OSError as exc:
                check_regular_entry(self.directory)  # a link, FIFO or directory put there meanwhile: named
                if exc.errno not in _NO_FLOCK:
                    raise
                return self._acquire_without_flock()
            self._held = lock
            return self
        raise OutputInUseError(f"{self.directory} is in use (its lock {self.path} keeps changing)")

    def _claim(self, fd):
        """Once flocked (filelock's ``on_acquired``): refuse a foreign lock, write ours into ``fd``."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_lock(self.path, "not a regular file")
        info = _read_info(fd)
        if info.get("pid") is not None and info.get("host") != _HOST:
            raise OutputInUseError(_in_use_message(self.directory, info, self.path))
        if info.get("pid") not in (None, os.getpid()) and isinstance(self._held, int) and _pid_alive(info["pid"]):
            raise OutputInUseError(_in_use_message(self.directory, info))  # (no flock: the recorded PID decides)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": _HOST, "started": utc_now()}).encode(), 0)
        os.fsync(fd)
        self._written = st

    def _acquire_without_flock(self):
        # No flock (some network mounts): filelock's own fallback would write its marker, without
        # our PID/host message; here the recorded PID decides.
        fd = self._held = os.open(self.path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
        try:
            self._claim(fd)
        except BaseException:
            self._held = None
            os.close(fd)
            raise
        return self

    def moved(self, directory):
        """The locked directory was renamed to ``directory`` (the lock moved with it)."""
        self.directory = Path(directory)

    def release(self):
        """Remove the lock file (if it is still ours) and drop the lock."""
        held, self._held = self._held, None
        if held is None:
            return
        try:  # removed while still held (filelock leaves it in place), never a link put in its place
            with contextlib.suppress(OSError):
                if os.path.samestat(self._written, os.lstat(self.path)):
                    os.unlink(self.path)
        finally:
            if isinstance(held, int):
                os.close(held)
            else:
                held.release()

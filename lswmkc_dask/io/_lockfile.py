"""Who holds a run directory's lock file: read without taking it.

A process writing a run directory holds ``DIR/.lswmkc.lock`` with ``fcntl.flock`` and
writes its PID, host and start time into it (:class:`lswmkc_dask.io.locks.DirectoryLock`).
Reading who holds it is needed before any output is replaced
(:func:`lswmkc_dask.io.atomic.check_replaceable`), so it lives here, below both the
atomic writers and the locks, and imports neither.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: the PID/host in the file decide
    fcntl = None  # type: ignore[assignment]

__all__ = ["HOST", "LOCK_NAME", "ForeignOutputError", "OutputInUseError", "check_lock_path", "check_not_in_use",
           "check_regular_entry", "lock_holder", "open_lock_file"]

#: The lock file of a run directory.
LOCK_NAME = ".lswmkc.lock"


HOST = socket.gethostname()


class OutputInUseError(FileExistsError):
    """Another lswmkc process is running in the output directory."""


class ForeignOutputError(FileExistsError):
    """The output exists and was not written by lswmkc (or is a file): never replaced."""


#: Flags of every open of a lock file: never through a symbolic link (O_NOFOLLOW), never
#: blocked by a FIFO planted in its place (O_NONBLOCK), not inherited by child programs.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _not_a_lock(path: Path, what: str, kind: str = "a lock file") -> ForeignOutputError:
    return ForeignOutputError(
        f"{path} is {what}, not {kind} of lswmkc; lswmkc never writes through or removes it: remove it yourself "
        "(if you did not put it there, check who did) or choose another output"
    )


def check_lock_path(directory: str | os.PathLike[str]) -> None:
    """Refuse a ``directory/.lswmkc.lock`` that is anything but a regular file (a link, a FIFO ...).

    Parameters
    ----------
    directory : str or Path
        A run directory (need not exist).

    Raises
    ------
    ForeignOutputError
        The lock path exists and is a symbolic link, a directory or a special file;
        the message names it.
    """
    check_regular_entry(directory, LOCK_NAME, "a lock file")


def check_regular_entry(directory: str | os.PathLike[str], name: str, kind: str) -> None:
    """Refuse ``directory/name``, an entry lswmkc writes itself, when it is anything but a
    regular file (a symbolic link, a directory, a FIFO ...); nothing is written or removed.

    Parameters
    ----------
    directory : str or Path
        A run directory (need not exist).
    name : str
        The entry's name (``.lswmkc.lock``, ``.lswmkc-output``).
    kind : str
        What lswmkc writes there, for the message ("a lock file").

    Raises
    ------
    ForeignOutputError
        The entry exists and is not a regular file; the message names it (and a link's
        target).
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


def open_lock_file(path: str | os.PathLike[str], create: bool = False) -> int:
    """Open a lock file without following a link: a file descriptor of a regular file.

    Parameters
    ----------
    path : str or Path
        The lock file (``DIR/.lswmkc.lock``).
    create : bool
        Create it if missing (``O_CREAT``, mode 0644), opened read-write; else read-only.

    Returns
    -------
    int
        The file descriptor (the caller closes it).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist and ``create`` is False.
    ForeignOutputError
        ``path`` is a symbolic link, a directory or a special file (nothing written).
    """
    path = Path(path)
    flags = (os.O_RDWR | os.O_CREAT) if create else os.O_RDONLY
    try:
        fd = os.open(path, flags | _NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.EISDIR, errno.ENXIO):
            check_lock_path(path.parent)
            raise _not_a_lock(path, "not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        check_lock_path(path.parent)
        raise _not_a_lock(path, "not a regular file")
    return fd


def pid_alive(pid):
    """Whether process ``pid`` exists on this host (True where that cannot be told)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, TypeError):
        return True
    return True


def read_info(fd):
    """The ``{pid, host, started}`` a lock file holds, ``{}`` where unreadable."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def in_use_message(directory, info, lock_path=None):
    """The message: ``directory`` is in use by the process of the lock ``info``."""
    pid, host, started = info.get("pid"), info.get("host"), info.get("started")
    who = f"PID {pid} on {host}" if pid is not None else "another lswmkc process"
    msg = f"{directory} is in use by {who}" + (f" (started {started})" if started else "")
    if lock_path is not None:  # a lock written on another host: its process cannot be checked from here
        msg += f"; if that process has ended, remove {lock_path}"
    return msg


def flock_or_none(fd, flags):
    """flock, or None where the file system (or OS) has none."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, flags)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise
    return True


def lock_holder(directory: str | os.PathLike[str]) -> dict | None:
    """Who runs in ``directory``: the lock's ``{pid, host, started}``, or None if no one.

    A lock whose flock is free was left by a process that has died (on this host) and
    is stale: None. A lock file written on another host counts as held (``remote``
    set in the returned dict).
    """
    path = Path(directory) / LOCK_NAME
    try:
        fd = open_lock_file(path)
    except (FileNotFoundError, NotADirectoryError, ForeignOutputError):
        return None
    except OSError:
        return None
    try:
        got = flock_or_none(fd, fcntl.LOCK_SH | fcntl.LOCK_NB) if fcntl else None
        info = read_info(fd)
        if got is False:
            return info
        if got:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if not info or info.get("pid") is None:
            return None
        if info.get("host") != HOST:
            return dict(info, remote=True)
        if got is None and pid_alive(info["pid"]):
            return info
        return None
    finally:
        os.close(fd)


def check_not_in_use(directory: str | os.PathLike[str]) -> None:
    """Raise :class:`OutputInUseError` if an lswmkc process runs in ``directory``.

    Raises
    ------
    OutputInUseError
        The directory's lock is held (or was written on another host).
    ForeignOutputError
        Its lock path is a symbolic link or not a regular file (:func:`check_lock_path`).
    """
    check_lock_path(directory)
    holder = lock_holder(directory)
    if holder is not None:
        lock_path = Path(directory) / LOCK_NAME if holder.get("remote") else None
        raise OutputInUseError(in_use_message(directory, holder, lock_path))

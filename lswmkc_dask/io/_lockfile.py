"""Who holds a run directory's lock file ``DIR/.lswmkc.lock``, read without taking it.

The holder (:class:`lswmkc_dask.io.locks.DirectoryLock`) keeps a ``flock`` on it and
writes its PID, host and start time into it. Output guards need this before replacing
anything, so it lives below both the atomic writers and the locks, and imports neither.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import psutil
from filelock import lock_descriptor

__all__ = ["HOST", "LOCK_NAME", "NOFOLLOW", "ForeignOutputError", "OutputInUseError", "check_not_in_use",
           "check_regular_entry", "in_use_message", "lock_holder", "not_a_lock", "pid_alive", "read_info",
           "read_lock"]

#: The lock file of a run directory.
LOCK_NAME = ".lswmkc.lock"
HOST = socket.gethostname()
#: Flags of an open of a lock file outside filelock: never through a symbolic link, never
#: blocked by a FIFO planted in its place, not inherited.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class OutputInUseError(FileExistsError):
    """Another lswmkc process is running in the output directory."""


class ForeignOutputError(FileExistsError):
    """The output exists and was not written by lswmkc (or is a file): never replaced."""


def not_a_lock(path: Path, what: str, kind: str = "a lock file") -> ForeignOutputError:
    """The error for ``path``, which lswmkc writes itself, found to be ``what`` (a link ...)."""
    return ForeignOutputError(
        f"{path} is {what}, not {kind} of lswmkc; lswmkc never writes through or removes it: remove it yourself "
        "(if you did not put it there, check who did) or choose another output"
    )


def check_regular_entry(directory: str | os.PathLike[str], name: str = LOCK_NAME, kind: str = "a lock file") -> None:
    """Refuse ``directory/name`` (an entry lswmkc writes itself) when it exists and is not
    a regular file; nothing is written or removed.

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
        The entry is a symbolic link (its target named), a directory or a special file.
    """
    path = Path(directory) / name
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISLNK(st.st_mode):
        raise not_a_lock(path, f"a symbolic link (to {os.readlink(path)})", kind)
    if not stat.S_ISREG(st.st_mode):
        raise not_a_lock(path, "a directory" if stat.S_ISDIR(st.st_mode) else "a special file", kind)


def read_info(fd: int) -> dict:
    """The ``{pid, host, started}`` a lock file (open as ``fd``) holds, ``{}`` where unreadable."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def _open_lock(path):
    """A read-only descriptor of the regular file ``path`` (never through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def read_lock(path: str | os.PathLike[str]) -> dict:
    """:func:`read_info` of the lock file ``path``, never opened through a link; ``{}`` where missing."""
    fd = _open_lock(path)
    if fd is None:
        return {}
    try:
        return read_info(fd)
    finally:
        os.close(fd)


def pid_alive(pid: object) -> bool:
    """Whether process ``pid`` exists on this host (True where that cannot be told)."""
    return not isinstance(pid, int) or psutil.pid_exists(pid)


def in_use_message(directory: str | os.PathLike[str], info: dict, lock_path: Path | None = None) -> str:
    """``"DIR is in use by PID N on HOST (started ...)"``; with ``lock_path`` (a lock written
    on another host, whose process cannot be checked from here) what to remove if it is stale.
    """
    pid, started = info.get("pid"), info.get("started")
    who = f"PID {pid} on {info.get('host')}" if pid is not None else "another lswmkc process"
    msg = f"{directory} is in use by {who}" + (f" (started {started})" if started else "")
    return msg + (f"; if that process has ended, remove {lock_path}" if lock_path is not None else "")


def lock_holder(directory: str | os.PathLike[str]) -> dict | None:
    """Who runs in ``directory``: the lock's ``{pid, host, started}``, or None if no one.

    A lock file whose flock is free (tried for a moment with :func:`filelock.lock_descriptor`)
    was left by a dead process of this host: None. One written on another host counts as
    held (``remote`` set). Where the file system has no flock, the recorded PID decides.
    """
    fd = _open_lock(Path(directory) / LOCK_NAME)  # (filelock cannot look at a lock without creating it)
    if fd is None:
        return None
    try:
        try:
            free: bool | None = lock_descriptor(fd, blocking=False)  # dropped when fd is closed
        except OSError:  # no flock on this file system
            free = None
        info = read_info(fd)
    finally:
        os.close(fd)
    if free is False:
        return info
    if info.get("pid") is None:
        return None
    if info.get("host") != HOST:
        return dict(info, remote=True)
    return info if free is None and pid_alive(info["pid"]) else None


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
        raise OutputInUseError(in_use_message(directory, holder, lock_path))

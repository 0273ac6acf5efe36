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
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: the PID/host in the file decide
    fcntl = None  # type: ignore[assignment]

__all__ = ["HOST", "LOCK_NAME", "OutputInUseError", "check_not_in_use", "lock_holder"]

#: The lock file of a run directory.
LOCK_NAME = ".lswmkc.lock"


HOST = socket.gethostname()


class OutputInUseError(FileExistsError):
    """Another lswmkc process is running in the output directory."""


def _pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, TypeError):
        return True
    return True


def _read_info(fd):
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode() or "null")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def _in_use_message(directory, info, lock_path=None):
    pid, host, started = info.get("pid"), info.get("host"), info.get("started")
    who = f"PID {pid} on {host}" if pid is not None else "another lswmkc process"
    msg = f"{directory} is in use by {who}" + (f" (started {started})" if started else "")
    if lock_path is not None:  # a lock written on another host: its process cannot be checked from here
        msg += f"; if that process has ended, remove {lock_path}"
    return msg


def _flock(fd, flags):
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
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return None
    try:
        got = _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB) if fcntl else None
        info = _read_info(fd)
        if got is False:
            return info
        if got:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if not info or info.get("pid") is None:
            return None
        if info.get("host") != HOST:
            return dict(info, remote=True)
        if got is None and _pid_alive(info["pid"]):
            return info
        return None
    finally:
        os.close(fd)


def check_not_in_use(directory: str | os.PathLike[str]) -> None:
    """Raise :class:`OutputInUseError` if an lswmkc process runs in ``directory``."""
    holder = lock_holder(directory)
    if holder is not None:
        lock_path = Path(directory) / LOCK_NAME if holder.get("remote") else None
        raise OutputInUseError(_in_use_message(directory, holder, lock_path))

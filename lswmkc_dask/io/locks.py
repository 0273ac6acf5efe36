"""Run directories (sweeps): a lock per directory, and replacement only at the first result.

* :class:`DirectoryLock` - ``DIR/.lswmkc.lock`` holds the PID, host and start time of
  the process running in ``DIR`` and is held as a :class:`filelock.FileLock` (a
  ``flock``, opened with ``O_NOFOLLOW``) while it runs. A second process is told ``DIR
  is in use by PID N on HOST (started ...)``. The kernel drops a flock when its process
  dies, so the lock of a dead process on this host is taken over; a lock file written
  on another host is respected (its process cannot be checked from here) and the
  message says which file to remove if it is stale. A link, FIFO or directory at the
  lock's name is refused, naming it, and left as it is.
* :class:`RunDirectory` - the output directory of a resumable run: checked (never a
  file, a foreign directory, the working/home directory, inside an input or a kernel
  store, holding an input ...; see :mod:`lswmkc_dask.io.atomic`), locked, and with ``overwrite`` replaced only when the
  new run has its first result: the new directory is built as a hidden sibling and
  swapped in then (atomically where the OS can exchange two names), and the old one
  is deleted when the run ends. A run that fails before its first result leaves the
  directory as it found it (a directory it created is removed again).

  An output that is a symbolic link is resolved: the run works in the directory it
  points to (the link stays a link, what it points to is resumed or replaced). Hidden
  siblings ``.NAME.lswmkc-new-*``/``.NAME.lswmkc-old-*`` left by a process killed
  outright during a replacement, and temporaries of atomic writes inside the
  directory, are removed when the next run opens it (:meth:`RunDirectory.open`,
  :meth:`RunDirectory.remove_temporaries`) - only names lswmkc writes, and only what
  no live process holds.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import functools
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ._lockfile import (
    HOST,
    LOCK_NAME,
    NOFOLLOW,
    OutputInUseError,
    check_lock_path,
    check_not_in_use,
    check_regular_entry,
    in_use_message,
    lock_holder,
    not_a_lock,
    pid_alive,
    read_info,
    read_lock,
)
from .atomic import (
    MARKER,
    ForeignOutputError,
    ProtectedOutputError,
    atomic_path,
    check_writable,
    marker_info,
    protected_reason,
    refuse_output_location,
    write_marker,
)
from .guards import not_ours_error
from .ownership import is_empty_dir, utc_now

__all__ = [
    "LOCK_NAME",
    "DirectoryLock",
    "OutputInUseError",
    "RunDirectory",
    "check_not_in_use",
    "closes_run_directories",
    "lock_holder",
    "track",
]

#: Hidden siblings of a run directory made during a replacement (:meth:`RunDirectory.commit`).
_SIBLING = re.compile(r"(?:new|old)-[0-9a-f]{8}")
#: Temporaries of :func:`lswmkc_dask.io.atomic.atomic_path` (``.NAME.tmp-HEX``, its
#: ``.NAME.old-HEX`` while it replaces a file) and writability probes
#: (:func:`lswmkc_dask.io.atomic.check_writable`).
#: flock errors that mean "no flock on this file system" (not "held by another").
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
_TEMPORARY = re.compile(r"\..+\.(?:tmp|old)-[0-9a-f]+|\.lswmkc-probe-[0-9a-f]{8}")


class DirectoryLock:
    """``DIR/.lswmkc.lock``: held by one process at a time (see the module docstring)."""

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

        The lock file is opened without following a symbolic link: a link (or a FIFO,
        a directory ...) planted at its name is refused with a
        :class:`ForeignOutputError` naming it, and neither it nor what it points to is
        written or removed.
        """
        check_lock_path(self.directory)
        lock = FileLock(self.path, mode=0o644, thread_local=False, blocking=False, on_acquired=self._claim)
        for _ in range(20):
            try:
                lock.acquire()
            except Timeout:
                if not os.path.lexists(self.path):  # its holder released (removed) it meanwhile
                    continue
                raise OutputInUseError(in_use_message(self.directory, read_lock(self.path))) from None
            except OSError as exc:
                check_lock_path(self.directory)  # a link, FIFO or directory put there meanwhile: named
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
            raise not_a_lock(self.path, "not a regular file")
        info = read_info(fd)
        if info.get("pid") is not None and info.get("host") != HOST:
            raise OutputInUseError(in_use_message(self.directory, info, self.path))
        data = json.dumps({"pid": os.getpid(), "host": HOST, "started": utc_now()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        self._written = st

    def _acquire_without_flock(self):
        # Hand code kept for file systems without flock (some network mounts), where
        # filelock would fall back to its own marker, in its own format and without our
        # PID/host message: here the recorded PID decides (psutil), as it did before.
        info = read_lock(self.path)
        if info.get("pid") is not None and info.get("host") != HOST:
            raise OutputInUseError(in_use_message(self.directory, info, self.path))
        if info.get("pid") not in (None, os.getpid()) and pid_alive(info["pid"]):
            raise OutputInUseError(in_use_message(self.directory, info))
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o644)
        try:
            self._claim(fd)
        except BaseException:
            os.close(fd)
            raise
        self._held = fd
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


def _exchange(a, b):
    """Swap the names ``a`` and ``b`` atomically (Linux renameat2); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


class RunDirectory:
    """The output directory of a resumable run (a sweep), locked while it runs.

    Parameters
    ----------
    path : str or Path
        The directory. A symbolic link is resolved once, here: the run works in the
        directory it points to, so the link stays a link while what it points to is
        resumed, or with ``overwrite`` replaced (the new directory is built next to
        the target, on its file system, and takes the target's name). A link that
        points nowhere is refused (:meth:`check`). :attr:`path` is the resolved
        directory, :attr:`given` the path as given.
    kind : {"sweep", ...}
        The kind written into the marker.
    overwrite : bool
        Replace an existing directory written by lswmkc - only when :meth:`commit` is
        called for the first result.
    resume_file : str, optional
        The file that holds a directory's settings (``sweep.json``); kept for the
        callers' messages (a directory is lswmkc's only by its marker).
    inputs : sequence of paths
        Inputs of the run: a directory holding one is never replaced.

    After :meth:`open`, :attr:`state` is ``"fresh"`` (created here, or empty),
    ``"resume"`` (an existing output of lswmkc, to go on with) or ``"replace"``.
    Whatever the state, a successful run leaves no hidden sibling or temporary
    behind; one killed outright (``kill -9``) may, and the next run that opens the
    directory removes them (:meth:`open`, :meth:`remove_temporaries`).
    """

    def __init__(self, path, *, kind, overwrite=False, resume_file=None, inputs=()):
        self.given = Path(path)
        # A link: the run works in (and with overwrite replaces) what it points to; the
        # link itself is never replaced or left pointing at a hidden temporary.
        self.path = Path(os.path.realpath(self.given)) if os.path.islink(self.given) else self.given
        self.kind = kind
        self.overwrite = bool(overwrite)
        self.resume_file = resume_file
        self.inputs = tuple(inputs)
        self.state = None
        self._lock: Any = None
        self._old_lock = None
        self._created = []  # directories made here, deepest last
        self._written = []  # entries written into a fresh directory
        self._pending: tuple[Any, tuple[Any, ...]] | None = None
        self._trash = None
        self.committed = False

    # -- opening -------------------------------------------------------------------
    def check(self):
        """What :meth:`open` checks, writing nothing (a lock is only looked at).

        Raises
        ------
        ProtectedOutputError
            The directory is one of the inputs, lies inside one or inside a kernel store,
            or holds an input (:func:`lswmkc_dask.io.atomic.refuse_output_location`); or,
            with ``overwrite``, it is the working/home directory ...
        ForeignOutputError
            A file, a directory lswmkc did not write, or its lock path is a link.
        OutputInUseError, OutputNotWritableError
        """
        path = self.path
        refuse_output_location(path, self.inputs, holds_inputs=True)
        check_lock_path(path)
        check_regular_entry(path, MARKER, "the output marker")
        if path != self.given and not os.path.lexists(path):
            raise ForeignOutputError(
                f"output {self.given} is a symbolic link to {path}, which does not exist; create that directory "
                "or choose another output"
            )
        if self.overwrite:
            reason = protected_reason(path, self.inputs)
            if reason:
                raise ProtectedOutputError(f"refusing to replace output {path}: {reason}; choose another output")
        if os.path.lexists(path) and not path.is_dir():
            raise ForeignOutputError(f"output {path} is a file; choose another output")
        if not path.exists():
            check_writable(path)
            return
        if not is_empty_dir(path) and marker_info(path) is None:
            raise not_ours_error(path, prefix="output ")
        check_not_in_use(path)
        check_writable(path, inside=True)
        if self.overwrite:
            check_writable(path)  # the new directory is built next to it

    def open(self):
        """Check (:meth:`check`), create if missing, and lock the directory; set :attr:`state`.

        Once the lock is held, hidden siblings ``.NAME.lswmkc-new-*`` and
        ``.NAME.lswmkc-old-*`` that a process killed outright during a replacement
        left behind are removed (:meth:`remove_stale_siblings`).

        Raises
        ------
        ProtectedOutputError, ForeignOutputError, OutputInUseError, OutputNotWritableError
        """
        path = self.path
        self.check()
        if not path.exists():
            self._make(path)
        try:
            self._lock = DirectoryLock(path).acquire()
            self.remove_stale_siblings()
            if self._created or is_empty_dir(path):
                self.state = "fresh"
            elif self.overwrite:
                if marker_info(path) is None:  # an old sweep directory without the marker
                    raise not_ours_error(path, prefix="output ")
                self.state = "replace"
            else:
                self.state = "resume"
        except BaseException:
            self.close(ok=False)
            raise
        return self

    def remove_stale_siblings(self):
        """Remove what a killed replacement of this directory left next to it.

        Only directories named ``.NAME.lswmkc-new-HEX8`` or ``.NAME.lswmkc-old-HEX8``
        (the names :meth:`commit` gives), not links, holding lswmkc's marker (or
        nothing but its own files), whose lock no live process holds (see
        :func:`lock_holder`; a lock written on another host counts as held). Called
        with this directory's lock held, so no run of this directory is replacing it.

        Returns
        -------
        list of Path
            The directories removed.
        """
        directory = Path(os.path.abspath(self.path))
        prefix = f".{directory.name}.lswmkc-"
        removed: list[Path] = []
        try:
            entries = list(os.scandir(directory.parent))
        except OSError:
            return removed
        for entry in entries:
            if not entry.name.startswith(prefix) or not _SIBLING.fullmatch(entry.name[len(prefix):]):
                continue
            p = Path(entry.path)
            try:
                if entry.is_symlink() or not entry.is_dir():
                    continue
            except OSError:
                continue
            if lock_holder(p) is not None:
                continue
            if marker_info(p) is None and not is_empty_dir(p):
                continue  # not what lswmkc wrote
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
        return removed

    def remove_temporaries(self, *subdirs):
        """Remove temporaries of atomic writes left in the directory by a killed process.

        Entries named ``.NAME.tmp-HEX`` and ``.NAME.old-HEX`` (the temporaries of
        :func:`lswmkc_dask.io.atomic.atomic_path`) and ``.lswmkc-probe-HEX`` directly
        in the directory and in each of ``subdirs`` (relative to it). Call it with the
        lock held (after :meth:`open`): no other run writes there then.

        Parameters
        ----------
        *subdirs : str
            Sub-directories holding results written atomically (``"runs"``).

        Returns
        -------
        list of Path
            The entries removed.
        """
        if self._lock is None:
            raise RuntimeError(f"{self.path} is not open: remove_temporaries() needs the lock")
        root = self.path
        removed = []
        for d in (root, *(root / s for s in subdirs)):
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue
            for entry in entries:
                if not _TEMPORARY.fullmatch(entry.name):
                    continue
                p = Path(entry.path)
                if entry.is_symlink():  # not something lswmkc made: never removed, never followed
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        p.unlink()
                removed.append(p)
        return removed

    def _make(self, path):
        missing = []
        p = Path(os.path.abspath(path))
        while not p.exists():
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except FileExistsError:  # made meanwhile by someone else: not ours to remove
                continue
            self._created.append(d)
        if self._created and self._created[-1] != Path(os.path.abspath(path)):
            self._created = []  # the directory itself was made by another process

    # -- writing -------------------------------------------------------------------
    def start(self, files=None, dirs=()):
        """Set the directory up: the marker, ``files`` ({name: text}) and ``dirs``.

        Fresh: written now. Resume: the marker and files that are missing. Replace:
        kept until :meth:`commit` builds the new directory.
        """
        files = dict(files or {})
        if self.state == "replace":
            self._pending = (files, tuple(dirs))
            return
        self._populate(self.path, files, dirs, only_missing=self.state == "resume")

    def _populate(self, root, files, dirs, only_missing):
        # An entry is recorded as written (removed again if the run fails before its first
        # result) only once written: a link or file refused here is never removed.
        if not os.path.lexists(root / MARKER) or not only_missing:
            fresh = not os.path.lexists(root / MARKER)
            write_marker(root, self.kind)
            if fresh:
                self._written.append(root / MARKER)
        for d in dirs:
            if os.path.islink(root / d):
                raise ForeignOutputError(f"{root / d} is a symbolic link; lswmkc never writes results through a link "
                                         "into another place: remove it yourself or choose another output")
            if not (root / d).exists():
                (root / d).mkdir(parents=True)
                self._written.append(root / d)
        for name, text in files.items():
            if text is None or (only_missing and os.path.lexists(root / name)):
                continue
            fresh = not os.path.lexists(root / name)
            with atomic_path(root / name, overwrite=True) as tmp:
                tmp.write_text(text)
            if fresh:
                self._written.append(root / name)

    def commit(self, write):
        """Write one result with ``write(directory)``; the first one makes the new directory current.

        Replace: the first result is written into the new directory (marker, files,
        lock), built as a hidden sibling, which is then swapped with the old one; the
        old one is deleted when the run ends. So the directory always holds either the
        old results or at least one new one.
        """
        if self.committed:
            return write(self.path)
        if self.state != "replace":
            out = write(self.path)
            self._written = []
            self.committed = True
            return out
        path = self.path
        new = path.with_name(f".{path.name}.lswmkc-new-{uuid.uuid4().hex[:8]}")
        os.mkdir(new)
        new_lock = None
        try:
            new_lock = DirectoryLock(new).acquire()
            assert self._pending is not None  # (set by the caller's prepare step)
            files, dirs = self._pending
            self._populate(new, files, dirs, only_missing=False)
            out = write(new)
            if _exchange(new, path):
                trash = new
            else:
                trash = path.with_name(f".{path.name}.lswmkc-old-{uuid.uuid4().hex[:8]}")
                os.rename(path, trash)
                os.rename(new, path)
        except BaseException:
            if new_lock is not None:
                new_lock.release()
            shutil.rmtree(new, ignore_errors=True)
            raise
        self._lock.moved(trash)
        new_lock.moved(path)
        self._old_lock, self._lock = self._lock, new_lock
        self._trash = trash
        self._written = []
        self.committed = True
        return out

    # -- closing -------------------------------------------------------------------
    def close(self, ok=True):
        """Release the lock; delete a replaced directory; undo a fresh one without results."""
        try:
            if not ok and not self.committed and self.state in ("fresh", None):
                for entry in reversed(self._written):
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            entry.unlink()
                self._written = []
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            if self._old_lock is not None:
                self._old_lock.release()
                self._old_lock = None
            if self._trash is not None:
                shutil.rmtree(self._trash, ignore_errors=True)
                self._trash = None
            if not ok and not self.committed:
                for d in reversed(self._created):
                    with contextlib.suppress(OSError):
                        os.rmdir(d)
                self._created = []


_ACTIVE: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("lswmkc_run_directories", default=None)


def track(run_directory: RunDirectory) -> RunDirectory:
    """Register ``run_directory`` to be closed when the enclosing decorated call ends."""
    active = _ACTIVE.get()
    if active is None:
        raise RuntimeError("track() outside a function decorated with closes_run_directories")
    active.append(run_directory)
    return run_directory


def closes_run_directories(func: Callable) -> Callable:
    """Close every :class:`RunDirectory` tracked during a call of ``func`` when it ends.

    On success they are closed with ``ok=True``; on any exception (Ctrl-C included)
    with ``ok=False``: a fresh directory without results is removed again, a
    directory to replace is left as it was if no result came.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        active: list[Any] = []
        token = _ACTIVE.set(active)
        ok = False
        try:
            result = func(*args, **kwargs)
            ok = True
            return result
        finally:
            _ACTIVE.reset(token)
            for rd in reversed(active):
                rd.close(ok=ok)

    return wrapper

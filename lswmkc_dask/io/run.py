"""Run directories (sweeps, comparisons): locked while a run works in them, replaced only at its first result.

:class:`RunDirectory` is a context manager: entered, the directory is checked
(:func:`.output.check_output`), created if missing and locked (:class:`.output.DirectoryLock`);
left, the lock is released, and a run that failed before its first result leaves the
directory as it found it. With ``overwrite`` the old directory is swapped out at the first
result (:meth:`RunDirectory.commit`); the user's view is in docs/user-guide/refusals.md ("Outputs").
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import uuid
from pathlib import Path
from typing import Any

from ..errors import ForeignOutputError
from .output import (
    MARKER,
    DirectoryLock,
    atomic_path,
    check_output,
    is_empty_dir,
    lock_holder,
    marker_info,
    not_ours_error,
    remove,
    remove_leftovers,
    write_marker,
)

#: Temporaries of atomic writes (``.NAME.tmp-HEX``, ``.NAME.old-HEX``) and writability probes.
_TEMPORARY = re.compile(r"\..+\.(?:tmp|old)-[0-9a-f]+|\.lswmkc-probe-[0-9a-f]{8}")


def _exchange(a, b):
    """Swap the names ``a`` and ``b`` atomically (Linux renameat2, which ``os`` lacks); False if unsupported.

    (ctypes passes the ints as ``int``, the bytes as ``char *`` and returns an ``int``: renameat2's types.)
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


class RunDirectory:
    """The output directory of a resumable run (a sweep, a comparison), locked while it runs:
    ``with RunDirectory(...) as target:`` opens (:meth:`open`) and closes (:meth:`close`) it.

    Parameters
    ----------
    path : str or Path
        The directory. A symbolic link is resolved once, here (:attr:`path`; :attr:`given`
        as given): the run works in, and replaces, what it points to; the link stays.
    kind : {"sweep", "compare"}
        The kind written into the marker.
    overwrite : bool
        Replace an existing directory written by lswmkc, at :meth:`commit` of the first result.
    inputs : sequence of paths
        Inputs of the run: a directory holding one is never replaced.

    Raises
    ------
    ProtectedOutputError, ForeignOutputError, OutputInUseError, OutputNotWritableError
        On entering, as :meth:`open`.

    After :meth:`open`, :attr:`state` is ``"fresh"`` (created here, or empty),
    ``"resume"`` (an existing output of lswmkc) or ``"replace"``.
    """

    def __init__(self, path, *, kind, overwrite=False, inputs=()):
        self.given = Path(path)
        self.path = Path(os.path.realpath(self.given)) if os.path.islink(self.given) else self.given
        self.kind = kind
        self.overwrite = bool(overwrite)
        self.inputs = tuple(inputs)
        self.state = None
        self._lock: Any = None
        self._old_lock: Any = None  # the replaced directory's, moved with it to its hidden name (deleted at close)
        self._created = []  # directories made here, deepest last
        self._written = []  # entries written into a fresh directory
        self._pending: tuple[Any, tuple[Any, ...]] | None = None
        self.committed = False

    def open(self) -> RunDirectory:
        """Check (:func:`.output.check_output`), create if missing, lock the directory, set
        :attr:`state`, and remove the hidden siblings a killed replacement left.

        Raises
        ------
        ProtectedOutputError
            The directory is an input, lies inside one or inside a kernel store, or holds
            an input; with ``overwrite``, one never replaced (the working directory ...).
        ForeignOutputError
            A file, a directory lswmkc did not write, a link to nothing, or its lock path or
            marker is a link.
        OutputInUseError, OutputNotWritableError
        """
        path = check_output(self.given, overwrite=self.overwrite, kind=self.kind, inputs=self.inputs)
        self._make(Path(os.path.abspath(path)))
        try:
            self._lock = DirectoryLock(path).acquire()
            self._remove_stale_siblings()
            fresh = bool(self._created) or is_empty_dir(path)
            if not fresh and marker_info(path) is None:  # (checked again under the lock)
                raise not_ours_error(path)
            self.state = "fresh" if fresh else "replace" if self.overwrite else "resume"
        except BaseException:
            self.close(ok=False)
            raise
        return self

    def __enter__(self) -> RunDirectory:
        """:meth:`open`."""
        return self.open()

    def __exit__(self, exc_type, exc, tb) -> None:
        """:meth:`close`, with ``ok`` False on any exception (Ctrl-C included): a fresh directory
        without results is removed, one to replace is left as it was.
        """
        self.close(ok=exc_type is None)

    def _remove_stale_siblings(self):
        """Remove the hidden siblings ``.NAME.lswmkc-{new,old}-HEX8`` (directories of lswmkc)
        that a killed replacement left, whose lock no live process holds; with our lock held.
        """
        directory = Path(os.path.abspath(self.path))
        siblings = re.compile(re.escape(f".{directory.name}.lswmkc-") + "(?:new|old)-[0-9a-f]{8}")
        return remove_leftovers(directory.parent, siblings, lambda p: p.is_dir() and lock_holder(p) is None
                                and (marker_info(p) is not None or is_empty_dir(p)))

    def remove_temporaries(self, *subdirs):
        """Remove the temporaries of atomic writes and writability probes that a killed
        process left in the directory and in each of ``subdirs``; links are never removed.
        Needs the lock (after :meth:`open`).

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
        return [p for d in (self.path, *(self.path / s for s in subdirs)) for p in remove_leftovers(d, _TEMPORARY)]

    def _make(self, path):
        """Make ``path`` (absolute) and its missing parents, if missing; record those made here."""
        for d in reversed([d for d in (path, *path.parents) if not d.exists()]):
            with contextlib.suppress(FileExistsError):  # made meanwhile by someone else: not ours to remove
                os.mkdir(d)
                self._created.append(d)
        if self._created and self._created[-1] != path:
            self._created = []  # the directory itself was made by another process

    def start(self, files=None, dirs=()):
        """Set the directory up: the marker, ``files`` ({name: text}) and ``dirs``.

        Fresh: written now. Resume: the marker and files that are missing. Replace:
        kept until :meth:`commit` builds the new directory.
        """
        if self.state == "replace":
            self._pending = (dict(files or {}), tuple(dirs))
        else:
            self._populate(self.path, files or {}, dirs, only_missing=self.state == "resume")

    def _populate(self, root, files, dirs, only_missing):
        # An entry is recorded as written (removed again if the run fails before its first
        # result) only once written: a link or file refused here is never removed.
        fresh = not os.path.lexists(root / MARKER)
        if fresh or not only_missing:
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
            fresh = not os.path.lexists(root / name)
            if text is not None and (fresh or not only_missing):
                with atomic_path(root / name, overwrite=True) as tmp:
                    tmp.write_text(text)
                if fresh:
                    self._written.append(root / name)

    def commit(self, write):
        """Write one result with ``write(directory)``; the first one makes the new directory current.

        Replace: the first result is written into the new directory (marker, files,
        lock), built as a hidden sibling, which is then swapped with the old one
        (atomically where the OS can exchange two names); the old one is deleted when
        the run ends. So the directory always holds either the old results or at least
        one new one.
        """
        path = self.path
        if self.committed or self.state != "replace":
            out = write(path)
        else:
            new = path.with_name(f".{path.name}.lswmkc-new-{uuid.uuid4().hex[:8]}")
            os.mkdir(new)
            new_lock = DirectoryLock(new)
            try:
                new_lock.acquire()
                assert self._pending is not None  # (set by start)
                self._populate(new, *self._pending, only_missing=False)
                out = write(new)
                if _exchange(new, path):
                    trash = new
                else:
                    trash = path.with_name(f".{path.name}.lswmkc-old-{uuid.uuid4().hex[:8]}")
                    os.rename(path, trash)
                    os.rename(new, path)
            except BaseException:
                new_lock.release()  # (nothing to release where it was not taken)
                remove(new)
                raise
            self._lock.moved(trash)
            new_lock.moved(path)
            self._old_lock, self._lock = self._lock, new_lock
        self._written = []
        self.committed = True
        return out

    def close(self, ok=True):
        """Release the lock; delete a replaced directory; undo a fresh one without results."""
        if not ok and not self.committed and self.state in ("fresh", None):
            for entry in reversed(self._written):
                remove(entry)  # (quiet: the locks below are released whatever happens)
            self._written = []
        for lock in (self._lock, self._old_lock):
            if lock is not None:
                lock.release()
        if self._old_lock is not None:
            remove(self._old_lock.directory)  # the replaced directory
        self._lock = self._old_lock = None
        if not ok and not self.committed:
            for d in reversed(self._created):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            self._created = []

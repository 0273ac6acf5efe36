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
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from .._version import __version__
from ..errors import Param, with_message
from ._lockfile import LOCK_NAME, ForeignOutputError, _flock, check_not_in_use

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: stale temporaries are left in place
    fcntl = None  # type: ignore[assignment]

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

#: Name of the marker file in every output directory written by this package.
MARKER = ".lswmkc-output"
#: Kinds of output directory (the ``kind`` of the marker).
KINDS = ("fit", "sweep", "compare", "kernel-store", "plots")
#: Files of this package that do not make a directory "foreign" (marker, sweep lock).
#: The lock file of a directory a run holds (io/locks.py).
OWN_FILES = (MARKER, LOCK_NAME)
_STORE_FORMAT_PREFIX = "lswmkc-kernel-store"


class ProtectedOutputError(ValueError):
    """The output is a directory that is never replaced (working/home directory, ``/`` ...)."""


class OutputNotWritableError(PermissionError):
    """The output's location cannot be written (read-only, full, no permission)."""


def _utc_now():
    """The current time in UTC as ISO 8601 with a ``Z``, to the second (every timestamp lswmkc writes)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version():
    return __version__


def signature():
    """The ``written_by`` value of this package's JSON files and the ``Software`` of its PNGs."""
    return f"{SIGNATURE} {_version()}"


#: Prefix of :func:`signature`: how this package's files are recognised.
SIGNATURE = "lswmkc-dask"


def json_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a JSON object file whose ``written_by`` names this package."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(16 * 2**20))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("written_by", "")).startswith(SIGNATURE)


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_is_ours(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a PNG file with a ``Software`` text chunk naming this package.

    Reads the chunks before the image data (``tEXt``/``iTXt`` come first in the PNGs
    matplotlib writes with ``metadata={"Software": ...}``).
    """
    try:
        with open(path, "rb") as fh:
            if fh.read(8) != _PNG_MAGIC:
                return False
            for _ in range(64):
                head = fh.read(8)
                if len(head) < 8:
                    return False
                length, ctype = int.from_bytes(head[:4], "big"), head[4:]
                if ctype == b"IDAT" or ctype == b"IEND" or length > 2**20:
                    return False
                data = fh.read(length)
                fh.read(4)  # crc
                if ctype in (b"tEXt", b"iTXt") and data.startswith(b"Software\0"):
                    text = data[len(b"Software\0"):]
                    if ctype == b"iTXt":  # compression flag, method, language\0, keyword\0
                        text = text[2:].split(b"\0", 2)[-1]
                    return text.startswith(SIGNATURE.encode())
    except OSError:
        return False
    return False


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
        The marker's name is taken by a symbolic link or a special file (never
        written through).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    text = json.dumps({"kind": kind, "version": _version(), "created": _utc_now()}) + "\n"
    path = Path(directory) / MARKER
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.EISDIR, errno.ENXIO):
            raise
        fd = None
    try:
        if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ForeignOutputError(f"{path} is not a regular file (a symbolic link or a special file); lswmkc "
                                     "never writes through it: remove it yourself or choose another output")
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    finally:
        if fd is not None:
            os.close(fd)


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
    marker = path / MARKER
    if marker.is_file():
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict) and info.get("kind") in KINDS:
            return info
    zmeta = path / "zarr.json"
    if zmeta.is_file():
        try:
            fmt = json.loads(zmeta.read_text()).get("attributes", {}).get("format")
        except (OSError, ValueError, AttributeError):
            fmt = None
        if isinstance(fmt, str) and fmt.startswith(_STORE_FORMAT_PREFIX):
            return {"kind": "kernel-store", "format": fmt}
    return None


def _entries(path):
    return [p.name for p in Path(path).iterdir()]


def is_empty_dir(path):
    """An existing directory holding nothing but lswmkc's marker and lock files (regular files, not links)."""
    path = Path(path)
    return (path.is_dir() and not path.is_symlink()
            and all(n in OWN_FILES and (path / n).is_file() and not (path / n).is_symlink() for n in _entries(path)))


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


def _local_inputs(inputs):
    """``(input, resolved path)`` of each input on this file system (not None, not a URL)."""
    for inp in inputs:
        if inp is None or (isinstance(inp, str) and "://" in inp):
            continue
        try:
            yield inp, Path(inp).expanduser().resolve()
        except (TypeError, OSError):
            continue


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
    try:
        p = Path(path).expanduser().resolve()
    except (TypeError, OSError, RuntimeError):
        return None
    for parent in p.parents:
        if (marker_info(parent) or {}).get("kind") == "kernel-store":
            return parent
    return None


def inside_input(path, inputs=()):
    """Why ``path`` may not be written at all: it is an input, or lies inside one or inside a kernel store; or None."""
    try:
        p = Path(path).expanduser().resolve()
    except (TypeError, OSError, RuntimeError):
        return None
    for inp, q in _local_inputs(inputs):
        if p == q:
            return f"it is the input {inp}"
        if p.is_relative_to(q):
            return f"it is inside the input {inp}"
    store = enclosing_store(p)
    if store is not None:
        return (f"it is inside the kernel store {store} (a later `lswmkc prepare ... {store.name} --overwrite` "
                "would delete it)")
    return None


def refuse_output_location(
    path: str | os.PathLike[str], inputs: Sequence[str | os.PathLike[str]] = (), holds_inputs: bool = False
) -> None:
    """Refuse to write ``path`` where it would mix with an input; nothing is written.

    Symbolic links and relative paths are resolved first (``st.zarr/../st.zarr/x``
    and a link into a store are caught).

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
    reason = inside_input(path, inputs)
    if reason is None and holds_inputs:
        try:
            p = Path(path).expanduser().resolve()
        except (TypeError, OSError, RuntimeError):
            p = None
        for inp, q in _local_inputs(inputs) if p is not None else ():
            if q.is_relative_to(p):
                reason = f"it holds the input {inp} (a later --overwrite would delete it)"
                break
    if reason:
        raise ProtectedOutputError(f"refusing to write output {path}: {reason}; choose an output outside it")


def _refuse_inside_input(path, inputs):
    """Raise :class:`ProtectedOutputError` if ``path`` is an input, inside one or inside a kernel store."""
    refuse_output_location(path, inputs)


#: Members of a kernel store (zarr v3, :func:`lswmkc_dask.io.store.prepare`): top level,
#: the array ``kernels``, and its chunks ``kernels/c/I/J/K`` (digits only).
_STORE_TOP = {"zarr.json": "file", "kernels": "dir", MARKER: "file", LOCK_NAME: "file"}
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
        if e.is_symlink() or kind is None:
            out.append(f"{rel}{e.name}")
        elif kind == "file" and not e.is_file(follow_symlinks=False):
            out.append(f"{rel}{e.name}")
        elif kind == "dir" and not e.is_dir(follow_symlinks=False):
            out.append(f"{rel}{e.name}")
        elif kind == "dir" or (kind == "digits" and e.is_dir(follow_symlinks=False)):
            sub = {"kernels": _STORE_ARRAY, "c": {"*": "digits"}}.get(e.name, {"*": "digits"})
            _foreign_in(e.path, sub, f"{rel}{e.name}/", out, limit)


def store_foreign_entries(path: str | os.PathLike[str], limit: int = 20) -> list[str]:
    """Entries of the kernel store ``path`` that are not a kernel store's own members.

    A store holds ``zarr.json``, the marker, the lock file and the array ``kernels``
    (``kernels/zarr.json`` and chunks ``kernels/c/<digits>/...``). Anything else (a
    sweep written into the store, a user's file, a symbolic link anywhere) is foreign:
    replacing the store would delete it.

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


def _not_ours_error(path, prefix="", was="was"):
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
        raise _not_ours_error(path, prefix="output ")
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
        See :func:`check_replaceable`.
    OutputNotWritableError
        See :func:`check_writable`.
    """
    path = Path(path)
    _refuse_inside_input(path, inputs)
    if os.path.lexists(path):
        if not overwrite:
            if path.is_dir() and (is_empty_dir(path) or marker_info(path) is not None):
                raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
            if path.is_dir():
                raise _not_ours_error(path, prefix="output ", was="already exists and was")
            raise ForeignOutputError(f"output {path} already exists and is a file; choose another output")
        check_replaceable(path, inputs)
    check_writable(path)


def _file_refusal(path, owned=None):
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
) -> None:
    """Up-front check of a file output named by the user (nothing written yet).

    A file is replaced only with ``overwrite`` and only if ``owned(path)`` says this
    package wrote it (:func:`json_is_ours`, :func:`png_is_ours`); a directory, a
    symbolic link, an input or anything inside an input never, whatever ``overwrite``
    says. The location must be writable.

    Parameters
    ----------
    path : str or Path
        The file to be written (atomically, at the end).
    overwrite : bool
        Replace an existing file that this package wrote.
    inputs : sequence of paths
        Inputs of the command: ``path`` may be neither one of them nor inside one.
    owned : callable, optional
        ``owned(path) -> bool``: whether an existing file was written by this package.
        None: any regular file counts as the package's (for files inside its own
        output directories).

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
    _refuse_inside_input(path, inputs)
    if os.path.lexists(path):
        refusal = _file_refusal(path, owned)
        if refusal:
            raise ForeignOutputError(refusal)
        if not overwrite:
            raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    check_writable(path)


def _nearest_existing(path):
    p = Path(os.path.abspath(path))
    while not p.exists():
        p = p.parent
    return p


#: Bytes written (and synced) by the writability probe: a full file system refuses them.
PROBE_BYTES = 64 * 1024


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
    base = path if inside and path.is_dir() else _nearest_existing(path.parent if str(path.parent) else ".")
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
        why = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            why = "no space left on device"
        elif exc.errno == errno.EROFS:
            why = "read-only file system"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            why = "permission denied"
        raise OutputNotWritableError(f"cannot write output {path}: {why} at {base}") from None
    finally:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()


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
    _refuse_inside_input(path, inputs)
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
    """:func:`_flock`, with a file system that refuses flock on a directory counted as "no flock" (None)."""
    if fcntl is None:
        return None
    try:
        return _flock(fd, flags)
    except OSError:
        return None


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
        if kind is None and _file_refusal(path, owned):
            raise ForeignOutputError(_file_refusal(path, owned))
        raise with_message(FileExistsError, "output {} already exists (pass {} to replace it)", path, OVERWRITE)
    if kind is not None:
        check_replaceable(path, inputs)
        return
    refusal = _file_refusal(path, owned)
    if refusal:
        raise ForeignOutputError(refusal)


def _remove(p):
    p = Path(p)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()

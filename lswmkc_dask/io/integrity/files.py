"""The files of a local kernel store read as untrusted input: only regular files, never
blocking, each bounded in size before it is read, its metadata parsed with errors that name
the file (:func:`checked_group`, :class:`CheckedLocalStore`).

zarr's own file system store opens whatever is at a key: a FIFO (named pipe) there blocks
the read for ever, a link to ``/dev/zero`` reads until memory runs out, and a JSON document
nested too deeply stops zarr with a ``RecursionError``. Every read of a local store by this
package goes through :class:`CheckedLocalStore`, which refuses those before opening anything.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeGuard

import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.storage import LocalStore

from ...errors import StoreFileError

#: The metadata file of a zarr v3 group or array.
METADATA = "zarr.json"
#: The largest group ``zarr.json`` read (16 MiB): its attributes hold a label per sample and a
#: manifest entry per chunk, about 1 MiB for 100 000 samples.
MAX_GROUP_METADATA = 16 << 20
#: The largest array ``zarr.json`` read (1 MiB): a shape, a chunk shape, codecs and a few attributes.
MAX_ARRAY_METADATA = 1 << 20
#: The array beside ``kernels`` with the training statistics of the kept kernels (docs/algorithm.md
#: section 8): shape (2, m, n) float64, the raw column means d and the centred diagonal (jitter
#: included), attributes ``kernel_index`` (their positions among the input kernels) and
#: ``n_kernels_in``; its sha256 is the manifest's. Stores prepared by earlier versions have none.
STATISTICS = "statistics"

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
               | getattr(os, "O_CLOEXEC", 0))
#: What a file is that is not a regular file, by the test of its mode (:func:`file_kind`).
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def is_local(location: Any) -> TypeGuard[str | os.PathLike[str]]:
    """True for a local path (str or Path), False for a URL or a zarr store object."""
    return isinstance(location, (str, os.PathLike)) and "://" not in str(location)


def file_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``os.stat_result.st_mode``) is when not a regular file
    (``"a FIFO (named pipe)"``, ``"a device"``, ``"a socket"``, ``"a directory"``), None for a regular file.
    """
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: Any, kind: str) -> str:
    """The message of a file at ``path`` that is ``kind`` (:func:`file_kind`), refused unread."""
    return f"{path} is {kind}, not a regular file: it is not read"


def file_problem(path: str | os.PathLike[str], limit: int | None = None) -> str | None:
    """What is wrong with the file at ``path`` (links followed), found without opening it, or None.

    Parameters
    ----------
    path : str or Path
    limit : int, optional
        The most bytes it may hold.

    Returns
    -------
    str or None
        ``"<path> is a FIFO (named pipe), not a regular file: ..."``, ``"<path> is a
        symbolic link to nothing"``, ``"<path> holds 5368709120 bytes, more than ..."``; None for a
        regular file within ``limit``, or no file at all (absence is reported elsewhere).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path} is a symbolic link to nothing ({os.readlink(path)})" if os.path.islink(path) else None
    except NotADirectoryError:
        return None
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    kind = file_kind(st.st_mode)
    if kind is not None:
        return _not_regular(path, kind)
    if limit is not None and st.st_size > limit:
        return _too_large(path, st.st_size, limit)
    return None


def _too_large(path, size, limit):
    """The message of a file at ``path`` of ``size`` bytes, over ``limit``, refused unread."""
    return f"{path} holds {size} bytes, more than the {limit} it can hold: it is not read"


def open_regular(path: str | os.PathLike[str], error: Callable[[str], Exception] = StoreFileError) -> IO[bytes]:
    """Open ``path`` (links followed) for binary reading if it is a regular file, without blocking
    (``O_NONBLOCK``: a FIFO put there after the check cannot block either); the caller closes it.

    Parameters
    ----------
    path : str or Path
    error : exception class
        Raised with the message for a file that is refused (:class:`StoreFileError` by default).

    Returns
    -------
    file object

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        No file at ``path``.
    StoreFileError
        (or ``error``) ``path`` is a FIFO, a device, a socket or a directory, or cannot be
        opened; the message names it and says why.
    """
    try:
        kind = file_kind(os.stat(path).st_mode)  # a device or a FIFO is never opened
        if kind is None:
            fd = os.open(path, _OPEN_FLAGS)
            kind = file_kind(os.fstat(fd).st_mode)  # replaced between the check and the open
            if kind is not None:
                os.close(fd)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or exc})") from None
    if kind is not None:
        raise error(_not_regular(path, kind))
    return os.fdopen(fd, "rb")


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path`` (links followed, :func:`open_regular`), refused
    unread if larger than ``limit``.

    Parameters
    ----------
    path : str or Path
    limit : int
        The most bytes read.

    Returns
    -------
    bytes

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        No file at ``path``.
    StoreFileError
        ``path`` is a FIFO, a device, a socket or a directory, holds more than ``limit``
        bytes, or cannot be opened (the message names it and says why).
    """
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise StoreFileError(_too_large(path, size, limit))
        data = fh.read(size + 1)
    if len(data) > size:  # grew since
        raise StoreFileError(f"{path} grew while it was read (written to now?): it is not read")
    return data


def metadata_limit(key: str) -> int:
    """The most bytes of the metadata file at ``key`` of a store: :data:`MAX_GROUP_METADATA` for
    the group's ``zarr.json``, :data:`MAX_ARRAY_METADATA` for an array's (``kernels/zarr.json``).
    """
    return MAX_GROUP_METADATA if key.strip("/") == METADATA else MAX_ARRAY_METADATA


def parse_json(text: str | bytes, fail: Callable[[str], Exception], *, obj: bool = False) -> Any:
    """The JSON value of ``text`` read from a file that may come from anywhere.

    Parameters
    ----------
    text : str or bytes
        UTF-8 JSON.
    fail : callable
        ``fail(why)`` returns the exception to raise (it names the file or member);
        ``why`` is ``"is not valid JSON (...)"``, ``"is JSON nested too deeply to be read"``
        or ``"holds a JSON array, not an object"``.
    obj : bool
        Refuse any value but a JSON object.

    Returns
    -------
    object
        A dict when ``obj``.

    Raises
    ------
    Exception
        ``fail(why)``: not UTF-8 JSON, nested too deeply for Python's parser, an integer of
        too many digits, or (with ``obj``) not an object.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise fail("is JSON nested too deeply to be read") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise fail(f"is not valid JSON ({' '.join(str(exc).split())[:200]})") from None
    if obj and not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
        raise fail(f"holds a JSON {kind}, not an object")
    return value


def load_metadata(path: str | os.PathLike[str], limit: int = MAX_ARRAY_METADATA) -> dict:
    """The JSON object in the metadata file ``path`` (``zarr.json``), read with :func:`read_bounded`.

    Parameters
    ----------
    path : str or Path
    limit : int
        The most bytes read.

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    StoreFileError
        Not a regular file, larger than ``limit``, not UTF-8 JSON, JSON nested too
        deeply, or not a JSON object (:func:`parse_json`); the message names the file.
    """
    return parse_json(read_bounded(path, limit), lambda why: StoreFileError(f"{path} {why}"), obj=True)


class CheckedLocalStore(LocalStore):
    """zarr's file system store (read only), that reads regular files only, without blocking,
    and metadata files (``zarr.json``) within :func:`metadata_limit`.

    Parameters
    ----------
    root : str or Path
        The store's directory.
    read_only : bool
        Must stay True (the default): this store is for reading untrusted stores.

    Notes
    -----
    A key whose file is a FIFO, a device, a socket or a directory raises
    :class:`StoreFileError` (a ``ValueError``) from :meth:`get` instead of blocking or
    reading without end; :meth:`exists` is true for any entry at the key (a symbolic link,
    a FIFO), so that such an entry is reported as what it is, not as missing.
    """

    def __init__(self, root: Path | str, *, read_only: bool = True) -> None:
        super().__init__(root, read_only=read_only)

    async def get(self, key: str, prototype: BufferPrototype | None = None, byte_range: Any = None) -> Buffer | None:
        """The bytes at ``key``, or None where there is no file (see :class:`zarr.abc.store.Store`).

        Raises
        ------
        StoreFileError
            The file at ``key`` is not a regular file, or a metadata file larger than its bound.
        """
        if not self._is_open:
            await self._open()
        limit = metadata_limit(key) if key.rsplit("/", 1)[-1] == METADATA else 1 << 62
        try:
            data = await asyncio.to_thread(read_bounded, self.root / key, limit)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(_byte_range(data, byte_range))

    async def get_partial_values(self, prototype: BufferPrototype, key_ranges: Any) -> list[Buffer | None]:
        """The bytes of each ``(key, byte_range)`` through :meth:`get`."""
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        """True when any entry is at ``key`` (a file, a link, a FIFO ...)."""
        return await asyncio.to_thread(os.path.lexists, self.root / key)


def _byte_range(data: bytes, byte_range: Any) -> bytes:
    """The part of ``data`` a zarr ``ByteRequest`` asks for (None: all of it)."""
    if byte_range is None:
        return data
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start : byte_range.end]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset :]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(0, len(data) - byte_range.suffix) :]
    raise TypeError(f"unexpected byte range {byte_range!r}")


def checked_group(location: Any, arrays: tuple[str, ...] = ()) -> zarr.Group:
    """The zarr group of a kernel store, opened read only; a local store through
    :class:`CheckedLocalStore`, its directory, its ``zarr.json`` and the ``zarr.json`` of each
    of ``arrays`` checked first (:func:`load_metadata`) where present.

    Parameters
    ----------
    location : str, Path, URL or zarr store
    arrays : tuple of str
        Names of arrays whose metadata is checked before zarr reads it.

    Returns
    -------
    zarr.Group

    Raises
    ------
    FileNotFoundError
        No store (no ``zarr.json``) at ``location``.
    StoreFileError
        ``location`` is not a directory, or a metadata file is not a regular file, is too
        large or is not a JSON object (the message names the file).
    """
    if not is_local(location):
        return zarr.open_group(location, mode="r", zarr_format=3)
    root = os.path.abspath(os.fspath(location))
    try:
        kind = file_kind(os.stat(root).st_mode)
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel store not found: {location}") from None
    if kind != "a directory":
        raise StoreFileError(f"{location} is {kind or 'a file'}, not a directory (a kernel store is a *.zarr directory)")
    for key in (METADATA, *(f"{a}/{METADATA}" for a in arrays)):
        path = os.path.join(root, *key.split("/"))
        if os.path.lexists(path):
            load_metadata(path, metadata_limit(key))
    return zarr.open_group(CheckedLocalStore(root), mode="r", zarr_format=3)

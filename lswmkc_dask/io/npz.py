"""Reading lswmkc's array files (``.npz`` archives, ``.npy`` files) in bounded memory and time.

A model file (``model.npz``) or a fit directory's arrays (``affinity.npz``,
``kstar_factor.npy``, ``snapshots.npz``) may come from elsewhere, damaged or made to
harm. What is read from them is checked before anything is allocated from it:

* only a regular file is opened: a FIFO, a device or a directory is refused before it
  is read (checked with ``os.stat``, opened with ``O_NONBLOCK``, checked again with
  ``os.fstat``), so that nothing waits on a writer that never comes;
* only the members asked for are read (others, whatever their size, are never
  decompressed);
* an archive holding two entries of one name is refused (readers differ on which
  one they take);
* each member's ``.npy`` header is read first, and once (versions 1.0 and 2.0): a
  plain boolean, integer, real or text dtype of the kind expected (never an object, a
  structured or a complex dtype), the number of dimensions and the sizes expected,
  and header plus data exactly the member's size in the archive; the data is then
  read from the same stream into what that header declared, so that a file rewritten
  meanwhile cannot make the reader allocate more;
* a member's bytes must lie within the file; a compressed member may expand at most
  :data:`MAX_EXPANSION`-fold (or to :data:`EXPANSION_FLOOR` bytes), so that a small
  file cannot make the reader allocate gigabytes (a "zip bomb"); lswmkc writes its
  archives uncompressed (:func:`numpy.savez`);
* sparse matrices (CSR parts) are checked in full before SciPy sees them
  (:func:`checked_csr`): index dtypes, ``indptr`` from 0, non-decreasing, ending at
  nnz, every column index in ``[0, n)``, finite data. SciPy's own constructor checks
  only the lengths, and an index out of range makes later operations read or write
  outside the arrays (a crash).

Every refusal is an :class:`ArrayFileError` (a ``ValueError``) naming the file and
the member; :class:`lswmkc_dask.io.model_file.ModelFileError` is one for model files.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
import tokenize
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "EXPANSION_FLOOR",
    "MAX_EXPANSION",
    "ArrayFileError",
    "Header",
    "NpzArchive",
    "checked_csr",
    "damaged",
    "nonfinite",
    "open_regular",
    "read_csr_members",
    "read_csr_npz",
    "read_npy",
]

#: A compressed member may decompress to at most this many times its compressed size ...
MAX_EXPANSION = 64
#: ... or to this many bytes, whichever is larger (4 MiB).
EXPANSION_FLOOR = 4 << 20

#: dtype kinds by the names used here: real floats, integers, booleans, text, bytes.
KINDS = {"f": "real floating-point", "i": "integer", "b": "boolean", "U": "text", "S": "bytes"}

#: What reading a damaged member may raise (zipfile, zlib, numpy's header parser, whose
#: tokenizer raises TokenError on an unclosed bracket); not MemoryError, which a large
#: genuine file may raise too (the command line's "out of memory").
_READ_ERRORS = (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError,
                RuntimeError, SyntaxError, OverflowError, tokenize.TokenError)
#: Bytes of a member's data read at a time.
_CHUNK = 1 << 24


class ArrayFileError(ValueError):
    """An array file of lswmkc (``.npz`` or ``.npy``) that is damaged or not what it
    should be; the message names the file and, in an archive, the member.
    """

    #: What the message tells the user to do.
    remedy = "write it again (rerun the lswmkc command that wrote it)"


def damaged(error: type[ArrayFileError]) -> str:
    """The end of every refusal: ``"the file is damaged or ...; <what to do>"``."""
    return f"the file is damaged or was not written by lswmkc; {error.remedy}"


def _kind(dtype: np.dtype) -> str:
    return {"u": "i"}.get(dtype.kind, dtype.kind)


def open_regular(path: str | os.PathLike[str], error: type[ArrayFileError] = ArrayFileError) -> IO[bytes]:
    """Open ``path`` for binary reading if it is a regular file, without ever blocking.

    Parameters
    ----------
    path : str or Path
        Links are followed; what they lead to must be a regular file.
    error : type of ArrayFileError
        The exception raised (a subclass names the kind of file in its type).

    Returns
    -------
    file object
        Opened ``"rb"``; the caller closes it.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ArrayFileError
        (or ``error``) ``path`` is a FIFO, a device, a socket or a directory; or it
        cannot be opened (the message says why).
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or exc})") from None
    _refuse_irregular(path, mode, error)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc.strerror or exc})") from None
    try:
        _refuse_irregular(path, os.fstat(fd).st_mode, error)  # replaced between stat and open
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _refuse_irregular(path, mode, error):
    if stat.S_ISREG(mode):
        return
    what = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")
    raise error(f"{path} is {what}, not a regular file: it is not read; give the file itself")


@dataclass(frozen=True)
class Header:
    """The ``.npy`` header of a member, checked.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
    fortran_order : bool
    nbytes : int
        Bytes of data the header declares (``prod(shape) * itemsize``).
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    nbytes: int


def _parse_header(fh: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fh)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(fh)
    raise ValueError(f".npy format version {version[0]}.{version[1]}, not 1.0 or 2.0")


def _check_dtype(dtype: np.dtype, kinds: str) -> str | None:
    """Why ``dtype`` is refused (None: accepted)."""
    if dtype.hasobject:
        return "holds Python objects (pickled data), which are never loaded"
    if dtype.names is not None or dtype.subdtype is not None:
        return f"has a structured dtype {dtype}"
    if _kind(dtype) not in kinds:
        want = " or ".join(KINDS[k] for k in kinds)
        return f"has dtype {dtype} ({_kind_name(dtype)}), expected {'an' if want[0] in 'aeiou' else 'a'} {want} dtype"
    return None


def _kind_name(dtype):
    return KINDS.get(_kind(dtype)) or {"c": "complex", "V": "raw bytes", "M": "datetime", "m": "timedelta"}.get(
        dtype.kind, dtype.kind)


def _check_shape(shape: tuple[int, ...], want: Sequence[int | None]) -> str | None:
    """Why ``shape`` is refused against ``want`` (None: any size on that axis)."""
    if len(shape) != len(want):
        return f"has {len(shape)} dimension{'s' if len(shape) != 1 else ''} {shape}, expected {len(want)} {_spell(want)}"
    if any(s < 0 for s in shape):
        return f"has a negative size in its shape {shape}"
    if any(w is not None and s != w for s, w in zip(shape, want, strict=True)):
        return f"has shape {shape}, expected {_spell(want)}"
    return None


def _spell(want):
    return "(" + ", ".join("any" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"


class _Source:
    """Where a member's bytes come from: the zip member of an archive, or a whole ``.npy`` file."""

    def __init__(self, path: Path, what: str, error: type[ArrayFileError]) -> None:
        self.path, self.what, self.error = path, what, error

    def fail(self, why: str) -> ArrayFileError:
        what = f"{self.what} " if self.what else ""
        return self.error(f"{self.path}: {what}{why}; {damaged(self.error)}")


class NpzArchive:
    """An ``.npz`` archive opened for checked reading (a context manager).

    Parameters
    ----------
    path : str or Path
        A regular file (see :func:`open_regular`).
    error : type of ArrayFileError
        The exception raised for every refusal.

    Attributes
    ----------
    path : pathlib.Path
    names : list of str
        The archive's ``.npy`` members, without the suffix, in archive order.
    others : list of str
        Entries that are not ``.npy`` members (never read).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ArrayFileError
        (or ``error``) Not a regular file, or not a readable zip archive (truncated,
        say); the message names the file.
    """

    def __init__(self, path: str | os.PathLike[str], error: type[ArrayFileError] = ArrayFileError) -> None:
        self.path, self.error = Path(path), error
        self._fh = open_regular(path, error)
        try:
            self._size = os.fstat(self._fh.fileno()).st_size
            self._zip = zipfile.ZipFile(self._fh)
        except _READ_ERRORS as exc:
            self._fh.close()
            why = _why(exc)
            raise error(f"{self.path} is damaged or not an .npz archive ({why}); {error.remedy}") from None
        twice = [(n, c) for n, c in Counter(i.filename for i in self._zip.infolist()).items() if c > 1]
        if twice:
            self.close()
            name, count = twice[0]
            what = f"member {name[:-4]!r}" if name.endswith(".npy") else f"entry {name!r}"
            raise error(f"{self.path}: {what} appears {count} times in the archive (readers differ on which copy "
                        f"they take){f', as do {len(twice) - 1} other names' if len(twice) > 1 else ''}; "
                        f"{damaged(error)}")
        self._infos: dict[str, zipfile.ZipInfo] = {}
        self.others: list[str] = []
        for info in self._zip.infolist():
            if info.filename.endswith(".npy") and not info.is_dir():
                self._infos[info.filename[:-4]] = info
            else:
                self.others.append(info.filename)
        self.names = list(self._infos)

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the archive and its file."""
        self._zip.close()
        self._fh.close()

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def header(self, name: str, kinds: str, shape: Sequence[int | None]) -> Header:
        """The checked header of member ``name``; nothing of its data is read.

        Parameters
        ----------
        name : str
            The member, without ``.npy``.
        kinds : str
            The dtype kinds accepted: ``"f"`` real floats, ``"i"`` integers (signed or
            not), ``"b"`` booleans, ``"U"`` text.
        shape : sequence of int or None
            The shape expected, None for any size on an axis (``()`` for a scalar).

        Returns
        -------
        Header

        Raises
        ------
        ArrayFileError
            (or the archive's ``error``) The member is missing, compressed beyond
            :data:`MAX_EXPANSION`, its bytes lie outside the file, its header is
            unreadable, or its dtype, shape or size is not as expected.
        """
        with self._member(name) as (src, size, fh):
            return _read_header(src, fh, kinds, shape, size)

    @contextlib.contextmanager
    def _member(self, name: str) -> Iterator[tuple[_Source, int, IO[bytes]]]:
        """Member ``name`` opened for reading, with its zip entry checked: its source (for
        messages), its size and the stream.
        """
        src = _Source(self.path, f"member {name!r}", self.error)
        info = self._infos.get(name)
        if info is None:
            raise self.error(f"{self.path}: no member {name!r}; {damaged(self.error)}")
        self._check_info(src, info)
        try:
            fh = self._zip.open(info)
        except _READ_ERRORS as exc:
            raise src.fail(f"has no readable .npy header ({_why(exc)})") from None
        with fh:
            yield src, info.file_size, fh

    def _check_info(self, src, info):
        if info.flag_bits & 0x1:
            raise src.fail("is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise src.fail(f"is compressed with zip method {info.compress_type} (lswmkc writes its members "
                           "uncompressed; deflate is read too)")
        if info.header_offset + info.compress_size > self._size:
            raise src.fail(f"declares {info.compress_size} bytes at offset {info.header_offset}, beyond the end of "
                           f"the file ({self._size} bytes; truncated?)")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise src.fail(f"is stored uncompressed in {info.compress_size} bytes but declares {info.file_size}")
        if info.file_size > max(EXPANSION_FLOOR, MAX_EXPANSION * info.compress_size):
            raise src.fail(f"would expand from {info.compress_size} compressed bytes to {info.file_size} "
                           f"(more than {MAX_EXPANSION}-fold): refused unread, as a 'zip bomb' would be")

    def read(self, name: str, kinds: str, shape: Sequence[int | None], max_nbytes: int | None = None) -> np.ndarray:
        """Member ``name``: its header read and checked as by :meth:`header`, then its data
        from the same stream. The header is parsed once: what is allocated is what was
        checked, even if the file changes while it is read.

        Parameters
        ----------
        name, kinds, shape
            As for :meth:`header`.
        max_nbytes : int, optional
            Refuse, unread, data larger than this (in bytes).

        Returns
        -------
        ndarray
            Of the checked dtype and shape (no object dtype: nothing is unpickled).

        Raises
        ------
        ArrayFileError
            (or the archive's ``error``) As for :meth:`header`; more data than
            ``max_nbytes``; or the data cannot be read (a bad CRC, a truncated member).
        """
        with self._member(name) as (src, size, fh):
            h = _read_header(src, fh, kinds, shape, size)
            if max_nbytes is not None and h.nbytes > max_nbytes:
                raise src.fail(f"declares {h.nbytes} bytes of data, more than the {max_nbytes} read for it")
            return _read_data(src, fh, h)


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _read_header(src: _Source, fh: IO[bytes], kinds: str, want: Sequence[int | None], size: int) -> Header:
    """The ``.npy`` header at the start of ``fh`` (``size`` bytes with the data), checked."""
    try:
        shape, fortran, dtype = _parse_header(fh)
        offset = fh.tell()
    except _READ_ERRORS as exc:
        raise src.fail(f"has no readable .npy header ({_why(exc)})") from None
    return _checked_header(src, shape, fortran, dtype, kinds, want, size - offset)


def _read_data(src: _Source, fh: IO[bytes], h: Header) -> np.ndarray:
    """The data that follows header ``h`` in ``fh``: exactly ``h.nbytes`` bytes, read a chunk at a time."""
    if h.dtype.itemsize == 0:
        return np.zeros(h.shape, h.dtype)
    raw = np.empty(h.nbytes, np.uint8)
    view = raw.data
    done = 0
    try:
        while done < h.nbytes:
            got = fh.readinto(view[done:done + _CHUNK])  # type: ignore[attr-defined]
            if not got:
                raise EOFError(f"the data ends after {done} of {h.nbytes} bytes")
            done += got
        if fh.read(1):  # (at the end of a zip member this also checks its CRC)
            raise ValueError(f"more than the {h.nbytes} bytes of data its header declares")
    except _READ_ERRORS as exc:
        raise src.fail(f"cannot be read ({_why(exc)})") from None
    flat = raw.view(h.dtype)
    return flat.reshape(h.shape[::-1]).T if h.fortran_order else flat.reshape(h.shape)


def _checked_header(src, shape, fortran, dtype, kinds, want, size):
    why = _check_dtype(dtype, kinds) or _check_shape(tuple(shape), want)
    if why:
        raise src.fail(why)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != size:
        raise src.fail(f"declares shape {tuple(shape)} of {dtype} ({nbytes} bytes) but holds {size} bytes of data")
    return Header(tuple(shape), dtype, bool(fortran), nbytes)


def read_npy(path: str | os.PathLike[str], kinds: str, shape: Sequence[int | None], mmap: bool = False,
             error: type[ArrayFileError] = ArrayFileError, finite: bool = False) -> np.ndarray:
    """A ``.npy`` file, its header checked before its data is read (or mapped).

    Parameters
    ----------
    path : str or Path
        A regular file.
    kinds : str
        The dtype kinds accepted (see :meth:`NpzArchive.header`).
    shape : sequence of int or None
        The shape expected, None for any size on an axis.
    mmap : bool
        Map the file read-only (``mmap_mode="r"``) instead of reading it.
    error : type of ArrayFileError
    finite : bool
        Refuse a value that is not finite (NaN or infinite; checked block by block).

    Returns
    -------
    ndarray or numpy.memmap

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ArrayFileError
        (or ``error``) Not a regular file, not a ``.npy`` file, a dtype, shape or
        size not as expected (the data must fill the file exactly), or (``finite``)
        values that are not finite.
    """
    src = _Source(Path(path), "", error)
    a = _read_npy(src, path, kinds, shape, mmap, error)
    why = nonfinite(a) if finite else None
    if why:
        raise src.fail(why)
    return a


def _read_npy(src, path, kinds, shape, mmap, error):
    with open_regular(path, error) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            raise src.fail(f"cannot be read ({_why(exc)})") from None
        h = _read_header(src, fh, kinds, shape, size)  # parsed once: what is read is what was checked
        if not mmap:
            return _read_data(src, fh, h)
        if h.nbytes == 0:
            return np.empty(h.shape, h.dtype, order="F" if h.fortran_order else "C")
        try:
            # the file already opened and checked (not the path again, which may have been replaced)
            return np.memmap(fh, dtype=h.dtype, mode="r", shape=h.shape, order="F" if h.fortran_order else "C",
                             offset=size - h.nbytes)
        except _READ_ERRORS as exc:
            raise src.fail(f"cannot be read ({_why(exc)})") from None


def nonfinite(a: np.ndarray, rows: int = 4096) -> str | None:
    """``"has N values that are not finite (NaN or infinite)"`` for a float array ``a``
    (a memory map too: read ``rows`` rows at a time), or None.
    """
    if a.dtype.kind not in "fc" or a.size == 0:
        return None
    flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)
    bad = sum(int(np.count_nonzero(~np.isfinite(flat[i:i + rows]))) for i in range(0, flat.shape[0], rows))
    return f"has {bad} value{'s' if bad > 1 else ''} that are not finite (NaN or infinite)" if bad else None


def checked_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n: int, fail: Any,
                simplex: float | None = None) -> sp.csr_matrix:
    """An n x n CSR matrix from its parts, every part checked before SciPy sees it.

    Parameters
    ----------
    data : ndarray of shape (nnz,)
        Real and finite.
    indices : ndarray of shape (nnz,)
        Integers in ``[0, n)``.
    indptr : ndarray of shape (n + 1,)
        Integers from 0, non-decreasing, ending at nnz.
    n : int
        Rows and columns.
    fail : callable
        ``fail(why)`` returns the exception to raise (it names the file and parts).
    simplex : float, optional
        Also require each row on the probability simplex within this tolerance
        (entries >= 0 summing to 1) and a zero diagonal, as Z of LSWMKC is.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)

    Raises
    ------
    Exception
        ``fail(why)``, for the first problem found.
    """
    why = _csr_problem(data, indices, indptr, n)
    if why is None:
        z = sp.csr_matrix((data, indices, indptr), shape=(n, n))
        try:
            z.check_format(full_check=True)
        except ValueError as exc:  # (what the checks above already exclude)
            why = str(exc)
        else:
            why = None if simplex is None else _simplex_problem(z, simplex)
            if why is None:
                return z
    raise fail(why)


def _csr_problem(data, indices, indptr, n):
    for part, a, kinds in (("data", data, "f"), ("indices", indices, "i"), ("indptr", indptr, "i")):
        if _kind(a.dtype) not in kinds or a.ndim != 1:
            return f"the {part} are {a.dtype} of shape {a.shape}, expected a 1-D array of {KINDS[kinds]} values"
    if indptr.shape != (n + 1,):
        return f"indptr has {indptr.size} entries, expected n + 1 = {n + 1}"
    if indptr[0] != 0:
        return f"indptr starts at {int(indptr[0])}, not 0"
    down = np.flatnonzero(indptr[1:] < indptr[:-1])
    if down.size:
        return f"indptr decreases after row {int(down[0])} (from {int(indptr[down[0]])} to {int(indptr[down[0] + 1])})"
    if int(indptr[-1]) != indices.size or indices.size != data.size:
        return f"indptr ends at {int(indptr[-1])} but there are {indices.size} indices and {data.size} values"
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        bad = int(np.flatnonzero((indices < 0) | (indices >= n))[0])
        row = int(np.searchsorted(indptr, bad, side="right")) - 1
        return f"column index {int(indices[bad])} of row {row} is outside [0, {n})"
    if not np.all(np.isfinite(data)):
        return f"{int(np.count_nonzero(~np.isfinite(data)))} values are not finite"
    return None


def _simplex_problem(z, tol):
    if z.nnz and float(z.data.min()) < -tol:
        row = int(np.searchsorted(z.indptr, int(np.argmin(z.data)), side="right")) - 1
        return f"row {row} has a negative entry {float(z.data.min()):g}"
    sums = np.asarray(z.sum(axis=1)).ravel()
    off = np.flatnonzero(np.abs(sums - 1.0) > tol)
    if off.size:
        return f"row {int(off[0])} sums to {sums[off[0]]:.12g}, not 1"
    diag = np.flatnonzero(z.diagonal())
    if diag.size:
        return f"the diagonal entry of row {int(diag[0])} is not 0"
    return None


def read_csr_members(archive: NpzArchive, prefix: str = "", n: int | None = None,
                     simplex: float | None = None) -> sp.csr_matrix:
    """A square CSR matrix held in members ``PREFIXshape``, ``PREFIXindptr``,
    ``PREFIXindices`` and ``PREFIXdata`` of ``archive`` (scipy's :func:`~scipy.sparse.save_npz`
    names with no prefix), each checked before it is read and all together by
    :func:`checked_csr`.

    Parameters
    ----------
    archive : NpzArchive
    prefix : str
        ``"affinity_"`` in a model file, ``"z3_"`` in a snapshots file.
    n : int, optional
        The size expected (rows and columns); default: what ``PREFIXshape`` says.
    simplex : float, optional
        Also require rows on the simplex and a zero diagonal (see :func:`checked_csr`).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)

    Raises
    ------
    ArrayFileError
        (the archive's ``error``) A member missing or not as expected, or parts that
        do not form the matrix (an index out of range, a decreasing ``indptr``, values
        not finite); the message names the file and the members.
    """
    path, error = archive.path, archive.error
    tail = damaged(error)
    shape = tuple(int(x) for x in archive.read(prefix + "shape", "i", (2,)))
    if shape[0] != shape[1] or (n is not None and shape[0] != n) or shape[0] < 0:
        want = "a square shape" if n is None else f"({n}, {n}) for {n} samples"
        raise error(f"{path}: member {prefix + 'shape'!r} is {shape}, expected {want}; {tail}")
    n = shape[0]
    indptr = archive.read(prefix + "indptr", "i", (n + 1,))
    nnz = int(indptr[-1])
    if not 0 <= nnz <= n * n:
        raise error(f"{path}: member {prefix + 'indptr'!r} ends at {nnz}, outside [0, n^2 = {n * n}]; {tail}")
    indices = archive.read(prefix + "indices", "i", (nnz,))
    data = archive.read(prefix + "data", "f", (nnz,))
    parts = ", ".join(repr(prefix + p) for p in ("data", "indices", "indptr"))
    what = f"a {n} x {n} CSR matrix" + (" with rows on the simplex" if simplex is not None else "")
    return checked_csr(data, indices, indptr, n, lambda why: error(
        f"{path}: members {parts} do not form {what} ({why}); {tail}"), simplex=simplex)


def read_csr_npz(path: str | os.PathLike[str], n: int | None = None,
                 error: type[ArrayFileError] = ArrayFileError) -> sp.csr_matrix:
    """A square CSR matrix written by :func:`scipy.sparse.save_npz` (``affinity.npz``),
    checked in full (:func:`read_csr_members`) before it is built.

    Parameters
    ----------
    path : str or Path
        A regular file.
    n : int, optional
        The size expected (rows and columns); default: what the file says.
    error : type of ArrayFileError

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ArrayFileError
        (or ``error``) Not a regular file, a truncated or damaged archive, not a
        square CSR matrix of ``n`` rows, or parts that do not form one; the message
        names the file and what is wrong.
    """
    with NpzArchive(path, error) as archive:
        fmt = _text(archive.read("format", "US", ()))
        if fmt != "csr":
            raise error(f"{path}: member 'format' is {fmt!r}, not 'csr'; the file is damaged or was not written by "
                        "lswmkc")
        return read_csr_members(archive, "", n)


def _text(value: np.ndarray) -> str:
    """A scalar text member as str (scipy writes ``format`` as bytes, NumPy text as unicode)."""
    v = value[()]
    return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)

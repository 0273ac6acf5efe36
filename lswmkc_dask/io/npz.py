"""Reading users' ``.npz`` files (kernels, features, labels, cross-kernels) from untrusted sources in
bounded memory and time: the one loader of them (:func:`lswmkc_dask.io.labels.load_arrays` reads the
kernel, feature and label files through it).

NumPy's ``.npy`` header parser (never pickle) with checks on top: regular files only
(:func:`~lswmkc_dask.io.integrity.files.open_regular`), members read bounded and checked (:class:`NpzArchive`).
Every refusal is an :class:`ArrayFileError` (a ``ValueError``) naming the file and member.
"""

from __future__ import annotations

import io
import math
import os
import tokenize
import zipfile
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..errors import ArrayFileError
from .integrity.files import open_regular

#: A compressed member may decompress to at most this many times its compressed size ...
MAX_EXPANSION = 64
#: ... or to this many bytes, whichever is larger (4 MiB).
EXPANSION_FLOOR = 4 << 20

#: dtype kinds by the names used here: real floats, integers, booleans, text, bytes.
KINDS = {"f": "real floating-point", "i": "integer", "b": "boolean", "U": "text", "S": "bytes", "c": "complex"}

#: What reading a damaged file may raise (zipfile, zlib, numpy's header parser and its tokenizer);
#: not MemoryError, which a large genuine file may raise too.
_READ_ERRORS = (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError,
                RuntimeError, SyntaxError, OverflowError, tokenize.TokenError)


def damaged(error: type[ArrayFileError]) -> str:
    """The end of every refusal: ``"the file is damaged or ...; <what to do>"``."""
    return f"the file is damaged or was not written by lswmkc; {error.remedy}"


def _why(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def check_array(a: np.ndarray, kinds: str, want: Sequence[int | None] | None) -> str | None:
    """Why array ``a`` is refused (``"has dtype ..."``, ``"has shape ..."``), or None.

    Parameters
    ----------
    a : ndarray
    kinds : str
        The dtype kinds accepted: ``"f"`` real floats, ``"i"`` integers (signed or
        not), ``"b"`` booleans, ``"U"`` text.
    want : sequence of int or None, or None
        The shape expected, None for any size on an axis (``()`` for a scalar); None: any shape.
    """
    dtype, shape, kind = a.dtype, a.shape, {"u": "i"}.get(a.dtype.kind, a.dtype.kind)
    if dtype.hasobject:
        return "holds Python objects (pickled data), which are never loaded"
    if dtype.names is not None or dtype.subdtype is not None:
        return f"has a structured dtype {dtype}"
    if kind not in kinds:
        w = " or ".join(KINDS[k] for k in kinds)
        name = KINDS.get(kind) or {"c": "complex", "V": "raw bytes"}.get(dtype.kind, dtype.kind)
        return f"has dtype {dtype} ({name}), expected {'an' if w[0] in 'aeiou' else 'a'} {w} dtype"
    if want is None:
        return None
    spelt = "(" + ", ".join("any" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
    if len(shape) != len(want):
        return f"has {len(shape)} dimension{'s' if len(shape) != 1 else ''} {shape}, expected {len(want)} {spelt}"
    if any(w is not None and s != w for s, w in zip(shape, want, strict=True)):
        return f"has shape {shape}, expected {spelt}"
    return None


def nonfinite(a: np.ndarray, rows: int = 4096) -> str | None:
    """``"has N values that are not finite (NaN or infinite)"`` for a float array ``a``
    (a memory map too: read ``rows`` rows at a time), or None.
    """
    if a.dtype.kind not in "fc" or a.size == 0:
        return None
    flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)
    bad = sum(int(np.count_nonzero(~np.isfinite(flat[i:i + rows]))) for i in range(0, flat.shape[0], rows))
    return f"has {bad} value{'s' if bad > 1 else ''} that are not finite (NaN or infinite)" if bad else None


class NpzArchive:
    """An ``.npz`` archive at ``path`` (a regular file) opened for checked reading (a context
    manager); every refusal is an ``error``. :attr:`names`: its ``.npy`` members, without suffix.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ArrayFileError
        (or ``error``) Not a regular file, not a readable zip archive (truncated,
        say), or a name found twice in it; the message names the file.
    """

    def __init__(self, path: str | os.PathLike[str], error: type[ArrayFileError] = ArrayFileError) -> None:
        self.path, self.error = path, error
        self._fh = open_regular(path, error)
        try:
            self._zip = zipfile.ZipFile(self._fh)
        except _READ_ERRORS as exc:
            self._fh.close()
            raise error(f"{path} is damaged or not an .npz archive ({_why(exc)}); {error.remedy}") from None
        twice = [(n, c) for n, c in Counter(self._zip.namelist()).items() if c > 1]
        if twice:
            self.close()
            raise error(f"{path}: entry {twice[0][0]!r} appears {twice[0][1]} times in the archive (readers differ "
                        f"on which copy they take); {damaged(error)}")
        self.names = [n[:-4] for n in self._zip.namelist() if n.endswith(".npy")]

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the archive and its file."""
        self._zip.close()
        self._fh.close()

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def fail(self, name: str, why: str) -> ArrayFileError:
        """The refusal of member ``name``: ``"PATH: member 'NAME' WHY; the file is damaged ..."``."""
        return self.error(f"{self.path}: member {name!r} {why}; {damaged(self.error)}")

    def read(self, name: str, kinds: str, shape: Sequence[int | None] | None) -> np.ndarray:
        """Member ``name``, read once (bounded) and checked (:func:`check_array`).

        Parameters
        ----------
        name : str
            The member, without ``.npy``.
        kinds, shape
            As for :func:`check_array`.

        Raises
        ------
        ArrayFileError
            (or the archive's ``error``) The member is missing, would expand beyond
            :data:`MAX_EXPANSION`, cannot be read (a bad CRC, truncated), or its
            header, dtype, shape or size is not as expected.
        """
        if name not in self.names:
            raise self.error(f"{self.path}: no member {name!r}; {damaged(self.error)}")
        info = self._zip.getinfo(name + ".npy")
        if info.file_size > max(EXPANSION_FLOOR, MAX_EXPANSION * info.compress_size):
            raise self.fail(name, f"would expand from {info.compress_size} compressed bytes to {info.file_size} "
                                  f"(more than {MAX_EXPANSION}-fold): refused unread, as a 'zip bomb' would be")
        try:
            raw = self._zip.read(info)  # at most file_size bytes, its CRC checked
            fh = io.BytesIO(raw)
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            dims, fortran, dtype = read_header(fh)
            why = check_array(np.broadcast_to(np.empty((), dtype), dims), kinds, shape)  # nothing allocated
        except _READ_ERRORS as exc:
            raise self.fail(name, f"has no readable .npy header ({_why(exc)})") from None
        nbytes, held = math.prod(dims) * dtype.itemsize, len(raw) - fh.tell()
        if why or nbytes != held:
            raise self.fail(name, why or f"declares shape {dims} of {dtype} ({nbytes} bytes) but holds {held} bytes")
        a = np.frombuffer(raw, dtype, math.prod(dims), fh.tell()) if nbytes else np.zeros(dims, dtype)
        return a.reshape(dims[::-1]).T if fortran else a.reshape(dims)

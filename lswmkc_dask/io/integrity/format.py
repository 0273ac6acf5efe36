"""The kernel store's format: constants, chunk grid and codecs, the manifest, the messages."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import zarr
from numpy.typing import ArrayLike
from zarr.abc.store import Store
from zarr.codecs import Crc32cCodec

__all__ = ["CHECKSUM", "DIAGONAL_TOL", "MANIFEST_VERSION", "OLD_STORE_FORMATS", "PROTECTED_ATTRIBUTES", "STORE_FORMAT",
           "VALUE_TOL", "Chunk", "attribute_digests", "chunk_codecs", "chunk_crc32c", "chunks_of", "damaged",
           "make_manifest", "old_format_message", "store_name"]

STORE_FORMAT = "lswmkc-kernel-store/2"
#: Formats of earlier versions (no chunk checksums, no manifest): refused, never read.
OLD_STORE_FORMATS = ("lswmkc-kernel-store/1",)
#: Version 2 adds ``max_abs`` and ``attributes_sha256``; version 1 manifests are refused.
MANIFEST_VERSION = 2
CHECKSUM = "crc32c"
#: A preprocessed kernel has unit diagonal (prepare writes exactly 1.0).
DIAGONAL_TOL = 1e-12
#: Relative tolerance of the bound ``|K_ij| <= max(1, max_abs_p)``: a preprocessed
#: kernel has unit diagonal, so ``|K_ij| <= 1`` when it is positive semidefinite; the
#: manifest records each kernel's largest ``|K_ij|`` for those that are not quite.
VALUE_TOL = 1e-9
#: Group attributes whose sha256 the manifest holds (edited, they would change results
#: or their reading: the metrics, the number of clusters, the kernel names).
PROTECTED_ATTRIBUTES = ("n_kernels", "n_samples", "kernel_names", "labels", "dtype")
#: Name of the zarr array inside the store's group.
ARRAY = "kernels"
#: The store's dtypes (``dtype`` attribute -> zarr dtype).
DTYPES = {"float64": "<f8", "float32": "<f4"}
_REMEDY = "rerun `lswmkc prepare` or restore the store"
#: Where a kernel store is: a local path, an fsspec URL, or a zarr store object (in memory).
StoreLocation: TypeAlias = str | os.PathLike[str] | Store


#: What opening something that is not a kernel store raises (see :func:`kernel_array`).
NOT_A_STORE = (KeyError, FileNotFoundError, ValueError, TypeError, AttributeError)


def kernel_array(location: StoreLocation) -> tuple[dict, zarr.Array]:
    """(group attributes, kernel array) of the zarr group at ``location``, unchecked.

    Parameters
    ----------
    location : str, Path or zarr store

    Returns
    -------
    attrs : dict
    arr : zarr.Array of shape (m, n, n)

    Raises
    ------
    KeyError, FileNotFoundError, ValueError, TypeError, AttributeError (:data:`NOT_A_STORE`)
        Not a zarr group holding an array named ``kernels`` (a group of that name: TypeError).
    """
    group = zarr.open_group(location, mode="r")
    attrs = dict(group.attrs)
    arr = group[ARRAY]
    if not isinstance(arr, zarr.Array):
        raise TypeError(f"{ARRAY!r} is a group, not an array")
    return attrs, arr


def store_name(location: StoreLocation) -> str:
    """How messages name a store (str, Path or zarr store): its path or URL, or "in-memory"."""
    if isinstance(location, (str, os.PathLike)):
        return str(location)
    return f"in-memory ({type(location).__name__})"


def damaged(location: StoreLocation, problems: Sequence[str]) -> str:
    """The message of a damaged store: its name, the ``problems`` (list of str), what to do."""
    return f"kernel store {store_name(location)} is damaged: {'; '.join(problems)}; {_REMEDY}"


def old_format_message(location: StoreLocation, fmt: str) -> str:
    """The message refusing a store of an earlier format ``fmt`` (``lswmkc-kernel-store/1``)."""
    return (
        f"kernel store {store_name(location)} has format {fmt}, written by an earlier version without chunk "
        f"checksums or a manifest, which this version no longer reads (damage in it would go unnoticed): rerun "
        f"`lswmkc prepare` on the original kernels to rewrite it as {STORE_FORMAT}"
    )


def _spans(values):
    """``[80, 81, 82, 90]`` -> ``"80-82, 90"`` (sorted unique integers as ranges)."""
    values = sorted({int(v) for v in values})
    out = []
    for _, grp in itertools.groupby(enumerate(values), lambda t: t[1] - t[0]):
        run = [v for _, v in grp]
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ", ".join(out[:8] + ([f"... ({len(values)} in all)"] if len(out) > 8 else []))


def row_spans(values):
    """"row 85" or "rows 80-82, 90"."""
    values = {int(v) for v in values}
    return f"row {next(iter(values))}" if len(values) == 1 else f"rows {_spans(values)}"


def kernel_label(p, names):
    """"kernel 2", or "kernel 2 (gist)" when the store names it otherwise."""
    name = names[p] if isinstance(names, list) and p < len(names) else None
    return f"kernel {p}" if name in (None, f"kernel {p}") else f"kernel {p} ({name})"


def kernels_label(ps, m, names):
    """"all kernels", "kernel 2 (gist)" or "kernels 0, 2": the kernels ``ps`` of ``m``."""
    ps = sorted({int(p) for p in ps})
    if len(ps) == m and m > 1:
        return "all kernels"
    if len(ps) == 1:
        return kernel_label(ps[0], names)
    return "kernels " + ", ".join(kernel_label(p, names).removeprefix("kernel ") for p in ps)


def row_range(start, stop):
    """Rows ``start:stop`` as an inclusive range, "rows 80-119"."""
    return f"rows {start}-{stop - 1}" if stop - start > 1 else f"row {start}"


@dataclass(frozen=True)
class Chunk:
    """One chunk of the kernel array: grid ``coords`` (kernel, row, column block), its ``key`` in
    the store (``kernels/c/0/2/0``), and the ``(start, stop)`` of its ``rows`` and ``kernels``.
    """

    coords: tuple
    key: str
    rows: tuple
    kernels: tuple

    def describe(self, m, names=None):
        """"the chunk of rows 80-119 of all kernels (kernels/c/0/2/0)"."""
        which = kernels_label(range(*self.kernels), m, names)
        return f"the chunk of {row_range(*self.rows)} of {which} ({self.key})"


def chunks_of(arr: Any) -> list:
    """Every chunk (list of :class:`Chunk`) of a kernel array ``arr`` (m, n, n), in grid order."""
    shape, chunks = arr.shape, arr.chunks
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    prefix = arr.store_path.path
    out = []
    for coords in itertools.product(*map(range, grid)):
        key = arr.metadata.encode_chunk_key(coords)
        rows = (coords[1] * chunks[1], min(shape[1], (coords[1] + 1) * chunks[1]))
        kernels = (coords[0] * chunks[0], min(shape[0], (coords[0] + 1) * chunks[0]))
        out.append(Chunk(coords, f"{prefix}/{key}" if prefix else key, rows, kernels))
    return out


def chunk_codecs() -> list:
    """Bytes-to-bytes codecs of the kernel array: a crc32c checksum, no compression."""
    return [Crc32cCodec()]


def chunk_crc32c(block: np.ndarray, chunk_shape: tuple, dtype: Any = "<f8") -> int:
    """The crc32c of the chunk holding ``block``: the bytes zarr's ``crc32c`` codec checksums.

    The chunk's values in C order, the rows past the array's last (the last chunk) padded
    with the fill value 0; ``block`` is not copied.

    Parameters
    ----------
    block : ndarray of shape (m, rows, n)
        The chunk's rows (the last chunk may hold fewer than ``chunk_shape[1]``).
    chunk_shape : tuple of int
        ``(m, block_rows, n)``.
    dtype : str
        The store's dtype ("<f8" or "<f4"): the bytes that are checksummed.

    Returns
    -------
    int
    """
    import google_crc32c

    data = np.asarray(block, dtype=dtype)
    pad = bytes((chunk_shape[1] - data.shape[1]) * data.shape[2] * data.itemsize)
    crc = 0
    for kernel in data:  # each kernel's rows are contiguous, then the padding of its rows
        crc = google_crc32c.extend(crc, np.ascontiguousarray(kernel).reshape(-1).view(np.uint8))
        crc = google_crc32c.extend(crc, pad) if pad else crc
    return int(crc)


def _canonical(value):
    """The canonical JSON text of an attribute value (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def attribute_digests(attrs: dict) -> dict:
    """Name -> hex sha256 of each protected attribute's canonical JSON (:data:`PROTECTED_ATTRIBUTES`;
    an absent one hashed as null) of a store's group attributes ``attrs``.
    """
    return {k: hashlib.sha256(_canonical(attrs.get(k)).encode()).hexdigest() for k in PROTECTED_ATTRIBUTES}


def make_manifest(arr: Any, crcs: Any, max_abs: ArrayLike, attrs: dict) -> dict:
    """The manifest of a kernel store (group attribute ``manifest``), written last.

    Parameters
    ----------
    arr : zarr.Array
        The kernel array of shape (m, n, n), after all chunks are written.
    crcs : dict
        Chunk key -> crc32c (:func:`chunk_crc32c`).
    max_abs : array_like of shape (m,)
        Largest ``|K_ij|`` of each stored kernel (in the stored precision).
    attrs : dict
        The other group attributes (their digests: :func:`attribute_digests`).

    Returns
    -------
    dict
        JSON-ready.
    """
    table = chunks_of(arr)
    return {
        "version": MANIFEST_VERSION,
        "array": ARRAY,
        "shape": list(arr.shape),
        "chunks": list(arr.chunks),
        "chunk_grid": [-(-s // c) for s, c in zip(arr.shape, arr.chunks)],
        "checksum": CHECKSUM,
        "chunk_keys": [c.key for c in table],
        "chunk_rows": [list(c.rows) for c in table],
        "chunk_crc32c": [int(crcs[c.key]) for c in table],
        "max_abs": [float(v) for v in np.asarray(max_abs, dtype=np.float64)],
        "attributes_sha256": attribute_digests(json.loads(_canonical({k: attrs.get(k) for k in PROTECTED_ATTRIBUTES}))),
    }


def zarr_sync(coro):
    """Run a zarr coroutine to its result (zarr's own event loop)."""
    from zarr.core.sync import sync

    return sync(coro)

"""Integrity of a kernel store: checksummed chunks, a manifest, checks at open and at every read.

A store of format ``lswmkc-kernel-store/2`` (written by :func:`lswmkc_dask.prepare`)
has

* every chunk written with zarr v3's ``crc32c`` codec (the last bytes-to-bytes codec,
  no compression);
* a manifest in the group attributes, written last: array shape, chunk shape and
  grid, the key, row range and crc32c of every chunk, the largest ``|K_ij|`` of each
  kernel, and the sha256 of the attributes the results depend on (labels, kernel
  names, counts, dtype).

Checks:

* at open (:func:`store_problems`, called by :func:`lswmkc_dask.open_store`, so by
  every fit and sweep given a path): the format, the array against its attributes
  and its manifest, the attributes against their manifest digests, the labels, and
  every chunk present (zarr would read a missing chunk as zeros, its fill value) and
  a file of the store rather than a symbolic link;
* at read (:func:`checked_read`, called by :func:`lswmkc_dask.io.read_store_rows` in
  the process and on the Dask workers): each chunk's raw bytes are checked against
  their crc32c trailer AND the manifest's crc32c before they are decoded, then for
  finite values, ``|K_ij|`` within the manifest's bound and a unit diagonal; any
  failure is a :class:`KernelInputError` naming the store, the kernel(s), the rows
  and what to do;
* :func:`verify_store` (``lswmkc verify STORE``): all of the above for every chunk,
  and the symmetry of every kernel.

Stores of the first format, ``lswmkc-kernel-store/1`` (no checksums, no manifest), are
refused: rerun ``lswmkc prepare`` to rewrite them.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import zarr
from numpy.typing import ArrayLike
from zarr.abc.store import Store
from zarr.codecs import Crc32cCodec

from ..errors import KernelInputError

__all__ = [
    "CHECKSUM",
    "DIAGONAL_TOL",
    "MANIFEST_VERSION",
    "OLD_STORE_FORMATS",
    "PROTECTED_ATTRIBUTES",
    "STORE_FORMAT",
    "VALUE_TOL",
    "Chunk",
    "StoreReport",
    "attribute_digests",
    "checked_read",
    "chunk_codecs",
    "chunk_crc32c",
    "chunks_of",
    "damaged",
    "inspect_store",
    "linked_chunks",
    "make_manifest",
    "missing_chunks",
    "old_format_message",
    "store_name",
    "store_problems",
    "structure_problems",
    "value_problems",
    "verify_store",
]

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
#: Chunks fetched at once by :func:`checked_read` (bounds the raw bytes held beside the result).
_CONCURRENT_CHUNKS = 4
#: Where a kernel store is: a local path, an fsspec URL, or a zarr store object (in memory).
StoreLocation: TypeAlias = str | os.PathLike[str] | Store


# ----------------------------------------------------------------------------- opening
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


# ----------------------------------------------------------------------------- naming
def store_name(location: StoreLocation) -> str:
    """How messages name a store: its path or URL, or "in-memory".

    Parameters
    ----------
    location : str, Path or zarr store

    Returns
    -------
    str
    """
    if isinstance(location, (str, os.PathLike)):
        return str(location)
    return f"in-memory ({type(location).__name__})"


def damaged(location: StoreLocation, problems: Sequence[str]) -> str:
    """The message of a damaged store: its name, the problems, what to do.

    Parameters
    ----------
    location : str, Path or zarr store
    problems : list of str

    Returns
    -------
    str
    """
    return f"kernel store {store_name(location)} is damaged: {'; '.join(problems)}; {_REMEDY}"


def old_format_message(location: StoreLocation, fmt: str) -> str:
    """The message refusing a store of an earlier format (``lswmkc-kernel-store/1``).

    Parameters
    ----------
    location : str, Path or zarr store
    fmt : str
        The store's ``format`` attribute.

    Returns
    -------
    str
    """
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
    if len(out) > 8:
        out = out[:8] + [f"... ({len(values)} in all)"]
    return ", ".join(out)


def _row_spans(values):
    """"row 85" or "rows 80-82, 90"."""
    values = {int(v) for v in values}
    return f"row {next(iter(values))}" if len(values) == 1 else f"rows {_spans(values)}"


def _kernel(p, names):
    """"kernel 2", or "kernel 2 (gist)" when the store names it otherwise."""
    name = names[p] if isinstance(names, list) and p < len(names) else None
    return f"kernel {p}" if name in (None, f"kernel {p}") else f"kernel {p} ({name})"


def _kernels(ps, m, names):
    ps = sorted({int(p) for p in ps})
    if len(ps) == m and m > 1:
        return "all kernels"
    if len(ps) == 1:
        return _kernel(ps[0], names)
    return "kernels " + ", ".join(_kernel(p, names).removeprefix("kernel ") for p in ps)


def _rows(start, stop):
    """Rows ``start:stop`` as an inclusive range, "rows 80-119"."""
    return f"rows {start}-{stop - 1}" if stop - start > 1 else f"row {start}"


@dataclass(frozen=True)
class Chunk:
    """One chunk of the kernel array: grid coordinates, store key, rows and kernels.

    Attributes
    ----------
    coords : tuple of int
        Grid coordinates (kernel block, row block, column block).
    key : str
        Key in the store (``kernels/c/0/2/0``).
    rows, kernels : tuple of int
        ``(start, stop)`` of its rows and kernels within the array.
    """

    coords: tuple
    key: str
    rows: tuple
    kernels: tuple

    def describe(self, m, names=None):
        """"the chunk of rows 80-119 of all kernels (kernels/c/0/2/0)"."""
        which = _kernels(range(*self.kernels), m, names)
        return f"the chunk of {_rows(*self.rows)} of {which} ({self.key})"


def chunks_of(arr: Any) -> list:
    """Every chunk of a kernel array, in grid order.

    Parameters
    ----------
    arr : zarr.Array
        The kernel array, shape (m, n, n).

    Returns
    -------
    list of Chunk
    """
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


# ------------------------------------------------------------------------ writing
def chunk_codecs() -> list:
    """Bytes-to-bytes codecs of the kernel array: a crc32c checksum, no compression.

    Returns
    -------
    list of zarr codecs
    """
    return [Crc32cCodec()]


def chunk_crc32c(block: np.ndarray, chunk_shape: tuple, dtype: Any = "<f8") -> int:
    """The crc32c zarr stores with a chunk holding ``block`` (padded with the fill value 0).

    Parameters
    ----------
    block : ndarray
        The chunk's data (the last chunk along an axis may be shorter than ``chunk_shape``).
    chunk_shape : tuple of int
    dtype : str
        The store's dtype ("<f8" or "<f4"): the bytes that are checksummed.

    Returns
    -------
    int
    """
    import google_crc32c

    data = np.ascontiguousarray(block, dtype=dtype)
    if data.shape != tuple(chunk_shape):
        full = np.zeros(chunk_shape, dtype=dtype)
        full[tuple(slice(0, s) for s in data.shape)] = data
        data = full
    return int(google_crc32c.value(data.reshape(-1).view("B")))


def _canonical(value):
    """The canonical JSON text of an attribute value (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def attribute_digests(attrs: dict) -> dict:
    """The sha256 of each protected attribute's canonical JSON (:data:`PROTECTED_ATTRIBUTES`).

    Parameters
    ----------
    attrs : dict
        Group attributes of a store (as written, or as read back: the same JSON).

    Returns
    -------
    dict
        Attribute name -> hex sha256 (an absent attribute is hashed as null).
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


# ------------------------------------------------------------------------ checking
def _sync(coro):
    from zarr.core.sync import sync

    return sync(coro)


def missing_chunks(arr: Any) -> list:
    """The chunks of ``arr`` whose key is absent from its store (local, fsspec or memory).

    Parameters
    ----------
    arr : zarr.Array

    Returns
    -------
    list of Chunk
    """
    store = arr.store_path.store
    table = chunks_of(arr)
    prefix = arr.store_path.path

    async def listing():
        return {k async for k in store.list_prefix(f"{prefix}/c/" if prefix else "c/")}

    try:
        present = _sync(listing())
    except (NotImplementedError, FileNotFoundError):
        present = set()
    absent = [c for c in table if c.key not in present]
    if absent:  # confirm one by one: listings of some stores spell keys differently

        async def exists():
            return await asyncio.gather(*(store.exists(c.key) for c in absent))

        absent = [c for c, ok in zip(absent, _sync(exists())) if not ok]
    return absent


def _local_root(arr):
    """The directory of a local (file system) store, or None."""
    store = arr.store_path.store
    return Path(store.root) if isinstance(store, zarr.storage.LocalStore) else None


def _link_in(root, key):
    """The first symbolic link on the way from ``root`` to its entry ``key``, or None."""
    if root is None:
        return None
    path = root
    for part in key.split("/"):
        path = path / part
        if path.is_symlink():
            return path
    return None


def _link_problem(chunk, m, names, link):
    try:
        target = os.readlink(link)
    except OSError:  # pragma: no cover - raced away
        target = "?"
    return (
        f"{chunk.describe(m, names)} is a symbolic link ({link} -> {target}), not a file of the store: its "
        "bytes are whatever the link points to now"
    )


def linked_chunks(arr: Any) -> list:
    """The chunks of a local store reached through a symbolic link, with the link.

    Parameters
    ----------
    arr : zarr.Array

    Returns
    -------
    list of (Chunk, Path)
        Empty for stores that are not on the local file system.
    """
    root = _local_root(arr)
    if root is None:
        return []
    out = []
    for chunk in chunks_of(arr):
        link = _link_in(root, chunk.key)
        if link is not None:
            out.append((chunk, link))
    return out


def _codec_problems(arr):
    """The codecs prepare writes: little-endian bytes, then crc32c, nothing else."""
    codecs = list(getattr(arr.metadata, "codecs", ()))
    names = [type(c).__name__ for c in codecs]
    if names != ["BytesCodec", "Crc32cCodec"] or str(getattr(codecs[0].endian, "value", "")) != "little":
        return [f"its array's codecs are {names}, not the little-endian bytes and {CHECKSUM} that `lswmkc prepare` writes"]
    return []


def _layout_problems(arr, attrs):
    """Problems that make the chunks unreadable as a prepared store: shape, chunking, dtype, codecs."""
    shape, chunks = list(arr.shape), list(arr.chunks)
    if arr.ndim != 3 or shape[1] != shape[2]:
        return [f"its array has shape {shape}, not (m, n, n)"]
    if chunks[0] != shape[0] or chunks[2] != shape[2]:
        return [(f"its array is chunked {chunks}, not in blocks of whole rows of every kernel as `lswmkc prepare` "
                 f"writes it ([{shape[0]}, rows, {shape[2]}])")]
    out = []
    dtype = attrs.get("dtype", "float64")
    if np.dtype(arr.dtype) != np.dtype(DTYPES.get(dtype, "<f8")) or dtype not in DTYPES:
        out.append(f"its array holds {np.dtype(arr.dtype)} values but its attributes say dtype {dtype!r}")
    return out + _codec_problems(arr)


def _manifest_problems(arr, attrs):
    """Problems of the manifest against the array and the attributes."""
    man = attrs.get("manifest")
    if not isinstance(man, dict):
        return ["the manifest of its chunks is missing from its attributes (an interrupted or altered write)"]
    if man.get("version") != MANIFEST_VERSION:
        return [(f"its manifest is of version {man.get('version')!r}, not {MANIFEST_VERSION} (written by an earlier "
                 "version, without the digests of its attributes)")]
    m = arr.shape[0]
    out = []
    if man.get("shape") != list(arr.shape) or man.get("chunks") != list(arr.chunks):
        out.append(
            f"the array has shape {list(arr.shape)} and chunks {list(arr.chunks)} but its manifest says "
            f"{man.get('shape')} and {man.get('chunks')}"
        )
    keys = [c.key for c in chunks_of(arr)]
    crcs = man.get("chunk_crc32c")
    if man.get("chunk_keys") != keys:
        listed_keys = man.get("chunk_keys")
        listed = len(listed_keys) if isinstance(listed_keys, list) else 0
        out.append(f"the manifest lists other chunks ({listed}) than the array has ({len(keys)})")
    elif not isinstance(crcs, list) or len(crcs) != len(keys) or not all(isinstance(c, int) for c in crcs):
        out.append("the manifest's chunk checksums do not match its chunk list")
    bounds = man.get("max_abs")
    if (not isinstance(bounds, list) or len(bounds) != m
            or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in bounds)):
        out.append(f"the manifest's largest |K_ij| of each kernel (max_abs) is not {m} finite numbers")
    digests = man.get("attributes_sha256")
    if not isinstance(digests, dict):
        out.append("the manifest holds no digests of its attributes")
        return out
    now = attribute_digests(attrs)
    for key in PROTECTED_ATTRIBUTES:
        if digests.get(key) != now[key]:
            what = {"labels": "its labels are", "kernel_names": "its kernel names are"}.get(key, f"its {key} is")
            out.append(f"{what} not what `lswmkc prepare` wrote (attribute {key!r} edited since: its sha256 is not "
                       "the manifest's)")
    return out


def _label_problems(labels, n):
    """A stored label attribute: n plain labels, none missing."""
    if labels is None:
        return []
    if not isinstance(labels, list):
        return [f"its labels attribute is a {type(labels).__name__}, not a list of {n} labels"]
    out = []
    if len(labels) != n:
        out.append(f"it holds {len(labels)} labels for {n} samples")
    missing = [
        i for i, v in enumerate(labels)
        if v is None or v == "" or isinstance(v, (list, dict)) or (isinstance(v, float) and not math.isfinite(v))
    ]
    if missing:
        first = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
        out.append(f"{len(missing)} of its labels {'are' if len(missing) > 1 else 'is'} missing (NaN, infinite, null "
                   f"or empty): sample{'s' if len(missing) > 1 else ''} {first} (0-based)")
    return out


def store_problems(arr: Any, attrs: dict, absent: Any = None, links: Any = True) -> list[str]:
    """Problems of a kernel store found without reading chunk data.

    The format, the array's shape, chunking, dtype and codecs, the attributes against
    the array (counts, kernel names, labels: none missing), the manifest against the
    array and the attributes (their sha256), every chunk present, and (``links``) no
    chunk a symbolic link. :func:`lswmkc_dask.open_store` refuses a store with any;
    ``lswmkc verify`` reports them.

    Parameters
    ----------
    arr : zarr.Array
        The store's kernel array.
    attrs : dict
        The store's group attributes.
    absent : list of Chunk, optional
        The result of :func:`missing_chunks`, if already known; False: presence not checked.
    links : bool
        Check that no chunk is a symbolic link (local stores).

    Returns
    -------
    list of str
        Empty when none; each names what is wrong (and the chunk, kernels and rows).
    """
    fmt = attrs.get("format")
    if fmt != STORE_FORMAT:
        if fmt in OLD_STORE_FORMATS:
            return [(f"its format {fmt} has no chunk checksums or manifest and is no longer read; rerun "
                     "`lswmkc prepare` on the original kernels to rewrite it")]
        return [f"format {fmt!r} is not the kernel store format this version reads ({STORE_FORMAT})"]
    out = _layout_problems(arr, attrs)
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.chunks[0] != arr.shape[0]:
        return out
    m, n = int(arr.shape[0]), int(arr.shape[1])
    if attrs.get("n_samples") != n or attrs.get("n_kernels") != m:
        out.append(
            f"its attributes say {attrs.get('n_kernels')} kernels x {attrs.get('n_samples')} samples but the array "
            f"holds {m} x {n}"
        )
    names = attrs.get("kernel_names")
    if not isinstance(names, list) or len(names) != m:
        count = len(names) if isinstance(names, list) else names
        out.append(f"it names {count} kernels (kernel_names) but the array holds {m}")
        names = None
    out += _label_problems(attrs.get("labels"), n)
    out += _manifest_problems(arr, attrs)
    if absent is not False:
        absent = missing_chunks(arr) if absent is None else absent
        if len(absent) == 1:
            out.append(f"{absent[0].describe(m, names)} is missing")
        elif absent:
            out.append(
                f"{len(absent)} chunks are missing: "
                + ", ".join(c.describe(m, names).removeprefix("the chunk of ") for c in absent)
            )
    if links:
        out += [_link_problem(chunk, m, names, link) for chunk, link in linked_chunks(arr)]
    return out


def structure_problems(arr: Any, attrs: dict, absent: Any = None) -> list[str]:
    """Alias of :func:`store_problems` (every check without chunk data, symbolic links included)."""
    return store_problems(arr, attrs, absent)


def value_problems(
    block: np.ndarray,
    start: int,
    names: Sequence[str] | None = None,
    chunk: Any = None,
    bounds: Any = None,
) -> list[str]:
    """Non-finite values, ``|K_ij|`` out of bounds and a diagonal other than 1 in rows ``start..``.

    Parameters
    ----------
    block : ndarray of shape (m, b, n)
        Rows ``start .. start + b`` of the preprocessed kernels.
    start : int
    names : list of str, optional
        Kernel names (the store's ``kernel_names``).
    chunk : str, optional
        Key of the chunk, for the message.
    bounds : array_like of shape (m,), optional
        Largest ``|K_ij|`` of each kernel (the manifest's ``max_abs``); values up to
        ``max(1, bound) * (1 + VALUE_TOL)`` pass. Default 1 (a preprocessed kernel
        has unit diagonal, so ``|K_ij| <= 1`` when it is positive semidefinite).

    Returns
    -------
    list of str
        Empty when the rows are sound; each names the kernel, the rows and the chunk.
    """
    m, b, _ = block.shape
    limit = np.ones(m) if bounds is None else np.maximum(1.0, np.asarray(bounds, dtype=np.float64))
    limit = limit * (1 + VALUE_TOL)
    idx = np.arange(b)
    diag = block[:, idx, start + idx]
    if block.size:
        top = np.maximum(block.max(axis=(1, 2)), -block.min(axis=(1, 2)))  # NaN propagates: fails the test below
        if bool(np.all(top <= limit)) and bool(np.all(np.abs(diag - 1.0) <= DIAGONAL_TOL)):
            return []
    out = []
    where = f" ({chunk})" if chunk else ""
    finite = np.isfinite(block)
    if not finite.all():
        for p in np.flatnonzero(~finite.all(axis=(1, 2))).tolist():
            bad = ~finite[p]
            rows = np.flatnonzero(bad.any(axis=1)) + start
            i, j = np.argwhere(bad)[0]
            kinds = "/".join(k for k, f in (("NaN", np.isnan), ("Inf", np.isinf)) if f(block[p][bad]).any())
            out.append(
                f"{_kernel(p, names)} has {int(bad.sum())} non-finite value{'s' if bad.sum() > 1 else ''} ({kinds}) "
                f"in {_row_spans(rows)}{where}, the first at row {start + i}, column {j}"
            )
    with np.errstate(invalid="ignore"):
        big = finite & (np.abs(block) > limit[:, None, None])
    for p in np.flatnonzero(big.any(axis=(1, 2))).tolist():
        bad = big[p]
        rows = np.flatnonzero(bad.any(axis=1)) + start
        i, j = np.argwhere(bad)[0]
        count = int(bad.sum())
        bound = "1" if limit[p] <= 1 + 2 * VALUE_TOL else f"{limit[p] / (1 + VALUE_TOL):.17g} (its recorded maximum)"
        out.append(
            f"{_kernel(p, names)} has {count} value{'s' if count > 1 else ''} larger than {bound} in absolute value "
            f"in {_row_spans(rows)}{where}, the first {float(block[p, i, j])!r} at row {start + i}, column {j}; "
            "a preprocessed kernel has unit diagonal and |K_ij| <= 1"
        )
    off = np.isfinite(diag) & (np.abs(diag - 1.0) > DIAGONAL_TOL)  # non-finite entries are reported above
    ps = np.flatnonzero(off.any(axis=1))
    if ps.size:
        rows = np.flatnonzero(off.any(axis=0)) + start
        p = int(ps[0])
        worst = int(np.argmax(np.abs(diag[p] - 1.0) * off[p]))
        which = _kernels(ps, m, names)
        example = f"{_kernel(p, names)}, row {start + worst}: {diag[p, worst]:.17g}"
        verb = "has" if ps.size == 1 else "have"
        out.append(
            f"{which} {verb} diagonal entries other than 1 in {_row_spans(rows)}{where} ({example}); "
            "a preprocessed kernel has unit diagonal"
        )
    return out


# --------------------------------------------------------------------- reading
@dataclass
class _ReadPlan:
    """What reading chunks of an opened store needs: the array, the manifest's crcs and bounds."""

    arr: zarr.Array
    attrs: dict
    problems: list[str]
    table: list[Chunk] = field(default_factory=list)
    crcs: dict[str, int] = field(default_factory=dict)
    bounds: np.ndarray | None = None
    names: list | None = None
    root: Path | None = None

    @property
    def m(self):
        return int(self.arr.shape[0])


#: Read plans of local stores, keyed by the path and the identity of its metadata files
#: (a rewritten or replaced store has other inodes, sizes or times): the attributes
#: (labels, manifest) are parsed once per process, not once per read.
_PLANS: dict[tuple, _ReadPlan] = {}
_MAX_PLANS = 16


def _plan_key(location):
    if not isinstance(location, (str, os.PathLike)) or "://" in str(location):
        return None
    root = os.path.abspath(location)
    try:
        stats = [os.stat(os.path.join(root, *p)) for p in (("zarr.json",), (ARRAY, "zarr.json"))]
    except OSError:
        return None
    return (root, *[(s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in stats])


def _open(location):
    """(group attributes, kernel array) of a store; KernelInputError if it is not one."""
    if isinstance(location, (str, os.PathLike)) and "://" not in str(location) and not os.path.exists(location):
        raise FileNotFoundError(f"kernel store not found: {location}")
    try:
        attrs, arr = kernel_array(location)
    except NOT_A_STORE as exc:
        raise KernelInputError(
            f"{store_name(location)} is not a kernel store written by `lswmkc prepare` ({type(exc).__name__}: {exc}); "
            "run `lswmkc prepare` first"
        ) from exc
    return attrs, arr


def _read_plan(location):
    key = _plan_key(location)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        return plan
    attrs, arr = _open(location)
    problems = store_problems(arr, attrs, absent=False, links=False)  # presence and links: per chunk read
    plan = _ReadPlan(arr, attrs, problems)
    if not problems:
        man = attrs["manifest"]
        plan.table = chunks_of(arr)
        plan.crcs = dict(zip(man["chunk_keys"], man["chunk_crc32c"]))
        plan.bounds = np.asarray(man["max_abs"], dtype=np.float64)
        plan.names = attrs.get("kernel_names")
        plan.root = _local_root(arr)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    return plan


def _fetch(arr, keys):
    """Raw bytes (uint8 arrays) of the chunks ``keys``, None where absent."""
    from zarr.core.buffer import default_buffer_prototype

    store = arr.store_path.store

    async def get_all():
        return await asyncio.gather(*(store.get(k, prototype=default_buffer_prototype()) for k in keys))

    return [None if buf is None else buf.as_numpy_array() for buf in _sync(get_all())]


def _decode_problem(chunk, m, names, exc):
    text = str(exc)
    if "checksum" in text.lower():
        return f"{chunk.describe(m, names)} fails its {CHECKSUM} checksum (its bytes changed after it was written)"
    return f"{chunk.describe(m, names)} cannot be decoded ({type(exc).__name__}: {text})"


def _check_chunk(arr, chunk, raw, expected_crc=None, bounds=None, names=None, root=None):
    """Check one chunk's raw bytes, then decode and check its values.

    Returns (data of shape (m, rows of the chunk, n) or None where undecodable, problems,
    whether the values are sound).
    The crc32c of the bytes is computed once and compared with the chunk's trailer (zarr's
    codec) and with the manifest's entry (the chunk prepare wrote there).
    """
    import google_crc32c

    m = int(arr.shape[0])
    what = chunk.describe(m, names)
    if raw is None:
        return None, [f"{what} is missing"], False
    problems = []
    link = _link_in(root, chunk.key)
    if link is not None:
        problems.append(_link_problem(chunk, m, names, link))
    dtype = np.dtype(arr.dtype).newbyteorder("<")
    size = math.prod(arr.chunks) * dtype.itemsize
    if raw.size != size + 4:
        return None, problems + [f"{what} has {raw.size} bytes, not the {size + 4} of a chunk (truncated or replaced)"], False
    crc = int(google_crc32c.value(raw[:-4]))
    if crc != int(raw[-4:].view("<u4")[0]):
        return None, problems + [f"{what} fails its {CHECKSUM} checksum (its bytes changed after it was written)"], False
    if expected_crc is not None and crc != int(expected_crc):
        problems.append(
            f"{what} is not the chunk `lswmkc prepare` wrote: rewritten or replaced since (its {CHECKSUM} {crc} is not "
            f"the manifest's {int(expected_crc)})"
        )
    data = raw[:-4].view(dtype).reshape(arr.chunks)[:, : chunk.rows[1] - chunk.rows[0]]
    values = value_problems(data, chunk.rows[0], names, chunk.key, bounds)
    return data, problems + values, not values


def checked_read(location: StoreLocation, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of every kernel of a store, checked; shape (m, stop - start, n).

    In the store's precision: float64, or float32 for ``prepare(dtype="float32")``
    (half the memory where blocks are cached; every step accumulates in float64).

    The store's structure is checked as at open (:func:`store_problems`; once per
    process for a local store until its metadata files change). Then the raw bytes of
    each chunk holding these rows are read, their crc32c compared with the chunk's
    trailer and with the manifest's entry, and only then decoded; the values must be
    finite, within the manifest's bound on ``|K_ij|`` and have a unit diagonal. A chunk
    reached through a symbolic link is refused.

    Parameters
    ----------
    location : str, Path or zarr store
        The store (the ``location`` of a :class:`lswmkc_dask.io.KernelStore`).
    start, stop : int
        Row range, ``0 <= start <= stop <= n``.

    Returns
    -------
    ndarray of shape (m, stop - start, n), float64 or float32

    Raises
    ------
    KernelInputError
        Not a kernel store, a store of an earlier format, or a damaged one: a chunk
        missing, a symbolic link, truncated, failing its checksum or other than the
        manifest's, holding non-finite values, values beyond the bound or diagonal
        entries other than 1, or attributes or manifest that disagree with the array;
        the message names the store, the kernel(s), the rows and the chunk, and what to do.
    FileNotFoundError
        No store at a local ``location``.
    ValueError
        Rows out of range.
    """
    plan = _read_plan(location)
    if plan.problems:
        fmt = plan.attrs.get("format")
        if fmt in OLD_STORE_FORMATS:
            raise KernelInputError(old_format_message(location, fmt))
        raise KernelInputError(damaged(location, plan.problems))
    arr, m, n = plan.arr, plan.m, int(plan.arr.shape[1])
    if not 0 <= start <= stop <= n:
        raise ValueError(f"rows {start}:{stop} are not within the {n} rows of kernel store {store_name(location)}")
    out = np.empty((m, stop - start, n), dtype=np.dtype(arr.dtype))
    wanted = [c for c in plan.table if c.rows[0] < stop and c.rows[1] > start]
    problems = []
    for i in range(0, len(wanted), _CONCURRENT_CHUNKS):
        batch = wanted[i : i + _CONCURRENT_CHUNKS]
        for chunk, raw in zip(batch, _fetch(arr, [c.key for c in batch])):
            data, found, _ = _check_chunk(arr, chunk, raw, plan.crcs.get(chunk.key), plan.bounds, plan.names, plan.root)
            problems += found
            if not found:
                a, b = max(start, chunk.rows[0]), min(stop, chunk.rows[1])
                out[:, a - start : b - start] = data[:, a - chunk.rows[0] : b - chunk.rows[0]]
    if problems:
        raise KernelInputError(damaged(location, problems))
    return out


# ------------------------------------------------------------------------ verify
@dataclass
class StoreReport:
    """What :func:`inspect_store` found.

    Attributes
    ----------
    location : str or zarr store
    problems : list of str
        Empty when the store is intact.
    format : str or None
        The ``format`` attribute as found (any JSON value in a store whose
        attributes were altered; None when absent or unreadable).
    n_kernels, n_samples, block_rows, n_chunks : int or None
    checks : list of str
        What was checked.
    """

    location: StoreLocation
    problems: list[str] = field(default_factory=list)
    format: object = None
    n_kernels: int | None = None
    n_samples: int | None = None
    block_rows: int | None = None
    n_chunks: int | None = None
    checks: list = field(default_factory=list)

    @property
    def ok(self):
        """True when no problem was found."""
        return not self.problems

class _SymmetrySketch:
    """Blockwise symmetry test in one pass over row chunks.

    Rows and columns are split into the same groups G_1..G_g (whole chunks). With
    random U, W of shape (n, q), ``s[p, I, J] = U[G_I]^T K_p[G_I, G_J] W[G_J]`` and
    ``t[p, I, J] = W[G_I]^T K_p[G_I, G_J] U[G_J]``; K_p symmetric implies
    ``s[p, I, J] = t[p, J, I]``. Each is compared within a rounding bound computed from
    the same products with absolute values, so a change of one entry by more than
    about 1e-12 relative to the block's scale shows, and is located to a pair of row
    groups.
    """

    def __init__(self, m, n, bounds, q=4, max_groups=32, seed=0):
        per = -(-len(bounds) // max_groups)
        self.groups = [(bounds[i][0], bounds[min(len(bounds), i + per) - 1][1]) for i in range(0, len(bounds), per)]
        self.chunk_group = {i: i // per for i in range(len(bounds))}
        rng = np.random.default_rng(seed)
        self.u, self.w = rng.standard_normal((n, q)), rng.standard_normal((n, q))
        g = len(self.groups)
        self.s, self.t = np.zeros((m, g, g, q)), np.zeros((m, g, g, q))
        self.a_s, self.a_t = np.zeros((m, g, g, q)), np.zeros((m, g, g, q))
        self.complete = True

    def add(self, chunk_index, block, start):
        rows = slice(start, start + block.shape[1])
        big_i = self.chunk_group[chunk_index]
        absb = np.abs(block)
        u, w = self.u[rows], self.w[rows]
        for big_j, (a, b) in enumerate(self.groups):
            x, ax = block[:, :, a:b], absb[:, :, a:b]
            self.s[:, big_i, big_j] += np.einsum("pbq,bq->pq", x @ self.w[a:b], u)
            self.t[:, big_i, big_j] += np.einsum("pbq,bq->pq", x @ self.u[a:b], w)
            self.a_s[:, big_i, big_j] += np.einsum("pbq,bq->pq", ax @ np.abs(self.w[a:b]), np.abs(u))
            self.a_t[:, big_i, big_j] += np.einsum("pbq,bq->pq", ax @ np.abs(self.u[a:b]), np.abs(w))

    def problems(self, names=None):
        if not self.complete:
            return []
        t_tr = self.t.transpose(0, 2, 1, 3)
        width = np.array([b - a for a, b in self.groups], dtype=float)
        length = width[:, None] + width[None, :]
        tol = 4 * np.finfo(float).eps * length[None, :, :, None] * (self.a_s + self.a_t.transpose(0, 2, 1, 3))
        bad = (np.abs(self.s - t_tr) > tol + 1e-300).any(axis=3)
        bad = bad | bad.transpose(0, 2, 1)
        out = []
        for p in range(bad.shape[0]):
            pairs = [(i, j) for i, j in zip(*np.nonzero(bad[p])) if i <= j]
            if not pairs:
                continue
            desc = ", ".join(
                f"{_rows(*self.groups[i])} vs {_rows(*self.groups[j]).removeprefix('rows ').removeprefix('row ')}"
                if i != j else f"within {_rows(*self.groups[i])}"
                for i, j in pairs[:6]
            )
            more = f" and {len(pairs) - 6} more block pairs" if len(pairs) > 6 else ""
            out.append(f"{_kernel(p, names)} is not symmetric: blocks {desc}{more} differ from their transposes")
        return out



def _manifest_entries(manifest: object, m: int) -> tuple[dict[str, int], np.ndarray | None]:
    """(chunk key -> crc32c, largest ``|K_ij|`` of each of the m kernels or None) of a manifest.

    An altered manifest may hold anything: only what is well formed is used to check the
    chunks (a list of keys and a list of integer checksums of the same length; m numbers);
    :func:`store_problems` reports the rest.
    """
    if not isinstance(manifest, dict):
        manifest = {}
    crcs: dict[str, int] = {}
    keys, sums = manifest.get("chunk_keys"), manifest.get("chunk_crc32c")
    if isinstance(keys, list) and isinstance(sums, list) and len(keys) == len(sums):
        crcs = {k: c for k, c in zip(keys, sums) if isinstance(k, str) and isinstance(c, int)}
    max_abs = manifest.get("max_abs")
    bounds = None
    if isinstance(max_abs, list) and len(max_abs) == m and all(isinstance(v, (int, float)) for v in max_abs):
        bounds = np.asarray(max_abs, dtype=np.float64)
    return crcs, bounds


def inspect_store(location: StoreLocation) -> StoreReport:
    """Check a kernel store completely; see :func:`verify_store`.

    Parameters
    ----------
    location : str, Path or zarr store

    Returns
    -------
    StoreReport

    Raises
    ------
    FileNotFoundError
        No directory at a local ``location``.
    """
    if isinstance(location, os.PathLike) or (isinstance(location, str) and "://" not in location):
        location = str(location)
        if not os.path.exists(location):
            raise FileNotFoundError(f"kernel store not found: {location}")
    report = StoreReport(location)
    problems = report.problems
    try:
        attrs, arr = kernel_array(location)
    except NOT_A_STORE as exc:
        problems.append(f"not a kernel store written by `lswmkc prepare` ({type(exc).__name__}: {exc})")
        return report
    fmt = report.format = attrs.get("format")
    if fmt != STORE_FORMAT:
        problems += store_problems(arr, attrs, absent=False, links=False)
        if fmt not in OLD_STORE_FORMATS:
            problems[-1] += "; an interrupted `lswmkc prepare` leaves no format attribute"
        return report
    layout = _layout_problems(arr, attrs)
    if arr.ndim == 3:
        report.n_kernels, report.n_samples, report.block_rows = (int(v) for v in (*arr.shape[:2], arr.chunks[1]))
    if layout:  # the chunks cannot be read as a prepared store's
        problems += layout
        return report
    m, n = int(arr.shape[0]), int(arr.shape[1])
    missing = missing_chunks(arr)
    problems += store_problems(arr, attrs, missing, links=False)  # links: per chunk below
    names = attrs.get("kernel_names")
    names = names if isinstance(names, list) and len(names) == m else None
    table = chunks_of(arr)
    report.n_chunks = len(table)
    absent = {c.key for c in missing}
    crcs, bounds = _manifest_entries(attrs.get("manifest"), m)
    root = _local_root(arr)
    sketch = _SymmetrySketch(m, n, [c.rows for c in table])
    for i, chunk in enumerate(table):
        if chunk.key in absent:
            sketch.complete = False
            continue
        (raw,) = _fetch(arr, [chunk.key])
        data, found, sound = _check_chunk(arr, chunk, raw, crcs.get(chunk.key), bounds, names, root)
        problems += found
        if sound:
            sketch.add(i, np.asarray(data, dtype=np.float64), chunk.rows[0])
        else:
            sketch.complete = False
    problems += sketch.problems(names)
    report.checks = ["chunks present", "chunks are files", f"{CHECKSUM} checksums", "manifest",
                     "attributes (labels, kernel names)", "finite values", "|K_ij| <= 1", "unit diagonal"]
    if sketch.complete:
        report.checks.append("symmetry")
    return report


def verify_store(location: StoreLocation) -> list[str]:
    """Check every chunk of a kernel store; the list of problems found (empty: intact).

    Checks everything :func:`lswmkc_dask.open_store` checks (:func:`store_problems`:
    format, array against attributes and manifest, attribute digests, labels, chunks
    present and not symbolic links), then reads each chunk once: its crc32c against
    its trailer and the manifest, finite values, ``|K_ij|`` within the manifest's
    bound, unit diagonal, and the symmetry of every kernel (a blockwise random
    projection test, tolerant of rounding only). A store :func:`verify_store` finds a
    problem in is refused by every fit and sweep (at open, or at the read of the chunk).

    Parameters
    ----------
    location : str, Path or zarr store

    Returns
    -------
    list of str
        One line per problem, naming the kernel(s), the rows and the chunk.

    Raises
    ------
    FileNotFoundError
        No directory at a local ``location``.
    """
    return inspect_store(location).problems

"""The checks of a kernel store at open (:func:`store_problems`), and of each chunk's
decoded values (:func:`value_problems`: finite, ``|K_ij|`` within bound, unit diagonal).
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from .format import (
    CHECKSUM,
    DIAGONAL_TOL,
    DTYPES,
    MANIFEST_VERSION,
    OLD_STORE_FORMATS,
    PROTECTED_ATTRIBUTES,
    STORE_FORMAT,
    VALUE_TOL,
    attribute_digests,
    chunks_of,
    kernel_label,
    kernels_label,
    row_spans,
    zarr_sync,
)

__all__ = ["linked_chunks", "missing_chunks", "store_problems", "value_problems"]


def missing_chunks(arr: Any) -> list:
    """The chunks (list of Chunk) of the zarr array ``arr`` whose key is absent from its store:
    looked up one by one where zarr's count (``nchunks_initialized``) is short or unknown.
    """
    table = chunks_of(arr)
    try:
        if arr.nchunks_initialized == len(table):
            return []
    except (NotImplementedError, FileNotFoundError):
        pass
    store = arr.store_path.store

    async def exists():
        return await asyncio.gather(*(store.exists(c.key) for c in table))

    return [c for c, ok in zip(table, zarr_sync(exists())) if not ok]


def local_root(arr):
    """The directory of a local (file system) store, or None."""
    store = arr.store_path.store
    return Path(store.root) if isinstance(store, zarr.storage.LocalStore) else None


def link_in(root, key):
    """The first symbolic link on the way from ``root`` to its entry ``key``, or None."""
    if root is None:
        return None
    path = root
    for part in key.split("/"):
        path = path / part
        if path.is_symlink():
            return path
    return None


def link_problem(chunk, m, names, link):
    """The problem text of a chunk file that is the symbolic link ``link``."""
    try:
        target = os.readlink(link)
    except OSError:  # pragma: no cover - raced away
        target = "?"
    return (
        f"{chunk.describe(m, names)} is a symbolic link ({link} -> {target}), not a file of the store: its "
        "bytes are whatever the link points to now"
    )


def linked_chunks(arr: Any) -> list:
    """``[(Chunk, link)]``: the chunks of the zarr array ``arr`` of a local store reached
    through a symbolic link (none for stores not on the local file system).
    """
    root = local_root(arr)
    links = [(chunk, link_in(root, chunk.key)) for chunk in (chunks_of(arr) if root is not None else ())]
    return [(chunk, link) for chunk, link in links if link is not None]


def _codec_problems(arr):
    """The codecs prepare writes: little-endian bytes, then crc32c, nothing else."""
    codecs = list(getattr(arr.metadata, "codecs", ()))
    names = [type(c).__name__ for c in codecs]
    if names != ["BytesCodec", "Crc32cCodec"] or str(getattr(codecs[0].endian, "value", "")) != "little":
        return [f"its array's codecs are {names}, not the little-endian bytes and {CHECKSUM} that `lswmkc prepare` writes"]
    return []


def layout_problems(arr, attrs):
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
    out = layout_problems(arr, attrs)
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
        out += [link_problem(chunk, m, names, link) for chunk, link in linked_chunks(arr)]
    return out


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
                f"{kernel_label(p, names)} has {int(bad.sum())} non-finite value{'s' if bad.sum() > 1 else ''} ({kinds}) "
                f"in {row_spans(rows)}{where}, the first at row {start + i}, column {j}"
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
            f"{kernel_label(p, names)} has {count} value{'s' if count > 1 else ''} larger than {bound} in absolute value "
            f"in {row_spans(rows)}{where}, the first {float(block[p, i, j])!r} at row {start + i}, column {j}; "
            "a preprocessed kernel has unit diagonal and |K_ij| <= 1"
        )
    off = np.isfinite(diag) & (np.abs(diag - 1.0) > DIAGONAL_TOL)  # non-finite entries are reported above
    ps = np.flatnonzero(off.any(axis=1))
    if ps.size:
        rows = np.flatnonzero(off.any(axis=0)) + start
        p = int(ps[0])
        worst = int(np.argmax(np.abs(diag[p] - 1.0) * off[p]))
        which = kernels_label(ps, m, names)
        example = f"{kernel_label(p, names)}, row {start + worst}: {diag[p, worst]:.17g}"
        verb = "has" if ps.size == 1 else "have"
        out.append(
            f"{which} {verb} diagonal entries other than 1 in {row_spans(rows)}{where} ({example}); "
            "a preprocessed kernel has unit diagonal"
        )
    return out

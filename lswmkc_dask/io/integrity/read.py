"""The checked read of a kernel store's rows (:func:`checked_read`).

Each chunk's raw bytes are checked against their crc32c trailer and the manifest's
crc32c before they are decoded, then their values (:func:`~.checks.value_problems`);
any failure is a :class:`~lswmkc_dask.errors.KernelInputError` naming the store, the
kernel(s), the rows and what to do. The checks at open run once per store and process
(a small cache of read plans).
"""

from __future__ import annotations

import asyncio
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr

from ...errors import KernelInputError
from .checks import link_in, link_problem, local_root, store_problems, value_problems
from .format import (
    ARRAY,
    CHECKSUM,
    NOT_A_STORE,
    OLD_STORE_FORMATS,
    Chunk,
    StoreLocation,
    chunks_of,
    damaged,
    kernel_array,
    old_format_message,
    store_name,
    zarr_sync,
)

__all__ = [
    "checked_read",
]

#: Chunks fetched at once by :func:`checked_read` (bounds the raw bytes held beside the result).
_CONCURRENT_CHUNKS = 4


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
        plan.root = local_root(arr)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    return plan


def fetch_chunks(arr, keys):
    """Raw bytes (uint8 arrays) of the chunks ``keys``, None where absent."""
    from zarr.core.buffer import default_buffer_prototype

    store = arr.store_path.store

    async def get_all():
        return await asyncio.gather(*(store.get(k, prototype=default_buffer_prototype()) for k in keys))

    return [None if buf is None else buf.as_numpy_array() for buf in zarr_sync(get_all())]


def _decode_problem(chunk, m, names, exc):
    text = str(exc)
    if "checksum" in text.lower():
        return f"{chunk.describe(m, names)} fails its {CHECKSUM} checksum (its bytes changed after it was written)"
    return f"{chunk.describe(m, names)} cannot be decoded ({type(exc).__name__}: {text})"


def check_chunk(arr, chunk, raw, expected_crc=None, bounds=None, names=None, root=None):
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
    link = link_in(root, chunk.key)
    if link is not None:
        problems.append(link_problem(chunk, m, names, link))
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
        for chunk, raw in zip(batch, fetch_chunks(arr, [c.key for c in batch])):
            data, found, _ = check_chunk(arr, chunk, raw, plan.crcs.get(chunk.key), plan.bounds, plan.names, plan.root)
            problems += found
            if not found:
                a, b = max(start, chunk.rows[0]), min(stop, chunk.rows[1])
                out[:, a - start : b - start] = data[:, a - chunk.rows[0] : b - chunk.rows[0]]
    if problems:
        raise KernelInputError(damaged(location, problems))
    return out

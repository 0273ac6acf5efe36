"""The checked read of a kernel store's rows (:func:`checked_read`); the checks at open run
once per store and process (a small cache of read plans).
"""

from __future__ import annotations

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
    chunk_crc32c,
    chunks_of,
    damaged,
    kernel_array,
    old_format_message,
    store_name,
    zarr_sync,
)

__all__ = ["ReadPlan", "checked_read", "manifest_entries", "read_chunk"]


@dataclass
class ReadPlan:
    """What checking chunks of an opened store needs: the array, the manifest's crcs and bounds."""

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
        """The number of kernels."""
        return int(self.arr.shape[0])


#: Read plans of local stores, keyed by the path and the identity of its metadata files
#: (a rewritten or replaced store has other inodes, sizes or times): the attributes
#: (labels, manifest) are parsed once per process, not once per read.
_PLANS: dict[tuple, ReadPlan] = {}
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
        return kernel_array(location)
    except NOT_A_STORE as exc:
        raise KernelInputError(
            f"{store_name(location)} is not a kernel store written by `lswmkc prepare` ({type(exc).__name__}: {exc}); "
            "run `lswmkc prepare` first"
        ) from exc


def manifest_entries(manifest: object, m: int) -> tuple[dict[str, int], np.ndarray | None]:
    """(chunk key -> crc32c, largest ``|K_ij|`` of each of the m kernels or None) of a manifest:
    only what is well formed (an altered manifest may hold anything; ``store_problems`` reports it).
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


def _read_plan(location):
    key = _plan_key(location)
    plan = _PLANS.get(key) if key is not None else None
    if plan is not None:
        return plan
    attrs, arr = _open(location)
    plan = ReadPlan(arr, attrs, store_problems(arr, attrs, absent=False, links=False))  # presence, links: per chunk
    if not plan.problems:
        plan.table = chunks_of(arr)
        plan.crcs, plan.bounds = manifest_entries(attrs["manifest"], plan.m)
        plan.names = attrs.get("kernel_names")
        plan.root = local_root(arr)
        if key is not None:
            if len(_PLANS) >= _MAX_PLANS:
                _PLANS.clear()
            _PLANS[key] = plan
    return plan


def chunk_problems(plan: ReadPlan, chunk: Chunk, data: np.ndarray) -> tuple[list[str], bool]:
    """(problems, whether the values are sound) of one chunk's rows as zarr decoded them.

    A chunk file that is a symbolic link; a chunk whose crc32c is not the manifest's:
    missing (zarr read it as zeros) or other than the chunk ``prepare`` wrote; then
    the values (:func:`~.checks.value_problems`).
    """
    what = chunk.describe(plan.m, plan.names)
    link = link_in(plan.root, chunk.key)
    problems = [] if link is None else [link_problem(chunk, plan.m, plan.names, link)]
    expected = plan.crcs.get(chunk.key)
    crc = chunk_crc32c(data, plan.arr.chunks, np.dtype(plan.arr.dtype).newbyteorder("<"))
    if expected is not None and crc != int(expected):
        if not zarr_sync(plan.arr.store_path.store.exists(chunk.key)):
            return problems + [f"{what} is missing"], False
        problems.append(
            f"{what} is not the chunk `lswmkc prepare` wrote: rewritten or replaced since (its {CHECKSUM} {crc} is not "
            f"the manifest's {int(expected)})"
        )
    values = value_problems(data, chunk.rows[0], plan.names, chunk.key, plan.bounds)
    return problems + values, not values


def read_chunk(plan: ReadPlan, chunk: Chunk) -> tuple[np.ndarray | None, list[str], bool]:
    """(rows of one chunk or None where undecodable, problems, whether the values are sound).

    The chunk is read through zarr's codec chain; a chunk its ``crc32c`` codec (or the
    decoding) refuses is named with what zarr found.
    """
    try:
        data = np.asarray(plan.arr[:, chunk.rows[0] : chunk.rows[1], :])
    except ValueError as exc:
        link = link_in(plan.root, chunk.key)
        problems = [] if link is None else [link_problem(chunk, plan.m, plan.names, link)]
        what = chunk.describe(plan.m, plan.names)
        if "checksum" in str(exc).lower():
            return None, problems + [f"{what} fails its {CHECKSUM} checksum (its bytes changed after it was written)"], False
        return None, problems + [f"{what} cannot be decoded (truncated or replaced: {exc})"], False
    problems, sound = chunk_problems(plan, chunk, data)
    return data, problems, sound


def checked_read(location: StoreLocation, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of every kernel of a store, checked; shape (m, stop - start, n).

    The store's structure is checked as at open (:func:`store_problems`; once per process
    for a local store until its metadata files change); each chunk holding these rows is
    read whole through zarr (its ``crc32c`` codec), and its crc32c must be the manifest's,
    its values finite, within the manifest's bound and with a unit diagonal.

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
    arr, n = plan.arr, int(plan.arr.shape[1])
    if not 0 <= start <= stop <= n:
        raise ValueError(f"rows {start}:{stop} are not within the {n} rows of kernel store {store_name(location)}")
    wanted = [c for c in plan.table if c.rows[0] < stop and c.rows[1] > start]
    if not wanted:
        return np.empty((plan.m, 0, n), dtype=np.dtype(arr.dtype))
    a, b = wanted[0].rows[0], wanted[-1].rows[1]  # whole chunks: each is checked entire
    try:
        data = np.asarray(arr[:, a:b, :])
    except ValueError as exc:  # a chunk zarr refuses: which one, and what else is wrong
        problems = [p for chunk in wanted for p in read_chunk(plan, chunk)[1]]
        if not problems:
            raise
        raise KernelInputError(damaged(location, problems)) from exc
    problems = [p for c in wanted for p in chunk_problems(plan, c, data[:, c.rows[0] - a : c.rows[1] - a])[0]]
    if problems:
        raise KernelInputError(damaged(location, problems))
    return data if (a, b) == (start, stop) else np.ascontiguousarray(data[:, start - a : stop - a])

"""Rows of a kernel store read checked (:func:`checked_read`, every fit's read), its training
statistics read checked (:func:`read_statistics`, for ``LSWMKC.predict``), and every chunk of a
store checked (:func:`inspect_store`, ``lswmkc verify``): each chunk through zarr's crc32c codec,
its crc32c against the manifest's, its values, and for verify
the symmetry of every kernel.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ...errors import KernelInputError
from .files import STATISTICS, StoreFileError, file_problem
from .format import (
    ARRAY,
    CHECKSUM,
    STATISTICS_MISSING,
    STORE_FORMAT,
    Chunk,
    StoreLocation,
    chunk_crc32c,
    chunk_file_problem,
    chunks_of,
    damaged,
    encoded_chunk_bytes,
    is_local,
    kernel_array,
    kernel_label,
    kernels_label,
    layout_problems,
    local_root,
    missing_chunks,
    open_checked,
    row_range,
    row_spans,
    statistics_array,
    store_name,
    store_problems,
    structure_agrees,
    zarr_sync,
)

#: A preprocessed kernel has unit diagonal (prepare writes exactly 1.0).
DIAGONAL_TOL = 1e-12
#: Relative tolerance of the bound ``|K_ij| <= max(1, max_abs_p)``: a preprocessed
#: kernel has unit diagonal, so ``|K_ij| <= 1`` when it is positive semidefinite; the
#: manifest records each kernel's largest ``|K_ij|`` for those that are not quite.
VALUE_TOL = 1e-9
#: Checks of further members of a store, run by :func:`inspect_store` after the statistics:
#: ``{what the report lists when it holds: check(location, attrs, n_samples, n_kernels_in) -> problem
#: or None}``; registered by the modules that write those members (``io._feature_store``), so that
#: this module needs none of them.
MEMBER_CHECKS: dict[str, Callable[[Any, dict, int, int], str | None]] = {}


@dataclass
class ReadPlan:
    """What checking chunks of an opened store needs: the array, its chunks, the manifest's crcs and bounds."""

    arr: zarr.Array
    m: int
    table: list[Chunk]
    crcs: dict[str, int]
    bounds: np.ndarray | None
    names: list | None
    root: Path | None
    limit: int


def _plan(attrs, arr):
    """The ReadPlan of a store: only what is well formed of its manifest (``store_problems`` reports the rest)."""
    m = int(arr.shape[0])
    manifest = attrs.get("manifest") if isinstance(attrs.get("manifest"), dict) else {}
    keys, sums, max_abs = (manifest.get(k) for k in ("chunk_keys", "chunk_crc32c", "max_abs"))
    crcs: dict[str, int] = {}
    if isinstance(keys, list) and isinstance(sums, list) and len(keys) == len(sums):
        crcs = {k: c for k, c in zip(keys, sums) if isinstance(k, str) and isinstance(c, int)}
    bounds = None
    if isinstance(max_abs, list) and len(max_abs) == m and all(isinstance(v, (int, float)) for v in max_abs):
        bounds = np.asarray(max_abs, dtype=np.float64)
    names = attrs.get("kernel_names")
    names = names if isinstance(names, list) and len(names) == m else None
    return ReadPlan(arr, m, chunks_of(arr), crcs, bounds, names, local_root(arr), encoded_chunk_bytes(arr))


def _plan_key(location):
    """A local store's path and the identity of its metadata files (a rewritten or replaced store
    has other inodes, sizes or times); None for a store that is not local.
    """
    if not is_local(location):
        return None
    root = os.path.abspath(location)
    try:
        stats = [os.stat(os.path.join(root, *p)) for p in (("zarr.json",), (ARRAY, "zarr.json"))]
    except OSError:
        return None
    return (root, *[(s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in stats])


def _read_plan(location):
    """The ReadPlan of a store checked as at open (presence and links: per chunk read), cached."""
    key = _plan_key(location)
    return _plan(*open_checked(location, chunks=False)) if key is None else _cached_plan(key, location)


@functools.lru_cache(maxsize=16)
def _cached_plan(key, location):
    """The ReadPlan of a local store, once per process until ``key`` (:func:`_plan_key`) changes:
    its attributes (labels, manifest) are parsed once, not once per read.
    """
    return _plan(*open_checked(location, chunks=False))


def _entries(mask, start):
    """(kernel, count, "rows ...", first row, first column) of each kernel with an entry in ``mask`` (m, b, n)."""
    for p in np.flatnonzero(mask.any(axis=(1, 2))).tolist():
        i, j = np.argwhere(mask[p])[0]
        yield p, int(mask[p].sum()), row_spans(np.flatnonzero(mask[p].any(axis=1)) + start), start + int(i), int(j)


def _value_problems(block, start, names, chunk, bounds):
    """Non-finite values, ``|K_ij|`` above ``max(1, bounds[p]) * (1 + VALUE_TOL)`` (``bounds``: the
    manifest's ``max_abs``, or None: 1) and a diagonal other than 1 in rows ``start..`` of the
    preprocessed kernels (``block``, (m, b, n)); each problem names the kernel, the rows and the chunk.
    """
    m = block.shape[0]
    limit = np.maximum(np.ones(m), 1.0 if bounds is None else np.asarray(bounds, dtype=np.float64)) * (1 + VALUE_TOL)
    diag = np.diagonal(block, start, 1, 2)  # (m, b): K_p[start + i, start + i]
    if block.size:
        top = np.maximum(block.max(axis=(1, 2)), -block.min(axis=(1, 2)))  # NaN propagates: fails the test below
        if bool(np.all(top <= limit)) and bool(np.all(np.abs(diag - 1.0) <= DIAGONAL_TOL)):
            return []
    out = []
    where = f" ({chunk})" if chunk else ""
    finite = np.isfinite(block)
    for p, count, rows, i, j in _entries(~finite, start):
        kinds = "/".join(k for k, f in (("NaN", np.isnan), ("Inf", np.isinf)) if f(block[p][~finite[p]]).any())
        out.append(f"{kernel_label(p, names)} has {count} non-finite value{'s' if count > 1 else ''} ({kinds}) in "
                   f"{rows}{where}, the first at row {i}, column {j}")
    with np.errstate(invalid="ignore"):
        big = finite & (np.abs(block) > limit[:, None, None])
    for p, count, rows, i, j in _entries(big, start):
        bound = "1" if limit[p] <= 1 + 2 * VALUE_TOL else f"{limit[p] / (1 + VALUE_TOL):.17g} (its recorded maximum)"
        out.append(f"{kernel_label(p, names)} has {count} value{'s' if count > 1 else ''} larger than {bound} in "
                   f"absolute value in {rows}{where}, the first {float(block[p, i - start, j])!r} at row {i}, column "
                   f"{j}; a preprocessed kernel has unit diagonal and |K_ij| <= 1")
    off = np.isfinite(diag) & (np.abs(diag - 1.0) > DIAGONAL_TOL)  # non-finite entries are reported above
    ps = np.flatnonzero(off.any(axis=1))
    if ps.size:
        rows = np.flatnonzero(off.any(axis=0)) + start
        p = int(ps[0])
        worst = int(np.argmax(np.abs(diag[p] - 1.0) * off[p]))
        example = f"{kernel_label(p, names)}, row {start + worst}: {diag[p, worst]:.17g}"
        out.append(f"{kernels_label(ps, m, names)} {'has' if ps.size == 1 else 'have'} diagonal entries other than 1 "
                   f"in {row_spans(rows)}{where} ({example}); a preprocessed kernel has unit diagonal")
    return out


def _file_check(plan, chunk):
    """(the problem of a chunk's file or None, whether it is read): not read when not a regular
    file (a FIFO, a device, also through a symbolic link) or larger than its declared chunk; a
    symbolic link to a sound file is read, and reported as a link.
    """
    found = chunk_file_problem(chunk, plan.m, plan.names, plan.root, plan.limit)
    return found, found is None or file_problem(plan.root / chunk.key, plan.limit) is None


def _read_chunk(plan, chunk, data=None):
    """(rows or None where undecodable, problems, values sound) of one chunk (``data``: as zarr decoded
    it, else read here): not a regular file or larger than declared (not read), a symbolic link,
    refused by zarr's crc32c codec or decoding, missing (zarr reads zeros) or other than the
    manifest's crc32c, then its values (:func:`_value_problems`).
    """
    what = chunk.describe(plan.m, plan.names)
    link, readable = _file_check(plan, chunk)
    if not readable:
        return None, [link], False
    problems = [] if link is None else [link]
    if data is None:
        try:
            data = np.asarray(plan.arr[:, chunk.rows[0] : chunk.rows[1], :])
        except StoreFileError as exc:  # replaced since the check
            return None, [*problems, f"{what}: {exc.problem}"], False
        except ValueError as exc:
            why = (f"fails its {CHECKSUM} checksum (its bytes changed after it was written)"
                   if "checksum" in str(exc).lower() else f"cannot be decoded (truncated or replaced: {exc})")
            return None, [*problems, f"{what} {why}"], False
    expected = plan.crcs.get(chunk.key)
    crc = chunk_crc32c(data, plan.arr.chunks, np.dtype(plan.arr.dtype).newbyteorder("<"))
    if expected is not None and crc != int(expected):
        if not zarr_sync(plan.arr.store_path.store.exists(chunk.key)):
            return data, problems + [f"{what} is missing"], False
        problems.append(f"{what} is not the chunk `lswmkc prepare` wrote: rewritten or replaced since (its {CHECKSUM} "
                        f"{crc} is not the manifest's {int(expected)})")
    values = _value_problems(data, chunk.rows[0], plan.names, chunk.key, plan.bounds)
    return data, problems + values, not values


def checked_read(location: StoreLocation, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of every kernel of a store, checked; shape (m, stop - start, n).

    The store's structure is checked as at open (:func:`~.format.store_problems`), once per
    process for a local store until its metadata files change; each chunk holding these
    rows is read whole, so that it is checked entire.

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
    arr, n = plan.arr, int(plan.arr.shape[1])
    if not 0 <= start <= stop <= n:
        raise ValueError(f"rows {start}:{stop} are not within the {n} rows of kernel store {store_name(location)}")
    wanted = [c for c in plan.table if c.rows[0] < stop and c.rows[1] > start]
    if not wanted:
        return np.empty((plan.m, 0, n), dtype=np.dtype(arr.dtype))
    unreadable = [p for p, readable in (_file_check(plan, c) for c in wanted) if not readable]
    if unreadable:  # a FIFO would block the read, a device or a file larger than its chunk would never end it
        raise KernelInputError(damaged(location, unreadable))
    a, b = wanted[0].rows[0], wanted[-1].rows[1]  # whole chunks: each is checked entire
    try:
        data = np.asarray(arr[:, a:b, :])
    except ValueError as exc:  # a chunk zarr refuses: which one, and what else is wrong
        problems = [p for chunk in wanted for p in _read_chunk(plan, chunk)[1]]
        if not problems:
            raise
        raise KernelInputError(damaged(location, problems)) from exc
    problems = [p for c in wanted for p in _read_chunk(plan, c, data[:, c.rows[0] - a : c.rows[1] - a])[1]]
    if problems:
        raise KernelInputError(damaged(location, problems))
    return data if (a, b) == (start, stop) else np.ascontiguousarray(data[:, start - a : stop - a])


# ----------------------------------------------------------------------------- the training statistics
# STATISTICS (the array's name, :mod:`.files`) is also this module's.


def statistics_sha256(stack: np.ndarray) -> str:
    """The sha256 of the statistics' little-endian float64 bytes (the manifest's ``statistics_sha256``).

    Parameters
    ----------
    stack : ndarray of shape (2, m, n)

    Returns
    -------
    str
    """
    return hashlib.sha256(np.ascontiguousarray(stack, dtype="<f8").tobytes()).hexdigest()


def _value_problem(name, stack, index, m_in, digest):
    """What is wrong with readable statistics of the right shape, their sha256 last (None: nothing)."""
    bad = ~np.isfinite(stack)
    if bad.any():
        part, p, j = (int(i) for i in np.argwhere(bad)[0])
        return (f"{name} hold {int(bad.sum())} NaN/Inf values (the first: the {('column mean', 'diagonal')[part]} "
                f"of kernel {p} at sample {j})")
    if not np.all(stack[1] > 0):
        p, j = (int(i) for i in np.argwhere(~(stack[1] > 0))[0])
        return f"{name} have a centred diagonal of {stack[1, p, j]:.3g} in kernel {p} at sample {j}, not above 0"
    if m_in < index.size or index.size and (index[0] < 0 or index[-1] >= m_in or np.any(np.diff(index) <= 0)):
        return (f"{name} have kernel_index {index.tolist()}, not increasing positions among the {m_in} input "
                "kernels (n_kernels_in)")
    if statistics_sha256(stack) != digest:
        return f"{name} are not what `lswmkc prepare` wrote (their sha256 is not the manifest's)"
    return None


def read_statistics(location: Any, n_kernels: int, n_samples: int, attrs: dict) -> tuple[tuple | None, str | None]:
    """The training statistics of a store and what is wrong with them.

    Parameters
    ----------
    location : str or zarr store
    n_kernels, n_samples : int
        m and n of the store's kernels.
    attrs : dict
        The store's group attributes (the manifest holds the statistics' sha256).

    Returns
    -------
    statistics : tuple or None
        ``(col_means, diag, kernel_index, n_kernels_in)``; None when absent (a store
        prepared by an earlier version) or damaged.
    problem : str or None
        Their metadata or chunk file not a regular file or too large, what they declare
        (shape, chunks, dtype, codecs: :func:`~.format.statistics_array`, checked before
        any of their data is read), absent though the manifest records them, unreadable,
        NaN/Inf, a centred diagonal not above 0, a ``kernel_index`` that is not increasing
        positions among ``n_kernels_in``, a sha256 that is not the manifest's.
    """
    arr, problem = statistics_array(location, n_kernels, n_samples, attrs)
    if arr is None:
        return None, problem
    name = f"its training statistics ({STATISTICS!r})"
    try:
        stack = np.asarray(arr[...], dtype=np.float64)
        index = np.asarray(arr.attrs["kernel_index"], dtype=np.int64)
        m_in = int(str(arr.attrs["n_kernels_in"]))
    except StoreFileError as exc:
        return None, f"{name}: {exc.problem}"
    except Exception as exc:  # noqa: BLE001 - any unreadable member is damage, named below
        return None, f"{name} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
    want = (2, n_kernels, n_samples)
    if stack.shape != want or index.shape != (n_kernels,):
        return None, f"{name} have shape {stack.shape}, not {want}"
    manifest = attrs.get("manifest")
    digest = manifest.get("statistics_sha256") if isinstance(manifest, dict) else None  # (any JSON, edited)
    problem = _value_problem(name, stack, index, m_in, digest)
    if problem:
        return None, problem
    return (stack[0], stack[1], index, m_in), None


# ----------------------------------------------------------------------------- lswmkc verify
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
    groups. ``s`` and ``t`` are kept side by side (``sums[..., :q]``, ``sums[..., q:]``):
    one product with ``[W, U]`` on the right and ``[U, W]`` on the left gives both.
    """

    def __init__(self, m, n, bounds, q=4, max_groups=32, seed=0):
        self.per = -(-len(bounds) // max_groups)  # chunks in a group
        self.groups = [(bounds[i][0], bounds[min(len(bounds), i + self.per) - 1][1])
                       for i in range(0, len(bounds), self.per)]
        rng = np.random.default_rng(seed)
        u, w = rng.standard_normal((n, q)), rng.standard_normal((n, q))
        self.left, self.right = np.hstack([u, w]), np.hstack([w, u])
        g = len(self.groups)
        self.sums, self.abs_sums = np.zeros((m, g, g, 2 * q)), np.zeros((m, g, g, 2 * q))
        self.complete = True

    def add(self, chunk_index, block, start):
        """Add the rows ``block`` (m, rows, n) of chunk ``chunk_index``, from row ``start``."""
        big_i, left = chunk_index // self.per, self.left[start : start + block.shape[1]]
        absb = np.abs(block)
        for big_j, (a, b) in enumerate(self.groups):
            right = self.right[a:b]
            self.sums[:, big_i, big_j] += np.einsum("pbq,bq->pq", block[:, :, a:b] @ right, left)
            self.abs_sums[:, big_i, big_j] += np.einsum("pbq,bq->pq", absb[:, :, a:b] @ np.abs(right), np.abs(left))

    def problems(self, names=None):
        """One line per kernel found not symmetric, naming its block pairs; none when a chunk was not added."""
        if not self.complete:
            return []
        q = self.sums.shape[3] // 2
        s, t_tr = self.sums[..., :q], self.sums[..., q:].transpose(0, 2, 1, 3)
        width = np.array([b - a for a, b in self.groups], dtype=float)
        length = width[:, None] + width[None, :]
        tol = 4 * np.finfo(float).eps * length[None, :, :, None] * (
            self.abs_sums[..., :q] + self.abs_sums[..., q:].transpose(0, 2, 1, 3))
        bad = (np.abs(s - t_tr) > tol + 1e-300).any(axis=3)
        bad = bad | bad.transpose(0, 2, 1)
        spans, out = [row_range(*group) for group in self.groups], []
        for p in range(bad.shape[0]):
            pairs = [(i, j) for i, j in zip(*np.nonzero(bad[p])) if i <= j]
            if not pairs:
                continue
            desc = ", ".join(f"{spans[i]} vs {spans[j].removeprefix('rows ').removeprefix('row ')}" if i != j
                             else f"within {spans[i]}" for i, j in pairs[:6])
            more = f" and {len(pairs) - 6} more block pairs" if len(pairs) > 6 else ""
            out.append(f"{kernel_label(p, names)} is not symmetric: blocks {desc}{more} differ from their transposes")
        return out


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
    report = StoreReport(str(location) if is_local(location) else location)
    problems = report.problems
    try:
        attrs, arr = kernel_array(location)
    except StoreFileError as exc:  # a file not read (a FIFO, a device, too large, not JSON): named as it is
        problems.append(exc.problem)
        return report
    except KernelInputError as exc:  # the problem without the store's name and remedy, which verify prints
        cause = exc.__cause__
        problems.append(f"not a kernel store written by `lswmkc prepare` ({type(cause).__name__}: {cause})")
        return report
    fmt = report.format = attrs.get("format")
    if fmt == STORE_FORMAT and arr.ndim == 3:
        report.n_kernels, report.n_samples, report.block_rows = (int(v) for v in (*arr.shape[:2], arr.chunks[1]))
    problems += layout_problems(arr, attrs) if fmt == STORE_FORMAT else store_problems(arr, attrs, False, False)
    if problems:  # the chunks cannot be read as a prepared store's
        return report
    m, n = int(arr.shape[0]), int(arr.shape[1])
    if not structure_agrees(arr, attrs):  # what the array declares is not what was written: no chunk is read
        problems += store_problems(arr, attrs, False, False)
        problem = read_statistics(location, m, n, attrs)[1]
        problems += [problem] if problem else []
        return report
    missing = missing_chunks(arr)
    problems += store_problems(arr, attrs, missing, links=False)  # links: per chunk below
    plan = _plan(attrs, arr)
    report.n_chunks = len(plan.table)
    absent = {c.key for c in missing}
    sketch = _SymmetrySketch(plan.m, n, [c.rows for c in plan.table])
    for i, chunk in enumerate(plan.table):
        data, found, sound = (None, [], False) if chunk.key in absent else _read_chunk(plan, chunk)
        problems += found
        sketch.complete &= sound  # symmetry is checked only when every chunk is sound
        if sound:
            sketch.add(i, np.asarray(data, dtype=np.float64), chunk.rows[0])
    problems += sketch.problems(plan.names)
    stats, stats_problem = read_statistics(location, plan.m, n, attrs)
    problems += [stats_problem] if stats_problem else []
    more = [(name, check(location, attrs, n, int(stats[3]))) for name, check in MEMBER_CHECKS.items()
            if stats is not None]  # e.g. the feature views of a store prepared from them (io._feature_store)
    problems += [problem for _, problem in more if problem]
    report.checks = ["chunks present", "chunks are files", f"{CHECKSUM} checksums", "manifest",
                     "attributes (labels, kernel names)", "finite values", "|K_ij| <= 1", "unit diagonal"]
    # (absent from a store of an earlier version; removed from this one: reported, not checked)
    if stats is not None or stats_problem is not None and not stats_problem.startswith(STATISTICS_MISSING):
        report.checks.append("training statistics (shape, finite, diagonal > 0, sha256)")
    report.checks += [name for name, problem in more if problem is None]
    if sketch.complete:
        report.checks.append("symmetry")
    return report


def verify_store(location: StoreLocation) -> list[str]:
    """Check every chunk of a kernel store; the list of problems found (empty: intact).

    Checks everything :func:`lswmkc_dask.open_store` checks (:func:`~.format.store_problems`;
    a file that is not a regular file or too large is reported, never opened; an array that
    declares another shape or chunk grid than the attributes and manifest say is reported
    and none of its chunks read), then reads each chunk once through zarr: its crc32c (zarr's codec) and the manifest's,
    finite values, ``|K_ij|`` within the manifest's bound, unit diagonal, and the symmetry
    of every kernel (a blockwise random projection test, tolerant of rounding only). A
    store with a problem found here is refused by every fit and sweep.

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

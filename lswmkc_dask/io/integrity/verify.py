"""``lswmkc verify STORE``: every chunk of a kernel store read once and checked (:func:`inspect_store`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .checks import layout_problems, local_root, missing_chunks, store_problems
from .format import (
    CHECKSUM,
    NOT_A_STORE,
    OLD_STORE_FORMATS,
    STORE_FORMAT,
    StoreLocation,
    chunks_of,
    kernel_array,
    kernel_label,
    row_range,
)
from .read import ReadPlan, manifest_entries, read_chunk
from .statistics import read_statistics

__all__ = ["StoreReport", "inspect_store", "verify_store"]


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
                f"{row_range(*self.groups[i])} vs {row_range(*self.groups[j]).removeprefix('rows ').removeprefix('row ')}"
                if i != j else f"within {row_range(*self.groups[i])}"
                for i, j in pairs[:6]
            )
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
    layout = layout_problems(arr, attrs)
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
    crcs, bounds = manifest_entries(attrs.get("manifest"), m)
    plan = ReadPlan(arr, attrs, [], table, crcs, bounds, names, local_root(arr))
    sketch = _SymmetrySketch(m, n, [c.rows for c in table])
    for i, chunk in enumerate(table):
        if chunk.key in absent:
            sketch.complete = False
            continue
        data, found, sound = read_chunk(plan, chunk)
        problems += found
        if sound:
            sketch.add(i, np.asarray(data, dtype=np.float64), chunk.rows[0])
        else:
            sketch.complete = False
    problems += sketch.problems(names)
    problems += [p for p in read_statistics(location, m, n, attrs)[1:] if p]
    report.checks = ["chunks present", "chunks are files", f"{CHECKSUM} checksums", "manifest",
                     "attributes (labels, kernel names)", "finite values", "|K_ij| <= 1", "unit diagonal",
                     "training statistics (shape, finite, diagonal > 0, sha256)"]
    if sketch.complete:
        report.checks.append("symmetry")
    return report


def verify_store(location: StoreLocation) -> list[str]:
    """Check every chunk of a kernel store; the list of problems found (empty: intact).

    Checks everything :func:`lswmkc_dask.open_store` checks (:func:`store_problems`:
    format, array against attributes and manifest, attribute digests, labels, chunks
    present and not symbolic links), then reads each chunk once through zarr: its
    crc32c (zarr's codec) and the manifest's, finite values, ``|K_ij|`` within the manifest's
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

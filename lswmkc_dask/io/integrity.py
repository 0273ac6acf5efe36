"""Integrity of a kernel store: checksummed chunks, a manifest, checks at open and read.

A store of format ``lswmkc-kernel-store/2`` (written by :func:`lswmkc_dask.prepare`)
has

* every chunk written with zarr v3's ``crc32c`` codec (the last bytes-to-bytes codec,
  no compression): reading a chunk whose bytes changed raises;
* a manifest in the group attributes, written last: array shape, chunk shape and
  grid, the key, row range and crc32c of every chunk.

Checks:

* at open (:func:`structure_problems`, called by :func:`lswmkc_dask.open_store`):
  the manifest agrees with the array, and every chunk is present (zarr would read a
  missing chunk as zeros, its fill value);
* at read (:func:`checked_read`, called by :func:`lswmkc_dask.io.read_store_rows` on
  the Dask workers): checksum failures, non-finite values and a diagonal that is not
  1 become a :class:`KernelInputError` naming the store, the kernel(s) and the rows;
* :func:`verify_store` (``lswmkc verify STORE``): every chunk read and checked
  (presence, checksum and manifest crc, finite values, unit diagonal, symmetry).

Stores of format ``lswmkc-kernel-store/1`` (no checksums) are still read, with a
:class:`StoreFormatWarning`; the presence, finite and diagonal checks apply to them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass, field

import numpy as np
import zarr

from ..errors import KernelInputError, warn_at_caller

__all__ = [
    "CHECKSUM",
    "DIAGONAL_TOL",
    "LEGACY_STORE_FORMAT",
    "MANIFEST_VERSION",
    "STORE_FORMAT",
    "Chunk",
    "StoreFormatWarning",
    "StoreReport",
    "checked_read",
    "chunk_codecs",
    "chunk_crc32c",
    "chunks_of",
    "damaged",
    "inspect_store",
    "legacy_message",
    "make_manifest",
    "missing_chunks",
    "store_name",
    "structure_problems",
    "value_problems",
    "verify_store",
]

STORE_FORMAT = "lswmkc-kernel-store/2"
#: Stores written before chunk checksums and the manifest: still readable.
LEGACY_STORE_FORMAT = "lswmkc-kernel-store/1"
MANIFEST_VERSION = 1
CHECKSUM = "crc32c"
#: A preprocessed kernel has unit diagonal (prepare writes exactly 1.0).
DIAGONAL_TOL = 1e-12
#: Name of the zarr array inside the store's group.
ARRAY = "kernels"
_REMEDY = "rerun `lswmkc prepare` or restore the store"


class StoreFormatWarning(UserWarning):
    """A kernel store of an older format (no chunk checksums): readable, less protected."""


# ----------------------------------------------------------------------------- naming
def store_name(location):
    """How messages name a store: its path or URL, or "in-memory"."""
    if isinstance(location, (str, os.PathLike)):
        return str(location)
    return f"in-memory ({type(location).__name__})"


def damaged(location, problems):
    """The message of a damaged store: its name, the problems, what to do."""
    return f"kernel store {store_name(location)} is damaged: {'; '.join(problems)}; {_REMEDY}"


def _spans(values):
    """``[80, 81, 82, 90]`` -> ``"80-82, 90"`` (sorted unique integers as ranges)."""
    values = sorted({int(v) for v in values})
    out = []
    for _, grp in itertools.groupby(enumerate(values), lambda t: t[1] - t[0]):
        grp = [v for _, v in grp]
        out.append(f"{grp[0]}-{grp[-1]}" if len(grp) > 1 else f"{grp[0]}")
    if len(out) > 8:
        out = out[:8] + [f"... ({len(values)} in all)"]
    return ", ".join(out)


def _row_spans(values):
    """"row 85" or "rows 80-82, 90"."""
    values = {int(v) for v in values}
    return f"row {next(iter(values))}" if len(values) == 1 else f"rows {_spans(values)}"


def _kernel(p, names):
    """"kernel 2", or "kernel 2 (gist)" when the store names it otherwise."""
    name = names[p] if names is not None and p < len(names) else None
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
    """One chunk of the kernel array: grid coordinates, store key, rows and kernels."""

    coords: tuple
    key: str
    rows: tuple
    kernels: tuple

    def describe(self, m, names=None):
        """"the chunk of rows 80-119 of all kernels (kernels/c/0/2/0)"."""
        which = _kernels(range(*self.kernels), m, names)
        return f"the chunk of {_rows(*self.rows)} of {which} ({self.key})"


def chunks_of(arr):
    """Every chunk of a kernel array (grid order)."""
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
def chunk_codecs():
    """Bytes-to-bytes codecs of the kernel array: a crc32c checksum, no compression."""
    return [zarr.codecs.Crc32cCodec()]


def chunk_crc32c(block, chunk_shape, dtype="<f8"):
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


def make_manifest(arr, crcs):
    """The manifest of the chunks of ``arr`` (group attribute ``manifest``).

    Parameters
    ----------
    arr : zarr.Array
        The kernel array, after all chunks are written.
    crcs : dict
        Chunk key -> crc32c (:func:`chunk_crc32c`).
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
    }


# ------------------------------------------------------------------------ checking
def _sync(coro):
    from zarr.core.sync import sync

    return sync(coro)


def missing_chunks(arr):
    """The chunks of ``arr`` whose key is absent from its store (local, fsspec or memory)."""
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


def _codec_names(arr):
    return [type(c).__name__ for c in getattr(arr.metadata, "codecs", ())]


def _has_checksum(arr):
    return "Crc32cCodec" in _codec_names(arr)


def _manifest_problems(arr, attrs):
    """Problems of a /2 store's manifest against its array."""
    man = attrs.get("manifest")
    if not isinstance(man, dict):
        return ["the manifest of its chunks is missing from its attributes (an interrupted or altered write)"]
    out = []
    if man.get("shape") != list(arr.shape) or man.get("chunks") != list(arr.chunks):
        out.append(
            f"the array has shape {list(arr.shape)} and chunks {list(arr.chunks)} but its manifest says "
            f"{man.get('shape')} and {man.get('chunks')}"
        )
    keys = [c.key for c in chunks_of(arr)]
    if man.get("chunk_keys") != keys:
        listed = len(man.get("chunk_keys") or [])
        out.append(f"the manifest lists other chunks ({listed}) than the array has ({len(keys)})")
    elif len(man.get("chunk_crc32c") or []) != len(keys):
        out.append("the manifest's chunk checksums do not match its chunk list")
    if not _has_checksum(arr):
        out.append(f"its array has no {CHECKSUM} codec although its format is {STORE_FORMAT}")
    return out


def structure_problems(arr, attrs, absent=None):
    """Problems found without reading chunk data: the manifest (format /2) and missing chunks.

    ``absent``: the result of :func:`missing_chunks`, if already known.
    """
    m = arr.shape[0]
    names = attrs.get("kernel_names")
    out = _manifest_problems(arr, attrs) if attrs.get("format") == STORE_FORMAT else []
    absent = missing_chunks(arr) if absent is None else absent
    if len(absent) == 1:
        out.append(f"{absent[0].describe(m, names)} is missing")
    elif absent:
        out.append(
            f"{len(absent)} chunks are missing: "
            + ", ".join(c.describe(m, names).removeprefix("the chunk of ") for c in absent)
        )
    return out


def value_problems(block, start, names=None, chunk=None):
    """Non-finite values and diagonal entries other than 1 in rows ``start..`` of every kernel.

    Parameters
    ----------
    block : ndarray of shape (m, b, n)
        Rows ``start .. start + b`` of the preprocessed kernels.
    start : int
    names : list of str, optional
        Kernel names (the store's ``kernel_names``).
    chunk : str, optional
        Key of the chunk, for the message.

    Returns
    -------
    list of str
    """
    out = []
    m, b, _ = block.shape
    where = f" ({chunk})" if chunk else ""
    finite = np.isfinite(block)
    if not finite.all():
        for p in np.flatnonzero(~finite.all(axis=(1, 2))):
            bad = ~finite[p]
            rows = np.flatnonzero(bad.any(axis=1)) + start
            i, j = np.argwhere(bad)[0]
            kinds = "/".join(k for k, f in (("NaN", np.isnan), ("Inf", np.isinf)) if f(block[p][bad]).any())
            out.append(
                f"{_kernel(p, names)} has {int(bad.sum())} non-finite value{'s' if bad.sum() > 1 else ''} ({kinds}) "
                f"in {_row_spans(rows)}{where}, the first at row {start + i}, column {j}"
            )
    idx = np.arange(b)
    diag = block[:, idx, start + idx]
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


def _names(location):
    try:
        return zarr.open_group(location, mode="r").attrs.get("kernel_names")
    except Exception:  # noqa: BLE001 - only for nicer messages
        return None


def _overlapping(arr, start, stop):
    return [c for c in chunks_of(arr) if c.rows[0] < stop and c.rows[1] > start]


def _decode_problem(chunk, m, names, exc):
    text = str(exc)
    if "checksum" in text.lower():
        return f"{chunk.describe(m, names)} fails its {CHECKSUM} checksum (its bytes changed after it was written)"
    return f"{chunk.describe(m, names)} cannot be decoded ({type(exc).__name__}: {text})"


def checked_read(location, start, stop):
    """Rows ``start:stop`` of every kernel of a store, checked; shape (m, b, n).

    In the store's precision: float64, or float32 for ``prepare(dtype="float32")``
    (half the memory where blocks are cached; every step accumulates in float64).

    Raises
    ------
    KernelInputError
        A chunk fails its checksum or cannot be decoded, is missing, or holds non-finite
        values or diagonal entries other than 1: the message names the store, the
        kernel(s) and the rows.
    """
    arr = zarr.open_array(location, path=ARRAY, mode="r")
    m = arr.shape[0]
    try:
        block = np.asarray(arr[:, start:stop, :])
        if block.dtype not in (np.float32, np.float64):
            block = block.astype(np.float64)
    except ValueError as exc:  # zarr's crc32c codec raises ValueError on a mismatch
        names = _names(location)
        problems = []
        for chunk in _overlapping(arr, start, stop):
            try:
                arr.get_block_selection(chunk.coords)
            except ValueError as one:
                problems.append(_decode_problem(chunk, m, names, one))
        if not problems:
            problems = [f"{_rows(start, stop)} of all kernels cannot be read ({type(exc).__name__}: {exc})"]
        raise KernelInputError(damaged(location, problems)) from exc
    problems = value_problems(block, start)
    if problems:
        names = _names(location)
        absent = {c.key for c in missing_chunks(arr)}
        problems = []
        for chunk in _overlapping(arr, start, stop):
            if chunk.key in absent:
                problems.append(f"{chunk.describe(m, names)} is missing (read as zeros)")
                continue
            a, b = max(start, chunk.rows[0]), min(stop, chunk.rows[1])
            problems += value_problems(block[:, a - start : b - start], a, names, chunk.key)
        raise KernelInputError(damaged(location, problems))
    return block


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
    n_kernels, n_samples, block_rows, n_chunks : int or None
    checks : list of str
        What was checked.
    """

    location: object
    problems: list = field(default_factory=list)
    format: str | None = None
    n_kernels: int | None = None
    n_samples: int | None = None
    block_rows: int | None = None
    n_chunks: int | None = None
    checks: list = field(default_factory=list)

    @property
    def ok(self):
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


def _chunk_tail(arr, key):
    from zarr.abc.store import SuffixByteRequest
    from zarr.core.buffer import default_buffer_prototype

    buf = _sync(arr.store_path.store.get(key, prototype=default_buffer_prototype(), byte_range=SuffixByteRequest(4)))
    return None if buf is None else int(np.frombuffer(buf.to_bytes(), dtype="<u4")[0])


def inspect_store(location):
    """Check a kernel store completely; see :func:`verify_store`.

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
        group = zarr.open_group(location, mode="r")
        attrs = dict(group.attrs)
        arr = group[ARRAY]
    except (KeyError, FileNotFoundError, ValueError, TypeError) as exc:
        problems.append(f"not a kernel store written by `lswmkc prepare` ({type(exc).__name__}: {exc})")
        return report
    fmt = report.format = attrs.get("format")
    if fmt not in (STORE_FORMAT, LEGACY_STORE_FORMAT):
        problems.append(
            f"format {fmt!r} is not a kernel store format this version reads ({STORE_FORMAT}, {LEGACY_STORE_FORMAT}); "
            "an interrupted `lswmkc prepare` leaves no format attribute"
        )
        return report
    if fmt == LEGACY_STORE_FORMAT:
        warn_at_caller(legacy_message(location), StoreFormatWarning)
    m, n = int(arr.shape[0]), int(arr.shape[1])
    report.n_kernels, report.n_samples, report.block_rows = m, n, int(arr.chunks[1])
    names = attrs.get("kernel_names")
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2]:
        problems.append(f"its array has shape {list(arr.shape)}, not (m, n, n)")
        return report
    if attrs.get("n_samples") not in (None, n) or attrs.get("n_kernels") not in (None, m):
        problems.append(
            f"its attributes say {attrs.get('n_kernels')} kernels x {attrs.get('n_samples')} samples but the array "
            f"holds {m} x {n}"
        )
    labels = attrs.get("labels")
    if labels is not None and len(labels) != n:
        problems.append(f"it holds {len(labels)} labels for {n} samples")
    missing = missing_chunks(arr)
    problems += structure_problems(arr, attrs, missing)
    table = chunks_of(arr)
    report.n_chunks = len(table)
    absent = {c.key for c in missing}
    manifest = attrs.get("manifest") if fmt == STORE_FORMAT else None
    crcs = {}
    if isinstance(manifest, dict) and len(manifest.get("chunk_keys") or []) == len(manifest.get("chunk_crc32c") or []):
        crcs = dict(zip(manifest["chunk_keys"], manifest["chunk_crc32c"]))
    checksum = _has_checksum(arr)
    sketch = _SymmetrySketch(m, n, [c.rows for c in table]) if arr.chunks[0] == m else None
    for i, chunk in enumerate(table):
        if chunk.key in absent:
            if sketch:
                sketch.complete = False
            continue
        if checksum and chunk.key in crcs:
            stored = _chunk_tail(arr, chunk.key)
            if stored != crcs[chunk.key]:
                problems.append(
                    f"{chunk.describe(m, names)} is not the chunk `lswmkc prepare` wrote: rewritten or replaced "
                    f"since (its {CHECKSUM} {stored} is not the manifest's {crcs[chunk.key]})"
                )
        try:
            block = np.asarray(arr.get_block_selection(chunk.coords), dtype=np.float64)
        except Exception as exc:  # noqa: BLE001 - every decoding failure is a problem to list
            problems.append(_decode_problem(chunk, m, names, exc))
            if sketch:
                sketch.complete = False
            continue
        found = value_problems(block, chunk.rows[0], names, chunk.key) if chunk.kernels == (0, m) else []
        problems += found
        if sketch and not found:
            sketch.add(i, block, chunk.rows[0])
        elif sketch:
            sketch.complete = False
    if sketch:
        problems += sketch.problems(names)
    report.checks = (["chunks present"] + ([f"{CHECKSUM} checksums", "manifest"] if fmt == STORE_FORMAT else [])
                     + ["finite values", "unit diagonal", "symmetry" if sketch and sketch.complete else None])
    report.checks = [c for c in report.checks if c]
    return report


def verify_store(location):
    """Check every chunk of a kernel store; the list of problems found (empty: intact).

    Reads each chunk once and checks: the store's format and manifest, that every chunk
    is present, its crc32c checksum (and that it is the chunk the manifest lists),
    finite values, unit diagonal, and the symmetry of every kernel (a blockwise random
    projection test, tolerant of rounding only).

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

    Warns
    -----
    StoreFormatWarning
        A store of format ``lswmkc-kernel-store/1`` (no checksums).
    """
    return inspect_store(location).problems


def legacy_message(location):
    return (
        f"kernel store {store_name(location)} has format {LEGACY_STORE_FORMAT}: its chunks carry no checksums, so "
        "damaged bytes may go unnoticed; run `lswmkc prepare` again to rewrite it with checksums"
    )

"""The zarr kernel store: written blockwise (:func:`prepare`), opened (:func:`open_store`) and
read (:func:`read_store_rows`), each checked as :mod:`.integrity` says.

A zarr v3 group with one array ``kernels`` of shape ``(m, n, n)`` chunked by row blocks
``(m, block_rows, n)``, the preprocessed kernels (docs/algorithm.md section 0), and the
labels and metadata in its attributes; beside it the training statistics (:data:`STATISTICS`) and,
for a store of feature views, the views themselves (:mod:`._feature_store`).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr

from ..errors import (
    DegenerateKernelWarning,
    DuplicateKernelWarning,
    KernelInputError,
    Param,
    ParameterError,
    StoreUnreadableError,
    warn_at_caller,
    with_message,
)
from ..kernels.features import (
    DEGENERATE_POLICIES,
    ArrayKernelSource,
    FeatureKernels,
    default_block_rows,
    duplicate_message,
    preprocessed_blocks,
    scan_kernels,
)
from . import integrity
from ._feature_store import FEATURES, FeatureViews, read_feature_views, write_features
from ._readers import open_kernel_file
from .integrity import STATISTICS, is_local
from .labels import check_labels
from .output import atomic_path, check_output

#: Format written by :func:`prepare` (chunk checksums and a manifest); stores of the
#: earlier format ``lswmkc-kernel-store/1`` are refused.
STORE_FORMAT = integrity.STORE_FORMAT


@dataclass(frozen=True)
class PreprocessingStatistics:
    """The training statistics of section 0 kept in a kernel store (:data:`STATISTICS`).

    Attributes
    ----------
    col_means : ndarray of shape (m, n)
        Column means d of each kept raw kernel.
    diag : ndarray of shape (m, n)
        Centred diagonal of each kept kernel, jitter included.
    kernel_index : ndarray of shape (m,), int64
        The position of each kept kernel among the input kernels.
    n_kernels_in : int
        The number of input kernels (kept and dropped).
    """

    col_means: np.ndarray
    diag: np.ndarray
    kernel_index: np.ndarray
    n_kernels_in: int


class BaseKernelStack:
    """What :class:`KernelStore`, :class:`ArrayStack` and the device's
    :class:`~lswmkc_dask.engine.device_route.ResidentStack` share: row blocks, bytes and names from
    ``n_kernels``, ``n_samples``, ``block_rows`` and ``attrs``.
    """

    n_kernels: int
    n_samples: int
    block_rows: int
    labels: np.ndarray | None
    attrs: dict

    def blocks(self, block_rows: int | None = None) -> list[tuple[int, int]]:
        """Row ranges ``[(start, stop), ...]`` covering ``0..n``."""
        b = int(block_rows or self.block_rows)
        return [(s, min(self.n_samples, s + b)) for s in range(0, self.n_samples, b)]

    @property
    def itemsize(self) -> int:
        """Bytes per stored entry: 8 (float64) or 4 (``prepare(dtype="float32")``)."""
        return 4 if self.attrs.get("dtype") == "float32" else 8

    @property
    def nbytes(self) -> int:
        """Bytes of the whole kernel stack (m x n x n entries of :attr:`itemsize` bytes)."""
        return self.itemsize * self.n_kernels * self.n_samples**2

    @property
    def kernel_names(self) -> list[str]:
        """One name per base kernel (list of m str): the ``kernel_names`` attribute, else
        ``kernel 0``, ``kernel 1``, ...
        """
        names = self.attrs.get("kernel_names") or [f"kernel {p}" for p in range(self.n_kernels)]
        return [str(x) for x in names]

    def __repr__(self) -> str:
        where = "in memory" if self.in_memory else str(self.location)  # type: ignore[attr-defined]
        labels = "no labels" if self.labels is None else f"labels of {np.unique(self.labels).size} classes"
        return (f"{type(self).__name__}({where}: {self.n_kernels} kernels x {self.n_samples} samples, "
                f"{self.itemsize * 8}-bit, {self.block_rows} rows per chunk, {labels})")


@dataclass(repr=False)
class ArrayStack(BaseKernelStack):
    """Preprocessed base kernels held in this process's memory (:func:`prepare` with no output): the
    same kernels, attributes and statistics a store of the same input holds, with no store behind them.

    Attributes
    ----------
    kernels : ndarray of shape (m, n, n)
        The preprocessed kernels in the stored dtype (float64, or float32), read-only.
    n_kernels, n_samples : int
        m and n.
    block_rows : int
        Rows per block of :meth:`blocks`.
    labels : ndarray of shape (n,) or None
    attrs : dict
        What a store's group attributes would be (``kernel_names``, ``dtype``, ``manifest`` with
        each block's crc32c, for :func:`lswmkc_dask.grid.points.input_fingerprint`, ...).
    statistics : PreprocessingStatistics
        The training statistics of the kept kernels.
    features : FeatureViews or None
        What a stack of feature views keeps of them for ``LSWMKC.predict``.
    """

    kernels: np.ndarray
    block_rows: int
    labels: np.ndarray | None
    attrs: dict
    statistics: PreprocessingStatistics
    features: FeatureViews | None = None
    n_kernels: int = field(init=False)
    n_samples: int = field(init=False)

    location = None
    in_memory = True

    def __post_init__(self) -> None:
        self.n_kernels, self.n_samples = int(self.kernels.shape[0]), int(self.kernels.shape[1])
        self.kernels.flags.writeable = False  # shared by every read: a write would change the data

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of every kernel, shape (m, b, n), in the stack's dtype (a read-only view)."""
        return self.kernels[:, start:stop, :]

    def preprocessing_statistics(self) -> PreprocessingStatistics:
        """The training statistics of the kept kernels."""
        return self.statistics

    @property
    def has_feature_views(self) -> bool:
        """True for a stack of feature views, which keeps them (:meth:`feature_views`)."""
        return self.features is not None

    def feature_views(self) -> FeatureViews | None:
        """What a stack of feature views keeps for ``LSWMKC.predict``, or None."""
        return self.features


@dataclass(repr=False)
class KernelStore(BaseKernelStack):
    """An opened kernel store (see :func:`prepare`).

    Attributes
    ----------
    location : str or zarr.abc.store.Store
        Absolute path or URL of the store, or a zarr store object. A relative path
        given here is made absolute (against the working directory of this process), so
        that Dask workers started in another directory read the same store.
    n_kernels, n_samples, block_rows : int
        m, n and the rows per chunk.
    labels : ndarray of shape (n,) or None
    attrs : dict
        The group attributes.
    """

    location: integrity.StoreLocation
    n_kernels: int
    n_samples: int
    block_rows: int
    labels: np.ndarray | None
    attrs: dict

    def __post_init__(self):
        self.location = absolute_location(self.location)

    @property
    def in_memory(self):
        """True for a zarr store object (not readable by other processes)."""
        return not isinstance(self.location, (str, os.PathLike))

    def array(self):
        """The zarr array ``kernels`` of shape (m, n, n), opened read-only."""
        return integrity.checked_group(self.location, (integrity.ARRAY,))[integrity.ARRAY]

    def read_rows(self, start, stop):
        """Rows ``start:stop`` of every preprocessed kernel, shape (m, b, n), in the store's dtype."""
        return read_store_rows(self.location, start, stop)

    def preprocessing_statistics(self) -> PreprocessingStatistics | None:
        """The training statistics of the kept kernels (:data:`STATISTICS`), or None.

        Returns
        -------
        PreprocessingStatistics or None
            None for a store prepared by an earlier version, which keeps none.

        Raises
        ------
        KernelInputError
            The statistics are damaged (:func:`lswmkc_dask.io.integrity.read.read_statistics`:
            unreadable, their shape, their values, their sha256 in the manifest).
        """
        found, problem = integrity.read_statistics(self.location, self.n_kernels, self.n_samples, self.attrs)
        if problem:
            raise KernelInputError(integrity.damaged(self.location, [problem]))
        return None if found is None else PreprocessingStatistics(*found)

    @property
    def has_feature_views(self) -> bool:
        """True for a store prepared from feature views, which keeps them (:meth:`feature_views`)."""
        return FEATURES in self.attrs

    def feature_views(self) -> FeatureViews | None:
        """What a store prepared from feature views keeps for ``LSWMKC.predict`` (:data:`FEATURES`), or None
        (a store of precomputed kernels, or of an earlier version).

        Raises
        ------
        KernelInputError
            The statistics or a member of the feature views damaged (:func:`read_feature_views`,
            naming the member).
        """
        stats = self.preprocessing_statistics()
        n_views = stats.n_kernels_in if stats is not None else len(self.attrs.get(FEATURES, {}).get("widths") or [])
        found, problem = read_feature_views(self.location, self.attrs, self.n_samples, n_views)
        if problem:
            raise KernelInputError(integrity.damaged(self.location, [problem]))
        return found


def absolute_location(location: Any) -> Any:
    """A local store path (str or Path) made absolute, as str (``"k.zarr"`` -> ``"/home/me/k.zarr"``,
    for Dask workers started elsewhere); a URL or a zarr store object as it is.
    """
    if is_local(location):
        return os.path.abspath(os.fspath(location))
    return location


def read_store_rows(location: integrity.StoreLocation, start: int, stop: int) -> np.ndarray:
    """Read rows ``start:stop`` of a kernel store; shape (m, stop - start, n).

    A plain function of the store's location so that Dask workers can call it; every read
    is checked (:func:`lswmkc_dask.io.integrity.checked_read`).

    Parameters
    ----------
    location : str, Path or zarr store
        The :attr:`KernelStore.location`.
    start, stop : int
        Row range, ``0 <= start <= stop <= n``.

    Returns
    -------
    ndarray of shape (m, stop - start, n)
        float64, or float32 for a store prepared with ``dtype="float32"``.

    Raises
    ------
    KernelInputError
        A damaged store or chunk, or a store of the earlier format (see
        :func:`~lswmkc_dask.io.integrity.checked_read`); not worth retrying.
    StoreUnreadableError
        On a Dask worker: no store at ``location`` there, or its files not readable;
        the message says to give a path every worker can read. A :class:`KernelInputError`.
    FileNotFoundError
        No store at a local ``location`` (outside a Dask worker).
    """
    try:
        return integrity.checked_read(location, start, stop)
    except (FileNotFoundError, PermissionError) as exc:
        try:
            from distributed import get_worker

            worker = get_worker().address
        except (ImportError, ValueError):  # not in a Dask worker's task
            worker = None
        if worker is None:
            raise
        raise StoreUnreadableError(
            f"the workers cannot read {location}; give a path every worker can read (a shared filesystem or a URL) "
            f"(worker {worker}: {type(exc).__name__}: {exc})") from exc


def open_store(location: integrity.StoreLocation) -> KernelStore:
    """Open a kernel store written by :func:`prepare`.

    Parameters
    ----------
    location : str, Path or zarr store
        Directory (``*.zarr``), fsspec URL (``s3://...``) or zarr store.

    Returns
    -------
    KernelStore

    Raises
    ------
    FileNotFoundError
        No store at ``location``.
    KernelInputError
        Not a kernel store written by this package; a store of the earlier format
        ``lswmkc-kernel-store/1``; or a damaged one, as ``lswmkc verify`` would report
        it without reading chunk data (:func:`lswmkc_dask.io.integrity.store_problems`):
        among others a metadata file or chunk that is not a regular file (a FIFO, a
        device: never opened) or larger than it can be, metadata that is not JSON, an
        array declaring another shape, chunk grid or codecs than the store's attributes
        and manifest say (compared before any chunk is listed or read), training
        statistics removed. The message names the store, what is wrong (the file) and
        what to do. Damaged chunk *data* is refused when the chunk is read
        (:func:`read_store_rows`).

    See Also
    --------
    lswmkc_dask.prepare : Write a store.

    Examples
    --------
    >>> import tempfile
    >>> from lswmkc_dask import open_store, prepare
    >>> from lswmkc_dask.datasets import load_yale
    >>> kernels, labels = load_yale()
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = prepare(kernels, tmp.name + "/yale.zarr", labels=labels)
    >>> store = open_store(tmp.name + "/yale.zarr")
    >>> store.n_kernels, store.n_samples, store.labels[:3]
    (5, 165, array([1, 1, 1]))
    >>> tmp.cleanup()
    """
    location = absolute_location(location)
    attrs, arr = integrity.open_checked(location)
    labels = attrs.get("labels")
    return KernelStore(location, int(arr.shape[0]), int(arr.shape[1]), int(arr.chunks[1]),
                       None if labels is None else np.asarray(labels), attrs)


def _degenerate_policy(stats, names, policy):
    """Indices of the kernels to keep, after warning or raising on degenerate ones."""
    keep = list(range(len(names)))
    drop = Param("degenerate_kernels", "drop", hint="paren")
    for p, why in stats.degenerate.items():
        if policy == "error":
            raise with_message(KernelInputError, "{}. Remove it, or pass {}", why, drop)
        if policy == "drop":
            keep.remove(p)
            message = with_message(DegenerateKernelWarning, "{}; dropped it ({})", why, Param("degenerate_kernels", "drop"))
        elif np.any(stats.diag[p] <= 0):
            raise with_message(KernelInputError, "{}. It cannot be normalised; pass {} to leave it out", why, drop)
        else:
            message = with_message(
                DegenerateKernelWarning, "{}. Kept as the reference code keeps it (+1e-12 I, then normalised), so "
                "published results reproduce; pass {} to leave it out", why, drop,
            )
        warn_at_caller(message, DegenerateKernelWarning)
    if not keep:
        raise KernelInputError(f"every base kernel is degenerate ({', '.join(names)}): nothing to cluster")
    return keep


def _as_source(data, labels):
    """(source, labels, closer, description) from a path, array(s) or FeatureKernels."""
    if isinstance(data, (str, os.PathLike)):
        source, file_labels, close = open_kernel_file(data)
        if labels is None:
            labels = file_labels
        return source, labels, close, str(data)
    if isinstance(data, (FeatureKernels, ArrayKernelSource)):
        return data, labels, lambda: None, type(data).__name__
    return ArrayKernelSource(data), labels, lambda: None, "array"


def _check_prepare_arguments(dtype, degenerate_kernels, block_rows):
    """The arguments of :func:`prepare` that need no file, checked before any I/O."""
    if dtype not in integrity.DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, integrity.DTYPES))}, got {dtype!r}")
    if degenerate_kernels not in DEGENERATE_POLICIES:
        raise ParameterError(
            "{} must be one of {}, got {!r}", Param("degenerate_kernels"), ", ".join(map(repr, DEGENERATE_POLICIES)),
            degenerate_kernels,
        )
    if block_rows is not None and (not isinstance(block_rows, numbers.Integral) or block_rows < 1):
        raise ParameterError("{} must be an integer >= 1, got {!r}", Param("block_rows"), block_rows)


def _check_prepare_output(data, output, overwrite):
    """Refuses, before any work, an output that exists (without ``overwrite``), is not lswmkc's,
    is protected or cannot be written (a URL: that exists, without ``overwrite``).
    """
    if is_local(output):
        check_output(output, overwrite=overwrite, kind="kernel-store",
                     inputs=[data] if isinstance(data, (str, os.PathLike)) else ())
        return
    if output is None or overwrite:
        return
    try:
        zarr.open_group(output, mode="r")
    except (FileNotFoundError, KeyError, ValueError):
        return
    raise with_message(
        FileExistsError, "output {} already exists (pass {} to replace it)", output, Param("overwrite", True, hint="or")
    )


def _store_attributes(stats, names, keep, n, labels, description, dtype):
    """The group attributes of a store (its manifest is added once the chunks are written)."""
    return {
        "format": STORE_FORMAT,
        "n_samples": n,
        "n_kernels": len(keep),
        "kernel_names": [names[p] for p in keep],
        "dropped_kernels": [name for p, name in enumerate(names) if p not in keep],
        "degenerate_kernels": {names[p]: msg for p, msg in stats.degenerate.items()},
        "source": description,
        "preprocessing": "symmetrise, centre (+1e-12 I), normalise (docs/algorithm.md section 0)",
        "max_asymmetry": stats.max_asymmetry[keep].tolist(),
        "labels": None if labels is None else labels.tolist(),
        "dtype": dtype,
    }


def _kept_blocks(source, stats, keep, block_rows, zdtype):
    """Each row block ``(start, stop, block)`` of the kept kernels, preprocessed (section 0) and rounded once
    to the stored precision ``zdtype``: what a store's chunks hold.
    """
    for start, stop, block in preprocessed_blocks(source, keep, block_rows, stats.col_means, stats.diag):
        yield start, stop, np.ascontiguousarray(block, dtype=zdtype)


def _has_views(source):
    """Whether a prepared source keeps its feature views (views of at least one column each)."""
    return isinstance(source, FeatureKernels) and all(v.size for v in source.views)


def _write_store(location, source, stats, keep, block_rows, dtype, attrs):
    """The second pass of :func:`prepare`: the preprocessed rows of the kept kernels, each
    chunk with its crc32c, then the attributes with the manifest (which mark it complete).
    """
    m, n, _ = source.shape
    m_out, zdtype = len(keep), integrity.DTYPES[dtype]
    group = zarr.open_group(location, mode="w")
    # crc32c on every chunk, no compression; every chunk written (also one equal to the fill value)
    # so that a missing chunk always means damage.
    arr = group.create_array(
        integrity.ARRAY, shape=(m_out, n, n), chunks=(m_out, block_rows, n), dtype=zdtype,
        compressors=integrity.chunk_codecs(), fill_value=0.0, config={"write_empty_chunks": True},
    )
    crcs = []
    max_abs = np.zeros(m_out)
    for start, stop, block in _kept_blocks(source, stats, keep, block_rows, zdtype):
        arr[:, start:stop, :] = block
        # In the stored precision: the crc32c and the largest |K_ij| are of the bytes written.
        crcs.append(integrity.chunk_crc32c(block, arr.chunks, zdtype))
        max_abs = np.maximum(max_abs, np.maximum(block.max(axis=(1, 2)), -block.min(axis=(1, 2))))
    # The training statistics of the kept kernels (LSWMKC.predict), one checked chunk: (2, m_kept, n).
    stack = np.stack([stats.col_means[keep], stats.diag[keep]])
    group.create_array(
        STATISTICS, data=stack, chunks=stack.shape, compressors=integrity.chunk_codecs(),
        fill_value=0.0, config={"write_empty_chunks": True},
        attributes={"kernel_index": [int(p) for p in keep], "n_kernels_in": int(m)},
    )
    # What predict needs of feature views (a few n x d arrays, small beside the kernels).
    features = write_features(group, source, attrs) if _has_views(source) else None
    # The attributes, with the manifest of the chunks, last: they mark the store complete.
    attrs["manifest"] = integrity.make_manifest(arr, crcs, max_abs, attrs)
    attrs["manifest"]["statistics_sha256"] = integrity.statistics_sha256(stack)
    if features is not None:
        attrs["manifest"]["features_sha256"] = features
    group.attrs.update(attrs)


def _hold(source, stats, keep, block_rows, dtype, attrs, labels):
    """The second pass of :func:`prepare` with no output: the kept kernels preprocessed into memory
    (an :class:`ArrayStack`, the bytes a store's chunks would hold), with the manifest's chunk
    table and crc32c a store of them would have (its fingerprint).
    """
    m, n, _ = source.shape
    m_out, zdtype = len(keep), integrity.DTYPES[dtype]
    kernels = np.empty((m_out, n, n), dtype=zdtype)
    crcs = []
    for start, stop, block in _kept_blocks(source, stats, keep, block_rows, zdtype):
        kernels[:, start:stop, :] = block
        crcs.append(integrity.chunk_crc32c(block, (m_out, block_rows, n), zdtype))
    attrs["manifest"] = {"shape": [m_out, n, n], "chunks": [m_out, block_rows, n], "chunk_crc32c": crcs,
                         "chunk_keys": [f"{integrity.ARRAY}/c/0/{i}/0" for i in range(len(crcs))]}
    statistics = PreprocessingStatistics(stats.col_means[keep], stats.diag[keep], np.asarray(keep, dtype=np.int64),
                                         int(m))
    features = None
    if _has_views(source):
        features = FeatureViews(source.kernel, int(source.degree), float(source.coef0), list(source.views),
                                list(source.means), list(source.scales), [float(b) for b in source.bandwidths],
                                None if source.names is None else [str(x) for x in source.names],
                                [[str(c) for c in cols] for cols in source.columns])
    return ArrayStack(kernels, block_rows, labels, attrs, statistics, features)


def prepare(
    data: Any,
    output: str | os.PathLike[str] | None = None,
    *,
    labels: Any = None,
    block_rows: int | None = None,
    overwrite: bool = False,
    kernel_names: Sequence[str] | None = None,
    symmetry_tol: float = 1e-6,
    degenerate_kernels: str = "warn",
    dtype: Any = "float64",
) -> KernelStore | ArrayStack:
    """Preprocess base kernels into a chunked zarr kernel store, or into memory (docs/algorithm.md section 0).

    Each kernel is symmetrised, centred, given ``+1e-12`` on its diagonal and normalised to
    unit diagonal, row block by row block: a first pass validates and collects column means
    and diagonals, a second writes the rows, each chunk with its crc32c, and the attributes
    with the manifest last (format ``lswmkc-kernel-store/2``, see :mod:`.integrity`).

    Parameters
    ----------
    data : str, Path, array_like of shape (m, n, n), list of (n, n) arrays, or FeatureKernels
        A kernel file (see :func:`load_kernels`), in-memory kernels, or features
        turned into kernels row block by row block; the store of features also keeps what
        ``LSWMKC.predict`` needs of them (:data:`FEATURES`: a fit on it predicts from views).
    output : str or Path, optional
        Directory of the store (``*.zarr``), written under a temporary name and renamed
        when complete; or an fsspec URL (``s3://bucket/k.zarr``, with its fsspec backend),
        written in place with the attributes last. None: held in this process's memory
        (an :class:`ArrayStack`: the same kernels, attributes and statistics, no store).
    labels : array_like of shape (n,), optional
        Overrides labels read from the file.
    block_rows : int, optional
        Rows per chunk; default about 32 MiB per ``(m, rows, n)`` chunk.
    overwrite : bool
        Replace an existing output.
    kernel_names : sequence of str, optional
        One name per kernel (``kernel_names_`` of a fit). Default: the ``names`` of a
        :class:`FeatureKernels` source, else ``kernel 0``, ``kernel 1``, ...
    symmetry_tol : float
        ``>= 0``; see :func:`lswmkc_dask.kernels.features.scan_kernels`.
    degenerate_kernels : {"warn", "drop", "error"}, default "warn"
        A numerically constant base kernel (only rounding error left after centring):
        "warn": kept as the reference code keeps it (+1e-12 I, normalised, so published
        results reproduce), with a warning naming it; "drop": left out of the store,
        with a warning; "error": :class:`KernelInputError`.
    dtype : {"float64", "float32"}, default "float64"
        Precision of the stored kernels. "float32" halves the store and the bytes read;
        the preprocessing is done in float64 and rounded once, and computations read
        the rows back as float64 (docs/performance.md#a-float32-kernel-store-bench_float32py).

    Returns
    -------
    KernelStore or ArrayStack
        An :class:`ArrayStack` where ``output`` is None.

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable input; or (PermissionError) ``output``'s location is not
        writable (read-only or full), found before any work.
    FileExistsError
        ``output`` exists and ``overwrite`` is False; or (a ``ForeignOutputError``,
        even with ``overwrite``) it is a file, a directory not written by lswmkc, or a
        kernel store holding entries that are not its own. Nothing is written.
    ProtectedOutputError
        ``output`` is the input ``data`` or lies inside it or inside a kernel store (a
        ``ValueError``), found before any work.
    KernelInputError
        Any invalid input (see :func:`open_kernel_file`, :func:`check_labels`,
        :func:`lswmkc_dask.kernels.features.scan_kernels`); a degenerate kernel with
        ``degenerate_kernels="error"``, or one that cannot be normalised. Nothing is written.
    ValueError
        An unknown ``dtype`` or ``degenerate_kernels`` or a ``block_rows < 1``, before
        anything is read; a negative or NaN ``symmetry_tol``, before the kernels are read.

    Warns
    -----
    DegenerateKernelWarning
        A degenerate kernel kept or dropped.
    DuplicateKernelWarning
        Base kernels with identical entries (kept); each identical pair named.

    See Also
    --------
    lswmkc_dask.open_store : Open the store again.
    lswmkc_dask.io.verify_store : Check every chunk (``lswmkc verify``).

    Examples
    --------
    >>> import tempfile
    >>> from lswmkc_dask import LSWMKC, prepare
    >>> from lswmkc_dask.datasets import load_yale
    >>> kernels, labels = load_yale()
    >>> tmp = tempfile.TemporaryDirectory()
    >>> prepare(kernels, tmp.name + "/yale.zarr", labels=labels, block_rows=64)
    KernelStore(.../yale.zarr: 5 kernels x 165 samples, 64-bit, 64 rows per chunk, labels of 15 classes)
    >>> LSWMKC(alpha=8, n_init=10).fit(tmp.name + "/yale.zarr").n_clusters_  # k from the stored labels
    15
    >>> tmp.cleanup()
    """
    _check_prepare_arguments(dtype, degenerate_kernels, block_rows)
    _check_prepare_output(data, output, overwrite)
    source, labels, close, description = _as_source(data, labels)
    try:
        m, n, _ = source.shape
        if n < 3:
            raise KernelInputError(f"need at least 3 samples, got {n}")
        labels = check_labels(labels, n)
        if kernel_names is None:
            kernel_names = getattr(source, "names", None)  # FeatureKernels(names=...): the views' names
        names = [str(x) for x in kernel_names] if kernel_names is not None else [f"kernel {p}" for p in range(m)]
        if len(names) != m:
            raise KernelInputError(f"{len(names)} kernel names for {m} kernels")
        block_rows = min(int(block_rows) if block_rows else default_block_rows(m, n), n)
        stats = scan_kernels(source, block_rows, symmetry_tol=symmetry_tol, names=names)
        if stats.duplicates:
            warn_at_caller(duplicate_message(stats.duplicates, names), DuplicateKernelWarning)
        keep = _degenerate_policy(stats, names, degenerate_kernels)
        attrs = _store_attributes(stats, names, keep, n, labels, description, dtype)
        if output is None:
            return _hold(source, stats, keep, block_rows, dtype, attrs, labels)
        # A directory is written under a temporary name (+ .lswmkc-output) and renamed when complete; an object
        # store has no atomic rename: written in place, its attributes last mark it complete (open_store checks).
        target = atomic_path(output, overwrite=overwrite, kind="kernel-store") if is_local(output) else nullcontext()
        with target as tmp:
            _write_store(str(output) if tmp is None else str(tmp), source, stats, keep, block_rows, dtype, attrs)
    finally:
        close()
    return KernelStore(str(output), len(keep), n, block_rows, labels, attrs)

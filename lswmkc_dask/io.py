"""Reading base kernels and features; writing and opening the zarr kernel store.

Inputs
------
* MATLAB ``.mat`` v5 (scipy) and v7.3 (HDF5, h5py) files with the kernels in ``KH``
  in MATLAB's ``n x n x m`` order and optional labels ``Y``;
* ``.npz`` files with ``kernels`` of shape ``(m, n, n)`` and optional ``labels``;
* multi-view features (``.csv``, ``.npy``, ``.npz``), turned into kernels by
  :class:`lswmkc_dask.kernels.FeatureKernels`.

The store
---------
``prepare`` writes a zarr v3 group with one array ``kernels`` of shape ``(m, n, n)``,
chunked by row blocks ``(m, block_rows, n)``, after symmetrise -> centre -> normalise
(ALGORITHM.md section 0). Labels and metadata go to the group attributes. The work is
blockwise: two passes over row blocks (statistics, then writing), so no more than a
few row blocks are in memory at once, and the store is written under a temporary name
and renamed when complete.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zarr

from .errors import KernelInputError
from .kernels import DIAGONAL_JITTER, FeatureKernels, centre_normalise_rows

__all__ = [
    "ArrayKernelSource",
    "H5KernelSource",
    "KernelStats",
    "KernelStore",
    "atomic_path",
    "check_labels",
    "default_block_rows",
    "load_features",
    "load_kernels",
    "open_kernel_file",
    "open_store",
    "prepare",
    "scan_kernels",
]

STORE_FORMAT = "lswmkc-kernel-store/1"
TARGET_CHUNK_BYTES = 32 * 2**20


def default_block_rows(n_kernels, n_samples, target_bytes=TARGET_CHUNK_BYTES):
    """Rows per block so that one ``(m, rows, n)`` float64 chunk is about 32 MiB.

    Parameters
    ----------
    n_kernels, n_samples : int
        m and n.
    target_bytes : int
        Target chunk size in bytes.

    Returns
    -------
    int
        ``1 <= rows <= n``.
    """
    return int(max(1, min(n_samples, target_bytes // (8 * n_kernels * n_samples))))


def _readable_file(path):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file not found: {path}")
    if not path.is_file():
        raise KernelInputError(f"input is not a file: {path}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"input file is not readable: {path}")
    return path


def check_labels(labels, n_samples, where="labels"):
    """Validate labels against the number of samples.

    Parameters
    ----------
    labels : array_like of shape (n,) or (n, 1) or (1, n), or None
    n_samples : int
    where : str
        Name used in the error message.

    Returns
    -------
    ndarray of shape (n,) or None
        Integer labels where the values are integral, otherwise as given.

    Raises
    ------
    KernelInputError
        If the labels have another length than the kernels.
    """
    if labels is None:
        return None
    y = np.asarray(labels).ravel()
    if y.shape[0] != n_samples:
        raise KernelInputError(f"{where} have length {y.shape[0]} but the kernels have {n_samples} samples")
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    return y


class ArrayKernelSource:
    """In-memory base kernels as a blockwise source.

    Parameters
    ----------
    kernels : array_like of shape (m, n, n), or a sequence of m arrays of shape (n, n)
        Raw base kernels.

    Raises
    ------
    KernelInputError
        If a kernel is not square or the kernels have different sizes.
    """

    def __init__(self, kernels):
        if isinstance(kernels, (list, tuple)):
            mats = [np.asarray(k) for k in kernels]
            if not mats:
                raise KernelInputError("no kernels given")
            for p, k in enumerate(mats):
                if k.ndim != 2 or k.shape[0] != k.shape[1]:
                    raise KernelInputError(f"kernel {p} is not square: shape {k.shape}")
                if k.shape != mats[0].shape:
                    raise KernelInputError(
                        f"kernel {p} has shape {k.shape} but kernel 0 has shape {mats[0].shape}"
                    )
            kernels = np.stack(mats)
        kernels = np.asarray(kernels)
        if kernels.ndim == 2:
            kernels = kernels[None]
        if kernels.ndim != 3:
            raise KernelInputError(f"kernels must have shape (m, n, n), got {kernels.shape}")
        if kernels.shape[1] != kernels.shape[2]:
            raise KernelInputError(f"kernels are not square: shape (m, n, n) expected, got {kernels.shape}")
        if kernels.dtype.kind not in "fiub":
            raise KernelInputError(f"kernels must be numeric, got dtype {kernels.dtype}")
        self.kernels = kernels
        self.shape = kernels.shape

    def rows(self, start, stop):
        """Rows ``start:stop`` of every kernel, shape (m, b, n), float64."""
        return np.asarray(self.kernels[:, start:stop, :], dtype=np.float64)

    def transposed_rows(self, start, stop):
        """Columns ``start:stop`` of every kernel, transposed: shape (m, b, n)."""
        return np.asarray(self.kernels[:, :, start:stop], dtype=np.float64).transpose(0, 2, 1)


class H5KernelSource(ArrayKernelSource):
    """Kernels ``KH`` of a MATLAB v7.3 file, read block by block with h5py.

    MATLAB stores ``KH`` (n x n x m) column-major, so the HDF5 dataset has shape
    ``(m, n, n)`` with ``h5[p, j, i] = K_p[i, j]``.
    """

    def __init__(self, dataset):
        if dataset.ndim not in (2, 3):
            raise KernelInputError(f"KH must be n x n x m, got HDF5 shape {dataset.shape[::-1]} (MATLAB order)")
        self.kernels = dataset
        shape = dataset.shape if dataset.ndim == 3 else (1,) + dataset.shape
        if shape[1] != shape[2]:
            raise KernelInputError(f"KH kernels are not square: MATLAB size {shape[::-1]}")
        self.shape = shape

    def _read(self, key):
        ds = self.kernels
        return np.asarray(ds[key] if ds.ndim == 3 else ds[key[1:]][None], dtype=np.float64)

    def rows(self, start, stop):
        return self._read((slice(None), slice(None), slice(start, stop))).transpose(0, 2, 1)

    def transposed_rows(self, start, stop):
        return self._read((slice(None), slice(start, stop), slice(None)))


@dataclass
class KernelStats:
    """Global statistics from the first pass of :func:`scan_kernels`.

    Attributes
    ----------
    col_means : ndarray of shape (m, n)
        Column means d of each symmetrised kernel.
    diag : ndarray of shape (m, n)
        Diagonal of each centred kernel, jitter included (all > 0).
    max_asymmetry : ndarray of shape (m,)
        ``max |K - K^T|`` of each raw kernel (symmetrised away).
    """

    col_means: np.ndarray
    diag: np.ndarray
    max_asymmetry: np.ndarray = field(default_factory=lambda: np.zeros(0))


def scan_kernels(source, block_rows=None, symmetry_tol=1e-6, names=None):
    """First pass over a kernel source: validate, and collect centring statistics.

    Parameters
    ----------
    source : ArrayKernelSource, H5KernelSource or FeatureKernels
    block_rows : int, optional
    symmetry_tol : float
        Largest accepted ``max|K - K^T| / max|K|``; smaller asymmetry is symmetrised.
    names : sequence of str, optional
        Kernel names for messages (default ``"kernel p"``).

    Returns
    -------
    KernelStats

    Raises
    ------
    KernelInputError
        NaN/Inf entries (which kernel, how many, where the first is); a kernel far
        from symmetric (which kernel, where); a non-positive diagonal entry after
        centring (which kernel and sample).
    """
    m, n, _ = source.shape
    names = list(names) if names is not None else [f"kernel {p}" for p in range(m)]
    block_rows = block_rows or default_block_rows(m, n)
    symmetric = isinstance(source, FeatureKernels)
    col_sums = np.zeros((m, n))
    raw_diag = np.zeros((m, n))
    max_abs = np.zeros(m)
    asym = np.zeros(m)
    asym_at = [None] * m
    nan_count = np.zeros(m, dtype=np.int64)
    inf_count = np.zeros(m, dtype=np.int64)
    first_bad = [None] * m
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        rows = source.rows(start, stop)
        finite = np.isfinite(rows)
        if not finite.all():
            for p in np.flatnonzero(~finite.all(axis=(1, 2))):
                nan_count[p] += int(np.isnan(rows[p]).sum())
                inf_count[p] += int(np.isinf(rows[p]).sum())
                if first_bad[p] is None:
                    r, c = np.argwhere(~finite[p])[0]
                    first_bad[p] = (start + int(r), int(c))
            continue
        if symmetric:
            sym = rows
        else:
            trows = source.transposed_rows(start, stop)
            if np.isfinite(trows).all():
                diff = np.abs(rows - trows)
                flat = diff.reshape(m, -1).argmax(axis=1)
                for p in range(m):
                    val = diff.reshape(m, -1)[p, flat[p]]
                    if val > asym[p]:
                        asym[p] = val
                        asym_at[p] = (start + int(flat[p] // n), int(flat[p] % n))
            sym = 0.5 * (rows + trows)
        max_abs = np.maximum(max_abs, np.abs(rows).max(axis=(1, 2)))
        col_sums += sym.sum(axis=1)
        idx = np.arange(stop - start)
        raw_diag[:, start:stop] = sym[:, idx, start + idx]
    for p in range(m):
        if nan_count[p] or inf_count[p]:
            r, c = first_bad[p]
            raise KernelInputError(
                f"{names[p]} has {nan_count[p]} NaN and {inf_count[p]} infinite entries "
                f"(first at row {r}, column {c})"
            )
    for p in range(m):
        scale = max(max_abs[p], np.finfo(float).tiny)
        if asym[p] > symmetry_tol * scale:
            r, c = asym_at[p]
            raise KernelInputError(
                f"{names[p]} is far from symmetric: |K[{r},{c}] - K[{c},{r}]| = {asym[p]:.3g}, "
                f"relative {asym[p] / scale:.3g} > {symmetry_tol:g}"
            )
    col_means = col_sums / n
    e = col_means.mean(axis=1)
    centred_diag = raw_diag - 2.0 * col_means + e[:, None]
    for p in range(m):
        tol = 1e-10 * max(max_abs[p], np.finfo(float).tiny)
        bad = np.flatnonzero(centred_diag[p] <= tol)
        if bad.size:
            i = int(bad[0])
            raise KernelInputError(
                f"{names[p]}, sample {i}: diagonal entry is {centred_diag[p, i]:.3g} after centring "
                f"(raw {raw_diag[p, i]:.3g}); it must be > 0 to normalise"
                + (f" ({bad.size} samples in all)" if bad.size > 1 else "")
            )
    return KernelStats(col_means=col_means, diag=centred_diag + DIAGONAL_JITTER, max_asymmetry=asym)


def _mat_variables(path):
    try:
        import h5py

        if h5py.is_hdf5(path):
            with h5py.File(path, "r") as f:
                return [k for k in f.keys() if not k.startswith("#")]
    except OSError:
        pass
    from scipy.io import whosmat

    return [name for name, _, _ in whosmat(str(path))]


def open_kernel_file(path):
    """Open a kernel file as a blockwise source.

    Parameters
    ----------
    path : str or Path
        ``.mat`` (v5 or v7.3) with ``KH`` (n x n x m) and optional ``Y``, or ``.npz``
        with ``kernels`` (m, n, n) and optional ``labels``.

    Returns
    -------
    source : ArrayKernelSource or H5KernelSource
    labels : ndarray of shape (n,) or None
    closer : callable
        Closes the underlying file (h5py) when called.

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable file.
    KernelInputError
        No ``KH``/``kernels`` variable (the message lists the variables present), a
        file that is not a MATLAB or npz file, non-square kernels, labels of another
        length.
    """
    path = _readable_file(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        try:
            data = np.load(path, allow_pickle=False)
        except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError
            raise KernelInputError(f"cannot read {path} as .npz: {exc}") from exc
        with data:
            if "kernels" not in data.files:
                raise KernelInputError(f"{path} has no array 'kernels' (arrays: {', '.join(data.files) or 'none'})")
            source = ArrayKernelSource(data["kernels"])
            labels = data["labels"] if "labels" in data.files else None
        return source, check_labels(labels, source.shape[1], f"labels in {path}"), lambda: None
    if suffix != ".mat":
        raise KernelInputError(f"unknown kernel file type {suffix!r} for {path}: expected .mat or .npz")
    import h5py

    if h5py.is_hdf5(path):
        f = h5py.File(path, "r")
        try:
            if "KH" not in f:
                names = [k for k in f.keys() if not k.startswith("#")]
                raise KernelInputError(f"{path} has no variable 'KH' (variables: {', '.join(names) or 'none'})")
            source = H5KernelSource(f["KH"])
            labels = np.asarray(f["Y"]) if "Y" in f else None
            labels = check_labels(labels, source.shape[1], f"labels Y in {path}")
        except BaseException:
            f.close()
            raise
        return source, labels, f.close
    from scipy.io import loadmat

    try:
        names = _mat_variables(path)
    except Exception as exc:
        raise KernelInputError(f"cannot read {path} as a MATLAB file: {exc}") from exc
    if "KH" not in names:
        raise KernelInputError(f"{path} has no variable 'KH' (variables: {', '.join(names) or 'none'})")
    data = loadmat(str(path), variable_names=["KH", "Y"])
    kh = np.asarray(data["KH"])
    if kh.ndim == 3:
        kh = np.moveaxis(kh, 2, 0)
    source = ArrayKernelSource(kh)
    labels = check_labels(data.get("Y"), source.shape[1], f"labels Y in {path}")
    return source, labels, lambda: None


def load_kernels(path):
    """Read base kernels and labels from a file.

    Parameters
    ----------
    path : str or Path
        ``.mat`` v5 or v7.3 with ``KH`` in MATLAB's ``n x n x m`` order and optional
        ``Y``; or ``.npz`` with ``kernels`` ``(m, n, n)`` and optional ``labels``.

    Returns
    -------
    kernels : ndarray of shape (m, n, n), float64
        The raw base kernels (not yet preprocessed).
    labels : ndarray of shape (n,) or None

    Raises
    ------
    FileNotFoundError, PermissionError, KernelInputError
        See :func:`open_kernel_file`.
    """
    source, labels, close = open_kernel_file(path)
    try:
        return source.rows(0, source.shape[1]), labels
    finally:
        close()


def load_features(path, label_column=None):
    """Read one view of features, samples in rows.

    Parameters
    ----------
    path : str or Path
        ``.csv`` (optionally ``.csv.gz``; a non-numeric or integer-index header row is
        skipped), ``.npy``, or ``.npz`` with ``X`` (and optional ``labels``).
    label_column : int, optional
        Column holding the labels (e.g. ``-1``); it is removed from the features.

    Returns
    -------
    features : ndarray of shape (n, d)
    labels : ndarray of shape (n,) or None

    Raises
    ------
    FileNotFoundError, KernelInputError
    """
    path = _readable_file(path)
    name = path.name.lower()
    labels = None
    try:
        if name.endswith((".csv", ".csv.gz")):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt") as fh:
                first = fh.readline()
            cells = first.strip().split(",")
            skip = 0
            try:
                vals = [float(c) for c in cells]
                if vals == list(range(len(vals))) or vals == list(range(len(vals) - 1)) + [0.0]:
                    skip = 1  # header of column numbers, as in the UCI mfeat CSVs
            except ValueError:
                skip = 1
            x = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
        elif name.endswith(".npy"):
            x = np.load(path, allow_pickle=False)
        elif name.endswith(".npz"):
            with np.load(path, allow_pickle=False) as data:
                if "X" not in data.files:
                    raise KernelInputError(f"{path} has no array 'X' (arrays: {', '.join(data.files)})")
                x = data["X"]
                labels = data["labels"] if "labels" in data.files else None
        else:
            raise KernelInputError(f"unknown feature file type for {path}: expected .csv, .csv.gz, .npy or .npz")
    except KernelInputError:
        raise
    except Exception as exc:
        raise KernelInputError(f"cannot read features from {path}: {exc}") from exc
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise KernelInputError(f"features in {path} must be 2-D (samples x features), got shape {x.shape}")
    if label_column is not None:
        labels = x[:, label_column]
        x = np.delete(x, label_column, axis=1)
    return x, check_labels(labels, x.shape[0], f"labels in {path}")


@contextlib.contextmanager
def atomic_path(path, overwrite=False):
    """Yield a temporary sibling of ``path``; rename it to ``path`` on success.

    Nothing is left at ``path`` (nor the temporary) if the body raises.

    Parameters
    ----------
    path : str or Path
        Final file or directory name.
    overwrite : bool
        Replace an existing ``path``; otherwise an existing ``path`` is an error.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False (checked before and after).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"output {path} already exists (pass overwrite=True or --overwrite to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if path.exists():
            if not overwrite:
                raise FileExistsError(f"output {path} appeared while writing; left it untouched")
            trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, trash)
            os.replace(tmp, path)
            _remove(trash)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            _remove(tmp)


def _remove(p):
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


@dataclass
class KernelStore:
    """An opened kernel store (see :func:`prepare`).

    Attributes
    ----------
    location : str or zarr.abc.store.Store
        Path or URL of the store, or an in-memory zarr store.
    n_kernels, n_samples, block_rows : int
        m, n and the rows per chunk.
    labels : ndarray of shape (n,) or None
    attrs : dict
        The group attributes.
    """

    location: object
    n_kernels: int
    n_samples: int
    block_rows: int
    labels: np.ndarray | None
    attrs: dict

    @property
    def in_memory(self):
        """True for a zarr memory store (not readable by other processes)."""
        return not isinstance(self.location, (str, os.PathLike))

    def array(self):
        """The zarr array ``kernels`` of shape (m, n, n), opened read-only."""
        return zarr.open_group(self.location, mode="r")["kernels"]

    def blocks(self, block_rows=None):
        """Row ranges ``[(start, stop), ...]`` covering ``0..n``."""
        b = int(block_rows or self.block_rows)
        return [(s, min(self.n_samples, s + b)) for s in range(0, self.n_samples, b)]

    def read_rows(self, start, stop):
        """Rows ``start:stop`` of every preprocessed kernel, shape (m, b, n)."""
        return read_store_rows(self.location, start, stop)


def read_store_rows(location, start, stop):
    """Read rows ``start:stop`` of a kernel store; shape (m, stop - start, n), float64.

    A plain function of the store's location so that Dask workers can call it.
    """
    return np.asarray(zarr.open_array(location, path="kernels", mode="r")[:, start:stop, :], dtype=np.float64)


def open_store(location):
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
        Not a kernel store written by this package.
    """
    if isinstance(location, os.PathLike) or (isinstance(location, str) and "://" not in location):
        location = str(location)
        if not Path(location).exists():
            raise FileNotFoundError(f"kernel store not found: {location}")
    try:
        group = zarr.open_group(location, mode="r")
        attrs = dict(group.attrs)
        shape = group["kernels"].shape
        chunks = group["kernels"].chunks
    except (KeyError, FileNotFoundError, ValueError, TypeError) as exc:
        raise KernelInputError(f"{location} is not a kernel store (run `lswmkc prepare` first): {exc}") from exc
    if attrs.get("format") != STORE_FORMAT:
        raise KernelInputError(f"{location} is not a kernel store written by `lswmkc prepare`")
    labels = attrs.get("labels")
    return KernelStore(
        location=location,
        n_kernels=int(shape[0]),
        n_samples=int(shape[1]),
        block_rows=int(chunks[1]),
        labels=None if labels is None else np.asarray(labels),
        attrs=attrs,
    )


def _is_url(location):
    return isinstance(location, str) and "://" in location


def _url_store_exists(url):
    try:
        zarr.open_group(url, mode="r")
    except (FileNotFoundError, KeyError, ValueError):
        return False
    return True


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


def prepare(data, output=None, *, labels=None, block_rows=None, overwrite=False, kernel_names=None, symmetry_tol=1e-6):
    """Preprocess base kernels into a chunked zarr kernel store (ALGORITHM.md section 0).

    Each kernel is symmetrised, centred, given ``+1e-12`` on its diagonal and
    normalised to unit diagonal, block of rows by block of rows: a first pass
    validates and collects column means and diagonals, a second writes the rows.

    Parameters
    ----------
    data : str, Path, array_like of shape (m, n, n), list of (n, n) arrays, or FeatureKernels
        A kernel file (see :func:`load_kernels`), in-memory kernels, or features
        turned into kernels row block by row block.
    output : str or Path, optional
        Directory of the store (conventionally ``*.zarr``), or an fsspec URL
        (``s3://bucket/k.zarr``, needs the matching fsspec backend such as s3fs).
        None: an in-memory zarr store, for one process. A directory is written under
        a temporary name and renamed when complete; a URL is written in place with
        the attributes last, so an interrupted write is never taken for a store.
    labels : array_like of shape (n,), optional
        Overrides labels read from the file.
    block_rows : int, optional
        Rows per chunk; default about 32 MiB per ``(m, rows, n)`` chunk.
    overwrite : bool
        Replace an existing output.
    kernel_names : sequence of str, optional
    symmetry_tol : float
        See :func:`scan_kernels`.

    Returns
    -------
    KernelStore

    Raises
    ------
    FileNotFoundError, PermissionError
        Missing or unreadable input.
    FileExistsError
        ``output`` exists and ``overwrite`` is False. Nothing is written.
    KernelInputError
        Any invalid input (see :func:`open_kernel_file`, :func:`scan_kernels`,
        :func:`check_labels`). Nothing is written.
    """
    url = output is not None and _is_url(output)
    if output is not None and not overwrite and (_url_store_exists(output) if url else Path(output).exists()):
        raise FileExistsError(f"output {output} already exists (pass overwrite=True or --overwrite to replace it)")
    source, labels, close, description = _as_source(data, labels)
    try:
        m, n, _ = source.shape
        if n < 3:
            raise KernelInputError(f"need at least 3 samples, got {n}")
        labels = check_labels(labels, n)
        names = list(kernel_names) if kernel_names is not None else [f"kernel {p}" for p in range(m)]
        if len(names) != m:
            raise KernelInputError(f"{len(names)} kernel names for {m} kernels")
        block_rows = int(block_rows) if block_rows else default_block_rows(m, n)
        if block_rows < 1:
            raise ValueError(f"block_rows must be >= 1, got {block_rows}")
        block_rows = min(block_rows, n)
        stats = scan_kernels(source, block_rows, symmetry_tol=symmetry_tol, names=names)
        attrs = {
            "format": STORE_FORMAT,
            "n_kernels": m,
            "n_samples": n,
            "kernel_names": names,
            "source": description,
            "preprocessing": "symmetrise, centre (+1e-12 I), normalise (ALGORITHM.md section 0)",
            "max_asymmetry": stats.max_asymmetry.tolist(),
            "labels": None if labels is None else labels.tolist(),
        }

        def write(location):
            group = zarr.open_group(location, mode="w")
            arr = group.create_array(
                "kernels", shape=(m, n, n), chunks=(m, block_rows, n), dtype="f8", compressors=None, fill_value=0.0
            )
            symmetric = isinstance(source, FeatureKernels)
            for start in range(0, n, block_rows):
                stop = min(n, start + block_rows)
                rows = source.rows(start, stop)
                if not symmetric:
                    rows = 0.5 * (rows + source.transposed_rows(start, stop))
                arr[:, start:stop, :] = centre_normalise_rows(rows, start, stats.col_means, stats.diag)
            group.attrs.update(attrs)

        if output is None:
            location = zarr.storage.MemoryStore()
            write(location)
        elif url:
            # Object stores have no atomic rename: write in place; the group attributes,
            # written last, mark the store complete (open_store refuses it without them).
            write(str(output))
            location = str(output)
        else:
            with atomic_path(output, overwrite=overwrite) as tmp:
                write(str(tmp))
            location = str(output)
    finally:
        close()
    return KernelStore(location, m, n, block_rows, labels, attrs)

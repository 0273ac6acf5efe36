"""Readers of base kernels and features: MATLAB ``.mat`` (v5 and v7.3), ``.npz``, CSV/NPY.

* MATLAB ``.mat`` v5 (scipy) and v7.3 (HDF5, h5py) files with the kernels in ``KH``
  in MATLAB's ``n x n x m`` order and optional labels ``Y``;
* ``.npz`` files with ``kernels`` of shape ``(m, n, n)`` and optional ``labels``;
* multi-view features (``.csv``, ``.npy``, ``.npz``), one file per view, turned into
  kernels by :class:`lswmkc_dask.kernels.FeatureKernels`.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from ..errors import KernelInputError
from ..kernels import ArrayKernelSource
from .labels import check_labels

__all__ = ["H5KernelSource", "open_kernel_file", "load_kernels", "load_features", "readable_file"]


def readable_file(path):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input file not found: {path}")
    if not path.is_file():
        raise KernelInputError(f"input is not a file: {path}")
    if not os.access(path, os.R_OK):
        raise PermissionError(f"input file is not readable: {path}")
    return path



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


_ORDER_HINT = (
    ". KH must be n x n x m in MATLAB (kernel p is KH(:,:,p)); a stack saved as m x n x n "
    "needs permute(KH, [2 3 1]) in MATLAB before saving"
)


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
    path = readable_file(path)
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
            try:
                source = H5KernelSource(f["KH"])
            except KernelInputError as exc:
                raise KernelInputError(f"variable KH in {path}: {exc}{_ORDER_HINT}") from None
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
    size = kh.shape
    if kh.ndim == 3:
        kh = np.moveaxis(kh, 2, 0)
    try:
        source = ArrayKernelSource(kh)
    except KernelInputError as exc:
        raise KernelInputError(f"variable KH in {path} (MATLAB size {size}): {exc}{_ORDER_HINT}") from None
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
    path = readable_file(path)
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

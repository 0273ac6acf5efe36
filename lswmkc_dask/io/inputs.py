"""The kernel store of what an entry point was given (:func:`as_store`): a store, its path,
a kernel file, arrays of base kernels, or feature views with the kernel to build from each.

:meth:`lswmkc_dask.LSWMKC.fit`, :func:`lswmkc_dask.sweep`, :func:`lswmkc_dask.grid.compare.compare`
and the baselines read their input with it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import KernelInputError
from ..kernels.features import FeatureKernels, canonical_kernel
from .store import KernelStore, open_store, prepare

#: ``kernel_params`` accepted by each kernel built from features.
KERNEL_PARAMS = {"rbf": (), "linear": (), "poly": ("degree", "coef0")}


def as_store(
    X: Any,
    block_rows: int | None = None,
    degenerate_kernels: str = "warn",
    kernel: str = "precomputed",
    kernel_params: dict | None = None,
) -> KernelStore:
    """The kernel store for ``X``.

    Parameters
    ----------
    X : KernelStore, str, Path, array_like or list
        With ``kernel="precomputed"``: a store (or its path, a directory written by
        :func:`lswmkc_dask.prepare`), a kernel file (``.mat``/``.npz``), or in-memory
        raw base kernels of shape (m, n, n) or a list of m arrays of shape (n, n).
        Otherwise: a list of m feature views, each of shape (n, d_v) (one kernel per
        view), or one array of shape (n, d) (one view). Anything but a store is
        preprocessed (docs/algorithm.md section 0) into an in-memory store.
    block_rows : int, optional
        Rows per block for a store made here.
    degenerate_kernels : {"warn", "drop", "error"}
        See :func:`lswmkc_dask.prepare`.
    kernel : {"precomputed", "rbf", "linear", "poly"}
        The kernel built from each view (aliases "gaussian", "polynomial"; the
        equations are :class:`lswmkc_dask.FeatureKernels`').
    kernel_params : dict, optional
        "poly": ``degree`` (default 2) and ``coef0`` (default 1.0).

    Returns
    -------
    KernelStore

    Raises
    ------
    KernelInputError, FileNotFoundError
        Unusable kernels or features (see :func:`lswmkc_dask.prepare`).
    ValueError
        Unknown ``kernel`` or ``kernel_params``.
    """
    source = feature_source(X, kernel, kernel_params)
    if source is not None:
        return prepare(source, None, block_rows=block_rows, degenerate_kernels=degenerate_kernels)
    if kernel_params:
        raise ValueError(f"kernel_params {sorted(kernel_params)} given with kernel='precomputed', which takes none")
    if isinstance(X, KernelStore):
        return X
    if isinstance(X, (str, os.PathLike)) and (Path(X).is_dir() or "://" in str(X)):
        return open_store(X)
    return prepare(X, None, block_rows=block_rows, degenerate_kernels=degenerate_kernels)


def feature_source(X: Any, kernel: str = "precomputed", kernel_params: dict | None = None) -> FeatureKernels | None:
    """The base kernels of feature views ``X`` (None for ``kernel="precomputed"``).

    Parameters
    ----------
    X : list of arrays of shape (n, d_v), or one array of shape (n, d)
        The views (one kernel per view).
    kernel, kernel_params
        As :func:`as_store`.

    Returns
    -------
    FeatureKernels or None
        ``X`` itself where it is a :class:`FeatureKernels`, whatever ``kernel`` says.

    Raises
    ------
    KernelInputError
        ``X`` is a store or a path (kernels, not features), or unusable views.
    ValueError
        Unknown ``kernel`` or ``kernel_params``.
    """
    if isinstance(X, FeatureKernels):  # views with their kernel already chosen (the command line's --features)
        return X
    kernel = canonical_kernel(kernel, precomputed=True)
    if kernel == "precomputed":
        return None
    params = dict(kernel_params or {})
    unknown = sorted(set(params) - set(KERNEL_PARAMS[kernel]))
    if unknown:
        allowed = ", ".join(KERNEL_PARAMS[kernel]) or "none"
        raise ValueError(f"kernel_params {unknown} are not parameters of kernel={kernel!r} (allowed: {allowed})")
    if isinstance(X, (KernelStore, str, os.PathLike)):
        raise KernelInputError(
            f"kernel={kernel!r} builds kernels from feature views: pass a list of arrays of shape (n, d_v), "
            f"not {type(X).__name__} (a store or kernel file needs kernel='precomputed')"
        )
    views = [X] if getattr(X, "ndim", None) == 2 else list(X)
    return FeatureKernels(views, kernel, **params)

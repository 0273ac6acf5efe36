"""What an entry point was given, before its kernels are opened
(:func:`lswmkc_dask.engine.route.open_kernels`): a kernel stack (:class:`KernelStack`, what every
entry point reads) or the path of a store (:func:`is_store`), or feature views with the kernel to
build from each (:func:`feature_source`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import KernelInputError
from ..kernels.features import FeatureKernels, canonical_kernel

if TYPE_CHECKING:
    import numpy as np

    from .store import PreprocessingStatistics

#: ``kernel_params`` accepted by each kernel built from features.
KERNEL_PARAMS = {"rbf": (), "linear": (), "poly": ("degree", "coef0")}


@runtime_checkable
class KernelStack(Protocol):
    """Preprocessed base kernels of shape (m, n, n) as every fit, sweep, comparison and baseline
    reads them: a :class:`~lswmkc_dask.io.store.KernelStore` (zarr, on disk or at a URL), an
    :class:`~lswmkc_dask.io.store.ArrayStack` (this process's memory) or a
    :class:`~lswmkc_dask.engine.device_route.ResidentStack` (a GPU's memory);
    :func:`lswmkc_dask.engine.route.open_kernels` opens one from what the user gave.

    Attributes
    ----------
    n_kernels, n_samples, block_rows : int
        m, n and the rows per block of :meth:`blocks`.
    labels : ndarray of shape (n,) or None
    kernel_names : list of str
        One name per kernel.
    itemsize, nbytes : int
        Bytes per entry (8 or 4) and of the whole stack.
    in_memory : bool
        True where no other process can read the kernels (no :attr:`location`).
    location : str, zarr store or None
        Where a store is (None: not in a store).
    """

    n_kernels: int
    n_samples: int
    block_rows: int
    labels: np.ndarray | None
    attrs: dict

    @property
    def kernel_names(self) -> list[str]:
        """One name per kernel."""

    @property
    def itemsize(self) -> int:
        """Bytes per entry."""

    @property
    def nbytes(self) -> int:
        """Bytes of the stack."""

    @property
    def in_memory(self) -> bool:
        """No other process can read it."""

    @property
    def location(self) -> Any:
        """Where a store is, or None."""

    def blocks(self, block_rows: int | None = None) -> list[tuple[int, int]]:
        """Row ranges ``[(start, stop), ...]`` covering ``0..n``."""

    def read_rows(self, start: int, stop: int) -> Any:
        """Rows ``start:stop`` of every kernel, shape (m, stop - start, n), on the host."""

    def preprocessing_statistics(self) -> PreprocessingStatistics | None:
        """The training statistics of the kept kernels, or None (a store of an earlier version)."""


def is_stack(X: Any) -> bool:
    """Whether ``X`` is opened kernels already (a :class:`KernelStack`: a KernelStore, an
    ArrayStack or a device stack).

    Returns
    -------
    bool
    """
    return isinstance(X, KernelStack)


def is_store(X: Any) -> bool:
    """Whether ``X`` holds preprocessed kernels: a kernel stack (:func:`is_stack`), or the path
    (a directory) or URL of a kernel store. A kernel file (``.mat``, ``.npz``) is not.

    Returns
    -------
    bool
    """
    return is_stack(X) or isinstance(X, (str, os.PathLike)) and (Path(X).is_dir() or "://" in str(X))


def feature_source(X: Any, kernel: str = "precomputed", kernel_params: dict | None = None) -> FeatureKernels | None:
    """The base kernels of feature views ``X`` (None for ``kernel="precomputed"``).

    Parameters
    ----------
    X : list of arrays of shape (n, d_v), or one array of shape (n, d)
        The views (one kernel per view).
    kernel, kernel_params
        As :func:`lswmkc_dask.engine.route.open_kernels`.

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
    if is_stack(X) or isinstance(X, (str, os.PathLike)):
        raise KernelInputError(
            f"kernel={kernel!r} builds kernels from feature views: pass a list of arrays of shape (n, d_v), "
            f"not {type(X).__name__} (a store or kernel file needs kernel='precomputed')"
        )
    views = [X] if getattr(X, "ndim", None) == 2 else list(X)
    return FeatureKernels(views, kernel, **params)

"""When a fit runs wholly on one device, and how the kernel stack gets there.

The iteration itself is :func:`lswmkc_dask.engine.device_fit.fit_resident`. Here: the
device memory a resident fit needs against the device's (:func:`shape_refusal`), the
route's rule (:func:`resident_plan`), and the entry points from a kernel store, an array
in host memory and feature views (:func:`fit_store_resident`, :func:`fit_array_resident`,
:func:`fit_features_resident`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_numpy_namespace

from .._threads import blas_threads, limit_blas
from ..errors import Param, ParameterError
from ..io.store import PreprocessingStatistics
from ..kernels.features import default_block_rows as feature_block_rows
from ..kernels.features import feature_kernels_on
from ..records import LSWMKCResult
from . import gpu
from .device_fit import RESIDENT_PRECISIONS, Link, Transfers, default_block_rows, fit_resident, resident_namespace
from .postprocess import cluster_factor, cluster_factor_on

__all__ = [
    "EIGH_WORKSPACE",
    "STACK_DTYPES",
    "ResidentRefusal",
    "ResidentStack",
    "default_block_rows",
    "features_stack",
    "fit_array_resident",
    "fit_features_resident",
    "fit_store_resident",
    "load_stack",
    "needs_blockwise",
    "resident_bytes",
    "resident_plan",
    "shape_refusal",
    "transfer_record",
]


#: The precisions of a kernel stack on the device (``stack_dtype``), by their bytes per entry.
STACK_DTYPES = {"float64": 8, "float32": 4}


#: cuSOLVER's ``syevd`` device workspace in n x n float64 arrays (measured:
#: :data:`lswmkc_dask.engine.gpu.EIGH_WORKSPACE`).
EIGH_WORKSPACE = gpu.EIGH_WORKSPACE


def resident_bytes(n_kernels: int, n: int, block_rows: int, itemsize: int = 8, *,
                   workspace: float = EIGH_WORKSPACE, low_itemsize: int = 2, s_copies: int = 0) -> int:
    """Device memory of a resident fit (bytes): the stack and the peak of an iteration.

    Besides the stack (``m n^2`` entries of ``itemsize``), the larger of the two peaks of an
    iteration (r < n is K*'s rank; W counted as n x n, which also covers a memory pool's
    room around a smaller W):

    - the eigen step: ``W_{t-1}`` (or a mixed iteration's dense ``K*_{t-1}``), S (in Z's
      buffer; on CuPy it takes the eigenvectors), ``s_copies`` copies of S (NumPy's
      ``eigh`` makes one: the array API has no in-place ``eigh``) and the eigensolver's
      workspace: ``(2 + s_copies + workspace) n^2`` float64;
    - a polynomial iteration of "mixed": ``K*_{t-1}``, S and three n x n arrays of the
      working precision (``low_itemsize`` bytes: float16 on CUDA);

    plus one row block's temporaries, ``(m + 6) b n`` float64 (a float32 stack's float64
    rows included).

    Parameters
    ----------
    n_kernels, n : int
        m and n.
    block_rows : int
        Rows per block of the pass.
    itemsize : int, default 8
        Bytes per entry of the stack (8 for float64, 4 for float32).
    workspace : float
        The eigensolver's workspace in n x n float64 arrays (:data:`EIGH_WORKSPACE`; 0
        counts only the fit's own arrays).
    low_itemsize : int, default 2
        Bytes per entry of the polynomial's working precision.
    s_copies : int, default 0
        Copies of S the eigensolver makes (0: CuPy, the route this count plans for).

    Returns
    -------
    int
        ``itemsize m n^2 + 8 (m + 6) b n`` plus the larger of
        ``8 (2 + s_copies + workspace) n^2`` and ``16 n^2 + 3 low_itemsize n^2``.
    """
    eigen = 8 * (2.0 + int(s_copies) + float(workspace)) * n * n
    polynomial = 8 * 2 * n * n + 3 * int(low_itemsize) * n * n
    return int(itemsize * n_kernels * n * n + 8 * (n_kernels + 6) * block_rows * n + max(eigen, polynomial))


class ResidentRefusal(MemoryError):
    """The device cannot hold a resident fit; ``why`` gives the figures.

    Parameters
    ----------
    why : str
        Needed against free device memory, or cuSOLVER's size limit (the only argument,
        so that the exception crosses from a Dask worker whole).
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def __str__(self) -> str:
        return f"{self.why}: fit with the row blocks on the host (the eigen step alone on the device)"


def needs_blockwise(snapshots: Any, precision: str) -> bool:
    """Whether what a fit asks for is kept by the blockwise route only: snapshots, or
    ``eig_precision="float32"`` (the resident route runs float64 and "mixed").

    Returns
    -------
    bool
    """
    return bool(snapshots) or precision not in RESIDENT_PRECISIONS


def shape_refusal(m: int, n: int, itemsize: int, xp: Any, info: tuple | None = None) -> str:
    """Why ``xp``'s device cannot hold a resident fit of ``m`` kernels at ``n`` samples ("" when it can).

    Parameters
    ----------
    m, n, itemsize : int
        The stack's shape and bytes per entry.
    xp : array-API namespace
        Of the device (:func:`lswmkc_dask.engine.gpu.namespace`).
    info : tuple, optional
        :func:`lswmkc_dask.engine.gpu.device_info` of ``xp`` when already read.

    Returns
    -------
    str
        cuSOLVER's size limit of CUDA runtimes before 13
        (:func:`lswmkc_dask.engine.gpu.solver_max_n`), or :func:`resident_bytes` against
        the free device memory; "" when nothing refuses.
    """
    runtime, free, total = info if info is not None else gpu.device_info(xp)
    limit = gpu.solver_max_n(runtime)
    if limit is not None and n > limit:
        return gpu.device_refusal(n, xp)
    what = f"the kernel stack ({m} kernels at n = {n}) with S, its eigenvectors and K*'s factor"
    return gpu.memory_refusal(n, free, total, need=resident_bytes(m, n, default_block_rows(m, n), itemsize), what=what)


def _refuse(m, n, itemsize, xp):
    """Raise :class:`ResidentRefusal` where :func:`shape_refusal` refuses."""
    why = shape_refusal(m, n, itemsize, xp)
    if why:
        raise ResidentRefusal(why)


def resident_plan(m: int, n: int, itemsize: int, device: str, *, snapshots: Any = False,
                  precision: str = "float64") -> tuple[bool, str]:
    """Whether a fit (or a sweep) of an (m, n, n) stack runs wholly on the GPU of the process.

    Where the gathered step goes to the GPU (``device == "cuda"``), nothing asked for
    needs the blockwise route (:func:`needs_blockwise`) and the device holds the stack
    with the work arrays (:func:`shape_refusal`).

    Parameters
    ----------
    m, n, itemsize : int
        The stack's shape and bytes per entry.
    device : {"cpu", "cuda"}
        The resolved ``eig_device``.
    snapshots : bool or sequence of int
        Snapshots asked for.
    precision : {"float64", "float32", "mixed"}
        ``eig_precision``.

    Returns
    -------
    resident : bool
    why_not : str
        The figures where the device cannot hold the stack (for a
        :class:`lswmkc_dask.engine.gpu.DeviceFallbackWarning`); "" otherwise.
    """
    if device != "cuda" or needs_blockwise(snapshots, precision):
        return False, ""
    xp = gpu.namespace("cuda")
    info = gpu.device_info(xp)
    limit = gpu.solver_max_n(info[0])
    if limit is not None and n > limit:  # the eigen step's own fallback says why
        return False, ""
    why = shape_refusal(m, n, itemsize, xp, info)
    return (not why), why


def load_stack(store: Any, link: Link) -> Any:
    """The kernel stack of ``store`` on ``link``'s device, copied one stored row block at a time.

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore or ResidentStack
        Shape (m, n, n); a :class:`ResidentStack`'s kernels are returned as they are.
    link : Link
        The device; each block's copy is recorded as "kernels".

    Returns
    -------
    array of shape (m, n, n) on the device, in the store's dtype (float64 or float32)

    Raises
    ------
    KernelInputError
        A damaged chunk (the store's integrity checks, as every read).
    """
    if isinstance(store, ResidentStack):  # built on the device already
        return store.kernels
    xp = link.xp
    m, n = store.n_kernels, store.n_samples
    dtype = xp.float32 if store.itemsize == 4 else xp.float64
    stack = xp.empty((m, n, n), dtype=dtype, device=link.device)
    for start, stop in store.blocks():
        stack[:, start:stop, :] = link.to_device(store.read_rows(start, stop), "kernels", dtype=dtype)
    return stack


def fit_store_resident(store: Any, options: Any, callback: Callable[..., None] | None = None,
                       kernels: Any = None) -> Any:
    """A whole fit of a kernel store with the stack resident on ``options.resident``'s device.

    The stack goes to the device once (:func:`load_stack`; or ``kernels``, already there:
    a sweep loads it once for its grid points), :func:`fit_resident` runs there, and the
    labels come from the factor W (:func:`lswmkc_dask.engine.postprocess.cluster_factor_on`).

    Parameters
    ----------
    store : lswmkc_dask.io.KernelStore or ResidentStack
        Preprocessed base kernels, shape (m, n, n).
    options : lswmkc_dask.records.FitOptions
        ``resident`` names the namespace (:data:`RESIDENT_NAMESPACES`); ``eig_driver``,
        ``eig_threads`` (beyond k-means' embedding) and ``snapshot_iterations`` do not apply.
    callback : callable, optional
        As in :func:`fit_resident`.
    kernels : array of shape (m, n, n), optional
        The stack already on the device (from :func:`load_stack`).

    Returns
    -------
    lswmkc_dask.records.LSWMKCResult
        ``eig_drivers`` are "resident"; ``execution`` names the namespace and device;
        ``stage_seconds["start"]`` the copy of the stack, ``["kernels"]`` a
        ResidentStack's build; ``kernel_names`` the store's.

    Raises
    ------
    ParameterError
        Unknown ``resident``, or ``snapshot_iterations`` asked for.
    ResidentRefusal
        (a MemoryError) the stack and the work arrays do not fit the free device memory
        (needed and free).
    """
    if options.snapshot_iterations:
        raise ParameterError("{} are not kept by a resident fit ({}): fit without it to keep snapshots",
                             Param("snapshot_iterations"), Param("resident", options.resident))
    xp, device = resident_namespace(options.resident)
    built = kernels is None and isinstance(store, ResidentStack)  # built on the device: nothing copied
    if kernels is None and not built:
        _refuse(store.n_kernels, store.n_samples, store.itemsize, xp)
    t0 = time.perf_counter()
    transfers = store.link.transfers if built else Transfers()  # the features' copies counted
    if kernels is None:
        kernels = load_stack(store, Link(xp, device, transfers))
    result = _fit_on_device(kernels, options, device, transfers, callback, 0.0 if built else time.perf_counter() - t0)
    if built:
        result.stage_seconds = {"kernels": store.build_seconds, **result.stage_seconds}
    result.kernel_names = store.kernel_names
    return result


def fit_array_resident(kernels: np.ndarray, options: Any, callback: Callable[..., None] | None = None) -> Any:
    """A whole fit of a kernel stack in host memory on ``options.resident``'s device (a
    sweep's task on a GPU worker): the stack copied there once, then as :func:`fit_store_resident`.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n), float64 or float32
        Preprocessed base kernels.
    options : lswmkc_dask.records.FitOptions
        With ``resident`` set (no snapshots).
    callback : callable, optional

    Returns
    -------
    lswmkc_dask.records.LSWMKCResult

    Raises
    ------
    ResidentRefusal
        The device's free memory cannot hold the stack and the work arrays.
    """
    xp, device = resident_namespace(options.resident)
    m, n, _ = kernels.shape
    _refuse(m, n, kernels.dtype.itemsize, xp)
    t0 = time.perf_counter()
    transfers = Transfers()
    dtype = xp.float32 if kernels.dtype == np.float32 else xp.float64
    stack = Link(xp, device, transfers).to_device(kernels, "kernels", dtype=dtype)
    return _fit_on_device(stack, options, device, transfers, callback, time.perf_counter() - t0)


def fit_features_resident(fk: Any, options: Any, callback: Callable[..., None] | None = None,
                          stack_dtype: str = "float64") -> tuple[Any, Any]:
    """A whole fit from feature views with the base kernels built in device memory
    (:func:`features_stack`, then :func:`fit_store_resident`; equal to the host route's fit
    to rounding, the kernels to about 1e-15).

    Parameters
    ----------
    fk : lswmkc_dask.FeatureKernels
        The views (m of them, n samples each).
    options : lswmkc_dask.records.FitOptions
        With ``resident`` set (no snapshots).
    callback : callable, optional
        As in :func:`fit_resident`.
    stack_dtype : {"float64", "float32"}
        The stack's precision on the device (:data:`STACK_DTYPES`): float32 halves it,
        each entry computed in float64 and rounded once.

    Returns
    -------
    result : lswmkc_dask.records.LSWMKCResult
        ``stage_seconds["kernels"]``: the kernels built on the device.
    statistics : lswmkc_dask.io.PreprocessingStatistics
        The training statistics of section 0 (m x n column means and centred diagonals).

    Raises
    ------
    ResidentRefusal
        The device cannot hold the stack with the work arrays (the figures).
    """
    stack = features_stack(fk, options.resident, stack_dtype)
    return fit_store_resident(stack, options, callback), stack.statistics


class ResidentStack:
    """Preprocessed base kernels built in device memory from feature views: what a
    :class:`lswmkc_dask.io.KernelStore` gives a fit or a sweep (shape, names, row blocks
    read to the host), with no store behind it.

    Parameters
    ----------
    kernels : array of shape (m, n, n) on the device
    names : list of str
        One name per kernel.
    statistics : lswmkc_dask.io.PreprocessingStatistics
        The training statistics of section 0.
    link : Link
        The device; copies to the host are recorded there.
    block_rows : int
        Rows per block of :meth:`blocks`.
    build_seconds : float
        Wall time of building the kernels (``stage_seconds["kernels"]`` of a fit).
    """

    labels = None
    location = None
    in_memory = True  # (no location another process could read)

    def __init__(self, kernels: Any, names: list[str], statistics: Any, link: Link, block_rows: int,
                 build_seconds: float = 0.0) -> None:
        self.kernels, self.statistics, self.link, self.block_rows = kernels, statistics, link, int(block_rows)
        self.build_seconds = float(build_seconds)
        self.n_kernels, self.n_samples = int(kernels.shape[0]), int(kernels.shape[1])
        self.itemsize = 4 if kernels.dtype == link.xp.float32 else 8
        self.nbytes = self.itemsize * self.n_kernels * self.n_samples**2
        self.kernel_names = list(names)
        self.attrs = {"kernel_names": self.kernel_names, "dtype": "float32" if self.itemsize == 4 else "float64"}

    def __repr__(self) -> str:
        return (f"ResidentStack(on {self.link.device}: {self.n_kernels} kernels x {self.n_samples} samples, "
                f"{self.itemsize * 8}-bit)")

    def blocks(self, block_rows: int | None = None) -> list[tuple[int, int]]:
        """Row ranges ``[(start, stop), ...]`` covering ``0..n``.

        Returns
        -------
        list of (int, int)
        """
        b = int(block_rows or self.block_rows)
        return [(s, min(self.n_samples, s + b)) for s in range(0, self.n_samples, b)]

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of every kernel copied to the host, shape (m, b, n), in the stack's dtype.

        Returns
        -------
        ndarray
        """
        return self.link.to_host(self.kernels[:, start:stop, :], "kernel rows")

    def preprocessing_statistics(self) -> Any:
        """The training statistics (:class:`lswmkc_dask.io.PreprocessingStatistics`)."""
        return self.statistics


def features_stack(fk: Any, resident: str, stack_dtype: str = "float64", transfers: Transfers | None = None) -> Any:
    """The preprocessed kernels of feature views built on ``resident``'s device, once.

    :func:`lswmkc_dask.kernels.feature_kernels_on`, block by block, no store on disk; the
    device's memory checked first for the stack with a fit's work arrays (:func:`shape_refusal`).

    Parameters
    ----------
    fk : lswmkc_dask.FeatureKernels
        The views (m of them, n samples each).
    resident : str
        The namespace (:data:`lswmkc_dask.engine.device_fit.RESIDENT_NAMESPACES`).
    stack_dtype : {"float64", "float32"}
        The stack's precision (:data:`STACK_DTYPES`).
    transfers : Transfers, optional
        Where the copies are recorded.

    Returns
    -------
    ResidentStack

    Raises
    ------
    ResidentRefusal
        The device cannot hold the stack with the work arrays (the figures).
    """
    xp, device = resident_namespace(resident)
    m, n, _ = fk.shape
    _refuse(m, n, STACK_DTYPES[stack_dtype], xp)
    link = Link(xp, device, transfers)
    t0 = time.perf_counter()
    kernels, col_means, diag = feature_kernels_on(fk, link, dtype=stack_dtype)
    gpu.synchronize(xp)
    built = time.perf_counter() - t0
    names = list(fk.names) if fk.names is not None else [f"kernel {p}" for p in range(m)]
    stats = PreprocessingStatistics(col_means, diag, np.arange(m, dtype=np.int64), m)
    return ResidentStack(kernels, names, stats, link, feature_block_rows(m, n), built)


def _fit_on_device(kernels, options, device, transfers, callback, load_seconds):
    """:func:`fit_resident` on a stack on the device, then the embedding and k-means where
    the factor is (on the host for NumPy).
    """
    n = kernels.shape[1]
    t1 = time.perf_counter()
    # Host BLAS threads as the in-process CPU route (what NumPy and array-api-strict compute with).
    with limit_blas(blas_threads(options.eig_threads, None, n)):
        result, gamma, affinity = fit_resident(
            kernels, float(options.alpha), n_neighbors=options.n_neighbors, gamma=options.gamma,
            max_iter=options.max_iter, min_iter=options.min_iter, tol=options.tol, callback=callback,
            transfers=transfers,
            precision="mixed" if options.eig_precision == "mixed" else "float64",
        )
    xp = array_namespace(kernels)
    del kernels
    t2 = time.perf_counter()
    factor = np.asarray(result.factor)
    if is_numpy_namespace(xp):  # the device is the host
        labels, embedding = cluster_factor(factor, options.n_clusters, options.n_init, options.random_state,
                                           options.eig_threads)
    else:
        link = Link(xp, result.device_factor.device, transfers)
        labels, embedding = cluster_factor_on(result.device_factor, options.n_clusters, options.n_init,
                                              options.random_state, to_host=lambda a: link.to_host(a, "k-means"))
    result.device_factor = None
    stages = {"start": load_seconds, "iterations": t2 - t1, "cluster": time.perf_counter() - t2, "gather": 0.0}
    return LSWMKCResult.from_fit(
        result, options, labels=labels, embedding=embedding, kstar_factor=factor, affinity=affinity, gamma=gamma,
        stage_seconds=stages, execution=f"resident on {options.resident} ({device})",
        device_transfers=transfer_record(transfers, int(result.n_iter)),
    )


def transfer_record(transfers: Transfers, n_iter: int) -> dict[str, int]:
    """What crossed between host and device in one resident fit (bytes).

    Returns
    -------
    dict
        ``to_device`` and ``to_host`` (whole fit, the stack's copy included when this fit
        made it), ``largest_per_iteration`` (the largest single copy during iterations
        1..n_iter: a few numbers, never of size n x n).
    """
    return {
        "to_device": sum(transfers.per_iteration("to_device").values()),
        "to_host": sum(transfers.per_iteration("to_host").values()),
        "largest_per_iteration": transfers.largest(range(1, n_iter + 1)),
    }

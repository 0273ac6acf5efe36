"""When a fit runs wholly on one device, where its kernel stack lives, and which eigen route it takes.

The iteration itself is :func:`lswmkc_dask.engine.device_fit.fit_resident`. Here: the plan
(:func:`plan_for`: the stack on the device, streamed from host memory, :class:`HostRows`, or
rebuilt from the features, :class:`FeatureRows`; syevd or the split eigen route) by the
device memory it needs against the device's, the route's rule (:func:`resident_plan`), and
the one entry point (:func:`fit_on_device`: a store, a host array, feature views or a stack
on the device).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from array_api_compat import is_numpy_namespace

from .._threads import blas_threads, limit_blas
from ..core.equations import DIAGONAL_JITTER, centre_normalise_rows, mean_of_means
from ..errors import Param, ParameterError, ResidentRefusal
from ..io.inputs import KernelStack
from ..io.store import BaseKernelStack, PreprocessingStatistics
from ..kernels.features import FeatureKernels, feature_kernels_on, raw_rows
from ..kernels.features import default_block_rows as feature_block_rows
from ..records import LSWMKCResult
from . import gpu
from ._memory import DevicePlan, choose_plan, device_plans, memory_left, resident_bytes
from .device_fit import (
    RESIDENT_PRECISIONS,
    Link,
    Transfers,
    default_block_rows,
    fit_resident,
    resident_namespace,
    row_source,
)
from .postprocess import cluster_factor, cluster_factor_on

#: The precisions of a kernel stack on the device (``stack_dtype``), by their bytes per entry.
STACK_DTYPES = {"float64": 8, "float32": 4}


#: cuSOLVER's ``syevd`` device workspace in n x n float64 arrays (measured:
#: :data:`lswmkc_dask.engine.gpu.EIGH_WORKSPACE`).
EIGH_WORKSPACE = gpu.EIGH_WORKSPACE


def needs_blockwise(snapshots: Any, precision: str) -> bool:
    """Whether what a fit asks for is kept by the blockwise route only: snapshots, or
    ``eig_precision="float32"`` (the resident route runs float64 and "mixed").

    Returns
    -------
    bool
    """
    return bool(snapshots) or precision not in RESIDENT_PRECISIONS


def plan_for(m: int, n: int, itemsize: int, xp: Any, info: tuple | None = None, *, off_device: str = "host",
             stack: str | None = None, eigen: str | None = None,
             feature_columns: int = 0) -> tuple[DevicePlan | None, str]:
    """The resident plan a fit of ``m`` kernels at ``n`` samples takes on ``xp``'s device, or why none fits.

    The first of :func:`lswmkc_dask.engine._memory.device_plans` whose count fits the free
    device memory: the stack on the device, else off it (``off_device``), with syevd, else
    with the split eigen route.

    Parameters
    ----------
    m, n, itemsize : int
        The stack's shape and bytes per entry.
    xp : array-API namespace
        Of the device (:func:`lswmkc_dask.engine.gpu.namespace`).
    info : tuple, optional
        :func:`lswmkc_dask.engine.gpu.device_info` of ``xp`` when already read.
    off_device : {"host", "features"}
        Where the stack can live off the device.
    stack, eigen : str, optional
        Only this stack (:data:`STACKS`) or eigen route.
    feature_columns : int
        ("features") the views' columns in all.

    Returns
    -------
    plan : DevicePlan or None
    why_not : str
        cuSOLVER's size limit of CUDA runtimes before 13, or the leanest plan's bytes
        against the free device memory with every plan's figures; "" when a plan fits.
    """
    runtime, free, total = info if info is not None else gpu.device_info(xp)
    limit = gpu.solver_max_n(runtime)
    if limit is not None and n > limit:
        return None, gpu.device_refusal(n, xp)
    plans = device_plans(m, n, default_block_rows(m, n), itemsize, off_device=off_device, stack=stack, eigen=eigen,
                         feature_columns=feature_columns)
    plan = choose_plan(plans, free)
    if plan is not None:
        return plan, ""
    what = f"the kernel stack ({m} kernels at n = {n}) with S, its eigenvectors and K*'s factor"
    leanest = min(p.need for p in plans) if plans else resident_bytes(m, n, default_block_rows(m, n), itemsize)
    why = gpu.memory_refusal(n, free, total, need=leanest, what=what)
    figures = "; ".join(p.text() for p in plans)
    split = "" if n <= gpu.SPLIT_MAX_N else (f"; the split eigen route stops at n = {gpu.SPLIT_MAX_N} (cuSOLVER's "
                                             "32-bit sytrd/ormtr)")
    return None, f"{why} ({figures}{split})"


def shape_refusal(m: int, n: int, itemsize: int, xp: Any, info: tuple | None = None, **plan: Any) -> str:
    """Why ``xp``'s device cannot hold a resident fit of ``m`` kernels at ``n`` samples ("" when it can).

    Parameters
    ----------
    m, n, itemsize : int
        The stack's shape and bytes per entry.
    xp : array-API namespace
        Of the device (:func:`lswmkc_dask.engine.gpu.namespace`).
    info : tuple, optional
        :func:`lswmkc_dask.engine.gpu.device_info` of ``xp`` when already read.
    **plan
        ``off_device``, ``stack``, ``eigen``, ``feature_columns`` of :func:`plan_for`.

    Returns
    -------
    str
        :func:`plan_for`'s ``why_not``.
    """
    return plan_for(m, n, itemsize, xp, info, **plan)[1]


def _plan(m, n, itemsize, xp, **plan):
    """:func:`plan_for`, raising :class:`ResidentRefusal` where nothing fits."""
    chosen, why = plan_for(m, n, itemsize, xp, **plan)
    if chosen is None:
        raise ResidentRefusal(why)
    return chosen


def resident_plan(m: int, n: int, itemsize: int, device: str, *, snapshots: Any = False,
                  precision: str = "float64", off_device: str = "host", feature_columns: int = 0) -> tuple[bool, str]:
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
    off_device, feature_columns
        As :func:`plan_for` (the stack may live in host memory, or be rebuilt from the views).

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
    why = shape_refusal(m, n, itemsize, xp, info, off_device=off_device, feature_columns=feature_columns)
    return (not why), why


class HostRows:
    """A kernel stack in host memory, its row blocks copied to the device each pass (``stack="host"``).

    :func:`lswmkc_dask.engine.gpu.stream_rows`: pinned staging on CuPy with the next block's
    copy overlapping the current block's work; a plain copy elsewhere; each copy recorded
    as "kernel rows" (``m n^2`` entries a pass).

    Parameters
    ----------
    read : callable
        ``read(start, stop)``: rows of every kernel, (m, stop - start, n), on the host.
    shape : tuple of int
        (m, n, n).
    itemsize : int
        8 or 4: the stack's dtype on the device.
    link : Link
        The device.
    """

    stack = "host"

    def __init__(self, read: Callable[[int, int], np.ndarray], shape: tuple, itemsize: int, link: Link) -> None:
        self.read, self.shape, self.xp, self.device, self._link = read, tuple(shape), link.xp, link.device, link
        self.dtype = link.xp.float32 if itemsize == 4 else link.xp.float64

    @classmethod
    def of(cls, store: Any, link: Link) -> HostRows:
        """The rows of ``store`` (a KernelStore, read into host memory once where it fits there,
        else from the store each pass) or of an (m, n, n) ndarray.

        Returns
        -------
        HostRows

        Raises
        ------
        KernelInputError
            A damaged chunk of the store.
        """
        if isinstance(store, np.ndarray):
            return cls(lambda s, e: store[:, s:e, :], store.shape, store.dtype.itemsize, link)
        m, n = store.n_kernels, store.n_samples
        if store.nbytes * 3 // 2 < memory_left():
            held = np.empty((m, n, n), dtype=np.float32 if store.itemsize == 4 else np.float64)
            for start, stop in store.blocks():
                held[:, start:stop, :] = store.read_rows(start, stop)
            return cls.of(held, link)
        return cls(store.read_rows, (m, n, n), store.itemsize, link)

    def rows(self, start: int, stop: int) -> Any:
        """Rows ``start:stop`` on the device (recorded as "kernel rows").

        Returns
        -------
        array of shape (m, stop - start, n)
        """
        return next(iter(self.row_blocks([(start, stop)], None)))[2]

    def row_blocks(self, blocks: list[tuple[int, int]], link: Link | None) -> Any:
        """``(start, stop, rows)`` per block, copied to the device (:func:`lswmkc_dask.engine.gpu.stream_rows`).

        Returns
        -------
        iterator
        """
        return gpu.stream_rows(self.read, blocks, link if link is not None else self._link, self.dtype)


class FeatureRows:
    """The preprocessed kernels of feature views, their row blocks rebuilt on the device each
    pass (``stack="features"``): only the z-scored views (n x d) and the statistics stay there.

    One pass at construction forms the training statistics (column means and centred
    diagonals, as :func:`lswmkc_dask.kernels.feature_kernels_on` forms them); each block is
    then the raw rows, centred and normalised (:func:`lswmkc_dask.core.centre_normalise_rows`),
    rounded once to float32 for a float32 stack: the resident stack's numbers to rounding.

    Parameters
    ----------
    fk : lswmkc_dask.FeatureKernels
    link : Link
        The device; the views cross once ("features"), the statistics back once.
    dtype : {"float64", "float32"}
        The precision of the rows handed to the fit (:data:`STACK_DTYPES`).
    block_rows : int, optional
        Rows per block of the statistics' pass.
    """

    stack = "features"

    def __init__(self, fk: Any, link: Link, dtype: str = "float64", block_rows: int | None = None) -> None:
        xp = self.xp = link.xp
        m, n, _ = fk.shape
        self.fk, self.device, self.shape = fk, link.device, (m, n, n)
        self.dtype = xp.float32 if dtype == "float32" else xp.float64
        self.views = [link.to_device(view, "features") for view in fk.views]
        self.norms = [xp.sum(x * x, axis=1) for x in self.views]
        b = feature_block_rows(m, n) if block_rows is None else max(1, int(block_rows))
        col_sums, raw_diag = xp.zeros((m, n), dtype=xp.float64, device=link.device), []
        for start in range(0, n, b):
            rows = self.raw(start, min(n, start + b))
            col_sums = col_sums + xp.sum(rows, axis=1)  # symmetric kernels: the columns' sums
            raw_diag.append(xp.asarray(xp.linalg.diagonal(rows[:, :, start:min(n, start + b)]), copy=True))
        self.col_means = col_sums / n
        diag = xp.concat(raw_diag, axis=1)
        self.diag = (((diag - self.col_means) - self.col_means) + mean_of_means(self.col_means, xp)[:, None]
                     ) + DIAGONAL_JITTER
        self.statistics = (link.to_host(self.col_means, "statistics"), link.to_host(self.diag, "statistics"))

    def raw(self, start: int, stop: int) -> Any:
        """Raw kernel rows ``start:stop`` (float64, (m, b, n)) on the device."""
        return raw_rows(self.fk, self.views, self.norms, start, stop, self.xp)  # FeatureKernels.rows's numbers

    def rows(self, start: int, stop: int) -> Any:
        """Preprocessed rows ``start:stop`` on the device, in the stack's dtype.

        Returns
        -------
        array of shape (m, stop - start, n)
        """
        rows = centre_normalise_rows(self.raw(start, stop), start, self.col_means, self.diag, xp=self.xp)
        return self.xp.astype(rows, self.dtype, copy=False)

    def row_blocks(self, blocks: list[tuple[int, int]], link: Link | None) -> Any:
        """``(start, stop, rows)`` per block, rebuilt on the device (nothing crosses).

        Returns
        -------
        iterator
        """
        for start, stop in blocks:
            yield start, stop, self.rows(start, stop)


def load_stack(store: Any, link: Link, stack: str | None = None, eigen: str | None = None) -> Any:
    """The kernel stack of ``store`` for a resident fit on ``link``'s device, by the memory count.

    On the device when it fits there with the work arrays (copied one stored row block at a
    time), else streamed from host memory each pass (:class:`HostRows`): :func:`plan_for`.

    Parameters
    ----------
    store : lswmkc_dask.io.inputs.KernelStack
        A KernelStore, an ArrayStack or a ResidentStack, shape (m, n, n); a
        :class:`ResidentStack`'s kernels are returned as they are.
    link : Link
        The device; each block's copy is recorded as "kernels".
    stack, eigen : str, optional
        The plan asked for (:data:`STACKS`: "device" or "host"; the eigen route).

    Returns
    -------
    lswmkc_dask.engine.device_fit.DeviceRows or HostRows
        The stack of shape (m, n, n) on the device in the store's dtype (float64 or float32),
        or its rows streamed from host memory.

    Raises
    ------
    KernelInputError
        A damaged chunk (the store's integrity checks, as every read).
    ResidentRefusal
        No plan fits the free device memory (the figures).
    """
    return _on_device(store, link, stack, eigen)[0]


def _on_device(kernels, link, stack=None, eigen=None):
    """``(rows, plan)``: the kernels as a row source on ``link``'s device and the plan of the fit
    (:func:`plan_for`): a store or a host array placed by the plan (a store one stored row block
    at a time); a stack there already (or a ResidentStack's) planned where it lives.
    """
    xp = link.xp
    kernels = row_source(kernels.kernels) if isinstance(kernels, ResidentStack) else kernels
    if isinstance(kernels, np.ndarray):
        m, n, itemsize = kernels.shape[0], kernels.shape[1], kernels.dtype.itemsize
    elif isinstance(kernels, KernelStack):  # a store, or an ArrayStack in this process's memory
        m, n, itemsize = kernels.n_kernels, kernels.n_samples, kernels.itemsize
    else:  # on the device already
        kernels = row_source(kernels)
        where = kernels.stack
        columns = sum(int(v.shape[1]) for v in kernels.views) if isinstance(kernels, FeatureRows) else 0
        return kernels, _plan(kernels.shape[0], kernels.shape[1], 4 if kernels.dtype == xp.float32 else 8, xp,
                              off_device=where, stack=where, eigen=eigen, feature_columns=columns)
    plan = _plan(m, n, itemsize, xp, stack=stack, eigen=eigen)
    dtype = xp.float32 if itemsize == 4 else xp.float64
    if plan.stack == "host":
        return HostRows.of(kernels, link), plan
    if isinstance(kernels, np.ndarray):
        return row_source(link.to_device(kernels, "kernels", dtype=dtype)), plan
    out = xp.empty((m, n, n), dtype=dtype, device=link.device)
    for start, stop in kernels.blocks():
        out[:, start:stop, :] = link.to_device(kernels.read_rows(start, stop), "kernels", dtype=dtype)
    return row_source(out), plan


def fit_on_device(kernels: Any, options: Any, callback: Callable[..., None] | None = None, *,
                  stack: str | None = None, eigen: str | None = None, stack_dtype: str = "float64") -> Any:
    """A whole fit on ``options.resident``'s device, from any kernel stack.

    The stack goes to the device once, or stays in host memory (:class:`HostRows`), or is
    rebuilt from the features each pass (:class:`FeatureRows`), where the memory count puts
    it (:func:`plan_for`); :func:`lswmkc_dask.engine.device_fit.fit_resident` runs there with
    the plan's eigen route, and the labels come from the factor W
    (:func:`lswmkc_dask.engine.postprocess.cluster_factor_on`).

    Parameters
    ----------
    kernels : KernelStack, ndarray, FeatureKernels, or a stack on the device
        The preprocessed base kernels, shape (m, n, n): a store or an ArrayStack
        (:class:`lswmkc_dask.io.inputs.KernelStack`); a stack in host memory, float64 or
        float32 (a sweep's task on a GPU worker); feature views, their kernels built on the
        device (:func:`features_stack`: equal to the host route's fit to rounding, the
        kernels to about 1e-15; build the ResidentStack first to keep its training
        statistics); a :class:`ResidentStack`; or a stack on the device, an array of its
        namespace (a NumPy array is taken as host memory) or a row source
        (:func:`lswmkc_dask.engine.device_fit.row_source`; :func:`load_stack`'s: a sweep loads
        it once for its grid points).
    options : lswmkc_dask.records.FitOptions
        ``resident`` names the namespace (:data:`RESIDENT_NAMESPACES`); ``eig_driver``,
        ``eig_threads`` (beyond k-means' embedding) and ``snapshot_iterations`` do not apply.
    callback : callable, optional
        As in :func:`lswmkc_dask.engine.device_fit.fit_resident`.
    stack, eigen : str, optional
        The plan asked for (:data:`STACKS`; the eigen route; default: by the memory count).
    stack_dtype : {"float64", "float32"}
        Of feature views: the stack's precision on the device (:data:`STACK_DTYPES`).

    Returns
    -------
    lswmkc_dask.records.LSWMKCResult
        ``eig_drivers`` are "resident"; ``execution`` names the namespace, device, stack and
        eigen route; ``device_transfers`` also ``stack``, ``eigen``,
        ``stack_bytes_per_pass`` and ``stop_rule``; ``stage_seconds["start"]`` the copy of
        the stack, ``["kernels"]`` a ResidentStack's build; ``kernel_names`` a store's (or
        a ResidentStack's), else empty.

    Raises
    ------
    ParameterError
        Unknown ``resident``, or ``snapshot_iterations`` asked for.
    ResidentRefusal
        (a MemoryError) no plan fits the free device memory (the figures).
    KernelInputError
        A damaged chunk of a store.
    """
    if options.snapshot_iterations:
        raise ParameterError("{} are not kept by a resident fit ({}): fit without it to keep snapshots",
                             Param("snapshot_iterations"), Param("resident", options.resident))
    xp, device = resident_namespace(options.resident)
    if isinstance(kernels, FeatureKernels):
        kernels = features_stack(kernels, options.resident, stack_dtype)
    built = isinstance(kernels, ResidentStack)  # built on the device: its copies counted, nothing copied now
    transfers = kernels.link.transfers if built else Transfers()
    t0 = time.perf_counter()
    rows, plan = _on_device(kernels, Link(xp, device, transfers), stack, eigen)
    result = _fit(rows, options, device, transfers, callback, 0.0 if built else time.perf_counter() - t0, plan.eigen)
    if built:
        result.stage_seconds = {"kernels": kernels.build_seconds, **result.stage_seconds}
    result.kernel_names = list(getattr(kernels, "kernel_names", None) or [])
    return result


class ResidentStack(BaseKernelStack):
    """Preprocessed base kernels built in device memory from feature views: what a
    :class:`lswmkc_dask.io.KernelStore` gives a fit or a sweep (shape, names, row blocks
    read to the host, from :class:`lswmkc_dask.io.store.BaseKernelStack`), with no store behind it.

    Parameters
    ----------
    kernels : array of shape (m, n, n) on the device, or FeatureRows
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
        dtype = "float32" if kernels.dtype == link.xp.float32 else "float64"
        self.attrs = {"kernel_names": list(names), "dtype": dtype}

    def __repr__(self) -> str:
        return (f"ResidentStack(on {self.link.device}: {self.n_kernels} kernels x {self.n_samples} samples, "
                f"{self.itemsize * 8}-bit)")

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of every kernel copied to the host, shape (m, b, n), in the stack's dtype.

        Returns
        -------
        ndarray
        """
        rows = self.kernels.rows(start, stop) if isinstance(self.kernels, FeatureRows) else self.kernels[:, start:stop]
        return self.link.to_host(rows, "kernel rows")

    def preprocessing_statistics(self) -> Any:
        """The training statistics (:class:`lswmkc_dask.io.PreprocessingStatistics`)."""
        return self.statistics


def features_stack(fk: Any, resident: str, stack_dtype: str = "float64", transfers: Transfers | None = None, *,
                   stack: str | None = None, eigen: str | None = None) -> Any:
    """The preprocessed kernels of feature views on ``resident``'s device: built there once, or
    rebuilt there block by block each pass where the stack does not fit (:class:`FeatureRows`).

    :func:`lswmkc_dask.kernels.feature_kernels_on`, block by block, no store on disk; the
    device's memory checked first for the stack with a fit's work arrays (:func:`plan_for`,
    the stack on the device, else from the features).

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
    stack, eigen : str, optional
        The plan asked for ("device" or "features"; the eigen route).

    Returns
    -------
    ResidentStack

    Raises
    ------
    ResidentRefusal
        No plan fits the device's free memory (the figures).
    """
    xp, device = resident_namespace(resident)
    m, n, _ = fk.shape
    plan = _plan(m, n, STACK_DTYPES[stack_dtype], xp, off_device="features", stack=stack, eigen=eigen,
                 feature_columns=sum(int(v.shape[1]) for v in fk.views))
    link = Link(xp, device, transfers)
    t0 = time.perf_counter()
    if plan.stack == "features":
        kernels = FeatureRows(fk, link, stack_dtype)
        col_means, diag = kernels.statistics
    else:
        kernels, col_means, diag = feature_kernels_on(fk, link, dtype=stack_dtype)
    gpu.synchronize(xp)
    built = time.perf_counter() - t0
    names = list(fk.names) if fk.names is not None else [f"kernel {p}" for p in range(m)]
    stats = PreprocessingStatistics(col_means, diag, np.arange(m, dtype=np.int64), m)
    return ResidentStack(kernels, names, stats, link, feature_block_rows(m, n), built)


def _fit(kernels, options, device, transfers, callback, load_seconds, eigen="syevd"):
    """:func:`fit_resident` on a row source of the stack, then the embedding and
    k-means where the factor is (on the host for NumPy).
    """
    n = kernels.shape[1]
    record: dict[str, Any] = {}
    t1 = time.perf_counter()
    # Host BLAS threads as the in-process CPU route (what NumPy and array-api-strict compute with).
    with limit_blas(blas_threads(options.eig_threads, None, n)):
        result, gamma, affinity = fit_resident(
            kernels, float(options.alpha), n_neighbors=options.n_neighbors, gamma=options.gamma,
            max_iter=options.max_iter, min_iter=options.min_iter, tol=options.tol, callback=callback,
            transfers=transfers, record=record, eigen=eigen,
            precision="mixed" if options.eig_precision == "mixed" else "float64",
        )
    xp = kernels.xp
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
    plan = "" if (record["stack"], eigen) == ("device", "syevd") else f", stack {record['stack']}, eigen {eigen}"
    moved: dict[str, Any] = {**transfer_record(transfers, int(result.n_iter)), "stack": record["stack"],
                             "eigen": eigen, "stack_bytes_per_pass": record["stack_bytes_per_pass"],
                             "bytes_per_pass": transfers.per_iteration().get(min(2, int(result.n_iter)), 0),
                             "stop_rule": {k: record[k] for k in ("n_iter", "first_float64", "stop_pairs",
                                                                  "stop_precisions")}}
    return LSWMKCResult.from_fit(
        result, options, labels=labels, embedding=embedding, kstar_factor=factor, affinity=affinity, gamma=gamma,
        stage_seconds=stages, execution=f"resident on {options.resident} ({device}){plan}", device_transfers=moved,
    )


def transfer_record(transfers: Transfers, n_iter: int) -> dict[str, int]:
    """What crossed between host and device in one resident fit (bytes).

    Returns
    -------
    dict
        ``to_device`` and ``to_host`` (whole fit, the stack's copy included when this fit
        made it), ``largest_per_iteration`` (the largest single copy during iterations
        1..n_iter: a few numbers with the stack on the device or from features; a streamed
        row block with ``stack="host"``; T's positive eigenvectors, n x r, with the split
        eigen route).
    """
    return {
        "to_device": sum(transfers.per_iteration("to_device").values()),
        "to_host": sum(transfers.per_iteration("to_host").values()),
        "largest_per_iteration": transfers.largest(range(1, n_iter + 1)),
    }

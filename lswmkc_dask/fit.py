"""One LSWMKC fit, from a kernel store to labels: the function every caller goes through.

:func:`fit_store` runs a whole fit where the data are (this process or a Dask
client); :func:`fit_blocks` runs it from row blocks already placed and an
initialisation that may be shared (the sweep shares one per number of neighbours
between all its alphas). Both return an :class:`LSWMKCResult`. The estimator
(:class:`lswmkc_dask.LSWMKC`, whose :meth:`~lswmkc_dask.LSWMKC.fit` calls
:func:`lswmkc_dask.engine.run_fit`, which chooses where, the device and the route and
then calls :func:`fit_store`), the sweep and compare (which call :func:`fit_blocks`)
only turn their parameters into :class:`FitOptions` (whose defaults are the parameter
table's, :mod:`lswmkc_dask._params`) and read the result;
:func:`lswmkc_dask.lswmkc` is the one-call form for users.

The flow (docs/algorithm.md sections 1-3): :func:`lswmkc_dask.solver.initialise` (Z_0,
gamma; Eqs. 25-28) -> :func:`lswmkc_dask.solver.iterate` (Eqs. 11-16 blockwise,
Theorem 2 gathered) -> :func:`lswmkc_dask.postprocess.cluster_factor` (the spectral
embedding of K* and kernel k-means) -> Z gathered as a sparse matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._eigen import EigenSpec, eigen_spec
from ._params import DEFAULTS
from ._progress import log_restarts  # re-exported: a fit's callback that logs its restarts
from ._runners import DaskRunner, LocalRunner, blocks_in_memory, kernel_blocks, lost_errors, plan_memory, row_views
from ._threads import blas_threads, limit_blas
from .cluster import raise_if_out_of_memory, raise_if_scheduler_lost, wait_for_workers
from .io import KernelStore
from .postprocess import cluster_factor
from .solver import gather_affinity, initialise, iterate, refactor, with_gamma

__all__ = ["FitOptions", "LSWMKCResult", "fit_blocks", "fit_store", "log_restarts"]


@dataclass(frozen=True)
class FitOptions:
    """The settings of one fit besides the data (each as in :class:`lswmkc_dask.LSWMKC`).

    Attributes
    ----------
    n_clusters : int
        k of the final kernel k-means.
    alpha : float
        The weight of the neighbourhood-kernel term (Eq. 10), > 0.
    n_neighbors : int
        Neighbours of the initial graph (Eqs. 25-28).
    gamma : "auto" or float
        ``"auto"``: the learned per-sample gamma_i (Eqs. 25-27); a float: one scalar
        gamma for every sample (the paper's ablation).
    max_iter, min_iter : int
        Iteration bounds of the reference stop rule.
    tol : float
        Relative change of K* that stops the loop (after ``min_iter``).
    n_init : int
        k-means starts (the lowest inertia is kept).
    random_state : int or None
        Seed of k-means.
    eig_driver : str or EigenSpec
        The eigen route of Theorem 2 ("auto" or one of
        :data:`lswmkc_dask._eigen.EIG_ROUTES`); an :class:`~lswmkc_dask._eigen.EigenSpec`
        is taken as it is (its precision and device then override the two below).
    eig_precision : {"float64", "float32"}
        Precision of the eigendecomposition of S (:func:`lswmkc_dask._eigen.psd_factor`).
    eig_device : {"cpu", "cuda", "auto"}
        Where the gathered step runs: "cpu" or "cuda" here; "auto" is resolved by
        :func:`lswmkc_dask.engine.run_fit` (:func:`lswmkc_dask.gpu.resolve_device`)
        before the fit, and must be resolved before :func:`fit_store` or
        :func:`fit_blocks`.
    eig_threads : int or None
        BLAS threads of the gathered step (None: the cores free then).
    snapshot_iterations : tuple of int
        Iterations whose Z_t, factor of K*_t and omega_t are kept (0: the initialisation).
    resident : str or None
        None (default): the blockwise route. "cuda", "numpy" or "array-api-strict": the
        whole fit in this process with the kernel stack and every iteration on that
        array namespace's device (:func:`lswmkc_dask._device_route.fit_store_resident`;
        a client is not used).
    """

    n_clusters: int
    alpha: float = DEFAULTS["alpha"]  # the defaults are the parameter table's (lswmkc_dask._params)
    n_neighbors: int = DEFAULTS["n_neighbors"]
    gamma: str | float = DEFAULTS["gamma"]
    max_iter: int = DEFAULTS["max_iter"]
    min_iter: int = DEFAULTS["min_iter"]
    tol: float = DEFAULTS["tol"]
    n_init: int = DEFAULTS["n_init"]
    random_state: int | None = DEFAULTS["random_state"]
    eig_driver: str | EigenSpec = DEFAULTS["eig_driver"]
    eig_threads: int | None = DEFAULTS["eig_threads"]
    snapshot_iterations: tuple[int, ...] = ()  # the table's None: none kept
    resident: str | None = None
    eig_precision: str = DEFAULTS["eig_precision"]
    eig_device: str = DEFAULTS["eig_device"]

    def eigen(self) -> str | EigenSpec:
        """The gathered step's route as :func:`lswmkc_dask.solver.iterate` takes it: the
        plain ``eig_driver`` on the CPU in float64, else an
        :class:`~lswmkc_dask._eigen.EigenSpec` with the precision and the device.

        Returns
        -------
        str or EigenSpec
        """
        if isinstance(self.eig_driver, EigenSpec):
            return self.eig_driver
        if self.eig_device == "cpu" and self.eig_precision == "float64":
            return self.eig_driver
        return EigenSpec(self.eig_driver, self.eig_precision, self.eig_device)


@dataclass
class LSWMKCResult:
    """What one fit gives: labels, the learned graph and kernel, and the fit's record.

    Attributes
    ----------
    labels : ndarray of shape (n,), int
        Cluster of each sample (kernel k-means on the embedding of K*).
    embedding : ndarray of shape (n, n_clusters)
        The spectral embedding of K* that k-means clustered.
    kstar_factor : ndarray of shape (n, r)
        W with K* = W W^T (Theorem 2); r is the rank of K*.
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        The affinity graph Z (rows on the simplex, Theorem 1).
    kernel_weights : ndarray of shape (m,)
        omega of the last iteration (Eq. 12).
    gamma : ndarray of shape (n,)
        gamma_i used (learned, Eqs. 25-27, or the scalar repeated).
    objective, kstar_change : ndarray of shape (n_iter,)
        Eq. (10) and ``||K*_t - K*_{t-1}||_F`` per iteration (NaN at t = 1).
    n_iter : int
    converged : bool
        Whether the stop rule fired before ``max_iter``.
    fit_seconds : float
        Seconds of the iterations (wall clock).
    iteration_seconds, eig_seconds : ndarray of shape (n_iter,)
        Seconds of each iteration and of its eigendecomposition.
    eig_threads : ndarray of shape (n_iter,), int
    eig_drivers : ndarray of shape (n_iter,), object
        The eigen route each gathered step took.
    eig_parts : list of dict, length n_iter
        Seconds of each part of each eigendecomposition, and the eigenvectors it
        computed ("columns"); empty dicts for routes that do not record them.
    kstar_rank : ndarray of shape (n_iter,), int
    n_restarts : int
        Restarts from a checkpoint after lost workers.
    n_clusters : int
    snapshots : dict or None
        ``{t: (Z_t, W_t or None, omega_t)}`` for the asked iterations, or None.
    execution : str
        Where it ran ("in-process (...)", "Dask: N workers at ADDRESS"); empty from
        :func:`fit_blocks`.
    kernel_names : list of str
        One name per base kernel (from the store; empty from :func:`fit_blocks`).
    stage_seconds : dict of str to float
        Wall seconds of each stage, in order: ``"start"`` (waiting for workers, the
        memory plan, reading or placing the row blocks; :func:`fit_store` only),
        ``"initialise"`` (Z_0 and gamma, Eqs. 25-28; :func:`fit_store` only),
        ``"iterations"``, ``"cluster"`` (the spectral embedding of K* and kernel
        k-means), ``"gather"`` (Z brought to the caller).
    device_transfers : dict of str to int or None
        Resident route only (:func:`lswmkc_dask._device_route.transfer_record`): bytes
        copied to and from the device, and the largest copy during the iterations.
    eig_device : str
        Where the gathered steps were sent: "cpu" or "cuda" (``eig_device`` resolved,
        :func:`lswmkc_dask.engine.run_fit`); ``eig_drivers`` says where each ran.
    """

    labels: np.ndarray
    embedding: np.ndarray
    kstar_factor: np.ndarray
    affinity: sp.csr_matrix
    kernel_weights: np.ndarray
    gamma: np.ndarray
    objective: np.ndarray
    kstar_change: np.ndarray
    n_iter: int
    converged: bool
    fit_seconds: float
    iteration_seconds: np.ndarray
    eig_seconds: np.ndarray
    eig_threads: np.ndarray
    eig_drivers: np.ndarray
    eig_parts: list
    kstar_rank: np.ndarray
    n_restarts: int
    n_clusters: int
    snapshots: dict | None = None
    execution: str = ""
    kernel_names: list[str] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    device_transfers: dict[str, int] | None = None
    eig_device: str = "cpu"


def fit_blocks(
    runner: Any,
    blocks: Sequence[Any],
    init: Any,
    options: FitOptions,
    *,
    max_threads: int | None = None,
    callback: Callable[..., None] | None = None,
    recover: Callable[[BaseException], Any] | None = None,
) -> LSWMKCResult:
    """Iterate from an initialisation, cluster K*, gather Z: one fit from placed row blocks.

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
        Where the steps run (:mod:`lswmkc_dask._runners`).
    blocks : list
        Row blocks of the base kernels, each of shape (m, b, n) (arrays, futures or
        :class:`~lswmkc_dask._runners.BlockRef`).
    init : InitState
        From :func:`lswmkc_dask.solver.initialise` (Eqs. 25-28); may be shared between
        fits that differ only in alpha (its gamma is replaced for a scalar gamma).
    options : FitOptions
    max_threads : int, optional
        Bound of the BLAS threads of the gathered steps (a sweep shares the cores).
    callback : callable, optional
        ``callback(t, objective, change, seconds, restarted=None)`` after each iteration.
    recover : callable, optional
        Called with the error after a lost worker; returns new row blocks (see
        :func:`lswmkc_dask.solver.iterate`). Without it a lost worker ends the fit.

    Returns
    -------
    LSWMKCResult
        With an empty ``execution`` (the caller knows where it ran).

    Raises
    ------
    MemoryError
        The gathered step does not fit a worker's memory (the message gives figures).
    concurrent.futures.CancelledError, distributed.KilledWorker
        Data lost on a worker and no ``recover`` given, or lost three times.
    """
    init = with_gamma(runner, init, options.gamma)
    snapshots = sorted({int(s) for s in options.snapshot_iterations})
    result = iterate(
        runner,
        blocks,
        init,
        float(options.alpha),
        max_iter=options.max_iter,
        min_iter=options.min_iter,
        tol=options.tol,
        eig_driver=options.eigen(),
        eig_threads=options.eig_threads,
        max_threads=max_threads,
        callback=callback,
        recover=recover,
        snapshots=snapshots,
    )
    t_cluster = time.perf_counter()
    factor = result.factor
    for attempt in range(3):
        clustered = runner.submit(cluster_factor, factor, options.n_clusters, options.n_init, options.random_state,
                                  options.eig_threads, max_threads)
        try:
            labels, embedding = runner.fetch(clustered)
            kstar_factor = runner.fetch(factor)
            break
        except lost_errors() as exc:
            if recover is None or attempt == 2:
                raise
            recover(exc)  # waits for workers; W again from the final Z held here
            factor = refactor(runner, result, options.eigen(), options.eig_threads, max_threads)
        finally:
            runner.release(clustered)
    runner.release(factor, result.factor)
    t_gather = time.perf_counter()
    affinity = gather_affinity(runner, result.z_blocks)
    stages = {"iterations": float(result.seconds), "cluster": t_gather - t_cluster,
              "gather": time.perf_counter() - t_gather}
    return LSWMKCResult(
        labels=labels,
        embedding=embedding,
        kstar_factor=kstar_factor,
        affinity=affinity,
        kernel_weights=np.asarray(result.weights),
        gamma=np.asarray(init.gamma),
        objective=np.asarray(result.objective),
        kstar_change=np.asarray(result.kstar_change),
        n_iter=int(result.n_iter),
        converged=bool(result.converged),
        fit_seconds=float(result.seconds),
        iteration_seconds=np.asarray(result.iteration_seconds),
        eig_seconds=np.asarray(result.eig_seconds),
        eig_threads=np.asarray(result.eig_threads, dtype=np.int64),
        eig_drivers=np.asarray(result.eig_drivers, dtype=object),
        eig_parts=[dict(p) for p in result.eig_parts],
        kstar_rank=np.asarray(result.rank),
        n_restarts=int(result.recoveries),
        n_clusters=int(options.n_clusters),
        snapshots=dict(sorted(result.snapshots.items())) if snapshots else None,
        stage_seconds=stages,
        eig_device=str(eigen_spec(options.eigen()).device),
    )


def fit_store(
    store: KernelStore,
    options: FitOptions,
    client: Any = None,
    *,
    block_rows: int | None = None,
    cache_kernels: str | bool = "auto",
    callback: Callable[..., None] | None = None,
) -> LSWMKCResult:
    """One whole fit of a kernel store: in this process, or blockwise on a Dask client.

    Parameters
    ----------
    store : KernelStore
        Preprocessed base kernels, shape (m, n, n) (:func:`lswmkc_dask.prepare`).
    options : FitOptions
    client : distributed.Client, optional
        None: the whole fit in this process with the same solver (its in-process
        runner). A client: row blocks on its workers, the gathered step on one of them,
        restarts from a checkpoint after lost workers.
    block_rows : int, optional
        Rows per block (default: :func:`lswmkc_dask._runners.solver_block_rows`).
    cache_kernels : "auto", bool
        Hold the row blocks in worker memory (see
        :func:`lswmkc_dask._runners.plan_memory`).
    callback : callable, optional
        As in :func:`fit_blocks`.

    Returns
    -------
    LSWMKCResult
        ``execution`` says where it ran; ``kernel_names`` from the store.

    Raises
    ------
    MemoryError
        The gathered step does not fit, or tasks killed their workers repeatedly (the
        message names the step, the figures and what to do).
    ConnectionError
        :class:`lswmkc_dask.cluster.SchedulerLostError` when the scheduler is lost.
    KernelInputError
        A damaged store (the message names the kernel and the rows).
    """
    if options.resident is not None:  # the stack and the iterations on one device (docs/algorithm.md section 5)
        from ._device_route import fit_store_resident

        result = fit_store_resident(store, options, callback)
    elif client is None:
        result = _fit_in_process(store, options, callback)
    else:
        try:
            result = _fit_on(client, store, options, block_rows, cache_kernels, callback)
        except Exception as exc:  # a future cancelled, a closed comm: say that the scheduler is gone
            raise_if_scheduler_lost(exc, client)
            raise
    result.kernel_names = store.kernel_names
    result.eig_device = "cuda" if options.resident == "cuda" else str(eigen_spec(options.eigen()).device)
    return result


def _fit_in_process(store, options, callback):
    t0 = time.perf_counter()
    kernels = store.read_rows(0, store.n_samples)
    blocks, starts = row_views(kernels)
    threads = blas_threads(options.eig_threads, None, store.n_samples)
    with limit_blas(threads):
        t1 = time.perf_counter()
        init = initialise(LocalRunner(), blocks, starts, store.n_kernels, options.n_neighbors)
        t2 = time.perf_counter()
        result = fit_blocks(LocalRunner(), blocks, init, options, callback=callback)
    result.stage_seconds = {"start": t1 - t0, "initialise": t2 - t1, **result.stage_seconds}
    result.execution = f"in-process ({threads} BLAS thread{'s' if threads != 1 else ''})"
    return result


def _fit_on(client, store, options, block_rows, cache_kernels, callback):
    t0 = time.perf_counter()
    wait_for_workers(client)
    cache = plan_memory(client, store, cache_kernels)
    # The smallest worker memory limit now: named if the workers die (none is left to tell it then).
    known = [w.get("memory_limit") or 0 for w in client.scheduler_info(n_workers=-1).get("workers", {}).values()]
    limit = min((x for x in known if x), default=None)
    # Kernels held in worker memory: room to recycle temporaries and keep W_{t-1} beside S.
    runner = DaskRunner(client, kernels_in_memory=blocks_in_memory(store, cache))
    blocks, starts = kernel_blocks(client, store, block_rows, cache)
    rows = starts[1] - starts[0] if len(starts) > 1 else store.n_samples
    t1 = time.perf_counter()
    try:
        init = with_gamma(runner, initialise(runner, blocks, starts, store.n_kernels, options.n_neighbors),
                          options.gamma)
    except lost_errors() as exc:
        raise_if_out_of_memory(exc, client, store, rows, cached=cache, known_limit=limit)
        raise
    t2 = time.perf_counter()
    bounds = [(s, min(store.n_samples, s + rows)) for s in starts]
    fresh = []  # handles made by restarts, released at the end

    def recover(exc):
        """New row blocks after a lost worker (re-read or re-sent by the client)."""
        raise_if_out_of_memory(exc, client, store, rows, cached=cache, known_limit=limit)
        wait_for_workers(client)
        new_blocks, _ = kernel_blocks(client, store, rows, cache)
        gamma = client.scatter([init.gamma[s:e] for s, e in bounds], hash=False)
        fresh.extend([new_blocks, gamma])
        return new_blocks, gamma

    try:
        result = fit_blocks(runner, blocks, init, options, callback=callback, recover=recover)
    finally:
        runner.release(blocks, init.z_blocks, init.gamma_blocks, *fresh)
    result.stage_seconds = {"start": t1 - t0, "initialise": t2 - t1, **result.stage_seconds}
    n_workers = len(client.scheduler_info()["workers"])
    result.execution = f"Dask: {n_workers} workers at {client.scheduler.address}"
    return result

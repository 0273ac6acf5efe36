"""One LSWMKC fit, from a kernel store to labels, where :func:`lswmkc_dask.engine.route.choose_route` put it.

:func:`fit_store` runs a whole fit (this process, a Dask client, or resident on a
device); :func:`fit_blocks` runs it from placed row blocks and an initialisation that
may be shared (a sweep shares one per n_neighbors between its alphas). The flow
(docs/algorithm.md sections 1-3): :func:`~lswmkc_dask.engine.solver.initialise` (Eqs.
25-28) -> :func:`~lswmkc_dask.engine.solver.iterate` (Eqs. 11-16, Theorem 2) ->
:func:`~lswmkc_dask.engine.postprocess.cluster_factor` -> Z gathered as a sparse matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .._threads import blas_threads, limit_blas
from ..io.inputs import KernelStack
from ..records import FitOptions, LSWMKCResult
from .cluster import raise_if_out_of_memory
from .device_route import fit_on_device
from .postprocess import cluster_factor
from .runners import LocalRunner, kernel_blocks, lost_errors, place_blocks, row_views
from .scheduler import raise_if_scheduler_lost, smallest_memory_limit, wait_for_workers, workers_of
from .solver import gather_affinity, initialise, iterate, refactor, with_gamma


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
        Where the steps run (:mod:`lswmkc_dask.engine.runners`).
    blocks : list
        Row blocks of the base kernels, each of shape (m, b, n) (arrays, futures or
        :class:`~lswmkc_dask.engine.runners.BlockRef`).
    init : InitState
        From :func:`lswmkc_dask.engine.solver.initialise` (Eqs. 25-28); its gamma is
        replaced for a scalar ``options.gamma``.
    options : FitOptions
    max_threads : int, optional
        Bound of the BLAS threads of the gathered steps (a sweep shares the cores).
    callback : callable, optional
        ``callback(t, objective, change, seconds, restarted=None)`` after each iteration.
    recover : callable, optional
        As :func:`lswmkc_dask.engine.solver.iterate`; without it a lost worker ends the fit.

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
            prev_rank = result.rank[-2] if len(result.rank) >= 2 else None
            _, factor = refactor(runner, result.z_values, prev_rank, options.eigen(), options.eig_threads, max_threads)
        finally:
            runner.release(clustered)
    runner.release(factor, result.factor)
    t_gather = time.perf_counter()
    affinity = gather_affinity(runner, result.z_blocks)
    stages = {"iterations": float(result.seconds), "cluster": t_gather - t_cluster,
              "gather": time.perf_counter() - t_gather}
    return LSWMKCResult.from_fit(result, options, labels=labels, embedding=embedding, kstar_factor=kstar_factor,
                                 affinity=affinity, gamma=init.gamma, stage_seconds=stages)


def fit_store(
    store: KernelStack,
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
    store : KernelStack
        Preprocessed base kernels, shape (m, n, n) (:func:`lswmkc_dask.prepare`).
    options : FitOptions
    client : distributed.Client, optional
        None: the whole fit in this process (the in-process runner). A client: row blocks
        on its workers, the gathered step on one of them, restarts after lost workers.
    block_rows : int, optional
        Rows per block (default: :func:`lswmkc_dask.engine.runners.solver_block_rows`).
    cache_kernels : "auto", bool
        Hold the row blocks in worker memory (:func:`lswmkc_dask.engine.runners.plan_memory`).
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
        step, the figures and what to do).
    ConnectionError
        :class:`lswmkc_dask.engine.cluster.SchedulerLostError` when the scheduler is lost.
    KernelInputError
        A damaged store (the message names the kernel and the rows).
    """
    if options.resident is not None:  # the stack and the iterations on one device (docs/algorithm.md section 5)
        result = fit_on_device(store, options, callback)
    elif client is None:
        result = _fit_in_process(store, options, callback)
    else:
        try:
            result = _fit_on(client, store, options, block_rows, cache_kernels, callback)
        except Exception as exc:  # a future cancelled, a closed comm: say that the scheduler is gone
            raise_if_scheduler_lost(exc, client)
            raise
    result.kernel_names = store.kernel_names
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
    runner, blocks, starts, cache = place_blocks(client, store, block_rows, cache_kernels)
    # The smallest worker memory limit now: named if the workers die (none is left to tell it then).
    limit = smallest_memory_limit(workers_of(client)) or None
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
    n_workers = len(workers_of(client))
    result.execution = f"Dask: {n_workers} workers at {client.scheduler.address}"
    return result

"""Where one fit runs, on which device and by which route: the function every fit goes through.

:func:`run_fit` takes a kernel store, the :class:`~lswmkc_dask.records.FitOptions` of the fit
(with ``eig_device`` as asked: "cpu", "cuda" or "auto") and where to run (a client, an
address, a :class:`~lswmkc_dask.Where`, or nothing), and

1. resolves the device (:func:`lswmkc_dask.gpu.resolve_device`: "auto" by n and the
   devices there, "cuda" refused without one, before any iteration);
2. chooses the route (docs/algorithm.md section 5): the whole fit on this machine's GPU
   where no cluster is given and the device holds the stack
   (:func:`lswmkc_dask._device_route.resident_plan`); as one task on a GPU worker of the
   cluster for a store on disk; otherwise blockwise, row blocks on the workers (or in this
   process) and the gathered step on the device (:func:`lswmkc_dask.fit.fit_store`);
3. returns the :class:`~lswmkc_dask.records.LSWMKCResult` with ``eig_device`` set to the
   resolved device (what ``report.json``'s ``eig_device.resolved`` records).

:class:`lswmkc_dask.LSWMKC` (and so :func:`lswmkc_dask.lswmkc` and ``lswmkc fit``) fit
through it; a sweep resolves the device once for its grid with :func:`resolve` and
:func:`resident_here` and fits each grid point with :func:`lswmkc_dask.fit.fit_blocks`
or :func:`lswmkc_dask.fit.fit_store`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

from ._device_route import ResidentRefusal, fit_location_resident, needs_blockwise, resident_plan, warn_blockwise
from ._grid import Where
from .cluster import execution
from .errors import warn_at_caller
from .fit import fit_store
from .gpu import resolve_device
from .io import KernelStore
from .records import FitOptions, LSWMKCResult

__all__ = ["resident_here", "resolve", "run_fit"]


def _warn_blockwise(why: str) -> None:
    """:func:`lswmkc_dask._device_route.warn_blockwise`, attributed to the user's line that
    asked for the fit (:func:`lswmkc_dask.errors.warn_at_caller`), however deep the
    engine found it.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_blockwise(why)
    for w in caught:
        warn_at_caller(w.message if isinstance(w.message, Warning) else str(w.message), w.category)


def resolve(options: FitOptions, n_samples: int, client: Any = None) -> FitOptions:
    """``options`` with ``eig_device`` resolved to "cpu" or "cuda".

    Parameters
    ----------
    options : FitOptions
        ``eig_device`` as asked ("cpu", "cuda" or "auto").
    n_samples : int
        n ("auto" takes the GPU from :data:`lswmkc_dask.gpu.GPU_MIN_N` samples).
    client : distributed.Client, optional
        The cluster the fit runs on (its GPU workers), None: this process.

    Returns
    -------
    FitOptions

    Raises
    ------
    lswmkc_dask.gpu.DeviceUnavailableError
        "cuda" where no GPU can run the gathered step.
    """
    return dataclasses.replace(options, eig_device=resolve_device(options.eig_device, n_samples, client))


def resident_here(store: KernelStore, options: FitOptions, client: Any = None) -> FitOptions | None:
    """The options of the whole fit on this machine's GPU, or None (the blockwise route).

    Taken where no cluster is given (``client`` runs here: :meth:`Where.runs_here`), the
    device resolves to "cuda" and it holds the stack
    (:func:`lswmkc_dask._device_route.resident_plan`); where the stack does not fit, a
    ``DeviceFallbackWarning`` gives the figures.

    Parameters
    ----------
    store : KernelStore
        Shape (m, n, n).
    options : FitOptions
        ``eig_device`` as asked.
    client : distributed.Client, str, Where or None
        Where the fit was asked to run.

    Returns
    -------
    FitOptions or None
        With ``eig_device="cuda"`` and ``resident="cuda"``.

    Raises
    ------
    lswmkc_dask.gpu.DeviceUnavailableError
        "cuda" without a GPU here.
    """
    if options.eig_device == "cpu" or not Where.of(client).runs_here():
        return None
    device = resolve_device(options.eig_device, store.n_samples, None)
    resident, why = resident_plan(store, device, snapshots=bool(options.snapshot_iterations),
                                  precision=options.eig_precision)
    if why:
        _warn_blockwise(why)
    if not resident:
        return None
    return dataclasses.replace(options, eig_device=device, resident="cuda")


def _on_gpu_worker(store: KernelStore, options: FitOptions, client: Any) -> LSWMKCResult | None:
    """The whole fit as one task on a GPU worker of ``client``'s cluster, or None.

    Taken for a store on disk (the worker reads it) when the gathered step goes to a
    GPU worker and nothing asks for the blockwise route (snapshots, float32); where the
    worker's device cannot hold the stack, a ``DeviceFallbackWarning`` gives its figures
    and the blockwise route runs (None).
    """
    if (client is None or options.eig_device != "cuda" or store.in_memory
            or needs_blockwise(options.snapshot_iterations, options.eig_precision)):
        return None
    future = client.submit(fit_location_resident, store.location, dataclasses.replace(options, resident="cuda"),
                           resources={"GPU": 1}, pure=False, retries=2)
    try:
        return future.result()
    except ResidentRefusal as exc:
        _warn_blockwise(exc.why)
        return None
    finally:
        future.release()


def _where(client: Any, n_workers: int | None, processes: bool | None, n_bytes: int) -> Any:
    """Where the fit runs: a context manager yielding the client or None."""
    if isinstance(client, Where):
        if client.n_workers is None and client.processes is None:
            client = dataclasses.replace(client, n_workers=n_workers, processes=processes)
        return client.open(n_bytes)
    return execution(client, n_workers=n_workers, processes=processes, n_bytes=n_bytes)


def run_fit(
    store: KernelStore,
    options: FitOptions,
    client: Any = None,
    *,
    n_workers: int | None = None,
    processes: bool | None = None,
    block_rows: int | None = None,
    cache_kernels: str | bool = "auto",
    callback: Callable[..., None] | None = None,
) -> LSWMKCResult:
    """One whole fit of a kernel store, where and on the device asked (see the module).

    Parameters
    ----------
    store : KernelStore
        Preprocessed base kernels, shape (m, n, n).
    options : FitOptions
        The fit's settings, ``eig_device`` as asked ("cpu", "cuda", "auto").
    client : distributed.Client, str, Where or None
        As :class:`lswmkc_dask.LSWMKC` ``client``: a client, a scheduler address, a
        :class:`~lswmkc_dask.Where`; None: the active client, else this process (a
        LocalCluster above :data:`lswmkc_dask.cluster.IN_PROCESS_MAX_BYTES`).
    n_workers, processes : optional
        A LocalCluster to start (as :class:`lswmkc_dask.LSWMKC`); fill in a Where's
        that are None.
    block_rows : int, optional
        Rows per solver block.
    cache_kernels : "auto" or bool
        Hold the row blocks in worker memory (:func:`lswmkc_dask._runners.plan_memory`).
    callback : callable, optional
        ``callback(t, objective, change, seconds, restarted=None)`` after each iteration.

    Returns
    -------
    LSWMKCResult
        ``eig_device`` the resolved device, ``execution`` where it ran.

    Raises
    ------
    lswmkc_dask.gpu.DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step (before any
        iteration).
    MemoryError, ConnectionError, KernelInputError
        As :func:`lswmkc_dask.fit.fit_store`.
    """
    resident = resident_here(store, options, client)
    if resident is not None:
        return fit_store(store, resident, None, callback=callback)  # its eig_device: "cuda"
    with _where(client, n_workers, processes, store.nbytes) as c:
        options = resolve(options, store.n_samples, c)  # "auto" resolved, "cuda" refused without a device
        result = _on_gpu_worker(store, options, c)
        if result is None:
            result = fit_store(store, options, c, block_rows=block_rows, cache_kernels=cache_kernels,
                               callback=callback)
    result.eig_device = options.eig_device
    result.kernel_names = result.kernel_names or store.kernel_names
    return result

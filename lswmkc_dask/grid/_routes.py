"""How a sweep's grid points run, by the route :func:`lswmkc_dask.engine.route.choose_route` chooses once for the grid.

:func:`run_grid` runs the points a sweep has left (:class:`GridRun`) by that route
(docs/algorithm.md section 5): resident on this machine's GPU, in this process, in task
mode on a cluster (each point ONE task), or blockwise (each fit's row blocks on the
workers). Data lost with a worker restarts the unfinished points, up to
:data:`MAX_RESTARTS` times (a fit is deterministic: the same results).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .._params import DEFAULTS
from .._threads import blas_threads, limit_blas
from ..engine.allocator import with_array_malloc
from ..engine.device_fit import Link, resident_namespace
from ..engine.device_route import fit_on_device, load_stack, resident_plan
from ..engine.fit import fit_blocks
from ..engine.postprocess import cluster_factor
from ..engine.progress import Progress, log_restarts
from ..engine.route import choose_route
from ..engine.runners import LocalRunner, lost_errors, place_blocks, row_views, submit_read
from ..engine.scheduler import wait_for_workers, workers_of
from ..engine.solver import initialise
from ..estimator import LSWMKC
from ..records import FitOptions
from ..report.metrics import protocol_metrics, repeat_metrics
from ..report.record import fit_report, to_json_ready
from .scoring import RUN_K_KEY, pending_k

if TYPE_CHECKING:
    from ..io.inputs import KernelStack
    from .results import GridPoint

class PointSink(Protocol):
    """Where a route hands each finished grid point (the sweep's recorder): ``recorded`` the points
    handed so far, ``concurrency`` the fits the route runs at once (for the ETA).
    """

    recorded: set
    concurrency: int

    def __call__(self, point: GridPoint, output: tuple) -> None:
        """Take the outputs of one finished point (:func:`_finish`)."""


@dataclasses.dataclass
class GridRun:
    """The grid points a sweep has left to run, and what every route needs for them.

    Attributes
    ----------
    store : KernelStack
        The preprocessed kernels, shape (m, n, n) (a ResidentStack: on this machine's GPU).
    todo : list of GridPoint
        The points to run.
    total : int
        Points in the whole grid (those done before included), for the messages.
    params : dict
        The run parameters of every point; :func:`run_grid` adds the resolved device
        (:data:`DEVICE_KEY`).
    labels : ndarray of shape (n,) or None
        Ground truth for the metrics.
    record : PointSink
        Takes each finished point.
    progress : Progress
        Where the stage lines go.
    """

    store: KernelStack
    todo: list
    total: int
    params: dict
    labels: Any
    record: PointSink
    progress: Progress

    def announce(self, where: str) -> None:
        """The stage line: how many points run (and were done before), and where.

        Parameters
        ----------
        where : str
            The route (``in this process``, ``task mode on 2 workers``, ...).
        """
        self.progress.say(f"sweep: {len(self.todo)} of {self.total} grid points to run "
                          f"({self.total - len(self.todo)} done), {where}")


def run_grid(run: GridRun, *, client: Any, mode: str, concurrency: int | None, block_rows: int | None,
             eig_device: str, eig_precision: str, snapshot_iterations: Any,
             score: Callable[[Any], Any]) -> None:
    """Run a sweep's grid points by the route :func:`lswmkc_dask.engine.route.choose_route` chooses.

    Parameters
    ----------
    run : GridRun
        The points and what they need; nothing happens for no points.
    client : distributed.Client, str, Where or None
        Where to run (:meth:`lswmkc_dask.Where.of`).
    mode : {"auto", "task", "blockwise"}
        On a cluster: task mode, blockwise, or by the stack's size ("auto").
    concurrency : int or None
        Blockwise: fits in flight at once (default: the number of workers).
    block_rows : int or None
        Rows per block (blockwise).
    eig_device, eig_precision, snapshot_iterations
        As :func:`lswmkc_dask.grid.sweep.sweep`; ``eig_device`` resolved once for the grid.
    score : callable
        ``score(client)``, called on a cluster before it closes (the label-free scores).

    Raises
    ------
    DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step.
    distributed.comm.CommClosedError, KilledWorker
        Data lost with workers more than :data:`MAX_RESTARTS` times (:func:`lswmkc_dask.engine.runners.lost_errors`).
    """
    if not run.todo:
        return
    with choose_route(run.store, client, eig_device=eig_device, eig_precision=eig_precision,
                      snapshots=snapshot_iterations, grid_mode=mode) as route:
        run.params[DEVICE_KEY] = route.eig_device  # resolved once for the grid
        if route.name == "resident":  # the stack on this machine's GPU once, every grid point there
            run.announce("the whole iteration on the GPU")
            _run_resident(run.store, run.todo, run.params, run.labels, run.record)
        elif route.name == "in-process":
            run.announce("in this process")
            _run_in_process(run.store, run.todo, run.params, run.labels, run.record)
        else:
            _run_on_cluster(route, run, concurrency, block_rows)
            score(route.client)


def _run_on_cluster(route, run, concurrency, block_rows):
    """The grid points on a cluster, in task mode or blockwise; the unfinished ones run again
    after data lost with a worker, up to :data:`MAX_RESTARTS` times.
    """
    client, info = route.client, route.workers
    use_tasks = route.name == "task"
    run.record.concurrency = (sum(int(w.get("nthreads", 1)) for w in info.values()) if use_tasks
                              else concurrency or len(info))
    run.announce(f"{'task' if use_tasks else 'blockwise'} mode on {len(info)} workers")
    for restart in range(MAX_RESTARTS + 1):
        left = [p for p in run.todo if p not in run.record.recorded]
        try:
            if use_tasks:
                _run_tasks(client, run.store, left, run.params, run.labels, run.record)
            else:
                _run_blockwise(client, run.store, left, run.params, run.labels, run.record, concurrency or len(info),
                               block_rows)
            return
        except lost_errors() as exc:
            # Data sent from here (scattered, no lineage) died with a worker: send it again.
            if restart == MAX_RESTARTS:
                raise
            wait_for_workers(client)
            again = sum(p not in run.record.recorded for p in left)
            run.progress.say(f"sweep: a worker was lost ({type(exc).__name__}); {again} unfinished grid points "
                             "start again")


@with_array_malloc
def _point_task(kernels, init, point, params, labels_true):
    """A whole fit of one grid point inside one task (task mode), or in this process; on a worker
    its BLAS threads are at most the cluster's threads on its machine (``params["host_threads"]``).
    """
    params, ks, seeds, device = _split(params, "cpu")
    host_threads = params.pop("host_threads", None) or {}
    cap = None
    if "distributed" in sys.modules:
        from distributed import get_worker
        from distributed.comm import get_address_host

        try:
            worker = get_worker()
            cap = host_threads.get(get_address_host(worker.address), worker.state.nthreads)
        except (ValueError, AttributeError):  # not on a worker
            pass
    options = _point_options(point, params, device)  # the device resolved once for the sweep (resolve_device)
    m, n, _ = kernels.shape
    if resident_plan(m, n, kernels.dtype.itemsize, device, snapshots=params.get("snapshot_iterations"),
                     precision=params.get("eig_precision", "float64"))[0]:  # a GPU worker: the whole fit there
        result = fit_on_device(kernels, dataclasses.replace(options, resident="cuda"), log_restarts)
    else:
        blocks, starts = row_views(kernels)
        result = fit_blocks(LocalRunner(), blocks, init, options, max_threads=cap, callback=log_restarts)
    return _finish(result, _point_params(point, params), labels_true, ks, max_threads=cap, seeds=seeds)


def _split(params, device):
    """``(params, k grid, repeats' seeds, resolved device)``: a copy of the run parameters without
    what is not :class:`LSWMKC`'s (``device`` where none is resolved).
    """
    params = dict(params)
    return params, params.pop("n_clusters_grid", None), params.pop("repeat_seeds", None), params.pop(DEVICE_KEY, device)


def _point_options(point, params, device):
    """The :class:`~lswmkc_dask.records.FitOptions` of one grid point with the sweep's settings."""
    snapshots = params.get("snapshot_iterations") or ()
    return FitOptions(
        n_clusters=int(params["n_clusters"]), alpha=float(point.alpha), n_neighbors=int(point.n_neighbors),
        gamma=point.gamma, max_iter=params["max_iter"], min_iter=params["min_iter"], tol=params["tol"],
        n_init=params["n_init"], random_state=params["random_state"], eig_threads=params.get("eig_threads"),
        snapshot_iterations=tuple(int(t) for t in snapshots),
        eig_driver=params.get("eig_driver", FitOptions.eig_driver),
        eig_precision=params.get("eig_precision", FitOptions.eig_precision), eig_device=device,
    )


def _point_params(point, params):
    """The :class:`LSWMKC` parameters of one grid point, every one (by name, as ``get_params`` gives them)."""
    given = {**params, "alpha": point.alpha, "n_neighbors": point.n_neighbors, "gamma": point.gamma}
    return {name: given.get(name, DEFAULTS[name]) for name in sorted(inspect.signature(LSWMKC).parameters)}


@with_array_malloc
def _init_task(kernels, n_neighbors):
    """The alpha-free initialisation of one n_neighbors (Eqs. 25-28), in one task or in this process."""
    blocks, starts = row_views(kernels)
    return initialise(LocalRunner(), blocks, starts, kernels.shape[0], n_neighbors)


def _finish(result, params, labels_true, ks=None, max_threads=None, seeds=None):
    """The outputs of one fitted grid point (its record ``result`` and :class:`LSWMKC` ``params``): report,
    the fitted attributes and parameters of its model file (the run's arrays) and the labels of each k.

    With a k grid, W is clustered once more for every other k (the labels of a fit with
    that ``n_clusters``): ``report["by_n_clusters"]``, the top level of the smallest k
    until the run's k is chosen (``report[RUN_K_KEY]``). With several ``seeds`` and
    labels, the final k-means is repeated with each: ``report["repeats"]``.
    """
    report = fit_report(result, params, labels_true)
    n_init, seed = params["n_init"], params["random_state"]
    repeated = seeds is not None and len(seeds) > 1 and labels_true is not None
    if repeated:
        report["repeats"] = to_json_ready(repeat_metrics(result.embedding, labels_true, result.n_clusters, n_init,
                                                         seeds, first=report["metrics"]))
    by_k = {}
    if ks and len(ks) > 1:
        per_k = {}
        for k in ks:
            if k == result.n_clusters:
                y, h = result.labels, result.embedding
            else:
                y, h = cluster_factor(result.kstar_factor, k, n_init, seed, params["eig_threads"], max_threads)
            by_k[k] = y
            entry = {}
            if labels_true is not None:
                entry["metrics"] = protocol_metrics(labels_true, y, h, k, n_init, seed)
            if repeated:
                entry["repeats"] = (report["repeats"] if k == result.n_clusters else
                                    repeat_metrics(h, labels_true, k, n_init, seeds, first=entry["metrics"]))
            per_k[str(k)] = entry
        report["by_n_clusters"] = to_json_ready(per_k)
        report[RUN_K_KEY] = pending_k(ks)
    return report, (result.fitted_attributes(params["snapshot_iterations"]), params), by_k



#: The key of a sweep's run parameters that carries the resolved eig_device ("cpu"/"cuda").
DEVICE_KEY = "resolved_eig_device"



def _run_resident(store, todo, params, labels, record):
    """The grid points one after another on this machine's GPU, the stack copied there once."""
    params, ks, seeds, device = _split(params, "cuda")
    xp, dev = resident_namespace("cuda")
    kernels = load_stack(store, Link(xp, dev))
    try:
        for point in sorted(todo, key=lambda p: (p.n_neighbors, p.gamma != "auto", p.alpha)):
            options = dataclasses.replace(_point_options(point, params, device), resident="cuda")
            result = fit_on_device(kernels, options, log_restarts)
            result.kernel_names = store.kernel_names
            record(point, _finish(result, _point_params(point, params), labels, ks, seeds=seeds))
    finally:
        del kernels


#: Restarts of the unfinished grid points after lost worker data, before the loss is raised.
MAX_RESTARTS = 3


def _run_in_process(store, todo, params, labels, record):
    """The grid points one after another in this process, sharing each initialisation."""
    kernels = store.read_rows(0, store.n_samples)
    with limit_blas(blas_threads(params.get("eig_threads"), None, store.n_samples)):
        inits = {c: _init_task(kernels, c) for c in sorted({p.n_neighbors for p in todo})}
        for point in sorted(todo, key=lambda p: (p.n_neighbors, p.alpha)):
            record(point, _point_task(kernels, inits[point.n_neighbors], point, params, labels))


def _run_tasks(client, store, todo, params, labels, record):
    """Task mode: the kernels on every worker once, each grid point one task (:func:`_point_task`)."""
    from distributed import as_completed

    if store.in_memory:  # the caller already holds the kernels: scatter them once
        kernels = client.scatter(store.read_rows(0, store.n_samples), broadcast=True, hash=False)
    else:  # one worker reads the store; others fetch it once; recomputed if lost
        kernels = submit_read(client, store.location, 0, store.n_samples)  # damaged data: one read, not retried
    inits = {
        c: client.submit(_init_task, kernels, c, pure=False, retries=3)
        for c in sorted({p.n_neighbors for p in todo})
    }
    # The cores of this cluster on each machine: a fit may use those left idle.
    host_threads: dict[str, int] = {}
    for w in workers_of(client).values():
        host_threads[w["host"]] = host_threads.get(w["host"], 0) + int(w.get("nthreads", 1))
    params = dict(params, host_threads=host_threads)
    # Larger alphas take more iterations: start them first (longest first balances).
    order = sorted(todo, key=lambda p: -p.alpha)
    # A whole fit is one task: with the gathered step on the GPU, it runs on a GPU worker.
    gpu_only = {"resources": {"GPU": 1}} if params.get(DEVICE_KEY) == "cuda" else {}
    futures = {
        client.submit(_point_task, kernels, inits[p.n_neighbors], p, params, labels, pure=False, retries=3,
                      **gpu_only): p
        for p in order
    }
    try:
        for fut in as_completed(futures, loop=client.loop):
            record(futures[fut], fut.result())
            fut.release()
    finally:
        client.cancel(list(futures) + list(inits.values()) + [kernels])


def eig_threads_per_fit(workers: dict, concurrency: int) -> int | None:
    """BLAS threads per gathered step when ``concurrency`` fits run at once.

    Parameters
    ----------
    workers : dict
        The scheduler's workers (``client.scheduler_info()["workers"]``: ``host``,
        ``nthreads`` of each).
    concurrency : int
        Fits in flight at once.

    Returns
    -------
    int or None
        None (all cores) for one fit at a time; else the threads of the most crowded
        machine divided among the fits that may meet there (at least 1).
    """
    if concurrency <= 1:
        return None
    per_host: dict[str, tuple[int, int]] = {}
    for w in workers.values():
        host = w.get("host", "")
        n, threads = per_host.get(host, (0, 0))
        per_host[host] = (n + 1, threads + int(w.get("nthreads", 1)))
    return max(1, min(threads // min(concurrency, n) for n, threads in per_host.values()))


def _run_blockwise(client, store, todo, params, labels, record, concurrency, block_rows):
    """Blockwise: ``concurrency`` fits in flight from client threads, each fit's row blocks on the workers."""
    runner, blocks, starts, _ = place_blocks(client, store, block_rows)
    inits = {c: initialise(runner, blocks, starts, store.n_kernels, c) for c in sorted({p.n_neighbors for p in todo})}

    # Gathered steps of concurrent fits may meet on one machine: share its cores
    # (OpenBLAS threads beyond the cores made 2 concurrent fits 4x slower).
    share = eig_threads_per_fit(workers_of(client), concurrency)

    params, ks, seeds, device = _split(params, "cpu")

    def fit_point(point):
        options = _point_options(point, params, device)  # "cuda": the gathered steps go to GPU workers
        result = fit_blocks(runner, blocks, inits[point.n_neighbors], options, max_threads=share,
                            callback=log_restarts)
        return _finish(result, _point_params(point, params), labels, ks, max_threads=share, seeds=seeds)

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = {pool.submit(fit_point, p): p for p in sorted(todo, key=lambda p: -p.alpha)}
            try:
                for fut in concurrent.futures.as_completed(futures):
                    record(futures[fut], fut.result())
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    finally:
        runner.release(blocks, *[i.z_blocks + i.gamma_blocks for i in inits.values()])

"""Baselines under LSWMKC's protocol: Avg-KKM and the KNN-localised average kernel.

The LSWMKC paper (Li et al., IEEE TNNLS) compares against these two (its Tables I and III)
(docs/user-guide/compare.md); here they read the same preprocessed kernel store, run where
a fit runs (:func:`lswmkc_dask.engine.cluster.execution`, the solver's runners) and end as
LSWMKC ends (:func:`cluster_kernel`; docs/algorithm.md section 3), so that their numbers
can be set side by side. One pass forms the rows of a combined kernel ``sum_p c_p K_p[b]``
on the workers, the n x n kernel is stacked on one worker, and the eigen-steps, the KNN
mask (:mod:`lswmkc_dask.report.localise`) and the final k-means run there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._params import TAUS
from .._threads import blas_threads, limit_blas, worker_threads
from .._validate import validate
from .._version import __version__
from ..core import equations as core
from ..engine.cluster import execution
from ..engine.postprocess import kmeans_best_of, spectral_embedding
from ..engine.route import open_kernels
from ..engine.runners import DaskRunner, LocalRunner, kernel_blocks, plan_memory, read_rows, row_views
from ..engine.scheduler import wait_for_workers, workers_of
from ..errors import Param, ParameterError
from ..io import check_labels, count_classes
from ..io.ownership import utc_now
from ..report.localise import knn_mask, localise, neighbour_count, neighbour_ranks
from ..report.metrics import NMI_NORMALIZATION, protocol_metrics, repeat_metrics
from ..report.record import to_json_ready

if TYPE_CHECKING:
    from ..io.inputs import KernelStack

#: The paper's grid of the neighbour ratio tau (the parameter table's ``TAUS``).
DEFAULT_TAUS = TAUS


# ----------------------------------------------------------------- dense building blocks
def cluster_kernel(
    kernel: np.ndarray,
    n_clusters: int,
    n_init: int = 50,
    random_state: int | None = None,
    n_threads: int | None = None,
    max_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Kernel k-means of a dense kernel, as :func:`lswmkc_dask.engine.postprocess.cluster_factor` clusters K*.

    :func:`lswmkc_dask.engine.postprocess.spectral_embedding` (centre, normalise, top-k
    eigenvectors, rows to unit length), then
    :func:`lswmkc_dask.engine.postprocess.kmeans_best_of` (``n_init`` starts, lowest inertia).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        Symmetric.
    n_clusters : int
    n_init : int
    random_state : int or None
    n_threads : int, optional
        BLAS threads of the eigendecomposition (default: the cores free now).
    max_threads : int, optional
        Upper bound of that default.

    Returns
    -------
    labels : ndarray of shape (n,)
    embedding : ndarray of shape (n, n_clusters)
    """
    with limit_blas(blas_threads(n_threads, max_threads, kernel.shape[0])):
        h = spectral_embedding(kernel, n_clusters)
    labels, _ = kmeans_best_of(h, n_clusters, n_init, random_state)
    return labels, h


# ------------------------------------------------------------------------------ results
@dataclass
class BaselineResult:
    """One baseline or compared-method run (:mod:`lswmkc_dask.grid.competitors`).

    Attributes
    ----------
    method : str
        ``"avg-kkm"``, ``"knn"`` or a compared method's name (``"mkkm"``, ``"onkc"``, ...).
    param : dict
        ``{}``, ``{"tau": 0.3}``, ``{"rho": 2.0, "lambda_": 0.5}``.
    labels : ndarray of shape (n,)
        k-means of lowest inertia of ``n_init`` starts (honest protocol).
    embedding : ndarray of shape (n, k)
    metrics : dict or None
        ``{"honest": {...}, "paper": {...}}`` with ground truth.
    seconds : float
        Wall seconds forming the kernel that is clustered: the pass over the kernel
        store (Avg-KKM, KNN; shared by them), the mask (KNN), a compared method's fit.
        Without the common final step (embedding and k-means), as LSWMKC's seconds
        are its iterations.
    cluster_seconds : float
        Embedding and k-means (``n_init`` starts).
    kernel_weights : ndarray of shape (m,)
        Weights of the clustered combination ``sum_p c_p K_p``: 1/m for Avg-KKM and
        KNN; a compared method's ``kernel_weights_`` as that method defines them.
    objective : list of float
        A compared method's objective per iteration.
    n_iter : int
    converged : bool
    extra : dict
        Avg-KKM, KNN: ``pass_seconds`` (the pass forming the average kernel, shared;
        for KNN with the neighbour order). KNN: neighbours per row and the row sums of N
        (min, max). A compared method: the small parts of its ``extra_``.
    execution : str
        Where it ran.
    title : str
        A compared method's name and citation (the report's ``method``).
    """

    method: str
    param: dict
    labels: np.ndarray
    embedding: np.ndarray = field(repr=False)
    metrics: dict | None
    seconds: float
    cluster_seconds: float
    kernel_weights: np.ndarray
    objective: list = field(default_factory=list)
    n_iter: int = 1
    converged: bool = True
    extra: dict = field(default_factory=dict)
    execution: str = ""
    title: str = ""

    @property
    def name(self):
        """Run directory name: ``avg-kkm``, ``knn_tau=0.3``, ``mkkm``."""
        return self.method + "".join(f"_{k}={v:g}" for k, v in self.param.items())

    def report(self, extra=None):
        """A JSON-ready dict (``report.json`` of a compare run)."""
        rep = {
            "method": self.title or {"avg-kkm": "Avg-KKM (uniform weights, kernel k-means)",
                                     "knn": "KNN-localised average kernel (the paper's KNN mechanism)"}[self.method],
            "method_key": self.method,
            "param": self.param,
            "lswmkc_dask_version": __version__,
            "created_utc": utc_now(),
            "n_samples": int(self.labels.shape[0]),
            "n_kernels": int(np.asarray(self.kernel_weights).shape[0]),
            "n_iter": self.n_iter,
            "converged": self.converged,
            "seconds": self.seconds,
            "cluster_seconds": self.cluster_seconds,
            "kernel_weights": self.kernel_weights,
            "objective": self.objective,
            "execution": self.execution,
            **self.extra,
        }
        if self.metrics is not None:
            rep["metrics"] = self.metrics
            rep["nmi_normalization"] = dict(NMI_NORMALIZATION)
        if extra:
            rep.update(extra)
        return to_json_ready(rep)


# ---------------------------------------------------------------- tasks (on the workers)
def _weighted_rows(kernels, coef):
    """Rows ``sum_p coef_p K_p[b]`` of one block, shape (b, n)."""
    return core.combine_kernels(read_rows(kernels), coef)


def _cluster_task(kernel, method, param, weights, labels_true, n_clusters, n_init, random_state, n_threads,
                  ranks=None, seeds=None):
    """Mask (KNN), embedding, k-means and both protocols, on one worker; with more than
    one of ``seeds`` (:func:`lswmkc_dask.report.metrics.repeat_seeds`) the final k-means
    repeated with each (:func:`lswmkc_dask.report.metrics.repeat_metrics`) into
    ``extra["repeats"]``.
    """
    max_threads = worker_threads()  # several of these may run at once, one per worker
    t0 = time.perf_counter()
    extra = {}
    if method == "knn":
        count = neighbour_count(param["tau"], kernel.shape[0])
        mask = knn_mask(kernel, param["tau"], ranks)
        sums = mask.sum(axis=1)
        extra = {"neighbours_per_row": count, "mask_row_sums": {"min": int(sums.min()), "max": int(sums.max())},
                 "mask_symmetric_fraction": float(np.mean(mask == mask.T))}
        kernel = localise(kernel, mask)
        del mask
    t1 = time.perf_counter()
    labels, h = cluster_kernel(kernel, n_clusters, n_init, random_state, n_threads, max_threads)
    t2 = time.perf_counter()
    metrics = None if labels_true is None else protocol_metrics(labels_true, labels, h, n_clusters, n_init,
                                                                 random_state)
    if metrics is not None and seeds is not None and len(seeds) > 1:
        extra["repeats"] = repeat_metrics(h, labels_true, n_clusters, n_init, seeds, first=metrics)
    return {"labels": labels, "embedding": h, "metrics": metrics, "mask_seconds": t1 - t0,
            "cluster_seconds": t2 - t1, "extra": extra, "weights": weights}


# ------------------------------------------------------------------------- the runs
class _Blocks:
    """The kernel row blocks of a store for a runner (in this process or on a client)."""

    def __init__(self, store, client, block_rows=None):
        self.store = store
        self.client = client
        self.runner: LocalRunner | DaskRunner
        if client is None:
            self.runner = LocalRunner()
            self.kernels = store.read_rows(0, store.n_samples)
            self.blocks, self.starts = row_views(self.kernels)
            self.execution = "in-process"
        else:
            wait_for_workers(client)
            self.runner = DaskRunner(client)
            # as a fit: refused if the dense n x n kernel cannot fit one worker; the row
            # blocks kept in worker memory while the stack is at most half of it
            cache = plan_memory(client, store, "auto")
            self.blocks, self.starts = kernel_blocks(client, store, block_rows, cache)
            n_workers = len(workers_of(client))
            self.execution = f"Dask: {n_workers} workers at {client.scheduler.address}"

    def combined(self, coef):
        """Handle of the dense ``sum_p coef_p K_p`` on one worker, and the pass's seconds."""
        t0 = time.perf_counter()
        rows = self.runner.map(_weighted_rows, [(b,) for b in self.blocks], np.asarray(coef, dtype=np.float64))
        dense = self.runner.submit(np.vstack, rows)  # the dense n x n kernel, on one worker
        self.runner.fetch(self.runner.submit(np.shape, dense))  # exists once the pass is done
        self.runner.release(rows)
        return dense, time.perf_counter() - t0

    def release(self):
        self.runner.release(self.blocks)


def _finish(raw, method, param, seconds, execution, n_iter=1, converged=True, objective=()):
    return BaselineResult(
        method=method, param=dict(param), labels=raw["labels"], embedding=raw["embedding"], metrics=raw["metrics"],
        seconds=seconds + raw["mask_seconds"], cluster_seconds=raw["cluster_seconds"],
        kernel_weights=np.asarray(raw["weights"]), objective=list(objective), n_iter=n_iter, converged=converged,
        extra=raw["extra"], execution=execution,
    )


def _run_average(ctx, todo, params, labels_true, record):
    """Avg-KKM and the KNN taus in ``todo`` from one average kernel."""
    m = ctx.store.n_kernels
    weights = np.full(m, 1.0 / m)
    kavg, pass_seconds = ctx.combined(weights)
    runner = ctx.runner
    common = (labels_true, params["n_clusters"], params["n_init"], params["random_state"], params.get("eig_threads"))
    ranks, ranks_seconds = None, 0.0
    if any(method == "knn" for method, _ in todo):  # the neighbour order, once for every tau
        t0 = time.perf_counter()
        ranks = runner.submit(neighbour_ranks, kavg)
        runner.fetch(runner.submit(np.shape, ranks))
        ranks_seconds = time.perf_counter() - t0
    handles = [
        (method, param, runner.submit(_cluster_task, kavg, method, param, weights, *common,
                                      ranks if method == "knn" else None, params.get("seeds")))
        for method, param in todo
    ]
    for method, param, handle in handles:
        raw = runner.fetch(handle)
        shared = pass_seconds + (ranks_seconds if method == "knn" else 0.0)
        raw["extra"]["pass_seconds"] = shared  # the same pass (and neighbour order) for every tau
        record(_finish(raw, method, param, shared, ctx.execution))
        runner.release(handle)
    runner.release(kavg, ranks)


def run_baselines(
    store: KernelStack,
    client: Any,
    todo: list,
    params: dict,
    labels_true: Any,
    record: Callable[..., Any],
    block_rows: int | None = None,
) -> None:
    """Run the baseline runs in ``todo`` on ``client`` (None: this process).

    Parameters
    ----------
    store : KernelStack
    client : distributed.Client or None
    todo : list of (method, param)
        ``("avg-kkm", {})``, ``("knn", {"tau": 0.3})``.
    params : dict
        ``n_clusters``, ``n_init``, ``random_state``, optional ``eig_threads`` and
        ``seeds`` (:func:`lswmkc_dask.report.metrics.repeat_seeds`: with more than one, each
        run's final k-means is repeated with each seed, ``report["repeats"]``).
    labels_true : ndarray of shape (n,) or None
    record : callable
        ``record(BaselineResult)`` as each run finishes.
    block_rows : int, optional
        Rows per block on Dask (default: as a fit).
    """
    if not todo:
        return
    ctx = _Blocks(store, client, block_rows)
    try:
        n = store.n_samples
        local = limit_blas(blas_threads(params.get("eig_threads"), None, n)) if client is None else nullcontext()
        with local:
            average = [(mth, p) for mth, p in todo if mth in ("avg-kkm", "knn")]
            if average:
                _run_average(ctx, average, params, labels_true, record)
    finally:
        ctx.release()


# --------------------------------------------------------------------- Python entry points
def _run(caller, todo, args):
    """The runs ``todo`` of the entry point ``caller`` called with ``args`` (its ``locals()``)."""
    validate("baselines", args, caller=caller)  # before any I/O
    store = open_kernels(args["X"], block_rows=args["block_rows"], degenerate_kernels=args["degenerate_kernels"])
    labels = check_labels(args["labels"] if args["labels"] is not None else store.labels, store.n_samples)
    n_clusters = args["n_clusters"]
    if n_clusters is None:
        if labels is None:
            raise ParameterError("{} is required when there are no labels", Param("n_clusters"))
        n_clusters = count_classes(labels)
    validate("baselines", {"n_clusters": n_clusters}, store.n_samples)
    params = {"n_clusters": n_clusters, "n_init": args["n_init"], "random_state": args["random_state"],
              "eig_threads": args["eig_threads"]}
    out: list[BaselineResult] = []
    with execution(args["client"], n_workers=args["n_workers"], processes=args["processes"],
                   n_bytes=store.nbytes) as c:
        run_baselines(store, c, todo, params, labels, out.append, args["block_rows"])
    return out


_DOC_COMMON = """
    Parameters
    ----------
    X : KernelStack, str, Path, or array_like of shape (m, n, n)
        As :meth:`lswmkc_dask.LSWMKC.fit` (raw kernels are preprocessed first).
    n_clusters : int, optional
        k (default: the number of distinct labels).
    labels : array_like of shape (n,), optional
        Ground truth for the metrics (default: the store's labels).
    n_init : int
        k-means starts (honest) and single-start runs (paper protocol).
    random_state : int or None
    client : distributed.Client or str, optional
        Where to run, as a fit (:func:`lswmkc_dask.engine.cluster.execution`): this client,
        else the active one, else this process (up to 1 GiB of kernels).
    n_workers, processes, block_rows, degenerate_kernels, eig_threads
        As :class:`lswmkc_dask.LSWMKC`.
"""
_DOC_RAISES = """
    Raises
    ------
    ValueError
        A bad parameter (named in the message), or no ``n_clusters`` and no labels.
    KernelInputError, FileNotFoundError
        Unusable kernels.
    """


def avg_kkm(
    X: Any,
    n_clusters: int | None = None,
    labels: Any = None,
    *,
    n_init: int = 50,
    random_state: int = 0,
    client: Any = None,
    n_workers: int | None = None,
    processes: bool | None = None,
    block_rows: int | None = None,
    degenerate_kernels: str = "warn",
    eig_threads: int | None = None,
) -> BaselineResult:
    return _run("avg_kkm", [("avg-kkm", {})], locals())[0]


avg_kkm.__doc__ = """Avg-KKM: kernel k-means on the average of the base kernels, ``K_avg = (1/m) sum_p K_p``.
""" + _DOC_COMMON + """
    Returns
    -------
    BaselineResult
    """ + _DOC_RAISES


def knn_kkm(
    X: Any,
    n_clusters: int | None = None,
    labels: Any = None,
    *,
    taus: Sequence[float] = DEFAULT_TAUS,
    n_init: int = 50,
    random_state: int = 0,
    client: Any = None,
    n_workers: int | None = None,
    processes: bool | None = None,
    block_rows: int | None = None,
    degenerate_kernels: str = "warn",
    eig_threads: int | None = None,
) -> list[BaselineResult]:
    return _run("knn_kkm", [("knn", {"tau": float(t)}) for t in taus], locals())


knn_kkm.__doc__ = """The paper's KNN mechanism: kernel k-means on the KNN-localised average kernel.

    One pass forms the average kernel; for each tau the mask N (:func:`knn_mask`) keeps
    the ``round(tau n)`` nearest samples of every sample and the symmetric part of
    ``N ⊙ K_avg`` (:func:`localise`) is clustered.
""" + _DOC_COMMON + """    taus : sequence of float
        Neighbour ratios in (0, 1] (default 0.1, ..., 0.9).

    Returns
    -------
    list of BaselineResult
        One per tau, in the order given.
    """ + _DOC_RAISES

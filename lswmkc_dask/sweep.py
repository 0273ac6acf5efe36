"""Sweeps over alpha (and n_neighbors) spread across a Dask cluster, resumable.

The paper chooses alpha by a grid search over 2^0..2^10. Here:

* the alpha-free initialisation (Z0, gamma, delta(Z0); Eqs. 25-28) is computed once
  per n_neighbors and shared by every alpha;
* **task mode** (small problems, the whole kernel stack fits a worker comfortably):
  the preprocessed kernels are scattered once to every worker, and each grid point is
  ONE task that runs the whole fit with the same solver (:class:`LocalRunner`),
  clusters K* and scores it; a killed worker's tasks are simply run again elsewhere;
* **blockwise mode** (large problems): the fits run blockwise on the cluster, several
  at a time from client threads, so that their gathered eigendecompositions run on
  different workers at once;
* each finished grid point is written at once to ``DIR/runs/alpha=A_c=C/`` (A as
  ``{alpha:g}``, or exactly as ``repr(alpha)`` where ``{alpha:g}`` would round it:
  ``alpha=8_c=5``, ``alpha=8.000001_c=5``; see :func:`exact_text`)
  (``report.json``, ``labels.csv``, ``affinity.npz`` with Z, ``kstar_factor.npy``
  with W such that K* = W W^T) under a temporary name renamed when complete, so an
  interrupted sweep leaves no partial result and a rerun computes only what is
  missing; ``summary.csv`` and ``summary.json`` hold the table and the grid point
  selected without labels, with how sure the choice is (near-ties, votes, the
  consensus of the near-ties, and with a k grid the k of prediction strength: see
  :func:`_selected`); each run's ``silhouette_samples.npy`` holds the per-sample
  scores the near-ties are computed from;
* with a k grid (``n_clusters=[2, ..., 15]``) each run also holds ``labels_k=K.csv``
  for every k and ``by_n_clusters`` (every k's metrics and score) in its report; once
  the sweep has scored every partition without labels (at its end), the run's
  ``labels.csv`` is a copy of the ``labels_k=K.csv`` of the k chosen for that run (the
  largest label-free score, :func:`run_n_clusters`), and its report's ``metrics``,
  ``label_free``, ``repeats`` and ``params.n_clusters`` are of that k, with
  ``n_clusters_selected`` (:data:`RUN_K_KEY`) saying which k and why. At the alpha that
  ``summary.json``'s ``"selected"`` names, it is the selected k;
* ``sweep.json`` records the settings and a content fingerprint of the input (the
  kernels and the labels, :func:`input_fingerprint`): a rerun resumes only on the same
  data (wherever it lies now) and the same settings, and is refused otherwise.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import numbers
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._allocator import with_array_malloc
from ._device_fit import Link, resident_namespace
from ._device_route import (
    fit_array_resident,
    fit_store_resident,
    load_stack,
    needs_blockwise,
    shape_refusal,
)
from ._eigen import EIG_DEVICES, EIG_PRECISIONS
from ._grid import OtherDataError, Where, _input_paths, check_output, input_fingerprint, open_grid_directory
from ._params import DEFAULTS
from ._runners import (
    DaskRunner,
    LocalRunner,
    blocks_in_memory,
    kernel_blocks,
    lost_errors,
    plan_memory,
    row_views,
    submit_read,
)
from ._threads import blas_threads, limit_blas
from ._validate import validate
from .cluster import active_client, wait_for_workers
from .engine import resident_here
from .errors import Param, ParameterError
from .estimator import LSWMKC, as_store
from .fit import FitOptions, fit_blocks, log_restarts
from .gpu import namespace, resolve_device
from .io import check_labels, count_classes
from .io.locks import closes_run_directories
from .metrics import evaluate, evaluate_embedding, repeat_metrics, repeat_seeds
from .postprocess import cluster_factor
from .report import fit_report, to_json_ready, warn_snapshots_not_reached
from .solver import check_gamma, initialise
from .sweep_results import (
    RUN_K_KEY,
    SAMPLES_FILE,
    SELECTION_CRITERION,
    GridPoint,
    _pending_k,
    _rows,
    _score_runs,
    _write_point,
    _write_summary,
    exact_text,
    label_free_evidence,
    label_free_scores,
    load_sweep,
    run_n_clusters,
    selected_model,
    selection_line,
    summary_table,
)

if TYPE_CHECKING:  # annotations only
    pass

__all__ = ["DEFAULT_ALPHAS", "DEFAULT_N_CLUSTERS", "RUN_K_KEY", "SAMPLES_FILE", "SELECTION_CRITERION", "GridPoint",
           "OtherDataError",
           "exact_text", "label_free_evidence", "label_free_scores", "load_sweep", "n_clusters_grid", "run_n_clusters", "selected_model", "selection_line", "summary_table",
           "sweep"]

DEFAULT_ALPHAS = tuple(2.0**k for k in range(11))
#: task mode while the kernel stack is at most this many bytes (and a quarter of a
#: worker's memory limit)
TASK_MODE_MAX_BYTES = 512 * 2**20
#: Settings compared on resume (the data by its fingerprint, not by its path or name).
CONFIG_KEYS = ("n_clusters", "max_iter", "min_iter", "tol", "n_init", "random_state", "repeats")


#: The k grid of a sweep given no n_clusters on data without labels (capped below n).
DEFAULT_N_CLUSTERS = tuple(range(2, 13))


def n_clusters_grid(n_clusters: int | Sequence[int] | None, n_labels: int | None = None, n_samples: int | None = None) -> list[int]:
    """The k values of a sweep.

    Parameters
    ----------
    n_clusters : int, sequence of int or None
        k, or a k grid. None: the number of distinct labels ``n_labels`` when there
        are labels, else :data:`DEFAULT_N_CLUSTERS` (2..12, below ``n_samples``).
    n_labels : int, optional
        Distinct values of the labels.
    n_samples : int, optional
        n (caps the default grid).

    Returns
    -------
    list of int
        Distinct, ascending (one value without a grid).

    Raises
    ------
    ValueError
        An empty grid, or a k that is not an integer.
    """
    if n_clusters is None:
        if n_labels is not None:
            return [int(n_labels)]
        ks = [k for k in DEFAULT_N_CLUSTERS if n_samples is None or k < n_samples]
        return ks or [2]
    values = [n_clusters] if np.ndim(n_clusters) == 0 else list(cast(Sequence[int], n_clusters))
    ks = []
    for k in values:
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            top = "" if n_samples is None else f" in [2, n_samples - 1 = {n_samples - 1}]"
            raise ParameterError("{} must be an integer{}, got {!r}", Param("n_clusters"), top, k)
        ks.append(int(k))
    if not ks:
        raise ParameterError("the k grid is empty: give at least one {}", Param("n_clusters"))
    return sorted(set(ks))


@with_array_malloc
def _point_task(kernels, init, point, params, labels_true):
    """A whole fit of one grid point inside one task (task mode), or in this process.

    On a worker, BLAS threads follow the cores free on its machine, at most the threads
    of this cluster's workers there (``params["host_threads"]``): while every worker
    runs a fit each gets one core; the last fits of a sweep take the cores that the
    finished ones left idle.
    """
    params = dict(params)
    host_threads = params.pop("host_threads", None) or {}
    ks = params.pop("n_clusters_grid", None)
    seeds = params.pop("repeat_seeds", None)
    device = params.pop(DEVICE_KEY, "cpu")
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
    if _fits_device(kernels, device, params):  # a GPU worker: the whole fit on its device
        result = fit_array_resident(kernels, dataclasses.replace(options, resident="cuda"), log_restarts)
        result.eig_device = device
    else:
        blocks, starts = row_views(kernels)
        result = fit_blocks(LocalRunner(), blocks, init, options, max_threads=cap, callback=log_restarts)
    return _finish(_fitted(result, point, params), labels_true, ks, max_threads=cap, seeds=seeds)


def _point_options(point, params, device):
    """The :class:`~lswmkc_dask.fit.FitOptions` of one grid point: its alpha, c and gamma,
    the sweep's settings (``params``) and the device resolved for the sweep.
    """
    snapshots = params.get("snapshot_iterations") or ()
    return FitOptions(
        n_clusters=int(params["n_clusters"]), alpha=float(point.alpha), n_neighbors=int(point.n_neighbors),
        gamma=point.gamma, max_iter=params["max_iter"], min_iter=params["min_iter"], tol=params["tol"],
        n_init=params["n_init"], random_state=params["random_state"], eig_threads=params.get("eig_threads"),
        snapshot_iterations=tuple(int(t) for t in snapshots),
        eig_driver=params.get("eig_driver", FitOptions.eig_driver),
        eig_precision=params.get("eig_precision", FitOptions.eig_precision), eig_device=device,
    )


def _fitted(result, point, params):
    """The fitted :class:`LSWMKC` of one grid point (its report reads the estimator's
    parameters, as ``lswmkc fit`` writes them).
    """
    return LSWMKC.from_result(result, alpha=point.alpha, n_neighbors=point.n_neighbors, gamma=point.gamma, **params)


def _fits_device(kernels, device, params):
    """Whether a grid point's fit runs wholly on the device of the process it runs in:
    the gathered step goes to the GPU, nothing asks for the blockwise route and the
    device holds the stack (:func:`lswmkc_dask._device_route.shape_refusal`).
    """
    if device != "cuda" or needs_blockwise(params.get("snapshot_iterations"), params.get("eig_precision", "float64")):
        return False
    m, n, _ = kernels.shape
    return not shape_refusal(m, n, kernels.dtype.itemsize, namespace("cuda"))


@with_array_malloc
def _init_task(kernels, n_neighbors):
    blocks, starts = row_views(kernels)
    return initialise(LocalRunner(), blocks, starts, kernels.shape[0], n_neighbors)


def _finish(model, labels_true, ks=None, max_threads=None, seeds=None):
    """The outputs of one fitted grid point: report, labels, Z, W and the labels of each k.

    With a k grid (``ks``, more than one value), the fit (whose iterations do not depend
    on k) is clustered once more for every other k from the same factor W
    (:func:`lswmkc_dask.postprocess.cluster_factor`: the same labels as a fit with that
    ``n_clusters``), and ``report["by_n_clusters"]`` holds each k's metrics; the labels
    and top-level metrics are of the smallest k until the label-free scores choose the
    run's k (:func:`_adopt_run_k`), which ``report[RUN_K_KEY]`` says.

    With more than one of ``seeds`` (:func:`lswmkc_dask.metrics.repeat_seeds`) and
    labels, the final k-means of the embedding is repeated with each seed
    (:func:`lswmkc_dask.metrics.repeat_metrics`): ``report["repeats"]`` (and each k's
    ``repeats`` in ``by_n_clusters``).
    """
    report = fit_report(model, labels_true)
    repeated = seeds is not None and len(seeds) > 1 and labels_true is not None
    if repeated:
        report["repeats"] = to_json_ready(repeat_metrics(model.embedding_, labels_true, model.n_clusters_,
                                                         model.n_init, seeds, first=report["metrics"]))
    by_k = {}
    if ks and len(ks) > 1:
        per_k = {}
        for k in ks:
            if k == model.n_clusters_:
                y, h = model.labels_, model.embedding_
            else:
                y, h = cluster_factor(model.kstar_factor_, k, model.n_init, model.random_state,
                                      model.eig_threads, max_threads)
            by_k[k] = y
            entry = {}
            if labels_true is not None:
                entry["metrics"] = {
                    "honest": evaluate(labels_true, y),
                    "paper": evaluate_embedding(h, labels_true, k, "paper", n_init=model.n_init,
                                                random_state=model.random_state),
                }
            if repeated:
                entry["repeats"] = (report["repeats"] if k == model.n_clusters_ else
                                    repeat_metrics(h, labels_true, k, model.n_init, seeds, first=entry["metrics"]))
            per_k[str(k)] = entry
        report["by_n_clusters"] = to_json_ready(per_k)
        report[RUN_K_KEY] = _pending_k(ks)
    return report, model.labels_, model.affinity_, model.kstar_factor_, by_k, getattr(model, "snapshots_", None)


def _progress(done, total, point, report, started, out=sys.stderr, concurrency=1, resumed=0):
    """One progress line for a finished grid point: done/total, elapsed and ETA.

    ``concurrency`` fits run at once (task mode: the workers' threads; blockwise: the
    fits in flight), all from ``started`` on; ``resumed`` of the ``done`` points were
    finished before (a resumed sweep) and took none of the elapsed time. Until as many
    points as run at once have finished, the rate is ``concurrency`` per elapsed time
    (they were all under way since the start: after the first of 11 points on 2
    workers, 5 more fit times are left, not 10); then the observed rate of completions.
    """
    elapsed = time.perf_counter() - started
    ran = done - resumed  # finished by this call, in ``elapsed``
    slots = max(1, min(int(concurrency), total - resumed))
    eta = elapsed * (total - done) / max(ran, slots) if ran > 0 else math.nan
    acc = report.get("metrics", {}).get("honest", {}).get("ACC")
    if acc is not None and report.get("by_n_clusters"):  # a k grid: the k is chosen after the grid
        acc_text = f", ACC {acc:.4f} at k={report['params']['n_clusters']} (the run's k is chosen at the end)"
    else:
        acc_text = f", ACC {acc:.4f}" if acc is not None else ""
    bar = "#" * int(20 * done / total) + "." * (20 - int(20 * done / total))
    print(
        f"[{bar}] {done}/{total} {point.name}: {report['n_iter']} it, {report['iteration_seconds_total']:.1f} s"
        + acc_text
        + f" | elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
        file=out,
        flush=True,
    )


@closes_run_directories
def sweep(
    X: Any,
    output: str | os.PathLike[str],
    *,
    n_clusters: int | Sequence[int] | None = DEFAULTS["n_clusters"],
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    n_neighbors: Sequence[int] = (DEFAULTS["n_neighbors"],),
    gammas: Sequence[str | float] = (DEFAULTS["gamma"],),
    kernel: str = DEFAULTS["kernel"],
    kernel_params: dict | None = DEFAULTS["kernel_params"],
    snapshot_iterations: Sequence[int] | None = None,
    labels: Any = None,
    client: Any = None,
    mode: str = DEFAULTS["mode"],
    concurrency: int | None = DEFAULTS["concurrency"],
    max_iter: int = DEFAULTS["max_iter"],
    min_iter: int = DEFAULTS["min_iter"],
    tol: float = DEFAULTS["tol"],
    n_init: int = DEFAULTS["n_init"],
    random_state: int = DEFAULTS["random_state"],
    block_rows: int | None = DEFAULTS["block_rows"],
    overwrite: bool = False,
    progress: bool = True,
    data_description: str | None = None,
    degenerate_kernels: str = DEFAULTS["degenerate_kernels"],
    eig_threads: int | None = DEFAULTS["eig_threads"],
    repeats: int = DEFAULTS["repeats"],
    eig_device: str = DEFAULTS["eig_device"],
    eig_precision: str = DEFAULTS["eig_precision"],
    eig_driver: str = DEFAULTS["eig_driver"],
) -> dict:
    """Fit LSWMKC over a grid of alpha (and n_neighbors), resumably.

    Parameters
    ----------
    X : KernelStore, str, Path, array_like of shape (m, n, n), or list of arrays
        As :meth:`LSWMKC.fit`: base kernels, or with ``kernel`` other than
        "precomputed" m feature views of shape (n, d_v).
    output : str or Path
        Sweep directory. Finished grid points in it are kept and skipped, if they were
        computed on the same data (the fingerprint of the kernels and labels in
        ``sweep.json``, :func:`input_fingerprint`; the store may have moved) with the
        same settings. A symbolic link is followed: the directory it points to is
        resumed or replaced, the link stays.
    n_clusters : int or sequence of int, optional
        k, or a k grid. A grid costs one fit per (alpha, n_neighbors), not one per k:
        the iterations do not depend on k, so each fit's factor W is clustered at every
        k (rows per k in the summary, ``labels_k=K.csv`` and ``by_n_clusters`` in each
        run), and the label-free choice covers k. Each run's ``labels.csv`` and its
        report's top-level ``metrics`` are of the k chosen for it without labels (the
        largest label-free score among its k; ``n_clusters_selected`` in the report
        says which and why), so the run of the selected alpha holds the selected k. Default: the number of distinct labels,
        or :data:`DEFAULT_N_CLUSTERS` (2..12) when there are no labels.
    alphas : sequence of float
        Default 2^0..2^10 (the paper's grid). A value given twice counts once; any
        two distinct values get their own run directory (:func:`exact_text`).
    n_neighbors : sequence of int
        c values (default (5,)); a value given twice counts once.
    gammas : sequence of "auto" or float
        gamma values (default ("auto",): the learned per-sample gamma); floats give
        the paper's gamma ablation (one gamma for every sample, e.g. 2^-5..2^5; run
        directories ``alpha=A_c=C_gamma=G``). A value given twice counts once.
    kernel : {"precomputed", "rbf", "linear", "poly"}, default "precomputed"
        As :class:`LSWMKC` ``kernel``: "precomputed" takes base kernels; the others
        build one kernel per feature view of ``X`` (aliases "gaussian" for "rbf",
        "polynomial" for "poly").
    kernel_params : dict, optional
        As :class:`LSWMKC` ``kernel_params`` ("poly": ``degree``, ``coef0``).
    snapshot_iterations : sequence of int, optional
        Iterations whose Z and K* factor each run keeps (``snapshots.npz`` in its run
        directory; :class:`LSWMKC` ``snapshot_iterations``). Those beyond a run's last
        iteration are listed in its ``report.json`` (``snapshots.not_reached``) and, at
        the end, in one :class:`~lswmkc_dask.errors.SnapshotWarning`.
    labels : array_like of shape (n,), optional
        Ground truth for the metrics (default: the store's labels).
    client : distributed.Client, str or Where, optional
        Where to run: a client (used as is), a scheduler address, or a
        :class:`lswmkc_dask.Where` (a scheduler file, TLS settings, a LocalCluster of
        ``n_workers`` processes); None: the active client, else this process for up to
        1 GiB of kernels (a threaded LocalCluster above).
    mode : {"auto", "task", "blockwise"}
        "auto": task mode when the kernel stack is at most 512 MiB and a quarter of a
        worker's memory limit, else blockwise.
    concurrency : int, optional
        Blockwise mode: fits in flight at once (default: number of workers).
    max_iter, min_iter, tol, n_init, random_state, block_rows
        As :class:`LSWMKC`.
    overwrite : bool
        Discard earlier results in ``output`` instead of resuming: only a directory
        written by lswmkc (marker ``.lswmkc-output``), never the working or home
        directory or an ancestor; the old results are replaced when the first new
        grid point is finished, not before.
    progress : bool
        One progress line per finished grid point on stderr (done/total, ETA), and
        the table at the end on stdout.
    data_description : str, optional
        Where the data came from, recorded in ``sweep.json`` (``data``) and named in
        messages; not compared on resume (the content fingerprint is).
    degenerate_kernels : {"warn", "drop", "error"}
        See :func:`lswmkc_dask.prepare`.
    eig_threads : int, optional
        BLAS threads of each eigendecomposition (default: the cores free, shared
        between concurrent fits).
    repeats : int
        Repetitions of each run's final k-means step (default 1: none). With N > 1
        and labels, the clustering of each grid point's spectral embedding (best of
        ``n_init`` starts; the paper protocol's ``n_init`` single starts) is run with
        N seeds derived from ``random_state``
        (:func:`lswmkc_dask.metrics.repeat_seeds`, the first ``random_state`` itself),
        and each run's ``report.json`` gets ``repeats`` (the values, mean and sample
        std of ACC, NMI, Purity and ARI under both protocols); the summary rows get
        ``ACC_honest_mean``, ``ACC_honest_std``, ... ``ARI_paper_std`` after their
        other columns. The fits are not repeated (they do not depend on the seed).
        Recorded in ``sweep.json`` (when above 1) and compared on resume.
    eig_device : {"cpu", "cuda", "auto"}, default "cpu"
        Where the gathered eigendecomposition of every fit runs, as :class:`LSWMKC`
        ``eig_device``, resolved once for the sweep on the cluster it runs on
        (:func:`lswmkc_dask.gpu.resolve_device`; the cluster this package starts
        declares the GPUs of this process). In task mode, each fit is then a task on a
        GPU worker. Each run's ``report.json`` records where each step ran
        (``eig_device``). Not compared on resume (the results are the CPU route's).
    eig_precision : {"float64", "float32"}, default "float64"
        As :class:`LSWMKC` ``eig_precision``.
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"}, default "auto"
        As :class:`LSWMKC` ``eig_driver``: the eigen route of every fit's gathered step
        (every route gives K* equal to 1e-10, so it is not compared on resume).

    Returns
    -------
    dict
        ``{"rows": [...], "selected": ..., "best_by_honest_ACC": ...,
        "best_by_paper_ACC": ...}``, also written to ``summary.json``/``summary.csv``:
        one row per finished grid point in ``output``, including those of an earlier
        call with another grid. ``selected`` is the grid point chosen WITHOUT labels
        (``alpha``, ``n_neighbors``, ``n_clusters``, ``criterion``, ``score`` and
        every point's ``scores``; with labels also its honest ACC and regret in
        points): the largest silhouette of the point's partition on the average
        preprocessed base kernel (:data:`SELECTION_CRITERION`, computed blockwise where
        the kernels are, one pass over the store, also written into each run's
        ``report.json`` under ``label_free``). :func:`selected_model` builds it.

    Raises
    ------
    ValueError
        Bad grid or hyper-parameters (also a ``min_iter`` above ``max_iter``,
        :func:`lswmkc_dask.estimator.check_iterations`); ``output`` holds a sweep with other settings
        (pass ``overwrite=True``); ``overwrite`` on the working or home directory.
    OtherDataError
        (a ValueError) ``output`` holds a sweep of other data (other kernels or
        labels); the message gives both fingerprints. Nothing is written.
    FileExistsError
        ``output`` is a file or a directory not written by lswmkc
        (:class:`lswmkc_dask.io.atomic.ForeignOutputError`), or another sweep runs in
        it (:class:`lswmkc_dask.io.locks.OutputInUseError`, naming its PID and host);
        ``output`` is a symbolic link to nothing.
    PermissionError
        ``output`` cannot be written (read-only or full file system).
    KernelInputError, FileNotFoundError
        Unusable kernels.
    DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step (before anything is
        written where the sweep starts its own cluster or runs in this process).
    """
    validate("sweep", locals())  # the parameter table's constraints, iterations, gammas, alphas: before any I/O
    if mode not in ("auto", "task", "blockwise"):
        raise ParameterError("{} must be 'auto', 'task' or 'blockwise', got {!r}", Param("mode"), mode)
    seeds = repeat_seeds(random_state, repeats)  # checks repeats (and random_state when repeats > 1)
    # A value given twice is one grid point (its run directory would be written twice).
    alphas = list(dict.fromkeys(float(a) for a in alphas))
    n_neighbors = list(dict.fromkeys(int(c) for c in n_neighbors))
    gammas = list(dict.fromkeys(check_gamma(g) for g in gammas))
    if not alphas or not n_neighbors or not gammas:
        raise ParameterError("the grid is empty: give at least one alpha and one {}", Param("n_neighbors"))
    out = Path(output)
    # The output is checked before the kernels are read or preprocessed (that can take
    # minutes); open_grid_directory below checks again and locks it.
    check_output(out, "sweep", "sweep.json", _input_paths(X), overwrite)
    _check_device(eig_device, eig_precision, client, 0)
    store = as_store(X, block_rows, degenerate_kernels, kernel, kernel_params)
    n, m = store.n_samples, store.n_kernels
    labels = check_labels(labels if labels is not None else store.labels, n)
    n_true = None if labels is None else count_classes(labels)
    ks = n_clusters_grid(n_clusters, n_true, n)
    validate("sweep", {"n_clusters": ks, "n_neighbors": n_neighbors}, n)  # against n, before any work
    # A single k is recorded as a number (as before k grids), a grid as a list.
    params = dict(
        n_clusters=ks[0] if len(ks) == 1 else ks, max_iter=max_iter, min_iter=min_iter, tol=tol, n_init=n_init,
        random_state=random_state
    )
    if repeats > 1:  # recorded only then: a sweep of repeats = 1 writes what it wrote before
        params["repeats"] = int(repeats)
    # Each grid point is one fit (its iterations do not depend on k), clustered at every k.
    run_params = dict(params, n_clusters=ks[0], n_clusters_grid=ks, eig_threads=eig_threads,
                      snapshot_iterations=None if snapshot_iterations is None else list(snapshot_iterations),
                      eig_device=eig_device, eig_precision=eig_precision, eig_driver=eig_driver)
    run_params.pop("repeats", None)
    if repeats > 1:
        run_params["repeat_seeds"] = seeds
    kernel_names = store.kernel_names
    config = to_json_ready({**params, "data": data_description or str(store.location if not store.in_memory else "array"),
                     "n_samples": n, "n_kernels": m, "kernel_names": kernel_names,
                     "input": input_fingerprint(store, labels)})
    # The directory: never a file, a foreign directory or the working/home directory;
    # locked while this sweep runs (a second one is told who runs there); with overwrite,
    # the old results are replaced only when the first new result is ready (io/locks.py).
    target, config = open_grid_directory(out, kind="sweep", noun="sweep", verb="swept", resume_file="sweep.json",
                                         config=config, config_keys=CONFIG_KEYS, store=store, labels=labels,
                                         overwrite=overwrite)

    done_runs = {} if target.state == "replace" else load_sweep(out)[1]
    grid = [GridPoint(a, c, g) for g in gammas for c in n_neighbors for a in alphas]
    todo = [p for p in grid if p not in done_runs]
    # The summary covers the directory: grid points of an earlier, other grid resumed here
    # too (as `lswmkc plot` shows them), not only this call's.
    rows = [r for p, report in done_runs.items() for r in _rows(p, report)]
    started = time.perf_counter()
    finished = len(grid) - len(todo)  # of this grid, for the progress lines
    pace = {"concurrency": 1, "resumed": finished}  # for the ETA of the progress lines

    recorded = set()
    missed_snapshots: dict[str, tuple[list[int], int]] = {}  # run -> (snapshot iterations not reached, n_iter)

    def record(point, output_):
        nonlocal finished
        output_[0]["kernel_names"] = kernel_names  # as `lswmkc fit` names them (the store's names)
        missed = (output_[0].get("snapshots") or {}).get("not_reached")
        if missed:
            missed_snapshots[point.name] = ([int(t) for t in missed], int(output_[0]["n_iter"]))
        # With overwrite, the first result goes into the new directory, swapped in then.
        target.commit(lambda root: _write_point(root / "runs", point, output_))
        rows.extend(_rows(point, output_[0]))
        recorded.add(point)
        finished += 1
        if progress:
            _progress(finished, len(grid), point, output_[0], started, **pace)

    resident = bool(todo) and _resident_sweep(store, eig_device, eig_precision, snapshot_iterations, client)
    if resident:  # the stack on this machine's GPU once, every grid point there (docs/algorithm.md section 5)
        run_params[DEVICE_KEY] = "cuda"
        if progress:
            print(f"sweep: {len(todo)} of {len(grid)} grid points to run ({len(grid) - len(todo)} done), "
                  "the whole iteration on the GPU", file=sys.stderr, flush=True)
        _run_resident(store, todo, run_params, labels, record)
    elif todo:
        stack = store.nbytes
        with Where.of(client).open(stack) as c:
            run_params[DEVICE_KEY] = resolve_device(eig_device, n, c)  # "auto": by n and the device there
            if c is None:
                if progress:
                    print(
                        f"sweep: {len(todo)} of {len(grid)} grid points to run ({len(grid) - len(todo)} done), "
                        "in this process",
                        file=sys.stderr,
                        flush=True,
                    )
                _run_in_process(store, todo, run_params, labels, record)
            else:
                wait_for_workers(c)
                info = c.scheduler_info(n_workers=-1)["workers"]
                limits = [w.get("memory_limit") or 0 for w in info.values()]
                smallest = min((x for x in limits if x), default=0)
                use_tasks = mode == "task" or (
                    mode == "auto" and stack <= TASK_MODE_MAX_BYTES and (not smallest or stack <= smallest / 4)
                )
                pace["concurrency"] = (sum(int(w.get("nthreads", 1)) for w in info.values()) if use_tasks
                                       else concurrency or len(info))
                if progress:
                    print(
                        f"sweep: {len(todo)} of {len(grid)} grid points to run ({len(grid) - len(todo)} done), "
                        f"{'task' if use_tasks else 'blockwise'} mode on {len(info)} workers",
                        file=sys.stderr,
                        flush=True,
                    )
                for restart in range(MAX_RESTARTS + 1):
                    left = [p for p in todo if p not in recorded]
                    try:
                        if use_tasks:
                            _run_tasks(c, store, left, run_params, labels, record)
                        else:
                            _run_blockwise(c, store, left, run_params, labels, record, concurrency or len(info),
                                           block_rows)
                        break
                    except lost_errors() as exc:
                        # Data sent from here (an in-memory store: scattered, no lineage)
                        # died with a worker: send it again and rerun the unfinished points
                        # from their start (a fit is deterministic: the same results).
                        if restart == MAX_RESTARTS:
                            raise
                        wait_for_workers(c)
                        if progress:
                            again = sum(p not in recorded for p in left)
                            print(f"sweep: a worker was lost ({type(exc).__name__}); {again} unfinished grid "
                                  "points start again", file=sys.stderr, flush=True)
                _score_runs(target.path, store, c, block_rows)  # where the kernels are: one pass
    _score_runs(target.path, store, None, block_rows)  # in this process: its grid, or points left unscored
    if missed_snapshots:  # one warning for the whole grid
        stops = sorted({n_iter for _, n_iter in missed_snapshots.values()})
        warn_snapshots_not_reached(
            sorted({t for missed, _ in missed_snapshots.values() for t in missed}),
            f"{len(missed_snapshots)} of {len(recorded)} runs" if len(recorded) > 1 else "the run",
            str(stops[0]) if len(stops) == 1 else f"{stops[0]} to {stops[-1]}", capped=stops[-1] >= max_iter,
        )
    rows = [r for p, report in load_sweep(target.path)[1].items() for r in _rows(p, report)]
    summary = _write_summary(out, rows, n_true)
    if progress:  # the result on stdout, the progress above it on stderr
        print(summary_table(summary["rows"], summary["selected"]), flush=True)
    return summary


#: The key of a sweep's run parameters that carries the resolved eig_device ("cpu"/"cuda").
DEVICE_KEY = "resolved_eig_device"


def _check_device(eig_device, eig_precision, client, n):
    """Refuse a bad ``eig_device``/``eig_precision``, and ``"cuda"`` without a device
    where the sweep runs on a cluster of its own or in this process (before any output
    is written; a cluster given is asked once it is connected).
    """
    if eig_precision not in EIG_PRECISIONS:
        raise ParameterError("{} must be one of {}, got {!r}", Param("eig_precision"), list(EIG_PRECISIONS),
                             eig_precision)
    where = Where.of(client)
    own = where.client is None and not where.scheduler_file and active_client() is None
    if own or eig_device not in EIG_DEVICES:
        resolve_device(eig_device, n, None)  # raises DeviceUnavailableError, ParameterError


def _resident_sweep(store, eig_device, eig_precision, snapshot_iterations, client):
    """Whether the sweep runs wholly on this machine's GPU: the route
    :func:`lswmkc_dask.engine.resident_here` takes for one fit (no cluster given, the
    device resolved to "cuda" and holding the stack); where the stack does not fit, a
    ``DeviceFallbackWarning`` says so.
    """
    asked = FitOptions(n_clusters=2, eig_device=eig_device, eig_precision=eig_precision,
                       snapshot_iterations=tuple(snapshot_iterations or ()))
    return resident_here(store, asked, client) is not None


def _run_resident(store, todo, params, labels, record):
    """The grid points one after another on this machine's GPU, the stack copied there once."""
    params = dict(params)
    ks = params.pop("n_clusters_grid", None)
    seeds = params.pop("repeat_seeds", None)
    device = params.pop(DEVICE_KEY, "cuda")
    xp, dev = resident_namespace("cuda")
    kernels = load_stack(store, Link(xp, dev))
    try:
        for point in sorted(todo, key=lambda p: (p.n_neighbors, p.gamma != "auto", p.alpha)):
            options = dataclasses.replace(_point_options(point, params, device), resident="cuda")
            result = fit_store_resident(store, options, log_restarts, kernels=kernels)
            result.kernel_names, result.eig_device = store.kernel_names, device
            record(point, _finish(_fitted(result, point, params), labels, ks, seeds=seeds))
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
    for w in client.scheduler_info()["workers"].values():
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


def _eig_threads_per_fit(workers, concurrency):
    """BLAS threads per gathered step when ``concurrency`` fits run at once.

    ``None`` (all cores of the worker's machine) for one fit at a time; otherwise the
    threads of the most crowded machine divided among the fits that may run their
    gathered steps there at the same time.
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
    cache = plan_memory(client, store)
    runner = DaskRunner(client, kernels_in_memory=blocks_in_memory(store, cache))
    blocks, starts = kernel_blocks(client, store, block_rows, cache)
    inits = {c: initialise(runner, blocks, starts, store.n_kernels, c) for c in sorted({p.n_neighbors for p in todo})}

    # Gathered steps of concurrent fits may meet on one machine: share its cores between
    # them (OpenBLAS threads beyond the cores made 2 concurrent fits 4x slower here).
    share = _eig_threads_per_fit(client.scheduler_info()["workers"], concurrency)

    params = dict(params)
    ks = params.pop("n_clusters_grid", None)
    seeds = params.pop("repeat_seeds", None)
    device = params.pop(DEVICE_KEY, "cpu")

    def fit_point(point):
        options = _point_options(point, params, device)  # "cuda": the gathered steps go to GPU workers
        result = fit_blocks(runner, blocks, inits[point.n_neighbors], options, max_threads=share,
                            callback=log_restarts)
        return _finish(_fitted(result, point, params), labels, ks, max_threads=share, seeds=seeds)

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

"""Sweeps over alpha (and n_neighbors, gamma, k) spread across a Dask cluster, resumable.

The paper chooses alpha by a grid search over 2^0..2^10. :func:`sweep` checks the settings,
opens the data and the resumable directory (:mod:`lswmkc_dask.grid.points`), runs the grid's
missing points by route (:mod:`lswmkc_dask.grid._routes`), scores them without labels
(:mod:`lswmkc_dask.grid.scoring`) and writes the summary with the grid point chosen without
labels (:mod:`lswmkc_dask.grid.results`); docs/user-guide/sweeps.md.
"""

from __future__ import annotations

import numbers
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from .._params import DEFAULTS
from .._validate import validate
from ..core.eigen import EIG_DEVICES, FIT_PRECISIONS
from ..core.equations import check_gamma
from ..engine.cluster import active_client
from ..engine.gpu import resolve_device
from ..engine.progress import Progress
from ..engine.route import check_precision, open_kernels
from ..engine.where import Where
from ..errors import Param, ParameterError
from ..io import check_labels, count_classes
from ..io.model_file import MODEL_FILE
from ..io.output import check_output
from ..io.run_arrays import read_silhouettes, run_arrays
from ..records import FitOptions
from ..report.metrics import repeat_seeds
from ..report.record import to_json_ready, warn_snapshots_not_reached
from ._routes import GridRun, run_grid
from .points import input_fingerprint, input_paths, open_grid_directory, write_table_files
from .results import (
    SELECTION_CRITERION,
    GridPoint,
    exact_text,
    load_sweep,
    summary_rows,
    summary_table,
    write_point,
    write_summary,
)
from .scoring import run_ks, score_runs
from .selection import default_decision, relative_eigengap

DEFAULT_ALPHAS = tuple(2.0**k for k in range(11))
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
    stack_dtype: str = DEFAULTS["stack_dtype"],
    default_alpha: float = DEFAULTS["alpha"],
) -> dict:
    """Fit LSWMKC over a grid of alpha (and n_neighbors), resumably.

    Parameters
    ----------
    X : KernelStack, str, Path, array_like of shape (m, n, n), or list of arrays
        As :meth:`LSWMKC.fit`: base kernels, or with ``kernel`` other than
        "precomputed" m feature views of shape (n, d_v).
    output : str or Path
        Sweep directory. Finished grid points in it are kept and skipped, if they were
        computed on the same data (the fingerprint of the kernels and labels in
        ``sweep.json``, :func:`input_fingerprint`; the store may have moved) with the
        same settings. A symbolic link is followed: the directory it points to is
        resumed or replaced, the link stays.
    n_clusters : int or sequence of int, optional
        k, or a k grid. A grid costs one fit per (alpha, n_neighbors): each fit's factor W
        is clustered at every k (rows per k in the summary, ``labels_k=K.csv`` and
        ``by_n_clusters`` in each run), and the label-free choice covers k. Each run's
        ``labels.csv`` and top-level ``metrics`` are of the k chosen for it without labels
        (``n_clusters_selected`` in its report says which and why). Default: the number
        of distinct labels, or :data:`DEFAULT_N_CLUSTERS` (2..12) when there are no labels.
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
        As :class:`LSWMKC` ``kernel`` (aliases "gaussian" for "rbf", "polynomial" for "poly").
    kernel_params : dict, optional
        As :class:`LSWMKC` ``kernel_params`` ("poly": ``degree``, ``coef0``).
    snapshot_iterations : sequence of int, optional
        Iterations whose Z and K* factor each run keeps (in its ``model.safetensors``; :class:`LSWMKC`
        ``snapshot_iterations``). Those beyond a run's last iteration are listed in its
        ``report.json`` (``snapshots.not_reached``) and, at the end, in one
        :class:`~lswmkc_dask.errors.SnapshotWarning`.
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
    max_iter, min_iter, tol, n_init, random_state, block_rows, eig_precision, stack_dtype
        As :class:`LSWMKC` (``stack_dtype``: of the stack built on the GPU from feature views).
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
        Repetitions of each run's final k-means step (default 1: none). With N > 1 and
        labels, each grid point's embedding is clustered with N seeds derived from
        ``random_state`` (:func:`lswmkc_dask.report.metrics.repeat_seeds`), each run's
        ``report.json`` gets ``repeats`` (the values, mean and sample std of ACC, NMI,
        Purity and ARI under both protocols) and the summary rows ``ACC_honest_mean``,
        ``ACC_honest_std``, ... ``ARI_paper_std`` after their other columns. The fits are
        not repeated. Compared on resume.
    eig_device : {"cpu", "cuda", "auto"}, default "cpu"
        As :class:`LSWMKC` ``eig_device``, resolved once for the sweep on the cluster it
        runs on (:func:`lswmkc_dask.engine.gpu.resolve_device`); in task mode each fit is
        then a task on a GPU worker. Feature views swept on this machine's GPU (no
        cluster) have their base kernels built there once, with no store. Each run's
        ``report.json`` records where each step ran. Not compared on resume (a sweep of
        features resumes on the device it began on: the kernels built on the GPU are
        fingerprinted by their values).
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"}, default "auto"
        As :class:`LSWMKC` ``eig_driver`` (every route gives K* equal to 1e-10: not
        compared on resume).
    default_alpha : float, default 1
        The alpha the choice must beat (:func:`weigh_default`): kept unless the grid's
        best-scored alpha wins by more than the spread of its win. Not compared on resume.

    Returns
    -------
    dict
        ``{"rows": [...], "selected": ..., "best_by_honest_ACC": ...,
        "best_by_paper_ACC": ...}``, also written to ``summary.json``/``summary.csv``:
        one row per finished grid point in ``output``, including those of an earlier
        call with another grid. ``selected`` is the grid point chosen WITHOUT labels
        (:func:`selected_model` builds it): the default alpha (``default_alpha``) unless
        the largest :data:`SELECTION_CRITERION` (the silhouette of the point's partition on
        the average preprocessed base kernel, also in each run's ``report.json`` under
        ``label_free``) beats it by more than one standard error of the paired per-sample
        win; ``selected["default"]`` says which and why (:func:`weigh_default`), with every
        point's ``scores`` and, with labels, its honest ACC and regret in points.

    Raises
    ------
    ValueError
        Bad grid or hyper-parameters (also a ``min_iter`` above ``max_iter``); ``output``
        holds a sweep with other settings (pass ``overwrite=True``); ``overwrite`` on the
        working or home directory.
    OtherDataError
        (a ValueError) ``output`` holds a sweep of other data (other kernels or
        labels); the message gives both fingerprints. Nothing is written.
    FileExistsError
        ``output`` is a file or a directory not written by lswmkc
        (:class:`lswmkc_dask.errors.ForeignOutputError`), or another sweep runs in
        it (:class:`lswmkc_dask.errors.OutputInUseError`, naming its PID and host);
        ``output`` is a symbolic link to nothing.
    PermissionError
        ``output`` cannot be written (read-only or full file system).
    KernelInputError, FileNotFoundError
        Unusable kernels.
    DeviceUnavailableError
        ``eig_device="cuda"`` where no GPU can run the gathered step (before anything is
        written where the sweep starts its own cluster or runs in this process).

    See Also
    --------
    lswmkc_dask.selected_model : The estimator of the grid point chosen without labels.
    lswmkc_dask.grid.compare.compare : The same grid against the paper's baselines.

    Examples
    --------
    >>> import tempfile
    >>> from lswmkc_dask import selected_model, sweep
    >>> from lswmkc_dask.datasets import load_yale
    >>> kernels, labels = load_yale()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     result = sweep(kernels, tmp + "/sweep", alphas=[1, 8, 64], n_clusters=15, n_init=10, progress=False)
    >>> result["selected"]["alpha"], result["selected"]["confidence"]
    (8.0, 'near-tie')
    >>> selected_model(result)
    LSWMKC(alpha=8.0, n_clusters=15)
    """
    validate("sweep", locals())  # the parameter table's constraints, iterations, gammas, alphas: before any I/O
    validate("sweep", {"alphas": [default_alpha]})  # the default the choice is weighed against, as an alpha
    if mode not in ("auto", "task", "blockwise"):
        raise ParameterError("{} must be 'auto', 'task' or 'blockwise', got {!r}", Param("mode"), mode)
    seeds = repeat_seeds(random_state, repeats)  # checks repeats (and random_state when repeats > 1)
    alphas, n_neighbors, gammas = _grid_values(alphas, n_neighbors, gammas)
    out = Path(output)
    # The output is checked before the kernels are read or preprocessed (that can take
    # minutes); open_grid_directory below checks again and locks it.
    check_output(out, overwrite=overwrite, kind="sweep", inputs=input_paths(X))
    check_device(eig_device, eig_precision, client, 0)
    on_gpu = FitOptions(2, eig_device=eig_device, eig_precision=eig_precision,
                        snapshot_iterations=tuple(int(t) for t in snapshot_iterations or ()))
    # feature views whose fits run wholly on this GPU: their kernels built there once
    store = open_kernels(X, kernel=kernel, kernel_params=kernel_params, block_rows=block_rows,
                         degenerate_kernels=degenerate_kernels, options=on_gpu, client=client, stack_dtype=stack_dtype)
    labels = check_labels(labels if labels is not None else store.labels, store.n_samples)
    n_true = None if labels is None else count_classes(labels)
    ks = n_clusters_grid(n_clusters, n_true, store.n_samples)
    validate("sweep", {"n_clusters": ks, "n_neighbors": n_neighbors}, store.n_samples)  # against n, before any work
    # sweep.json's settings (CONFIG_KEYS): one k as a number, a grid as a list; repeats only above 1
    params = dict(n_clusters=ks[0] if len(ks) == 1 else ks, max_iter=max_iter, min_iter=min_iter, tol=tol,
                  n_init=n_init, random_state=random_state, **({"repeats": int(repeats)} if repeats > 1 else {}))
    config = to_json_ready({**params, "data": data_description or str(store.location if not store.in_memory else "array"),
                            "n_samples": store.n_samples, "n_kernels": store.n_kernels,
                            "kernel_names": store.kernel_names, "input": input_fingerprint(store, labels)})
    with open_grid_directory(out, kind="sweep", noun="sweep", verb="swept", resume_file="sweep.json", config=config,
                             config_keys=CONFIG_KEYS, store=store, labels=labels, overwrite=overwrite) as (target, _):
        # every point's one fit (its iterations do not depend on k) is clustered at every k of ks
        run_params = dict(params, n_clusters=ks[0], n_clusters_grid=ks, eig_threads=eig_threads,
                          snapshot_iterations=None if snapshot_iterations is None else list(snapshot_iterations),
                          eig_device=eig_device, eig_precision=eig_precision, eig_driver=eig_driver)
        if run_params.pop("repeats", 1) != 1:  # recorded only above 1
            run_params["repeat_seeds"] = seeds
        done = {} if target.state == "replace" else load_sweep(out)[1]
        grid = [GridPoint(a, c, g) for g in gammas for c in n_neighbors for a in alphas]
        todo = [p for p in grid if p not in done]
        show = Progress(progress)
        record = _Recorder(target, len(grid), len(grid) - len(todo), show, store.kernel_names)
        run_grid(GridRun(store, todo, len(grid), run_params, labels, record, show), client=client, mode=mode,
                 concurrency=concurrency, block_rows=block_rows, eig_device=eig_device, eig_precision=eig_precision,
                 snapshot_iterations=snapshot_iterations,
                 score=lambda c: score_runs(target.path, store, c, block_rows))  # where the kernels are: one pass
        summary = weigh_default(out, _score_and_summarise(out, target, store, record, block_rows, max_iter, n_true),
                                default_alpha)
    show.result(sweep_table(summary["rows"], summary["selected"]))  # on stdout, the progress above on stderr
    return summary


def _grid_values(alphas, n_neighbors, gammas):
    """The grid's alphas, n_neighbors and gammas as lists, each value once (a value given
    twice is one grid point: its run directory would be written twice); an empty grid refused.
    """
    alphas = list(dict.fromkeys(float(a) for a in alphas))
    n_neighbors = list(dict.fromkeys(int(c) for c in n_neighbors))
    gammas = list(dict.fromkeys(check_gamma(g) for g in gammas))
    if not alphas or not n_neighbors or not gammas:
        raise ParameterError("the grid is empty: give at least one alpha and one {}", Param("n_neighbors"))
    return alphas, n_neighbors, gammas


class _Recorder:
    """The sweep's :class:`lswmkc_dask.grid._routes.PointSink`: writes each finished grid point into
    its run directory of ``target`` and shows its progress line (``finished`` of ``total`` before).
    """

    def __init__(self, target, total, finished, progress, kernel_names):
        self.target, self.total, self.progress, self.kernel_names = target, total, progress, kernel_names
        self.finished = self.resumed = finished
        self.recorded: set = set()
        self.concurrency = 1  # set by the route: the fits it runs at once
        self.missed_snapshots: dict[str, tuple[list[int], int]] = {}  # run -> (snapshots not reached, n_iter)
        self.started = time.perf_counter()

    def __call__(self, point, output):
        """Write one finished point (the route's outputs; the report names the kernels as ``lswmkc fit``)."""
        report = output[0]
        report["kernel_names"] = self.kernel_names
        missed = (report.get("snapshots") or {}).get("not_reached")
        if missed:
            self.missed_snapshots[point.name] = ([int(t) for t in missed], int(report["n_iter"]))
        self.target.commit(lambda root: write_point(root / "runs", point, output))
        self.recorded.add(point)
        self.finished += 1
        self.progress.grid_point(self.finished, self.total, point, report, self.started,
                                 concurrency=self.concurrency, resumed=self.resumed)


def _score_and_summarise(out, target, store, record, block_rows, max_iter, n_true):
    """Score the runs left unscored (in this process), warn once of snapshot iterations not
    reached, and write the summary of every run in the directory with the label-free choice.
    """
    score_runs(target.path, store, None, block_rows)  # in this process: its grid, or points left unscored
    missed = record.missed_snapshots
    if missed:  # one warning for the whole grid
        stops = sorted({n_iter for _, n_iter in missed.values()})
        warn_snapshots_not_reached(
            sorted({t for points, _ in missed.values() for t in points}),
            f"{len(missed)} of {len(record.recorded)} runs" if len(record.recorded) > 1 else "the run",
            str(stops[0]) if len(stops) == 1 else f"{stops[0]} to {stops[-1]}", capped=stops[-1] >= max_iter,
        )
    rows = [r for p, report in load_sweep(target.path)[1].items() for r in summary_rows(p, report)]
    return write_summary(out, rows, n_true)


def check_device(eig_device, eig_precision, client, n):
    """Refuse a bad ``eig_device``/``eig_precision``, and ``"cuda"`` without a device
    where the sweep runs on a cluster of its own or in this process (before any output
    is written; a cluster given is asked once it is connected).
    """
    if eig_precision not in FIT_PRECISIONS:
        raise ParameterError("{} must be one of {}, got {!r}", Param("eig_precision"), list(FIT_PRECISIONS),
                             eig_precision)
    check_precision(eig_precision, eig_device)  # "mixed" on the CPU
    where = Where.of(client)
    own = where.client is None and not where.scheduler_file and active_client() is None
    if own or eig_device not in EIG_DEVICES:
        resolve_device(eig_device, n, None)  # raises DeviceUnavailableError, ParameterError


#: How :func:`weigh_default` decides, as written into ``summary.json`` (``selected["default"]["rule"]``).
DEFAULT_RULE = ("the default alpha is kept unless the alpha of the largest AutoSC relative eigen-gap of its Z "
                f"beats it on {SELECTION_CRITERION} by more than the spread of the win (the standard error of "
                "the paired per-sample differences, over resampled samples); at the chosen c, gamma and k "
                "(docs/performance.md, model selection, fourth round)")


def _point_files(out, runs, point, k):
    """(per-sample silhouettes at k, the run directory, whose model file holds Z) of ``point``'s run, or None."""
    report = runs.get(point)
    if report is None:
        return None
    run = out / "runs" / next(p for p in runs if p == point).name
    samples = read_silhouettes(run) if os.path.lexists(run / MODEL_FILE) else None
    ks = run_ks(report)
    at = 0 if ks == [None] else next((i for i, kk in enumerate(ks) if int(kk) == int(k)), None)
    if at is None or samples is None or samples.shape[0] != len(ks):
        return None
    return np.asarray(samples[at], dtype=np.float64), run


def _adopt(chosen, row, rows):
    """Make ``chosen`` the grid point of summary ``row``: alpha, score and, with labels, ACC and regrets."""
    chosen.update(alpha=row["alpha"], score=row[SELECTION_CRITERION])
    if row.get("ACC_honest") is None:
        return
    same_k = [r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None and r["n_clusters"] == row["n_clusters"]]
    every = [r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None]
    chosen.update(ACC_honest=row["ACC_honest"], regret_honest_ACC_points=round(100.0 * (max(same_k) - row["ACC_honest"]), 4))
    if "regret_honest_ACC_points_all_k" in chosen:
        chosen["regret_honest_ACC_points_all_k"] = round(100.0 * (max(every) - row["ACC_honest"]), 4)


def weigh_default(out: str | os.PathLike[str], summary: dict, default_alpha: float = DEFAULTS["alpha"]) -> dict:
    """Give the default alpha the benefit of the doubt: keep it unless a candidate clearly beats it.

    At the chosen c, gamma and k: the candidate is the alpha of the largest AutoSC relative
    eigen-gap of its Z (:func:`lswmkc_dask.grid.selection.relative_eigengap`; ties to the
    smaller alpha); it replaces ``default_alpha`` only where its :data:`SELECTION_CRITERION`
    beats the default's by more than the spread of the win, the standard error of the paired
    per-sample differences (:func:`lswmkc_dask.grid.selection.default_decision`). Two
    criteria must agree: the gap names the candidate, the silhouette must confirm it (the
    rule of the fourth round in docs/performance.md, the only one there never 2 points worse
    than the default). ``summary["selected"]`` becomes the point kept or moved to (its alpha,
    score and, with labels, honest ACC and regret); the silhouette's own best stays among the
    near-ties; ``selected["default"]`` records the default's point and score, the
    silhouette's pick, the candidate and every gap, the win, the spread, ``"kept"`` and the
    ``"message"`` of :func:`default_line`. ``summary.json``/``summary.csv`` are rewritten
    (atomically). Cost: one eigendecomposition of each alpha's Z (dense up to
    n = 1500, else ARPACK on the sparse Z).

    Parameters
    ----------
    out : str or Path
        The sweep directory (the per-sample silhouettes and Z of its ``runs/*/model.safetensors``).
    summary : dict
        What :func:`sweep` writes (``rows``, ``selected``); changed in place.
    default_alpha : float, default 1
        The alpha to beat. Where it is not in the grid (or not scored) the silhouette's pick
        stands and ``selected["default"]`` says so (``"in_grid"`` false).

    Returns
    -------
    dict
        ``summary``.

    Raises
    ------
    lswmkc_dask.errors.ModelFileError
        A run's model file is damaged (the message names it and the member).
    """
    chosen = summary.get("selected")
    if not chosen:
        return summary
    out = Path(out)
    alpha = float(default_alpha)
    where = {"n_neighbors": chosen["n_neighbors"], "n_clusters": chosen["n_clusters"],
             "gamma": chosen.get("gamma", "auto")}
    pick = {"alpha": chosen["alpha"], **where, "score": chosen["score"]}
    at = {r["alpha"]: r for r in summary["rows"] if r["n_neighbors"] == where["n_neighbors"]
          and r["n_clusters"] == where["n_clusters"] and str(r.get("gamma", "auto")) == str(where["gamma"])
          and r.get(SELECTION_CRITERION) is not None}
    runs = load_sweep(out)[1] if alpha in at else {}
    gamma = where["gamma"] if where["gamma"] == "auto" else float(where["gamma"])
    files = {a: _point_files(out, runs, GridPoint(a, int(where["n_neighbors"]), gamma), where["n_clusters"])
             for a in (at if alpha in at else ())}
    files = {a: f for a, f in files.items() if f is not None}
    entry: dict[str, Any] = {"alpha": alpha, **where, "criterion_pick": pick, "rule": DEFAULT_RULE}
    if alpha not in files:
        why = "is not in the grid" if alpha not in at else "has no per-sample scores or no Z"
        entry.update(in_grid=False, kept=False, message=(
            f"the default alpha={exact_text(alpha)} {why} at c={where['n_neighbors']} k={where['n_clusters']}: "
            f"the pick alpha={exact_text(chosen['alpha'])} is not weighed against it (add {exact_text(alpha)} "
            "to the alphas)"))
        chosen["default"] = entry
        write_table_files(out, "summary", summary, list(dict.fromkeys(k for r in summary["rows"] for k in r)))
        return summary
    n = files[alpha][0].size
    gaps = {a: relative_eigengap(run_arrays(f[1], n)[0], int(where["n_clusters"])) for a, f in files.items()
            if f[0].size == n}
    candidate = max(sorted(gaps), key=lambda a: gaps[a])  # ties: the smaller alpha
    decision = default_decision(np.stack([files[candidate][0], files[alpha][0]]), 0, 1)
    entry.update(in_grid=True, score=at[alpha][SELECTION_CRITERION], win=decision["win"], spread=decision["spread"],
                 kept=not decision["moved"], autosc_gaps={exact_text(a): g for a, g in gaps.items()},
                 candidate={"alpha": candidate, "autosc_gap": gaps[candidate],
                            "score": at[candidate][SELECTION_CRITERION]})
    if at[alpha].get("ACC_honest") is not None:
        entry["ACC_honest"] = at[alpha]["ACC_honest"]
    if decision["moved"]:
        entry["message"] = (f"alpha = {exact_text(candidate)}: better than the default by {decision['win']:.4f}, "
                            f"spread {decision['spread']:.4f}")
        _adopt(chosen, at[candidate], summary["rows"])
    else:
        entry["message"] = "kept the default: no alpha scores clearly better" + (
            " (the default has the largest AutoSC eigen-gap)" if candidate == alpha else
            f" (alpha={exact_text(candidate)}, of the largest AutoSC eigen-gap, by {decision['win']:.4f}, "
            f"spread {decision['spread']:.4f})")
        _adopt(chosen, at[alpha], summary["rows"])
    chosen["default"] = entry
    write_table_files(out, "summary", summary, list(dict.fromkeys(k for r in summary["rows"] for k in r)))
    return summary


def default_line(chosen: dict) -> str | None:
    """The line of ``lswmkc sweep`` that sets the default's result beside the pick.

    Parameters
    ----------
    chosen : dict
        A summary's ``"selected"`` weighed by :func:`weigh_default`.

    Returns
    -------
    str or None
        ``default alpha=1 (criterion 0.1115) beside the pick alpha=8 (0.1192): MESSAGE``
        (``kept the default: no alpha scores clearly better ...`` or ``alpha = 8: better than
        the default by W, spread S``), with labels also the default's honest ACC; None for a
        summary not weighed (of an older version).
    """
    entry = chosen.get("default")
    if not entry:
        return None
    if not entry.get("in_grid"):
        return f"default: {entry['message']}"
    cand, pick = entry["candidate"], entry["criterion_pick"]
    line = f"default alpha={exact_text(entry['alpha'])} ({SELECTION_CRITERION} {entry['score']:.4f}) " + (
        "has the largest AutoSC eigen-gap" if float(cand["alpha"]) == float(entry["alpha"]) else
        f"beside the candidate alpha={exact_text(cand['alpha'])} ({cand['score']:.4f}, the largest AutoSC eigen-gap)")
    if float(pick["alpha"]) not in (float(cand["alpha"]), float(entry["alpha"])):
        line += f"; the largest {SELECTION_CRITERION}: alpha={exact_text(pick['alpha'])} ({pick['score']:.4f})"
    line += f": {entry['message']}"
    if entry.get("ACC_honest") is not None:
        line += f"; with your labels: the default's honest ACC {entry['ACC_honest']:.4f}"
    return line


def sweep_table(rows: list[dict], selected: dict | None = None) -> str:
    """:func:`summary_table` with the legend of a weighed choice and :func:`default_line` under it.

    Parameters
    ----------
    rows, selected
        As :func:`summary_table` (``selected`` weighed by :func:`weigh_default`, or not).

    Returns
    -------
    str
        Where the choice is not the largest score (the default kept, or the candidate of
        :func:`weigh_default` taken), the ``*`` legend says so (the largest score is then a
        ``~`` near-tie); the default's line last.
    """
    text = summary_table(rows, selected)
    entry = (selected or {}).get("default") or {}
    if not entry:
        return text
    lines = text.split("\n")
    pick = entry["criterion_pick"]
    if float(pick["alpha"]) != float(selected["alpha"]):  # type: ignore[index]
        how = ("the default, kept: no alpha scores clearly better" if entry.get("kept") else
               "the largest AutoSC eigen-gap, its win over the default larger than its spread")
        legend = (f"* selected without labels: alpha={exact_text(selected['alpha'])}, {how} "  # type: ignore[index]
                  f"(the largest {SELECTION_CRITERION}, at alpha={exact_text(pick['alpha'])}, is marked ~)")
        lines = [legend if line.startswith("* selected without labels") else line for line in lines]
    return "\n".join(lines + [default_line(selected or {}) or ""]).rstrip("\n")

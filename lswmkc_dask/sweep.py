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
import csv
import dataclasses
import json
import math
import numbers
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ._allocator import with_array_malloc
from ._device_fit import Link, resident_namespace
from ._device_route import (
    fit_array_resident,
    fit_store_resident,
    load_stack,
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
from .cluster import active_client, wait_for_workers
from .engine import resident_here
from .errors import Param, ParameterError, with_message
from .estimator import LSWMKC, as_store, check_hyperparameters, check_iterations, check_params
from .fit import FitOptions, fit_blocks, log_restarts
from .gpu import namespace, resolve_device
from .io import atomic_path, check_labels, count_classes, read_store_rows
from .io.locks import closes_run_directories
from .metrics import METRICS, evaluate, evaluate_embedding, repeat_metrics, repeat_seeds, repeat_summary_columns
from .postprocess import cluster_factor, factor_embeddings
from .report import fit_report, labels_csv, to_json_ready, warn_snapshots_not_reached, write_fit_output
from .selection import (
    PS_THRESHOLD,
    VOTES,
    choose_n_clusters,
    finish_partition_scores,
    medoid_partition,
    near_ties,
    partition_scores_block,
    prediction_strength,
)
from .solver import check_gamma, initialise

if TYPE_CHECKING:  # annotations only
    from .io import KernelStore

__all__ = ["DEFAULT_ALPHAS", "DEFAULT_N_CLUSTERS", "RUN_K_KEY", "SELECTION_CRITERION", "GridPoint", "OtherDataError",
           "exact_text", "label_free_evidence", "label_free_scores", "load_sweep", "n_clusters_grid", "run_n_clusters", "selected_model", "selection_line", "summary_table",
           "sweep"]

DEFAULT_ALPHAS = tuple(2.0**k for k in range(11))
#: The label-free score by which a sweep selects its grid point (benchmarks/bench_selection.py).
SELECTION_CRITERION = "silhouette_avg_kernel"
#: The entry of a k-grid run's ``report.json`` that says which k its ``labels.csv``,
#: ``metrics``, ``label_free``, ``repeats`` and ``params.n_clusters`` are of, and why.
RUN_K_KEY = "n_clusters_selected"
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


def exact_text(value: Any) -> str:
    """``value`` as short text that reads back as the same float.

    ``f"{value:g}"`` (``8``, ``0.5``, ``1e-05``) when it reads back exactly, else
    ``repr(value)`` (``8.000001``, ``0.3333333333333333``): two distinct values never
    get the same text.

    Parameters
    ----------
    value : float

    Returns
    -------
    str
    """
    value = float(value)
    text = f"{value:g}"
    return text if float(text) == value else repr(value)


@dataclass(frozen=True)
class GridPoint:
    """One (alpha, n_neighbors, gamma) of a sweep.

    ``gamma`` is "auto" (the learned per-sample gamma, the default) or a float (one
    gamma for every sample, :meth:`LSWMKC` ``gamma``). ``run_name`` (not compared) is the run directory's name when the point was read
    from disk (:func:`load_sweep`); a directory of an older version may name it
    differently from :attr:`name`'s rule.
    """

    alpha: float
    n_neighbors: int
    gamma: float | str = "auto"
    run_name: str | None = field(default=None, compare=False, repr=False)

    @property
    def name(self):
        """Directory name, e.g. ``alpha=8_c=5`` (``alpha=8_c=5_gamma=0.5`` for a scalar
        gamma): unique for distinct values (:func:`exact_text`)."""
        if self.run_name:
            return self.run_name
        tail = "" if self.gamma == "auto" else f"_gamma={exact_text(self.gamma)}"
        return f"alpha={exact_text(self.alpha)}_c={self.n_neighbors}{tail}"


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
    if device != "cuda" or params.get("snapshot_iterations") or params.get("eig_precision", "float64") != "float64":
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


def _labels_file(k):
    """Name of the predicted labels of k clusters in a run of a k grid."""
    return f"labels_k={int(k)}.csv"


def _write_point(runs_dir, point, output):
    report, labels, affinity, factor, by_k, snapshots = output
    target = runs_dir / point.name
    if os.path.lexists(target):  # a name of an older version's rounding (alpha=0.333333 for 1/3)
        raise with_message(
            FileExistsError, "{} already holds a run of another alpha than {!r} (its name was rounded by an older "
            "version of lswmkc); use another output directory, or {} to replace it", target, point.alpha, Param("overwrite", True),
        )
    extra = {_labels_file(k): labels_csv(y) for k, y in by_k.items()}
    write_fit_output(target, report, labels, affinity=affinity, kstar_factor=factor, extra_files=extra,
                     snapshots=snapshots)


def _rows(point, report):
    """The summary rows of one run: one per k (one row without a k grid)."""
    per_k = report.get("by_n_clusters") or {str(report["params"]["n_clusters"]): report}
    rows = []
    for k, entry in sorted(per_k.items(), key=lambda kv: int(kv[0])):
        row = {
            "alpha": point.alpha,
            "n_neighbors": point.n_neighbors,
            "n_iter": report["n_iter"],
            "seconds": report["iteration_seconds_total"],
        }
        for protocol in ("honest", "paper"):
            for name in METRICS:
                row[f"{name}_{protocol}"] = entry.get("metrics", {}).get(protocol, {}).get(name)
        row[SELECTION_CRITERION] = (entry.get("label_free") or {}).get(SELECTION_CRITERION)
        row["n_clusters"] = int(k)  # last: the columns before k grids keep their places
        row["gamma"] = point.gamma
        for vote in VOTES:  # the other label-free scores, after the columns above
            row[vote] = (entry.get("label_free") or {}).get(vote)
        if entry.get("repeats"):  # mean and std over the k-means seeds (repeats > 1), after every other column
            row.update(repeat_summary_columns(entry["repeats"]))
        rows.append(row)
    return rows


def _same_point(row, chosen):
    return (row["alpha"], row["n_neighbors"], row.get("n_clusters"), row.get("gamma", "auto")) == (
        chosen["alpha"], chosen["n_neighbors"], chosen.get("n_clusters"), chosen.get("gamma", "auto"))


def summary_table(rows: list[dict], selected: dict | None = None) -> str:
    """Aligned text table of sweep rows (alpha, c, k when several, iterations, seconds,
    metrics, the label-free score); the row of ``selected`` (a summary's ``"selected"``)
    is marked ``*``, its near-ties (``selected["near_ties"]``) ``~``, and the consensus
    over them (``selected["consensus"]``) ``c`` when it is not the selected row."""
    k_grid = len({r.get("n_clusters") for r in rows}) > 1
    g_grid = len({str(r.get("gamma", "auto")) for r in rows}) > 1
    cols = ["alpha", "n_neighbors"] + (["n_clusters"] if k_grid else []) + (["gamma"] if g_grid else [])
    cols += ["n_iter", "seconds"]
    cols += [f"{k}_{p}" for p in ("honest", "paper") for k in METRICS]
    cols.append(SELECTION_CRITERION)
    head = ["alpha", "c"] + (["k"] if k_grid else []) + (["gamma"] if g_grid else []) + ["iter", "seconds"]
    head += [f"{k}/{p[0]}" for p in ("honest", "paper") for k in METRICS]
    head.append("silhouette")
    lines = ["  " + "  ".join(f"{h:>9}" for h in head)]
    for r in rows:
        lines.append(_mark(r, selected) + " " + "  ".join(_cell(c, r.get(c)) for c in cols))
    if selected:
        what = "alpha and k" if k_grid else "alpha"
        lines.append(f"* selected without labels ({what}): the largest {SELECTION_CRITERION} (silhouette of the "
                     "partition on the average base kernel)")
        if len(selected.get("near_ties") or []) > 1:
            lines.append("~ near-tie: within one standard error of the selected score (paired over samples)")
        if selected.get("consensus") and not _same_point(selected["consensus"], selected):
            lines.append("c consensus: the near-tie whose partition agrees best with the others' (mean ARI)")
    return "\n".join(lines)


def _mark(row, selected):
    if not selected:
        return " "
    if _same_point(row, selected):
        return "*"
    if selected.get("consensus") and _same_point(row, selected["consensus"]):
        return "c"
    return "~" if any(_same_point(row, t) for t in selected.get("near_ties") or []) else " "


def _cell(c, v):
    if v is None:
        return f"{'-':>9}"
    if c in ("n_neighbors", "n_iter", "n_clusters"):
        return f"{int(v):>9d}"
    if c == "alpha" or (c == "gamma" and v != "auto"):
        return f"{exact_text(v):>9}"
    if c == "gamma":
        return f"{v:>9}"
    if c == "seconds":
        return f"{v:>9.2f}"
    return f"{v:>9.4f}"


def selection_line(chosen: dict) -> str:
    """The one-line summary of a sweep's choice, how sure it is, and the votes.

    Parameters
    ----------
    chosen : dict
        A summary's ``"selected"`` (:func:`sweep`).

    Returns
    -------
    str
        ``selected without labels: alpha=A c=C k=K (criterion score); clear`` or
        ``...; near-tie among alpha=A k=K, ...`` with the consensus point, the votes
        that disagree, and with a k grid the k of prediction strength (or "k not
        determined"); with labels, the choice's honest ACC and regret.
    """
    gamma = "" if chosen.get("gamma", "auto") == "auto" else f" gamma={exact_text(chosen['gamma'])}"
    line = (f"selected without labels: alpha={exact_text(chosen['alpha'])} c={chosen['n_neighbors']} "
            f"k={chosen['n_clusters']}{gamma} ({chosen['criterion']} {chosen['score']:.4f})")
    ties = chosen.get("near_ties") or []
    if len(ties) > 1:
        line += "; near-tie among " + ", ".join(_short(t) for t in ties)
        if chosen.get("consensus"):
            line += f" (consensus {_short(chosen['consensus'])})"
    elif ties:
        line += "; clear"
    against = [f"{name} votes {_short(v)}" for name, v in (chosen.get("votes") or {}).items() if not v["agrees"]]
    if against:
        line += "; disagreeing: " + ", ".join(against)
    k_choice = chosen.get("k_choice")
    if k_choice:
        k = k_choice["n_clusters"]
        if k is None:
            line += f"; k not determined (prediction strength below {k_choice['threshold']} at every k >= 2): give k"
        else:
            line += f"; prediction strength {'agrees on' if k == chosen['n_clusters'] else 'says'} k={k}"
    if chosen.get("regret_honest_ACC_points") is not None:
        line += (f"; with your labels: honest ACC {chosen['ACC_honest']:.4f}, "
                 f"{chosen['regret_honest_ACC_points']:.2f} points below the grid's best at this k")
        if chosen.get("n_clusters_scores"):
            line += (f" ({chosen['regret_honest_ACC_points_all_k']:.2f} below the best of every k; "
                     f"the labels have {chosen['n_clusters_true']} classes)")
    return line


def _short(point):
    return f"alpha={exact_text(point['alpha'])} k={point['n_clusters']}"


def _best(rows, key):
    scored = [r for r in rows if r.get(key) is not None]
    if not scored:
        return None
    r = max(scored, key=lambda r: (r[key], -r["alpha"]))
    return {"alpha": r["alpha"], "n_neighbors": r["n_neighbors"], "n_clusters": r.get("n_clusters"),
            "gamma": r.get("gamma", "auto"), key: r[key]}


def _point_of(row):
    return {"alpha": row["alpha"], "n_neighbors": row["n_neighbors"], "n_clusters": row["n_clusters"],
            "gamma": row.get("gamma", "auto")}


def _key(row):
    """A partition's identity: (alpha, n_neighbors, gamma, k)."""
    return float(row["alpha"]), int(row["n_neighbors"]), str(row.get("gamma", "auto")), int(row["n_clusters"])


def _order(r, criterion=SELECTION_CRITERION):
    """Sort key of the choice: the largest score; ties to the smaller c, alpha, k."""
    return r[criterion], -r["n_neighbors"], -r["alpha"], -r["n_clusters"]


def _selected(rows, n_clusters_true=None, evidence=None):
    """The grid point chosen without labels: the largest :data:`SELECTION_CRITERION`.

    Reads only the label-free scores of each row (never a metric); ties go to the
    smaller n_neighbors, then the smaller alpha, then the smaller k. With a k grid the
    choice covers k too, and ``n_clusters_scores`` gives the evidence for it: the best
    score at each k. With metrics in the rows, the honest ACC there and its regret
    against the grid's best (points of ACC; with a k grid, against the best at the
    chosen k and over the whole grid) are added, so that users see how far to trust
    the choice on their kind of data; ``n_clusters_true`` (the number of distinct
    labels, when there are labels) is added for comparison, never used.

    With ``evidence`` (:func:`_evidence`: the per-sample silhouettes and files of
    every scored partition), also how sure the choice is (:func:`_confidence`:
    ``near_ties``, ``confidence``, ``votes``) and, with a k grid, the k that
    prediction strength finds (:func:`_k_choice`: ``k_choice``).
    """
    scored = [r for r in rows if r.get(SELECTION_CRITERION) is not None]
    if not scored:
        return None
    best = max(scored, key=_order)
    ks = sorted({r["n_clusters"] for r in scored})
    chosen = {
        **_point_of(best),
        "criterion": SELECTION_CRITERION,
        "score": best[SELECTION_CRITERION],
        "scores": [{**_point_of(r), "score": r[SELECTION_CRITERION]} for r in scored],
    }
    if len(ks) > 1:
        chosen["n_clusters_scores"] = {
            str(k): max(r[SELECTION_CRITERION] for r in scored if r["n_clusters"] == k) for k in ks
        }
    if evidence:
        chosen.update(_confidence(scored, best, evidence))
        if len(ks) > 1:
            chosen["k_choice"] = _k_choice(scored, evidence)
    same_k = [r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None and r["n_clusters"] == best["n_clusters"]]
    if same_k and best.get("ACC_honest") is not None:
        chosen["ACC_honest"] = best["ACC_honest"]
        chosen["regret_honest_ACC_points"] = round(100.0 * (max(same_k) - best["ACC_honest"]), 4)
        if len(ks) > 1:
            overall = max(r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None)
            chosen["regret_honest_ACC_points_all_k"] = round(100.0 * (overall - best["ACC_honest"]), 4)
    if n_clusters_true is not None:
        chosen["n_clusters_true"] = int(n_clusters_true)
    return chosen


def _confidence(scored, best, evidence):
    """How sure the choice is: near-ties (paired one-standard-error rule), the votes.

    ``near_ties``: every point that :func:`lswmkc_dask.selection.near_ties` cannot tell
    from the best (the best first, then by score), with its score, its difference from
    the best and that difference's standard error; ``confidence``: "clear" (the best
    alone) or "near-tie"; ``votes``: the point each of
    :data:`lswmkc_dask.selection.VOTES` would choose and whether it is among the
    near-ties (``agrees``). Points without per-sample silhouettes (a run scored by an
    older version) are left out of the comparison and counted in ``not_compared``.
    """
    have = [r for r in scored if _key(r) in evidence]
    out: dict[str, Any] = {}
    if best in have and len(have) > 1:
        ties = near_ties(np.stack([evidence[_key(r)][2] for r in have]), have.index(best))
        tied = sorted((i for i in range(len(have)) if ties["tied"][i]), key=lambda i: _order(have[i]), reverse=True)
        out["near_ties"] = [{**_point_of(have[i]), "score": have[i][SELECTION_CRITERION],
                             "difference": float(ties["difference"][i]),
                             "standard_error": float(ties["standard_error"][i])} for i in tied]
        out["tie_rule"] = ("paired one-standard-error rule: a point is a near-tie when the best's mean per-sample "
                           "silhouette exceeds its own by at most the standard error of the paired differences")
    else:
        out["near_ties"] = [{**_point_of(best), "score": best[SELECTION_CRITERION]}]
    out["confidence"] = "clear" if len(out["near_ties"]) == 1 else "near-tie"
    if len(have) < len(scored):
        out["not_compared"] = len(scored) - len(have)
    tied_keys = {_key(t) for t in out["near_ties"]}
    votes = {}
    for crit in VOTES:
        cand = [r for r in scored if r.get(crit) is not None]
        if cand:
            pick = max(cand, key=lambda r: _order(r, crit))
            votes[crit] = {**_point_of(pick), "score": pick[crit], "agrees": _key(pick) in tied_keys}
    out["votes"] = votes
    return out


def _k_choice(scored, evidence):
    """The number of clusters by prediction strength (Tibshirani & Walther 2005).

    For every k of the grid, the point of largest :data:`SELECTION_CRITERION` at that
    k; the package's spectral embedding of its K* at k
    (:func:`lswmkc_dask.postprocess.factor_embeddings` of the run's
    ``kstar_factor.npy``), and :func:`lswmkc_dask.selection.prediction_strength` of
    k-means on it (seeded by the sweep's ``random_state``). The k chosen is the largest
    with strength >= :data:`lswmkc_dask.selection.PS_THRESHOLD`, or None: "k not
    determined".
    """
    strengths, points = {}, {}
    by_run: dict[Path, list[tuple[int, dict]]] = {}
    for k in sorted({r["n_clusters"] for r in scored}):
        at_k = max((r for r in scored if r["n_clusters"] == k), key=_order)
        run = evidence.get(_key(at_k))
        if run is not None and (run[0] / "kstar_factor.npy").is_file():
            by_run.setdefault(run[0], []).append((k, at_k))
    for run_dir, wanted in by_run.items():  # one SVD of each run's factor for all its k
        embeddings = factor_embeddings(np.load(run_dir / "kstar_factor.npy"), [k for k, _ in wanted])
        for k, at_k in wanted:
            if embeddings[k].shape[0] >= 2 * k:
                strengths[str(k)] = prediction_strength(embeddings[k], k, random_state=evidence.random_state)
                points[str(k)] = _point_of(at_k)
    strengths = dict(sorted(strengths.items(), key=lambda kv: int(kv[0])))
    k = choose_n_clusters({int(key): v for key, v in strengths.items()})
    return {"criterion": "prediction_strength", "threshold": PS_THRESHOLD, "strengths": strengths,
            "n_clusters": k, "point": points.get(str(k)) if k is not None else None,
            "how": ("the largest k whose prediction strength (Tibshirani & Walther 2005) at its best-scored alpha "
                    f"reaches {PS_THRESHOLD}" if k is not None else
                    f"k not determined: no k >= 2 reaches prediction strength {PS_THRESHOLD}; give k")}


def _consensus(summary_selected, rows, evidence):
    """The medoid of the near-ties' partitions by ARI (:func:`lswmkc_dask.selection.medoid_partition`).

    A grid point like any other: its alpha, c, k, gamma, run directory and labels file,
    its score, and each near-tie's mean ARI with the others; with labels in the rows,
    its honest ACC and regret. None without near-ties' partitions on disk.
    """
    ties = summary_selected.get("near_ties") or []
    found = [evidence.get(_key(t)) for t in ties]
    if not ties or any(f is None for f in found):
        return None
    index, agreement = medoid_partition([_predicted_labels(run, name) for run, name, _ in found])
    t = ties[index]
    out = {**_point_of(t), "score": t["score"], "run": found[index][0].name, "labels": found[index][1],
           "of": len(ties), "mean_ari": [float(a) for a in agreement],
           "how": "the near-tie whose partition agrees best (mean ARI) with the other near-ties' partitions"}
    row: dict[str, Any] = next((r for r in rows if _key(r) == _key(t)), {})
    if row.get("ACC_honest") is not None:
        same_k = [r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None and r["n_clusters"] == t["n_clusters"]]
        out["ACC_honest"] = row["ACC_honest"]
        out["regret_honest_ACC_points"] = round(100.0 * (max(same_k) - row["ACC_honest"]), 4)
    return out


class _Evidence(dict):
    """(alpha, c, gamma, k) -> (run directory, labels file name, per-sample silhouettes), and the seed."""

    random_state: int = 0


def _evidence(out):
    """What the summary reads beside the rows: every scored partition's per-sample
    silhouettes (:data:`SAMPLES_FILE`) and where its labels and factor are."""
    found = _Evidence()
    config_path = out / "sweep.json"
    if config_path.is_file():
        seed = json.loads(config_path.read_text()).get("random_state")
        found.random_state = int(seed) if isinstance(seed, int) else 0
    for point, report in load_sweep(out)[1].items():
        run = out / "runs" / point.name
        if not (run / SAMPLES_FILE).is_file():
            continue
        samples = np.load(run / SAMPLES_FILE)
        ks = _run_ks(report)
        if samples.shape[0] != len(ks):
            continue
        for k, values in zip(ks, samples):
            kk = int(report["params"]["n_clusters"]) if k is None else int(k)
            row: dict[str, Any] = {"alpha": point.alpha, "n_neighbors": point.n_neighbors, "gamma": point.gamma,
                                   "n_clusters": kk}
            found[_key(row)] = (run, "labels.csv" if k is None else _labels_file(k), values)
    return found


def _gamma_key(gamma):
    return 0.0 if gamma == "auto" else float(gamma)


def _write_summary(out, rows, n_clusters_true=None):
    rows = sorted(rows, key=lambda r: (str(r.get("gamma", "auto")) != "auto", _gamma_key(r.get("gamma", "auto")),
                                       r["n_neighbors"], r["alpha"], r["n_clusters"]))
    evidence = _evidence(Path(out))
    selected = _selected(rows, n_clusters_true, evidence)
    if selected and evidence:
        selected["consensus"] = _consensus(selected, rows, evidence)
    summary = {
        "rows": rows,
        "selected": selected,
        "best_by_honest_ACC": _best(rows, "ACC_honest"),
        "best_by_paper_ACC": _best(rows, "ACC_paper"),
    }
    with atomic_path(out / "summary.json", overwrite=True) as tmp:
        tmp.write_text(json.dumps(to_json_ready(summary), indent=2) + "\n")
    with atomic_path(out / "summary.csv", overwrite=True) as tmp:
        with open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
            w.writeheader()
            w.writerows(rows)
    return summary


def selected_model(result: dict, n_clusters: int | None = None, **params: Any) -> Any:
    """An unfitted :class:`LSWMKC` with the grid point a sweep selected without labels.

    Parameters
    ----------
    result : dict, str or Path
        What :func:`sweep` returned, or a sweep directory (its ``summary.json``).
    n_clusters : int, optional
        A k of the sweep's k grid: the grid point selected without labels among those
        of this k (the largest :data:`SELECTION_CRITERION` at k; ties as the sweep's
        own choice). Default: the sweep's choice over every k.
    **params
        Further :class:`LSWMKC` parameters (``max_iter``, ``client``, ...); not
        ``alpha``, ``n_neighbors`` or ``gamma``, which the sweep chose.

    Returns
    -------
    LSWMKC
        ``alpha``, ``n_neighbors``, ``gamma`` and ``n_clusters`` of ``result["selected"]``
        (the largest :data:`SELECTION_CRITERION`), or of the best point at
        ``n_clusters``; call ``.fit(X)`` on the same data.

    Raises
    ------
    FileNotFoundError
        A directory without ``summary.json``.
    ValueError
        The sweep selected nothing (no finished grid point); ``n_clusters`` is not a
        k of the sweep (the message lists its k values); ``alpha``, ``n_neighbors``
        or ``gamma`` given in ``params`` (:class:`~lswmkc_dask.errors.ParameterError`).
    """
    if not isinstance(result, dict):
        path = Path(result) / "summary.json"
        if not path.is_file():
            raise FileNotFoundError(f"{result} is not a finished sweep directory (no summary.json)")
        result = json.loads(path.read_text())
    chosen = result.get("selected")
    if not chosen:
        raise ValueError("the sweep selected no grid point (none finished); run or resume it first")
    fixed = sorted(set(params) & {"alpha", "n_neighbors", "gamma"})
    if fixed:
        raise ParameterError(
            "selected_model() takes alpha, n_neighbors and gamma from the sweep's choice, not from its arguments "
            "(got {}); for another grid point build LSWMKC(alpha=..., n_neighbors=..., n_clusters=...) directly",
            ", ".join(fixed),
        )
    if n_clusters is not None:
        scored = [r for r in result.get("rows") or [] if r.get(SELECTION_CRITERION) is not None]
        ks = sorted({int(r["n_clusters"]) for r in scored})
        at_k = [r for r in scored if r["n_clusters"] == n_clusters and not isinstance(n_clusters, bool)]
        if not at_k:
            raise ParameterError(
                "{} = {!r} is not a k of this sweep: it selected among k = {}; pass one of them, or sweep again "
                "with a k grid that holds it (sweep(..., n_clusters=[...]), lswmkc sweep --n-clusters K ...)",
                Param("n_clusters"), n_clusters, ", ".join(map(str, ks)) or "(none scored)",
            )
        chosen = _selected(at_k)
    return LSWMKC(n_clusters=chosen.get("n_clusters"), alpha=chosen["alpha"], n_neighbors=chosen["n_neighbors"],
                  gamma=chosen.get("gamma", "auto"), **params)


def _predicted_labels(run_dir, name="labels.csv"):
    """The predicted labels of a finished grid point (``labels.csv``, or a k grid's
    ``labels_k=K.csv``), shape (n,)."""
    with open(run_dir / name, newline="") as fh:
        body = list(csv.reader(fh))[1:]
    return np.asarray([int(float(r[1])) for r in body if r])


def _scores_task(location, start, stop, partitions):
    """Worker side of :func:`label_free_evidence`: one row block of the store."""
    return partition_scores_block(read_store_rows(location, start, stop), start, partitions)


def label_free_evidence(
    store: KernelStore,
    partitions: Any,
    client: Any = None,
    block_rows: int | None = None,
) -> dict[str, np.ndarray]:
    """Every label-free score of P partitions, one pass over the kernel store.

    Row block by row block (:func:`lswmkc_dask.selection.partition_scores_block`): on
    the workers of ``client`` for a store on disk (each task reads its rows and returns
    P x b per-sample silhouettes and a few per-cluster sums), else in this process; no
    n x n array anywhere. Combined by
    :func:`lswmkc_dask.selection.finish_partition_scores`.

    Parameters
    ----------
    store : KernelStore
    partitions : array_like of shape (P, n)
        Predicted labels (never the ground truth).
    client : distributed.Client, optional
    block_rows : int, optional
        Rows per block (default the store's chunk rows).

    Returns
    -------
    dict
        ``"samples"`` (P, n) per-sample silhouettes; :data:`SELECTION_CRITERION` (P,)
        their mean; each of :data:`lswmkc_dask.selection.VOTES` (P,).

    Raises
    ------
    KernelInputError
        A damaged store (as every read).
    """
    partitions = np.atleast_2d(np.asarray(partitions, dtype=np.int64))
    blocks = store.blocks(block_rows)
    if client is None or store.in_memory:
        parts = [partition_scores_block(store.read_rows(a, b), a, partitions) for a, b in blocks]
    else:
        shared = client.submit(np.asarray, partitions, pure=False)  # once, in the graph: recomputable
        parts = client.gather([client.submit(_scores_task, store.location, a, b, shared, pure=False)
                               for a, b in blocks])
    return finish_partition_scores(parts, partitions)


def label_free_scores(
    store: KernelStore,
    partitions: Any,
    client: Any = None,
    block_rows: int | None = None,
) -> np.ndarray:
    """:data:`SELECTION_CRITERION` of P partitions, one pass over the kernel store.

    The silhouette of each partition with the distances of the average preprocessed
    base kernel: the mean of :func:`label_free_evidence`'s per-sample silhouettes.

    Parameters
    ----------
    store : KernelStore
    partitions : array_like of shape (P, n)
        Predicted labels (never the ground truth).
    client : distributed.Client, optional
    block_rows : int, optional
        Rows per block (default the store's chunk rows).

    Returns
    -------
    ndarray of shape (P,)
        In [-1, 1]; larger is better.

    Raises
    ------
    KernelInputError
        A damaged store (as every read).
    """
    return label_free_evidence(store, partitions, client, block_rows)[SELECTION_CRITERION]


#: Per-sample silhouettes of a run's partitions (one row per k, in ascending k).
SAMPLES_FILE = "silhouette_samples.npy"


def _run_ks(report):
    """The k of a run's partitions as its report's text keys (ascending k), or [None] for a run of one k."""
    per_k = report.get("by_n_clusters")
    return sorted(per_k, key=int) if per_k else [None]


def _unscored(run_dir, report):
    """The partitions of one run to score: (their k, the labels); all of them or none.

    A k grid's partitions are its ``labels_k=K.csv`` (k as the report's text key);
    a run of one k has one, ``labels.csv`` (k None). A run is scored again as a whole
    when a partition lacks a score or a vote, or the run lacks :data:`SAMPLES_FILE`."""
    ks = _run_ks(report)
    entries = [report if k is None else report["by_n_clusters"][k] for k in ks]
    wanted = (SELECTION_CRITERION, *VOTES)
    if (run_dir / SAMPLES_FILE).is_file() and all(c in (e.get("label_free") or {}) for e in entries for c in wanted):
        return [], []
    return ks, [_predicted_labels(run_dir) if k is None else _predicted_labels(run_dir, _labels_file(k)) for k in ks]


def _score_runs(out, store, client, block_rows):
    """Score every finished run of ``out`` that has no label-free score yet; written into
    its ``report.json`` (``label_free``: the score and the votes; with a k grid, under
    each k of ``by_n_clusters``, and the run then takes its chosen k:
    :func:`_adopt_run_k`) and :data:`SAMPLES_FILE` (per-sample silhouettes, one row
    per k). Returns the reports rewritten, by run name."""
    reports = {}
    pending = []  # (report path, the k of each partition, the partitions)
    for rep_path in sorted((out / "runs").glob("*/report.json")):
        reports[rep_path] = json.loads(rep_path.read_text())
        ks, parts = _unscored(rep_path.parent, reports[rep_path])
        if ks:
            pending.append((rep_path, ks, parts))
    if pending:
        found = label_free_evidence(store, np.stack([y for *_, parts in pending for y in parts]), client, block_rows)
        at = 0
        for rep_path, ks, _ in pending:
            with atomic_path(rep_path.parent / SAMPLES_FILE, overwrite=True) as tmp, open(tmp, "wb") as fh:
                np.save(fh, found["samples"][at:at + len(ks)])
            for k in ks:
                entry = reports[rep_path] if k is None else reports[rep_path]["by_n_clusters"][k]
                entry["label_free"] = {**(entry.get("label_free") or {}),
                                       **{c: float(found[c][at]) for c in (SELECTION_CRITERION, *VOTES)}}
                at += 1
            adopted = (reports[rep_path].get(RUN_K_KEY) or {}).get("n_clusters")
            if adopted is not None:  # scored again after it took its k: its top level follows
                reports[rep_path]["label_free"] = reports[rep_path]["by_n_clusters"][str(adopted)]["label_free"]
    scored = {rep_path for rep_path, *_ in pending}
    updated = {}
    for rep_path, report in reports.items():
        # labels.csv (inside _adopt_run_k) before report.json: a run killed in between is
        # taken up again by the next call (its report records no chosen k yet)
        if _adopt_run_k(rep_path.parent, report) or rep_path in scored:
            with atomic_path(rep_path, overwrite=True) as tmp:
                tmp.write_text(json.dumps(report, indent=2) + "\n")
            updated[rep_path.parent.name] = report
    return updated


def run_n_clusters(report: dict) -> tuple[int | None, float | None]:
    """The k of a sweep run chosen without labels, and its score.

    Parameters
    ----------
    report : dict
        A run's ``report.json`` (``runs/alpha=A_c=C/report.json``).

    Returns
    -------
    (int or None, float or None)
        With a k grid (``by_n_clusters``): the k of the largest
        :data:`SELECTION_CRITERION` among the run's k (ties: the smaller k; the same
        rule as the sweep's ``"selected"``, so at the selected alpha it is the selected
        k) and that score; ``(None, None)`` while a k has no score yet (the sweep
        scores its partitions at its end). Without a k grid: the run's one k
        (``params.n_clusters``) and its score (None if not scored yet).
    """
    per_k = report.get("by_n_clusters")
    if not per_k:
        k = (report.get("params") or {}).get("n_clusters")
        return (None if k is None else int(k)), (report.get("label_free") or {}).get(SELECTION_CRITERION)
    found = {int(k): (e.get("label_free") or {}).get(SELECTION_CRITERION) for k, e in per_k.items()}
    if any(v is None for v in found.values()):
        return None, None
    scores = {k: float(v) for k, v in found.items() if v is not None}
    best = max(sorted(scores), key=scores.__getitem__)  # the first of equal scores: the smaller k
    return best, scores[best]


def _pending_k(ks):
    """``report[RUN_K_KEY]`` of a k-grid run written before its partitions are scored."""
    return {"n_clusters": None, "criterion": SELECTION_CRITERION,
            "how": f"not chosen yet: labels.csv and the top-level metrics are of k={min(ks)} until the sweep has "
                   f"scored every k of {sorted(ks)} without labels (at its end; resuming it finishes this)"}


def _adopt_run_k(run_dir, report):
    """Make a k-grid run's ``labels.csv`` and top-level report entries those of its chosen k.

    The k is :func:`run_n_clusters`'s; ``labels.csv`` becomes a copy of
    ``labels_k=K.csv`` (written first, atomically), and ``report`` (changed in place,
    written by the caller) gets that k's ``metrics``, ``label_free`` and ``repeats``,
    ``params.n_clusters = K`` (an :class:`LSWMKC` with these params gives these labels)
    and :data:`RUN_K_KEY` saying which k and why. Returns whether ``report`` changed;
    a run of one k, or one not fully scored, is left as it is.
    """
    k, score = run_n_clusters(report)
    if k is None or not report.get("by_n_clusters"):
        return False
    text = (run_dir / _labels_file(k)).read_text()
    if (run_dir / "labels.csv").read_text() != text:
        with atomic_path(run_dir / "labels.csv", overwrite=True) as tmp:
            tmp.write_text(text)
    if (report.get(RUN_K_KEY) or {}).get("n_clusters") == k:
        return False
    entry = report["by_n_clusters"][str(k)]
    for key in ("metrics", "label_free", "repeats"):
        if key in entry:
            report[key] = entry[key]
        else:
            report.pop(key, None)
    report["params"]["n_clusters"] = k
    ks = sorted(int(x) for x in report["by_n_clusters"])
    report[RUN_K_KEY] = {
        "n_clusters": k, "criterion": SELECTION_CRITERION, "score": score,
        "how": f"chosen without labels: the largest {SELECTION_CRITERION} of this run's k grid {ks} (ties: the "
               f"smaller k); labels.csv is {_labels_file(k)}, and metrics, label_free, repeats and "
               "params.n_clusters are of this k; by_n_clusters holds every k",
    }
    return True


def load_sweep(directory: str | os.PathLike[str]) -> tuple[dict, dict]:
    """Read a sweep directory.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    config : dict
        ``sweep.json``.
    runs : dict
        ``GridPoint -> report dict`` for every finished grid point; each point's
        ``name`` is its run directory's (``directory / "runs" / point.name``).

    Raises
    ------
    FileNotFoundError
        No ``sweep.json`` in ``directory``.
    """
    directory = Path(directory)
    cfg_path = directory / "sweep.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{directory} is not a sweep directory (no sweep.json)")
    config = json.loads(cfg_path.read_text())
    runs = {}
    for d in sorted((directory / "runs").glob("alpha=*_c=*")):
        rep = d / "report.json"
        if rep.exists():
            report = json.loads(rep.read_text())
            gamma = report["params"].get("gamma", "auto")
            point = GridPoint(float(report["params"]["alpha"]), int(report["params"]["n_neighbors"]),
                              gamma if gamma == "auto" else float(gamma))
            runs[GridPoint(point.alpha, point.n_neighbors, point.gamma,
                           run_name=None if d.name == point.name else d.name)] = report
    return config, runs


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
    check_params("sweep", locals())  # the parameter table's constraints, before any I/O
    if mode not in ("auto", "task", "blockwise"):
        raise ParameterError("{} must be 'auto', 'task' or 'blockwise', got {!r}", Param("mode"), mode)
    seeds = repeat_seeds(random_state, repeats)  # checks repeats (and random_state when repeats > 1)
    check_iterations(max_iter, min_iter)
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
    check_hyperparameters(n, ks, alphas, n_neighbors)
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
        with Where.of(client).session(stack) as c:
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

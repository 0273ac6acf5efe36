"""The label-free scoring of a sweep's runs: every partition scored in one pass over the kernels.

:func:`score_runs` scores the partitions of every written run at once
(:func:`label_free_evidence`, :func:`lswmkc_dask.grid.selection.partition_scores_block` row
block by row block) into each run's ``report.json`` (``label_free``) and model file (:data:`SILHOUETTES`);
a run of a k grid then takes the k of its largest score (:func:`run_n_clusters`). The
summary (:mod:`lswmkc_dask.grid.results`) reads these and lays them out.
"""

from __future__ import annotations

import csv
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..io import atomic_path, read_store_rows
from ..io.model_file import member_names
from ..io.results import read_json, read_text, report_problem
from ..io.run_arrays import SILHOUETTES, add_silhouettes
from .selection import VOTES, finish_partition_scores, partition_scores_block

if TYPE_CHECKING:
    from pathlib import Path

    from ..io.inputs import KernelStack

#: The label-free score by which a sweep selects its grid point (benchmarks/bench_selection.py).
SELECTION_CRITERION = "silhouette_avg_kernel"
#: The entry of a k-grid run's ``report.json`` that says which k its ``labels.csv``,
#: ``metrics``, ``label_free``, ``repeats`` and ``params.n_clusters`` are of, and why.
RUN_K_KEY = "n_clusters_selected"


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


def labels_file(k: int | str) -> str:
    """Name of the predicted labels of k clusters in a run of a k grid.

    Parameters
    ----------
    k : int or str
        The number of clusters (a report's text key is taken too).

    Returns
    -------
    str
        ``labels_k=K.csv``.
    """
    return f"labels_k={int(k)}.csv"


def predicted_labels(run_dir: Path, name: str = "labels.csv") -> np.ndarray:
    """The predicted labels of a finished grid point.

    Parameters
    ----------
    run_dir : Path
        The run directory (``runs/alpha=A_c=C``).
    name : str
        ``labels.csv``, or a k grid's ``labels_k=K.csv`` (:func:`labels_file`).

    Returns
    -------
    ndarray of shape (n,)
        The labels as integers (the file's second column).

    Raises
    ------
    FileNotFoundError
        No such labels file.
    """
    with open(run_dir / name, newline="") as fh:
        body = list(csv.reader(fh))[1:]
    return np.asarray([int(float(r[1])) for r in body if r])


def _scores_task(location, start, stop, partitions):
    """Worker side of :func:`label_free_evidence`: one row block of the store."""
    return partition_scores_block(read_store_rows(location, start, stop), start, partitions)


def label_free_evidence(
    store: KernelStack,
    partitions: Any,
    client: Any = None,
    block_rows: int | None = None,
) -> dict[str, np.ndarray]:
    """Every label-free score of P partitions, one pass over the kernel store.

    Row block by row block (:func:`lswmkc_dask.grid.selection.partition_scores_block`), on
    the workers of ``client`` for a store on disk, else in this process; no n x n array.

    Parameters
    ----------
    store : KernelStack
    partitions : array_like of shape (P, n)
        Predicted labels (never the ground truth).
    client : distributed.Client, optional
    block_rows : int, optional
        Rows per block (default the store's chunk rows).

    Returns
    -------
    dict
        ``"samples"`` (P, n) per-sample silhouettes; :data:`SELECTION_CRITERION` (P,)
        their mean; each of :data:`lswmkc_dask.grid.selection.VOTES` (P,).

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
    store: KernelStack,
    partitions: Any,
    client: Any = None,
    block_rows: int | None = None,
) -> np.ndarray:
    """:data:`SELECTION_CRITERION` of P partitions, one pass over the kernel store.

    Parameters
    ----------
    store, partitions, client, block_rows
        As :func:`label_free_evidence` (``partitions`` of shape (P, n)).

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


def run_ks(report: dict) -> list[Any]:
    """The k of a run's partitions.

    Parameters
    ----------
    report : dict
        A run's ``report.json``.

    Returns
    -------
    list
        A k grid's k as the report's text keys of ``by_n_clusters`` (ascending k), or
        ``[None]`` for a run of one k.
    """
    per_k = report.get("by_n_clusters")
    return sorted(per_k, key=int) if per_k else [None]


def _unscored(run_dir, report):
    """The partitions of one run to score, (their k, the labels): all of them (k None for ``labels.csv``
    of a run of one k) where one lacks a score or a vote, or the run's model file lacks :data:`SILHOUETTES`; else
    none.
    """
    ks = run_ks(report)
    entries = [report if k is None else report["by_n_clusters"][k] for k in ks]
    wanted = (SELECTION_CRITERION, *VOTES)
    if SILHOUETTES in member_names(run_dir) and all(c in (e.get("label_free") or {}) for e in entries for c in wanted):
        return [], []
    return ks, [predicted_labels(run_dir) if k is None else predicted_labels(run_dir, labels_file(k)) for k in ks]


def score_runs(out: Path, store: KernelStack, client: Any, block_rows: int | None) -> dict[str, dict]:
    """Score every finished run of a sweep directory that has no label-free score yet.

    In one pass (:func:`label_free_evidence`): each run's ``report.json`` gets ``label_free``
    (under each k of a k grid's ``by_n_clusters``; the run then takes its chosen k,
    :func:`_adopt_run_k`) and its model file the per-sample silhouettes :data:`SILHOUETTES` (one row per k),
    each replaced atomically.

    Parameters
    ----------
    out : Path
        The sweep directory (its ``runs/*/report.json``).
    store : KernelStack
        The sweep's kernels.
    client : distributed.Client or None
        Where the store's row blocks are scored (None: this process).
    block_rows : int or None
        Rows per block (default the store's chunk rows).

    Returns
    -------
    dict
        The reports rewritten, by run name.

    Raises
    ------
    KernelInputError
        A damaged store (as every read).
    """
    reports = {}
    pending = []  # (report path, the k of each partition, the partitions)
    for rep_path in sorted((out / "runs").glob("*/report.json")):
        reports[rep_path] = read_json(rep_path, report_problem)
        ks, parts = _unscored(rep_path.parent, reports[rep_path])
        if ks:
            pending.append((rep_path, ks, parts))
    if pending:
        found = label_free_evidence(store, np.stack([y for *_, parts in pending for y in parts]), client, block_rows)
        at = 0
        for rep_path, ks, _ in pending:
            add_silhouettes(rep_path.parent, found["samples"][at:at + len(ks)])
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
        With a k grid (``by_n_clusters``): the k of the largest :data:`SELECTION_CRITERION`
        among the run's k (ties: the smaller k, as the sweep's ``"selected"``) and that score;
        ``(None, None)`` while a k has no score yet. Without a k grid: the run's one k
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


def pending_k(ks: list[int]) -> dict:
    """``report[RUN_K_KEY]`` of a k-grid run written before its partitions are scored.

    Parameters
    ----------
    ks : list of int
        The run's k grid.

    Returns
    -------
    dict
        ``n_clusters`` None, the criterion, and how the k will be chosen.
    """
    return {"n_clusters": None, "criterion": SELECTION_CRITERION,
            "how": f"not chosen yet: labels.csv and the top-level metrics are of k={min(ks)} until the sweep has "
                   f"scored every k of {sorted(ks)} without labels (at its end; resuming it finishes this)"}


def _adopt_run_k(run_dir, report):
    """Make a k-grid run's ``labels.csv`` (first, atomically) and ``report`` (in place: ``metrics``,
    ``label_free``, ``repeats``, ``params.n_clusters``, :data:`RUN_K_KEY`) those of its
    :func:`run_n_clusters` k; whether ``report`` changed.
    """
    k, score = run_n_clusters(report)
    if k is None or not report.get("by_n_clusters"):
        return False
    text = read_text(run_dir / labels_file(k))
    if read_text(run_dir / "labels.csv") != text:
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
               f"smaller k); labels.csv is {labels_file(k)}, and metrics, label_free, repeats and "
               "params.n_clusters are of this k; by_n_clusters holds every k",
    }
    return True

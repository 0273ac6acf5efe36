"""One fit's files: its report (JSON), labels (CSV) and model file (every array), written atomically."""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import Param, SnapshotWarning, warn_at_caller, with_message
from ..io import atomic_path
from ..io.model_file import MODEL_FILE, write_model
from ..io.output import utc_now
from ..records import LSWMKCResult
from .metrics import METRICS, NMI_NORMALIZATION, protocol_metrics


def to_json_ready(v: Any) -> Any:
    """``v`` with NumPy scalars/arrays as Python numbers/lists and NaN/Inf as None."""
    if isinstance(v, dict):
        return {k: to_json_ready(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [to_json_ready(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return None if not math.isfinite(v) else v
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


#: What the two evaluation protocols measure (docs/algorithm.md section 3); in every report.
PROTOCOL_DESCRIPTIONS = {
    "honest": "labels_: k-means run of lowest inertia over n_init random starts",
    "paper": "each metric the maximum over n_init single-start k-means runs (the reference code's protocol; optimistic)",
}


def _summary(values):
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return None
    return {"min": np.min(v), "median": np.median(v), "max": np.max(v), "mean": np.mean(v)}


def fit_report(result: LSWMKCResult, params: dict, labels_true: Any = None, extra: dict | None = None) -> dict:
    """A JSON-ready report of one LSWMKC fit, from its record.

    Parameters
    ----------
    result : lswmkc_dask.records.LSWMKCResult
        The fit (``LSWMKC.result_``, or a sweep's grid point).
    params : dict
        The parameters of :class:`lswmkc_dask.LSWMKC` it was fitted with (``get_params()``;
        ``client`` and ``verbose`` are left out of the report).
    labels_true : array_like of shape (n,), optional
        When given, the metrics under both protocols are included.
    extra : dict, optional
        Merged into the report (data source, where it ran, ``wall_seconds_total``).

    Returns
    -------
    dict
        ``lswmkc_dask_version``, ``created_utc`` (ISO 8601, ``...Z``), ``python``,
        ``params`` (without client and verbose), ``n_samples``, ``n_kernels``, ``n_iter``,
        ``converged``, ``iteration_seconds_total`` (wall seconds from the first
        iteration's start to the stop rule) and ``seconds_per_iteration``,
        ``kernel_weights`` (of ``kernel_names``), ``objective`` and ``kstar_change`` per
        iteration, ``gamma`` (min, median, max, mean of the per-sample gamma), ``affinity_nnz``,
        ``kstar_rank``, ``eig_device`` (:func:`device_record`), ``protocols`` (what each
        protocol measures); with ``labels_true`` the ``metrics`` under both protocols and
        ``nmi_normalization`` (:data:`~lswmkc_dask.report.metrics.NMI_NORMALIZATION`); with
        ``snapshot_iterations`` ``snapshots`` (:func:`snapshot_record`).
    """
    params = {k: v for k, v in params.items() if k not in ("client", "verbose")}
    seconds = float(result.fit_seconds)
    rep = {
        "method": "LSWMKC (Li et al., IEEE TNNLS)",
        "lswmkc_dask_version": __version__,
        "created_utc": utc_now(),
        "python": platform.python_version(),
        "params": params,
        "n_samples": int(result.labels.shape[0]),
        "n_kernels": int(result.kernel_weights.shape[0]),
        "n_iter": result.n_iter,
        "converged": result.converged,
        "iteration_seconds_total": seconds,
        "seconds_per_iteration": seconds / max(result.n_iter, 1),
        "kernel_weights": result.kernel_weights,
        "kernel_names": list(result.kernel_names) or None,
        "objective": result.objective,
        "kstar_change": result.kstar_change,
        "gamma": _summary(result.gamma),
        "affinity_nnz": int(result.affinity.nnz),
        "kstar_rank": int(result.kstar_factor.shape[1]),
        "eig_drivers": [str(d) for d in result.eig_drivers],
        "eig_device": device_record(result, params.get("eig_device", "cpu")),
        "protocols": {k: v.replace("n_init", f"n_init={params['n_init']}") for k, v in PROTOCOL_DESCRIPTIONS.items()},
    }
    snapshots = snapshot_record(params.get("snapshot_iterations"), result.snapshots)
    if snapshots is not None:
        rep["snapshots"] = snapshots
    if labels_true is not None:
        rep["metrics"] = protocol_metrics(labels_true, result.labels, result.embedding, result.n_clusters,
                                          params["n_init"], params["random_state"])
        rep["nmi_normalization"] = dict(NMI_NORMALIZATION)
    if extra:
        rep.update(extra)
    return to_json_ready(rep)


def device_record(result: LSWMKCResult, requested: str = "cpu") -> dict:
    """Where the gathered step (the eigendecomposition of S) of a fit ran.

    Parameters
    ----------
    result : lswmkc_dask.records.LSWMKCResult
        The fit.
    requested : str
        ``eig_device`` as given.

    Returns
    -------
    dict
        ``requested`` (``eig_device`` as given), ``resolved`` (where the fit sent the
        step: "cpu" or "cuda"), ``per_iteration`` ("cpu" where the device fell back,
        :class:`lswmkc_dask.engine.gpu.DeviceFallbackWarning`), ``route`` ("resident":
        the whole iteration on the device, :mod:`lswmkc_dask.engine.device_fit`; or
        "blockwise") and, on the resident route, ``transfers``: bytes copied to and from
        the device (a sweep's one copy of the stack is outside every point's record).
    """
    drivers = [str(d) for d in result.eig_drivers]
    resolved = str(result.eig_device)  # resolved by the fit
    resident = bool(drivers) and all(d == "resident" for d in drivers)
    return {
        "requested": str(requested),
        "resolved": resolved,
        "per_iteration": ["cuda" if d == "cuda" or (d == "resident" and resolved == "cuda") else "cpu"
                          for d in drivers],
        "route": "resident" if resident else "blockwise",
        **({"transfers": dict(result.device_transfers)} if result.device_transfers else {}),
    }


def snapshot_record(requested: Any, snapshots: dict | None) -> dict | None:
    """The snapshot iterations a fit was asked for, kept, and not reached.

    Parameters
    ----------
    requested : sequence of int or None
        ``snapshot_iterations`` as asked (None: none).
    snapshots : dict or None
        :attr:`lswmkc_dask.records.LSWMKCResult.snapshots`: those kept.

    Returns
    -------
    dict or None
        ``{"requested": [...], "kept": [...], "not_reached": [...]}`` (sorted
        iterations; ``not_reached``: beyond the last iteration run), or None without
        ``snapshot_iterations``.
    """
    if requested is None:
        return None
    asked = sorted({int(t) for t in requested})
    kept = sorted(int(t) for t in (snapshots or {}))
    return {"requested": asked, "kept": kept, "not_reached": [t for t in asked if t not in kept]}


def warn_snapshots_not_reached(not_reached: Any, who: str, last: str, capped: bool) -> None:
    """Warn (:class:`~lswmkc_dask.errors.SnapshotWarning`) that snapshot iterations were not reached.

    Parameters
    ----------
    not_reached : sequence of int
        The requested iterations beyond the last one run (:func:`snapshot_record`).
    who : str
        What stopped early: ``"the fit"``, ``"3 of 11 runs"``.
    last : str
        The last iteration(s) run, e.g. ``"23"`` or ``"12 to 30"``.
    capped : bool
        Whether (some of) it stopped at ``max_iter`` (advice: raise it) rather than
        converged (advice: raise ``min_iter``).
    """
    stop, advice = ("at {}", "or raise {} to run longer") if capped else (
        "converged", "or raise {} (the stop rule is first tested after it) to run longer")
    args = [Param("snapshot_iterations"), ", ".join(str(int(t)) for t in not_reached), who, last,
            *([Param("max_iter")] if capped else []), "them" if len(not_reached) > 1 else "it",
            Param("max_iter" if capped else "min_iter")]
    warn_at_caller(with_message(
        SnapshotWarning,
        "{} {} not reached: {} stopped after {} iterations (" + stop + "), so nothing was kept for {} (a "
        "report.json lists them under snapshots.not_reached); ask for iterations the fit reaches, " + advice,
        *args,
    ), SnapshotWarning)


def labels_csv(labels: Any, header: str = "predicted_label") -> str:
    """Text of a ``sample,<header>`` CSV file: the header row, then one row per sample.

    Parameters
    ----------
    labels : array_like of shape (n,)
    header : str
        Name of the label column: ``"predicted_label"`` (default) for a fit's
        clusters, ``"true_label"`` for ground truth.
    """
    return f"sample,{header}\n" + "".join(f"{i},{v}\n" for i, v in enumerate(np.asarray(labels).tolist()))


def write_fit_output(
    directory: str | os.PathLike[str],
    report: dict,
    labels: Any,
    overwrite: bool = False,
    model: Any = None,
    extra_files: dict | None = None,
) -> Path:
    """Write one fit's files into ``directory`` atomically.

    ``report.json``, ``labels.csv`` (``sample,predicted_label``) and the marker
    ``.lswmkc-output`` (which lets ``overwrite`` replace it), and with ``model`` its
    ``model.safetensors``: the one file of the run's arrays (Z, W, the embedding, the
    snapshots; :mod:`lswmkc_dask.io.model_file`).

    Parameters
    ----------
    directory : str or Path
    report : dict
    labels : ndarray of shape (n,)
    overwrite : bool
    model : tuple of (mapping, mapping), optional
        The fitted attributes and the parameters of the model
        (:func:`~lswmkc_dask.io.model_file.model_contents`), to ``model.safetensors``
        (reloaded by ``LSWMKC.load(directory)``).
    extra_files : dict of str to str, optional
        Further text files by name (a sweep's ``labels_k=K.csv`` of a k grid).

    Returns
    -------
    pathlib.Path
        ``directory``.

    Raises
    ------
    FileExistsError
        ``directory`` exists and ``overwrite`` is False, or is a file or a directory
        lswmkc did not write (never replaced, :mod:`lswmkc_dask.io.output`).
    TypeError
        A parameter of ``model`` cannot be written as JSON (nothing is left behind).
    """
    with atomic_path(directory, overwrite=overwrite, kind="fit") as tmp:  # + the .lswmkc-output marker
        tmp.mkdir(parents=True)
        (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (tmp / "labels.csv").write_text(labels_csv(labels))
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text)
        if model is not None:
            write_model(tmp / MODEL_FILE, *model)
    return Path(directory)


def format_metrics(metrics: dict) -> str:
    """``ACC 0.6848  NMI 0.6553  Purity 0.6848  ARI 0.4400``: the four of ``METRICS`` (no ``NMI_arithmetic``)."""
    return "  ".join(f"{k} {metrics[k]:.4f}" for k in METRICS if k in metrics)

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
from ..io.ownership import utc_now
from .metrics import METRICS, NMI_NORMALIZATION


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


def fit_report(model: Any, labels_true: Any = None, extra: dict | None = None) -> dict:
    """A JSON-ready report of a fitted :class:`lswmkc_dask.LSWMKC`.

    Parameters
    ----------
    model : LSWMKC
        Fitted.
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
        iteration, ``gamma`` (min, median, max, mean of ``gamma_``), ``affinity_nnz``,
        ``kstar_rank``, ``eig_device`` (:func:`device_record`), ``protocols`` (what each
        protocol measures); with ``labels_true`` the ``metrics`` under both protocols and
        ``nmi_normalization`` (:data:`~lswmkc_dask.report.metrics.NMI_NORMALIZATION`); with
        ``snapshot_iterations`` ``snapshots`` (:func:`snapshot_record`).
    """
    params = {k: v for k, v in model.get_params().items() if k not in ("client", "verbose")}
    seconds = float(model.fit_seconds_)
    rep = {
        "method": "LSWMKC (Li et al., IEEE TNNLS)",
        "lswmkc_dask_version": __version__,
        "created_utc": utc_now(),
        "python": platform.python_version(),
        "params": params,
        "n_samples": int(model.labels_.shape[0]),
        "n_kernels": int(model.kernel_weights_.shape[0]),
        "n_iter": model.n_iter_,
        "converged": model.converged_,
        "iteration_seconds_total": seconds,
        "seconds_per_iteration": seconds / max(model.n_iter_, 1),
        "kernel_weights": model.kernel_weights_,
        "kernel_names": list(getattr(model, "kernel_names_", [])) or None,
        "objective": model.objective_,
        "kstar_change": model.kstar_change_,
        "gamma": _summary(model.gamma_),
        "affinity_nnz": int(model.affinity_.nnz),
        "kstar_rank": int(model.kstar_factor_.shape[1]),
        "eig_drivers": [str(d) for d in getattr(model, "eig_drivers_", [])],
        "eig_device": device_record(model),
        "protocols": {k: v.replace("n_init", f"n_init={model.n_init}") for k, v in PROTOCOL_DESCRIPTIONS.items()},
    }
    snapshots = snapshot_record(model)
    if snapshots is not None:
        rep["snapshots"] = snapshots
    if labels_true is not None:
        rep["metrics"] = {p: model.evaluate(labels_true, protocol=p) for p in ("honest", "paper")}
        rep["nmi_normalization"] = dict(NMI_NORMALIZATION)
    if extra:
        rep.update(extra)
    return to_json_ready(rep)


def device_record(model: Any) -> dict:
    """Where the gathered step (the eigendecomposition of S) of a fitted model ran.

    Parameters
    ----------
    model : LSWMKC
        Fitted.

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
    drivers = [str(d) for d in getattr(model, "eig_drivers_", [])]
    resolved = str(getattr(getattr(model, "result_", None), "eig_device", "cpu"))  # resolved by the fit
    resident = bool(drivers) and all(d == "resident" for d in drivers)
    return {
        "requested": str(getattr(model, "eig_device", "cpu")),
        "resolved": resolved,
        "per_iteration": ["cuda" if d == "cuda" or (d == "resident" and resolved == "cuda") else "cpu"
                          for d in drivers],
        "route": "resident" if resident else "blockwise",
        **({"transfers": dict(moved)} if (moved := getattr(getattr(model, "result_", None), "device_transfers", None))
           else {}),
    }


def snapshot_record(model: Any) -> dict | None:
    """The snapshot iterations a fitted model was asked for, kept, and not reached.

    Parameters
    ----------
    model : LSWMKC
        Fitted.

    Returns
    -------
    dict or None
        ``{"requested": [...], "kept": [...], "not_reached": [...]}`` (sorted
        iterations; ``not_reached``: beyond ``n_iter_``), or None without
        ``snapshot_iterations`` or ``snapshots_`` (a model reloaded by
        :meth:`LSWMKC.load` keeps none).
    """
    requested = getattr(model, "snapshot_iterations", None)
    if requested is None or not hasattr(model, "snapshots_"):
        return None
    asked = sorted({int(t) for t in requested})
    kept = sorted(int(t) for t in (getattr(model, "snapshots_", None) or {}))
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
    model : LSWMKC, optional
        Fitted, to ``model.safetensors`` (reloaded by ``LSWMKC.load(directory)``).
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
        lswmkc did not write (never replaced, :mod:`lswmkc_dask.io.atomic`).
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
            write_model(tmp / MODEL_FILE, model)
    return Path(directory)


def format_metrics(metrics: dict) -> str:
    """``ACC 0.6848  NMI 0.6553  Purity 0.6848  ARI 0.4400``: the four of ``METRICS`` (no ``NMI_arithmetic``)."""
    return "  ".join(f"{k} {metrics[k]:.4f}" for k in METRICS if k in metrics)

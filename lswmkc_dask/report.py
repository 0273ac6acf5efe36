"""Reports of a fit (JSON) and labels (CSV), written atomically."""

from __future__ import annotations

import json
import math
import platform
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .io import atomic_path

__all__ = ["fit_report", "write_fit_output", "format_metrics", "labels_csv", "to_json_ready"]


def to_json_ready(v):
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


def fit_report(model, labels_true=None, extra=None):
    """A JSON-ready report of a fitted :class:`lswmkc_dask.LSWMKC`.

    Parameters
    ----------
    model : LSWMKC
        Fitted.
    labels_true : array_like of shape (n,), optional
        When given, the metrics under both protocols are included.
    extra : dict, optional
        Merged into the report (data source, client, timings).

    Returns
    -------
    dict
        Parameters, ``n_iter``, ``converged``, ``seconds``, ``kernel_weights``,
        ``objective``, ``kstar_change``, ``gamma`` summary and ``metrics``.
    """
    params = {k: v for k, v in model.get_params().items() if k not in ("client", "verbose")}
    rep = {
        "method": "LSWMKC (Li et al., IEEE TNNLS)",
        "params": params,
        "n_samples": int(model.labels_.shape[0]),
        "n_kernels": int(model.kernel_weights_.shape[0]),
        "n_iter": model.n_iter_,
        "converged": model.converged_,
        "seconds": model.fit_seconds_,
        "seconds_per_iteration": model.fit_seconds_ / max(model.n_iter_, 1),
        "kernel_weights": model.kernel_weights_,
        "objective": model.objective_,
        "kstar_change": model.kstar_change_,
        "affinity_nnz": int(model.affinity_.nnz),
        "kstar_rank": int(model.kstar_factor_.shape[1]),
        "python": platform.python_version(),
    }
    if labels_true is not None:
        rep["metrics"] = {p: model.evaluate(labels_true, protocol=p) for p in ("honest", "paper")}
    if extra:
        rep.update(extra)
    return to_json_ready(rep)


def labels_csv(labels):
    """Text of a ``sample,label`` CSV file (header, then one row per sample)."""
    return "sample,label\n" + "".join(f"{i},{v}\n" for i, v in enumerate(np.asarray(labels).tolist()))


def write_fit_output(directory, report, labels, overwrite=False, affinity=None, kstar_factor=None):
    """Write one fit's files into ``directory`` atomically.

    ``report.json`` and ``labels.csv``; with ``affinity`` also ``affinity.npz`` (Z,
    scipy sparse) and with ``kstar_factor`` also ``kstar_factor.npy`` (W, K* = W W^T).

    Parameters
    ----------
    directory : str or Path
    report : dict
    labels : ndarray of shape (n,)
    overwrite : bool
    affinity : scipy.sparse matrix of shape (n, n), optional
    kstar_factor : ndarray of shape (n, r), optional

    Raises
    ------
    FileExistsError
        ``directory`` exists and ``overwrite`` is False.
    """
    with atomic_path(directory, overwrite=overwrite) as tmp:
        tmp.mkdir(parents=True)
        (tmp / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (tmp / "labels.csv").write_text(labels_csv(labels))
        if affinity is not None:
            sp.save_npz(tmp / "affinity.npz", sp.csr_matrix(affinity))
        if kstar_factor is not None:
            np.save(tmp / "kstar_factor.npy", kstar_factor)
    return Path(directory)


def format_metrics(metrics):
    """``ACC 0.6848  NMI 0.6553  Purity 0.6848  ARI 0.4400``."""
    return "  ".join(f"{k} {v:.4f}" for k, v in metrics.items())

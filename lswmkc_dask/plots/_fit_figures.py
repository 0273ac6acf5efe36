"""The figures of one fit's directory (``lswmkc fit --output DIR``): :func:`plot_fit`."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import Param, ParameterError
from ..grid.scoring import RUN_K_KEY
from ..grid.sweep import GridPoint
from ..io.model_file import MODEL_FILE
from ..io.results import read_json, report_problem
from ._base import (
    FIT_PNGS,
    FIT_REPORT,
    import_matplotlib,
    k_note,
    kernel_names_of,
    new_figure,
    plot_directory,
    read_labels_csv,
    run_k_values,
    save_figure,
)
from ._evolution import plot_evolution
from ._heatmaps import draw_heatmaps
from ._sensitivity import plot_convergence


def _plot_fit_weights(report, path, colormaps):
    """Bar chart of one fit's kernel weights omega (Eq. 12), one bar per named kernel."""
    w = np.asarray([np.nan if x is None else x for x in report.get("kernel_weights") or []], dtype=float)
    if w.size == 0:
        return None
    names = kernel_names_of({"kernel_names": report.get("kernel_names")}, w.size)
    cmap = colormaps["tab10" if w.size <= 10 else "tab20"]
    fig = new_figure((max(5.5, 0.45 * w.size + 2.5), 4.2))
    ax = fig.subplots()
    x = np.arange(w.size)
    bars = ax.bar(x, w, color=[cmap(p % cmap.N) for p in range(w.size)])
    if w.size <= 30:
        for b, v in zip(bars, w):
            if np.isfinite(v):
                ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, names, rotation=30 if max(len(n) for n in names) > 6 else 0, ha="right" if max(
        len(n) for n in names) > 6 else "center", fontsize="small")
    ax.set_ylabel(r"kernel weight $\omega_p$ (unit 2-norm)")
    ax.set_ylim(0, max(1e-12, float(np.nanmax(w)) if np.isfinite(w).any() else 1.0) * 1.15)
    ax.grid(axis="y", alpha=0.3)
    params = report.get("params") or {}
    ax.set_title(rf"Kernel weights $\omega$: $\alpha$={params.get('alpha', float('nan')):g}, "
                 f"c={params.get('n_neighbors', '?')}, {w.size} base kernels")
    return save_figure(fig, path)


def plot_fit(
    directory: str | os.PathLike[str],
    out: Any = None,
    overwrite: bool = False,
    alpha: float | None = None,
    n_clusters: int | None = None,
) -> list[Path]:
    """The figures of one fit's output directory (``lswmkc fit --output DIR``).

    * ``convergence.png``: as :func:`plot_sweep`'s, for the fit's one alpha;
    * ``kernel_weights.png``: the kernel weights omega (Eq. 12) as bars, one per kernel;
    * ``affinity_heatmap.png`` and ``kstar_heatmap.png``: Z and K* = W W^T in
      predicted-cluster order, as :func:`plot_sweep`'s; left out, with a warning,
      without ``model.safetensors`` (a directory of a report and labels alone);
    * the evolution figures of its snapshots, if any.

    A sweep's run directory (``SWEEP/runs/alpha=A_c=C``) is a fit directory too; with a
    k grid its figures are of the k chosen for it without labels, or of
    ``n_clusters``; the heatmaps' titles say which k and why.

    Parameters
    ----------
    directory : str or Path
        Holding ``report.json`` and ``labels.csv`` (and ``model.safetensors``, the arrays above).
    out : str or Path, optional
        Directory of the PNG files (default ``directory/plots``), as :func:`plot_sweep`'s.
    overwrite : bool
        Replace PNG files in an ``out`` other than ``directory/plots`` (as :func:`plot_sweep`).
    alpha : float, optional
        Accepted only when it is the fit's own alpha.
    n_clusters : int, optional
        One of the run's k.

    Returns
    -------
    list of pathlib.Path
        The PNG files written, in the order above.

    Raises
    ------
    FileNotFoundError
        ``directory`` holds no ``report.json``.
    ValueError
        ``alpha`` is not the fit's alpha, or ``n_clusters`` not one of its k.
    lswmkc_dask.errors.ModelFileError
        (a ValueError) ``model.safetensors`` is damaged or not as lswmkc writes it (each
        member read checked before use; the message names the file and the member).
    FileExistsError
        ``out`` would lose a file (without ``overwrite``, or a directory or link: as :func:`plot_sweep`).
    MatplotlibMissingError
        matplotlib cannot be imported (an ImportError), raised before anything is read.

    Warns
    -----
    UserWarning
        The heatmaps are left out: ``model.safetensors`` is missing.
    """
    import warnings

    _, _, colormaps = import_matplotlib()
    directory = Path(directory)
    report_path = directory / FIT_REPORT
    if not os.path.lexists(report_path):
        raise FileNotFoundError(f"{directory} is not a fit directory (no {FIT_REPORT}; `lswmkc fit --output DIR` "
                                "writes one)")
    report = read_json(report_path, report_problem)
    params = report.get("params") or {}
    point = GridPoint(float(params.get("alpha", math.nan)), int(params.get("n_neighbors", 0)))
    if alpha is not None and not math.isclose(float(alpha), point.alpha, rel_tol=1e-9):
        raise ValueError(f"alpha={float(alpha):g} is not the alpha of the fit in {directory} "
                         f"(alpha={point.alpha:g}); leave alpha (--alpha) out for a fit directory")
    k, labels_file, why = _fit_k(directory, point, report, n_clusters)
    out = plot_directory(directory, out, overwrite, names=FIT_PNGS)
    written = [p for p in (plot_convergence({point: report}, out / "convergence.png", colormaps),
                           _plot_fit_weights(report, out / "kernel_weights.png", colormaps)) if p is not None]
    missing = [n for n in (MODEL_FILE, labels_file) if not os.path.lexists(directory / n)]
    if missing:
        warnings.warn(f"{directory} holds no {', '.join(missing)}: the Z and K* heatmaps are left out (refit with "
                      "`lswmkc fit --output` of this version to get them)", UserWarning, stacklevel=2)
        return written
    labels = read_labels_csv(directory / labels_file, report.get("n_samples"), report_path)
    note = k_note(k, why)
    written.extend(draw_heatmaps(directory, point, labels, "predicted cluster", "clusters", out, colormaps, note))
    written.extend(plot_evolution(directory, out, labels, "predicted cluster", Path(str(report.get("input") or
                                  directory.name)).name, colormaps, note=note))
    return written


def _fit_k(directory, point, report, n_clusters):
    """(k, labels file, why) of a fit directory's heatmaps (see :func:`plot_fit`)."""
    ks = run_k_values(report)
    record = report.get(RUN_K_KEY) or {}
    if n_clusters is not None:
        if int(n_clusters) not in ks:
            raise ParameterError("k={} is not among the k of the fit in {} ({}); give {} one of them, or leave it out",
                                 int(n_clusters), directory, ", ".join(map(str, ks)) or "none recorded",
                                 Param("n_clusters"))
        k, why = int(n_clusters), "as asked"
    elif record.get("n_clusters") is not None:
        k = int(record["n_clusters"])
        why = (f"chosen without labels among this run's k {ks} (the largest {record.get('criterion')}, "
               f"{float(record.get('score') or math.nan):.4f}; report.json {RUN_K_KEY})")
    elif len(ks) > 1:
        k, why = int((report.get("params") or {}).get("n_clusters", min(ks))), "not chosen yet (the sweep has not " \
            "scored this run): the k of labels.csv"
    else:
        return (ks[0] if ks else None), "labels.csv", "the fit's n_clusters"
    labels_file = f"labels_k={k}.csv" if report.get("by_n_clusters") else "labels.csv"
    return k, labels_file, why

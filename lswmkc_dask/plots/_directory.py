"""``lswmkc plot DIR``: :func:`plot_sweep` recognises a sweep, compare or fit directory and
writes its figures through the families of :mod:`lswmkc_dask.plots`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import Param, ParameterError
from ..grid.compare import COMPARE_FILE
from ..grid.sweep import GridPoint, load_sweep
from ._base import (
    FIT_REPORT,
    SWEEP_PNGS,
    import_matplotlib,
    k_note,
    kept_only_if_complete,
    plot_directory,
    read_labels_csv,
)
from ._compare_figures import plot_compare, plot_compare_extras
from ._evolution import plot_evolution
from ._fit_figures import plot_fit
from ._heatmaps import draw_heatmaps
from ._knn import knn_figure_or_skip
from ._point import SweepPoint, sweep_point
from ._sensitivity import plot_convergence, plot_gamma_ablation, plot_kernel_weights, plot_metrics, plot_selection


def _sweep_labels(directory, pick, n=None):
    """(labels, by, kind) that order a sweep's heatmaps: the true labels, else the clusters of ``pick``
    (``n`` of them: ``sweep.json``'s ``n_samples``, when known).
    """
    true_path = Path(directory) / "labels_true.csv"
    config = Path(directory) / "sweep.json"
    if os.path.lexists(true_path):
        return read_labels_csv(true_path, n, config), "true label", "classes"
    run = Path(directory) / "runs" / pick.point.name
    return read_labels_csv(run / pick.labels_file, n, config), "predicted cluster", "clusters"


def _plot_heatmaps(directory, pick, out, colormaps, n=None):
    """The Z and K* heatmaps of the run of ``pick`` (a :class:`SweepPoint`, or a bare
    :class:`GridPoint`: its ``labels.csv``), the title saying which (alpha, k) and why.
    """
    if isinstance(pick, GridPoint):
        pick = SweepPoint(pick, None, "labels.csv", "")
    labels, by, kind = _sweep_labels(directory, pick, n)
    run = Path(directory) / "runs" / pick.point.name
    note = k_note(pick.n_clusters, pick.reason) if pick.n_clusters is not None else pick.reason
    return draw_heatmaps(run, pick.point, labels, by, kind, out, colormaps, note=note)


def plot_sweep(
    directory: str | os.PathLike[str],
    out: Any = None,
    alpha: float | None = None,
    overwrite: bool = False,
    n_clusters: int | None = None,
) -> list[Path]:
    """Draw the figures of a sweep directory as PNG files (those of Li et al., IEEE TNNLS).

    * ``metrics_vs_alpha.png``: ACC, NMI, Purity and ARI against alpha (log2 axis), the
      honest protocol solid, the paper's dashed, one colour per ``n_neighbors``; with a k
      grid at the k of the heatmaps; not written without labels;
    * ``convergence.png``: the objective of Eq. (10) per iteration, one line per alpha,
      next to ``||K*_t - K*_{t-1}||_F`` (log y);
    * ``kernel_weights.png``: the kernel weights omega against alpha, one line per kernel;
    * ``affinity_heatmap.png`` and ``kstar_heatmap.png``: Z and K* = W W^T of one grid
      point and k (:func:`sweep_point`; the title says which and why), samples ordered
      by true label (else by predicted cluster), class boundaries as thin lines;
      subsampled evenly within classes above 3000 samples, and pooled above 600 (a
      pixel is the mean of ``f x f`` samples; both noted in the title);
    * ``selection.png``: the label-free score that chooses the grid point against alpha,
      the selected point starred, its near-ties ringed, their consensus a diamond, the
      honest ACC on a second axis with labels; with a k grid, a panel of the score per k.

    A compare directory (``compare.json``) gets :func:`plot_compare`'s,
    :func:`plot_compare_extras`'s and :func:`plot_knn_mechanism`'s figures (the last left
    out, the reason logged, when it cannot be drawn); a fit directory (``report.json``
    and no ``sweep.json``) :func:`plot_fit`'s.

    Parameters
    ----------
    directory : str or Path
        A sweep (``lswmkc sweep``), compare or fit directory.
    out : str or Path, optional
        Directory for the PNG files (default ``directory/plots``), created if needed.
        The PNGs in ``directory/plots`` are replaced (atomically) without asking; in
        another directory an existing PNG only with ``overwrite``; a directory, a link or
        a special file of a PNG's name is never replaced.
    alpha : float, optional
        Grid point of the heatmaps and evolution figures (default: the one selected
        without labels; :func:`sweep_point` gives the rules).
    overwrite : bool
        Replace existing PNG files in an ``out`` other than ``directory/plots``.
    n_clusters : int, optional
        Another k of the sweep's k grid for the heatmaps and the metrics figure.

    Returns
    -------
    list of pathlib.Path
        The PNG files written, in the order above.

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist or holds no ``sweep.json``.
    ValueError
        No finished grid point yet, ``alpha`` or ``n_clusters`` not in the sweep (the
        message lists those available); ``n_clusters`` for a compare directory.
    FileExistsError
        ``out`` holds a PNG of the same name and ``overwrite`` is False; as a
        ``ForeignOutputError``: ``out`` is a file, or an entry of a PNG's name is a
        directory, a link or a special file.
    MatplotlibMissingError
        matplotlib cannot be imported (an ImportError, raised before anything is read).
    lswmkc_dask.io.results.ResultFileError
        (a ValueError) A file of the directory is not a regular file or not as lswmkc
        writes it; the message names it.
    OSError
        A PNG cannot be written: the PNGs this call added and the output directory it
        created are removed.
    """
    _, _, colormaps = import_matplotlib()
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"sweep directory not found: {directory}")
    with kept_only_if_complete(directory / "plots" if out is None else out):
        return _plot_any(directory, out, alpha, overwrite, n_clusters, colormaps)


def _plot_any(directory, out, alpha, overwrite, n_clusters, colormaps):
    """:func:`plot_sweep` of a compare, fit or sweep ``directory``."""
    if (directory / COMPARE_FILE).is_file():  # a directory of `lswmkc compare`: the bar chart
        if n_clusters is not None:
            raise ParameterError("{} applies to a sweep or fit directory; {} is a comparison (of one k)",
                                 Param("n_clusters"), directory)
        written = [plot_compare(directory, out, overwrite)]
        written += plot_compare_extras(directory, written[0].parent, overwrite)
        knn = knn_figure_or_skip(directory, written[0].parent, overwrite)
        return written + ([knn] if knn is not None else [])
    if not os.path.lexists(directory / "sweep.json") and os.path.lexists(directory / FIT_REPORT):  # one fit
        return plot_fit(directory, out, overwrite=overwrite, alpha=alpha, n_clusters=n_clusters)
    config, runs = load_sweep(directory)
    every_run = runs  # none finished: refused by sweep_point
    if any(p.gamma != "auto" for p in runs):  # a gamma grid: the alpha figures are of the learned gamma
        runs = {p: r for p, r in runs.items() if p.gamma == "auto"} or runs
    pick = sweep_point(directory, alpha, n_clusters, every_run)
    out = plot_directory(directory, out, overwrite, names=SWEEP_PNGS)
    written = [p for p in (plot_metrics(runs, out / "metrics_vs_alpha.png", colormaps, pick),
                           plot_convergence(runs, out / "convergence.png", colormaps),
                           plot_kernel_weights(config, runs, out / "kernel_weights.png", colormaps)) if p is not None]
    written.extend(_plot_heatmaps(directory, pick, out, colormaps, config.get("n_samples")))
    written += [p for p in (plot_selection(directory, runs, out / "selection.png", colormaps),
                            plot_gamma_ablation(config, every_run, out / "gamma_ablation.png")) if p is not None]
    labels, by, _ = _sweep_labels(directory, pick, config.get("n_samples"))
    written.extend(plot_evolution(Path(directory) / "runs" / pick.point.name, out, labels, by,
                                  Path(str(config.get("data") or "")).name, colormaps,
                                  note=k_note(pick.n_clusters, f"{pick.where(False)}, {pick.reason}", 110)))
    return written

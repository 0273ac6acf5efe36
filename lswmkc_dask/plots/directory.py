"""``lswmkc plot DIR``: the figures of a sweep, compare or fit directory.

:func:`plot_sweep` recognises the directory (``compare.json``: a comparison; a
``report.json`` without ``sweep.json``: one fit; else a sweep) and writes its figures by
calling the families of :mod:`lswmkc_dask.plots`.
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
from .compare_figures import plot_compare, plot_compare_extras
from .evolution import plot_evolution
from .fit_figures import plot_fit
from .heatmaps import draw_heatmaps
from .knn import knn_figure_or_skip
from .point import SweepPoint, sweep_point
from .sensitivity import plot_convergence, plot_gamma_ablation, plot_kernel_weights, plot_metrics, plot_selection

__all__ = ["plot_sweep"]


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
    """Draw the figures of a sweep directory as PNG files.

    The figures mirror those of the LSWMKC paper (Li et al., IEEE TNNLS):

    * ``metrics_vs_alpha.png``: the parameter-sensitivity figure, ACC, NMI, Purity
      and ARI against alpha (log2 axis), the honest protocol solid and the paper's
      protocol dashed, one colour per ``n_neighbors``; with a k grid, the metrics at
      the k of the heatmaps (below), named in the title; not written when the sweep
      has no metrics (no ground-truth labels);
    * ``convergence.png``: the convergence figure, the objective of Eq. (10) per
      iteration, one line per alpha coloured on a log2 scale, next to
      ``||K*_t - K*_{t-1}||_F`` (log y);
    * ``kernel_weights.png``: the learned kernel weights omega against alpha, one line
      per kernel (names from ``kernel_names`` in ``sweep.json`` if present);
    * ``affinity_heatmap.png`` and ``kstar_heatmap.png``: the visualisation of the
      consensus graph Z and of the neighbourhood kernel K* = W W^T for one grid
      point and k (:func:`sweep_point`: by default the point selected without
      labels; the title says which and why), samples ordered by true label (by the
      predicted clusters of that k when there is no ``labels_true.csv``) so that the
      block-diagonal structure shows, class
      boundaries as thin lines. Above 3000 samples they are subsampled evenly
      within classes, and above 600 shown samples each pixel is the mean of an
      ``f x f`` block of samples so that sparse entries stay visible (both noted
      in the title);
    * ``selection.png``: the label-free score that chooses the grid point (the
      silhouette of each point's partition on the average base kernel, see
      :func:`lswmkc_dask.grid.sweep.sweep`) against alpha, the selected point starred, its
      near-ties ringed and their consensus marked (a diamond), and the honest ACC on
      a second axis when the sweep has labels; with a k grid, the k panel says where
      k is not determined and draws prediction strength's k.

    A directory of ``lswmkc compare`` (it holds ``compare.json``) gets its bar chart
    instead, ``compare.png`` (:func:`plot_compare`), ``running_time.png`` and
    ``weight_distributions.png`` (:func:`plot_compare_extras`) and
    ``knn_mechanism.png`` (:func:`plot_knn_mechanism`; left out, with the reason logged
    on the ``lswmkc_dask`` logger, above :data:`KNN_FIGURE_MAX_SAMPLES` samples or when
    the kernels cannot be found); the directory of one fit (it holds
    ``report.json`` and no ``sweep.json``: ``lswmkc fit --output DIR``, or a sweep's
    ``runs/alpha=A_c=C``) gets the figures of that fit (:func:`plot_fit`).

    Parameters
    ----------
    directory : str or Path
        Sweep directory written by :func:`lswmkc_dask.grid.sweep.sweep` (``lswmkc sweep``),
        a compare directory or a fit directory.
    out : str or Path, optional
        Directory for the PNG files (default ``directory/plots``); created if needed.
        PNGs that lswmkc wrote there (the default directory, or one ``lswmkc plot``
        created) are replaced, each atomically; in another existing directory a PNG
        of the same name only with ``overwrite``. A file lswmkc did not write (no
        lswmkc-dask ``Software`` chunk), a directory or a link is never replaced.
    alpha : float, optional
        Grid point of the heatmaps (and the evolution figures). Default: the grid point
        and k selected without labels (``summary.json`` ``"selected"``), with or
        without labels; with ``alpha``, the run at that alpha at the k chosen for it
        without labels (:func:`sweep_point` gives the rules).
    overwrite : bool
        Replace PNGs that lswmkc wrote in a directory it did not create.
    n_clusters : int, optional
        Another k of the sweep's k grid for the heatmaps' clusters and the metrics
        figure (default: the k chosen without labels).

    Returns
    -------
    list of pathlib.Path
        The PNG files written, in the order above.

    Raises
    ------
    FileNotFoundError
        ``directory`` does not exist or holds no ``sweep.json``.
    ValueError
        The sweep has no finished grid point yet, ``alpha`` is not one of its
        alphas or ``n_clusters`` one of its k (the message lists those available);
        ``n_clusters`` for a compare directory.
    ForeignOutputError
        ``out`` is a file, or would lose a PNG that lswmkc did not write (a
        ``FileExistsError``).
    MatplotlibMissingError
        matplotlib cannot be imported (``pip install matplotlib``); an ImportError,
        raised before anything is read.
    lswmkc_dask.io.results.ResultFileError
        (a ValueError) A file of the directory is not a regular file (a FIFO or a device
        is never waited on) or not as lswmkc writes it; the message names it.
    OSError
        A PNG cannot be written (a full disk): the PNGs this call added and the output
        directory it created are removed (:func:`kept_only_if_complete`).
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
    if not runs:
        raise ValueError(
            f"no finished grid points in {directory / 'runs'}: nothing to plot yet (run `lswmkc sweep` first)"
        )
    every_run = runs
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

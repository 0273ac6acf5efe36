"""PNG figures of a sweep, compare or fit directory (``lswmkc plot DIR``).

The figures follow those of Li et al., "Local Sample-weighted Multiple Kernel Clustering with
Consensus Discriminative Graph" (IEEE TNNLS): :func:`plot_sweep` lists a sweep's (the metrics,
convergence and kernel weights against alpha, the Z and K* heatmaps of the grid point and k that
:func:`sweep_point` picks, the label-free selection), a compare directory's (:func:`plot_compare`,
:func:`plot_compare_extras`, :func:`plot_knn_mechanism`) and one fit's (:func:`plot_fit`).

Matplotlib is an optional dependency (``pip install matplotlib``, or the ``plot`` extra from a
checkout: ``pip install ".[plot]"``). Figures are drawn on :class:`matplotlib.figure.Figure` objects
with the Agg canvas directly, so pyplot and the user's selected backend are never touched, and each
file is written under a temporary name and renamed when complete.

One module per figure family: :mod:`~lswmkc_dask.plots.sensitivity` (the figures against alpha),
:mod:`~lswmkc_dask.plots.heatmaps` (Z and K*), :mod:`~lswmkc_dask.plots.evolution` (snapshots),
:mod:`~lswmkc_dask.plots.point` (which grid point and k), :mod:`~lswmkc_dask.plots.compare_figures`,
:mod:`~lswmkc_dask.plots.fit_figures`, :mod:`~lswmkc_dask.plots.knn`, and
:mod:`~lswmkc_dask.plots.directory` (:func:`plot_sweep`); :mod:`~lswmkc_dask.plots._base` holds what
they share. The public names are importable from ``lswmkc_dask.plots``.
"""

from __future__ import annotations

from ._base import MatplotlibMissingError
from .compare_figures import plot_compare, plot_compare_extras
from .directory import plot_sweep
from .evolution import plot_evolution
from .fit_figures import plot_fit
from .heatmaps import MAX_HEATMAP_SAMPLES, block_order
from .knn import KNN_FIGURE_MAX_SAMPLES, FigureUnavailableError, KnnMechanism, knn_mechanism_data, plot_knn_mechanism
from .point import SweepPoint, sweep_point
from .sensitivity import gamma_ablation_data

__all__ = ["KNN_FIGURE_MAX_SAMPLES", "MAX_HEATMAP_SAMPLES", "FigureUnavailableError", "KnnMechanism",
           "MatplotlibMissingError", "SweepPoint", "block_order", "gamma_ablation_data", "knn_mechanism_data",
           "plot_compare", "plot_compare_extras", "plot_evolution", "plot_fit", "plot_knn_mechanism", "plot_sweep",
           "sweep_point"]

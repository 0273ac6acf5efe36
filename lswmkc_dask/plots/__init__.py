"""PNG figures of a sweep, compare or fit directory (``lswmkc plot DIR``).

The figures follow those of Li et al., "Local Sample-weighted Multiple Kernel
Clustering with Consensus Discriminative Graph" (IEEE TNNLS):

* ``metrics_vs_alpha.png`` -- the parameter-sensitivity figure: ACC, NMI, Purity and
  ARI against alpha on a log2 axis, the honest protocol (one k-means run, as a user
  gets it) solid and the paper's protocol (best of the repeated runs) dashed;
* ``convergence.png`` -- the convergence figure: the objective of Eq. (10) per
  iteration, one line per alpha, and the change ``||K*_t - K*_{t-1}||_F``;
* ``kernel_weights.png`` -- the learned kernel weights omega against alpha;
* ``affinity_heatmap.png`` and ``kstar_heatmap.png`` -- the visualisation of the
  consensus discriminative graph Z and of the neighbourhood kernel K* = W W^T with
  the samples ordered by class, where a good fit shows the block-diagonal structure;
  by default of the grid point and k that the sweep selected without labels
  (:func:`sweep_point`; ``lswmkc plot --alpha A --n-clusters K`` picks another), the
  titles and the line ``lswmkc plot`` prints saying which (alpha, k) and why.

A compare directory gets its bar chart (:func:`plot_compare`), its running-time and
weight figures (:func:`plot_compare_extras`) and ``knn_mechanism.png``, the KNN mechanism
against LSWMKC's learned neighbourhood (the paper's Figure 1; :func:`plot_knn_mechanism`,
arrays from :func:`knn_mechanism_data`, up to :data:`KNN_FIGURE_MAX_SAMPLES` samples,
left out with a logged reason above or when the kernels cannot be found); the directory of one
fit (``lswmkc fit --output DIR``) its convergence, its kernel weights as bars and its
Z and K* heatmaps in cluster order (:func:`plot_fit`).

Matplotlib is an optional dependency (``pip install matplotlib``, or the ``plot`` extra
from a checkout: ``pip install ".[plot]"``). Figures
are drawn on :class:`matplotlib.figure.Figure` objects with the Agg canvas directly,
so pyplot and the user's selected backend are never touched, and each file is
written under a temporary name and renamed when complete.

One module per figure family: :mod:`~lswmkc_dask.plots.sensitivity` (the figures
against alpha), :mod:`~lswmkc_dask.plots.heatmaps` (Z and K*),
:mod:`~lswmkc_dask.plots.evolution` (snapshots), :mod:`~lswmkc_dask.plots.point` (which
grid point and k), :mod:`~lswmkc_dask.plots.compare_figures`,
:mod:`~lswmkc_dask.plots.fit_figures`, :mod:`~lswmkc_dask.plots.knn`, and
:mod:`~lswmkc_dask.plots.directory` (:func:`plot_sweep`, which draws a directory's
figures); :mod:`~lswmkc_dask.plots._base` holds what they share. The public names are
importable from ``lswmkc_dask.plots``. The limits (:data:`MAX_HEATMAP_SAMPLES`,
:data:`KNN_FIGURE_MAX_SAMPLES`) are read from their family's module.
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

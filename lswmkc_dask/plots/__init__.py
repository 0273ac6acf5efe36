"""PNG figures of a sweep, compare or fit directory (``lswmkc plot DIR``), after those of Li et
al., "Local Sample-weighted Multiple Kernel Clustering with Consensus Discriminative Graph"
(IEEE TNNLS).

Matplotlib is an optional dependency (``pip install matplotlib``, or the ``plot`` extra).
Figures are drawn on the Agg canvas directly (pyplot and the user's backend untouched).
One module per figure family; the public names are importable here.
"""

from __future__ import annotations

from ._base import MatplotlibMissingError
from ._compare_figures import plot_compare, plot_compare_extras
from ._directory import plot_sweep
from ._evolution import plot_evolution
from ._fit_figures import plot_fit
from ._heatmaps import MAX_HEATMAP_SAMPLES, block_order
from ._knn import KNN_FIGURE_MAX_SAMPLES, FigureUnavailableError, KnnMechanism, knn_mechanism_data, plot_knn_mechanism
from ._point import SweepPoint, sweep_point
from ._sensitivity import gamma_ablation_data

__all__ = ["KNN_FIGURE_MAX_SAMPLES", "MAX_HEATMAP_SAMPLES", "FigureUnavailableError", "KnnMechanism",
           "MatplotlibMissingError", "SweepPoint", "block_order", "gamma_ablation_data", "knn_mechanism_data",
           "plot_compare", "plot_compare_extras", "plot_evolution", "plot_fit", "plot_knn_mechanism", "plot_sweep",
           "sweep_point"]

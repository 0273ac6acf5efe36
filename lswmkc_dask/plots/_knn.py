"""``knn_mechanism.png`` (the paper's Figure 1): the KNN mechanism against LSWMKC's neighbourhood.

:func:`knn_mechanism_data` gathers the arrays of a compare directory (a
:class:`KnnMechanism`, up to :data:`KNN_FIGURE_MAX_SAMPLES` samples);
:func:`plot_knn_mechanism` draws them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._logging import get_logger
from ..core.equations import combine_kernels
from ..datasets import load_dataset
from ..engine.route import open_kernels
from ..grid.baselines import neighbour_count, neighbour_ranks
from ..grid.compare import best_run, load_compare, run_name
from ..grid.points import input_fingerprint
from ..grid.sweep import GridPoint
from ..io.model_file import MODEL_FILE
from ..io.run_arrays import run_arrays

if TYPE_CHECKING:  # annotations only (scipy is imported where it is used)
    from scipy.sparse import csr_matrix

from ..errors import FigureUnavailableError
from ._base import (
    data_name,
    import_matplotlib,
    new_figure,
    plot_directory,
    read_labels_csv,
    recorded_choice,
    save_figure,
)
from ._heatmaps import MAX_HEATMAP_SAMPLES, block_order, draw_panel, ordered_graph, pooling

logger = get_logger(__name__)

#: ``knn_mechanism.png`` is drawn up to this many samples (the average kernel, the mask
#: and the localised kernel are dense n x n arrays in this process).
KNN_FIGURE_MAX_SAMPLES = 5000
#: Rows of the average kernel formed (and ranked) at a time.
KNN_BLOCK_ROWS = 512


@dataclass(kw_only=True, repr=False, eq=False)
class KnnMechanism:
    """The matrices of the KNN-mechanism figure (:func:`knn_mechanism_data`).

    Attributes
    ----------
    average : ndarray of shape (n, n)
        ``K_avg = (1/m) sum_p K_p`` of the preprocessed base kernels.
    mask : ndarray of shape (n, n), bool
        The KNN baseline's neighbour matrix N at ``tau`` (:func:`lswmkc_dask.grid.baselines.knn_mask`).
    tau, tau_reason : float, str
        The KNN run's tau, and why.
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        LSWMKC's consensus discriminative graph Z (Eq. 10) at ``point``.
    kstar_factor : ndarray of shape (n, r)
        W, with ``K* = W W^T`` (Theorem 2) at ``point``.
    point, point_reason : GridPoint, str
        LSWMKC's (alpha, c) shown, and why.
    labels, by : ndarray of shape (n,), str
        The order of the samples: the ground truth (``"true label"``), else LSWMKC's
        clusters (``"predicted cluster"``).
    data : str
        The data set's name.
    """

    average: np.ndarray
    mask: np.ndarray
    tau: float
    tau_reason: str
    affinity: csr_matrix
    kstar_factor: np.ndarray
    point: GridPoint
    point_reason: str
    labels: np.ndarray
    by: str
    data: str

    @property
    def localised(self):
        """``N ⊙ K_avg``, shape (n, n), formed on each access (the baseline clusters its symmetric
        part, :func:`lswmkc_dask.grid.baselines.localise`).
        """
        return np.where(self.mask, self.average, 0.0)


def _compare_store(directory, config, X):
    """The kernels of a compare directory (``X``, else where ``compare.json`` says they came from),
    checked against the recorded fingerprint.
    """
    data = str(config.get("data") or "")
    if X is None:
        if data.startswith("dataset "):
            X = load_dataset(data.split(" ", 1)[1])[0]
        elif data and data != "array" and ("://" in data or Path(data).exists()):
            X = data
        else:
            raise FigureUnavailableError(
                f"the kernels of {directory} cannot be found (recorded as {data or 'nothing'!r}); pass them "
                "(knn_mechanism_data(directory, X=...))")
    store = open_kernels(X)
    n = int(config.get("n_samples") or store.n_samples)
    if store.n_samples != n:
        raise FigureUnavailableError(f"the kernels given have {store.n_samples} samples, {directory} was compared "
                                     f"on {n}")
    if n > KNN_FIGURE_MAX_SAMPLES:
        raise FigureUnavailableError(f"n = {n} samples is above {KNN_FIGURE_MAX_SAMPLES}: the figure's dense "
                                     "n x n matrices are not formed")
    recorded = (config.get("input") or {}).get("kernels_sha256")
    now = input_fingerprint(store)["kernels_sha256"]
    if recorded and now != recorded:
        raise FigureUnavailableError(f"the kernels found for {directory} ({data}) are not those it was compared on "
                                     f"(fingerprint {now[:12]}, recorded {recorded[:12]})")
    return store


def knn_mechanism_data(directory: str | os.PathLike[str], X: Any = None) -> KnnMechanism:
    """The matrices of the KNN-mechanism figure of a compare directory (the paper's Figure 1).

    tau is that of the KNN run of best honest ACC (without labels the smallest tau);
    LSWMKC's grid point that of best honest ACC (without labels the one its sweep
    selected, else the smallest alpha), its Z and W read from the run. The average
    kernel is formed again in this process, a block of rows at a time (no other n x n
    array), from ``X`` or from where ``compare.json`` says the kernels came from (a store
    or kernel file that still exists, or ``dataset NAME``), checked against the
    recorded fingerprint.

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.grid.compare.compare` with the "knn" and "lswmkc"
        methods.
    X : KernelStore, str, Path or array_like of shape (m, n, n), optional
        The kernels it was compared on (default: found as above).

    Returns
    -------
    KnnMechanism

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    FigureUnavailableError
        (a ValueError) No KNN or LSWMKC run; the LSWMKC run has no ``model.safetensors``
        (Z and W); the kernels cannot be found or are not those compared; more than
        :data:`KNN_FIGURE_MAX_SAMPLES` samples.
    lswmkc_dask.errors.ModelFileError
        (a ValueError) ``model.safetensors`` is damaged or not as lswmkc writes it
        (Z and W checked in full before use; the message names the member).
    """
    directory = Path(directory)
    config, runs, lsw = load_compare(directory)
    n = int(config.get("n_samples") or 0)
    if n > KNN_FIGURE_MAX_SAMPLES:
        raise FigureUnavailableError(f"n = {n} samples is above {KNN_FIGURE_MAX_SAMPLES}: the figure's dense "
                                     "n x n matrices are not formed")
    taus = [float(t) for t in config.get("taus") or [] if run_name("knn", {"tau": float(t)}) in runs]
    if not taus:
        raise FigureUnavailableError(f"{directory} has no KNN run (compare with the knn method)")
    if not lsw:
        raise FigureUnavailableError(f"{directory} has no LSWMKC run (compare with the lswmkc method)")
    best = best_run(directory, "knn")
    if best is not None:
        tau = float(best[0]["tau"])
        acc = best[1]["metrics"]["honest"]["ACC"]
        tau_reason = f"best honest ACC of the KNN runs ({acc:.4f})"
    else:
        tau = min(taus)
        tau_reason = "no labels: the smallest tau of the grid"
    best = best_run(directory, "lswmkc")
    if best is not None:
        point, run = best[0], best[2]
        point_reason = f"best honest ACC ({best[1]['metrics']['honest']['ACC']:.4f})"
    else:
        chosen = recorded_choice(directory / "lswmkc")
        match = [p for p in lsw if chosen and (p.alpha, p.n_neighbors) == (chosen["alpha"], chosen["n_neighbors"])]
        point = match[0] if match else min(lsw, key=lambda p: (p.alpha, p.n_neighbors))
        point_reason = "no labels: selected without labels" if match else "no labels: the smallest alpha"
        run = directory / "lswmkc" / "runs" / point.name
    missing = [f for f in (MODEL_FILE, "labels.csv") if not os.path.lexists(run / f)]
    if missing:
        raise FigureUnavailableError(f"{run} holds no {', '.join(missing)} (written by an older version of lswmkc)")
    store = _compare_store(directory, config, X)
    n, m = store.n_samples, store.n_kernels
    weights = np.full(m, 1.0 / m)
    count = neighbour_count(tau, n)
    average = np.empty((n, n))
    mask = np.empty((n, n), dtype=bool)
    for a in range(0, n, KNN_BLOCK_ROWS):
        b = min(n, a + KNN_BLOCK_ROWS)
        average[a:b] = combine_kernels(store.read_rows(a, b), weights)
        mask[a:b] = neighbour_ranks(average[a:b]) < count  # ranks within each row: the same as knn_mask
    true_path = directory / "labels_true.csv"
    if os.path.lexists(true_path):
        labels, by = read_labels_csv(true_path, n, "the kernels"), "true label"
    else:
        labels, by = read_labels_csv(run / "labels.csv", n, "the kernels"), "predicted cluster"
    data = data_name(config.get("data"), directory)
    affinity, factor = run_arrays(run, n)
    return KnnMechanism(average=average, mask=mask, tau=tau, tau_reason=tau_reason, affinity=affinity,
                        kstar_factor=factor, point=point, point_reason=point_reason, labels=labels, by=by, data=data)


def _ordered_pooled(rows, order, P):
    """``M[order][:, order]`` pooled by ``P`` (or not), from ``rows(idx)`` giving the rows
    ``M[idx][:, order]``; a block of rows at a time, so no n x n copy is made.
    """
    n_show = order.size
    size = n_show if P is None else P.shape[1]
    out = np.zeros((size, size))
    for a in range(0, n_show, KNN_BLOCK_ROWS):
        block = np.asarray(rows(order[a:a + KNN_BLOCK_ROWS]), dtype=np.float64)
        if P is None:
            out[a:a + block.shape[0]] = block
        else:
            out += P[a:a + block.shape[0]].T @ np.asarray(P.T @ block.T).T
    return out


def _bounds(values, lo_q=1, hi_q=99):
    """The (lo_q, hi_q) percentiles of the finite ``values``: a colour scale that outliers do not flatten."""
    values = values[np.isfinite(values)]
    if not values.size:
        return 0.0, 1.0
    lo, hi = (float(x) for x in np.percentile(values, [lo_q, hi_q]))
    return (lo, hi) if hi > lo else (lo, lo + 1e-12)


def _knn_notes(d, count, shown, n_boundaries, f):
    """The text panel of ``knn_mechanism.png``: the two mechanisms, the chosen tau and alpha, the sampling."""
    n = d.average.shape[0]
    kind = "classes" if d.by == "true label" else "clusters"
    notes = [
        "KNN mechanism (baseline): every sample keeps",
        f"the same number of neighbours, round(tau n) = {count},",
        "its largest entries in $K_{avg}$ (itself included).",
        "LSWMKC learns each sample's neighbours (Z)",
        "and the kernel K* built from them.",
        "",
        f"tau = {d.tau:g}: {d.tau_reason}",
        rf"$\alpha$ = {d.point.alpha:g}, c = {d.point.n_neighbors}: {d.point_reason}",
        f"samples ordered by {d.by}; {n_boundaries + 1} {kind} (grey lines)",
    ]
    if shown < n:
        notes.append(f"subsampled {shown}/{n} evenly within {kind}")
    if f > 1:
        notes.append(f"a pixel is the mean of {f} x {f} samples")
    return notes


def plot_knn_mechanism(
    directory: str | os.PathLike[str],
    out: Any = None,
    overwrite: bool = False,
    X: Any = None,
) -> Path:
    """``knn_mechanism.png``: the KNN mechanism against LSWMKC (the paper's Figure 1).

    Five heatmaps in class (else cluster) order, subsampled and pooled as the other
    heatmaps: (a) ``K_avg``; (b) the KNN baseline's N at its best tau; (c) ``N ⊙ K_avg``
    on (a)'s colour scale; (d) LSWMKC's Z and (e) ``K* = W W^T`` at its best alpha.

    Parameters
    ----------
    directory : str or Path
        A compare directory.
    out : str or Path, optional
        Directory of the PNG (default ``directory/plots``).
    overwrite : bool
        As :func:`plot_compare`.
    X : optional
        The kernels (:func:`knn_mechanism_data`).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError, FigureUnavailableError
        As :func:`knn_mechanism_data`.
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    _, _, colormaps = import_matplotlib()
    directory = Path(directory)
    d = knn_mechanism_data(directory, X)
    out = plot_directory(directory, out, overwrite, names=("knn_mechanism.png",))
    n = d.average.shape[0]
    order, boundaries = block_order(d.labels, MAX_HEATMAP_SAMPLES)
    P, f = pooling(order.size)
    shown = order.size if P is None else P.shape[1]
    fig = new_figure((16.5, 10.5))
    grid = fig.subplots(2, 3)
    axes = [grid[0, 0], grid[0, 1], grid[0, 2], grid[1, 0], grid[1, 1]]

    def draw(ax, mat, title, cmap, vmin, vmax, label):
        draw_panel(fig, ax, mat, order.size, boundaries, (title, label, f"sample (ordered by {d.by})"), cmap,
                   (vmin, vmax), small=True)

    kavg = _ordered_pooled(lambda idx: d.average[idx][:, order], order, P)
    off = ~np.eye(shown, dtype=bool)
    lo, hi = _bounds(kavg[off])
    draw(axes[0], kavg, "(a) average kernel $K_{avg}$", colormaps["viridis"], lo, hi,
         "$K_{avg}$ (1st-99th percentile off the diagonal)")
    del kavg
    mask = _ordered_pooled(lambda idx: d.mask[idx][:, order], order, P)
    count = neighbour_count(d.tau, n)
    draw(axes[1], mask, f"(b) neighbour matrix N of KNN, tau={d.tau:g}\n({count} of {n} samples per row)",
         colormaps["Greys"], 0.0, 1.0, "N (1 = neighbour)" if P is None else "fraction of neighbours")
    del mask
    # unpooled, the entries N drops are NaN (drawn white: 0 lies inside K_avg's range);
    # pooled, a pixel is the mean of N ⊙ K_avg over its samples
    dropped = np.nan if P is None else 0.0
    local = _ordered_pooled(lambda idx: np.where(d.mask[idx], d.average[idx], dropped)[:, order], order, P)
    draw(axes[2], local, "(c) KNN-localised kernel N $\\odot$ $K_{avg}$" + ("\n(white: not a neighbour)" if P is None
                                                                        else ""),
         colormaps["viridis"], lo, hi, "N ⊙ $K_{avg}$ (the scale of (a))")
    del local
    z, zmax = ordered_graph(d.affinity, order, P)
    draw(axes[3], z, rf"(d) LSWMKC graph Z, $\alpha$={d.point.alpha:g}, c={d.point.n_neighbors}",
         colormaps["magma_r"], 0.0, zmax, "Z (capped at the 99th percentile of non-zeros)")
    del z
    w = np.asarray(d.kstar_factor, dtype=np.float64)
    w_order = w[order]
    kstar = _ordered_pooled(lambda idx: w[idx] @ w_order.T, order, P)
    klo, khi = _bounds(kstar[off])
    draw(axes[4], kstar, r"(e) LSWMKC neighbourhood kernel K* = W W$^T$", colormaps["viridis"], klo, khi,
         "K* (1st-99th percentile off the diagonal)")
    del kstar
    grid[1, 2].axis("off")
    grid[1, 2].text(0.0, 0.95, "\n".join(_knn_notes(d, count, order.size, len(boundaries), f)), va="top", ha="left",
                    fontsize="medium", transform=grid[1, 2].transAxes)
    fig.suptitle(f"The KNN mechanism against LSWMKC's learned neighbourhood on {d.data} (n = {n})",
                 fontsize="x-large")
    return save_figure(fig, out / "knn_mechanism.png")


def knn_figure_or_skip(directory, out, overwrite):
    """:func:`plot_knn_mechanism`, or None with a logged reason when it cannot be drawn."""
    try:
        return plot_knn_mechanism(directory, out, overwrite)
    except FigureUnavailableError as exc:
        logger.info("knn_mechanism.png not drawn: %s", exc)
        return None

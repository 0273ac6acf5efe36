"""The figures of a run's snapshots (kept in its ``model.safetensors``): Z and K* as LSWMKC iterates, and their
t-SNE (:func:`plot_evolution`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.postprocess import factor_embedding
from ..io.model_file import MODEL_FILE
from ..io.run_arrays import read_snapshots
from ._base import import_matplotlib, new_figure, save_figure

#: Samples drawn at most in an evolution heatmap panel, and embedded by t-SNE.
EVOLUTION_MAX_SAMPLES = 400
TSNE_MAX_SAMPLES = 1000


def _evenly(order, limit):
    """At most ``limit`` entries of ``order``, evenly spaced (keeps the cluster blocks)."""
    if order.size <= limit:
        return order
    return order[np.linspace(0, order.size - 1, limit).round().astype(int)]


def _snapshot_embedding(z, w, k):
    """The spectral embedding (n, k) of K*_t from its factor, or of (Z0 + Z0^T)/2 at t = 0."""
    if w is not None:
        return factor_embedding(w, k)
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    s = sp.csr_matrix((z + z.T) / 2.0)
    _, vecs = eigsh(s, k=min(k, s.shape[0] - 2), which="LA", v0=np.ones(s.shape[0]))
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms > 0, norms, 1.0)


def plot_evolution(run: Path, out: Path, labels: np.ndarray, by: str, data: str = "", colormaps: Any = None,
                   note: str = "") -> list[Path]:
    """The evolution figures of a run with snapshots (``--snapshots``, in its ``model.safetensors``).

    * ``evolution_heatmaps.png``: Z_t (top) and K*_t = W_t W_t^T (bottom) at each kept
      iteration, samples in the order of ``labels`` (at most
      :data:`EVOLUTION_MAX_SAMPLES`, evenly spaced; K*_0 is not stored);
    * ``evolution_tsne.png``: t-SNE (``init="pca"`` and ``random_state=0``: comparable,
      reproducible panels; at most :data:`TSNE_MAX_SAMPLES` samples) of each iteration's
      spectral embedding (of K*_t; at t = 0 of (Z0 + Z0^T)/2), coloured by ``labels``.

    Parameters
    ----------
    run : Path
        A fit or sweep run directory holding ``model.safetensors`` and ``labels.csv``.
    out : Path
        Directory of the PNGs.
    labels : ndarray of shape (n,)
        Colours and order (true labels when known, else the predicted clusters).
    by : str
        What ``labels`` are ("true label" or "predicted cluster").
    data : str
        The data set's name, for the titles.
    note : str
        Added to the titles (which grid point and k, and why).

    Returns
    -------
    list of pathlib.Path
        Nothing when the run has no snapshots.

    Raises
    ------
    lswmkc_dask.errors.ModelFileError
        The model file is damaged (a snapshot member not as written; the message names it).
    """
    from sklearn.manifold import TSNE

    if not os.path.lexists(Path(run) / MODEL_FILE):  # (a FIFO or device there is refused when read)
        return []
    snaps = read_snapshots(run, n=len(labels))
    if not snaps:
        return []
    _, _, colormaps = import_matplotlib() if colormaps is None else (None, None, colormaps)
    ts = sorted(snaps)
    order = np.argsort(labels, kind="stable")
    shown = _evenly(order, EVOLUTION_MAX_SAMPLES)
    fig = new_figure((2.6 * len(ts) + 1.0, 5.6))
    axes = np.atleast_2d(fig.subplots(2, len(ts), squeeze=False))
    for j, t in enumerate(ts):
        z, w, _ = snaps[t]
        axes[0, j].imshow(z[shown][:, shown].toarray(), cmap=colormaps["viridis"], interpolation="nearest")
        axes[0, j].set_title(f"Z, iteration {t}" if t else "Z, initialisation", fontsize="small")
        if w is None:
            axes[1, j].text(0.5, 0.5, "K*$_0$ = combined\nkernel (not stored)", ha="center", va="center",
                            fontsize="small", transform=axes[1, j].transAxes)
        else:
            ws = np.asarray(w)[shown]
            axes[1, j].imshow(ws @ ws.T, cmap=colormaps["viridis"], interpolation="nearest")
            axes[1, j].set_title(f"K*, iteration {t}", fontsize="small")
        for ax in axes[:, j]:
            ax.set(xticks=[], yticks=[])
    axes[0, 0].set_ylabel(f"samples by {by}")
    axes[1, 0].set_ylabel(f"samples by {by}")
    fig.suptitle(f"Evolution of the affinity graph Z and the neighbourhood kernel K* on {data} "
                 f"({shown.size} of {order.size} samples)" + (f"\n{note}" if note else ""), fontsize="medium")
    written = [save_figure(fig, Path(out) / "evolution_heatmaps.png")]
    k = max(2, int(np.unique(labels).size))
    picked = np.sort(_evenly(np.arange(order.size), TSNE_MAX_SAMPLES))
    fig = new_figure((3.0 * len(ts) + 1.0, 3.6))
    axes = fig.subplots(1, len(ts), squeeze=False)[0]
    cmap = colormaps["tab20" if k > 10 else "tab10"]
    for ax, t in zip(axes, ts, strict=True):
        z, w, _ = snaps[t]
        h = _snapshot_embedding(z, w, k)[picked]
        xy = TSNE(n_components=2, init="pca", perplexity=min(30.0, (picked.size - 1) / 3), max_iter=500,
                  random_state=0).fit_transform(h)
        ax.scatter(xy[:, 0], xy[:, 1], c=labels[picked] % cmap.N, cmap=cmap, s=6, vmin=0, vmax=cmap.N - 1)
        ax.set_title(f"iteration {t}" if t else "initialisation", fontsize="small")
        ax.set(xticks=[], yticks=[])
    axes[0].set_ylabel(f"t-SNE 2 (colour: {by})")
    fig.supxlabel("t-SNE 1 of the spectral embedding (no units)", fontsize="small")
    fig.suptitle(f"t-SNE of the data as LSWMKC iterates on {data} ({picked.size} samples)"
                 + (f"\n{note}" if note else ""), fontsize="medium")
    written.append(save_figure(fig, Path(out) / "evolution_tsne.png"))
    return written

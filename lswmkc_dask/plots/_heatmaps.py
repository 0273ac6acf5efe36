"""Heatmaps of the consensus graph Z and of K* = W W^T, samples in class order.

:func:`block_order` orders (and thins) samples so that classes are contiguous,
:func:`pooling` averages f x f blocks, :func:`draw_heatmaps` writes
``affinity_heatmap.png`` and ``kstar_heatmap.png`` of one run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..io.run_arrays import run_arrays
from ._base import new_figure, save_figure

#: Larger sweeps are subsampled evenly within classes for the heatmaps
MAX_HEATMAP_SAMPLES = 3000
#: Larger heatmaps are averaged over f x f blocks of samples (about one pixel each)
MAX_HEATMAP_PIXELS = 600


def block_order(labels: Any, max_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Order samples by label (a stable sort) to show block-diagonal structure; subsample if large.

    With ``max_samples``, larger inputs are thinned evenly within each class (about
    the same fraction of each, at least one sample) to at most ``max_samples``.

    Parameters
    ----------
    labels : array_like of shape (n,)
        Class of each sample (true classes, or predicted clusters).
    max_samples : int, optional
        Largest number of samples to keep (default: keep all).

    Returns
    -------
    order : ndarray of int, shape (n_kept,)
        Sample indices; ``labels[order]`` is sorted.
    boundaries : ndarray of int
        Positions in ``order`` where a new class starts (the first excluded).

    Raises
    ------
    ValueError
        If ``labels`` is not one-dimensional or ``max_samples < 1``.
    """
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {y.shape}")
    if max_samples is not None and max_samples < 1:
        raise ValueError(f"max_samples must be >= 1, got {max_samples}")
    n = y.shape[0]
    order = np.argsort(y, kind="stable")
    if max_samples is not None and n > max_samples:
        sorted_y = y[order]
        starts = np.flatnonzero(np.r_[True, sorted_y[1:] != sorted_y[:-1]])
        ends = np.r_[starts[1:], n]
        quota = [max(1, (e - s) * max_samples // n) for s, e in zip(starts, ends)]
        if sum(quota) <= max_samples:
            keep = np.concatenate(
                [
                    s + np.unique(np.round(np.linspace(0, e - s - 1, q)).astype(int))
                    for s, e, q in zip(starts, ends, quota)
                ]
            )
        else:  # more classes than samples to keep: evenly over the sorted order
            keep = np.unique(np.round(np.linspace(0, n - 1, max_samples)).astype(int))
        order = order[keep]
    sorted_y = y[order]
    boundaries = np.flatnonzero(sorted_y[1:] != sorted_y[:-1]) + 1
    return order, boundaries


def pooling(n, max_pixels=None):
    """(sparse ``(n, nb)`` averaging matrix over groups of ``f`` consecutive samples, or None; ``f``).

    Drawn with more rows than pixels, a sparse Z's isolated entries would vanish; pooled, every block shows.
    """
    import scipy.sparse as sp

    max_pixels = max_pixels or MAX_HEATMAP_PIXELS
    if n <= max_pixels:
        return None, 1
    f = math.ceil(n / max_pixels)
    group = np.arange(n) // f
    counts = np.bincount(group)
    P = sp.csr_matrix(
        (1.0 / counts[group], (np.arange(n), group)), shape=(n, counts.size)
    )
    return P, f


def draw_panel(fig, ax, mat, size, boundaries, texts, cmap, limits, small=False):
    """One heatmap of ``mat`` (``size`` samples shown, in :func:`block_order`; pooled or not) with its class
    lines and colour bar; ``texts`` = (title, colour bar label, axis label); ``small``: one panel of several
    (``knn_mechanism.png``: smaller text, class lines up to 60 classes). NaN entries are drawn white.
    """
    title, label, axis = texts
    if np.isnan(mat).any():
        cmap = cmap.with_extremes(bad="white")
    im = ax.imshow(mat, cmap=cmap, vmin=limits[0], vmax=limits[1], interpolation="nearest", aspect="equal",
                   extent=(-0.5, size - 0.5, size - 0.5, -0.5))
    if 0 < len(boundaries) <= (60 if small else 200):
        lw = 0.4 if small else 0.6 if len(boundaries) <= 30 else 0.3
        for b in boundaries:
            for line in (ax.axhline, ax.axvline):
                line(b - 0.5, color="0.55" if small else "0.6", lw=lw, alpha=0.7 if small else 0.8)
    ax.set(xlim=(-0.5, size - 0.5), ylim=(size - 0.5, -0.5))
    text = {"fontsize": "small"} if small else {}
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel(axis, **text)
    ax.set_ylabel(axis, **text)
    cb = fig.colorbar(im, ax=ax, **({"shrink": 0.9, "pad": 0.02} if small else {"shrink": 0.85}))
    cb.set_label(label, **text)
    if small:
        ax.tick_params(labelsize="x-small")
        cb.ax.tick_params(labelsize="x-small")


def ordered_graph(Z, order, P):
    """Z's rows and columns in ``order``, pooled by ``P`` (:func:`pooling`) or not, dense; and the top of its
    colour scale, the 99th percentile of the absolute non-zeros (1 without any).
    """
    z = Z[order][:, order]
    z = (P.T @ z @ P).toarray() if P is not None else z.toarray()
    nz = np.abs(z[z != 0])
    vmax = float(np.percentile(nz, 99)) if nz.size else 1.0
    return z, vmax if vmax > 0 else 1.0


def draw_heatmaps(run, point, labels, by, kind, out, colormaps, note=""):
    """``affinity_heatmap.png`` and ``kstar_heatmap.png`` of the fit in directory ``run``, samples
    ordered by ``labels``; ``note`` (which k, and why) is added to the titles.
    """
    n = labels.shape[0]  # the files checked in full against it before use (a file may be damaged or hostile)
    Z, W = run_arrays(run, n)
    order, boundaries = block_order(labels, MAX_HEATMAP_SAMPLES)
    n_show = order.size
    P, f = pooling(n_show)
    head = rf"$\alpha$={point.alpha:g}, c={point.n_neighbors}; n={n}, ordered by {by} ({len(boundaries) + 1} {kind})"
    notes = []
    if n_show < n:
        notes.append(f"subsampled {n_show}/{n} evenly within {kind}")
    if f > 1:
        notes.append(f"pixel = mean of {f} x {f} samples")
    if notes:
        head += "\n" + "; ".join(notes)
    if note:
        head += "\n" + note
    axis = f"sample (ordered by {by})"
    z, vmax = ordered_graph(Z, order, P)
    fig = new_figure((7.4, 6.8))
    draw_panel(fig, fig.subplots(), z, n_show, boundaries, (f"Consensus discriminative graph Z\n{head}",
               "Z (colour capped at the 99th percentile of non-zeros)", axis), colormaps["magma_r"], (0.0, vmax))
    written = [save_figure(fig, out / "affinity_heatmap.png")]
    del z
    wo = np.asarray(W[order], dtype=np.float64)
    if P is not None:
        wo = P.T @ wo
    k = wo @ wo.T
    off = k[~np.eye(k.shape[0], dtype=bool)]
    lo, hi = np.percentile(off, [1, 99]) if off.size else (k.min(), k.max())
    if not hi > lo:
        lo, hi = float(k.min()), float(k.max()) + 1e-12
    fig = new_figure((7.4, 6.8))
    draw_panel(fig, fig.subplots(), k, n_show, boundaries, (f"Neighbourhood kernel K* = W W$^T$\n{head}",
               "K* (colour range: 1st-99th percentile off the diagonal)", axis), colormaps["viridis"], (lo, hi))
    written.append(save_figure(fig, out / "kstar_heatmap.png"))
    return written

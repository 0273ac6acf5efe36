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
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._grid import input_fingerprint
from ._logging import get_logger
from .baselines import neighbour_count, neighbour_ranks
from .compare import (
    COMPARE_FILE,
    _run_name,
    best_run,
    comparison_table,
    load_compare,
    running_times,
    weight_distributions,
)
from .datasets import load_dataset
from .errors import Param, ParameterError, with_message
from .estimator import as_store
from .io import atomic_path
from .io.atomic import (
    ForeignOutputError,
    ProtectedOutputError,
    _file_refusal,
    check_writable,
    is_empty_dir,
    marker_info,
    png_is_ours,
    refuse_output_location,
    signature,
    write_marker,
)
from .io.labels import LABEL_HEADERS
from .io.npz import read_csr_npz, read_npy
from .postprocess import factor_embedding
from .report import SNAPSHOTS_FILE, read_snapshots
from .steps import combine_kernels
from .sweep import RUN_K_KEY, SELECTION_CRITERION, GridPoint, exact_text, load_sweep, run_n_clusters

if TYPE_CHECKING:  # annotations only (scipy is imported where it is used)
    from scipy.sparse import csr_matrix

__all__ = ["KNN_FIGURE_MAX_SAMPLES", "MAX_HEATMAP_SAMPLES", "FigureUnavailableError", "KnnMechanism",
           "MatplotlibMissingError", "SweepPoint", "block_order", "knn_mechanism_data", "plot_compare", "plot_fit",
           "plot_knn_mechanism", "plot_sweep", "sweep_point"]

logger = get_logger(__name__)

#: The file that makes a directory a compare directory (:mod:`lswmkc_dask.compare`).

#: larger sweeps are subsampled evenly within classes for the heatmaps
MAX_HEATMAP_SAMPLES = 3000
#: larger heatmaps are averaged over f x f blocks of samples (about one pixel each)
MAX_HEATMAP_PIXELS = 600
METRIC_NAMES = ("ACC", "NMI", "Purity", "ARI")
DPI = 120
#: Every file :func:`plot_sweep` or :func:`plot_compare` may write.
PNG_NAMES = ("metrics_vs_alpha.png", "convergence.png", "kernel_weights.png", "affinity_heatmap.png",
             "kstar_heatmap.png", "selection.png", "compare.png", "gamma_ablation.png", "running_time.png",
             "weight_distributions.png", "evolution_heatmaps.png", "evolution_tsne.png", "knn_mechanism.png")
#: The files of a sweep directory's figures (:func:`plot_sweep`).
SWEEP_PNGS = (*PNG_NAMES[:6], "gamma_ablation.png", "evolution_heatmaps.png", "evolution_tsne.png")
#: The files of a fit directory's figures (:func:`plot_fit`).
FIT_PNGS = ("convergence.png", "kernel_weights.png", "affinity_heatmap.png", "kstar_heatmap.png",
            "evolution_heatmaps.png", "evolution_tsne.png")
#: The report of one fit (``lswmkc fit --output DIR``, a sweep's ``runs/alpha=A_c=C``).
FIT_REPORT = "report.json"


def _plot_directory(directory, out, overwrite, names=PNG_NAMES):
    """The PNG directory, made ready; nothing that lswmkc did not write is replaced.

    A PNG of one of ``names`` is replaced only if lswmkc wrote it (its ``Software``
    text chunk, :func:`lswmkc_dask.io.atomic.png_is_ours`): in ``directory/plots``
    (the default) and directories that ``lswmkc plot`` created (its marker, kind
    "plots") always, in any other directory only with ``overwrite``. A PNG lswmkc did
    not write, a directory or a link of the same name is never replaced, with or
    without ``overwrite``. No marker is added to a directory lswmkc did not create (it
    would let other commands' ``--overwrite`` replace the directory). The location is
    checked for writability before anything is drawn.

    Raises
    ------
    ForeignOutputError
        ``out`` is a file, or holds an entry of one of ``names`` that lswmkc did not
        write, or (without ``overwrite``, outside its own directories) one it did.
    ProtectedOutputError
        ``out`` is ``directory`` itself (the input), or inside a kernel store.
    OutputNotWritableError
        ``out`` (or where it would be created) cannot be written.
    """
    if out is None:
        out = directory / "plots"
    out = Path(out)
    refuse_output_location(out)  # never inside a kernel store (a sweep's own plots/ may be inside the sweep)
    if out.resolve() == Path(directory).resolve():
        raise ProtectedOutputError(f"refusing to write PNG files into the input {directory} itself; give another "
                                   f"output directory (the default is {Path(directory) / 'plots'})")
    if out == directory / "plots" and os.path.islink(out):  # planted: PNGs would land where it points
        raise ForeignOutputError(f"{out} is a symbolic link (to {os.readlink(out)}); lswmkc does not write its figures "
                                 "through it: remove it, or give --output DIR")
    if os.path.lexists(out) and not out.is_dir():
        raise ForeignOutputError(f"output {out} is a file; give a directory for the PNG files")
    ours = out == directory / "plots" or (out.is_dir() and (marker_info(out) or {}).get("kind") == "plots")
    if out.is_dir():
        for name in names:
            target = out / name
            if not os.path.lexists(target):
                continue
            refusal = _file_refusal(target, png_is_ours)
            if refusal:
                raise ForeignOutputError(refusal.replace("output ", "", 1) + " (lswmkc plot replaces only PNG "
                                         "files it wrote)")
            if not ours and not overwrite:
                raise with_message(
                    ForeignOutputError, "{} exists ({} is not a directory of `lswmkc plot`); pass {} to replace it, "
                    "or choose another output directory", target, out, Param("overwrite", True, hint="or"),
                )
    check_writable(out, inside=True)
    fresh = not out.exists() or is_empty_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    if fresh and out != directory / "plots":
        write_marker(out, "plots")
    return out


#: Names of the label column in a labels CSV: written now (predicted, true), and before.


class MatplotlibMissingError(ImportError):
    """matplotlib cannot be imported; the message says how to install it."""


def _matplotlib():
    """Import the parts of matplotlib used here, with a helpful error if missing."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib import colormaps
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MatplotlibMissingError(
            f"plotting needs matplotlib, which cannot be imported ({' '.join(str(exc).split())}): pip install matplotlib",
            name="matplotlib",
        ) from exc
    return Figure, FigureCanvasAgg, colormaps


def _new_figure(figsize):
    Figure, FigureCanvasAgg, _ = _matplotlib()
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path):
    """Write ``fig`` as PNG to ``path`` atomically (temporary sibling, then rename), signed
    as lswmkc's (``Software`` text chunk); an existing file is replaced only if signed."""
    with atomic_path(path, overwrite=True, owned=png_is_ours) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": signature()})
    return Path(path)


def _read_labels_csv(path):
    """Labels of a ``sample,predicted_label`` / ``sample,true_label`` file (or the older
    ``sample,label``), in sample order; ints where integral."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if rows and rows[0] and (rows[0][-1].strip().lower() in LABEL_HEADERS or rows[0][0].strip().lower() == "sample"):
        rows = rows[1:]
    rows = [r for r in rows if r]
    if rows and len(rows[0]) > 1:
        try:
            rows.sort(key=lambda r: int(r[0]))
        except ValueError:
            pass
    vals = [r[-1].strip() for r in rows]
    for cast in (int, float):
        try:
            return np.asarray([cast(v) for v in vals])
        except ValueError:
            continue
    return np.asarray(vals)


def block_order(labels: Any, max_samples: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Order samples by label to show block-diagonal structure; subsample if large.

    A stable sort by label, so that samples of one class are contiguous and keep
    their original relative order. With ``max_samples``, larger inputs are thinned
    evenly within each class (each class keeps about the same fraction, at least
    one sample) so that at most ``max_samples`` samples remain.

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
        Positions in ``order`` where a new class starts (the first excluded), for
        drawing the class boundaries.

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


def _alpha_ticks(ax, alphas):
    """log2 x axis with ticks at the alphas, written 2^k where they are powers of 2."""
    ax.set_xscale("log", base=2)
    alphas = sorted(set(alphas))
    step = max(1, math.ceil(len(alphas) / 12))
    ticks = alphas[::step]
    labels = []
    for a in ticks:
        k = math.log2(a) if a > 0 else float("nan")
        labels.append(f"$2^{{{round(k)}}}$" if abs(k - round(k)) < 1e-9 else f"{a:g}")
    ax.set_xticks(ticks, labels)
    ax.minorticks_off()
    if len(alphas) == 1:
        ax.set_xlim(alphas[0] / 2, alphas[0] * 2)


def _metric(report, protocol, name, k=None):
    """A metric of a run: of its k ``k`` (``by_n_clusters``) when given and the run has a k grid,
    else its top-level one (the run's own k)."""
    if k is not None and report.get("by_n_clusters"):
        report = report["by_n_clusters"].get(str(k)) or {}
    v = (report.get("metrics") or {}).get(protocol, {}).get(name)
    return float("nan") if v is None else float(v)


def _by_c(runs):
    """``{c: [(alpha, report), ...] sorted by alpha}``."""
    out: dict[int, list[tuple[float, dict]]] = {}
    for p, r in runs.items():
        out.setdefault(p.n_neighbors, []).append((p.alpha, r))
    return {c: sorted(v, key=lambda t: t[0]) for c, v in sorted(out.items())}


def _plot_metrics(runs, path, colormaps, pick=None):
    """The metrics against alpha; with a k grid at the k of ``pick`` (a :class:`SweepPoint`), named in the title."""
    by_c = _by_c(runs)
    k = pick.n_clusters if pick is not None and pick.k_grid else None
    has = any(
        not math.isnan(_metric(r, prot, m, k))
        for v in by_c.values()
        for _, r in v
        for prot in ("honest", "paper")
        for m in METRIC_NAMES
    )
    if not has:
        return None
    fig = _new_figure((10, 7))
    axes = fig.subplots(2, 2, sharex=True).ravel()
    colours = colormaps["tab10"]
    alphas = [a for v in by_c.values() for a, _ in v]
    for ax, name in zip(axes, METRIC_NAMES):
        for i, (c, v) in enumerate(by_c.items()):
            a = [t[0] for t in v]
            col = colours(i % 10)
            suffix = f", c={c}" if len(by_c) > 1 else ""
            for prot, style, marker in (("honest", "-", "o"), ("paper", "--", "s")):
                vals = [_metric(r, prot, name, k) for _, r in v]
                if all(math.isnan(x) for x in vals):
                    continue
                ax.plot(
                    a,
                    vals,
                    linestyle=style,
                    marker=marker,
                    markersize=4,
                    color=col,
                    label=f"{prot}{suffix}",
                )
        _alpha_ticks(ax, alphas)
        ax.set_title(name)
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    for ax in axes[2:]:
        ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncol=min(6, len(labels)),
        frameon=False,
    )
    title = r"Parameter sensitivity: clustering metrics vs $\alpha$ (honest solid, paper protocol dashed)"
    if k is not None:
        title += "\n" + _k_note(k, f"the k of the heatmaps ({pick.where(False)}), {pick.reason}", 110)
    fig.suptitle(title)
    return _save(fig, path)


def _alpha_colours(alphas, colormaps):
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    logs = [math.log2(a) for a in alphas]
    lo, hi = min(logs), max(logs)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    sm = ScalarMappable(norm=Normalize(lo, hi), cmap=colormaps["viridis"])
    # matplotlib's stub types x as ndarray, narrower than to_rgba, which maps array-likes and scalars
    # (a float gives one RGBA tuple, Colormap.__call__)
    return sm, (lambda a: sm.to_rgba(math.log2(a)))  # type: ignore[arg-type]


def _log2_colorbar(fig, sm, ax, alphas):
    cb = fig.colorbar(sm, ax=ax, pad=0.02)
    logs = sorted({math.log2(a) for a in alphas})
    step = max(1, math.ceil(len(logs) / 12))
    ticks = logs[::step]
    cb.set_ticks(
        ticks,
        labels=[
            f"$2^{{{round(k)}}}$" if abs(k - round(k)) < 1e-9 else f"{2**k:g}"
            for k in ticks
        ],
    )
    cb.set_label(r"$\alpha$")
    return cb


def _plot_convergence(runs, path, colormaps):
    from matplotlib.ticker import MaxNLocator

    by_c = _by_c(runs)
    alphas = [p.alpha for p in runs]
    sm, colour = _alpha_colours(alphas, colormaps)
    fig = _new_figure((11, 3.8 * len(by_c) + 0.6))
    axes = np.atleast_2d(fig.subplots(len(by_c), 2, squeeze=False))
    for row, (c, v) in enumerate(by_c.items()):
        ax_obj, ax_chg = axes[row]
        finals = []
        for a, r in v:
            obj = np.asarray(
                [np.nan if x is None else x for x in r.get("objective") or []],
                dtype=float,
            )
            if obj.size:
                ax_obj.plot(
                    np.arange(1, obj.size + 1),
                    obj,
                    color=colour(a),
                    marker=".",
                    markersize=3,
                    lw=1.2,
                )
                finals.append(
                    np.nanmax(np.abs(obj[np.isfinite(obj)]))
                    if np.isfinite(obj).any()
                    else np.nan
                )
            chg = np.asarray(
                [np.nan if x is None else x for x in r.get("kstar_change") or []],
                dtype=float,
            )
            ok = np.isfinite(chg) & (chg > 0)
            if ok.any():
                t = np.arange(1, chg.size + 1)
                ax_chg.plot(
                    t[ok], chg[ok], color=colour(a), marker=".", markersize=3, lw=1.2
                )
        finals = [f for f in finals if np.isfinite(f) and f > 0]
        # The objective grows with alpha by orders of magnitude: a symmetric log
        # scale keeps the small-alpha curves visible next to the large ones.
        if finals and max(finals) / min(finals) > 20:
            ax_obj.set_yscale(
                "symlog",
                linthresh=max(1e-12, 10 ** math.floor(math.log10(min(finals)))),
            )
            scale = ", symlog scale"
        else:
            scale = ""
        where = f" (c={c})" if len(by_c) > 1 else ""
        ax_obj.set_title(f"Objective of Eq. (10){where}")
        ax_obj.set_ylabel(f"objective{scale}")
        ax_chg.set_title("Change of the neighbourhood kernel K*" + where)
        ax_chg.set_ylabel(r"$\|K^*_t - K^*_{t-1}\|_F$ (log scale)")
        ax_chg.set_yscale("log")
        for ax in (ax_obj, ax_chg):
            ax.set_xlabel("iteration t")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, alpha=0.3)
    if len(runs) > 1:
        _log2_colorbar(fig, sm, axes[:, -1].tolist(), alphas)
        fig.suptitle(r"Convergence, one line per $\alpha$")
    else:  # one fit: no colour scale to read
        (point, report), = runs.items()
        stop = "converged" if report.get("converged") else "stopped at max_iter"
        fig.suptitle(rf"Convergence: $\alpha$={point.alpha:g}, c={point.n_neighbors}, "
                     f"{report.get('n_iter', '?')} iterations ({stop})")
    return _save(fig, path)


def _kernel_names(config, m):
    names = config.get("kernel_names")
    if isinstance(names, (list, tuple)) and len(names) == m:
        return [str(x) for x in names]
    return [f"kernel {p}" for p in range(m)]


def _plot_kernel_weights(config, runs, path, colormaps):
    by_c = _by_c(runs)
    m = max(len(r.get("kernel_weights") or []) for r in runs.values())
    if m == 0:
        return None
    names = _kernel_names(config, m)
    cmap = colormaps["tab10" if m <= 10 else "tab20"]
    n_col = len(by_c)
    fig = _new_figure((max(6.5, 5.5 * n_col) + 1.3 * (1 + m // 25), 4.4))
    axes = fig.subplots(1, n_col, squeeze=False, sharey=True)[0]
    alphas = [p.alpha for p in runs]
    for ax, (c, v) in zip(axes, by_c.items()):
        a = [t[0] for t in v]
        w = np.full((len(v), m), np.nan)
        for i, (_, r) in enumerate(v):
            kw = r.get("kernel_weights") or []
            w[i, : len(kw)] = kw
        for p in range(m):
            ax.plot(
                a,
                w[:, p],
                marker="o",
                markersize=4,
                color=cmap(p % cmap.N),
                label=names[p],
            )
        _alpha_ticks(ax, alphas)
        ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
        ax.set_title(f"c={c}" if n_col > 1 else f"{m} base kernels")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(r"kernel weight $\omega_p$")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="outside right center", fontsize="small", ncol=1 + m // 25
    )
    fig.suptitle(r"Kernel weights $\omega$ vs $\alpha$")
    return _save(fig, path)


def _k_scores(report):
    """``{k: label-free score}`` of one run: every k of a k grid, else its one k."""
    per_k = report.get("by_n_clusters") or {str(report.get("params", {}).get("n_clusters")): report}
    return {int(k): (e.get("label_free") or {}).get(SELECTION_CRITERION, math.nan) for k, e in per_k.items()
            if k != "None"}
def _plot_fit_weights(report, path, colormaps):
    """Bar chart of one fit's kernel weights omega (Eq. 12), one bar per named kernel."""
    w = np.asarray([np.nan if x is None else x for x in report.get("kernel_weights") or []], dtype=float)
    if w.size == 0:
        return None
    names = _kernel_names({"kernel_names": report.get("kernel_names")}, w.size)
    cmap = colormaps["tab10" if w.size <= 10 else "tab20"]
    fig = _new_figure((max(5.5, 0.45 * w.size + 2.5), 4.2))
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
    return _save(fig, path)


def _plot_selection(directory, runs, path, colormaps):
    """The label-free score of every grid point against alpha, the selected point starred;
    the honest ACC beside it (right axis, dashed) when the sweep has labels. With a k
    grid: one line per k, and a second panel with the best score at each k."""
    by_c = _by_c(runs)
    if not any((r.get("label_free") or {}).get(SELECTION_CRITERION) is not None for v in by_c.values()
               for _, r in v):
        return None
    summary_path = Path(directory) / "summary.json"
    chosen = (json.loads(summary_path.read_text()).get("selected") if summary_path.is_file() else None) or {}
    ks = sorted({k for v in by_c.values() for _, r in v for k in _k_scores(r)})
    if len(ks) > 1:
        return _plot_k_selection(runs, by_c, ks, chosen, path, colormaps)
    colours = colormaps["tab10"]
    fig = _new_figure((7.5, 4.4))
    ax = fig.subplots()
    acc_ax = None
    for i, (c, v) in enumerate(by_c.items()):
        a = [t[0] for t in v]
        score = [(r.get("label_free") or {}).get(SELECTION_CRITERION, math.nan) for _, r in v]
        ax.plot(a, score, marker="o", markersize=4, color=colours(i % 10), label=f"silhouette, c={c}")
        acc = [_metric(r, "honest", "ACC") for _, r in v]
        if not all(math.isnan(x) for x in acc):
            acc_ax = acc_ax or ax.twinx()
            acc_ax.plot(a, acc, linestyle="--", color=colours(i % 10), alpha=0.6, label=f"honest ACC, c={c}")
    if chosen.get("alpha") is not None:
        ax.plot([chosen["alpha"]], [chosen["score"]], marker="*", markersize=16, color="black", linestyle="none",
                label=f"selected: alpha={chosen['alpha']:g}, c={chosen['n_neighbors']}")
    _alpha_ticks(ax, [p.alpha for p in runs])
    ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
    ax.set_ylabel("silhouette on the average base kernel")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if acc_ax is not None:
        acc_ax.set_ylabel("honest ACC (labels: not used by the choice)")
        more = acc_ax.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.legend(handles, labels, fontsize="small", loc="best")
    fig.suptitle(r"Choosing $\alpha$ without labels")
    return _save(fig, path)


def _plot_k_selection(runs, by_c, ks, chosen, path, colormaps):
    """Selection of a k grid: score vs alpha per k (the chosen c), best score vs k."""
    c = chosen.get("n_neighbors", next(iter(by_c)))
    v = by_c.get(c) or next(iter(by_c.values()))
    colours = colormaps["viridis"]
    fig = _new_figure((12.0, 4.6))
    ax, kax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    alphas = [t[0] for t in v]
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    norm = Normalize(min(ks), max(ks))
    for k in ks:
        score = [_k_scores(r).get(k, math.nan) for _, r in v]
        ax.plot(alphas, score, marker="o", markersize=3, color=colours(norm(k)), linewidth=1.2)
    fig.colorbar(ScalarMappable(norm=norm, cmap=colours), ax=ax, label="k (line colour)", ticks=ks if len(ks) <= 12 else None)
    if chosen.get("alpha") is not None:
        ax.plot([chosen["alpha"]], [chosen["score"]], marker="*", markersize=16, color="black", linestyle="none",
                label=f"selected: alpha={chosen['alpha']:g}, k={chosen['n_clusters']}")
    _alpha_ticks(ax, [p.alpha for p in runs])
    ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
    ax.set_ylabel("silhouette on the average base kernel")
    ax.set_title(f"score of every grid point (c={c})", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    best = [max((_k_scores(r).get(k, math.nan) for vv in by_c.values() for _, r in vv), default=math.nan)
            for k in ks]
    kax.plot(ks, best, marker="o", color="tab:blue", label="best score over alpha")
    if chosen.get("n_clusters") is not None:
        kax.plot([chosen["n_clusters"]], [chosen["score"]], marker="*", markersize=16, color="black",
                 linestyle="none", label=f"selected: k={chosen['n_clusters']}")
    if chosen.get("n_clusters_true") is not None:
        kax.axvline(chosen["n_clusters_true"], color="tab:red", linestyle=":",
                    label=f"classes in the labels: {chosen['n_clusters_true']} (not used)")
    kax.set_xticks(ks)
    kax.set_xlabel("k (number of clusters)")
    kax.set_ylabel("best silhouette over alpha")
    kax.set_title("choosing k", fontsize="medium")
    kax.grid(True, alpha=0.3)
    kax.legend(fontsize="x-small", loc="best")
    fig.suptitle(r"Choosing $\alpha$ and k without labels")
    return _save(fig, path)


@dataclass(frozen=True)
class SweepPoint:
    """The grid point and k of a sweep's heatmaps and evolution figures, and why (:func:`sweep_point`).

    Attributes
    ----------
    point : GridPoint
        alpha, n_neighbors and gamma; ``point.name`` is its run directory.
    n_clusters : int or None
        k of the predicted clusters drawn (the heatmaps' order without true labels, the
        metrics figure of a k grid); None only for a run that records no k.
    labels_file : str
        The run's file of these clusters: ``labels_k=K.csv`` in a k grid, else
        ``labels.csv``.
    reason : str
        Why this (alpha, k): in every figure title and the line ``lswmkc plot`` prints.
    k_grid : bool
        The run holds several k (``by_n_clusters``).
    """

    point: GridPoint
    n_clusters: int | None
    labels_file: str
    reason: str
    k_grid: bool = False

    def where(self, with_k: bool = True) -> str:
        """``alpha=8 c=5 k=4`` (and ``gamma=G`` for a scalar gamma; no k when ``with_k`` is False)."""
        gamma = "" if self.point.gamma == "auto" else f" gamma={exact_text(self.point.gamma)}"
        k = f" k={self.n_clusters}" if with_k else ""
        return f"alpha={exact_text(self.point.alpha)} c={self.point.n_neighbors}{gamma}{k}"

    def describe(self) -> str:
        """The line ``lswmkc plot`` prints: which (alpha, k) the figures show, and why."""
        return f"figures of {self.where()}: {self.reason}"


def _same_gamma(a, b):
    return a == b or ("auto" not in (a, b) and float(a) == float(b))


def _recorded_selection(directory, runs):
    """``summary.json``'s ``"selected"`` and its run, or (None, None) when it names none of ``runs``."""
    try:
        chosen = json.loads((Path(directory) / "summary.json").read_text()).get("selected")
        alpha, c, gamma = float(chosen["alpha"]), int(chosen["n_neighbors"]), chosen.get("gamma", "auto")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, None
    for p in runs:
        if math.isclose(p.alpha, alpha, rel_tol=1e-12) and p.n_neighbors == c and _same_gamma(p.gamma, gamma):
            return chosen, p
    return None, None


def _run_ks(report):
    """The k values of a run: its k grid (``by_n_clusters``), else its one k."""
    per_k = report.get("by_n_clusters")
    if per_k:
        return sorted(int(k) for k in per_k)
    k = (report.get("params") or {}).get("n_clusters")
    return [] if k is None else [int(k)]


def _alpha_candidates(directory, runs, alpha):
    """The runs at ``alpha`` (of the learned gamma when there are such), or ValueError listing the alphas."""
    alpha = float(alpha)
    cand = [p for p in runs if math.isclose(p.alpha, alpha, rel_tol=1e-9)]
    if not cand:
        avail = ", ".join(f"{a:g}" for a in sorted({p.alpha for p in runs}))
        raise ValueError(f"alpha={alpha:g} is not in the sweep {directory}; alphas available: {avail}")
    return [p for p in cand if p.gamma == "auto"] or cand


def _choose_point(directory, runs, alpha):
    """(point, its k or None to be read from its run, why) for :func:`sweep_point`; never reads a metric."""
    chosen, selected = _recorded_selection(directory, runs)
    if alpha is None and selected is not None:
        return selected, int(chosen["n_clusters"]), (
            f"the grid point selected without labels (the largest {chosen.get('criterion', SELECTION_CRITERION)}, "
            f"{float(chosen['score']):.4f}; summary.json \"selected\")")
    if alpha is None:
        autos = [p for p in runs if p.gamma == "auto"] or list(runs)
        point = min(autos, key=lambda p: (p.alpha, p.n_neighbors, _gamma_value(p.gamma)))
        return point, None, ("summary.json records no selection (the sweep has not scored its runs yet; rerun it "
                             "to finish): the smallest alpha")
    cand = _alpha_candidates(directory, runs, alpha)
    if selected in cand:
        return selected, int(chosen["n_clusters"]), (f"alpha={exact_text(alpha)} as asked, the grid point selected "
                                                     "without labels there (summary.json)")

    def score(p):
        value = run_n_clusters(runs[p])[1]
        return -math.inf if value is None else float(value)

    point = max(sorted(cand, key=lambda p: (p.n_neighbors, _gamma_value(p.gamma))), key=score)
    why = f"alpha={exact_text(alpha)} as asked"
    if len(cand) > 1:
        why += (f", c={point.n_neighbors} of the largest {SELECTION_CRITERION} at this alpha" if score(point) > -math.inf
                else f", the smallest c (no {SELECTION_CRITERION} yet)")
    return point, None, why


def _gamma_value(gamma):
    return 0.0 if gamma == "auto" else float(gamma)


def _choose_k(point, report, k, n_clusters, why):
    """(k, why) of :func:`sweep_point` at ``point``: ``n_clusters`` if given, else ``k``, else the run's own."""
    ks = _run_ks(report)
    if n_clusters is not None:
        if int(n_clusters) not in ks:
            raise ParameterError("k={} is not among the k of the sweep's run {} ({}); give {} one of them",
                                 int(n_clusters), point.name, ", ".join(map(str, ks)) or "none recorded",
                                 Param("n_clusters"))
        return int(n_clusters), f"{why}; k={int(n_clusters)} as asked"
    if k is not None:
        return k, why
    if len(ks) <= 1:
        return (ks[0] if ks else None), f"{why}; the sweep's one k"
    chosen, score = run_n_clusters(report)
    if chosen is None:
        return min(ks), f"{why}; the smallest k (this run's k is not chosen yet: rerun the sweep to finish it)"
    return chosen, f"{why}; k of the largest {SELECTION_CRITERION} at this alpha ({score:.4f}), chosen without labels"


def sweep_point(
    directory: str | os.PathLike[str],
    alpha: float | None = None,
    n_clusters: int | None = None,
    runs: dict | None = None,
) -> SweepPoint:
    """The grid point and k that :func:`plot_sweep` draws in its heatmaps, and why.

    Never chosen by a metric (labels play no part): by default the point
    ``summary.json`` records as ``"selected"`` (alpha, n_neighbors, gamma and k chosen
    without labels, :func:`lswmkc_dask.sweep.sweep`), with or without labels; a sweep
    that has not scored its runs yet (stopped before its end) falls back to the
    smallest alpha, and says so. With ``alpha``: the selected point if it is at that
    alpha, else the run at that alpha (of the learned gamma, the n_neighbors of the
    largest label-free score), at the k chosen for that run without labels
    (:func:`lswmkc_dask.sweep.run_n_clusters`). ``n_clusters`` picks another k of
    the run's k grid.

    Parameters
    ----------
    directory : str or Path
        A sweep directory.
    alpha : float, optional
        One of the sweep's alphas.
    n_clusters : int, optional
        One of the run's k (a k grid's, or its one k).
    runs : dict, optional
        :func:`lswmkc_dask.sweep.load_sweep`'s runs (read from ``directory`` if None).

    Returns
    -------
    SweepPoint

    Raises
    ------
    FileNotFoundError
        ``directory`` holds no ``sweep.json``.
    ValueError
        No finished grid point; ``alpha`` is not one of the sweep's alphas (the message
        lists them); ``n_clusters`` is not one of the run's k
        (:class:`lswmkc_dask.errors.ParameterError`, listing them).
    """
    directory = Path(directory)
    if runs is None:
        runs = load_sweep(directory)[1]
    if not runs:
        raise ValueError(f"no finished grid points in {directory / 'runs'}: nothing to plot yet (run `lswmkc sweep` "
                         "first)")
    point, k, why = _choose_point(directory, runs, alpha)
    report = runs[point]
    k, why = _choose_k(point, report, k, n_clusters, why)
    if (directory / "labels_true.csv").is_file():
        why += " (the labels play no part in this choice)"
    k_grid = bool(report.get("by_n_clusters"))
    labels_file = f"labels_k={k}.csv" if k_grid and k is not None else "labels.csv"
    return SweepPoint(point, k, labels_file, why, k_grid)


def _pick_point(directory, runs, alpha):
    """The grid point of the heatmaps (:func:`sweep_point`'s, without its k)."""
    return sweep_point(directory, alpha, runs=runs).point


def _pooling(n, max_pixels=None):
    """Sparse ``(n, nb)`` averaging matrix over consecutive groups of samples, or None.

    A heatmap of more rows than the image has pixels would be decimated when drawn
    (isolated entries of a sparse Z would vanish); averaging ``f x f`` blocks first
    keeps the density of every block visible.
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


def _heatmap(fig, ax, mat, n, boundaries, title, cmap, vmin, vmax, cbar_label, by):
    im = ax.imshow(
        mat,
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        interpolation="nearest",
        aspect="equal",
        extent=(-0.5, n - 0.5, n - 0.5, -0.5),
    )
    if 0 < len(boundaries) <= 200:
        lw = 0.6 if len(boundaries) <= 30 else 0.3
        for b in boundaries:
            ax.axhline(b - 0.5, color="0.6", lw=lw, alpha=0.8)
            ax.axvline(b - 0.5, color="0.6", lw=lw, alpha=0.8)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel(f"sample (ordered by {by})")
    ax.set_ylabel(f"sample (ordered by {by})")
    cb = fig.colorbar(im, ax=ax, shrink=0.85)
    cb.set_label(cbar_label)


def _sweep_labels(directory, pick):
    """(labels, by, kind) that order a sweep's heatmaps: the true labels, else the clusters of ``pick``."""
    true_path = Path(directory) / "labels_true.csv"
    if true_path.exists():
        return _read_labels_csv(true_path), "true label", "classes"
    run = Path(directory) / "runs" / pick.point.name
    return _read_labels_csv(run / pick.labels_file), "predicted cluster", "clusters"


def _k_note(k, reason, width=90):
    """The title line(s) that say which k a figure shows and why."""
    import textwrap

    return textwrap.fill(f"k={k}: {reason}" if reason else f"k={k}", width)


def _plot_heatmaps(directory, pick, out, colormaps):
    """The Z and K* heatmaps of the run of ``pick`` (a :class:`SweepPoint`, or a bare
    :class:`GridPoint`: its ``labels.csv``), the title saying which (alpha, k) and why."""
    if isinstance(pick, GridPoint):
        pick = SweepPoint(pick, None, "labels.csv", "")
    labels, by, kind = _sweep_labels(directory, pick)
    run = Path(directory) / "runs" / pick.point.name
    note = _k_note(pick.n_clusters, pick.reason) if pick.n_clusters is not None else pick.reason
    return _draw_heatmaps(run, pick.point, labels, by, kind, out, colormaps, note=note)


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


def plot_evolution(run, out, labels, by, data="", colormaps=None, note=""):
    """The evolution figures of a run with ``snapshots.npz`` (``--snapshots``).

    * ``evolution_heatmaps.png``: Z_t (top) and K*_t = W_t W_t^T (bottom) at each kept
      iteration, samples in the order of ``labels`` (at most
      :data:`EVOLUTION_MAX_SAMPLES`, evenly spaced); K*_0 (the combined kernel) is not
      stored and its panel says so;
    * ``evolution_tsne.png``: t-SNE (scikit-learn, ``init="pca"``, perplexity 30,
      ``max_iter=500``, ``random_state=0``; at most :data:`TSNE_MAX_SAMPLES` samples,
      evenly spaced) of each iteration's spectral embedding (of K*_t; at t = 0 of
      (Z0 + Z0^T)/2), coloured by ``labels``. PCA initialisation and a fixed seed make
      the panels comparable and reproducible; 500 iterations and the subsample keep a
      panel under a few seconds at n = 2000.

    Parameters
    ----------
    run : Path
        A fit or sweep run directory holding ``snapshots.npz`` and ``labels.csv``.
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
    """
    from sklearn.manifold import TSNE

    if not (Path(run) / SNAPSHOTS_FILE).is_file():
        return []
    _, _, colormaps = _matplotlib() if colormaps is None else (None, None, colormaps)
    snaps = read_snapshots(Path(run) / SNAPSHOTS_FILE, n=len(labels))
    ts = sorted(snaps)
    order = np.argsort(labels, kind="stable")
    shown = _evenly(order, EVOLUTION_MAX_SAMPLES)
    fig = _new_figure((2.6 * len(ts) + 1.0, 5.6))
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
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_ylabel(f"samples by {by}")
    axes[1, 0].set_ylabel(f"samples by {by}")
    fig.suptitle(f"Evolution of the affinity graph Z and the neighbourhood kernel K* on {data} "
                 f"({shown.size} of {order.size} samples)" + (f"\n{note}" if note else ""), fontsize="medium")
    written = [_save(fig, Path(out) / "evolution_heatmaps.png")]
    k = max(2, int(np.unique(labels).size))
    picked = np.sort(_evenly(np.arange(order.size), TSNE_MAX_SAMPLES))
    fig = _new_figure((3.0 * len(ts) + 1.0, 3.6))
    axes = fig.subplots(1, len(ts), squeeze=False)[0]
    cmap = colormaps["tab20" if k > 10 else "tab10"]
    for ax, t in zip(axes, ts, strict=True):
        z, w, _ = snaps[t]
        h = _snapshot_embedding(z, w, k)[picked]
        xy = TSNE(n_components=2, init="pca", perplexity=min(30.0, (picked.size - 1) / 3), max_iter=500,
                  random_state=0).fit_transform(h)
        ax.scatter(xy[:, 0], xy[:, 1], c=labels[picked] % cmap.N, cmap=cmap, s=6, vmin=0, vmax=cmap.N - 1)
        ax.set_title(f"iteration {t}" if t else "initialisation", fontsize="small")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].set_ylabel(f"t-SNE 2 (colour: {by})")
    fig.supxlabel("t-SNE 1 of the spectral embedding (no units)", fontsize="small")
    fig.suptitle(f"t-SNE of the data as LSWMKC iterates on {data} ({picked.size} samples)" + (f"\n{note}" if note else ""),
                 fontsize="medium")
    written.append(_save(fig, Path(out) / "evolution_tsne.png"))
    return written


def _draw_heatmaps(run, point, labels, by, kind, out, colormaps, note=""):
    """``affinity_heatmap.png`` and ``kstar_heatmap.png`` of the fit in directory ``run``
    (``affinity.npz``, ``kstar_factor.npy``), samples ordered by ``labels``; ``note``
    (which k, and why) is added to the titles."""
    n = labels.shape[0]  # the files checked in full against it before use (a file may be damaged or hostile)
    Z = read_csr_npz(run / "affinity.npz", n)
    W = read_npy(run / "kstar_factor.npy", "f", (n, None), mmap=True)
    order, boundaries = block_order(labels, MAX_HEATMAP_SAMPLES)
    n_show = order.size
    P, f = _pooling(n_show)
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
    written = []

    z = Z[order][:, order]
    z = (P.T @ z @ P).toarray() if P is not None else z.toarray()
    nz = np.abs(z[z != 0])
    vmax = float(np.percentile(nz, 99)) if nz.size else 1.0
    vmax = vmax if vmax > 0 else 1.0
    fig = _new_figure((7.4, 6.8))
    ax = fig.subplots()
    _heatmap(
        fig,
        ax,
        z,
        n_show,
        boundaries,
        f"Consensus discriminative graph Z\n{head}",
        colormaps["magma_r"],
        0.0,
        vmax,
        "Z (colour capped at the 99th percentile of non-zeros)",
        by,
    )
    written.append(_save(fig, out / "affinity_heatmap.png"))
    del z, nz

    wo = np.asarray(W[order], dtype=np.float64)
    if P is not None:
        wo = P.T @ wo
    k = wo @ wo.T
    off = k[~np.eye(k.shape[0], dtype=bool)]
    lo, hi = np.percentile(off, [1, 99]) if off.size else (k.min(), k.max())
    if not hi > lo:
        lo, hi = float(k.min()), float(k.max()) + 1e-12
    fig = _new_figure((7.4, 6.8))
    ax = fig.subplots()
    _heatmap(
        fig,
        ax,
        k,
        n_show,
        boundaries,
        f"Neighbourhood kernel K* = W W$^T$\n{head}",
        colormaps["viridis"],
        lo,
        hi,
        "K* (colour range: 1st-99th percentile off the diagonal)",
        by,
    )
    written.append(_save(fig, out / "kstar_heatmap.png"))
    return written


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
      :func:`lswmkc_dask.sweep.sweep`) against alpha, the selected point starred, and
      the honest ACC on a second axis when the sweep has labels.

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
        Sweep directory written by :func:`lswmkc_dask.sweep.sweep` (``lswmkc sweep``),
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
    """
    _, _, colormaps = _matplotlib()
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"sweep directory not found: {directory}")
    if (directory / COMPARE_FILE).is_file():  # a directory of `lswmkc compare`: the bar chart
        if n_clusters is not None:
            raise ParameterError("{} applies to a sweep or fit directory; {} is a comparison (of one k)",
                                 Param("n_clusters"), directory)
        written = [plot_compare(directory, out, overwrite)]
        written += plot_compare_extras(directory, written[0].parent, overwrite)
        knn = _knn_figure_or_skip(directory, written[0].parent, overwrite)
        return written + ([knn] if knn is not None else [])
    if not (directory / "sweep.json").is_file() and (directory / FIT_REPORT).is_file():  # one fit
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
    out = _plot_directory(directory, out, overwrite, names=SWEEP_PNGS)
    written = []
    for path in (
        _plot_metrics(runs, out / "metrics_vs_alpha.png", colormaps, pick),
        _plot_convergence(runs, out / "convergence.png", colormaps),
        _plot_kernel_weights(config, runs, out / "kernel_weights.png", colormaps),
    ):
        if path is not None:
            written.append(path)
    written.extend(_plot_heatmaps(directory, pick, out, colormaps))
    selection = _plot_selection(directory, runs, out / "selection.png", colormaps)
    if selection is not None:
        written.append(selection)
    ablation = _plot_gamma_ablation(config, every_run, out / "gamma_ablation.png")
    if ablation is not None:
        written.append(ablation)
    labels, by, _ = _sweep_labels(directory, pick)
    written.extend(plot_evolution(Path(directory) / "runs" / pick.point.name, out, labels, by,
                                  Path(str(config.get("data") or "")).name, colormaps,
                                  note=_k_note(pick.n_clusters, f"{pick.where(False)}, {pick.reason}", 110)))
    return written


def gamma_ablation_data(runs):
    """The paper's gamma ablation from a sweep's runs: each metric at the best alpha per gamma.

    Parameters
    ----------
    runs : dict
        ``GridPoint -> report`` (:func:`lswmkc_dask.sweep.load_sweep`), with labels.

    Returns
    -------
    gammas : list of float
        The scalar gammas, ascending.
    curves : dict
        ``{metric: [value at each gamma]}`` (honest protocol) for ACC, NMI, Purity: at
        each gamma the grid point (alpha, c) of the best honest ACC.
    learned : dict or None
        ``{metric: value}`` of the learned gamma ("auto") at its best alpha; None
        without such runs.
    """
    def best(reports):
        scored = [r for r in reports if _metric(r, "honest", "ACC") == _metric(r, "honest", "ACC")]
        return max(scored, key=lambda r: _metric(r, "honest", "ACC")) if scored else None

    gammas = sorted({float(p.gamma) for p in runs if p.gamma != "auto"})
    curves: dict[str, list[float]] = {m: [] for m in ("ACC", "NMI", "Purity")}
    for g in gammas:
        r = best([rep for p, rep in runs.items() if p.gamma != "auto" and float(p.gamma) == g])
        for m in curves:
            curves[m].append(math.nan if r is None else _metric(r, "honest", m))
    auto = best([rep for p, rep in runs.items() if p.gamma == "auto"])
    learned = None if auto is None else {m: _metric(auto, "honest", m) for m in curves}
    return gammas, curves, learned


def _plot_gamma_ablation(config, runs, path):
    """ACC/NMI/Purity against a scalar gamma (log2), the learned gamma as reference lines."""
    gammas, curves, learned = gamma_ablation_data(runs)
    if not gammas or all(math.isnan(v) for c in curves.values() for v in c):
        return None
    fig = _new_figure((7.5, 4.4))
    ax = fig.subplots()
    for i, (m, values) in enumerate(curves.items()):
        ax.plot(gammas, values, marker="o", color=f"C{i}", label=f"{m}, one gamma for every sample")
        if learned is not None and not math.isnan(learned[m]):
            ax.axhline(learned[m], color=f"C{i}", linestyle="--", alpha=0.8, label=f"{m}, learned gamma_i (ours)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(r"$\gamma$ (one value for every sample, log$_2$ scale)")
    ax.set_ylabel(r"honest metric at the best $\alpha$ of each $\gamma$")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    data = Path(str(config.get("data") or "")).name or "the data"
    fig.suptitle(rf"Ablation: a tuned scalar $\gamma$ against the learned $\gamma_i$ on {data}")
    return _save(fig, path)


def plot_compare(directory: str | os.PathLike[str], out: Any = None, overwrite: bool = False) -> Path:
    """The bar chart of a compare directory (``lswmkc compare``): ``compare.png``.

    Two panels, the honest protocol and the paper's; in each, ACC, NMI, Purity and ARI
    of every method at its best parameter under that protocol (named in the legend),
    one colour per method, the value written above each bar.

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.compare.compare`.
    out : str or Path, optional
        Directory of the PNG (default ``directory/plots``), created if needed.
    overwrite : bool
        Replace a ``compare.png`` that lswmkc wrote in a directory it did not
        create (see :func:`plot_sweep`).

    Returns
    -------
    pathlib.Path
        The PNG written (replaced atomically if it existed).

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    ValueError
        No run has metrics yet (nothing finished, or no ground-truth labels).
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    directory = Path(directory)
    rows = _compare_rows(directory)
    out = _plot_directory(directory, out, overwrite, names=("compare.png",))
    return _save(_compare_figure(directory, rows), out / "compare.png")


def _compare_rows(directory):
    """The rows of a compare directory that have metrics; ValueError if none has."""
    rows = comparison_table(directory)
    rows = [r for r in rows if any(r.get(f"{k}_{p}") is not None for p in ("honest", "paper") for k in METRIC_NAMES)]
    if not rows:
        raise ValueError(f"no run with metrics in {directory}: nothing to plot yet (run `lswmkc compare` first, "
                         "with labels)")
    return rows


def plot_compare_extras(directory, out=None, overwrite=False):
    """The running-time and weight figures of a compare directory.

    * ``running_time.png``: seconds of each method (its honest-best run, without the
      final embedding and k-means) relative to LSWMKC's, log scale (the paper's
      running-time figure; :func:`lswmkc_dask.compare.running_times`);
    * ``weight_distributions.png``: the kernel weights of MKKM and LSWMKC side by side,
      each as a fraction of its total (the paper's weight figure;
      :func:`lswmkc_dask.compare.weight_distributions`).

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.compare.compare`.
    out : str or Path, optional
        Directory of the PNGs (default ``directory/plots``).
    overwrite : bool
        As :func:`plot_compare`.

    Returns
    -------
    list of pathlib.Path
        The PNGs written (a figure whose data are missing, e.g. no MKKM run, is left out).

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    _matplotlib()
    directory = Path(directory)
    data = load_compare(directory)[0].get("data") or directory.name
    data = Path(str(data)).name if data != "array" else directory.name
    out = _plot_directory(directory, out, overwrite, names=("running_time.png", "weight_distributions.png"))
    written = []
    try:
        times = running_times(directory)
    except ValueError:
        times = []
    if times:
        fig = _new_figure((7.0, 4.2))
        ax = fig.subplots()
        names = [t[0] for t in times]
        ratios = [t[2] for t in times]
        bars = ax.bar(names, ratios, color=[f"C{i}" for i in range(len(names))])
        for b, (_, sec, ratio) in zip(bars, times, strict=True):
            ax.text(b.get_x() + b.get_width() / 2, ratio, f"{ratio:.3g}x\n({sec:.3g} s)", ha="center",
                    va="bottom", fontsize=8)
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        ax.set_ylabel("running time relative to LSWMKC (log scale)")
        ax.set_xlabel("method (its best parameter by honest ACC)")
        ax.set_ylim(min(ratios) / 3, max(ratios) * 5)
        ax.set_title(f"Running time on {data}: forming the kernel that is clustered (seconds in brackets)",
                     fontsize="medium")
        written.append(_save(fig, out / "running_time.png"))
    names, weights = weight_distributions(directory)
    if weights:
        fig = _new_figure((max(6.0, 0.9 * len(names) + 3), 4.2))
        ax = fig.subplots()
        x = np.arange(len(names))
        width = 0.8 / len(weights)
        for i, (method, w) in enumerate(weights.items()):
            ax.bar(x + (i - (len(weights) - 1) / 2) * width, w, width, label=method,
                   color="C1" if method == "MKKM" else "C3")
        ax.set_xticks(x, names, rotation=30 if max(len(n) for n in names) > 6 else 0, ha="right"
                      if max(len(n) for n in names) > 6 else "center", fontsize="small")
        ax.set_ylabel("kernel weight (fraction of the method's total)")
        ax.set_xlabel("base kernel")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(f"Kernel weights learned by MKKM and LSWMKC on {data}", fontsize="medium")
        written.append(_save(fig, out / "weight_distributions.png"))
    return written


def _compare_figure(directory, rows=None):
    """The figure of :func:`plot_compare` (not saved): each panel's legend below its
    axes, clear of the bars and their values."""
    _, _, colormaps = _matplotlib()
    directory = Path(directory)
    rows = _compare_rows(directory) if rows is None else rows
    colours = colormaps["tab10"]
    fig = _new_figure((11, 4.6))
    axes = fig.subplots(1, 2, sharey=True)
    x = np.arange(len(METRIC_NAMES))
    width = 0.8 / len(rows)
    for ax, protocol, title in zip(axes, ("honest", "paper"),
                                   ("honest protocol (best-inertia k-means)", "paper protocol (max over runs)")):
        for i, r in enumerate(rows):
            vals = [r.get(f"{k}_{protocol}") for k in METRIC_NAMES]
            vals = [float("nan") if v is None else float(v) for v in vals]
            best = r.get(f"best_{protocol}")
            label = r["method"] + (f" ({best})" if best and best != "-" else "")
            bars = ax.bar(x - 0.4 + width * (i + 0.5), vals, width, label=label, color=colours(i % 10))
            for b, v in zip(bars, vals):
                if not math.isnan(v):
                    ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", va="bottom",
                            fontsize=6, rotation=90)
        ax.set_xticks(x, METRIC_NAMES)
        ax.set_ylim(0, 1.12)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        # Below the axes (inside, it covered the ARI bars): constrained layout makes room.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=False)
    axes[0].set_ylabel("score at the best parameter (by ACC)")
    data = json.loads((directory / COMPARE_FILE).read_text()).get("data") or directory.name
    fig.suptitle(f"LSWMKC and baselines on {data}", fontsize=11)
    return fig


def plot_fit(
    directory: str | os.PathLike[str],
    out: Any = None,
    overwrite: bool = False,
    alpha: float | None = None,
    n_clusters: int | None = None,
) -> list[Path]:
    """The figures of one fit's output directory (``lswmkc fit --output DIR``).

    * ``convergence.png``: the objective of Eq. (10) per iteration next to
      ``||K*_t - K*_{t-1}||_F`` (log y), as in :func:`plot_sweep` for one alpha;
    * ``kernel_weights.png``: the learned kernel weights omega (Eq. 12) as bars, one
      per base kernel, named as in the report;
    * ``affinity_heatmap.png`` and ``kstar_heatmap.png``: Z and K* = W W^T with the
      samples ordered by predicted cluster (``labels.csv``), subsampled and pooled
      above 3000 and 600 samples as in :func:`plot_sweep`. Drawn only when the
      directory holds ``affinity.npz`` and ``kstar_factor.npy`` (a fit written by an
      older version does not), else left out with a warning.

    A grid point's run directory of a sweep (``SWEEP/runs/alpha=A_c=C``) is a fit
    directory too; with a k grid, its ``labels.csv`` is of the k chosen for it
    without labels (``n_clusters_selected`` in its report), and ``n_clusters`` picks
    another of its ``labels_k=K.csv``. The heatmaps' titles say which k and why.

    Parameters
    ----------
    directory : str or Path
        Holding ``report.json`` and ``labels.csv`` (and the arrays above).
    out : str or Path, optional
        Directory of the PNG files (default ``directory/plots``); the same rules as
        :func:`plot_sweep`'s ``out``.
    overwrite : bool
        Replace PNGs that lswmkc wrote in a directory it did not create.
    alpha : float, optional
        Accepted only when it is the fit's own alpha (a fit has one).
    n_clusters : int, optional
        One of the run's k (a sweep run's k grid); for a fit of one k, only that k.

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
    lswmkc_dask.io.npz.ArrayFileError
        (a ValueError) ``affinity.npz``, ``kstar_factor.npy`` or ``snapshots.npz`` is
        damaged (truncated, say) or not as lswmkc writes it: Z's sparse parts out of
        range, sizes that disagree with the labels; checked before they are used.
    ForeignOutputError
        ``out`` would lose a file that lswmkc did not write (a ``FileExistsError``).
    MatplotlibMissingError
        matplotlib cannot be imported (an ImportError), raised before anything is read.

    Warns
    -----
    UserWarning
        The heatmaps are left out: ``affinity.npz`` or ``kstar_factor.npy`` is missing.
    """
    import warnings

    _, _, colormaps = _matplotlib()
    directory = Path(directory)
    report_path = directory / FIT_REPORT
    if not report_path.is_file():
        raise FileNotFoundError(f"{directory} is not a fit directory (no {FIT_REPORT}; `lswmkc fit --output DIR` "
                                "writes one)")
    report = json.loads(report_path.read_text())
    params = report.get("params") or {}
    point = GridPoint(float(params.get("alpha", math.nan)), int(params.get("n_neighbors", 0)))
    if alpha is not None and not math.isclose(float(alpha), point.alpha, rel_tol=1e-9):
        raise ValueError(f"alpha={float(alpha):g} is not the alpha of the fit in {directory} "
                         f"(alpha={point.alpha:g}); leave alpha (--alpha) out for a fit directory")
    k, labels_file, why = _fit_k(directory, point, report, n_clusters)
    out = _plot_directory(directory, out, overwrite, names=FIT_PNGS)
    written = [p for p in (_plot_convergence({point: report}, out / "convergence.png", colormaps),
                           _plot_fit_weights(report, out / "kernel_weights.png", colormaps)) if p is not None]
    missing = [n for n in ("affinity.npz", "kstar_factor.npy", labels_file) if not (directory / n).is_file()]
    if missing:
        warnings.warn(f"{directory} holds no {', '.join(missing)}: the Z and K* heatmaps are left out (refit with "
                      "`lswmkc fit --output` of this version to get them)", UserWarning, stacklevel=2)
        return written
    labels = _read_labels_csv(directory / labels_file)
    note = _k_note(k, why)
    written.extend(_draw_heatmaps(directory, point, labels, "predicted cluster", "clusters", out, colormaps, note))
    written.extend(plot_evolution(directory, out, labels, "predicted cluster", Path(str(report.get("input") or
                                  directory.name)).name, colormaps, note=note))
    return written


def _fit_k(directory, point, report, n_clusters):
    """(k, labels file, why) of a fit directory's heatmaps (see :func:`plot_fit`)."""
    ks = _run_ks(report)
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


# ------------------------------------------------------------- the KNN mechanism vs ours
#: ``knn_mechanism.png`` is drawn up to this many samples (the average kernel, the mask
#: and the localised kernel are dense n x n arrays in this process).
KNN_FIGURE_MAX_SAMPLES = 5000
#: Rows of the average kernel formed (and ranked) at a time.
KNN_BLOCK_ROWS = 512


class FigureUnavailableError(ValueError):
    """A figure cannot be drawn from what a directory holds (the message says why)."""


@dataclass(kw_only=True, repr=False, eq=False)
class KnnMechanism:
    """The matrices of the KNN-mechanism figure (:func:`knn_mechanism_data`).

    Attributes
    ----------
    average : ndarray of shape (n, n)
        The average of the preprocessed base kernels, ``K_avg = (1/m) sum_p K_p``.
    mask : ndarray of shape (n, n), bool
        The neighbour index matrix N of the KNN baseline at ``tau``: row i marks the
        ``round(tau n)`` largest entries of row i of ``K_avg`` (itself included, ties
        by column; :func:`lswmkc_dask.baselines.knn_mask`).
    tau : float
    tau_reason : str
        Why this tau (the best honest ACC of the directory's KNN runs, or the rule
        used without labels).
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        LSWMKC's consensus discriminative graph Z (Eq. 10) at ``point``.
    kstar_factor : ndarray of shape (n, r)
        W with ``K* = W W^T`` (Theorem 2), the neighbourhood kernel at ``point``.
    point : GridPoint
        LSWMKC's (alpha, c) shown.
    point_reason : str
        Why this grid point.
    labels : ndarray of shape (n,)
        The order of the samples: the ground truth, else LSWMKC's predicted clusters.
    by : str
        ``"true label"`` or ``"predicted cluster"``.
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
        """``N ⊙ K_avg``, shape (n, n): the KNN-localised average kernel of the paper's
        Figure 1 (formed on each access; the baseline clusters its symmetric part
        ``((N + N^T)/2) ⊙ K_avg``, :func:`lswmkc_dask.baselines.localise`)."""
        return np.where(self.mask, self.average, 0.0)


def _compare_store(directory, config, X):
    """The kernels of a compare directory: ``X``, else where ``compare.json`` says they came
    from (a store or kernel file that still exists, or ``dataset NAME``); checked against the
    recorded fingerprint."""
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
    store = as_store(X)
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
    """The matrices of the KNN-mechanism figure of a compare directory.

    The paper's Figure 1 and its comparison with the KNN mechanism: the average kernel,
    the neighbour index matrix N that the KNN baseline keeps, the localised kernel
    ``N ⊙ K_avg``, and what LSWMKC learns instead, its consensus discriminative graph Z
    (Eq. 10) and neighbourhood kernel K* (Theorem 2).

    * tau: the KNN run of best honest ACC (mean ACC with repeats) in ``directory``;
      without labels (no metrics) the smallest tau of its grid, the most local.
    * LSWMKC: its run of best honest ACC; without labels the grid point its sweep
      selected without labels (``lswmkc/summary.json``), else the smallest alpha.
      Z and W are read from the run's ``affinity.npz`` and ``kstar_factor.npy``.
    * The average kernel is formed again from the kernels, row block by row block
      (the baseline's own pass, :func:`lswmkc_dask.steps.combine_kernels` with
      weights 1/m), in this process: from ``X`` when given, else from where
      ``compare.json`` records the data came from (a store or kernel file that still
      exists, or ``dataset NAME`` for a shipped data set), checked against the
      directory's fingerprint of the kernels. N is ranked a block of rows at a time,
      so that besides ``average`` (float64) and ``mask`` (bool) no n x n array is
      formed.

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.compare.compare` with the "knn" and "lswmkc"
        methods.
    X : KernelStore, str, Path or array_like of shape (m, n, n), optional
        The kernels it was compared on (default: found as above).

    Returns
    -------
    KnnMechanism
        ``average`` and ``mask`` (n, n), ``localised`` (``mask * average``), ``tau``,
        ``affinity`` Z (CSR, n x n), ``kstar_factor`` W (n, r), ``point``,
        ``labels``, ``by``, ``data`` and the reasons for tau and the grid point.

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    FigureUnavailableError
        (a ValueError) No KNN or LSWMKC run; the LSWMKC run has no ``affinity.npz``
        or ``kstar_factor.npy``; the kernels cannot be found or are not those
        compared; more than :data:`KNN_FIGURE_MAX_SAMPLES` samples (5000: the dense
        matrices would take ``3 n^2`` doubles and more).
    lswmkc_dask.io.npz.ArrayFileError
        (a ValueError) ``affinity.npz`` or ``kstar_factor.npy`` is damaged or not
        as lswmkc writes it (checked in full before use).
    """
    directory = Path(directory)
    config, runs, lsw = load_compare(directory)
    n = int(config.get("n_samples") or 0)
    if n > KNN_FIGURE_MAX_SAMPLES:
        raise FigureUnavailableError(f"n = {n} samples is above {KNN_FIGURE_MAX_SAMPLES}: the figure's dense "
                                     "n x n matrices are not formed")
    taus = [float(t) for t in config.get("taus") or [] if _run_exists(runs, t)]
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
        chosen = None
        try:
            chosen = json.loads((directory / "lswmkc" / "summary.json").read_text()).get("selected")
        except (OSError, ValueError):
            pass
        match = [p for p in lsw if chosen and (p.alpha, p.n_neighbors) == (chosen["alpha"], chosen["n_neighbors"])]
        point = match[0] if match else min(lsw, key=lambda p: (p.alpha, p.n_neighbors))
        point_reason = "no labels: selected without labels" if match else "no labels: the smallest alpha"
        run = directory / "lswmkc" / "runs" / point.name
    missing = [f for f in ("affinity.npz", "kstar_factor.npy", "labels.csv") if not (run / f).is_file()]
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
    if true_path.is_file():
        labels, by = _read_labels_csv(true_path), "true label"
    else:
        labels, by = _read_labels_csv(run / "labels.csv"), "predicted cluster"
    data = str(config.get("data") or "")
    data = data.split(" ", 1)[1] if data.startswith("dataset ") else (Path(data).name if data and data != "array"
                                                                      else directory.name)
    return KnnMechanism(average=average, mask=mask, tau=tau, tau_reason=tau_reason,
                        affinity=read_csr_npz(run / "affinity.npz", n),
                        kstar_factor=read_npy(run / "kstar_factor.npy", "f", (n, None)), point=point, point_reason=point_reason,
                        labels=labels, by=by, data=data)


def _run_exists(runs, tau):
    return _run_name("knn", {"tau": float(tau)}) in runs


def _ordered_pooled(rows, order, P):
    """``M[order][:, order]`` pooled by ``P`` (or not), from ``rows(idx)`` giving the rows
    ``M[idx][:, order]``; a block of rows at a time, so no n x n copy is made."""
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


def plot_knn_mechanism(
    directory: str | os.PathLike[str],
    out: Any = None,
    overwrite: bool = False,
    X: Any = None,
) -> Path:
    """``knn_mechanism.png``: the KNN mechanism against LSWMKC (the paper's Figure 1).

    Five heatmaps, samples ordered by true label (by LSWMKC's predicted cluster
    without ground truth), each with its colour bar: (a) the average kernel
    ``K_avg``; (b) the neighbour index matrix N of the KNN baseline at its best tau;
    (c) the KNN-localised average kernel ``N ⊙ K_avg`` (on (a)'s colour scale);
    (d) LSWMKC's consensus discriminative graph Z and (e) its neighbourhood kernel
    ``K* = W W^T`` at its best alpha (:func:`knn_mechanism_data` says how tau and
    alpha are chosen). Above 3000 samples the heatmaps are subsampled evenly within
    classes and above 600 shown samples pooled (a pixel is the mean of f x f
    samples; in (b) the fraction of neighbours), as the other heatmaps.

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
        As :func:`knn_mechanism_data` (more than :data:`KNN_FIGURE_MAX_SAMPLES`
        samples: refused).
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    _, _, colormaps = _matplotlib()
    directory = Path(directory)
    d = knn_mechanism_data(directory, X)
    out = _plot_directory(directory, out, overwrite, names=("knn_mechanism.png",))
    n = d.average.shape[0]
    order, boundaries = block_order(d.labels, MAX_HEATMAP_SAMPLES)
    P, f = _pooling(order.size)
    shown = order.size if P is None else P.shape[1]
    fig = _new_figure((16.5, 10.5))
    grid = fig.subplots(2, 3)
    axes = [grid[0, 0], grid[0, 1], grid[0, 2], grid[1, 0], grid[1, 1]]

    def bounds(values, lo_q=1, hi_q=99):
        values = values[np.isfinite(values)]
        if not values.size:
            return 0.0, 1.0
        lo, hi = (float(x) for x in np.percentile(values, [lo_q, hi_q]))
        return (lo, hi) if hi > lo else (lo, lo + 1e-12)

    def draw(ax, mat, title, cmap, vmin, vmax, label):
        if np.isnan(mat).any():  # (c): the entries N drops, in white
            cmap = cmap.with_extremes(bad="white")
        im = ax.imshow(mat, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="equal",
                       extent=(-0.5, order.size - 0.5, order.size - 0.5, -0.5))
        if 0 < len(boundaries) <= 60:
            for b in boundaries:
                ax.axhline(b - 0.5, color="0.55", lw=0.4, alpha=0.7)
                ax.axvline(b - 0.5, color="0.55", lw=0.4, alpha=0.7)
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel(f"sample (ordered by {d.by})", fontsize="small")
        ax.set_ylabel(f"sample (ordered by {d.by})", fontsize="small")
        ax.tick_params(labelsize="x-small")
        cb = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.02)
        cb.set_label(label, fontsize="small")
        cb.ax.tick_params(labelsize="x-small")

    kavg = _ordered_pooled(lambda idx: d.average[idx][:, order], order, P)
    off = ~np.eye(shown, dtype=bool)
    lo, hi = bounds(kavg[off])
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
    z = d.affinity[order][:, order]
    z = (P.T @ z @ P).toarray() if P is not None else z.toarray()
    nz = np.abs(z[z != 0])
    zmax = float(np.percentile(nz, 99)) if nz.size else 1.0
    draw(axes[3], z, rf"(d) LSWMKC graph Z, $\alpha$={d.point.alpha:g}, c={d.point.n_neighbors}",
         colormaps["magma_r"], 0.0, zmax if zmax > 0 else 1.0, "Z (capped at the 99th percentile of non-zeros)")
    del z, nz
    w = np.asarray(d.kstar_factor, dtype=np.float64)
    w_order = w[order]
    kstar = _ordered_pooled(lambda idx: w[idx] @ w_order.T, order, P)
    klo, khi = bounds(kstar[off])
    draw(axes[4], kstar, r"(e) LSWMKC neighbourhood kernel K* = W W$^T$", colormaps["viridis"], klo, khi,
         "K* (1st-99th percentile off the diagonal)")
    del kstar
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
        f"samples ordered by {d.by}; {len(boundaries) + 1} {kind} (grey lines)",
    ]
    if order.size < n:
        notes.append(f"subsampled {order.size}/{n} evenly within {kind}")
    if f > 1:
        notes.append(f"a pixel is the mean of {f} x {f} samples")
    grid[1, 2].axis("off")
    grid[1, 2].text(0.0, 0.95, "\n".join(notes), va="top", ha="left", fontsize="medium",
                    transform=grid[1, 2].transAxes)
    fig.suptitle(f"The KNN mechanism against LSWMKC's learned neighbourhood on {d.data} (n = {n})",
                 fontsize="x-large")
    return _save(fig, out / "knn_mechanism.png")


def _knn_figure_or_skip(directory, out, overwrite):
    """:func:`plot_knn_mechanism`, or None with a logged reason when it cannot be drawn."""
    try:
        return plot_knn_mechanism(directory, out, overwrite)
    except FigureUnavailableError as exc:
        logger.info("knn_mechanism.png not drawn: %s", exc)
        return None

"""The figures against alpha of a sweep (the paper's parameter-sensitivity figures).

``metrics_vs_alpha.png`` (ACC, NMI, Purity, ARI against alpha on a log2 axis),
``convergence.png`` (the objective of Eq. (10) per iteration and
``||K*_t - K*_{t-1}||_F``), ``kernel_weights.png`` (omega against alpha),
``selection.png`` (the label-free score that chooses the grid point and k) and
``gamma_ablation.png`` (:func:`gamma_ablation_data`: the learned gamma against fixed ones).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..grid.sweep import SELECTION_CRITERION
from ._base import (
    METRIC_NAMES,
    alpha_colours,
    alpha_ticks,
    k_note,
    k_scores,
    kernel_names_of,
    log2_colorbar,
    metric_value,
    new_figure,
    recorded_choice,
    runs_by_c,
    save_figure,
)


def plot_metrics(runs, path, colormaps, pick=None):
    """The metrics against alpha; with a k grid at the k of ``pick`` (a :class:`SweepPoint`), named in the title."""
    by_c = runs_by_c(runs)
    k = pick.n_clusters if pick is not None and pick.k_grid else None
    if all(math.isnan(metric_value(r, prot, m, k)) for v in by_c.values() for _, r in v for prot in ("honest", "paper")
           for m in METRIC_NAMES):
        return None
    fig = new_figure((10, 7))
    axes = fig.subplots(2, 2, sharex=True).ravel()
    colours = colormaps["tab10"]
    alphas = [a for v in by_c.values() for a, _ in v]
    for ax, name in zip(axes, METRIC_NAMES):
        for i, (c, v) in enumerate(by_c.items()):
            a = [t[0] for t in v]
            col = colours(i % 10)
            suffix = f", c={c}" if len(by_c) > 1 else ""
            for prot, style, marker in (("honest", "-", "o"), ("paper", "--", "s")):
                vals = [metric_value(r, prot, name, k) for _, r in v]
                if all(math.isnan(x) for x in vals):
                    continue
                ax.plot(a, vals, linestyle=style, marker=marker, markersize=4, color=col, label=f"{prot}{suffix}")
        alpha_ticks(ax, alphas)
        ax.set(title=name, ylabel=name)
        ax.grid(True, alpha=0.3)
    for ax in axes[2:]:
        ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), frameon=False)
    title = r"Parameter sensitivity: clustering metrics vs $\alpha$ (honest solid, paper protocol dashed)"
    if k is not None:
        title += "\n" + k_note(k, f"the k of the heatmaps ({pick.where(False)}), {pick.reason}", 110)
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_convergence(runs, path, colormaps):
    """Write the objective and ``||K*_t - K*_{t-1}||_F`` per iteration of ``runs`` to ``path``."""
    from matplotlib.ticker import MaxNLocator

    by_c = runs_by_c(runs)
    alphas = [p.alpha for p in runs]
    sm, colour = alpha_colours(alphas, colormaps)
    fig = new_figure((11, 3.8 * len(by_c) + 0.6))
    axes = np.atleast_2d(fig.subplots(len(by_c), 2, squeeze=False))
    for row, (c, v) in enumerate(by_c.items()):
        ax_obj, ax_chg = axes[row]
        finals = []
        for a, r in v:
            obj = np.asarray([np.nan if x is None else x for x in r.get("objective") or []], dtype=float)
            if obj.size:
                ax_obj.plot(np.arange(1, obj.size + 1), obj, color=colour(a), marker=".", markersize=3, lw=1.2)
                finals.append(np.nanmax(np.abs(obj[np.isfinite(obj)])) if np.isfinite(obj).any() else np.nan)
            chg = np.asarray([np.nan if x is None else x for x in r.get("kstar_change") or []], dtype=float)
            ok = np.isfinite(chg) & (chg > 0)
            if ok.any():
                t = np.arange(1, chg.size + 1)
                ax_chg.plot(t[ok], chg[ok], color=colour(a), marker=".", markersize=3, lw=1.2)
        finals = [f for f in finals if np.isfinite(f) and f > 0]
        # The objective grows with alpha by orders of magnitude: a symmetric log
        # scale keeps the small-alpha curves visible next to the large ones.
        if finals and max(finals) / min(finals) > 20:
            ax_obj.set_yscale("symlog", linthresh=max(1e-12, 10 ** math.floor(math.log10(min(finals)))))
            scale = ", symlog scale"
        else:
            scale = ""
        where = f" (c={c})" if len(by_c) > 1 else ""
        ax_obj.set(title=f"Objective of Eq. (10){where}", ylabel=f"objective{scale}")
        ax_chg.set(title="Change of the neighbourhood kernel K*" + where,
                   ylabel=r"$\|K^*_t - K^*_{t-1}\|_F$ (log scale)", yscale="log")
        for ax in (ax_obj, ax_chg):
            ax.set_xlabel("iteration t")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, alpha=0.3)
    if len(runs) > 1:
        log2_colorbar(fig, sm, axes[:, -1].tolist(), alphas)
        fig.suptitle(r"Convergence, one line per $\alpha$")
    else:  # one fit: no colour scale to read
        (point, report), = runs.items()
        stop = "converged" if report.get("converged") else "stopped at max_iter"
        fig.suptitle(rf"Convergence: $\alpha$={point.alpha:g}, c={point.n_neighbors}, "
                     f"{report.get('n_iter', '?')} iterations ({stop})")
    return save_figure(fig, path)


def plot_kernel_weights(config, runs, path, colormaps):
    """Write the kernel weights against alpha of ``runs`` to ``path`` (None without weights)."""
    by_c = runs_by_c(runs)
    m = max(len(r.get("kernel_weights") or []) for r in runs.values())
    if m == 0:
        return None
    names = kernel_names_of(config, m)
    cmap = colormaps["tab10" if m <= 10 else "tab20"]
    n_col = len(by_c)
    fig = new_figure((max(6.5, 5.5 * n_col) + 1.3 * (1 + m // 25), 4.4))
    axes = fig.subplots(1, n_col, squeeze=False, sharey=True)[0]
    alphas = [p.alpha for p in runs]
    for ax, (c, v) in zip(axes, by_c.items()):
        a = [t[0] for t in v]
        w = np.full((len(v), m), np.nan)
        for i, (_, r) in enumerate(v):
            kw = r.get("kernel_weights") or []
            w[i, : len(kw)] = kw
        for p in range(m):
            ax.plot(a, w[:, p], marker="o", markersize=4, color=cmap(p % cmap.N), label=names[p])
        alpha_ticks(ax, alphas)
        ax.set_xlabel(r"$\alpha$ (log$_2$ scale)")
        ax.set_title(f"c={c}" if n_col > 1 else f"{m} base kernels")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(r"kernel weight $\omega_p$")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize="small", ncol=1 + m // 25)
    fig.suptitle(r"Kernel weights $\omega$ vs $\alpha$")
    return save_figure(fig, path)


def plot_selection(directory, runs, path, colormaps):
    """``selection.png`` (:func:`_selection_figure`), or None for a sweep without scores."""
    fig = _selection_figure(directory, runs, colormaps)
    return None if fig is None else save_figure(fig, path)


def _selection_figure(directory, runs, colormaps):
    """The label-free score of every grid point against alpha, the selected point starred,
    its near-ties ringed and the consensus of the near-ties marked (:func:`_mark_near_ties`);
    the honest ACC beside it (right axis, dashed) when the sweep has labels. With a k
    grid: one line per k, and a second panel with the best score at each k. None for a
    sweep without label-free scores.
    """
    by_c = runs_by_c(runs)
    if not any((r.get("label_free") or {}).get(SELECTION_CRITERION) is not None for v in by_c.values()
               for _, r in v):
        return None
    chosen = recorded_choice(directory)
    ks = sorted({k for v in by_c.values() for _, r in v for k in k_scores(r)})
    if len(ks) > 1:
        return _k_selection_figure(runs, by_c, ks, chosen, colormaps)
    colours = colormaps["tab10"]
    fig = new_figure((7.5, 4.4))
    ax = fig.subplots()
    acc_ax = None
    for i, (c, v) in enumerate(by_c.items()):
        a = [t[0] for t in v]
        score = [(r.get("label_free") or {}).get(SELECTION_CRITERION, math.nan) for _, r in v]
        ax.plot(a, score, marker="o", markersize=4, color=colours(i % 10), label=f"silhouette, c={c}")
        acc = [metric_value(r, "honest", "ACC") for _, r in v]
        if not all(math.isnan(x) for x in acc):
            acc_ax = acc_ax or ax.twinx()
            acc_ax.plot(a, acc, linestyle="--", color=colours(i % 10), alpha=0.6, label=f"honest ACC, c={c}")
    _mark_choice(ax, chosen, runs, "c", "n_neighbors")
    handles, labels = ax.get_legend_handles_labels()
    if acc_ax is not None:
        acc_ax.set_ylabel("honest ACC (labels: not used by the choice)")
        more = acc_ax.get_legend_handles_labels()
        handles, labels = handles + more[0], labels + more[1]
    ax.legend(handles, labels, fontsize="small", loc="best")
    fig.suptitle(r"Choosing $\alpha$ without labels")
    return fig


def _mark_choice(ax, chosen, runs, name, key):
    """Star the selected point (labelled ``name=chosen[key]``), mark its near-ties; the axes of the score."""
    if chosen.get("alpha") is not None:
        ax.plot([chosen["alpha"]], [chosen["score"]], marker="*", markersize=16, color="black", linestyle="none",
                label=f"selected: alpha={chosen['alpha']:g}, {name}={chosen[key]}", gid="selected")
    _mark_near_ties(ax, chosen)
    alpha_ticks(ax, [p.alpha for p in runs])
    ax.set(xlabel=r"$\alpha$ (log$_2$ scale)", ylabel="silhouette on the average base kernel")
    ax.grid(True, alpha=0.3)


def _mark_near_ties(ax, chosen):
    """Ring the near-ties other than the selected point (``gid="near_ties"``) and mark their consensus
    (``gid="consensus"``); nothing when the choice is clear or the summary has none.
    """
    ties = chosen.get("near_ties") or []
    if len(ties) < 2:
        return
    others = ties[1:]
    ax.plot([t["alpha"] for t in others], [t["score"] for t in others], marker="o", markersize=11,
            markerfacecolor="none", markeredgecolor="black", markeredgewidth=1.2, linestyle="none", gid="near_ties",
            label=f"near-tie ({len(others)}): within one standard error of the selected score")
    found = chosen.get("consensus")
    if found and found.get("score") is not None:
        k = f", k={found['n_clusters']}" if found.get("n_clusters") is not None else ""
        ax.plot([found["alpha"]], [found["score"]], marker="D", markersize=9, markerfacecolor="none",
                markeredgecolor="tab:red", markeredgewidth=1.5, linestyle="none", gid="consensus",
                label=f"consensus of the near-ties: alpha={found['alpha']:g}{k}")


def _legend_below(ax, fontsize):
    """The legend of ``ax`` below its x label, clear of every curve (inside, "best" still covered the
    k = 2 line); constrained layout makes room for it.
    """
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)


def _k_selection_figure(runs, by_c, ks, chosen, colormaps):
    """Selection of a k grid: score vs alpha per k (the chosen c), best score vs k; where
    the sweep did not determine k (``k_determined`` false) the k panel says so and marks
    prediction strength's k.
    """
    c = chosen.get("n_neighbors", next(iter(by_c)))
    v = by_c.get(c) or next(iter(by_c.values()))
    colours = colormaps["viridis"]
    fig = new_figure((12.0, 5.2))
    ax, kax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    alphas = [t[0] for t in v]
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    norm = Normalize(min(ks), max(ks))
    for k in ks:
        score = [k_scores(r).get(k, math.nan) for _, r in v]
        ax.plot(alphas, score, marker="o", markersize=3, color=colours(norm(k)), linewidth=1.2)
    fig.colorbar(ScalarMappable(norm=norm, cmap=colours), ax=ax, label="k (line colour)",
                 ticks=ks if len(ks) <= 12 else None)
    _mark_choice(ax, chosen, runs, "k", "n_clusters")
    ax.set_title(f"score of every grid point (c={c})", fontsize="medium")
    _legend_below(ax, "small")
    best = [max((k_scores(r).get(k, math.nan) for vv in by_c.values() for _, r in vv), default=math.nan)
            for k in ks]
    kax.plot(ks, best, marker="o", color="tab:blue", label="best score over alpha")
    if chosen.get("n_clusters") is not None:
        undetermined = chosen.get("k_determined") is False
        kax.plot([chosen["n_clusters"]], [chosen["score"]], marker="*", markersize=16, color="black",
                 linestyle="none", gid="selected", label=(f"largest score: k={chosen['n_clusters']}, k not determined"
                                                          if undetermined else f"selected: k={chosen['n_clusters']}"))
        k_ps = (chosen.get("k_candidates") or {}).get("prediction_strength")
        if undetermined and k_ps is not None:
            kax.axvline(k_ps, color="tab:green", linestyle="--", gid="prediction_strength",
                        label=f"prediction strength: k={k_ps}")
    if chosen.get("n_clusters_true") is not None:
        kax.axvline(chosen["n_clusters_true"], color="tab:red", linestyle=":",
                    label=f"classes in the labels: {chosen['n_clusters_true']} (not used)")
    kax.set(xticks=ks, xlabel="k (number of clusters)", ylabel="best silhouette over alpha")
    kax.set_title("choosing k", fontsize="medium")
    kax.grid(True, alpha=0.3)
    _legend_below(kax, "x-small")
    fig.suptitle(r"Choosing $\alpha$ and k without labels")
    return fig


def gamma_ablation_data(runs: dict) -> tuple[list[float], dict[str, list[float]], dict[str, float] | None]:
    """The paper's gamma ablation from a sweep's runs: each metric at the best alpha per gamma.

    Parameters
    ----------
    runs : dict
        ``GridPoint -> report`` (:func:`lswmkc_dask.grid.sweep.load_sweep`), with labels.

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
        scored = [r for r in reports if metric_value(r, "honest", "ACC") == metric_value(r, "honest", "ACC")]
        return max(scored, key=lambda r: metric_value(r, "honest", "ACC")) if scored else None

    gammas = sorted({float(p.gamma) for p in runs if p.gamma != "auto"})
    curves: dict[str, list[float]] = {m: [] for m in ("ACC", "NMI", "Purity")}
    for g in gammas:
        r = best([rep for p, rep in runs.items() if p.gamma != "auto" and float(p.gamma) == g])
        for m in curves:
            curves[m].append(math.nan if r is None else metric_value(r, "honest", m))
    auto = best([rep for p, rep in runs.items() if p.gamma == "auto"])
    learned = None if auto is None else {m: metric_value(auto, "honest", m) for m in curves}
    return gammas, curves, learned


def plot_gamma_ablation(config, runs, path):
    """ACC/NMI/Purity against a scalar gamma (log2), the learned gamma as reference lines."""
    gammas, curves, learned = gamma_ablation_data(runs)
    if not gammas or all(math.isnan(v) for c in curves.values() for v in c):
        return None
    fig = new_figure((7.5, 4.4))
    ax = fig.subplots()
    for i, (m, values) in enumerate(curves.items()):
        ax.plot(gammas, values, marker="o", color=f"C{i}", label=f"{m}, one gamma for every sample")
        if learned is not None and not math.isnan(learned[m]):
            ax.axhline(learned[m], color=f"C{i}", linestyle="--", alpha=0.8, label=f"{m}, learned gamma_i (ours)")
    ax.set_xscale("log", base=2)
    ax.set(xlabel=r"$\gamma$ (one value for every sample, log$_2$ scale)",
           ylabel=r"honest metric at the best $\alpha$ of each $\gamma$")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    data = Path(str(config.get("data") or "")).name or "the data"
    fig.suptitle(rf"Ablation: a tuned scalar $\gamma$ against the learned $\gamma_i$ on {data}")
    return save_figure(fig, path)

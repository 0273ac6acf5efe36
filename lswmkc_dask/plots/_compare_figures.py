"""The figures of a compare directory (``lswmkc compare``): ``compare.png``
(:func:`plot_compare`), ``running_time.png`` and ``weight_distributions.png``
(:func:`plot_compare_extras`).
"""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ..grid.compare import (
    COMPARE_FILE,
    comparison_table,
    load_compare,
    running_times,
    weight_distributions,
)
from ..io.results import read_json
from ._base import METRIC_NAMES, data_name, import_matplotlib, new_figure, plot_directory, save_figure


def plot_compare(directory: str | os.PathLike[str], out: Any = None, overwrite: bool = False) -> Path:
    """The bar chart of a compare directory (``lswmkc compare``): ``compare.png``.

    One panel per protocol: ACC, NMI, Purity and ARI of every method at its best
    parameter under that protocol (named in the legend), the value above each bar.

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.grid.compare.compare`.
    out : str or Path, optional
        Directory of the PNG (default ``directory/plots``), created if needed.
    overwrite : bool
        Replace a ``compare.png`` in an ``out`` other than ``directory/plots`` (see :func:`plot_sweep`).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    ValueError
        No run has metrics yet (nothing finished, or no ground-truth labels).
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    fig = _compare_figure(directory)
    out = plot_directory(Path(directory), out, overwrite, names=("compare.png",))
    return save_figure(fig, out / "compare.png")


def plot_compare_extras(directory: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                        overwrite: bool = False) -> list[Path]:
    """The running-time and weight figures of a compare directory (the paper's).

    ``running_time.png``: seconds of each method relative to LSWMKC's, log scale
    (:func:`lswmkc_dask.grid.compare.running_times`); ``weight_distributions.png``: the
    kernel weights of MKKM and LSWMKC, each as a fraction of its total
    (:func:`lswmkc_dask.grid.compare.weight_distributions`).

    Parameters
    ----------
    directory : str or Path
        Written by :func:`lswmkc_dask.grid.compare.compare`.
    out : str or Path, optional
        Directory of the PNGs (default ``directory/plots``).
    overwrite : bool
        As :func:`plot_compare`.

    Returns
    -------
    list of pathlib.Path
        The PNGs written (a figure without its data, e.g. no MKKM run, is left out).

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    MatplotlibMissingError
        matplotlib cannot be imported.
    """
    import_matplotlib()
    directory = Path(directory)
    data = data_name(load_compare(directory)[0].get("data"), directory)
    target = plot_directory(directory, out, overwrite, names=("running_time.png", "weight_distributions.png"))
    written = []
    try:
        times = running_times(directory)
    except ValueError:
        times = []
    if times:
        written.append(save_figure(_running_time_figure(times, data), target / "running_time.png"))
    names, weights = weight_distributions(directory)
    if weights:
        fig = new_figure((max(6.0, 0.9 * len(names) + 3), 4.2))
        ax = fig.subplots()
        x = np.arange(len(names))
        width = 0.8 / len(weights)
        for i, (method, w) in enumerate(weights.items()):
            ax.bar(x + (i - (len(weights) - 1) / 2) * width, w, width, label=method,
                   color="C1" if method == "MKKM" else "C3")
        ax.set_xticks(x, names, rotation=30 if max(len(n) for n in names) > 6 else 0, ha="right"
                      if max(len(n) for n in names) > 6 else "center", fontsize="small")
        ax.set(ylabel="kernel weight (fraction of the method's total)", xlabel="base kernel")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(textwrap.fill(f"Kernel weights learned by MKKM and LSWMKC on {data}", 70), fontsize="medium")
        written.append(save_figure(fig, target / "weight_distributions.png"))
    return written


def _running_time_figure(times, data):
    """The figure of ``running_time.png`` (not saved), of :func:`lswmkc_dask.grid.compare.running_times`."""
    _, _, colormaps = import_matplotlib()
    names = [t[0] for t in times]
    ratios = [t[2] for t in times]
    many = len(names) > 6  # Table I's fourteen: labels turned, smaller, one colour each (tab20)
    fig = new_figure((max(7.0, 0.62 * len(names)), 4.6 if many else 4.2))
    ax = fig.subplots()
    colours = colormaps["tab20" if many else "tab10"]
    bars = ax.bar(names, ratios, color=[colours(i % colours.N) for i in range(len(names))])
    for b, (_, sec, ratio) in zip(bars, times, strict=True):
        ax.text(b.get_x() + b.get_width() / 2, ratio, f"{ratio:.3g}x\n({sec:.3g} s)", ha="center",
                va="bottom", fontsize=6 if many else 8)
    if many:
        ax.tick_params(axis="x", labelrotation=40, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set(yscale="log", ylabel="running time relative to LSWMKC (log scale)",
           xlabel="method (its best parameter by honest ACC)", ylim=(min(ratios) / 3, max(ratios) * 5))
    ax.set_title(textwrap.fill(f"Running time on {data}", 70) + "\nforming the kernel that is clustered "
                 "(seconds in brackets)", fontsize="medium")
    return fig


def _compare_figure(directory):
    """The figure of :func:`plot_compare` (not saved); ValueError when no run has metrics."""
    _, _, colormaps = import_matplotlib()
    directory = Path(directory)
    rows = [r for r in comparison_table(directory)
            if any(r.get(f"{k}_{p}") is not None for p in ("honest", "paper") for k in METRIC_NAMES)]
    if not rows:
        raise ValueError(f"no run with metrics in {directory}: nothing to plot yet (run `lswmkc compare` first, "
                         "with labels)")
    colours = colormaps["tab20" if len(rows) > 10 else "tab10"]
    fig = new_figure((11, 4.6))
    axes = fig.subplots(1, 2, sharey=True)
    x = np.arange(len(METRIC_NAMES))
    width = 0.8 / len(rows)
    for ax, protocol, title in zip(axes, ("honest", "paper"),
                                   ("honest protocol (best-inertia k-means)", "paper protocol (max over runs)")):
        for i, r in enumerate(rows):
            vals = [math.nan if (v := r.get(f"{k}_{protocol}")) is None else float(v) for k in METRIC_NAMES]
            best = r.get(f"best_{protocol}")
            label = r["method"] + (f" ({best})" if best and best != "-" else "")
            bars = ax.bar(x - 0.4 + width * (i + 0.5), vals, width, label=label, color=colours(i % colours.N))
            for b, v in zip(bars, vals):
                if not math.isnan(v):
                    ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", va="bottom",
                            fontsize=6, rotation=90)
        ax.set(xticks=x, xticklabels=METRIC_NAMES, ylim=(0, 1.12))
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        # below the axes, clear of the bars (constrained layout makes room)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, frameon=False)
    axes[0].set_ylabel("score at the best parameter (by ACC)")
    data = data_name(read_json(directory / COMPARE_FILE).get("data"), directory)
    fig.suptitle(textwrap.fill(f"LSWMKC and baselines on {data}", 110), fontsize=11)
    return fig

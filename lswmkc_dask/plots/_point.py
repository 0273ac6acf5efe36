"""Which grid point and k of a sweep the heatmaps and evolution figures show, and why
(:func:`sweep_point`, a :class:`SweepPoint`; the reason is in every title).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import Param, ParameterError
from ..grid.results import gamma_key
from ..grid.scoring import run_n_clusters
from ..grid.sweep import SELECTION_CRITERION, GridPoint, exact_text, load_sweep
from ._base import recorded_choice, run_k_values


@dataclass(frozen=True)
class SweepPoint:
    """The grid point and k of a sweep's heatmaps and evolution figures, and why (:func:`sweep_point`).

    Attributes
    ----------
    point : GridPoint
        alpha, n_neighbors and gamma; ``point.name`` is its run directory.
    n_clusters : int or None
        k of the predicted clusters drawn; None only for a run that records no k.
    labels_file : str
        The run's file of these clusters: ``labels_k=K.csv`` in a k grid, else ``labels.csv``.
    reason : str
        Why this (alpha, k), in every figure title and the line ``lswmkc plot`` prints.
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
    """``summary.json``'s ``"selected"`` and its run, or (None, None) when it names none of ``runs``
    (or there is none yet); a ``summary.json`` that is not as lswmkc writes it is refused, naming it.
    """
    chosen = recorded_choice(directory)
    if not chosen:
        return None, None
    alpha, c, gamma = float(chosen["alpha"]), int(chosen["n_neighbors"]), chosen.get("gamma", "auto")
    for p in runs:
        if math.isclose(p.alpha, alpha, rel_tol=1e-12) and p.n_neighbors == c and _same_gamma(p.gamma, gamma):
            return chosen, p
    return None, None


def _choose_point(directory, runs, alpha):
    """(point, its k or None to be read from its run, why) for :func:`sweep_point`; never reads a metric."""
    chosen, selected = _recorded_selection(directory, runs)
    if alpha is None and selected is not None:
        undetermined = "; k not determined: give --n-clusters K" if chosen.get("k_determined") is False else ""
        return selected, int(chosen["n_clusters"]), (
            f"the grid point selected without labels (the largest {chosen.get('criterion', SELECTION_CRITERION)}, "
            f"{float(chosen['score']):.4f}; summary.json \"selected\"{undetermined})")
    if alpha is None:
        autos = [p for p in runs if p.gamma == "auto"] or list(runs)
        point = min(autos, key=lambda p: (p.alpha, p.n_neighbors, gamma_key(p.gamma)))
        return point, None, ("summary.json records no selection (the sweep has not scored its runs yet; rerun it "
                             "to finish): the smallest alpha")
    cand = [p for p in runs if math.isclose(p.alpha, float(alpha), rel_tol=1e-9)]
    if not cand:
        avail = ", ".join(f"{a:g}" for a in sorted({p.alpha for p in runs}))
        raise ValueError(f"alpha={float(alpha):g} is not in the sweep {directory}; alphas available: {avail}")
    cand = [p for p in cand if p.gamma == "auto"] or cand
    if selected in cand:
        return selected, int(chosen["n_clusters"]), (f"alpha={exact_text(alpha)} as asked, the grid point selected "
                                                     "without labels there (summary.json)")

    def score(p):
        value = run_n_clusters(runs[p])[1]
        return -math.inf if value is None else float(value)

    point = max(sorted(cand, key=lambda p: (p.n_neighbors, gamma_key(p.gamma))), key=score)
    why = f"alpha={exact_text(alpha)} as asked"
    if len(cand) > 1:
        why += (f", c={point.n_neighbors} of the largest {SELECTION_CRITERION} at this alpha"
                if score(point) > -math.inf else f", the smallest c (no {SELECTION_CRITERION} yet)")
    return point, None, why


def _choose_k(point, report, k, n_clusters, why):
    """(k, why) of :func:`sweep_point` at ``point``: ``n_clusters`` if given, else ``k``, else the run's own."""
    ks = run_k_values(report)
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

    Never chosen by a metric: by default the point ``summary.json`` records as
    ``"selected"`` (chosen without labels), else (a sweep not yet scored) the smallest
    alpha. With ``alpha``: the selected point if it is at that alpha, else the run there
    of the learned gamma and the largest label-free score, at the k chosen for that run
    without labels (:func:`lswmkc_dask.grid.sweep.run_n_clusters`).

    Parameters
    ----------
    directory : str or Path
        A sweep directory.
    alpha : float, optional
        One of the sweep's alphas.
    n_clusters : int, optional
        One of the run's k (a k grid's, or its one k).
    runs : dict, optional
        :func:`lswmkc_dask.grid.sweep.load_sweep`'s runs (read from ``directory`` if None).

    Returns
    -------
    SweepPoint

    Raises
    ------
    FileNotFoundError
        ``directory`` holds no ``sweep.json``.
    ValueError
        No finished grid point; ``alpha`` or ``n_clusters`` is not the sweep's (the
        message lists those available; :class:`lswmkc_dask.errors.ParameterError` for k).
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
    if os.path.lexists(directory / "labels_true.csv"):
        why += " (the labels play no part in this choice)"
    k_grid = bool(report.get("by_n_clusters"))
    labels_file = f"labels_k={k}.csv" if k_grid and k is not None else "labels.csv"
    return SweepPoint(point, k, labels_file, why, k_grid)


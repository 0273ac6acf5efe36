"""The results of a sweep: its grid points and run directories, the summary table and the label-free choice.

:class:`GridPoint` names a run directory; :func:`load_sweep` reads a sweep's runs back;
the summary (``summary.json``/``summary.csv``) holds the table and the grid point chosen
without labels (:mod:`lswmkc_dask.grid.scoring`, :mod:`lswmkc_dask.grid.selection`), and
:func:`selected_model` builds that point's estimator.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.postprocess import factor_embeddings
from ..errors import Param, ParameterError, Verbatim, with_message
from ..estimator import LSWMKC
from ..io.results import read_json, report_problem, summary_problem, sweep_config_problem
from ..io.run_arrays import read_silhouettes, run_arrays
from ..report.metrics import METRICS, PROTOCOLS, repeat_summary_columns
from ..report.record import labels_csv, write_fit_output
from .points import write_table_files
from .scoring import (
    SELECTION_CRITERION,
    SILHOUETTES,
    exact_text,
)
from .scoring import labels_file as _labels_file
from .scoring import predicted_labels as _predicted_labels
from .scoring import run_ks as _run_ks
from .selection import (
    K_TOLERANCE,
    PS_THRESHOLD,
    VOTES,
    agreed_n_clusters,
    choose_n_clusters,
    k_grid_edge,
    medoid_partition,
    near_ties,
    prediction_strength,
)


@dataclass(frozen=True)
class GridPoint:
    """One (alpha, n_neighbors, gamma) of a sweep.

    ``gamma`` is "auto" (the learned per-sample gamma, the default) or a float (one
    gamma for every sample, :meth:`LSWMKC` ``gamma``). ``run_name`` (not compared) is
    the run directory's name when the point was read from disk (:func:`load_sweep`); a
    directory of an older version may name it differently from :attr:`name`'s rule.
    """

    alpha: float
    n_neighbors: int
    gamma: float | str = "auto"
    run_name: str | None = field(default=None, compare=False, repr=False)

    @property
    def name(self):
        """Directory name, e.g. ``alpha=8_c=5`` (``alpha=8_c=5_gamma=0.5`` for a scalar
        gamma): unique for distinct values (:func:`exact_text`).
        """
        if self.run_name:
            return self.run_name
        tail = "" if self.gamma == "auto" else f"_gamma={exact_text(self.gamma)}"
        return f"alpha={exact_text(self.alpha)}_c={self.n_neighbors}{tail}"


def write_point(runs_dir, point, output):
    """Write one grid point's fit ``output`` (report, (fitted attributes, parameters) of its model, labels of
    each k) to ``runs_dir / point.name``:
    its report, labels and ``model.safetensors`` (``LSWMKC.load`` reads any run; the model of the fit's first k).
    """
    report, model, by_k = output
    target = runs_dir / point.name
    if os.path.lexists(target):  # a name of an older version's rounding (alpha=0.333333 for 1/3)
        raise with_message(
            FileExistsError, "{} already holds a run of another alpha than {!r} (its name was rounded by an older "
            "version of lswmkc); use another output directory, or {} to replace it", target, point.alpha,
            Param("overwrite", True),
        )
    extra = {_labels_file(k): labels_csv(y) for k, y in by_k.items()}
    write_fit_output(target, report, model[0]["labels_"], model=model, extra_files=extra)


def summary_rows(point, report):
    """The summary rows of one run: one per k (one row without a k grid)."""
    per_k = report.get("by_n_clusters") or {str(report["params"]["n_clusters"]): report}
    rows = []
    for k, entry in sorted(per_k.items(), key=lambda kv: int(kv[0])):
        label_free = entry.get("label_free") or {}
        row = {
            "alpha": point.alpha,
            "n_neighbors": point.n_neighbors,
            "n_iter": report["n_iter"],
            "seconds": report["iteration_seconds_total"],
            **{f"{name}_{protocol}": entry.get("metrics", {}).get(protocol, {}).get(name)
               for protocol in PROTOCOLS for name in METRICS},
            SELECTION_CRITERION: label_free.get(SELECTION_CRITERION),
            "n_clusters": int(k),  # last: the columns before k grids keep their places
            "gamma": point.gamma,
            **{vote: label_free.get(vote) for vote in VOTES},  # the other label-free scores, after the columns above
        }
        if entry.get("repeats"):  # mean and std over the k-means seeds (repeats > 1), after every other column
            row.update(repeat_summary_columns(entry["repeats"]))
        rows.append(row)
    return rows


def _same_point(row, chosen):
    return (row["alpha"], row["n_neighbors"], row.get("n_clusters"), row.get("gamma", "auto")) == (
        chosen["alpha"], chosen["n_neighbors"], chosen.get("n_clusters"), chosen.get("gamma", "auto"))


def summary_table(rows: list[dict], selected: dict | None = None) -> str:
    """Aligned text table of sweep rows, the selected one marked.

    Parameters
    ----------
    rows : list of dict
        A summary's ``"rows"`` (alpha, c, k when several, iterations, seconds, metrics, the
        label-free score); a k grid without metrics (no labels) is laid out per fit and k
        (:func:`score_table`, the marks after the scores).
    selected : dict, optional
        A summary's ``"selected"``: its row marked ``*``, its near-ties ``~``, the consensus
        over them ``c`` when it is another row.

    Returns
    -------
    str
        The table and a legend of the marks; where the k is not determined
        (``selected["k_determined"]`` false) a line with both candidates and how to give k,
        and one more at an edge of the k grid (``selected["k_edge"]``).
    """
    k_grid = len({r.get("n_clusters") for r in rows}) > 1
    g_grid = len({str(r.get("gamma", "auto")) for r in rows}) > 1
    columns = _fit_columns(k_grid, g_grid) + [(f"{k}_{p}", f"{k}/{p[0]}") for p in PROTOCOLS for k in METRICS]
    cols, head = zip(*columns, (SELECTION_CRITERION, "silhouette"), strict=True)
    if k_grid and all(r.get(c) is None for r in rows for c in cols if c.endswith(("_honest", "_paper"))):
        lines = score_table(rows, lambda r: _mark(r, selected), g_grid)
    else:
        lines = ["  " + "  ".join(f"{h:>9}" for h in head)]
        lines += [_mark(r, selected) + " " + "  ".join(_cell(c, r.get(c)) for c in cols) for r in rows]
    if selected:
        what = "alpha and k" if k_grid else "alpha"
        lines.append(f"* selected without labels ({what}): the largest {SELECTION_CRITERION} (silhouette of the "
                     "partition on the average base kernel)")
        if selected.get("k_determined") is False:
            lines.append(f"  k not determined: * is at k={selected['n_clusters']}, prediction strength "
                         f"{_ps_verdict(selected)}; give k (--n-clusters K, or selected_model(result, n_clusters=K))")
            if selected.get("k_edge"):
                lines.append(f"  k at the edge of the grid: {selected['k_edge']}")
        if len(selected.get("near_ties") or []) > 1:
            lines.append("~ near-tie: within one standard error of the selected score (paired over samples)")
        if selected.get("consensus") and not _same_point(selected["consensus"], selected):
            lines.append("c consensus: the near-tie whose partition agrees best with the others' (mean ARI)")
    return "\n".join(lines)


def _ps_verdict(chosen):
    """What prediction strength says of the k of a summary's ``"selected"``: no stable k, or its k."""
    k_ps = chosen["k_candidates"]["prediction_strength"]
    return "finds no stable k" if k_ps is None else f"says k={k_ps}"


def _mark(row, selected):
    if not selected:
        return " "
    if _same_point(row, selected):
        return "*"
    if selected.get("consensus") and _same_point(row, selected["consensus"]):
        return "c"
    return "~" if any(_same_point(row, t) for t in selected.get("near_ties") or []) else " "


def _fit_columns(k=False, gamma=False):
    """The (summary column, heading) pairs of a fit in the text tables: alpha, c, k (``k``), gamma (``gamma``),
    iterations, seconds.
    """
    return ([("alpha", "alpha"), ("n_neighbors", "c")] + ([("n_clusters", "k")] if k else [])
            + ([("gamma", "gamma")] if gamma else []) + [("n_iter", "iter"), ("seconds", "seconds")])


def _cell(column, value):
    """A cell of the text tables, 9 wide: ``-`` for None, alpha and gamma as :func:`exact_text`."""
    if value is None:
        return f"{'-':>9}"
    if column in ("n_neighbors", "n_iter", "n_clusters"):
        return f"{int(value):>9d}"
    if column == "alpha" or (column == "gamma" and value != "auto"):
        return f"{exact_text(value):>9}"
    if column == "gamma":
        return f"{value:>9}"
    if column == "seconds":
        return f"{value:>9.2f}"
    return f"{value:>9.4f}"


def score_table(rows: list[dict], mark: Callable[[dict], str], gamma: bool = False) -> list[str]:
    """The lines of the table of :data:`SELECTION_CRITERION` per fit (rows) and k (columns).

    What a k-grid sweep without labels shows in place of rows of empty metrics: one line per fit
    (alpha, c, gamma, iterations, seconds) and the score of each k beside it.

    Parameters
    ----------
    rows : list of dict
        Summary rows (``alpha``, ``n_neighbors``, ``gamma``, ``n_clusters``, ``n_iter``,
        ``seconds``, :data:`SELECTION_CRITERION`), in the order the fits are listed.
    mark : callable
        ``mark(row)``: one character written after the row's score (``"*"``, ``"~"``,
        ``"c"`` or ``" "``).
    gamma : bool, default False
        Add a gamma column (a grid of several gammas).

    Returns
    -------
    list of str
        The heading, the column names and one line per fit; ``-`` for a score missing.
    """
    ks = sorted({int(r["n_clusters"]) for r in rows})
    fits: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        fits.setdefault((str(r.get("gamma", "auto")), r["n_neighbors"], r["alpha"]), {})[int(r["n_clusters"])] = r
    cols, head = zip(*_fit_columns(gamma=gamma), strict=True)
    lines = [f"  {SELECTION_CRITERION} (the label-free score) per fit and k; no labels, so no metrics",
             "  " + "  ".join(f"{h:>9}" for h in head) + "".join(f"  {f'k={k}':>9} " for k in ks)]
    for by_k in fits.values():
        first = {"gamma": "auto", **next(iter(by_k.values()))}
        line = "  " + "  ".join(_cell(c, first.get(c)) for c in cols)
        for k in ks:
            score = by_k[k].get(SELECTION_CRITERION) if k in by_k else None
            line += f"  {'-':>9} " if score is None else f"  {score:>9.4f}{mark(by_k[k])}"
        lines.append(line.rstrip())
    return lines


def selection_line(chosen: dict) -> str:
    """The one-line summary of a sweep's choice, how sure it is, and the votes.

    Parameters
    ----------
    chosen : dict
        A summary's ``"selected"`` (:func:`sweep`).

    Returns
    -------
    str
        ``selected without labels: alpha=A c=C k=K (criterion score); clear`` or
        ``...; near-tie among alpha=A k=K, ...`` with the consensus point, the votes
        that disagree, and with a k grid the k of prediction strength; where the k rule
        (:func:`lswmkc_dask.grid.selection.agreed_n_clusters`) reports no k,
        ``selected without labels: k not determined (...): give k ...`` naming both
        candidates (``k at the edge of the grid, not determined (...)`` where they agree at an
        edge of the k grid, ``"k_edge"`` after it); with labels, the choice's honest ACC and regret.
    """
    undetermined = chosen.get("k_determined") is False
    line = _k_undetermined_head(chosen) if undetermined else _head(chosen)
    ties = chosen.get("near_ties") or []
    if len(ties) > 1:
        line += "; near-tie among " + ", ".join(_short(t) for t in ties)
        if chosen.get("consensus"):
            line += f" (consensus {_short(chosen['consensus'])})"
    elif ties:
        line += "; clear"
    against = [f"{name} votes {_short(v)}" for name, v in (chosen.get("votes") or {}).items() if not v["agrees"]]
    if against:
        line += "; disagreeing: " + ", ".join(against)
    k_choice = chosen.get("k_choice")
    if k_choice and not undetermined:
        k = k_choice["n_clusters"]
        if k is None:
            line += f"; k not determined (prediction strength below {k_choice['threshold']} at every k >= 2): give k"
        else:
            line += f"; prediction strength {'agrees on' if k == chosen['n_clusters'] else 'says'} k={k}"
    if chosen.get("regret_honest_ACC_points") is not None:
        line += (f"; with your labels: honest ACC {chosen['ACC_honest']:.4f}, "
                 f"{chosen['regret_honest_ACC_points']:.2f} points below the grid's best at this k")
        if chosen.get("n_clusters_scores"):
            line += (f" ({chosen['regret_honest_ACC_points_all_k']:.2f} below the best of every k; "
                     f"the labels have {chosen['n_clusters_true']} classes)")
    return line


def _gamma_text(chosen):
    return "" if chosen.get("gamma", "auto") == "auto" else f" gamma={exact_text(chosen['gamma'])}"


def _head(chosen):
    return (f"selected without labels: alpha={exact_text(chosen['alpha'])} c={chosen['n_neighbors']} "
            f"k={chosen['n_clusters']}{_gamma_text(chosen)} ({chosen['criterion']} {chosen['score']:.4f})")


def _k_undetermined_head(chosen):
    """The start of the line where the k rule reports no k: both candidates and how to give k."""
    k_ps = chosen["k_candidates"]["prediction_strength"]
    threshold = (chosen.get("k_choice") or {}).get("threshold", PS_THRESHOLD)
    ps = f"no k >= 2 reaches prediction strength {threshold}" if k_ps is None else f"prediction strength says k={k_ps}"
    edge = chosen.get("k_edge")
    agreed = agreed_n_clusters(chosen["n_clusters"], k_ps) is not None
    what = "k at the edge of the grid, not determined" if edge and agreed else "k not determined"
    top = (chosen.get("default") or {}).get("criterion_pick") or chosen  # before the default is weighed
    top = {key: top.get(key, chosen.get(key)) for key in ("score", "alpha", "n_neighbors", "n_clusters", "gamma")}
    return (f"selected without labels: {what} (the largest {chosen['criterion']} "
            f"{top['score']:.4f} is at alpha={exact_text(top['alpha'])} c={top['n_neighbors']} "
            f"k={top['n_clusters']}{_gamma_text(top)}; {ps}): give k (--n-clusters K, or "
            "selected_model(result, n_clusters=K))" + (f"; {edge}" if edge else ""))


def _short(point):
    return f"alpha={exact_text(point['alpha'])} k={point['n_clusters']}"


def _best(rows, key):
    scored = [r for r in rows if r.get(key) is not None]
    r = max(scored, key=lambda r: (r[key], -r["alpha"]), default=None)
    return None if r is None else {**_point_of(r), key: r[key]}


def _point_of(row):
    return {"alpha": row["alpha"], "n_neighbors": row["n_neighbors"], "n_clusters": row["n_clusters"],
            "gamma": row.get("gamma", "auto")}


def _key(row):
    """A partition's identity: (alpha, n_neighbors, gamma, k)."""
    return float(row["alpha"]), int(row["n_neighbors"]), str(row.get("gamma", "auto")), int(row["n_clusters"])


def _order(r, criterion=SELECTION_CRITERION):
    """Sort key of the choice: the largest score; ties to the smaller c, alpha, k."""
    return r[criterion], -r["n_neighbors"], -r["alpha"], -r["n_clusters"]


def _selected(rows, n_clusters_true=None, evidence=None):
    """The grid point chosen without labels: the largest :data:`SELECTION_CRITERION` (:func:`_order`).

    Never reads a metric to choose; with a k grid ``n_clusters_scores`` (the best score at each
    k); with metrics in the rows the honest ACC there and its regret in ACC points (at the chosen
    k, and over every k), and ``n_clusters_true`` for comparison. With ``evidence``
    (:func:`_evidence`) also :func:`_confidence`'s entries and, with a k grid, :func:`_k_choice`'s
    and :func:`_k_decision`'s.
    """
    scored = [r for r in rows if r.get(SELECTION_CRITERION) is not None]
    if not scored:
        return None
    best = max(scored, key=_order)
    ks = sorted({r["n_clusters"] for r in scored})
    chosen = {
        **_point_of(best),
        "criterion": SELECTION_CRITERION,
        "score": best[SELECTION_CRITERION],
        "scores": [{**_point_of(r), "score": r[SELECTION_CRITERION]} for r in scored],
    }
    if len(ks) > 1:
        chosen["n_clusters_scores"] = {
            str(k): max(r[SELECTION_CRITERION] for r in scored if r["n_clusters"] == k) for k in ks
        }
    if evidence:
        chosen.update(_confidence(scored, best, evidence))
        if len(ks) > 1:
            chosen["k_choice"] = _k_choice(scored, evidence)
            chosen.update(_k_decision(best["n_clusters"], chosen["k_choice"]["n_clusters"], ks))
    chosen.update(_regret(rows, best))
    if "ACC_honest" in chosen and len(ks) > 1:
        overall = max(r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None)
        chosen["regret_honest_ACC_points_all_k"] = round(100.0 * (overall - best["ACC_honest"]), 4)
    if n_clusters_true is not None:
        chosen["n_clusters_true"] = int(n_clusters_true)
    return chosen


def _confidence(scored, best, evidence):
    """How sure the choice is: ``near_ties`` (:func:`lswmkc_dask.grid.selection.near_ties`, best
    first), ``confidence`` ("clear" or "near-tie"), ``votes`` (each of
    :data:`lswmkc_dask.grid.selection.VOTES`'s choice, and whether it ``agrees``); points without
    per-sample silhouettes are counted in ``not_compared``.
    """
    have = [r for r in scored if _key(r) in evidence]
    out: dict[str, Any] = {}
    if best in have and len(have) > 1:
        ties = near_ties(np.stack([evidence[_key(r)][2] for r in have]), have.index(best))
        tied = sorted((i for i in range(len(have)) if ties["tied"][i]), key=lambda i: _order(have[i]), reverse=True)
        out["near_ties"] = [{**_point_of(have[i]), "score": have[i][SELECTION_CRITERION],
                             "difference": float(ties["difference"][i]),
                             "standard_error": float(ties["standard_error"][i])} for i in tied]
        out["tie_rule"] = ("paired one-standard-error rule: a point is a near-tie when the best's mean per-sample "
                           "silhouette exceeds its own by at most the standard error of the paired differences")
    else:
        out["near_ties"] = [{**_point_of(best), "score": best[SELECTION_CRITERION]}]
    out["confidence"] = "clear" if len(out["near_ties"]) == 1 else "near-tie"
    if len(have) < len(scored):
        out["not_compared"] = len(scored) - len(have)
    tied_keys = {_key(t) for t in out["near_ties"]}
    out["votes"] = {}
    for crit in VOTES:
        cand = [r for r in scored if r.get(crit) is not None]
        if cand:
            pick = max(cand, key=lambda r: _order(r, crit))
            out["votes"][crit] = {**_point_of(pick), "score": pick[crit], "agrees": _key(pick) in tied_keys}
    return out


def _k_choice(scored, evidence):
    """The k of prediction strength: :func:`lswmkc_dask.grid.selection.prediction_strength` on
    the embedding at k of the best-scored point at each k (its W, ``kstar_factor_`` of its model file), seeded by
    the sweep's ``random_state``; :func:`lswmkc_dask.grid.selection.choose_n_clusters` of those.
    """
    strengths, points = {}, {}
    by_run: dict[Path, list[tuple[int, dict]]] = {}
    for k in sorted({r["n_clusters"] for r in scored}):
        at_k = max((r for r in scored if r["n_clusters"] == k), key=_order)
        run = evidence.get(_key(at_k))
        if run is not None:  # (a scored run: its model file holds its silhouettes)
            by_run.setdefault(run[0], []).append((k, at_k))
    for run_dir, wanted in by_run.items():  # one SVD of each run's factor for all its k
        embeddings = factor_embeddings(run_arrays(run_dir)[1], [k for k, _ in wanted])  # [1]: the factor
        for k, at_k in wanted:
            if embeddings[k].shape[0] >= 2 * k:
                strengths[str(k)] = prediction_strength(embeddings[k], k, random_state=evidence.random_state)
                points[str(k)] = _point_of(at_k)
    strengths = dict(sorted(strengths.items(), key=lambda kv: int(kv[0])))
    k = choose_n_clusters({int(key): v for key, v in strengths.items()})
    return {"criterion": "prediction_strength", "threshold": PS_THRESHOLD, "strengths": strengths,
            "n_clusters": k, "point": points.get(str(k)) if k is not None else None,
            "how": ("the largest k whose prediction strength (Tibshirani & Walther 2005) at its best-scored alpha "
                    f"reaches {PS_THRESHOLD}" if k is not None else
                    f"k not determined: no k >= 2 reaches prediction strength {PS_THRESHOLD}; give k")}


def _k_decision(k_score, k_stability, ks):
    """Whether the sweep reports its k: ``k_determined`` where the silhouette's ``k_score`` and
    prediction strength's ``k_stability`` agree (:func:`lswmkc_dask.grid.selection.agreed_n_clusters`)
    and neither is at an edge of ``ks`` (``k_edge``, :func:`_k_edge`); ``k_candidates``; ``k_how``.
    """
    k_score = int(k_score)
    agreed = agreed_n_clusters(k_score, k_stability)
    edge = _k_edge(k_score, k_stability, ks)
    ps = f"no k >= 2 reaches prediction strength {PS_THRESHOLD}" if k_stability is None else (
        f"prediction strength says k={k_stability}")
    give = "give k: selected_model(result, n_clusters=K), or lswmkc sweep/fit --n-clusters K"
    if agreed is None:
        apart = "" if k_stability is None else f" (more than {K_TOLERANCE} apart)"
        how = f"k not determined: the largest {SELECTION_CRITERION} is at k={k_score} and {ps}{apart}; {give}" + (
            f"; {edge}" if edge else "")
    elif edge:
        how = f"k not determined: {edge}; the largest {SELECTION_CRITERION} is at k={k_score} and {ps}; or {give}"
    else:
        how = (f"k={k_score}: the k of the largest {SELECTION_CRITERION}, and {ps} (within {K_TOLERANCE}: a k is "
               "reported only where the two agree, inside the k grid)")
    return {"k_determined": agreed is not None and edge is None,
            "k_candidates": {"silhouette": k_score, "prediction_strength": k_stability}, "k_edge": edge, "k_how": how}


def _k_edge(k_score, k_stability, ks):
    """Where the silhouette's k, or prediction strength's at the top, is at an edge of the k grid ``ks``
    (:func:`lswmkc_dask.grid.selection.k_grid_edge`): how to widen it (3 k beyond the edge, not below 2), or None.
    """
    side = k_grid_edge(k_score, ks)
    top = k_stability is not None and k_grid_edge(k_stability, ks) == "largest"
    if side is None and not top:
        return None
    lo, hi = min(ks), max(ks)
    grid = f"{lo}..{hi}" if sorted(ks) == list(range(lo, hi + 1)) else ", ".join(map(str, sorted(ks)))
    lo, hi = max(2, lo - 3) if side == "smallest" else lo, hi + 3 if top or side == "largest" else hi
    what, why = (f"k={k_score}", f"a {'larger' if side == 'largest' else 'smaller'} k may score higher") if side else (
        f"prediction strength's k={k_stability}", "a larger k may be as stable")
    return (f"{what} is at the edge of the k grid {grid} ({why}): widen it (e.g. --n-clusters "
            f"{' '.join(map(str, range(lo, hi + 1)))}, or sweep(..., n_clusters=range({lo}, {hi + 1})))")


def _consensus(summary_selected, rows, evidence):
    """The medoid of the near-ties' partitions by ARI (:func:`lswmkc_dask.grid.selection.medoid_partition`):
    its point, run and labels file, score and mean ARIs (with labels its honest ACC and regret), or None.
    """
    ties = summary_selected.get("near_ties") or []
    found = [evidence.get(_key(t)) for t in ties]
    if not ties or any(f is None for f in found):
        return None
    index, agreement = medoid_partition([_predicted_labels(run, name) for run, name, _ in found])
    t = ties[index]
    out = {**_point_of(t), "score": t["score"], "run": found[index][0].name, "labels": found[index][1],
           "of": len(ties), "mean_ari": [float(a) for a in agreement],
           "how": "the near-tie whose partition agrees best (mean ARI) with the other near-ties' partitions"}
    return {**out, **_regret(rows, next((r for r in rows if _key(r) == _key(t)), {}))}


def _regret(rows, row):
    """``row``'s honest ACC and its regret in ACC points against the best of ``rows`` at its k ({} without)."""
    if row.get("ACC_honest") is None:
        return {}
    same_k = [r["ACC_honest"] for r in rows if r.get("ACC_honest") is not None and r["n_clusters"] == row["n_clusters"]]
    return {"ACC_honest": row["ACC_honest"],
            "regret_honest_ACC_points": round(100.0 * (max(same_k) - row["ACC_honest"]), 4)}


class _Evidence(dict):
    """(alpha, c, gamma, k) -> (run directory, labels file name, per-sample silhouettes), and the seed."""

    random_state: int = 0


def _evidence(out):
    """Every scored partition's per-sample silhouettes (:data:`SILHOUETTES` of its run's model file) and where
    its labels are.
    """
    found = _Evidence()
    config, runs = load_sweep(out)  # (FileNotFoundError without sweep.json)
    seed = config.get("random_state")
    found.random_state = int(seed) if isinstance(seed, int) else 0
    for point, report in runs.items():
        run = out / "runs" / point.name
        samples = read_silhouettes(run)
        ks = _run_ks(report)
        if samples is None or samples.shape[0] != len(ks):
            continue
        for k, values in zip(ks, samples):
            n_clusters = int(report["params"]["n_clusters"]) if k is None else int(k)
            labels = "labels.csv" if k is None else _labels_file(k)
            found[_key({**asdict(point), "n_clusters": n_clusters})] = (run, labels, values)
    return found


def gamma_key(gamma):
    """A sort key of a gamma: ``"auto"`` as 0.0, else the number."""
    return 0.0 if gamma == "auto" else float(gamma)


def write_summary(out, rows, n_clusters_true=None):
    """Write and return the sweep summary of ``rows`` (``summary.json``, ``summary.csv`` in ``out``)."""
    rows = sorted(rows, key=lambda r: (str(r.get("gamma", "auto")) != "auto", gamma_key(r.get("gamma", "auto")),
                                       r["n_neighbors"], r["alpha"], r["n_clusters"]))
    evidence = _evidence(Path(out))
    selected = _selected(rows, n_clusters_true, evidence)
    if selected and evidence:
        selected["consensus"] = _consensus(selected, rows, evidence)
    summary = {"rows": rows, "selected": selected,
               **{f"best_by_{protocol}_ACC": _best(rows, f"ACC_{protocol}") for protocol in PROTOCOLS}}
    write_table_files(Path(out), "summary", summary, list(dict.fromkeys(k for r in rows for k in r)))
    return summary


def selected_model(result: dict, n_clusters: int | None = None, consensus: bool = False, **params: Any) -> Any:
    """An unfitted :class:`LSWMKC` with the grid point a sweep selected without labels.

    Parameters
    ----------
    result : dict, str or Path
        What :func:`sweep` returned, or a sweep directory (its ``summary.json``).
    n_clusters : int, optional
        A k of the sweep's k grid: its best point at this k (ties as the sweep's own choice).
        Default: the sweep's choice over every k, where its k is determined
        (``"selected"["k_determined"]``).
    consensus : bool, default False
        The consensus of the near-ties (``"selected"["consensus"]``) in place of the best-scored
        point; its fit gives the partition of its run's labels file. Not with ``n_clusters``.
    **params
        Further :class:`LSWMKC` parameters (``max_iter``, ``client``, ...); not ``alpha``,
        ``n_neighbors`` or ``gamma``, which the sweep chose.

    Returns
    -------
    LSWMKC
        With the ``alpha``, ``n_neighbors``, ``gamma`` and ``n_clusters`` of that point; fit it on
        the same data.

    Raises
    ------
    FileNotFoundError
        A directory without ``summary.json``.
    ValueError
        (:class:`~lswmkc_dask.errors.ParameterError`) The sweep selected nothing; ``n_clusters``
        is not a k of the sweep (the message lists them); ``alpha``, ``n_neighbors`` or ``gamma``
        in ``params``; no ``n_clusters`` where the sweep's k is not determined (the message names
        both candidates); ``consensus=True`` without a consensus in the summary or with ``n_clusters``.

    Examples
    --------
    >>> from lswmkc_dask import selected_model  # with the result of sweep(...): see its Examples
    >>> selected_model({"selected": {"alpha": 8.0, "n_neighbors": 5, "n_clusters": 15, "gamma": "auto"}}, n_init=10)
    LSWMKC(alpha=8.0, n_clusters=15, n_init=10)
    """
    if not isinstance(result, dict):
        result = read_summary(result)
    chosen = result.get("selected")
    if not chosen:
        raise ValueError("the sweep selected no grid point (none finished); run or resume it first")
    fixed = sorted(set(params) & {"alpha", "n_neighbors", "gamma"})
    if fixed:
        raise ParameterError(
            "selected_model() takes alpha, n_neighbors and gamma from the sweep's choice, not from its arguments "
            "(got {}); for another grid point build LSWMKC(alpha=..., n_neighbors=..., n_clusters=...) directly",
            ", ".join(fixed),
        )
    if n_clusters is not None:
        if consensus:
            raise ParameterError(
                "consensus=True and {} together: the consensus is over the near-ties of the sweep's own choice, not "
                "of one k; pass one of them", Param("n_clusters", n_clusters))
        chosen = _selected_at_k(result, n_clusters)
    else:
        _check_k_determined(chosen)
        if consensus and not chosen.get("consensus"):
            raise ParameterError(
                "consensus=True: this sweep's summary has no consensus of near-ties (written by a version before it, "
                "or the model files of its runs lack {}); resume the sweep (the same call, or lswmkc sweep with the "
                "same --output) to compute it", SILHOUETTES,
            )
        chosen = chosen["consensus"] if consensus else chosen
    return LSWMKC(n_clusters=chosen.get("n_clusters"), alpha=chosen["alpha"], n_neighbors=chosen["n_neighbors"],
                  gamma=chosen.get("gamma", "auto"), **params)


def _selected_at_k(result, n_clusters):
    """The summary's choice among the grid points of k = ``n_clusters`` (an error naming the sweep's k)."""
    scored = [r for r in result.get("rows") or [] if r.get(SELECTION_CRITERION) is not None]
    ks = sorted({int(r["n_clusters"]) for r in scored})
    at_k = [r for r in scored if r["n_clusters"] == n_clusters and not isinstance(n_clusters, bool)]
    if not at_k:
        raise ParameterError(
            "{} = {!r} is not a k of this sweep: it selected among k = {}; pass one of them, or sweep again "
            "with a k grid that holds it (sweep(..., n_clusters=[...]), lswmkc sweep --n-clusters K ...)",
            Param("n_clusters"), n_clusters, ", ".join(map(str, ks)) or "(none scored)",
        )
    return _selected(at_k)


def _check_k_determined(chosen):
    """Refuse the sweep's k where its k rule did not determine one (``"k_determined"`` false)."""
    if chosen.get("k_determined") is not False:
        return
    ps = _ps_verdict(chosen)
    edge = f"; {chosen['k_edge']}" if chosen.get("k_edge") else ""
    raise ParameterError(
        "the sweep did not determine k: the largest {} is at k={} (alpha={}) and prediction strength {}; "
        "give k: selected_model(result, {}) builds the point chosen at that k (a k of the sweep's grid: {}){}",
        SELECTION_CRITERION, chosen["n_clusters"], exact_text(chosen["alpha"]), ps, Param("n_clusters", Verbatim("K")),
        ", ".join(str(k) for k in sorted(int(k) for k in chosen.get("n_clusters_scores") or {})), edge,
    )


def read_summary(directory: str | os.PathLike[str]) -> dict:
    """The ``summary.json`` of a finished sweep directory, checked.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        No ``summary.json`` in ``directory``.
    lswmkc_dask.io.results.ResultFileError
        (a ValueError) Not a regular file or not as lswmkc writes it (:func:`lswmkc_dask.io.results.summary_problem`).
    """
    return _read_sweep_file(directory, "summary.json", summary_problem, "a finished sweep directory")


def _read_sweep_file(directory, name, check, what):
    """``directory / name`` read and checked by ``check``; a FileNotFoundError saying ``directory`` is not ``what``."""
    path = Path(directory) / name
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{directory} is not {what} (no {name})")
    return read_json(path, check)


def load_sweep(directory: str | os.PathLike[str]) -> tuple[dict, dict]:
    """Read a sweep directory.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    config : dict
        ``sweep.json``.
    runs : dict
        ``GridPoint -> report dict`` for every finished grid point; each point's
        ``name`` is its run directory's (``directory / "runs" / point.name``).

    Raises
    ------
    FileNotFoundError
        No ``sweep.json`` in ``directory``.
    lswmkc_dask.io.results.ResultFileError
        (a ValueError) ``sweep.json`` or a run's ``report.json`` is not a regular file
        (a FIFO is never waited on) or not as lswmkc writes it; the message names it.
    """
    directory = Path(directory)
    config = _read_sweep_file(directory, "sweep.json", sweep_config_problem, "a sweep directory")
    runs = {}
    for d in sorted((directory / "runs").glob("alpha=*_c=*")):
        rep = d / "report.json"
        if os.path.lexists(rep):
            report = read_json(rep, report_problem)
            gamma = report["params"].get("gamma", "auto")
            point = GridPoint(float(report["params"]["alpha"]), int(report["params"]["n_neighbors"]),
                              gamma if gamma == "auto" else float(gamma))
            runs[replace(point, run_name=None if d.name == point.name else d.name)] = report
    return config, runs



"""LSWMKC against the paper's baselines on the same data, the same way (``lswmkc compare``).

One resumable directory, as a sweep's (:mod:`lswmkc_dask.grid.points`): ``compare.json``,
a run directory per baseline run (:mod:`lswmkc_dask.grid.baselines`), ``lswmkc/`` (an
``lswmkc sweep`` directory over the alpha grid) and the table, ``comparison.csv``/``.json``:
one row per method, under each protocol the parameter of highest ACC on its grid
(:data:`LEGEND`; docs/user-guide/compare.md).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._params import DEFAULTS
from .._params import METHODS as METHODS
from .._validate import validate, validated
from ..engine.progress import Progress
from ..engine.route import open_kernels
from ..engine.scheduler import workers_of
from ..engine.where import Where
from ..errors import Param, ParameterError
from ..io import check_labels, count_classes
from ..io.output import check_output
from ..io.results import read_json
from ..report.metrics import METRICS, PROTOCOLS, repeat_seeds, repeat_summary_columns
from ..report.record import PROTOCOL_DESCRIPTIONS, to_json_ready, write_fit_output
from .baselines import DEFAULT_TAUS, neighbour_count, run_baselines
from .competitors import COMPETITORS, competitor_grid, plain, run_competitors
from .points import input_fingerprint, input_paths, open_grid_directory, write_table_files
from .sweep import DEFAULT_ALPHAS, GridPoint, check_device, exact_text, load_sweep, sweep

#: Settings of a compare directory (its presence makes a directory a compare directory).
COMPARE_FILE = "compare.json"
LABELS = {"avg-kkm": "Avg-KKM", "mkkm": "MKKM", "lmkkm": "LMKKM", "mkkm-mr": "MKKM-MR", "lkam": "LKAM", "onkc": "ONKC",
          "swmc": "SwMC", "lf-mvc": "LF-MVC", "spmkc": "SPMKC", "smkkm": "SMKKM", "cagl": "CAGL", "oplfmvc": "OPLFMVC",
          "lsmkkm": "LSMKKM", "knn": "KNN", "lswmkc": "LSWMKC"}
CONFIG_KEYS = ("n_clusters", "n_init", "random_state", "max_iter", "min_iter", "tol", "repeats")
LEGEND = {
    "honest": "labels: the k-means run of lowest inertia over n_init starts; metrics of that partition",
    "paper": PROTOCOL_DESCRIPTIONS["paper"],
    "best": "under each protocol, the parameter of highest ACC on the method's grid (chosen with the labels, as the "
            "paper does); '-' for a method without parameter",
    "seconds": "forming the clustered kernel at the honest-best parameter (LSWMKC: its iterations; Avg-KKM, KNN: the "
               "pass forming the average kernel (+ the mask); MKKM: its iterations); the common final embedding and "
               "k-means excluded",
    "grid_seconds": "the same over the whole grid of the method (a shared pass counted once)",
}
#: Legend entries added when the final k-means was repeated (``repeats`` > 1).
REPEATS_LEGEND = {
    "repeats": "the final k-means step of every run repeated with seeds derived from random_state (the first is "
               "random_state); the fits and kernels are not repeated",
    "*_mean, *_std": "mean and sample standard deviation (ddof=1) of each metric over those seeds, at the parameter "
                     "of highest mean ACC under each protocol ('best' then chooses by the mean ACC)",
}


def _baseline_grid(methods, taus, grids=None):
    """The runs of ``methods`` but LSWMKC in the table's order: ``[(method, param), ...]``; a compared
    method's grid is its own (:func:`lswmkc_dask.grid.competitors.competitor_grid`) or ``grids[method]``.
    """
    grid = []
    for method in METHODS:
        if method not in methods or method == "lswmkc":
            continue
        if method == "knn":
            grid += [("knn", {"tau": float(t)}) for t in taus]
        elif method in COMPETITORS:
            grid += [(method, p) for p in competitor_grid(method, (grids or {}).get(method))]
        else:
            grid.append((method, {}))
    return grid


def run_name(method, param):
    """The run directory name of ``method`` at ``param``: ``"avg_kkm_tau=0.5"``."""
    return method + "".join(f"_{k}={exact_text(v)}" for k, v in param.items())


def load_compare(directory: str | os.PathLike[str]) -> tuple[dict, dict, dict]:
    """Read a compare directory.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    config : dict
        ``compare.json``.
    baselines : dict
        Run name (``avg-kkm``, ``knn_tau=0.3``, ``mkkm``) -> report.
    lswmkc : dict
        :class:`lswmkc_dask.grid.sweep.GridPoint` -> report of the LSWMKC sweep.

    Raises
    ------
    FileNotFoundError
        No ``compare.json`` in ``directory``.
    lswmkc_dask.errors.ResultFileError
        (a ValueError) ``compare.json`` or a run's ``report.json`` is not a regular file or
        not one JSON object.
    """
    directory = Path(directory)
    path = directory / COMPARE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} is not a compare directory (no {COMPARE_FILE})")
    config = read_json(path)
    runs = {}
    for d in sorted((directory / "runs").glob("*")):
        rep = d / "report.json"
        if d.is_dir() and not d.name.startswith(".") and rep.is_file():
            runs[d.name] = read_json(rep)
    lsw = {}
    if (directory / "lswmkc" / "sweep.json").is_file():
        lsw = load_sweep(directory / "lswmkc")[1]
    return config, runs, lsw


def _metric(report, protocol, key):
    v = report.get("metrics", {}).get(protocol, {}).get(key)
    return None if v is None else float(v)


def _mean_acc(report, protocol):
    v = ((report.get("repeats") or {}).get("mean") or {}).get(protocol, {}).get("ACC")
    return None if v is None else float(v)


def _best(entries, protocol):
    """The entry of highest ACC under ``protocol`` (first in grid order on ties); of highest
    mean ACC over the k-means seeds when every entry has one (``repeats`` > 1).
    """
    scored = [e for e in entries if _metric(e[1], protocol, "ACC") is not None]
    if not scored:
        return None
    if all(_mean_acc(e[1], protocol) is not None for e in scored):
        return max(scored, key=lambda e: _mean_acc(e[1], protocol))
    return max(scored, key=lambda e: _metric(e[1], protocol, "ACC"))  # max keeps the first of equal keys


def _row(method, entries):
    """One table row from ``[(param_text, report, seconds, shared_seconds), ...]`` in grid order."""
    row = {"method": LABELS[method], "runs": len(entries)}
    for protocol in ("honest", "paper"):
        best = _best(entries, protocol)
        row[f"best_{protocol}"] = None if best is None else best[0]
        for key in METRICS:
            row[f"{key}_{protocol}"] = None if best is None else _metric(best[1], protocol, key)
    chosen = _best(entries, "honest") or entries[0]
    row["seconds"] = chosen[2]
    shared = max((e[3] for e in entries), default=0.0)
    row["grid_seconds"] = sum(e[2] - e[3] for e in entries) + shared
    if any(e[1].get("repeats") for e in entries):  # after every other column: a table of repeats = 1 is unchanged
        for protocol in PROTOCOLS:
            best = _best(entries, protocol)
            stats = repeat_summary_columns(None if best is None else best[1].get("repeats"))
            row.update({k: v for k, v in stats.items() if f"_{protocol}_" in k})
    return row


def comparison_table(directory: str | os.PathLike[str]) -> list[dict]:
    """The table of a compare directory, one row per method with results.

    Returns
    -------
    list of dict
        Keys ``method``, ``best_honest``, ``ACC_honest`` ... ``ARI_honest``,
        ``best_paper``, ``ACC_paper`` ... ``ARI_paper``, ``seconds``, ``grid_seconds``,
        ``runs`` (see the module docstring).
    """
    loaded = load_compare(directory)
    methods = loaded[0].get("methods") or METHODS
    rows = []
    for method in METHODS:
        if method not in methods:
            continue
        entries = _entries(directory, loaded, method)
        if entries:
            rows.append(_row(method, entries))
    return rows


def _entries(directory, loaded, method):
    """``[(param_text, report, seconds, shared_seconds, run_dir, param), ...]`` of one
    method in grid order (``param``: ``{"tau": t}``, a GridPoint for LSWMKC, ``{}``).
    """
    config, runs, lsw = loaded
    directory = Path(directory)
    if method == "lswmkc":
        several_c = len({p.n_neighbors for p in lsw}) > 1
        return [
            (f"alpha={exact_text(p.alpha)}" + (f" c={p.n_neighbors}" if several_c else ""), r,
             float(r["iteration_seconds_total"]), 0.0, directory / "lswmkc" / "runs" / p.name, p)
            for p, r in sorted(lsw.items(), key=lambda t: (t[0].n_neighbors, t[0].alpha))
        ]
    entries = []
    for m, param in _baseline_grid([method], config.get("taus") or [], config.get("grids")):
        name = run_name(m, param)
        r = runs.get(name)
        if r is not None:
            text = ", ".join(f"{k}={exact_text(v)}" for k, v in param.items()) or "-"
            entries.append((text, r, float(r["seconds"]), float(r.get("shared_pass_seconds", 0.0)),
                            directory / "runs" / name, param))
    return entries


def best_run(directory: str | os.PathLike[str], method: str, protocol: str = "honest") -> tuple | None:
    """The run of a method at its best parameter, as the table chooses it.

    Parameters
    ----------
    directory : str or Path
        A compare directory.
    method : str
        One of :data:`METHODS`.
    protocol : {"honest", "paper"}

    Returns
    -------
    tuple or None
        ``(param, report, run_dir)``: ``param`` is ``{"tau": t}`` for KNN, a
        :class:`lswmkc_dask.grid.sweep.GridPoint` for LSWMKC, ``{}`` otherwise; the run of
        highest ACC under ``protocol`` (of highest mean ACC with repeats). None when
        the method has no run, or no run has metrics (no labels).

    Raises
    ------
    FileNotFoundError
        Not a compare directory.
    """
    best = _best(_entries(directory, load_compare(directory), method), protocol)
    return None if best is None else (best[5], best[1], best[4])


def running_times(directory, reference="LSWMKC"):
    """Seconds of each method relative to one of them (the paper's running-time figure).

    Parameters
    ----------
    directory : str or Path
        A compare directory.
    reference : str
        The method whose time is 1 (its label, e.g. ``"LSWMKC"``).

    Returns
    -------
    list of (str, float, float)
        ``(method, seconds, seconds / reference seconds)`` per method of
        :func:`comparison_table` (``seconds``: the time of its honest-best run, see
        the module docstring).

    Raises
    ------
    ValueError
        ``reference`` is not a method of the directory, or took no time.
    """
    rows = comparison_table(directory)
    ref = next((r["seconds"] for r in rows if r["method"] == reference), None)
    if not ref:
        raise ValueError(f"{reference} is not a method of {directory} with a running time "
                         f"(methods: {', '.join(r['method'] for r in rows)})")
    return [(r["method"], float(r["seconds"]), float(r["seconds"]) / ref) for r in rows]


def weight_distributions(directory):
    """The kernel weights learned by MKKM and by LSWMKC (its honest-best alpha).

    Parameters
    ----------
    directory : str or Path
        A compare directory.

    Returns
    -------
    names : list of str
        The base kernels' names (m).
    weights : dict
        ``{"MKKM": ndarray (m,), "LSWMKC": ndarray (m,)}`` for those of the two that
        ran: MKKM's weights w (sum 1, Huang et al.) and LSWMKC's omega (unit 2-norm,
        Eq. 12), each as the fraction of its total, so the two compare.
    """
    config, runs, lsw = load_compare(directory)
    weights, named = {}, None
    if runs.get("mkkm", {}).get("kernel_weights") is not None:
        weights["MKKM"] = np.asarray(runs["mkkm"]["kernel_weights"], dtype=float)
    scored = [(p, r) for p, r in lsw.items() if _metric(r, "honest", "ACC") is not None] or list(lsw.items())
    if scored:
        _, best = max(scored, key=lambda t: _metric(t[1], "honest", "ACC") or 0.0)
        weights["LSWMKC"] = np.asarray(best["kernel_weights"], dtype=float)
        named = best.get("kernel_names")
    weights = {k: w / w.sum() if w.sum() > 0 else w for k, w in weights.items()}
    m = max((w.size for w in weights.values()), default=0)
    names = [str(x) for x in (named or config.get("kernel_names") or [f"kernel {p}" for p in range(m)])][:m]
    return names, weights


def format_table(rows: list[dict]) -> str:
    """Aligned text of :func:`comparison_table` rows."""
    head = ["method", "best(honest)"] + [f"{k}/h" for k in METRICS] + ["best(paper)"] + [f"{k}/p" for k in METRICS]
    head += ["seconds", "grid s"]
    best = max([13] + [len(r[f"best_{p}"] or "-") for r in rows for p in ("honest", "paper")])
    width = [8, best] + [7] * 4 + [best] + [7] * 4 + [8, 8]
    lines = ["  ".join(f"{h:<{w}}" if i in (0, 1, 6) else f"{h:>{w}}" for i, (h, w) in enumerate(zip(head, width)))]
    for r in rows:
        cells = [r["method"], r["best_honest"] or "-"]
        cells += [r[f"{k}_honest"] for k in METRICS] + [r["best_paper"] or "-"] + [r[f"{k}_paper"] for k in METRICS]
        cells += [r["seconds"], r["grid_seconds"]]
        lines.append("  ".join(f"{c:<{w}}" if i in (0, 1, 6) else f"{'-':>{w}}" if c is None else
                               f"{c:>{w}.{'3g' if i >= 11 else '4f'}}" for i, (c, w) in enumerate(zip(cells, width))))
    return "\n".join(lines)


def _write_table(out, rows, config):
    legend = dict(LEGEND, **REPEATS_LEGEND) if any("ACC_honest_mean" in r for r in rows) else LEGEND
    columns = ["method", "best_honest"] + [f"{k}_honest" for k in METRICS] + ["best_paper"]
    columns += [f"{k}_paper" for k in METRICS] + ["seconds", "grid_seconds", "runs"]
    if any("ACC_honest_mean" in r for r in rows):
        columns += list(repeat_summary_columns(None))
    write_table_files(out, "comparison", {"rows": rows, "legend": legend, "config": config}, columns)


def compare(
    X: Any,
    output: str | os.PathLike[str],
    *,
    n_clusters: int | None = DEFAULTS["n_clusters"],
    labels: Any = None,
    methods: Sequence[str] = DEFAULTS["methods"],
    grids: dict[str, dict[str, Sequence[Any]]] | Sequence[str] | None = None,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    n_neighbors: Sequence[int] = (DEFAULTS["n_neighbors"],),
    taus: Sequence[float] = DEFAULT_TAUS,
    kernel: str = DEFAULTS["kernel"],
    kernel_params: dict | None = DEFAULTS["kernel_params"],
    client: Any = None,
    max_iter: int = DEFAULTS["max_iter"],
    min_iter: int = DEFAULTS["min_iter"],
    tol: float = DEFAULTS["tol"],
    n_init: int = DEFAULTS["n_init"],
    random_state: int = DEFAULTS["random_state"],
    block_rows: int | None = DEFAULTS["block_rows"],
    overwrite: bool = False,
    progress: bool = True,
    data_description: str | None = None,
    degenerate_kernels: str = DEFAULTS["degenerate_kernels"],
    eig_threads: int | None = DEFAULTS["eig_threads"],
    eig_device: str = DEFAULTS["eig_device"],
    eig_precision: str = DEFAULTS["eig_precision"],
    eig_driver: str = DEFAULTS["eig_driver"],
    repeats: int = DEFAULTS["repeats"],
) -> list[dict]:
    """LSWMKC over its alpha grid and the baselines over theirs, resumably, one table.

    Parameters
    ----------
    X : KernelStack, str, Path, array_like of shape (m, n, n), or list of arrays
        As :meth:`lswmkc_dask.LSWMKC.fit` (feature views of shape (n, d_v) with
        ``kernel`` other than "precomputed"); preprocessed once, shared by every method.
    output : str or Path
        Compare directory (module docstring), resumed as :func:`lswmkc_dask.grid.sweep.sweep`
        resumes its ``output``: finished runs of the same data and settings are skipped.
    n_clusters : int, optional
        k (default: the number of distinct labels).
    labels : array_like of shape (n,), optional
        Ground truth (default: the store's labels).
    methods : sequence of str
        Among :data:`METHODS` (the LSWMKC paper's Table I: "avg-kkm", "mkkm", "lmkkm", "mkkm-mr",
        "lkam", "onkc", "swmc", "lf-mvc", "spmkc", "smkkm", "cagl", "oplfmvc", "lsmkkm", then
        "knn" and "lswmkc"), or ``["all"]``. Default "avg-kkm", "mkkm", "knn", "lswmkc". The
        compared methods (:mod:`lswmkc_dask.methods`) run over their own papers' grids, one
        task per grid point on a cluster (:func:`lswmkc_dask.grid.competitors.run_competitors`).
    grids : dict, optional
        ``{method: {hyper-parameter: values}}`` replacing a compared method's grid for the
        parameters named (``{"onkc": {"rho": [1], "lambda_": [1, 2]}}``); any parameter of
        its estimator may be named (``{"mkkm": {"max_iter": [100], "tol": [1e-6]}}``). Also
        as texts ``["onkc:rho=1,2", "onkc:lambda_=0.5"]`` (the command line's ``--grid``).
    alphas, n_neighbors : sequences
        LSWMKC's grid (default 2^0..2^10, c = 5), swept into ``output/lswmkc``.
    taus : sequence of float
        KNN's grid of neighbour ratios (default 0.1..0.9). In every grid a value given
        twice counts once, and distinct values get distinct run directories
        (``knn_tau=0.5``, ``knn_tau=0.5000001``; :func:`lswmkc_dask.grid.sweep.exact_text`).
    kernel, kernel_params, client, max_iter, min_iter, tol, eig_precision, eig_driver
        As :func:`lswmkc_dask.grid.sweep.sweep` (the last five: LSWMKC's fits).
    n_init, random_state
        k-means starts and seed, the same for every method.
    block_rows, overwrite, progress, data_description, degenerate_kernels, eig_threads
        As :func:`lswmkc_dask.grid.sweep.sweep` (``data_description`` goes to ``compare.json``).
    eig_device : {"cpu", "cuda", "auto"}, default "cpu"
        Where LSWMKC's gathered eigendecomposition runs; the baselines run on the CPU.
    repeats : int
        Repetitions of every run's final k-means step, as :func:`lswmkc_dask.grid.sweep.sweep`'s
        (default 1: none): each run's ``report.json`` gets ``repeats``, the table's rows
        ``ACC_honest_mean``, ``ACC_honest_std``, ... ``ARI_paper_std`` after their other
        columns, and "best" then chooses by the mean ACC. Compared on resume.

    Returns
    -------
    list of dict
        :func:`comparison_table` rows, also in ``comparison.csv``/``comparison.json``.

    Raises
    ------
    ValueError
        Bad grids or hyper-parameters (also a ``min_iter`` above ``max_iter``); ``output``
        holds a comparison with other settings (pass ``overwrite=True``).
    OtherDataError
        (a ValueError) ``output`` holds a comparison of other data (other kernels or
        labels); the message gives both fingerprints. Nothing is written.
    FileExistsError
        ``output`` is a file, a directory not written by lswmkc, a symbolic link to
        nothing, or in use by another lswmkc process (checked before the kernels are
        read).
    KernelInputError, FileNotFoundError
        Unusable kernels.

    See Also
    --------
    lswmkc_dask.grid.tables.format_table : The table as LaTeX or Markdown (``lswmkc table``).
    lswmkc_dask.grid.baselines.avg_kkm, lswmkc_dask.grid.baselines.knn_kkm
    lswmkc_dask.methods.get_method : The compared methods' estimators.

    Examples
    --------
    >>> import tempfile
    >>> from lswmkc_dask.datasets import load_yale
    >>> from lswmkc_dask.grid.compare import compare
    >>> kernels, labels = load_yale()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     rows = compare(kernels, tmp + "/compare", labels=labels, alphas=[8], taus=[0.5], n_init=10, progress=False)
    >>> [(row["method"], round(row["ACC_honest"], 2)) for row in rows]
    [('Avg-KKM', 0.55), ('MKKM', 0.59), ('KNN', 0.57), ('LSWMKC', 0.64)]
    """
    validate("compare", locals())  # the parameter table's constraints, iterations, alphas: before any I/O
    seeds = repeat_seeds(random_state, repeats)  # checks repeats (and random_state when repeats > 1)
    methods, alphas, n_neighbors, taus = _grid_values(methods, alphas, n_neighbors, taus)
    grids = _checked_grids(grids, methods)
    out = Path(output)
    # The output is checked before the kernels are read or preprocessed (that can take
    # minutes); open_grid_directory below checks again and locks it.
    check_output(out, overwrite=overwrite, kind="compare", inputs=input_paths(X))
    if "lswmkc" in methods:
        check_device(eig_device, eig_precision, client, 0)  # "cuda" without a GPU: before any work
    store = open_kernels(X, kernel=kernel, kernel_params=kernel_params, block_rows=block_rows,
                         degenerate_kernels=degenerate_kernels)
    labels, n_clusters = _labels_and_k(labels, store, n_clusters)
    validate("compare", {"n_clusters": n_clusters, "n_neighbors": n_neighbors if "lswmkc" in methods else None},
             store.n_samples)
    description = data_description or str(store.location if not store.in_memory else "array")
    config = to_json_ready({
        "n_clusters": n_clusters, "n_init": n_init, "random_state": random_state, "max_iter": max_iter,
        "min_iter": min_iter, "tol": tol, "grids": grids,
        "data": description, "n_samples": store.n_samples, "n_kernels": store.n_kernels, "methods": list(methods),
        "alphas": alphas, "n_neighbors": n_neighbors, "taus": taus, "input": input_fingerprint(store, labels),
        **({"repeats": int(repeats)} if repeats > 1 else {}),  # only then: repeats = 1 writes what it wrote before
    })
    # The grids may grow between runs: the settings then hold this call's methods and grids.
    with open_grid_directory(
        out, kind="compare", noun="comparison", verb="compared", resume_file=COMPARE_FILE, config=config,
        config_keys=CONFIG_KEYS, store=store, labels=labels, overwrite=overwrite,
        merge=lambda old, new: dict(old, **{k: new[k] for k in ("methods", "alphas", "n_neighbors", "taus")},
                                    grids=dict(old.get("grids") or {}, **new["grids"])),
    ) as (target, config):
        grid, todo = _plan(out, target, methods, alphas, n_neighbors, taus, grids)
        base_todo = [(m, p) for m, p in todo if m in ("avg-kkm", "knn")]
        method_todo = [(m, p) for m, p in todo if m in COMPETITORS]
        show = Progress(progress)
        show.say(_status(methods, grid, todo))
        params = {"n_clusters": n_clusters, "n_init": n_init, "random_state": random_state, "eig_threads": eig_threads}
        record = _Recorder(target, len(grid), len(grid) - len(todo), show, description, params)
        if todo:
            with Where.of(client).open(store.nbytes) as c, validated():  # sweep() below: checked above, not again
                if base_todo:
                    show.say(f"compare: baselines ({len(base_todo)} runs) "
                             + ("in this process" if c is None else f"on {len(workers_of(c))} Dask workers"))
                    run_baselines(store, c, base_todo, dict(params, seeds=seeds) if repeats > 1 else params, labels,
                                  record, block_rows=block_rows)
                if method_todo:
                    show.say(f"compare: compared methods ({len(method_todo)} runs of "
                             f"{len(dict.fromkeys(m for m, _ in method_todo))} methods) "
                             + ("in this process" if c is None else f"on {len(workers_of(c))} Dask workers"))
                    run_competitors(store, c, method_todo, dict(params, seeds=seeds) if repeats > 1 else params, labels,
                                    record, block_rows=block_rows)
                if len(base_todo) + len(method_todo) < len(todo):
                    target.commit(lambda root: None)  # the sweep writes into the current directory's lswmkc/
                    show.say(f"compare: LSWMKC over {sum(m == 'lswmkc' for m, _ in grid)} grid points into "
                             f"{out / 'lswmkc'}")
                    sweep(store, out / "lswmkc", n_clusters=n_clusters, alphas=alphas, n_neighbors=n_neighbors,
                          labels=labels, client=c, max_iter=max_iter, min_iter=min_iter, tol=tol, n_init=n_init,
                          random_state=random_state, block_rows=block_rows, progress=progress,
                          data_description=description, eig_threads=eig_threads, repeats=repeats,
                          eig_device=eig_device, eig_precision=eig_precision, eig_driver=eig_driver)
        rows = comparison_table(out)
        _write_table(out, rows, config)
    show.result(format_table(rows))  # on stdout, the progress above it on stderr
    return rows


def _checked_grids(grids, methods):
    """``grids`` of the methods compared, each value plain; an unknown method or hyper-parameter refused
    (before any I/O).
    """
    grids = {m: {k: [plain(v) for v in vals] for k, vals in g.items()} for m, g in _parse_grids(grids).items()
             if m in methods}
    for m, g in grids.items():
        if m not in COMPETITORS:
            raise ValueError(f"grids: {m} is not a compared method with a grid ({', '.join(COMPETITORS)})")
        competitor_grid(m, g)
    return grids


def _labels_and_k(labels, store, n_clusters):
    """The ground truth (given, else the store's) checked, and k (given, else the number of classes)."""
    labels = check_labels(labels if labels is not None else store.labels, store.n_samples)
    if n_clusters is None:
        if labels is None:
            raise ParameterError("{} is required when there are no labels", Param("n_clusters"))
        n_clusters = count_classes(labels)
    return labels, n_clusters


def _grid_values(methods, alphas, n_neighbors, taus):
    """The methods in the table's order and each grid as a list, each value once (a value
    given twice is one run: its run directory would be written twice); empty grids refused.
    """
    methods = METHODS if "all" in methods else methods
    methods = tuple(m for m in METHODS if m in set(methods)) if set(methods) <= set(METHODS) else tuple(methods)
    alphas = list(dict.fromkeys(float(a) for a in alphas))
    n_neighbors = list(dict.fromkeys(int(c) for c in n_neighbors))
    taus = list(dict.fromkeys(float(t) for t in taus))
    if set(methods) - set(METHODS) or not methods:
        raise ParameterError("{} must be among {}, got {!r}", Param("methods"), ", ".join(METHODS), list(methods))
    if "knn" in methods:
        if not taus:
            raise ValueError("the tau grid is empty: give at least one tau in (0, 1]")
        for t in taus:
            neighbour_count(t, 1)  # raises for tau outside (0, 1]
    if "lswmkc" in methods and (not alphas or not n_neighbors):
        raise ParameterError("the LSWMKC grid is empty: give at least one alpha and one {}", Param("n_neighbors"))
    return methods, alphas, n_neighbors, taus


def _parse_grids(grids):
    """``grids`` as ``{method: {param: values}}``; from the command line's ``METHOD:PARAM=V1,V2`` texts."""
    if grids is None or isinstance(grids, dict):
        return dict(grids or {})
    out: dict[str, dict[str, list]] = {}
    for text in grids:
        method, _, rest = str(text).partition(":")
        param, _, values = rest.partition("=")
        try:
            parsed = [json.loads(v) for v in values.split(",")]
        except json.JSONDecodeError:
            parsed = []
        if not method or not param or not parsed or not all(isinstance(v, int | float) for v in parsed):
            raise ParameterError("{} takes METHOD:PARAM=V1,V2 with numbers (onkc:rho=1,2), got {!r}",
                                 Param("grids"), str(text))
        out.setdefault(method.lower(), {})[param] = parsed
    return out


def _plan(out, target, methods, alphas, n_neighbors, taus, grids):
    """Every method's grid, ``[(method, param or GridPoint), ...]``, and its runs not finished in
    the directory yet (all of them where the directory is replaced).
    """
    _, done_runs, lsw_done = ({}, {}, {}) if target.state == "replace" else load_compare(out)
    grid = _baseline_grid(methods, taus, grids)
    grid += [("lswmkc", GridPoint(a, c)) for c in n_neighbors for a in alphas] if "lswmkc" in methods else []
    return grid, [(m, p) for m, p in grid if (p not in lsw_done if m == "lswmkc" else run_name(m, p) not in done_runs)]


def _status(methods, grid, todo):
    """The first stage line: runs done of each method, and how many are left."""
    counts = []
    for mth in METHODS:
        if mth in methods:
            grid_n, left = sum(m == mth for m, _ in grid), sum(m == mth for m, _ in todo)
            counts.append(f"{LABELS[mth]} {grid_n - left}/{grid_n}")
    return (f"compare: {len(grid) - len(todo)} of {len(grid)} runs done ({', '.join(counts)})"
            + ("; nothing to run" if not todo else f"; {len(todo)} to run"))


class _Recorder:
    """Writes each finished baseline run into its run directory and shows its progress line.

    With overwrite, the first result goes into the new directory, swapped in then.
    """

    def __init__(self, target, total, finished, progress, description, params):
        self.target, self.total, self.finished, self.progress = target, total, finished, progress
        self.description, self.params = description, params
        self.started = time.perf_counter()

    def __call__(self, result):
        """Write one :class:`lswmkc_dask.grid.baselines.BaselineResult`."""
        report = result.report({"input": self.description, "params": dict(self.params, **result.param),
                                "shared_pass_seconds": result.extra.get("pass_seconds", 0.0)})
        name = run_name(result.method, result.param)  # exact: distinct taus, distinct directories
        self.target.commit(lambda root: write_fit_output(root / "runs" / name, report, result.labels))
        self.finished += 1
        acc = (result.metrics or {}).get("honest", {}).get("ACC")
        self.progress.say(f"[{self.finished}/{self.total}] {name}: {result.seconds:.2f} s"
                          + (f" (+ {result.cluster_seconds:.2f} s k-means), ACC {acc:.4f}" if acc is not None else "")
                          + f" | elapsed {time.perf_counter() - self.started:.0f} s")

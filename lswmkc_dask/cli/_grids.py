"""``lswmkc sweep`` (LSWMKC over a grid of alpha, c, gamma and k) and ``lswmkc compare``
(LSWMKC against the paper's baselines): their options and what they run, resumably."""

from __future__ import annotations

import argparse
from typing import Any

from .._params import add_arguments
from ._base import add_output, grid_params, table_params
from ._inputs import add_input, add_where, open_input, read_checked_input, where_of

#: ``lswmkc sweep`` runs in its own process up to this many bytes of kernels, on a
#: LocalCluster of one worker process per core above (docs/performance.md#where-a-fit-runs-bench_executionpy).
CLI_IN_PROCESS_MAX_BYTES = 64 * 2**20


def add_sweep(sub: Any) -> None:
    """Add ``lswmkc sweep`` to the sub-parsers ``sub``."""
    w = sub.add_parser("sweep", help="fit a grid of alpha (and n_neighbors) values, resumably",
                       description="Fit LSWMKC over a grid of alpha and n_neighbors; rerun the same command to resume.")
    add_input(w, "sweep")
    add_arguments(w, "sweep", section="run")
    add_output(w, "DIR", "sweep directory (rerun to resume)",
               "discard earlier results in DIR: only a directory written by lswmkc, never the working or home "
               "directory; the old results are replaced when the first new grid point is done", required=True)
    add_where(w, "sweep", grid=True)


def add_compare(sub: Any) -> None:
    """Add ``lswmkc compare`` to the sub-parsers ``sub``."""
    cp = sub.add_parser(
        "compare", help="LSWMKC against Avg-KKM, MKKM and the KNN mechanism, same protocol, resumably",
        description="LSWMKC over its alpha grid and the paper's baselines over theirs (Avg-KKM; MKKM; the KNN-"
                    "localised average kernel over tau), each ending with the same spectral embedding and k-means "
                    "and scored under both protocols; one table (comparison.csv/.json). Rerun the same command to "
                    "resume; `lswmkc plot DIR` draws the bar chart.",
    )
    add_input(cp, "compare")
    add_arguments(cp, "compare", section="methods")  # --methods, --taus
    add_arguments(cp, "compare", section="run")
    add_output(cp, "DIR", "compare directory (rerun to resume)",
               "discard earlier results in DIR (only a directory written by lswmkc); replaced when the first new "
               "run is done", required=True)
    add_where(cp, "compare", grid=True)


def grid_workers(args: argparse.Namespace, data: Any) -> tuple[Any, int | None]:
    """(data, n_workers) of a grid run from the command line: one worker process per core
    above :data:`CLI_IN_PROCESS_MAX_BYTES` of kernels (the input opened here to know its size,
    and handed on as the kernel stack), else in this process, as on this GPU (feature views
    fitted there: their kernels built there once).
    """
    if args.n_workers is not None or args.scheduler or args.scheduler_file:
        return data, args.n_workers
    from ..engine.cluster import CPU_COUNT
    from ..engine.device_route import ResidentStack

    store = open_input(args, data, args.command)
    big = not isinstance(store, ResidentStack) and store.nbytes > CLI_IN_PROCESS_MAX_BYTES
    return store, CPU_COUNT if big else None


def _print_sweep(summary: dict, printed_table: bool) -> None:
    """The result lines of ``lswmkc sweep`` (stdout): the table unless printed already (its last line the
    default's result beside the pick, :func:`lswmkc_dask.grid.sweep.sweep_table`), the choice, the best."""
    from ..grid.results import selection_line
    from ..grid.sweep import exact_text, sweep_table

    if not printed_table:  # with progress, sweep() has printed the table (stdout) already
        print(sweep_table(summary["rows"], summary.get("selected")))
    chosen = summary.get("selected")
    if chosen:
        print(selection_line(chosen))
    for key in ("best_by_honest_ACC", "best_by_paper_ACC"):
        b = summary.get(key)
        if b:
            gamma = "" if b.get("gamma", "auto") == "auto" else f" gamma={b['gamma']:g}"
            print(f"{key}: alpha={exact_text(b['alpha'])} c={b['n_neighbors']} k={b['n_clusters']}{gamma} "
                  f"({list(b.values())[-1]:.4f})")


def _grid_call(args: argparse.Namespace, data: Any) -> tuple[Any, dict[str, Any]]:
    """(data, the keywords of sweep() or compare()) of a grid command: the options by the
    parameter table (its grids by their Python names), and where it runs."""
    data, n_workers = grid_workers(args, data)
    # --kernel built the kernels of --features into data, which the grid takes as precomputed
    params = {**table_params(args, args.command, exclude=("kernel",)), **grid_params(args, args.command)}
    params.update(client=where_of(args, n_workers), overwrite=args.overwrite, progress=bool(args.verbose))
    return data, params


def run_sweep(args: argparse.Namespace) -> int:
    """``lswmkc sweep``: :func:`lswmkc_dask.sweep` over the options' grid, its summary printed; exit 0."""
    from ..grid.sweep import sweep

    data, labels, desc, _ = read_checked_input(args, args.input, "sweep")  # --output DIR checked (the run checks again and locks)
    data, params = _grid_call(args, data)
    summary = sweep(data, args.output, labels=labels, data_description=desc, **params)
    _print_sweep(summary, printed_table=params["progress"])
    print(f"wrote {args.output}/summary.csv, summary.json and runs/")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    """``lswmkc compare``: :func:`lswmkc_dask.grid.compare.compare` with the options, its table printed; exit 0."""
    from ..grid.compare import compare, format_table

    data, labels, desc, _ = read_checked_input(args, args.input, "compare")
    data, params = _grid_call(args, data)
    rows = compare(data, args.output, labels=labels, data_description=desc, **params)
    if not params["progress"]:  # with progress, compare() has printed the table (stdout) already
        print(format_table(rows))
    print(f"wrote {args.output}/comparison.csv, comparison.json, runs/ and lswmkc/")
    return 0

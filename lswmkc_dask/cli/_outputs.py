"""``lswmkc plot``, ``lswmkc table`` and ``lswmkc verify``: what reads a written directory
or store (figures, the paper's table, the store's integrity), their options and what they run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import CLIError
from ._base import add_output


def add_plot(sub: Any) -> None:
    """Add ``lswmkc plot`` to the sub-parsers ``sub``."""
    pl = sub.add_parser("plot", help="PNG figures of a sweep, compare or fit directory (needs matplotlib)",
                        description="PNG figures of a sweep directory: metrics vs alpha, convergence, kernel "
                                    "weights, Z and K* heatmaps of the grid point and k selected without labels "
                                    "(the first line printed says which, and why); of a compare directory: the bar chart of the "
                                    "methods, running times, kernel weights and the KNN mechanism against LSWMKC "
                                    "(knn_mechanism.png, n <= 5000); of a fit directory (lswmkc fit --output DIR): convergence, kernel "
                                    "weights, Z and K* heatmaps in cluster order. Needs matplotlib (pip install "
                                    "matplotlib).")
    pl.add_argument("directory", metavar="DIR",
                    help="directory written by `lswmkc sweep`, `lswmkc compare` or `lswmkc fit --output`")
    pl.add_argument("--output", metavar="PNG_DIR", help="where to write the PNG files (default DIR/plots)")
    pl.add_argument("--alpha", type=float,
                    help="alpha of the Z and K* heatmaps of a sweep, drawn at the k chosen for it without labels "
                         "(default: the grid point and k the sweep selected without labels, summary.json)")
    pl.add_argument("--n-clusters", type=int, metavar="K",
                    help="another k of a sweep's k grid for the heatmaps' clusters and the metrics figure (default: "
                         "the k chosen without labels)")
    pl.add_argument("--overwrite", action="store_true",
                    help="replace existing PNG files in an --output directory (those in DIR/plots are replaced "
                         "anyway; a directory or a link is never replaced)")


def add_table(sub: Any) -> None:
    """Add ``lswmkc table`` to the sub-parsers ``sub``."""
    tb = sub.add_parser("table", help="the metrics table of a sweep or compare directory for a paper (LaTeX/Markdown)",
                        description="Print the metrics table as the paper lays it out: methods (or the selected and "
                                    "best grid points of a sweep) in columns, ACC/NMI/Purity/ARI in percent in rows, "
                                    "the best of each row in bold, one block per evaluation protocol.")
    tb.add_argument("directory", metavar="DIR", help="directory written by `lswmkc compare` or `lswmkc sweep`")
    tb.add_argument("--format", choices=("latex", "markdown"), default="latex", help="output format (default latex)")
    tb.add_argument("--caption", help="table caption (default: the data set and the command's kind)")
    add_output(tb, "FILE", "also write the table to this new file (e.g. table.tex), its first line a comment naming "
                           "lswmkc; default: stdout only",
               "replace an existing --output file (never a directory, a link or an input)")


def add_verify(sub: Any) -> None:
    """Add ``lswmkc verify`` to the sub-parsers ``sub``."""
    v = sub.add_parser("verify", help="check every chunk of a kernel store (exit 0 intact, 2 damaged)",
                       description="Read every chunk of a kernel store and check it: present, crc32c checksum and "
                                   "manifest, finite values, unit diagonal, symmetry. Prints one OK line, or every "
                                   "problem found; exit 0 if intact, 2 if damaged.")
    v.add_argument("store", metavar="STORE", help="kernel store (*.zarr directory or URL) written by `lswmkc prepare`")
    add_output(v, "JSON", "also write the result to this new JSON file (ok, problems, n_samples, n_kernels, chunks)",
               "replace an existing --output file (never a directory, a link or an input)")


def run_plot(args: argparse.Namespace) -> int:
    """``lswmkc plot``: the figures of a sweep, compare or fit directory (:func:`lswmkc_dask.plots.plot_sweep`); exit 0."""
    from ..plots import MatplotlibMissingError, plot_sweep, sweep_point

    try:
        written = plot_sweep(args.directory, args.output, alpha=args.alpha, overwrite=args.overwrite,
                             n_clusters=args.n_clusters)
    except MatplotlibMissingError as exc:
        raise CLIError(str(exc)) from None
    if (Path(args.directory) / "sweep.json").is_file() and not (Path(args.directory) / "compare.json").is_file():
        print(sweep_point(args.directory, args.alpha, args.n_clusters).describe())  # which (alpha, k), and why
    for path in written:
        print(f"wrote {path}")
    return 0


def run_table(args: argparse.Namespace) -> int:
    """``lswmkc table``: the metrics table of a sweep or compare directory (:mod:`lswmkc_dask.grid.tables`); exit 0."""
    from ..grid.tables import format_table, signed_table, table_of
    from ..io.output import atomic_path, check_output
    from ..io.results import read_json

    if args.output:  # before any work: never a directory, a link, a special file or the input; writable
        check_output(args.output, overwrite=args.overwrite, inputs=[args.directory])
    columns = table_of(args.directory)
    caption = args.caption
    if caption is None:
        found = [Path(args.directory) / name for name in ("compare.json", "sweep.json")]
        data = next((read_json(p).get("data") for p in reversed(found) if os.path.lexists(p)), None)  # sweep.json's first
        name = Path(str(data)).name if data and data != "array" else Path(args.directory).resolve().name
        caption = f"Clustering results on {name} (%)"
    text = format_table(columns, args.format, caption)
    print(text, end="")
    if args.output:
        with atomic_path(args.output, overwrite=args.overwrite, inputs=[args.directory]) as tmp:
            Path(tmp).write_text(signed_table(text, args.format))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``lswmkc verify``: every chunk of a store checked (:func:`lswmkc_dask.io.integrity.inspect_store`); exit 0 intact, 2 damaged."""
    from ..io.integrity import inspect_store
    from ..io.output import atomic_path, check_output, signature

    if "://" not in args.store and Path(args.store).is_file():
        raise CLIError(f"{args.store} is a file, not a kernel store (a *.zarr directory); `lswmkc prepare "
                       f"{args.store} STORE.zarr` writes one, and `lswmkc verify STORE.zarr` checks it")
    if args.output:  # before any work: never a directory, a link, a special file or inside the store; writable
        check_output(args.output, overwrite=args.overwrite, inputs=[args.store])
    report = inspect_store(args.store)
    if args.output:
        fields = ("ok", "format", "n_samples", "n_kernels", "block_rows", "n_chunks", "checks", "problems")
        with atomic_path(args.output, overwrite=args.overwrite, inputs=[args.store]) as tmp:
            Path(tmp).write_text(json.dumps({"written_by": signature(), "store": str(args.store),
                                             **{k: getattr(report, k) for k in fields}}, indent=2) + "\n")
    if report.ok:
        print(f"{args.store}: OK, n={report.n_samples} samples, m={report.n_kernels} kernels, {report.n_chunks} "
              f"chunks of {report.block_rows} rows ({report.format}; checked: {', '.join(report.checks)})")
        return 0
    count = len(report.problems)
    print(f"{args.store}: DAMAGED, {count} problem{'s' if count > 1 else ''}:")
    for problem in report.problems:
        print(f"  {problem}")
    print("rerun `lswmkc prepare` or restore the store")
    return 2

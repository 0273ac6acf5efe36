"""The ``lswmkc`` command line.

::

    lswmkc prepare INPUT OUTPUT.zarr [--block-rows N]          # kernel file -> store
    lswmkc prepare --features a.csv b.csv OUTPUT.zarr            # OUTPUT is the last path
    lswmkc prepare --features a.csv b.csv --output OUTPUT.zarr   # the same, explicitly
    lswmkc fit --dataset yale --alpha 8                          # shipped data
    lswmkc fit STORE.zarr|KERNELS.mat --n-clusters K --alpha A [--scheduler ADDR] [--output DIR]
    lswmkc sweep STORE.zarr --alphas 1 8 64 --output DIR
    lswmkc compare --dataset yale --output DIR                   # LSWMKC vs Avg-KKM, MKKM, KNN; resumable
    lswmkc plot DIR [--output PNG_DIR] [--alpha A] [--n-clusters K]   # default: the selected (alpha, k)
    lswmkc verify STORE.zarr                                     # every chunk checked; exit 2 if damaged
    lswmkc table DIR [--format latex|markdown]                   # the metrics table of a sweep or compare directory

Errors print one line, ``lswmkc: error: ...``, naming command-line flags (``--overwrite``)
rather than the Python keywords of the library (``overwrite=True``), and exit with 2. An
unknown flag is answered with the closest known one (``--alpah``: did you mean
``--alpha``?). ``--kernel`` takes the Python API's names (rbf, linear, poly) and their
aliases (gaussian, polynomial).

The options that set a parameter of the fit (``--alpha``, ``--max-iter``, ``--eig-driver``,
...) and their help and defaults come from the parameter table
(:mod:`lswmkc_dask._params`, docs/parameters.md), the Python API's defaults; ``--snapshots``
is also spelled ``--snapshot-iterations``, the Python name.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import itertools
import json
import logging
import re
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from ._params import DEFAULTS, add_arguments
from ._params import at_least as _at_least
from ._version import __version__
from .cluster import SchedulerLostError
from .errors import KernelInputError, render_message
from .gpu import DeviceUnavailableError
from .kernels import canonical_kernel

__all__ = ["build_parser", "cli_message", "flag_table", "main"]

#: The default of --random-state; the Python API's default too (the parameter table).
RANDOM_STATE = DEFAULTS["random_state"]
#: Feature-file endings: a name ending so is never taken for the OUTPUT of `prepare`.
_FEATURE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".txt", ".npy", ".npz", ".mat")


class CLIError(Exception):
    """A usage problem found by the command line itself: printed as one line, exit 2."""


def _add_input(p, command, positional=True):
    """The input options of ``command``; --kernel, --block-rows and --degenerate-kernels from the parameter table."""
    if positional:
        p.add_argument("input", nargs="?", metavar="INPUT",
                       help="kernel store (*.zarr directory or URL), .mat (v5/v7.3, KH and Y) or .npz (kernels, labels)")
    p.add_argument("--dataset", choices=("yale", "handwritten"), help="a data set shipped with the package instead of INPUT")
    p.add_argument("--features", nargs="+", metavar="FILE",
                   help="one feature file per view (.csv, .csv.gz, .npy, .npz with X), samples in rows, instead of INPUT; "
                        "each kernel is named after its file (mfeat-fac.csv -> mfeat-fac)")
    add_arguments(p, command, ("kernel",))
    p.add_argument("--degree", type=_at_least(1), default=2, help="degree of the polynomial kernel (default 2)")
    p.add_argument("--label-column", type=int, metavar="J",
                   help="column of the feature files holding the labels, removed from the features (e.g. -1)")
    hdr = p.add_mutually_exclusive_group()
    hdr.add_argument("--header", dest="header", action="store_true", default=None,
                     help="the first row of each --features CSV is a header (skipped), even if it is numeric")
    hdr.add_argument("--no-header", dest="header", action="store_false",
                     help="the first row of each --features CSV is data (an error if it is not numeric). Default: "
                          "a header only if some cell of it is not a number; a numeric first row (even 0,1,2,...) "
                          "is always a sample (0,1,2,...,d-1, as pandas writes a header, with a warning)")
    p.add_argument("--index-columns", type=int, metavar="K",
                   help="the first K columns of each --features CSV are row indices (as pandas' to_csv writes one), "
                        "dropped; 0: none, nothing checked. Default: a first column holding the row numbers "
                        "(0..n-1, 1..n, or an unnamed pandas index) is refused, as it would leak the sample order")
    p.add_argument("--labels", metavar="FILE",
                   help="ground-truth labels, one per sample in sample order: .txt/.csv/.csv.gz (one per line, or "
                        "CSV rows whose last cell is the label; the first row is a header only if it has a "
                        "non-numeric cell, see lswmkc_dask.io.read_labels) or .npy; overrides labels in the input")
    add_arguments(p, command, ("block_rows", "degenerate_kernels"))


def _add_cluster(p, grid=False):
    g = p.add_argument_group(
        "where to run (default: in this process up to 64 MiB of kernels, above that a LocalCluster of one "
        "worker process per core)" if grid else
        "where to run (default: in this process up to 1 GiB of kernels, a threaded Dask LocalCluster above)"
    )
    g.add_argument("--scheduler", metavar="ADDRESS", help="existing scheduler, e.g. tcp://10.0.0.5:8786 or tls://...")
    g.add_argument("--scheduler-file", metavar="FILE", help="scheduler file written by `dask scheduler --scheduler-file`")
    g.add_argument("--n-workers", type=_at_least(1), metavar="N",
                   help="start a private LocalCluster of N worker processes on 127.0.0.1 (default: see above)")
    g.add_argument("--tls-ca-file", metavar="PEM", help="TLS: certificate authority, for a tls:// scheduler")
    g.add_argument("--tls-cert", metavar="PEM", help="TLS: client certificate, for a tls:// scheduler")
    g.add_argument("--tls-key", metavar="PEM", help="TLS: client private key, for a tls:// scheduler")


#: Rows of the parameter table that :func:`_add_input` adds (with the input options).
_INPUT_ROWS = ("kernel", "block_rows", "degenerate_kernels")


def _add_fit_options(p, command):
    """The fit parameters of ``command`` (the parameter table, :mod:`lswmkc_dask._params`), and --quiet."""
    add_arguments(p, command, exclude=_INPUT_ROWS)
    p.add_argument("--quiet", action="store_true",
                   help="nothing on stderr but warnings and errors (no header, no line per iteration)"
                   if command == "fit" else "no progress lines on stderr (one per grid point)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``lswmkc`` (sub-commands prepare, fit, sweep, plot)."""
    parser = argparse.ArgumentParser(prog="lswmkc", description="LSWMKC multiple kernel clustering on Dask")
    parser.add_argument("--version", action="version", version=f"lswmkc {__version__}",
                        help="print the version of lswmkc-dask and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "prepare", help="preprocess kernels into a chunked zarr store",
        usage="lswmkc prepare [-h] (INPUT | --dataset NAME | --features FILE [FILE ...]) [options] OUTPUT\n"
              "       lswmkc prepare ... --output OUTPUT",
        description="Symmetrise, centre and normalise base kernels into a chunked zarr store. OUTPUT is the "
                    "last path on the command line (also after --features a.csv b.csv), or --output OUTPUT.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="INPUT OUTPUT, or only OUTPUT with --dataset/--features; the last path is OUTPUT "
                        "unless --output is given")
    p.add_argument("--output", metavar="STORE", help="the store to write (instead of the last PATH)")
    _add_input(p, "prepare", positional=False)
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="precision of the stored kernels (default float64, which reproduces the reference; float32 "
                        "halves the store and the bytes read, every step still accumulates in float64)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing store written by lswmkc (never a file or another directory), once the "
                        "new one is complete")

    f = sub.add_parser("fit", help="fit LSWMKC for one alpha",
                       description="Fit LSWMKC for one alpha; print iterations, kernel weights and metrics.")
    _add_input(f, "fit")
    _add_fit_options(f, "fit")
    f.add_argument("--output", metavar="DIR",
                   help="write report.json, labels.csv, affinity.npz (Z), kstar_factor.npy (W, K* = W W^T), "
                        "embedding.npy and model.npz (LSWMKC.load(DIR) reloads the model; `lswmkc plot DIR` draws "
                        "it) into this new directory")
    f.add_argument("--overwrite", action="store_true",
                   help="replace an existing output directory written by lswmkc (never a file or another "
                        "directory), once the fit is done")
    _add_cluster(f)

    w = sub.add_parser("sweep", help="fit a grid of alpha (and n_neighbors) values, resumably",
                       description="Fit LSWMKC over a grid of alpha and n_neighbors; rerun the same command to resume.")
    _add_input(w, "sweep")
    _add_fit_options(w, "sweep")
    w.add_argument("--output", metavar="DIR", required=True, help="sweep directory (rerun to resume)")
    w.add_argument("--overwrite", action="store_true",
                   help="discard earlier results in DIR: only a directory written by lswmkc, never the working or "
                        "home directory; the old results are replaced when the first new grid point is done")
    _add_cluster(w, grid=True)

    cp = sub.add_parser(
        "compare", help="LSWMKC against Avg-KKM, MKKM and the KNN mechanism, same protocol, resumably",
        description="LSWMKC over its alpha grid and the paper's baselines over theirs (Avg-KKM; MKKM; the KNN-"
                    "localised average kernel over tau), each ending with the same spectral embedding and k-means "
                    "and scored under both protocols; one table (comparison.csv/.json). Rerun the same command to "
                    "resume; `lswmkc plot DIR` draws the bar chart.",
    )
    _add_input(cp, "compare")
    cp.add_argument("--methods", nargs="+", choices=("avg-kkm", "mkkm", "knn", "lswmkc"), metavar="METHOD",
                    help="methods to run: avg-kkm mkkm knn lswmkc (default all)")
    cp.add_argument("--taus", type=float, nargs="+", metavar="TAU",
                    help="neighbour ratios of the KNN mechanism, in (0, 1] (default 0.1 .. 0.9)")
    _add_fit_options(cp, "compare")
    cp.add_argument("--output", metavar="DIR", required=True, help="compare directory (rerun to resume)")
    cp.add_argument("--overwrite", action="store_true",
                    help="discard earlier results in DIR (only a directory written by lswmkc); replaced when the "
                         "first new run is done")
    _add_cluster(cp, grid=True)

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
                    help="replace PNG files that lswmkc plot wrote in an --output directory it did not create "
                         "(a file it did not write, a directory or a link is never replaced)")

    tb = sub.add_parser("table", help="the metrics table of a sweep or compare directory for a paper (LaTeX/Markdown)",
                        description="Print the metrics table as the paper lays it out: methods (or the selected and "
                                    "best grid points of a sweep) in columns, ACC/NMI/Purity/ARI in percent in rows, "
                                    "the best of each row in bold, one block per evaluation protocol.")
    tb.add_argument("directory", metavar="DIR", help="directory written by `lswmkc compare` or `lswmkc sweep`")
    tb.add_argument("--format", choices=("latex", "markdown"), default="latex", help="output format (default latex)")
    tb.add_argument("--caption", help="table caption (default: the data set and the command's kind)")
    tb.add_argument("--output", metavar="FILE",
                    help="also write the table to this new file (e.g. table.tex), its first line a comment naming "
                         "lswmkc; default: stdout only")
    tb.add_argument("--overwrite", action="store_true",
                    help="replace an --output file that lswmkc table wrote (never another file)")

    v = sub.add_parser("verify", help="check every chunk of a kernel store (exit 0 intact, 2 damaged)",
                       description="Read every chunk of a kernel store and check it: present, crc32c checksum and "
                                   "manifest, finite values, unit diagonal, symmetry. Prints one OK line, or every "
                                   "problem found; exit 0 if intact, 2 if damaged.")
    v.add_argument("store", metavar="STORE", help="kernel store (*.zarr directory or URL) written by `lswmkc prepare`")
    v.add_argument("--output", metavar="JSON",
                   help="also write the result to this new JSON file (ok, problems, n_samples, n_kernels, chunks)")
    v.add_argument("--overwrite", action="store_true",
                   help="replace an existing --output file that lswmkc verify wrote (never another file, a "
                        "directory or a link)")
    return parser


# --- messages ------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def flag_table() -> dict[str, str]:
    """Python keyword -> command-line flag, read from the parser: every long option by its
    ``dest`` (``n_clusters`` -> ``--n-clusters``), store_true/store_false flags also as
    ``"name=True"``/``"name=False"`` (``header=False`` -> ``--no-header``)."""
    table: dict[str, str] = {}
    parser = build_parser()
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in (parser, *(p for a in commands for p in a.choices.values())):
        for action in sub._actions:
            flag = next((o for o in action.option_strings if o.startswith("--")), None)
            if flag is None or action.dest == "help":
                continue
            if isinstance(action, argparse._StoreTrueAction):
                table.setdefault(f"{action.dest}=True", flag)
            elif isinstance(action, argparse._StoreFalseAction):
                table.setdefault(f"{action.dest}=False", flag)
                continue
            table.setdefault(action.dest, flag)
    return table


def cli_message(exc: object) -> str:
    """The text of ``exc`` (an exception, a warning or a :class:`~lswmkc_dask.errors.Message`)
    with the parameters it names spelled as command-line flags.

    The library keeps such messages as a template and its parameters
    (:class:`~lswmkc_dask.errors.Param`): ``overwrite=True or --overwrite`` reads
    ``--overwrite``, ``n_clusters must be ...`` ``--n-clusters must be ...``,
    ``degenerate_kernels='drop'`` ``--degenerate-kernels drop``. Nothing else of the text
    changes (file paths, values); plain text is returned as it is.
    """
    return render_message(exc, flag_table())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"lswmkc: warning: {cli_message(message)}", file=file or sys.stderr, flush=True)


# --- commands ------------------------------------------------------------------------


def _load_input(args, input_path):
    """(data for prepare/as_store, labels, description)."""
    from .datasets import load_dataset
    from .io import load_features, read_labels
    from .kernels import FeatureKernels

    given = [x for x in (input_path, args.dataset, args.features) if x]
    if len(given) != 1:
        raise CLIError("give exactly one input: a file or store, --dataset NAME, or --features FILE ...")
    labels = None
    if args.dataset:
        data, labels = load_dataset(args.dataset)
        desc = f"dataset {args.dataset}"
    elif args.features:
        views = []
        for fpath in args.features:
            x, y = load_features(fpath, label_column=args.label_column, header=args.header,
                                 index_columns=args.index_columns)
            views.append(x)
            labels = y if labels is None else labels
        kernel = canonical_kernel(args.kernel)
        data = FeatureKernels(views, kernel, degree=args.degree, names=_view_names(args.features))
        desc = f"{kernel} kernels of {len(views)} feature views"
    else:
        data, desc = input_path, str(input_path)
    if args.labels:
        labels = read_labels(args.labels)
    return data, labels, desc


def _view_names(paths):
    """Kernel names of ``--features`` files: each file's name without its suffixes
    (``mfeat-fac.csv.gz`` -> ``mfeat-fac``); the parent directory added where two stems
    coincide, the 0-based position where that is not enough."""
    def stem(p):
        name = Path(p).name
        for suffix in sorted(_FEATURE_SUFFIXES + (".gz",), key=len, reverse=True):
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name

    names = [stem(p) for p in paths]
    if len(set(names)) < len(names):
        names = [f"{Path(p).parent.name}/{s}" if Path(p).parent.name else s for p, s in zip(paths, names)]
    if len(set(names)) < len(names):
        names = [f"{s} ({i})" for i, s in enumerate(names)]
    return names


def _degenerate_kw(args):
    """``{"degenerate_kernels": ...}`` when the flag is given (else the library's default)."""
    return {} if args.degenerate_kernels is None else {"degenerate_kernels": args.degenerate_kernels}


def _prepare_paths(args):
    """(INPUT or None, OUTPUT) of ``lswmkc prepare``: OUTPUT is --output or the last path.

    With ``--features a.csv b.csv OUT.zarr`` argparse gives all three names to
    --features; the last one is OUTPUT unless it names a feature file (a typo that
    would otherwise prepare one view fewer into a directory named like a view).
    """
    paths = list(args.paths)
    single = bool(args.dataset or args.features)
    if args.output is not None:
        output = args.output
    elif paths:
        output = paths.pop()
    elif args.features and len(args.features) >= 2:
        last = args.features[-1]
        if last.lower().endswith(_FEATURE_SUFFIXES) or Path(last).is_file():
            raise CLIError(
                f"no OUTPUT store: {last} looks like a feature file; give the store to write last "
                "(lswmkc prepare --features a.csv b.csv OUTPUT.zarr) or as --output OUTPUT.zarr"
            )
        output = args.features.pop()
    else:
        raise CLIError("no OUTPUT store given: usage: lswmkc prepare INPUT OUTPUT.zarr "
                       "(or --dataset NAME / --features FILE ... with OUTPUT last, or --output OUTPUT.zarr)")
    if single:
        if paths:
            raise CLIError(f"with --dataset or --features give only OUTPUT (got also {' '.join(paths)})")
        return None, output
    if len(paths) != 1:
        raise CLIError("usage: lswmkc prepare INPUT OUTPUT.zarr (or --dataset NAME / --features FILE ... "
                       "with OUTPUT last, or --output OUTPUT.zarr)")
    return paths[0], output


def _input_paths(args, input_path):
    """Every input file or store of the command: an output holding one is never replaced."""
    return [p for p in (input_path, *(args.features or ()), args.labels) if p]


def _check_sweep_output(args):
    """``lswmkc sweep --output DIR``, checked before any work (sweep() checks again and locks)."""
    from .io.locks import RunDirectory

    RunDirectory(args.output, kind="sweep", overwrite=args.overwrite, resume_file="sweep.json",
                 inputs=_input_paths(args, args.input)).check()


def _cmd_prepare(args):
    from .io import prepare
    from .io.atomic import check_new_output

    input_path, output = _prepare_paths(args)
    args.output = output  # named by an error that ends the run (a full disk)
    if "://" not in str(output):  # before any work: exists/ours/protected, writable (io/atomic.py)
        check_new_output(output, args.overwrite, inputs=_input_paths(args, input_path))
    data, labels, desc = _load_input(args, input_path)
    t = time.perf_counter()
    store = prepare(data, output, labels=labels, block_rows=args.block_rows, overwrite=args.overwrite, dtype=args.dtype,
                    **_degenerate_kw(args))
    print(
        f"wrote {output}: {store.n_kernels} kernels x {store.n_samples} samples, "
        f"chunks of {store.block_rows} rows, labels {'yes' if store.labels is not None else 'no'} "
        f"({time.perf_counter() - t:.1f} s, from {desc})"
    )
    return 0


def _open_input_store(data, args):
    """The kernel store of ``data``: a store as is, anything else prepared in memory."""
    from .estimator import as_store
    from .io import KernelStore, prepare

    if isinstance(data, KernelStore) or (isinstance(data, str) and (Path(data).is_dir() or "://" in data)):
        return as_store(data, args.block_rows)
    return prepare(data, None, block_rows=args.block_rows, **_degenerate_kw(args))


def _cmd_fit(args):
    from ._validate import validate, validated
    from .estimator import LSWMKC
    from .io import check_labels, count_classes
    from .io.atomic import check_new_output
    from .report import fit_report, format_metrics, write_fit_output

    if args.output:  # before any work: exists/ours/protected, writable (io/atomic.py)
        check_new_output(args.output, args.overwrite, inputs=_input_paths(args, args.input))
    data, labels, desc = _load_input(args, args.input)
    store = _open_input_store(data, args)
    if labels is None:
        labels = store.labels
        where = "labels of the input"
    else:
        where = f"labels in {args.labels}" if args.labels else "labels"
    labels = check_labels(labels, store.n_samples, where)
    n_clusters = args.n_clusters
    if n_clusters is None:
        if labels is None:
            raise CLIError("--n-clusters is required when the input has no labels")
        n_clusters = count_classes(labels)
    validate("LSWMKC", {"n_clusters": n_clusters, "n_neighbors": args.n_neighbors}, store.n_samples)  # before header
    if not args.quiet:
        print(f"LSWMKC on {desc}: {store.n_kernels} kernels, {store.n_samples} samples, k={n_clusters}, "
              f"alpha={args.alpha:g}, c={args.n_neighbors}", file=sys.stderr, flush=True)
    extra_kw = dict(_degenerate_kw(args), eig_driver=args.eig_driver, eig_precision=args.eig_precision,
                    eig_device=args.eig_device)
    if args.eig_threads is not None:
        extra_kw["eig_threads"] = args.eig_threads
    t = time.perf_counter()

    @validated()  # the flags were checked as they were parsed, n above: the fit checks nothing again
    def run(client):
        return LSWMKC(
            n_clusters, alpha=args.alpha, n_neighbors=args.n_neighbors, gamma=args.gamma,
            snapshot_iterations=args.snapshot_iterations, max_iter=args.max_iter, min_iter=args.min_iter, tol=args.tol,
            n_init=args.n_init, random_state=args.random_state, client=client, n_workers=args.n_workers,
            block_rows=args.block_rows, verbose=0 if args.quiet else 1, **extra_kw,
        ).fit(store)

    extra = {"input": desc}
    if args.scheduler or args.scheduler_file:
        from .cluster import connect, make_security

        security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
        with connect(scheduler=args.scheduler, scheduler_file=args.scheduler_file, security=security) as client:
            extra["n_workers"] = len(client.scheduler_info()["workers"])
            fallback = f"Dask: {extra['n_workers']} workers at {client.scheduler.address}"
            if not args.quiet:
                print(fallback, file=sys.stderr, flush=True)
            model = run(client)
    else:
        if args.tls_ca_file or args.tls_cert or args.tls_key:
            raise CLIError("--tls-ca-file/--tls-cert/--tls-key need --scheduler or --scheduler-file")
        # The estimator chooses where to run: in-process for small problems, else its own LocalCluster.
        fallback = "a private Dask LocalCluster" + (f" of {args.n_workers} workers" if args.n_workers else "")
        model = run(None)
    wall = time.perf_counter() - t
    extra["execution"] = getattr(model, "execution_", None) or fallback
    extra["wall_seconds_total"] = wall
    execution = extra["execution"]
    report = fit_report(model, labels, extra=extra)
    print(f"ran on           {execution}")
    print(f"iterations       {model.n_iter_} ({'converged' if model.converged_ else 'stopped at --max-iter'})")
    print(f"seconds          {model.fit_seconds_:.2f} in iterations ({model.fit_seconds_ / max(model.n_iter_, 1):.3f} "
          f"per iteration), {wall:.2f} wall in all")
    print("kernel weights   " + " ".join(f"{w:.4f}" for w in model.kernel_weights_))
    print(f"objective        {model.objective_[0]:.6g} -> {model.objective_[-1]:.6g}")
    if labels is not None:
        print("metrics, honest  " + format_metrics(report["metrics"]["honest"])
              + f"  (labels_: best inertia of {args.n_init} k-means starts)")
        print("metrics, paper   " + format_metrics(report["metrics"]["paper"])
              + f"  (max over {args.n_init} single-start k-means runs)")
    if args.output:
        write_fit_output(args.output, report, model.labels_, overwrite=args.overwrite, affinity=model.affinity_,
                         kstar_factor=model.kstar_factor_, embedding=model.embedding_, model=model,
                         snapshots=getattr(model, "snapshots_", None))
        print(f"wrote {args.output}/report.json, labels.csv, affinity.npz, kstar_factor.npy, embedding.npy and "
              "model.npz")
    return 0


#: ``lswmkc sweep`` runs in its own process up to this many bytes of kernels, on a
#: LocalCluster of one worker process per core above (benchmarks/README.md).
CLI_IN_PROCESS_MAX_BYTES = 64 * 2**20


def _grid_workers(args, data):
    """(data, n_workers) for a grid run (sweep, compare) started from the command line.

    The command line may start worker processes (it has a ``__main__``): above
    CLI_IN_PROCESS_MAX_BYTES of kernels a grid is faster on one worker process per core
    (11 Handwritten alphas: 2.8 min on 2 processes vs 5.0 min on 1); below, the
    cluster's start-up costs more than it saves (YALE: 5.5 s in all in-process). The
    input is preprocessed here to know its size, and handed on as the store.
    """
    if args.n_workers is not None or args.scheduler or args.scheduler_file:
        return data, args.n_workers
    from .cluster import CPU_COUNT
    from .estimator import as_store

    store = as_store(data, args.block_rows, **_degenerate_kw(args))
    stack = store.itemsize * store.n_kernels * store.n_samples**2
    return store, CPU_COUNT if stack > CLI_IN_PROCESS_MAX_BYTES else None


def _gamma_text(point):
    gamma = point.get("gamma", "auto")
    return "" if gamma == "auto" else f" gamma={gamma:g}"


def _cmd_sweep(args):
    from ._grid import Where
    from .cluster import make_security
    from .sweep import DEFAULT_ALPHAS, exact_text, selection_line, summary_table, sweep

    _check_sweep_output(args)  # before any work: not foreign/protected/in use, writable
    data, labels, desc = _load_input(args, args.input)
    security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    extra_kw = dict(_degenerate_kw(args), eig_device=args.eig_device, eig_precision=args.eig_precision,
                    eig_driver=args.eig_driver)
    if args.eig_threads is not None:
        extra_kw["eig_threads"] = args.eig_threads
    progress = not args.quiet
    data, n_workers = _grid_workers(args, data)
    summary = sweep(
        data, args.output, n_clusters=args.n_clusters, alphas=args.alphas or DEFAULT_ALPHAS,
        n_neighbors=args.n_neighbors, gammas=args.gammas, snapshot_iterations=args.snapshot_iterations, labels=labels,
        client=Where(args.scheduler, args.scheduler_file, security, n_workers), mode=args.mode, concurrency=args.concurrency,
        max_iter=args.max_iter, min_iter=args.min_iter, tol=args.tol, n_init=args.n_init,
        random_state=args.random_state, block_rows=args.block_rows, overwrite=args.overwrite, progress=progress,
        data_description=desc, repeats=args.repeats,
        **extra_kw,
    )
    if not progress:  # with progress, sweep() has printed the table (stdout) already
        print(summary_table(summary["rows"], summary.get("selected")))
    chosen = summary.get("selected")
    if chosen:
        print(selection_line(chosen))
    for key in ("best_by_honest_ACC", "best_by_paper_ACC"):
        b = summary.get(key)
        if b:
            print(f"{key}: alpha={exact_text(b['alpha'])} c={b['n_neighbors']} k={b['n_clusters']}{_gamma_text(b)} "
                  f"({list(b.values())[-1]:.4f})")
    print(f"wrote {args.output}/summary.csv, summary.json and runs/")
    return 0


def _cmd_compare(args):
    from ._grid import Where
    from .baselines import DEFAULT_TAUS
    from .cluster import make_security
    from .compare import METHODS, format_table
    from .compare import compare as run_compare
    from .io.locks import RunDirectory
    from .sweep import DEFAULT_ALPHAS

    inputs = [p for p in (args.input, *(args.features or ()), args.labels) if p]
    RunDirectory(args.output, kind="compare", overwrite=args.overwrite, resume_file="compare.json",
                 inputs=inputs).check()  # before any work; compare() checks again and locks
    data, labels, desc = _load_input(args, args.input)
    security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    data, n_workers = _grid_workers(args, data)
    rows = run_compare(
        data, args.output, n_clusters=args.n_clusters, labels=labels, methods=args.methods or METHODS,
        alphas=args.alphas or DEFAULT_ALPHAS, n_neighbors=args.n_neighbors, taus=args.taus or DEFAULT_TAUS,
        client=Where(args.scheduler, args.scheduler_file, security, n_workers),
        max_iter=args.max_iter, min_iter=args.min_iter, tol=args.tol, n_init=args.n_init,
        random_state=args.random_state, block_rows=args.block_rows, overwrite=args.overwrite,
        progress=not args.quiet, data_description=desc, repeats=args.repeats,
        eig_threads=args.eig_threads, eig_device=args.eig_device, eig_precision=args.eig_precision,
        eig_driver=args.eig_driver,
        **_degenerate_kw(args),
    )
    if args.quiet:  # with progress, compare() has printed the table (stdout) already
        print(format_table(rows))
    print(f"wrote {args.output}/comparison.csv, comparison.json, runs/ and lswmkc/")
    return 0


def _cmd_plot(args):
    from .plots import MatplotlibMissingError, plot_sweep

    try:
        written = plot_sweep(args.directory, args.output, alpha=args.alpha, overwrite=args.overwrite,
                             n_clusters=args.n_clusters)
    except MatplotlibMissingError as exc:
        raise CLIError(str(exc)) from None
    if (Path(args.directory) / "sweep.json").is_file() and not (Path(args.directory) / "compare.json").is_file():
        from .plots import sweep_point

        print(sweep_point(args.directory, args.alpha, args.n_clusters).describe())  # which (alpha, k), and why
    for path in written:
        print(f"wrote {path}")
    return 0


def _cmd_table(args):
    from .io.atomic import atomic_path, check_file_output
    from .tables import format_table, signed_table, table_is_ours, table_of

    if args.output:  # before any work: never a directory, a link, a foreign file or inside the input; writable
        check_file_output(args.output, args.overwrite, inputs=[args.directory], owned=table_is_ours)
    columns = table_of(args.directory)
    caption = args.caption
    if caption is None:
        data = ""
        for name in ("compare.json", "sweep.json"):
            path = Path(args.directory) / name
            if path.is_file():
                data = json.loads(path.read_text()).get("data") or ""
        name = Path(str(data)).name if data and data != "array" else Path(args.directory).resolve().name
        caption = f"Clustering results on {name} (%)"
    text = format_table(columns, args.format, caption)
    print(text, end="")
    if args.output:
        with atomic_path(args.output, overwrite=args.overwrite, inputs=[args.directory], owned=table_is_ours) as tmp:
            Path(tmp).write_text(signed_table(text, args.format))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _cmd_verify(args):
    import json

    from .io.atomic import atomic_path, check_file_output, json_is_ours, signature
    from .io.integrity import inspect_store

    if "://" not in args.store and Path(args.store).is_file():
        raise CLIError(f"{args.store} is a file, not a kernel store (a *.zarr directory); `lswmkc prepare "
                       f"{args.store} STORE.zarr` writes one, and `lswmkc verify STORE.zarr` checks it")
    if args.output:  # before any work: never a directory, a link, a foreign file or inside the store; writable
        check_file_output(args.output, args.overwrite, inputs=[args.store], owned=json_is_ours)
    report = inspect_store(args.store)
    if args.output:
        fields = ("ok", "format", "n_samples", "n_kernels", "block_rows", "n_chunks", "checks", "problems")
        with atomic_path(args.output, overwrite=args.overwrite, inputs=[args.store], owned=json_is_ours) as tmp:
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


class _Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C; the exit status is 128 + 15."""


def _mute_event_loop_logs():
    """After Ctrl-C or SIGTERM: the event loop's teardown errors are noise, not news.

    distributed's ``sync`` schedules a cancel callback when the main thread is
    interrupted; run before its future exists it logs a ``NameError`` traceback through
    tornado (seen in interrupted fits). The one "interrupted" line says it all.
    """
    for name in ("tornado.application", "asyncio", "distributed"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _on_sigterm(signum, frame):  # pragma: no cover - exercised by a subprocess test
    _mute_event_loop_logs()
    raise _Terminated(f"signal {signum}")


def _on_sigint(signum, frame):  # pragma: no cover - exercised by a subprocess test
    _mute_event_loop_logs()
    raise KeyboardInterrupt


def _name_labels_file(text, args):
    """Name the --labels file in a length error raised where only "labels" was known."""
    path = getattr(args, "labels", None)
    if path and text.startswith("labels have length "):
        return f"labels in {path} have length " + text[len("labels have length "):]
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lswmkc``; returns the exit status (0 ok, 1 a failed run: full disk, out of memory, the
    scheduler lost; 2 bad input; 130 Ctrl-C, 143 SIGTERM), with one ``lswmkc: error:`` line on an error."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    _check_flags(parser, argv)
    args = parser.parse_args(argv)
    _check_iterations(parser, args)
    if getattr(args, "n_workers", None) and (getattr(args, "scheduler", None) or getattr(args, "scheduler_file", None)):
        parser.error("--n-workers starts a private LocalCluster; it cannot be used with --scheduler or "
                     "--scheduler-file (the existing cluster's workers are used)")

    # SIGTERM unwinds like Ctrl-C: temporary outputs are removed, the cluster is closed.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _on_sigterm)
    if saved[signal.SIGINT] is signal.default_int_handler:  # (not when ignored, as in `cmd &`)
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        return _run(args)
    finally:  # the caller's handlers back (main() may be called in a process that goes on)
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def _subcommands(parser):
    """{name: sub-parser} of ``lswmkc``."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _check_flags(parser, argv):
    """Refuse, before argparse parses ``argv``, an unknown flag with the closest known
    one (``--alpah``: "did you mean --alpha?", difflib), and a k grid given to ``fit``
    (``fit --n-clusters 3 4``, where argparse would take the 4 for INPUT).

    A flag is known when it is one of the command's or an abbreviation argparse expands
    (a prefix of one); tokens after ``--`` are not flags. Errors go through the
    command's parser (its usage, ``lswmkc CMD: error: ...``, exit 2).
    """
    commands = _subcommands(parser)
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if at is None or argv[at] not in commands:
        return  # no command, or an unknown one: argparse says so, listing the commands
    command, rest, sub = argv[at], argv[at + 1:], commands[argv[at]]
    options = sorted({o for a in sub._actions for o in a.option_strings if o.startswith("--")})
    for token in itertools.takewhile(lambda t: t != "--", rest):
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or " " in flag or any(o.startswith(flag) for o in options):
            continue  # a value (argparse takes a dash-led text with a space for one), or a known flag
        close = difflib.get_close_matches(flag, options, n=1)
        sub.error(f"unrecognized argument {flag}: " + (f"did you mean {close[0]}?" if close else
                                                     f"`lswmkc {command} -h` lists the flags"))
    if command == "fit" and "--n-clusters" in rest:
        after = rest[rest.index("--n-clusters") + 1:]
        ks = list(itertools.takewhile(lambda t: t.isdigit() and not Path(t).exists(), after))
        if len(ks) > 1:
            sub.error(f"fit takes one --n-clusters K, got {' '.join(ks)}; a k grid is swept: lswmkc sweep INPUT "
                      f"--n-clusters {' '.join(ks)} --output DIR (one fit per alpha, clustered at every k, the "
                      "label-free choice covering k)")


def _check_iterations(parser, args):
    """``--min-iter`` above ``--max-iter`` refused, naming both; unset, the default 20 (the
    Python API's ``min_iter``), which a smaller ``--max-iter`` simply does not reach."""
    if not hasattr(args, "min_iter"):
        return
    from .estimator import MIN_ITER, check_iterations

    if args.min_iter is None:
        args.min_iter = MIN_ITER
        return
    try:
        check_iterations(args.max_iter, args.min_iter, default_allowed=False)
    except ValueError as exc:
        _subcommands(parser)[args.command].error(cli_message(exc))


def _run(args):
    """The command of ``args`` with the CLI's error handling (see :func:`main`)."""
    # distributed's own INFO records (e.g. "Batched Comm Closed" with a traceback when the
    # scheduler goes away) would precede the one error line; warnings and errors still show.
    # The level is set where distributed reads it on import, and on its logger if imported.
    import dask

    if "version" not in (dask.config.get("logging", None) or {}):  # (not a user's dictConfig)
        dask.config.set({"logging.distributed": "warning"})
    dask_log = logging.getLogger("distributed")
    if "distributed" in sys.modules and dask_log.getEffectiveLevel() < logging.WARNING:
        dask_log.setLevel(logging.WARNING)
    commands = {"prepare": _cmd_prepare, "fit": _cmd_fit, "sweep": _cmd_sweep, "compare": _cmd_compare,
                "plot": _cmd_plot, "table": _cmd_table, "verify": _cmd_verify}
    client_log = logging.getLogger("distributed.client")
    client_log.addFilter(_QUIET_RECONNECT)  # for this command only (main() may run inside a program)
    try:
        return _run_command(commands[args.command], args)
    finally:
        client_log.removeFilter(_QUIET_RECONNECT)


#: Start of the record that ``distributed.Client`` logs (ERROR) when its scheduler did not
#: come back within the connect timeout: the command's own error line says so, and what to do.
RECONNECT_FAILED = "Failed to reconnect to scheduler after"


class QuietReconnectFailure(logging.Filter):
    """Drops ``distributed.client``'s "Failed to reconnect to scheduler after ... seconds,
    closing client" record while a command runs: the lost scheduler ends the command with
    one ``lswmkc: error:`` line naming its address and what to do, which this record would
    precede. Every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the reconnection failure (dropped), True for any other record."""
        return not str(record.msg).startswith(RECONNECT_FAILED)


_QUIET_RECONNECT = QuietReconnectFailure()


def _run_command(command, args):
    """``command(args)`` with the CLI's error handling (see :func:`main`)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return command(args)
    except KeyboardInterrupt as exc:
        if args.command in ("sweep", "compare"):
            print("lswmkc: interrupted; finished results are kept, rerun the same command to go on", file=sys.stderr)
        else:  # outputs are written under a temporary name and renamed when complete
            print("lswmkc: interrupted; nothing was written", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT)
    except SchedulerLostError as exc:  # a failed run, not bad input
        print(f"lswmkc: error: {cli_message(exc)}", file=sys.stderr)
        return 1
    except MemoryError as exc:  # a failed run: a worker (or this process) too small for the problem
        print(f"lswmkc: error: {cli_message(exc) or 'out of memory'}", file=sys.stderr)
        return 1
    except DeviceUnavailableError as exc:  # --eig-device cuda where no GPU can run the step
        print(f"lswmkc: error: {cli_message(exc)}", file=sys.stderr)
        return 2
    except (CLIError, KernelInputError, FileNotFoundError, FileExistsError, PermissionError, ValueError,
            ConnectionError) as exc:
        print(f"lswmkc: error: {_name_labels_file(cli_message(exc), args)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a failed run: the disk filled, the file system went read-only, an I/O error
        lost = _lost_scheduler(exc, args)
        if lost is None and isinstance(exc, TimeoutError) and exc.errno is None:  # no Dask worker came
            lost = cli_message(exc)
        print(f"lswmkc: error: {lost or _os_error_message(exc, args)}", file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. distributed's CommClosedError or a cancelled future, with the scheduler gone
        lost = _lost_scheduler(exc, args)
        if lost is None:
            raise
        print(f"lswmkc: error: {lost}", file=sys.stderr)
        return 1


def _lost_scheduler(exc, args):
    """The one-line message when ``exc`` ended a run on a --scheduler that no longer answers, else None."""
    address = getattr(args, "scheduler", None)
    if not address and getattr(args, "scheduler_file", None):
        import json

        try:
            with open(args.scheduler_file) as fh:
                address = json.load(fh).get("address")
        except (OSError, ValueError, AttributeError):
            address = None
    if not address:
        return None
    from .cluster import probe_scheduler

    if probe_scheduler(address) is None:  # it answers (or cannot be probed): not a lost scheduler
        return None
    reason = " ".join(str(exc).split())[:160]
    return str(SchedulerLostError(address, f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__))


#: numpy's message for a short write (``ndarray.tofile``, ``np.save``): no errno, a full disk.
_SHORT_WRITE = re.compile(r"^\d+ requested and \d+ written$")


def _os_error_message(exc, args):
    """One line for an OSError that ended a run: what failed, where, and what to do."""
    import errno

    where = exc.filename or getattr(args, "output", None) or "the output"
    kept = ("finished results are kept: rerun the same command to go on" if args.command in ("sweep", "compare")
            else "nothing partial was kept")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or (exc.errno is None and _SHORT_WRITE.match(str(exc))):
        return f"no space left on the device while writing {where}; free space or choose another output ({kept})"
    if exc.errno == errno.EROFS:
        return f"{where} is on a read-only file system; choose another output ({kept})"
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason} ({where}); {kept}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

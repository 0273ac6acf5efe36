"""The input of a command: its options (INPUT, ``--dataset``, ``--features``, how feature
and label files are read), where it runs, and the data they name, read alike by
``prepare``, ``fit``, ``sweep`` and ``compare``."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .._params import add_arguments
from ..errors import CLIError
from ..kernels.features import canonical_kernel
from ._base import table_params

#: Feature-file endings: a name ending so is never taken for the OUTPUT of `prepare`.
FEATURE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".txt", ".npy", ".npz", ".mat")


def add_input(p: argparse.ArgumentParser, command: str, positional: bool = True) -> None:
    """Add the input options of ``command`` to ``p``: the parameter table's section "input"
    and the command line's own (INPUT when ``positional``, --dataset, --features, --labels, ...)."""
    if positional:
        p.add_argument("input", nargs="?", metavar="INPUT",
                       help="kernel store (*.zarr directory or URL), .mat (v5/v7.3, KH and Y) or .npz (kernels, labels)")
    p.add_argument("--dataset", choices=("yale", "handwritten"), help="a data set shipped with the package instead of INPUT")
    p.add_argument("--features", nargs="+", metavar="FILE",
                   help="one feature file per view (.csv, .csv.gz, .npy, .npz with X), samples in rows, instead of INPUT; "
                        "each kernel is named after its file (mfeat-fac.csv -> mfeat-fac)")
    add_arguments(p, command, ("kernel", "degree"))
    add_feature_reading(p, command)
    p.add_argument("--labels", metavar="FILE",
                   help="ground-truth labels, one per sample in sample order: .txt/.csv/.csv.gz (one per line, or "
                        "CSV rows whose last cell is the label; the first row is a header only if it has a "
                        "non-numeric cell, see lswmkc_dask.io.read_labels) or .npy; overrides labels in the input")
    if command in ("fit", "sweep", "compare"):
        p.add_argument("--ignore-labels", action="store_true",
                       help="leave out the labels that the input holds (a store, .mat, .npz or --dataset): the run "
                            "is the one on the same input without labels (no metrics; the label-free choice of "
                            "alpha and k)")
    add_arguments(p, command, ("block_rows", "degenerate_kernels"))  # the rest of the section "input"


def add_feature_reading(p: argparse.ArgumentParser, command: str) -> None:
    """Add how ``--features`` files are read (:func:`read_feature_views`): --label-column,
    --header / --no-header and --index-columns."""
    add_arguments(p, command, ("label_column",))
    hdr = p.add_mutually_exclusive_group()
    hdr.add_argument("--header", dest="header", action="store_true", default=None,
                     help="the first row of each --features CSV is a header (skipped), even if it is numeric")
    hdr.add_argument("--no-header", dest="header", action="store_false",
                     help="the first row of each --features CSV is data (an error if it is not numeric). Default: "
                          "a header if some cell of it is not a number, or if it is the column numbers 0,1,...,d-1 "
                          "that pandas writes as a header (skipped with a warning); any other numeric first row is "
                          "a sample")
    add_arguments(p, command, ("index_columns",))


def add_where(p: argparse.ArgumentParser, command: str, grid: bool = False) -> None:
    """Add the options saying where ``command`` runs (the table's section "where") as a
    group of ``p``, its title giving the default of a ``grid`` command (sweep, compare) or of fit."""
    g = p.add_argument_group(
        "where to run (default: in this process up to 64 MiB of kernels, above that a LocalCluster of one "
        "worker process per core)" if grid else
        "where to run (default: in this process up to 1 GiB of kernels, a threaded Dask LocalCluster above)"
    )
    add_arguments(g, command, section="where")


def where_of(args: argparse.Namespace, n_workers: int | None = None) -> Any:
    """Where the options say a command runs (:class:`lswmkc_dask.engine.where.Where`): --scheduler or
    --scheduler-file with the TLS files, else a private LocalCluster of ``n_workers``."""
    from ..engine.cluster import make_security
    from ..engine.where import Where

    security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    return Where(args.scheduler, args.scheduler_file, security, n_workers)


class Input(NamedTuple):
    """What a command's input options name (:func:`read_input`): the data (a path, a store,
    FeatureKernels or kernels (m, n, n)), the labels (None with ``--ignore-labels``), the
    description (printed, and in report.json) and the raw input whose training statistics
    ``predict`` needs (feature views, a kernel file, kernels; None for a store)."""

    data: Any
    labels: Any
    description: str
    raw: Any


def read_input(args: argparse.Namespace, input_path: str | None) -> Input:
    """The data a command's input options name.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options (``--dataset``, ``--features``, ``--labels``, ...).
    input_path : str or None
        INPUT (a store, a .mat or .npz file).

    Returns
    -------
    Input
        With ``--ignore-labels`` a store or kernel file INPUT opened, without labels.

    Raises
    ------
    CLIError
        None or several of INPUT, --dataset and --features; --ignore-labels with
        --labels or --label-column.
    KernelInputError, FileNotFoundError
        An unreadable feature or label file.
    """
    from ..datasets import load_dataset
    from ..io import read_labels
    from ..kernels.features import FeatureKernels

    given = [x for x in (input_path, args.dataset, args.features) if x]
    if len(given) != 1:
        raise CLIError("give exactly one input: a file or store, --dataset NAME, or --features FILE ...")
    ignore = getattr(args, "ignore_labels", False)
    for flag, value in (("--labels", args.labels), ("--label-column", args.label_column)):
        if ignore and value is not None:
            raise CLIError(f"--ignore-labels leaves out the input's labels; it cannot be given with {flag}")
    data: Any
    if args.dataset:
        data, labels = load_dataset(args.dataset)
        desc, raw = f"dataset {args.dataset}", (None if isinstance(data, FeatureKernels) else data)
    elif args.features:
        raw, labels = read_feature_views(args, args.features)
        kernel = canonical_kernel(args.kernel)
        data = FeatureKernels(raw, kernel, degree=args.degree, names=view_names(args.features))
        desc = f"{kernel} kernels of {len(raw)} feature views"
    else:
        data, labels, desc = input_path, None, str(input_path)
        raw = None if Path(data).is_dir() or "://" in data else data
    if args.labels:
        labels = read_labels(args.labels)
    if ignore:
        labels = None
        if isinstance(data, str):  # a store or kernel file: opened here, without the labels it holds
            store = open_input(args, data, args.command)
            data = dataclasses.replace(store, labels=None,
                                       attrs={k: v for k, v in store.attrs.items() if k != "labels"})
    return Input(data, labels, desc, raw)


def read_checked_input(args: argparse.Namespace, input_path: str | None, kind: str) -> Input:
    """:func:`read_input` of ``input_path``, ``--output`` (if given) checked first, before any work: exists,
    ours, protected, writable (:func:`lswmkc_dask.io.output.check_output` of an output of ``kind``); a
    kernel store at a URL (the one output that can be remote) is checked as it is written."""
    from ..io.output import check_output

    if args.output and not (kind == "kernel-store" and "://" in str(args.output)):
        check_output(args.output, overwrite=args.overwrite, kind=kind, inputs=input_paths(args, input_path))
    return read_input(args, input_path)


def read_feature_views(args: argparse.Namespace, paths: Sequence[str]) -> tuple[list[Any], Any]:
    """The feature views of ``paths`` (one file per view), read as the options say
    (:func:`lswmkc_dask.io.load_features`).

    Returns
    -------
    views : list of ndarray of shape (n, d_v), or of HeaderedView
        A :class:`lswmkc_dask.io._readers.HeaderedView` for a CSV with a header (its column names kept).
    labels : ndarray of shape (n,) or None
        The label column of the first file that has one.

    Raises
    ------
    KernelInputError, FileNotFoundError
        An unreadable feature file (the message names it).
    """
    from ..io import HeaderedView, load_features

    views, labels = [], None
    for fpath in paths:
        x, y, columns = load_features(fpath, label_column=args.label_column, header=args.header,
                                      index_columns=args.index_columns, with_columns=True)
        views.append(x if columns is None else HeaderedView(x, columns))
        labels = y if labels is None else labels
    return views, labels



def view_names(paths: list[str]) -> list[str]:
    """Kernel names of ``--features`` files: each name without its suffixes (``mfeat-fac``),
    with its directory, then its 0-based position, where names coincide."""
    def stem(p):
        name = Path(p).name
        for suffix in sorted(FEATURE_SUFFIXES + (".gz",), key=len, reverse=True):
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name

    names = [stem(p) for p in paths]
    if len(set(names)) < len(names):
        names = [f"{Path(p).parent.name}/{s}" if Path(p).parent.name else s for p, s in zip(paths, names)]
    if len(set(names)) < len(names):
        names = [f"{s} ({i})" for i, s in enumerate(names)]
    return names


def input_paths(args: argparse.Namespace, input_path: str | None) -> list[str]:
    """Every input file or store of the command: an output holding one is never replaced."""
    return [p for p in (input_path, *(args.features or ()), args.labels) if p]


def open_input(args: argparse.Namespace, data: Any, command: str) -> Any:
    """The kernel stack of ``data`` for ``command`` (:func:`lswmkc_dask.engine.route.open_kernels`): a store
    opened, anything else preprocessed in memory in blocks of ``--block-rows`` rows, the views of ``--features``
    whose fit runs wholly on this GPU with their kernels built there.

    Returns
    -------
    lswmkc_dask.io.store.KernelStack
    """
    from ..engine.route import open_kernels
    from ..engine.where import Where
    from ..estimator import LSWMKC

    params = {name: value for name, value in table_params(args, command, exclude=("kernel",)).items()
              if name in LSWMKC._get_param_names()}
    model = LSWMKC(**params)
    k = args.n_clusters
    if isinstance(k, list | tuple):  # `sweep --n-clusters 3 4 5`: the largest k holds the most on the device
        k = max(k) if k else None
    return open_kernels(data, block_rows=args.block_rows, degenerate_kernels=args.degenerate_kernels,
                        options=model._fit_options(k or 2), client=Where(args.scheduler, args.scheduler_file),
                        stack_dtype=model.stack_dtype)

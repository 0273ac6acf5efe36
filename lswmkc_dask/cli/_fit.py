"""``lswmkc prepare`` (kernels into a store) and ``lswmkc fit`` (LSWMKC for one alpha):
their options and what they run."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .._params import add_arguments
from ..errors import CLIError
from ..kernels.features import canonical_kernel
from ._base import add_output, table_params
from ._inputs import FEATURE_SUFFIXES, add_input, add_where, open_input, read_checked_input, where_of


def add_prepare(sub: Any) -> None:
    """Add ``lswmkc prepare`` to the sub-parsers ``sub``."""
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
    add_input(p, "prepare", positional=False)
    add_arguments(p, "prepare", section="output")  # --dtype
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing store written by lswmkc (never a file or another directory), once the "
                        "new one is complete")


def add_fit(sub: Any) -> None:
    """Add ``lswmkc fit`` to the sub-parsers ``sub``."""
    f = sub.add_parser("fit", help="fit LSWMKC for one alpha",
                       description="Fit LSWMKC for one alpha; print iterations, kernel weights and metrics.")
    add_input(f, "fit")
    add_arguments(f, "fit", section="run")
    add_output(f, "DIR", "write report.json, labels.csv and model.safetensors (every array: Z, W with K* = W W^T, "
                         "the embedding, the snapshots; LSWMKC.load(DIR) reloads the model, `lswmkc plot DIR` draws "
                         "it) into this new directory",
               "replace an existing output directory written by lswmkc (never a file or another directory), once "
               "the fit is done")
    add_where(f, "fit")


def prepare_paths(args: argparse.Namespace) -> tuple[str | None, str]:
    """(INPUT or None, OUTPUT) of ``lswmkc prepare``: OUTPUT is --output or the last path
    (also the last of ``--features a.csv b.csv OUT.zarr``, unless it names a feature file).

    Raises
    ------
    CLIError
        No OUTPUT, or paths that are neither INPUT OUTPUT nor OUTPUT alone.
    """
    paths = list(args.paths)
    single = bool(args.dataset or args.features)
    if args.output is not None:
        output = args.output
    elif paths:
        output = paths.pop()
    elif args.features and len(args.features) >= 2:
        last = args.features[-1]
        if last.lower().endswith(FEATURE_SUFFIXES) or Path(last).is_file():
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


def run_prepare(args: argparse.Namespace) -> int:
    """``lswmkc prepare``: the input preprocessed into a new store (:func:`lswmkc_dask.io.prepare`); exit 0."""
    from ..io import prepare

    input_path, output = prepare_paths(args)
    args.output = output  # checked before any work; named by an error that ends the run (a full disk)
    data, labels, desc, _ = read_checked_input(args, input_path, "kernel-store")
    t = time.perf_counter()
    store = prepare(data, output, labels=labels, block_rows=args.block_rows, overwrite=args.overwrite, dtype=args.dtype,
                    degenerate_kernels=args.degenerate_kernels)
    views = " and the feature views for `lswmkc predict --features`" if store.has_feature_views else ""
    print(
        f"wrote {output}: {store.n_kernels} kernels x {store.n_samples} samples, "
        f"chunks of {store.block_rows} rows, labels {'yes' if store.labels is not None else 'no'}{views} "
        f"({time.perf_counter() - t:.1f} s, from {desc})"
    )
    return 0


def _labels_and_k(args: argparse.Namespace, labels: Any, store: Any) -> tuple[Any, int]:
    """The checked labels of a fit (``--labels``, else the input's) and its k."""
    from ..io import check_labels, count_classes

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
    return labels, n_clusters


def _fit_model(args: argparse.Namespace, store: Any, n_clusters: int) -> tuple[Any, dict[str, Any]]:
    """(the fitted LSWMKC, report.json's extra fields) where the options say it runs."""
    from .._validate import validated
    from ..estimator import LSWMKC

    # --kernel built the kernels of --features into the store, which the estimator takes as precomputed
    params = {**table_params(args, "fit", exclude=("kernel",)), "n_clusters": n_clusters}
    t = time.perf_counter()

    @validated()  # the options were checked as they were parsed, n in run_fit: the fit checks nothing again
    def run(client):
        return LSWMKC(**params, client=client).fit(store)

    extra: dict[str, Any] = {}
    if args.scheduler or args.scheduler_file:
        from ..engine.cluster import workers_of

        with where_of(args).open() as client:
            extra["n_workers"] = len(workers_of(client))
            fallback = f"Dask: {extra['n_workers']} workers at {client.scheduler.address}"
            if args.verbose:
                print(fallback, file=sys.stderr, flush=True)
            model = run(client)
    else:  # (TLS files without a scheduler are refused before: validate.check_args)
        # The estimator chooses where to run: in-process for small problems, else its own LocalCluster.
        fallback = "a private Dask LocalCluster" + (f" of {args.n_workers} workers" if args.n_workers else "")
        model = run(None)
    extra["execution"] = getattr(model, "execution_", None) or fallback
    extra["wall_seconds_total"] = time.perf_counter() - t
    return model, extra


def _keep_prediction_state(args: argparse.Namespace, model: Any, raw: Any, store: Any) -> None:
    """Give ``model`` what ``lswmkc predict`` needs (:data:`lswmkc_dask.predict.PREDICT_STATE`): the fit on a
    store prepared from feature views (``lswmkc prepare --features``) set it from the store already.
    """
    from ..predict import prediction_state

    if not args.features and getattr(model, "train_features_", None) is not None:
        return
    if args.features:  # the kernel the store was built with: the model's own, for its new samples
        kernel = canonical_kernel(args.kernel)
        model.set_params(kernel=kernel, kernel_params={"degree": args.degree} if kernel == "poly" else None)
    for name, value in prediction_state(model, raw, store.preprocessing_statistics()).items():
        setattr(model, name, value)


def _print_fit(args: argparse.Namespace, model: Any, report: dict, extra: dict[str, Any], labels: Any) -> None:
    """The result lines of ``lswmkc fit`` (stdout)."""
    from ..report.record import format_metrics

    wall = extra["wall_seconds_total"]
    print(f"ran on           {extra['execution']}")
    print(f"iterations       {model.n_iter_} ({'converged' if model.converged_ else 'stopped at --max-iter'})")
    print(f"seconds          {model.fit_seconds_:.2f} in iterations ({model.fit_seconds_ / max(model.n_iter_, 1):.3f} "
          f"per iteration), {wall:.2f} wall in all")
    print("kernel weights   " + " ".join(f"{w:.4f}" for w in model.kernel_weights_))
    print(f"objective        {model.objective_[0]:.6g} -> {model.objective_[-1]:.6g}")
    if labels is not None:
        for protocol, how in (("honest", f"labels_: best inertia of {args.n_init} k-means starts"),
                              ("paper", f"max over {args.n_init} single-start k-means runs")):
            print(f"metrics, {protocol:<8}" + format_metrics(report["metrics"][protocol]) + f"  ({how})")


def run_fit(args: argparse.Namespace) -> int:
    """``lswmkc fit``: one LSWMKC fit (:class:`lswmkc_dask.LSWMKC`), its result printed and written; exit 0."""
    from .._validate import validate
    from ..report.record import fit_report, write_fit_output

    data, labels, desc, raw = read_checked_input(args, args.input, "fit")
    store = open_input(args, data, "fit")  # feature views fitted on this GPU: their kernels built there
    labels, n_clusters = _labels_and_k(args, labels, store)
    validate("LSWMKC", {"n_clusters": n_clusters, "n_neighbors": args.n_neighbors}, store.n_samples)  # before the header
    if args.verbose:
        print(f"LSWMKC on {desc}: {store.n_kernels} kernels, {store.n_samples} samples, k={n_clusters}, "
              f"alpha={args.alpha:g}, c={args.n_neighbors}", file=sys.stderr, flush=True)
    model, extra = _fit_model(args, store, n_clusters)
    _keep_prediction_state(args, model, raw, store)
    report = fit_report(model.result_, model.get_params(), labels, extra={"input": desc, **extra})
    _print_fit(args, model, report, extra, labels)
    if args.output:
        write_fit_output(args.output, report, model.labels_, overwrite=args.overwrite,
                         model=(vars(model), model.get_params(deep=False)))
        print(f"wrote {args.output}/report.json, labels.csv, model.safetensors")
    return 0

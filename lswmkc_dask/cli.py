"""The ``lswmkc`` command line.

::

    lswmkc prepare INPUT OUTPUT.zarr [--block-rows N]          # kernel file -> store
    lswmkc prepare --features a.csv b.csv --label-column -1 OUTPUT.zarr
    lswmkc fit --dataset yale --alpha 8                          # shipped data
    lswmkc fit STORE.zarr|KERNELS.mat --n-clusters K --alpha A [--scheduler ADDR] [--output DIR]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from .errors import KernelInputError

__all__ = ["main", "build_parser"]


def _add_input(p, positional=True):
    if positional:
        p.add_argument("input", nargs="?", help="kernel store (*.zarr), .mat (v5/v7.3, KH and Y) or .npz (kernels, labels)")
    p.add_argument("--dataset", choices=("yale", "handwritten"), help="a data set shipped with the package")
    p.add_argument("--features", nargs="+", metavar="FILE", help="one feature file per view (.csv[.gz], .npy, .npz)")
    p.add_argument("--kernel", choices=("gaussian", "linear", "polynomial"), default="gaussian",
                   help="kernel built from --features (default: gaussian, bandwidth = mean squared distance)")
    p.add_argument("--degree", type=int, default=2, help="polynomial kernel degree")
    p.add_argument("--label-column", type=int, help="column of the feature files holding labels (e.g. -1)")
    p.add_argument("--labels", metavar="FILE", help="labels file (one per line, or a CSV whose last column is the label)")
    p.add_argument("--block-rows", type=int, help="rows per block (default: ~32 MiB chunks)")


def _add_cluster(p):
    g = p.add_argument_group("Dask cluster (default: a private LocalCluster on 127.0.0.1)")
    g.add_argument("--scheduler", metavar="ADDRESS", help="existing scheduler, e.g. tcp://10.0.0.5:8786 or tls://...")
    g.add_argument("--scheduler-file", metavar="FILE", help="scheduler file written by `dask scheduler --scheduler-file`")
    g.add_argument("--n-workers", type=int, help="workers of the private LocalCluster (default: one per core)")
    g.add_argument("--tls-ca-file", help="TLS: certificate authority (PEM)")
    g.add_argument("--tls-cert", help="TLS: client certificate (PEM)")
    g.add_argument("--tls-key", help="TLS: client private key (PEM)")


def build_parser():
    """The argument parser of ``lswmkc`` (sub-commands prepare, fit, sweep, plot)."""
    parser = argparse.ArgumentParser(prog="lswmkc", description="LSWMKC multiple kernel clustering on Dask")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare", help="preprocess kernels into a chunked zarr store")
    p.add_argument("paths", nargs="+", metavar="[INPUT] OUTPUT", help="input kernel file (unless --dataset/--features) and the store to write")
    _add_input(p, positional=False)
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")

    f = sub.add_parser("fit", help="fit LSWMKC for one alpha")
    _add_input(f)
    f.add_argument("--n-clusters", type=int, help="k (default: number of distinct labels)")
    f.add_argument("--alpha", type=float, default=1.0, help="balance hyper-parameter (default 1)")
    f.add_argument("--n-neighbors", type=int, default=5, help="neighbours c of the initial graph (default 5)")
    f.add_argument("--max-iter", type=int, default=100)
    f.add_argument("--tol", type=float, default=1e-3)
    f.add_argument("--n-init", type=int, default=50, help="k-means starts / paper-protocol runs (default 50)")
    f.add_argument("--random-state", type=int, default=0)
    f.add_argument("--output", metavar="DIR", help="write report.json and labels.csv here")
    f.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    f.add_argument("--quiet", action="store_true", help="no per-iteration progress")
    _add_cluster(f)

    w = sub.add_parser("sweep", help="fit a grid of alpha (and n_neighbors) values, resumably")
    _add_input(w)
    w.add_argument("--n-clusters", type=int, help="k (default: number of distinct labels)")
    w.add_argument("--alphas", type=float, nargs="+", help="alpha grid (default 2^0 .. 2^10)")
    w.add_argument("--n-neighbors", type=int, nargs="+", default=[5], help="grid of neighbours c (default 5)")
    w.add_argument("--mode", choices=("auto", "task", "blockwise"), default="auto",
                   help="task: one task per grid point (small data); blockwise: fits spread over row blocks")
    w.add_argument("--concurrency", type=int, help="blockwise mode: fits in flight (default: number of workers)")
    w.add_argument("--max-iter", type=int, default=100)
    w.add_argument("--tol", type=float, default=1e-3)
    w.add_argument("--n-init", type=int, default=50)
    w.add_argument("--random-state", type=int, default=0)
    w.add_argument("--output", metavar="DIR", required=True, help="sweep directory (rerun to resume)")
    w.add_argument("--overwrite", action="store_true", help="discard earlier results in DIR")
    w.add_argument("--quiet", action="store_true")
    _add_cluster(w)

    pl = sub.add_parser("plot", help="PNG figures of a sweep directory")
    pl.add_argument("directory", help="sweep directory written by `lswmkc sweep`")
    pl.add_argument("--out", help="where to write the PNG files (default DIR/plots)")
    pl.add_argument("--alpha", type=float, help="grid point for the Z and K* heatmaps (default: best honest ACC)")
    return parser


def _load_input(args, input_path):
    """(data for prepare/as_store, labels, description)."""
    from .datasets import load_dataset
    from .io import load_features, read_labels
    from .kernels import FeatureKernels

    given = [x for x in (input_path, args.dataset, args.features) if x]
    if len(given) != 1:
        raise KernelInputError("give exactly one input: a file or store, --dataset NAME, or --features FILE ...")
    labels = None
    if args.dataset:
        data, labels = load_dataset(args.dataset)
        desc = f"dataset {args.dataset}"
    elif args.features:
        views = []
        for fpath in args.features:
            x, y = load_features(fpath, label_column=args.label_column)
            views.append(x)
            labels = y if labels is None else labels
        data = FeatureKernels(views, args.kernel, degree=args.degree)
        desc = f"{args.kernel} kernels of {len(views)} feature views"
    else:
        data, desc = input_path, str(input_path)
    if args.labels:
        labels = read_labels(args.labels)
    return data, labels, desc


def _cmd_prepare(args):
    from .io import prepare

    if args.dataset or args.features:
        if len(args.paths) != 1:
            raise KernelInputError("with --dataset or --features give only OUTPUT")
        input_path, output = None, args.paths[0]
    else:
        if len(args.paths) != 2:
            raise KernelInputError("usage: lswmkc prepare INPUT OUTPUT.zarr")
        input_path, output = args.paths
    data, labels, desc = _load_input(args, input_path)
    t = time.perf_counter()
    store = prepare(data, output, labels=labels, block_rows=args.block_rows, overwrite=args.overwrite)
    print(
        f"wrote {output}: {store.n_kernels} kernels x {store.n_samples} samples, "
        f"chunks of {store.block_rows} rows, labels {'yes' if store.labels is not None else 'no'} "
        f"({time.perf_counter() - t:.1f} s, from {desc})"
    )
    return 0


def _cmd_fit(args):
    from pathlib import Path

    from .cluster import connect, make_security
    from .estimator import LSWMKC, as_store
    from .io import check_labels
    from .report import fit_report, format_metrics, write_fit_output

    if args.output and Path(args.output).exists() and not args.overwrite:
        raise FileExistsError(f"output {args.output} already exists (pass --overwrite to replace it)")
    data, labels, desc = _load_input(args, args.input)
    store = as_store(data, args.block_rows)
    if labels is None:
        labels = store.labels
    labels = check_labels(labels, store.n_samples)
    n_clusters = args.n_clusters
    if n_clusters is None:
        if labels is None:
            raise KernelInputError("--n-clusters is required when the input has no labels")
        n_clusters = int(np.unique(labels).size)
    security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    t = time.perf_counter()
    with connect(scheduler=args.scheduler, scheduler_file=args.scheduler_file, security=security,
                 n_workers=args.n_workers) as client:
        n_workers = len(client.scheduler_info()["workers"])
        print(f"LSWMKC on {desc}: {store.n_kernels} kernels, {store.n_samples} samples, k={n_clusters}, "
              f"alpha={args.alpha:g}, c={args.n_neighbors}; Dask: {n_workers} workers at {client.scheduler.address}",
              file=sys.stderr)
        model = LSWMKC(
            n_clusters, alpha=args.alpha, n_neighbors=args.n_neighbors, max_iter=args.max_iter, tol=args.tol,
            n_init=args.n_init, random_state=args.random_state, client=client, block_rows=args.block_rows,
            verbose=0 if args.quiet else 1,
        ).fit(store)
    wall = time.perf_counter() - t
    report = fit_report(model, labels, extra={"input": desc, "wall_seconds": wall, "n_workers": n_workers})
    print(f"iterations       {model.n_iter_} ({'converged' if model.converged_ else 'stopped at max_iter'})")
    print(f"seconds          {model.fit_seconds_:.2f} in iterations ({model.fit_seconds_ / model.n_iter_:.3f} per iteration), {wall:.2f} wall")
    print("kernel weights   " + " ".join(f"{w:.4f}" for w in model.kernel_weights_))
    print(f"objective        {model.objective_[0]:.6g} -> {model.objective_[-1]:.6g}")
    if labels is not None:
        print("metrics, honest  " + format_metrics(report["metrics"]["honest"]) + f"  (labels_: best inertia of {args.n_init} k-means starts)")
        print("metrics, paper   " + format_metrics(report["metrics"]["paper"]) + f"  (max over {args.n_init} single-start k-means runs)")
    if args.output:
        write_fit_output(args.output, report, model.labels_, overwrite=args.overwrite)
        print(f"wrote {args.output}/report.json and labels.csv")
    return 0


def _cmd_sweep(args):
    from .cluster import make_security
    from .sweep import DEFAULT_ALPHAS, sweep

    data, labels, desc = _load_input(args, args.input)
    security = make_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    summary = sweep(
        data, args.output, n_clusters=args.n_clusters, alphas=args.alphas or DEFAULT_ALPHAS,
        n_neighbors=args.n_neighbors, labels=labels, scheduler=args.scheduler, scheduler_file=args.scheduler_file,
        security=security, n_workers=args.n_workers, mode=args.mode, concurrency=args.concurrency,
        max_iter=args.max_iter, tol=args.tol, n_init=args.n_init, random_state=args.random_state,
        block_rows=args.block_rows, overwrite=args.overwrite, progress=not args.quiet, data_description=desc,
    )
    from .sweep import summary_table

    print(summary_table(summary["rows"]))
    for key in ("best_by_honest_ACC", "best_by_paper_ACC"):
        if summary[key]:
            b = summary[key]
            print(f"{key}: alpha={b['alpha']:g} c={b['n_neighbors']} ({list(b.values())[-1]:.4f})")
    print(f"wrote {args.output}/summary.csv, summary.json and runs/")
    return 0


def _cmd_plot(args):
    from .plots import plot_sweep

    for path in plot_sweep(args.directory, args.out, alpha=args.alpha):
        print(f"wrote {path}")
    return 0


def _on_sigterm(signum, frame):  # pragma: no cover - exercised by a subprocess test
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None):
    """Entry point of ``lswmkc``; returns the exit status (0 ok, 2 bad input)."""
    args = build_parser().parse_args(argv)
    import signal

    # SIGTERM unwinds like Ctrl-C: temporary outputs are removed, the cluster is closed.
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if args.command == "prepare":
            return _cmd_prepare(args)
        if args.command == "fit":
            return _cmd_fit(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
        if args.command == "plot":
            return _cmd_plot(args)
    except KeyboardInterrupt:
        print("lswmkc: interrupted; finished results are kept, rerun the same command to go on", file=sys.stderr)
        return 130
    except (KernelInputError, FileNotFoundError, FileExistsError, PermissionError, ValueError, ConnectionError) as exc:
        print(f"lswmkc: error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The compared methods' fit times on one data set, as ratios measured in one run.

Prints the machine, then per method of :mod:`lswmkc_dask.methods` (at its default
hyper-parameters; ``--grid-point`` picks the first point of its grid instead) the median
over ``--repeats`` fits of its own iterations (``seconds_``: the common final k-means
excluded), that time over one full ``scipy.linalg.eigh`` of the average kernel of the same
data, and over an LSWMKC fit (alpha = 8) in this process: the running-time comparison of the
LSWMKC paper as ratios that hold across machines better than seconds.

Run: ``python benchmarks/bench_methods.py`` (YALE, about a minute on 2 cores) or
``python benchmarks/bench_methods.py --dataset handwritten --repeats 1``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy.linalg import eigh

from lswmkc_dask import LSWMKC, preprocess_kernels
from lswmkc_dask.datasets import load_dataset
from lswmkc_dask.methods import available_methods, get_method
from lswmkc_dask.report.metrics import evaluate


def machine():
    from bench_iteration import machine as base

    return base()


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="yale", choices=("yale", "handwritten"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=None, help="default: all")
    ap.add_argument("--grid-point", action="store_true", help="the first point of each method's grid")
    args = ap.parse_args()
    print(machine())
    kernels, labels = load_dataset(args.dataset)
    kernels = preprocess_kernels(kernels)
    k = int(np.unique(labels).size)
    m, n = kernels.shape[:2]
    t_eig, _ = median_seconds(lambda: eigh(kernels.mean(axis=0)), args.repeats)
    t_lsw, _ = median_seconds(lambda: LSWMKC(n_clusters=k, alpha=8).fit(kernels), args.repeats)
    print(f"{args.dataset}: n = {n}, m = {m}, k = {k}; one eigh of the average kernel {t_eig:.4f} s (median of "
          f"{args.repeats}); LSWMKC fit (alpha = 8) {t_lsw:.3f} s")
    print(f"{'method':10} {'params':28} {'iter':>5} {'seconds':>9} {'/ eigh':>8} {'/ LSWMKC':>9} {'ACC':>7}")
    for name in args.methods or available_methods():
        cls = get_method(name)
        param = {key: values[0] for key, values in cls.param_grid.items()} if args.grid_point else {}

        def fit(cls=cls, param=param):
            return cls(n_clusters=k, preprocess=False, random_state=0, **param).fit(kernels)

        seconds = []
        for _ in range(args.repeats):
            model = fit()
            seconds.append(model.seconds_)
        s = statistics.median(seconds)
        acc = evaluate(labels, model.labels_)["ACC"]
        text = ", ".join(f"{key}={v:g}" for key, v in param.items()) or "-"
        print(f"{name:10} {text:28} {model.n_iter_:>5} {s:>9.4f} {s / t_eig:>8.2f} {s / t_lsw:>9.3f} {acc:>7.4f}")


if __name__ == "__main__":
    main()

"""Labels of new samples: LSWMKC.predict against a fit on all the samples, and its throughput.

1. Handwritten (n = 2000, 6 views, Gaussian kernels), alpha = 64, k = 10: a fit on a
   seeded 1,600-sample split, its ``predict`` of the other 400, against the labels a fit
   on all 2,000 gives those 400 (ACC of each against the digits on those 400, matched
   on those 400); the agreement of ``predict`` on the 1,600 training samples with
   ``labels_``. Both alpha terms of the affinity row (``"zero"``, shipped; ``"kstar"``),
   each with both label rules (``"vote"``, shipped: the affinity-weighted vote of
   ``labels_``; ``"centroid"``: the nearest k-means centroid to the embedding).
2. The same on the synthetic multi-view set of bench_scale.py at n = 4000 (3,200 / 800).
3. Throughput of ``predict`` (samples per second, median of 3) at n_train = 2,000
   (the Handwritten fit on all samples, predicting 2,000) and n_train = 8,000 (the
   synthetic set, a 1-iteration fit: predict's cost does not depend on the fit's
   iterations), in this process with the BLAS threads of the machine (the shipped rules).

    python benchmarks/bench_predict.py                 # all (about 25 minutes on 2 cores under load)
    python benchmarks/bench_predict.py --skip 2 3      # Handwritten only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_iteration import machine  # noqa: E402
from bench_scale import N_CLUSTERS, VIEW_DIMS, VIEW_NOISE, VIEW_SCALE  # noqa: E402

from lswmkc_dask import LSWMKC  # noqa: E402
from lswmkc_dask.datasets import load_handwritten  # noqa: E402
from lswmkc_dask.report.metrics import evaluate  # noqa: E402
from lswmkc_dask.predict import ALPHA_TERMS, LABEL_RULES, predict_labels  # noqa: E402


def synthetic(n, seed=0):
    """bench_scale.py's seeded multi-view set (views, labels), in memory."""
    rng = np.random.default_rng([seed, n])
    labels = rng.permutation(np.arange(n) % N_CLUSTERS).astype(np.int64)
    views = []
    for d, scale, noise in zip(VIEW_DIMS, VIEW_SCALE, VIEW_NOISE):
        centres = rng.normal(scale=scale, size=(N_CLUSTERS, d))
        views.append(centres[labels] + rng.normal(scale=noise, size=(n, d)))
    return views, labels


def fit(views, alpha, **params):
    t0 = time.perf_counter()
    est = LSWMKC(N_CLUSTERS, alpha=alpha, kernel="rbf", **params).fit(views)
    return est, time.perf_counter() - t0


def held_out(name, views, labels, alpha, seed=0):
    """Fit on 80%, predict the other 20%, against a fit on all the samples."""
    n = labels.size
    perm = np.random.default_rng(seed).permutation(n)
    train, test = np.sort(perm[: int(0.8 * n)]), np.sort(perm[int(0.8 * n):])
    est, t_part = fit([v[train] for v in views], alpha)
    full, t_full = fit(views, alpha)
    acc_full = evaluate(labels[test], full.labels_[test])["ACC"]
    print(f"{name}: n = {n}, fit on {train.size} in {t_part:.1f} s, on all {n} in {t_full:.1f} s; alpha = {alpha:g}")
    print(f"  fit on all: ACC on the {test.size} held out {acc_full:.4f} (on all {n}: "
          f"{evaluate(labels, full.labels_)['ACC']:.4f}); fit on {train.size}: ACC {evaluate(labels[train], est.labels_)['ACC']:.4f}")
    for term in ALPHA_TERMS:
        for rule in LABEL_RULES:
            t0 = time.perf_counter()
            pred = predict_labels(est, [v[test] for v in views], alpha_term=term, label_rule=rule)
            dt = time.perf_counter() - t0
            again = predict_labels(est, [v[train] for v in views], alpha_term=term, label_rule=rule)
            acc = evaluate(labels[test], pred)["ACC"]
            print(f"  alpha term {term!r}, label rule {rule!r}: predicted ACC {acc:.4f} ({100 * (acc - acc_full):+.2f} "
                  f"points against the full fit), {dt:.2f} s; training samples against labels_ "
                  f"{evaluate(est.labels_, again)['ACC']:.4f}")
    return full


def throughput(est, views, label):
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        est.predict(views)
        times.append(time.perf_counter() - t0)
    n_new = views[0].shape[0]
    print(f"  throughput at n_train = {est.n_features_in_} ({label}): {n_new / statistics.median(times):.0f} "
          f"samples/s ({n_new} new samples, median of {len(times)}: {statistics.median(times):.2f} s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", type=int, nargs="*", default=[], help="parts (1, 2, 3) to leave out")
    ap.add_argument("--alpha", type=float, default=64.0)
    args = ap.parse_args()
    print(machine())
    full = None
    if 1 not in args.skip:
        views, labels = load_handwritten()
        full = held_out("Handwritten", views, labels, args.alpha)
    if 2 not in args.skip:
        views, labels = synthetic(4000)
        held_out("synthetic (bench_scale.py)", views, labels, args.alpha)
    if 3 not in args.skip:
        views, _ = load_handwritten()
        if full is None:
            full, _ = fit(views, args.alpha)
        throughput(full, views, "Handwritten, 2000 new")
        views, _ = synthetic(8000)
        est, t = fit(views, args.alpha, max_iter=1, min_iter=1, n_init=5)
        print(f"  synthetic n = 8000: 1-iteration fit in {t:.1f} s")
        throughput(est, [v[:2000] for v in views], "synthetic, 2000 new")


if __name__ == "__main__":
    main()

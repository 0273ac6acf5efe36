"""eig_precision="float32" against float64 on Handwritten (n = 2000, alpha = 64).

1. One in-process float64 fit; its final Z gives S. The gathered eigen step on that S,
   float64 ("mrrr", the default dense route) and float32 ("mrrr" with ``ssytrd`` and a
   float32 back-transformation, + float64 Rayleigh-Ritz), each median of 3, 2 BLAS threads.
2. Whole fits with eig_driver="mrrr" ("auto" takes float64 Lanczos at this rank): max |omega32 - omega64|, iterations of
   each, ARI of the labels against float64's, seconds per iteration of each.

    nice python benchmarks/bench_eig_precision.py
"""

from __future__ import annotations

import statistics
import time
import warnings

import numpy as np

from bench_iteration import machine
from lswmkc_dask.core import eigen as _eigen


def _timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main():
    from sklearn.metrics import adjusted_rand_score
    from threadpoolctl import threadpool_limits

    from lswmkc_dask import LSWMKC, FeatureKernels, prepare
    from lswmkc_dask.datasets import load_handwritten

    print("machine:", machine())
    warnings.simplefilter("ignore")
    views, digits = load_handwritten()
    store = prepare(FeatureKernels(views), None, labels=digits)
    fits = {}
    for precision in ("float64", "float32"):
        t = time.perf_counter()
        fits[precision] = LSWMKC(10, alpha=64, n_init=10, eig_driver="mrrr", eig_precision=precision, eig_threads=2).fit(store)
        fits[precision].wall_ = time.perf_counter() - t
    z = fits["float64"].affinity_
    with threadpool_limits(2):
        t64, (w64, _) = _timed(lambda: _eigen.psd_factor(z, driver="mrrr"))
        t32, (w32, _) = _timed(lambda: _eigen.psd_factor(z, driver="mrrr", precision="float32"))
    k64 = w64 @ w64.T
    rel = float(np.abs(w32 @ w32.T - k64).max() / np.abs(k64).max())
    print(f"n = {z.shape[0]}: eigen step float64 (mrrr) {t64:.2f} s, float32 + Rayleigh-Ritz {t32:.2f} s "
          f"({t64 / t32:.2f} x); rank {w64.shape[1]} vs {w32.shape[1]}; max |K*32 - K*64| / max |K*64| = {rel:.1e}")
    f64, f32 = fits["float64"], fits["float32"]
    d = float(np.abs(f32.kernel_weights_ - f64.kernel_weights_).max())
    per_it = {p: f.wall_ / f.n_iter_ for p, f in fits.items()}
    eig = {p: float(np.median(f.eig_seconds_)) if hasattr(f, "eig_seconds_") else float("nan")
           for p, f in fits.items()}
    print(f"whole fit: max |omega32 - omega64| = {d:.2e}; iterations {f64.n_iter_} (float64) vs {f32.n_iter_} "
          f"(float32); labels ARI vs float64 {adjusted_rand_score(f64.labels_, f32.labels_):.4f}; "
          f"seconds per iteration (fit wall / n_iter) {per_it['float64']:.2f} vs {per_it['float32']:.2f}; "
          f"median in-fit eigen step {eig['float64']:.2f} vs {eig['float32']:.2f} s")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description='eig_precision="float32" against float64 on Handwritten: the eigen step on one S, and whole fits (weights, iterations, labels, seconds per iteration).').parse_args()
    main()

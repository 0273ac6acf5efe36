"""float32 kernel store vs float64: change of kernel weights and iterations, and size.

YALE over the paper's alpha grid and Handwritten at alpha = 64, each fitted from a
float64 and a float32 store (``prepare(dtype=...)``; every step accumulates in
float64). Prints the machine, per data set the largest |omega_32 - omega_64| and the
iterations of each, and the store sizes.

    python benchmarks/bench_float32.py
"""

from __future__ import annotations

import warnings

import numpy as np

from bench_iteration import machine


def main():
    from lswmkc_dask import LSWMKC, FeatureKernels, prepare
    from lswmkc_dask.datasets import load_handwritten, load_yale

    print("machine:", machine())
    warnings.simplefilter("ignore")
    k, y = load_yale()
    stores = {dt: prepare(k, None, labels=y, dtype=dt) for dt in ("float64", "float32")}
    worst, iters = 0.0, []
    for a in [2.0**p for p in range(11)]:
        fits = {dt: LSWMKC(15, alpha=a).fit(s) for dt, s in stores.items()}
        worst = max(worst, float(np.abs(fits["float32"].kernel_weights_ - fits["float64"].kernel_weights_).max()))
        iters.append((a, fits["float64"].n_iter_, fits["float32"].n_iter_))
    same = all(i64 == i32 for _, i64, i32 in iters)
    print(f"YALE, alphas 2^0..2^10: max |omega32 - omega64| = {worst:.2e}; iterations "
          f"{'identical' if same else 'differ: ' + str(iters)} ({' '.join(str(i) for _, i, _ in iters)})")
    views, digits = load_handwritten()
    stores = {dt: prepare(FeatureKernels(views), None, labels=digits, dtype=dt) for dt in ("float64", "float32")}
    fits = {dt: LSWMKC(10, alpha=64, n_init=10).fit(s) for dt, s in stores.items()}
    d = float(np.abs(fits["float32"].kernel_weights_ - fits["float64"].kernel_weights_).max())
    acc = {dt: f.evaluate(digits)["ACC"] for dt, f in fits.items()}
    print(f"Handwritten, alpha 64: max |omega32 - omega64| = {d:.2e}; iterations {fits['float64'].n_iter_} (float64) "
          f"vs {fits['float32'].n_iter_} (float32); honest ACC {acc['float64']:.4f} vs {acc['float32']:.4f}")
    n, m = 2000, 6
    print(f"store size at n = {n}, m = {m}: float64 {8 * m * n * n / 2**20:.0f} MiB, float32 {4 * m * n * n / 2**20:.0f} MiB")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description='float32 kernel store against float64 (YALE, Handwritten): change of kernel weights, iterations, store size.').parse_args()
    main()

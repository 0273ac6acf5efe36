"""Could a warm-started iterative eigensolver replace the dense one? (It cannot, here.)

Between two late iterations of a fit, S = (Z + Z^T)/2 changes little, so the previous
iteration's eigenvectors look like a good start for an iterative solver whose work is
block products ``S @ X`` (compute-bound, unlike the memory-bound tridiagonal reduction
of the dense routes). This measures it on real matrices: two fits of Handwritten
(n = 2000) stopped after ``T - 1`` and ``T`` iterations give Z_{T-1} and Z_T; from the
eigenvectors of the ``r + extra`` largest eigenvalues of S_{T-1} (r = its positive
rank), Chebyshev-filtered subspace iteration on S_T (filter of degree 8 damping
[lambda_min, 0], Rayleigh-Ritz after each filter) runs until K*_T agrees with the dense
route to each tolerance. Prints the machine, the block products and seconds to reach
1e-6, 1e-8 and 1e-10 (Frobenius norm of the difference of K*), and the dense "subset"
and "mrrr" routes on the same S_T, all on one thread.

Why it loses: the eigenvalues of S near zero are about 1e-4 apart on a spectrum of
width about 1, so separating the smallest positive eigenvalues from the largest
negative ones takes over a hundred block products; the routes must agree to 1e-10.

    python benchmarks/bench_warm_start.py [--alpha 128] [--iterations 23]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from bench_iteration import machine  # benchmarks/ is on sys.path when run as a script

from lswmkc_dask import LSWMKC
from lswmkc_dask.datasets import load_dataset
from lswmkc_dask.core.eigen import psd_factor

TOLERANCES = (1e-6, 1e-8, 1e-10)


def affinity_after(kernels, labels, alpha, iterations):
    """Z after exactly ``iterations`` iterations (tol=0: the stop rule never fires)."""
    model = LSWMKC(int(np.unique(labels).size), alpha=alpha, max_iter=iterations, tol=0.0, n_init=1,
                   random_state=0)
    model.fit(kernels)
    assert model.n_iter_ == iterations, model.n_iter_
    return model.affinity_


def filtered_subspace(s, start, kstar, max_products=400, degree=8):
    """Chebyshev-filtered subspace iteration from ``start``; returns {tol: (products, s)}."""
    lam_min = np.linalg.eigvalsh(s)[0] * 1.01  # the damped interval [lam_min, 0]
    half, centre = -lam_min / 2, lam_min / 2
    reached, products, x = {}, 0, start
    t0 = time.perf_counter()
    while products < max_products and len(reached) < len(TOLERANCES):
        q, _ = np.linalg.qr(x)
        theta, v = np.linalg.eigh(q.T @ (s @ q))
        products += 1
        y = q @ v
        pos = theta > 0
        err = np.linalg.norm((y[:, pos] * theta[pos]) @ y[:, pos].T - kstar)
        for tol in TOLERANCES:
            if err <= tol and tol not in reached:
                reached[tol] = (products, time.perf_counter() - t0)
        y0, y1 = y, (s @ y - centre * y) / half
        for _ in range(degree - 1):
            y0, y1 = y1, 2.0 * (s @ y1 - centre * y1) / half - y0
        products += degree
        x = y1 / np.linalg.norm(y1, axis=0)
    return reached


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=128.0)
    parser.add_argument("--iterations", type=int, default=23, help="T (Handwritten at alpha 128 stops at 23)")
    parser.add_argument("--extra", type=int, nargs="+", default=[40, 100], help="block columns beyond the rank")
    args = parser.parse_args()
    print(machine())
    kernels, labels = load_dataset("handwritten")
    z_prev = affinity_after(kernels, labels, args.alpha, args.iterations - 1).toarray()
    z = affinity_after(kernels, labels, args.alpha, args.iterations).toarray()
    s_prev, s = (z_prev + z_prev.T) / 2, (z + z.T) / 2
    lam_prev, u_prev = np.linalg.eigh(s_prev)
    rank_prev = int(np.sum(lam_prev > 0))
    with threadpool_limits(1):
        dense = {}
        for route in ("subset", "mrrr"):
            t0 = time.perf_counter()
            w, _ = psd_factor(z, driver=route)
            dense[route] = time.perf_counter() - t0
        kstar = w @ w.T
        print(f"Handwritten, alpha {args.alpha:g}: S after iteration {args.iterations} (rank {w.shape[1]}), "
              f"start from iteration {args.iterations - 1} (rank {rank_prev}); "
              f"||S_T - S_T-1||_F = {np.linalg.norm(s - s_prev):.3g}; one thread")
        print(f"dense routes: subset {dense['subset']:.3f} s, mrrr {dense['mrrr']:.3f} s")
        print("| block columns | " + " | ".join(f"to {t:g}: products, s" for t in TOLERANCES) + " |")
        print("|---|" + "---|" * len(TOLERANCES))
        for extra in args.extra:
            q = rank_prev + extra
            reached = filtered_subspace(s, np.ascontiguousarray(u_prev[:, ::-1][:, :q]), kstar)
            cells = [f"{reached[t][0]}, {reached[t][1]:.2f}" if t in reached else "not reached" for t in TOLERANCES]
            print(f"| {q} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

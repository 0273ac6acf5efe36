"""Which eigensolver for the neighbourhood kernel: cost of each route against the rank.

The gathered step needs the positive eigenpairs of ``S = (Z + Z^T)/2`` (Theorem 2). This
measures, on one machine in one run, the seconds of each route of
:func:`lswmkc_dask.core.eigen.psd_factor` ("mrrr", "subset", "evd", and "lanczos": ARPACK on
the sparse S, k = 1.1 r + 10, up to ``--lanczos-max-fraction``), and the float32 route
(``precision="float32"``: "mrrr" in float32 refined by a float64 Rayleigh-Ritz step),
against the fraction of positive eigenvalues, and checks that every float64 route gives
the same K* (max |difference| <= 1e-10); the float32 route's difference is printed apart.

S is a graph of the kind the solver meets: a row-stochastic Z with ``--neighbours``
non-zeros per row among samples drawn from ``--clusters`` Gaussian clusters, shifted by a
multiple of the identity so that the wanted fraction of its eigenvalues is positive (a
shift moves the spectrum, not the eigenvectors). All routes get all cores (BLAS threads,
and the "mrrr" routes' ``dstemr`` index ranges), as the gathered step of a lone fit does;
``--threads 1`` as each of two fits sharing the 2 cores in a sweep. Prints the machine, a
table of medians and the crossovers.

    python benchmarks/bench_eig.py [--sizes 2000 4000] [--fractions 0.05 0.1 0.25 0.5 0.75] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from bench_iteration import machine  # benchmarks/ is on sys.path when run as a script


def graph(n, neighbours, clusters, rng):
    """Row-stochastic kNN graph of clustered points (Gaussian weights), zero diagonal."""
    centres = rng.normal(scale=3.0, size=(clusters, 10))
    x = centres[rng.integers(clusters, size=n)] + rng.normal(size=(n, 10))
    sq = np.sum(x * x, axis=1)
    d = sq[:, None] + sq[None, :] - 2.0 * x @ x.T
    np.fill_diagonal(d, np.inf)
    idx = np.argpartition(d, neighbours, axis=1)[:, :neighbours]
    w = np.exp(-np.take_along_axis(d, idx, axis=1) / np.median(d[np.arange(n)[:, None], idx]))
    w /= w.sum(axis=1, keepdims=True)
    return sp.csr_matrix((w.ravel(), idx.ravel(), np.arange(0, n * neighbours + 1, neighbours)), shape=(n, n))


def timed(fn, repeats):
    out, secs = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t)
    return statistics.median(secs), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 4000])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.05, 0.1, 0.25, 0.5, 0.75])
    ap.add_argument("--neighbours", type=int, default=20)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lanczos-max-fraction", type=float, default=0.1,
                    help="time the lanczos route only up to this fraction (it is far slower above)")
    ap.add_argument("--threads", type=int, help="threads of the routes (default: all cores, as a lone fit)")
    args = ap.parse_args()

    from lswmkc_dask.core.eigen import psd_factor

    print("machine:", machine())
    cores = len(os.sched_getaffinity(0))
    threads = args.threads or cores  # as the gathered step: its BLAS threads (and dstemr's ranges)
    rng = np.random.default_rng(0)
    rows = []
    for n in args.sizes:
        z = graph(n, args.neighbours, args.clusters, rng)
        s = ((z + z.T) * 0.5).tocsr()
        with threadpool_limits(limits=threads):
            ev = np.linalg.eigvalsh(s.toarray())
            for frac in args.fractions:
                r_want = max(1, int(round(frac * n)))
                shift = 0.5 * (ev[n - r_want] + ev[n - r_want - 1])
                zs = (z - shift * sp.identity(n, format="csr")).tocsr()
                res, kstar = {}, {}
                for route in ("mrrr", "subset", "evd"):
                    secs, (w, lam) = timed(lambda: psd_factor(zs, driver=route, threads=threads), args.repeats)
                    res[route] = secs
                    kstar[route] = w
                r = kstar["mrrr"].shape[1]
                secs, (w32, _) = timed(lambda: psd_factor(zs, driver="mrrr", precision="float32", threads=threads),
                                       args.repeats)
                res["float32"] = secs
                if frac <= args.lanczos_max_fraction:  # the route, told the true rank (as the previous one)
                    secs, (w, lam) = timed(lambda: psd_factor(zs, driver="lanczos", rank_hint=r), args.repeats)
                    kstar["lanczos"] = w
                    res["lanczos"] = secs
                ref = kstar["mrrr"] @ kstar["mrrr"].T
                diff = max(float(np.abs(w @ w.T - ref).max()) for w in kstar.values())
                diff32 = float(np.abs(w32 @ w32.T - ref).max()) / float(np.abs(ref).max())
                rows.append((n, r / n, res, diff, diff32))
                print(f"n={n:6d} rank {r / n:5.1%}: " + "  ".join(f"{k} {v:7.3f} s" for k, v in res.items())
                      + f"  max|K*_route - K*_mrrr| {diff:.1e}  float32 relative {diff32:.1e}", flush=True)
    print()
    print("| n | rank of K* | mrrr s | subset s | evd s | Lanczos s | float32 s | subset / mrrr | evd / mrrr | "
          "float32 / mrrr | max diff K* | float32: max diff / max K* |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, frac, res, diff, diff32 in rows:
        lz = f"{res['lanczos']:.3f}" if "lanczos" in res else "-"
        print(f"| {n} | {frac:.0%} | {res['mrrr']:.3f} | {res['subset']:.3f} | {res['evd']:.3f} | {lz} | "
              f"{res['float32']:.3f} | {res['subset'] / res['mrrr']:.2f} | {res['evd'] / res['mrrr']:.2f} | "
              f"{res['float32'] / res['mrrr']:.2f} | {diff:.0e} | {diff32:.0e} |")
    best = {}
    for n, frac, res, *_ in rows:
        best.setdefault(n, []).append((frac, min((k for k in res if k != "float32"), key=res.get)))
    for n, seq in best.items():
        print(f"fastest at n = {n}: " + ", ".join(f"{f:.0%} {b}" for f, b in seq))


if __name__ == "__main__":
    main()

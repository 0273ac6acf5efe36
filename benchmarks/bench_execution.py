"""Where a fit should run: in this process, a threaded LocalCluster, or worker processes.

Prints, with the machine:

1. YALE (n = 165, m = 5, alpha = 8) from a cold plain script (a new interpreter per run,
   no ``__main__`` guard): wall seconds of ``LSWMKC(...).fit(K)`` and of the whole script,
   median of ``--repeats`` runs;
2. ``lswmkc sweep --dataset yale`` (11 alphas): wall seconds of the whole command,
   median of ``--repeats`` runs;
3. Handwritten (n = 2000, m = 6, alpha = 64, ``--iterations`` iterations): seconds per
   iteration in this process, on a threaded LocalCluster and on 2 worker processes, and
   each as a ratio to one positive-subset eigendecomposition of the same S measured in
   the same run (the ratio is what survives a noisy machine).

Run: ``python benchmarks/bench_execution.py`` (about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

PLAIN_SCRIPT = textwrap.dedent(
    """
    import time
    t0 = time.perf_counter()
    from lswmkc_dask import LSWMKC
    from lswmkc_dask.datasets import load_yale
    kernels, labels = load_yale()
    t1 = time.perf_counter()
    model = LSWMKC(n_clusters=15, alpha=8).fit(kernels)
    t2 = time.perf_counter()
    print("FIT", t2 - t1, "IMPORT", t1 - t0, model.n_iter_, model.execution_)
    """
)


def machine():
    import dask
    import distributed
    import scipy

    from bench_iteration import machine as base

    return (
        f"{base()} | scipy {scipy.__version__} | dask {dask.__version__} | distributed {distributed.__version__} | "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )


def yale_cold(repeats):
    fits, walls = [], []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "script.py")
        with open(path, "w") as fh:
            fh.write(PLAIN_SCRIPT)
        for _ in range(repeats):
            t = time.perf_counter()
            out = subprocess.run([sys.executable, path], capture_output=True, text=True, check=True, cwd=d).stdout
            walls.append(time.perf_counter() - t)
            fits.append(float(out.split()[1]))
    return statistics.median(fits), statistics.median(walls), out.strip()


def yale_sweep(repeats):
    walls = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(repeats):
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--output", f"{d}/s{i}",
                 "--quiet"],
                capture_output=True, text=True, check=True,
            )
            walls.append(time.perf_counter() - t)
    return statistics.median(walls), walls


def handwritten(iterations):
    from scipy.linalg import eigh

    from lswmkc_dask import LSWMKC, FeatureKernels, prepare
    from lswmkc_dask._threads import free_cores, limit_blas
    from lswmkc_dask.engine.cluster import local_cluster
    from lswmkc_dask.datasets import load_handwritten

    views, labels = load_handwritten()
    store = prepare(FeatureKernels(views), None, labels=labels)
    params = dict(n_clusters=10, alpha=64, max_iter=iterations, min_iter=iterations, n_init=10)
    rows = {}

    def per_iteration(model):
        its = np.asarray(model.iteration_seconds_)
        return float(np.median(its[1:])) if its.size > 1 else float(its[0])

    def one_eig(model):
        z = model.affinity_
        s = np.asarray(((z + z.T) / 2).todense())
        with limit_blas(free_cores()):  # the threads the fit's own gathered step takes
            t = time.perf_counter()
            eigh(s, subset_by_value=(0, np.inf), check_finite=False)
            return time.perf_counter() - t

    m = LSWMKC(**params).fit(store)
    rows["in-process"] = (per_iteration(m), one_eig(m), m.execution_)
    m = LSWMKC(processes=False, **params).fit(store)
    rows["threaded LocalCluster"] = (per_iteration(m), one_eig(m), m.execution_)
    with local_cluster(n_workers=2) as client:
        m = LSWMKC(client=client, **params).fit(store)
        rows["2 worker processes"] = (per_iteration(m), one_eig(m), m.execution_)
    return rows


def loaded_eig(repeats):
    """One subset eigh of an n = 2000 S with all cores vs free_cores() threads while as
    many busy programs as cores run (the situation of a loaded CI runner)."""
    from scipy.linalg import eigh

    from lswmkc_dask._threads import free_cores, limit_blas
    from lswmkc_dask.engine.cluster import CPU_COUNT

    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 2000))
    s = np.asfortranarray((a + a.T) / 2)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(CPU_COUNT)]
    try:
        time.sleep(1.0)
        out = {}
        for label, threads in (("all cores", CPU_COUNT), ("free_cores()", None)):
            ts = []
            for _ in range(repeats):
                n = free_cores() if threads is None else threads
                with limit_blas(n):
                    t = time.perf_counter()
                    eigh(s, subset_by_value=(0, np.inf), check_finite=False)
                    ts.append(time.perf_counter() - t)
            out[label] = (statistics.median(ts), n)
        return out
    finally:
        for p in busy:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=8)
    args = ap.parse_args()
    print("machine:", machine())
    fit, wall, last = yale_cold(args.repeats)
    print(f"YALE cold plain script, median of {args.repeats}: fit() {fit:.3f} s, whole script {wall:.2f} s ({last})")
    med, walls = yale_sweep(args.repeats)
    print(f"lswmkc sweep --dataset yale (11 alphas), median of {args.repeats}: {med:.2f} s wall "
          f"(runs: {' '.join(f'{w:.2f}' for w in walls)})")
    loaded = loaded_eig(3)
    print("n = 2000 subset eigh with as many busy programs as cores, median of 3: " + ", ".join(
        f"{k} ({n} threads) {v:.2f} s" for k, (v, n) in loaded.items()))
    for name, (it, eig, where) in handwritten(args.iterations).items():
        print(f"Handwritten {name:22s}: {it:.3f} s per iteration, one subset eigh {eig:.3f} s, "
              f"ratio {it / eig:.2f}  [{where}]")


if __name__ == "__main__":
    main()

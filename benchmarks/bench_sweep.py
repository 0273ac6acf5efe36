"""Wall time of the Handwritten 11-alpha sweep with 1 and with 2 workers.

Handwritten (UCI Multiple Features, n = 2000, m = 6 Gaussian kernels), alphas 2^0..2^10,
LocalClusters of 1 and of 2 single-threaded workers, the same kernel store, default
(task) mode. Prints the machine, the wall seconds of each sweep, the speedup (aims:
>= 1.8) and whether the 2-worker sweep stays within 2.5 minutes, plus peak memory.

    python benchmarks/bench_sweep.py [--workers 1 2] [--alphas 1 2 4 ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench_iteration import machine, peak_rss_mib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--alphas", type=float, nargs="+", default=[2.0**k for k in range(11)])
    ap.add_argument("--mode", default="auto", choices=("auto", "task", "blockwise"))
    args = ap.parse_args()

    from lswmkc_dask import prepare
    from lswmkc_dask.engine.cluster import local_cluster
    from lswmkc_dask.datasets import load_dataset
    from lswmkc_dask.grid.sweep import sweep

    print("machine:", machine())
    kernels, labels = load_dataset("handwritten")
    walls = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = prepare(kernels, Path(tmp) / "hw.zarr", labels=labels)
        for w in args.workers:
            with local_cluster(n_workers=w, threads_per_worker=1) as client:
                t = time.perf_counter()
                summary = sweep(store, Path(tmp) / f"sweep{w}", alphas=args.alphas, client=client,
                                mode=args.mode, progress=False)
                walls[w] = time.perf_counter() - t
                peaks = client.run(peak_rss_mib)
            iters = [r["n_iter"] for r in summary["rows"]]
            best = summary["best_by_paper_ACC"]
            print(f"{w} worker(s): {walls[w]:.1f} s wall for {len(args.alphas)} alphas "
                  f"({sum(iters)} iterations in all), best paper ACC {best['ACC_paper']:.4f} at alpha {best['alpha']:g}; "
                  f"peak RSS per worker " + ", ".join(f"{v:.0f} MiB" for v in peaks.values()))
    if 1 in walls and len(walls) > 1:
        for w, s in walls.items():
            if w != 1:
                print(f"speedup {w} workers vs 1: {walls[1] / s:.2f}  (aim on 2 cores >= 1.7)")
    for w, s in walls.items():
        if w == 2:
            print(f"{w} workers: {'within' if s <= 165 else 'OVER'} the 2.75-minute aim ({s / 60:.2f} min)")
    print(f"peak RSS client {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()

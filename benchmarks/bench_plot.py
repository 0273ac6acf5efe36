"""Seconds of `lswmkc plot DIR` on a Handwritten sweep with snapshots and a gamma grid.

Builds once (not timed) a sweep of Handwritten (UCI Multiple Features, n = 2000, m = 6
Gaussian kernels, labels kept) with ``--snapshots 0 1 3 5 10 20``, a gamma grid (the
learned gamma and scalar gammas) and a few alphas, in task mode on a LocalCluster as the
CLI runs it; then runs ``lswmkc plot DIR`` as a user does (a subprocess, a fresh
output each time) ``--repeats`` times and prints the machine, each run's seconds, the
median, the figures written and the peak RSS of the plotting process. Aim: under a
minute for every figure, t-SNE included (the paper's figures drawn by ``lswmkc plot``).

    python benchmarks/bench_plot.py [--repeats 3] [--alphas 8 64] [--gammas auto 1] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def machine():
    import numpy as np
    import psutil
    from threadpoolctl import threadpool_info

    blas = ", ".join(sorted({f"{i['internal_api']} {i.get('version')}" for i in threadpool_info()}))
    return (f"{platform.node()} | {platform.processor() or platform.machine()} | {len(os.sched_getaffinity(0))} "
            f"cores | {psutil.virtual_memory().total / 2**30:.0f} GiB | Python {platform.python_version()} | "
            f"numpy {np.__version__} | BLAS {blas} | load average {os.getloadavg()[0]:.2f} at start")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--alphas", nargs="+", default=["8", "64"])
    ap.add_argument("--gammas", nargs="+", default=["auto", "1"])
    ap.add_argument("--snapshots", nargs="+", default=["0", "1", "3", "5", "10", "20"])
    ap.add_argument("--workdir", type=Path, help="keep the sweep here (default: a temporary directory)")
    args = ap.parse_args()
    print("machine:", machine(), flush=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_plot_"))
    work.mkdir(parents=True, exist_ok=True)
    sweep_dir = work / "sweep"
    lswmkc = [sys.executable, "-m", "lswmkc_dask.cli"]
    try:
        if not (sweep_dir / "summary.json").exists():
            t = time.perf_counter()
            cmd = [*lswmkc, "sweep", "--dataset", "handwritten", "--alphas", *args.alphas, "--gammas", *args.gammas,
                   "--snapshots", *args.snapshots, "--min-iter", "20", "--output", str(sweep_dir), "--quiet"]
            subprocess.run(cmd, check=True)
            print(f"sweep (not timed in the figure): {time.perf_counter() - t:.1f} s; "
                  f"{len(args.alphas)} alphas x {len(args.gammas)} gammas, snapshots {' '.join(args.snapshots)}",
                  flush=True)
        seconds, written, peaks = [], [], []
        for i in range(args.repeats):
            shutil.rmtree(sweep_dir / "plots", ignore_errors=True)
            t = time.perf_counter()
            proc = subprocess.run([*lswmkc, "plot", str(sweep_dir)], check=True, capture_output=True, text=True)
            seconds.append(time.perf_counter() - t)
            peaks.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0)
            written = sorted(p.name for p in (sweep_dir / "plots").glob("*.png"))
            print(f"run {i + 1}: {seconds[-1]:.1f} s", flush=True)
        print(f"figures ({len(written)}): {', '.join(written)}")
        print(f"lswmkc plot: median {statistics.median(seconds):.1f} s of {args.repeats} "
              f"(runs {' '.join(f'{s:.1f}' for s in seconds)}); aim < 60 s; peak RSS of the plotting processes "
              f"{max(peaks):.0f} MiB")
        del proc
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

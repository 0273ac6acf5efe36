"""What choosing alpha and k without labels adds to an 11-alpha sweep (YALE, Handwritten).

For each data set, labels stripped (the unlabelled user's case):

1. one sweep of alpha = 2^0..2^10 at the true k in a fresh directory (its wall time,
   which includes the label-free scoring), then the scoring alone again on the same
   partitions (:func:`lswmkc_dask.grid.sweep.label_free_scores`, one blockwise pass over
   the store), repeated: the median scoring time, its share of the sweep and the cost
   per grid point;
2. the same 11 alphas with the default k grid 2..12 (one fit per alpha, clustered at
   11 k): its wall time against the single-k sweep's, and the extra cost per grid
   point and per k;
3. what the scoring and the summary add: the scoring pass (per-sample silhouettes and
   the two votes) and writing the summary again (near-ties, the consensus, and with
   the k grid prediction strength at every k), as a share of the sweep without them.

Sweeps run in this process as the Python API runs them (the grid points one after
another); ``--sweeps N`` repeats both sweeps N times, alternating, and reports medians.

    python benchmarks/bench_selection_cost.py [--repeats 5] [--sweeps 1] [--datasets yale handwritten]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from lswmkc_dask import prepare
from lswmkc_dask.datasets import load_dataset
from lswmkc_dask.grid.sweep import DEFAULT_ALPHAS, DEFAULT_N_CLUSTERS, load_sweep, sweep
from lswmkc_dask.grid.scoring import label_free_scores
from lswmkc_dask.grid.results import summary_rows, write_summary


def _summary_seconds(directory):
    """Seconds to write a finished sweep's summary again: the near-ties, the consensus and,
    with a k grid, prediction strength."""
    rows = [r for point, report in load_sweep(directory)[1].items() for r in summary_rows(point, report)]
    t = time.perf_counter()
    write_summary(Path(directory), rows)
    return time.perf_counter() - t


def _partitions(directory, ks=None):
    """The runs' labels.csv, or with ``ks`` every labels_k=K.csv of a k grid."""
    _, runs = load_sweep(directory)
    parts = []
    for point in sorted(runs, key=lambda p: p.alpha):
        for name in ["labels.csv"] if ks is None else [f"labels_k={k}.csv" for k in ks]:
            body = (Path(directory) / "runs" / point.name / name).read_text().splitlines()[1:]
            parts.append([int(line.split(",")[1]) for line in body])
    return np.asarray(parts)


def _seconds(fn, *args):
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="repeats of the scoring alone")
    ap.add_argument("--sweeps", type=int, default=1, help="repeats of each sweep (alternating)")
    ap.add_argument("--datasets", nargs="+", default=["yale", "handwritten"])
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"{platform.platform()}, load {os.getloadavg()[0]:.1f}")
    for name in args.datasets:
        kernels, labels = load_dataset(name)
        k_true = int(np.unique(labels).size)
        single, grid = [], []
        with tempfile.TemporaryDirectory() as tmp:
            store = prepare(kernels, Path(tmp) / "k.zarr")  # no labels: the unlabelled case
            for i in range(args.sweeps):
                t0 = time.perf_counter()
                sweep(store, Path(tmp) / f"single{i}", n_clusters=k_true, alphas=DEFAULT_ALPHAS, progress=False)
                single.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                sweep(store, Path(tmp) / f"grid{i}", alphas=DEFAULT_ALPHAS, progress=False)  # default k grid
                grid.append(time.perf_counter() - t0)
            parts = _partitions(Path(tmp) / "single0")
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                label_free_scores(store, parts)
                times.append(time.perf_counter() - t)
            summary_s = statistics.median(_summary_seconds(Path(tmp) / "single0") for _ in range(args.repeats))
            summary_grid_s = statistics.median(_summary_seconds(Path(tmp) / "grid0") for _ in range(args.repeats))
            gparts = _partitions(Path(tmp) / "grid0", DEFAULT_N_CLUSTERS)
            grid_scoring = statistics.median(_seconds(label_free_scores, store, gparts) for _ in range(args.repeats))
        med = statistics.median(times)
        total, total_grid = statistics.median(single), statistics.median(grid)
        n_k = len(DEFAULT_N_CLUSTERS)
        print(f"{name}: n={store.n_samples}, m={store.n_kernels}, {len(parts)} alphas, k={k_true}; sweep "
              f"{total:.1f} s wall (scoring included, median of {args.sweeps}); scoring alone median {med:.3f} s "
              f"of {args.repeats} ({med / len(parts) * 1000:.1f} ms per grid point), "
              f"{100 * med / (total - med):.1f}% added to the sweep")
        print(f"{name}: k grid {DEFAULT_N_CLUSTERS[0]}..{DEFAULT_N_CLUSTERS[-1]} ({n_k} k): sweep {total_grid:.1f} s "
              f"wall vs {total:.1f} s at one k: +{100 * (total_grid - total) / total:.1f}%, "
              f"{(total_grid - total) / len(parts):.2f} s more per alpha "
              f"({(total_grid - total) / len(parts) / (n_k - 1) * 1000:.0f} ms per extra k and alpha)")
        fit_only = total - med - summary_s
        print(f"{name}: at one k, scoring {med:.3f} s + summary (near-ties, consensus) {summary_s:.3f} s = "
              f"{100 * (med + summary_s) / fit_only:.1f}% added to the sweep's {fit_only:.1f} s without them")
        fit_grid = total_grid - grid_scoring - summary_grid_s
        print(f"{name}: k grid, scoring {len(gparts)} partitions {grid_scoring:.3f} s + summary (near-ties, "
              f"consensus, prediction strength at {n_k} k) {summary_grid_s:.3f} s = "
              f"{100 * (grid_scoring + summary_grid_s) / fit_grid:.1f}% added to {fit_grid:.1f} s")


if __name__ == "__main__":
    main()

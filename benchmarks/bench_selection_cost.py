"""What choosing alpha without labels adds to an 11-alpha sweep (YALE, Handwritten).

For each data set: one sweep of alpha = 2^0..2^10 in a fresh directory (its wall time,
which includes the label-free scoring), then the scoring alone again on the same
partitions (:func:`lswmkc_dask.sweep.label_free_scores`, one blockwise pass over the
store), repeated; prints the median scoring time, its share of the sweep and the cost
per grid point, with the machine.

    python benchmarks/bench_selection_cost.py [--repeats 5] [--datasets yale handwritten]
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
from lswmkc_dask.sweep import DEFAULT_ALPHAS, label_free_scores, load_sweep, sweep


def _partitions(directory):
    _, runs = load_sweep(directory)
    parts = []
    for point in sorted(runs, key=lambda p: p.alpha):
        body = (Path(directory) / "runs" / point.name / "labels.csv").read_text().splitlines()[1:]
        parts.append([int(line.split(",")[1]) for line in body])
    return np.asarray(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--datasets", nargs="+", default=["yale", "handwritten"])
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}, "
          f"{platform.platform()}")
    for name in args.datasets:
        kernels, labels = load_dataset(name)
        with tempfile.TemporaryDirectory() as tmp:
            store = prepare(kernels, Path(tmp) / "k.zarr", labels=labels)
            t0 = time.perf_counter()
            sweep(store, Path(tmp) / "sw", alphas=DEFAULT_ALPHAS, progress=False)
            total = time.perf_counter() - t0
            parts = _partitions(Path(tmp) / "sw")
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                label_free_scores(store, parts)
                times.append(time.perf_counter() - t)
        med = statistics.median(times)
        print(f"{name}: n={store.n_samples}, m={store.n_kernels}, {len(parts)} grid points; sweep {total:.1f} s "
              f"wall (scoring included); scoring alone median {med:.3f} s of {args.repeats} "
              f"({med / len(parts) * 1000:.1f} ms per grid point), {100 * med / (total - med):.1f}% added to "
              "the sweep")


if __name__ == "__main__":
    main()

"""The gathered step on a GPU (``eig_device="cuda"``) against the CPU cores of the same machine.

For each n of ``--sizes`` (default 2000 8000 12000 20000): the synthetic multi-view data
of bench_scale.py (6 views, k = 10), a kernel store in ``--workdir``, and two in-process
fits of ``--iterations`` iterations (alpha = 64): ``eig_device="cpu"`` and
``eig_device="cuda"``. Printed per n: seconds per steady iteration (median of
iterations 2..) and of the eigen step inside them, GPU vs CPU, the ratio, and whether
the weights after the same iterations agree to 1e-10. Without a CUDA device (CuPy and a
GPU: ``pip install 'lswmkc-dask[gpu]'``) it exits at once with a message.

    python benchmarks/bench_gpu.py
    python benchmarks/bench_gpu.py --sizes 2000 8000 --iterations 4

Not yet run on a GPU: benchmarks/README.md has no GPU figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench_scale import generate, machine


def main(argv=None):
    from lswmkc_dask import gpu

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 12000, 20000])
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args(argv)
    ok, why = gpu.cuda_device()
    if not ok:
        print(f"bench_gpu: no GPU here ({why}); nothing measured", file=sys.stderr)
        return 1
    import cupy

    from lswmkc_dask import LSWMKC, FeatureKernels, prepare

    props = cupy.cuda.runtime.getDeviceProperties(0)
    print("machine:", machine(), "| GPU", props["name"].decode(), f"{props['totalGlobalMem'] / 2**30:.0f} GiB")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    rows = []
    for n in args.sizes:
        paths, labels = generate(n, workdir / f"n{n}")
        views = [np.load(q) for q in paths]
        store = prepare(FeatureKernels(views), workdir / f"n{n}.zarr", labels=np.load(labels), overwrite=True)
        out = {}
        for device in ("cpu", "cuda"):
            t = time.perf_counter()
            m = LSWMKC(10, alpha=64, n_init=1, max_iter=args.iterations, min_iter=args.iterations,
                       eig_device=device).fit(store)
            wall = time.perf_counter() - t
            its = list(m.iteration_seconds_) if hasattr(m, "iteration_seconds_") else [wall / m.n_iter_]
            out[device] = (statistics.median(its[1:] or its), statistics.median(m.eig_seconds_[1:] or m.eig_seconds_),
                           m.kernel_weights_, set(m.eig_drivers_))
        same = float(np.abs(out["cpu"][2] - out["cuda"][2]).max())
        rows.append((n, out["cpu"][0], out["cuda"][0], out["cpu"][1], out["cuda"][1], same, out["cuda"][3]))
        print(f"n = {n}: s/iteration CPU {out['cpu'][0]:.2f}, GPU {out['cuda'][0]:.2f} "
              f"({out['cpu'][0] / out['cuda'][0]:.2f} x); eigen step CPU {out['cpu'][1]:.2f}, GPU {out['cuda'][1]:.2f}; "
              f"max |omega_gpu - omega_cpu| = {same:.1e}; GPU routes {sorted(out['cuda'][3])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

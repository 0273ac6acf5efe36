"""The whole fit and an alpha sweep on one GPU: the resident route against the isolated eigh.

What it measures, in this order (each step printed as soon as it is done; the figures
also go to ``--json``):

1. **Parity**: YALE (n = 165) at alpha 1, 8, 64, 1024 and Handwritten (n = 2000) at
   alpha 64, fitted on the CPU (``eig_device="cpu"``) and on the GPU (``"cuda"``: the
   whole iteration resident on the device): iterations, the largest difference of the
   kernel weights, the objective's largest relative difference, and whether the labels
   are identical.
2. **Handwritten**: the GPU fit's wall time (``fit()`` from the store to the labels),
   its steady seconds per iteration and the isolated float64 eigh of its last S on the
   same device.
3. **Features -> labels** (the ``"end_to_end"`` records of ``--json``), per data set of
   ``--datasets`` (YALE's kernels; Handwritten's 6 feature views) and per n of ``--sizes``
   (default 8000 20000; the synthetic 6-view data of bench_scale.py, k = 10, alpha = 64),
   at each precision of ``--precisions`` (float64, mixed): ``LSWMKC(kernel="rbf",
   eig_device="cuda", stack_dtype=--stack-dtype).fit(views)`` builds the base kernels on
   the device, iterates there and clusters there. Each record: ``n``, ``precision``,
   ``stack_dtype``, ``kernels_s`` (the kernels built
   on the device, the views' copy included), ``to_device_s`` (a stack copied to the device:
   0 from features, none crosses), ``iterations_s``, ``kmeans_s`` (embedding and k-means),
   ``total_s`` (the whole ``fit()``), ``n_iter``, ``steady_iteration_s`` (median of
   iterations 2..), ``eigh_s`` (one isolated float64 eigh of the same n's S on the device),
   ``eigh_from`` ("isolated", or "fit" with ``--fit-eigh``: the median of the fit's own
   float64 eigen steps), ``float64_eighs`` (the fit's float64 eigen steps),
   ``low_iteration_s`` (median of a mixed fit's polynomial iterations 2..),
   ``peak_device_bytes`` (the memory pool's live bytes, sampled every 20 ms), ``stack`` and
   ``eigen`` (the plan that ran: the stack on the device, streamed from host memory or
   rebuilt from the features; syevd or the split route), ``stack_bytes_per_pass`` and
   ``bytes_per_pass`` (bytes copied in one steady iteration), ``stop_rule`` (the K*s the stop
   rule compared, the first float64 iteration), ``ari_vs_float64`` and
   ``acc_vs_float64_points`` (against the float64 fit of the same data), ``acc``.
4. **Sweep**: 11 alphas (2^0..2^10) at ``--sweep-n`` (default 8000) with
   ``eig_device="cuda"``: the stack copied once, every grid point resident; wall time.

Steps that would not finish within ``--budget`` seconds (from the start, estimated from
the measured eigh) are skipped and said so. Without a CUDA device it exits at once with
a message, unless ``--dry-run`` (the same code on NumPy standing in for CuPy, small
sizes: a check of this script on any machine; its figures are not GPU figures).

    python benchmarks/bench_gpu.py --sweep-n 0 --json gpu.json           # about 8 min on one H100
    python benchmarks/bench_gpu.py --sizes 8000 --precisions mixed --no-parity --budget 300
    python benchmarks/bench_gpu.py --sizes 40000 --precisions mixed --stack-dtype float32 --datasets --no-parity \
        --sweep-n 0 --fit-eigh --verbose                                 # one H200: 250 s
    python benchmarks/bench_gpu.py --dry-run --sizes 400 --sweep-n 400 --json /tmp/g.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import adjusted_rand_score

from bench_scale import generate

T0 = time.perf_counter()
RESULTS: dict = {"steps": {}}


def _say(*parts):
    print(f"[{time.perf_counter() - T0:6.1f} s]", *parts, flush=True)


def _save(path):
    if path is not None:
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(json.dumps(RESULTS, indent=1, default=float))
        tmp.replace(path)


class PeakMemory:
    """The allocator's live bytes on the device (CuPy's memory pool ``used_bytes()``: arrays alive,
    not the pool's cached blocks nor other processes'), sampled every 20 ms while open (CuPy only;
    0 in a dry run)."""

    def __init__(self, cupy):
        self.cupy, self.peak, self._stop = cupy, 0, threading.Event()

    def __enter__(self):
        self.base = self._used()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _used(self):
        if self.cupy is None:
            return 0
        return int(self.cupy.get_default_memory_pool().used_bytes())

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._used())

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self._used())


def isolated_eigh(affinity, cupy):
    """Seconds of one float64 eigh of S = (Z + Z^T)/2 on the device (the second of two
    runs; the first warms the solver), S already there (as the resident route has it)."""
    from lswmkc_dask.engine import gpu

    xp = gpu.namespace("cuda")
    z = np.asarray(affinity.todense())
    s = xp.asarray((z + z.T) * 0.5)
    del z
    times = []
    for _ in range(2):
        if cupy is not None:
            cupy.cuda.Device().synchronize()
        t = time.perf_counter()
        lam, u = xp.linalg.eigh(s)
        if cupy is not None:
            cupy.cuda.Device().synchronize()
        times.append(time.perf_counter() - t)
        del lam, u
    del s
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
    return times[-1]


def polar_figures(affinity, cupy):
    """K*'s positive part of the same S by the polynomial in float16 (tensor cores) and float32,
    against the float64 eigh's K*: seconds (second of two runs) and the relative Frobenius error."""
    from lswmkc_dask.core import polar
    from lswmkc_dask.engine import gpu

    xp = gpu.namespace("cuda")
    z = np.asarray(affinity.todense())
    s = xp.asarray((z + z.T) * 0.5)
    del z
    lam, u = xp.linalg.eigh(s)
    u = u * xp.sqrt(xp.clip(lam, min=0.0))[None, :]
    exact = u @ xp.matrix_transpose(u)
    del lam, u
    norm = float(xp.sqrt(xp.sum(exact * exact)))
    out = {}
    for name in ("float16", "float32"):
        dtype = getattr(xp, name)
        for _ in range(2):
            gpu.synchronize(xp)
            t = time.perf_counter()
            k, _ = polar.positive_part(s, dtype=dtype, xp=xp)
            gpu.synchronize(xp)
            seconds = time.perf_counter() - t
        out[f"polar_{name}_s"] = seconds
        out[f"polar_{name}_error"] = float(xp.sqrt(xp.sum((k - exact) ** 2))) / norm
        del k
    del s, exact
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
    return out


def plan_record(model):
    """Which stack and eigen route the fit ran, the bytes one pass moved (kernel rows and all),
    and the K*s its stop rule compared (from the resident fit's record)."""
    moved = dict(getattr(getattr(model, "result_", None), "device_transfers", None) or {})
    return dict(stack=moved.get("stack"), eigen=moved.get("eigen"),
                stack_bytes_per_pass=moved.get("stack_bytes_per_pass"), bytes_per_pass=moved.get("bytes_per_pass"),
                stop_rule=moved.get("stop_rule"))


def workspace_queries(sizes, dry_run):
    """cuSOLVER's workspace at each n (gpu.workspace_query: xsyevd, and the split route's sytrd and ormtr)."""
    from lswmkc_dask.engine import gpu

    rows = []
    for n in sizes:
        if dry_run:
            rows.append({"n": n, "measured": False, "why": "dry run: no GPU"})
        else:
            try:
                rows.append({**gpu.workspace_query(n), "measured": True})
            except Exception as exc:  # noqa: BLE001 - recorded
                rows.append({"n": n, "measured": False, "why": f"{type(exc).__name__}: {exc}"})
        _say("workspace query", rows[-1])
    return rows


def iteration_figures(model):
    its = [float(x) for x in model.iteration_seconds_]
    return its[0], statistics.median(its[1:] or its)


def parity(store, alpha, n_clusters):
    from lswmkc_dask import LSWMKC

    ref = LSWMKC(n_clusters, alpha=alpha, eig_device="cpu").fit(store)
    t = time.perf_counter()
    dev = LSWMKC(n_clusters, alpha=alpha, eig_device="cuda").fit(store)
    wall = time.perf_counter() - t
    same_iter = int(dev.n_iter_) == int(ref.n_iter_)
    dw = float(np.abs(dev.kernel_weights_ - ref.kernel_weights_).max())
    k = min(len(dev.objective_), len(ref.objective_))
    dobj = float(np.max(np.abs(dev.objective_[:k] - ref.objective_[:k]) / np.maximum(np.abs(ref.objective_[:k]), 1e-300)))
    labels = bool(np.array_equal(dev.labels_, ref.labels_))
    route = sorted(set(map(str, dev.eig_drivers_)))
    return dict(alpha=alpha, n_iter_cpu=int(ref.n_iter_), n_iter_gpu=int(dev.n_iter_), same_iterations=same_iter,
                max_weight_diff=dw, max_objective_rel_diff=dobj, same_labels=labels, gpu_route=route,
                gpu_fit_seconds=wall, cpu_fit_seconds=float(ref.fit_seconds_)), dev


def left(budget):
    return budget - (time.perf_counter() - T0)


def end_to_end(args, workdir, cupy):
    """Step 3: features -> labels per data set and n, per precision (the "end_to_end" records);
    returns the isolated eigh's seconds per n."""
    from lswmkc_dask import LSWMKC
    from lswmkc_dask.datasets import load_dataset

    eigh_at: dict[int, float] = {}
    records = RESULTS.setdefault("end_to_end", [])
    cases = []
    if args.datasets:
        from lswmkc_dask.datasets import load_handwritten

        if "yale" in args.datasets:
            yale, yale_labels = load_dataset("yale")
            cases.append(("yale", yale, yale_labels, 15, 8.0, "precomputed"))
        if "handwritten" in args.datasets:
            views, hw_labels = load_handwritten()
            cases.append(("handwritten", views, hw_labels, 10, 64.0, "rbf"))
    for n in args.sizes:
        cases.append(("synthetic", n, None, 10, 64.0, "rbf"))
    for name, data, truth, k, alpha, kernel in cases:
        if name == "synthetic":
            n = data
            paths, labels = generate(n, workdir / f"n{n}")
            data, truth = [np.load(q) for q in paths], np.load(labels)
        n = len(truth)
        for precision in args.precisions:
            # the kernels (about 5e-9 s per entry on a GPU) + 25 iterations of 1.3 eighs (n^3 from the largest seen)
            known = max(eigh_at) if eigh_at else None
            est_eigh = eigh_at[known] * (n / known) ** 3 if known else 0.0
            est = 1.1 * (10 + 22 * (1.1 if precision == "float64" else 0.4) * est_eigh)
            key = f"{name} n={n} {precision}"
            if left(args.budget) < est:
                _say(f"{key}: skipped (about {est:.0f} s needed, {left(args.budget):.0f} s left)")
                records.append(dict(dataset=name, n=n, precision=precision,
                                    skipped=f"about {est:.0f} s needed, {left(args.budget):.0f} s left"))
                continue
            model = LSWMKC(k, alpha=alpha, kernel=kernel, eig_device="cuda", eig_precision=precision,
                           stack_dtype=args.stack_dtype if kernel != "precomputed" else "float64",
                           verbose=int(args.verbose))
            with PeakMemory(cupy) as peak:
                t = time.perf_counter()
                model.fit(data)
                wall = time.perf_counter() - t
            first, steady = iteration_figures(model)
            stages = dict(model.stage_seconds_)
            polar = {}
            fit_eighs = [float(s) for s, d in zip(model.eig_seconds_, model.eig_drivers_) if d == "resident"]
            if n not in eigh_at and args.fit_eigh and fit_eighs:  # the fit's own float64 eighs (median)
                eigh_at[n] = statistics.median(fit_eighs)
            if n not in eigh_at:  # the isolated float64 eigh of this n's S, and the polynomial's, once
                eigh_at[n] = isolated_eigh(model.affinity_, cupy)
                if args.polar and name == "synthetic":
                    polar = polar_figures(model.affinity_, cupy)
                    _say(f"{name} n={n}: positive part of S {polar}")
            eig = eigh_at.get(n, math.nan)
            row = dict(dataset=name, n=n, precision=precision, stack_dtype=model.stack_dtype, kernels_s=float(stages.get("kernels", 0.0)),
                       to_device_s=float(stages.get("start", 0.0)), iterations_s=float(stages.get("iterations", 0)),
                       kmeans_s=float(stages.get("cluster", 0.0)), total_s=wall, n_iter=int(model.n_iter_),
                       first_iteration_s=first, steady_iteration_s=steady, eigh_s=eig,
                       eigh_from="fit" if args.fit_eigh else "isolated", float64_eighs=len(fit_eighs),
                       low_iteration_s=statistics.median(low) if (low := [
                           float(s) for s, d in zip(model.iteration_seconds_[1:], model.eig_drivers_[1:])
                           if d != "resident"]) else None,
                       steady_over_eigh=steady / eig if eig == eig else math.nan,
                       peak_device_bytes=int(peak.peak), peak_device_from="memory pool used_bytes",
                       **plan_record(model), acc=float(model.evaluate(truth)["ACC"]),
                       execution=getattr(model, "execution_", ""), labels=model.labels_, **polar)
            records.append(row)
            _say(f"{key}: features -> labels {wall:.1f} s (kernels {row['kernels_s']:.1f}, iterations "
                 f"{row['iterations_s']:.1f}, k-means {row['kmeans_s']:.2f}), {model.n_iter_} iterations, steady "
                 f"{steady:.2f} s/iteration, eigh {eig:.2f} s, ACC {row['acc']:.4f}, peak device memory "
                 f"{peak.peak / 2**30:.1f} GiB; {row['execution']}")
            del model
        done = [r for r in records if r.get("dataset") == name and r.get("n") == n and "labels" in r]
        ref = next((r for r in done if r["precision"] == "float64"), None)
        ref_labels = None if ref is None else ref["labels"]
        for row in done:
            labels = row.pop("labels")
            row["ari_vs_float64"] = None if ref is None else float(adjusted_rand_score(ref_labels, labels))
            row["acc_vs_float64_points"] = None if ref is None else 100.0 * (row["acc"] - ref["acc"])
            if ref is not None and row is not ref:
                _say(f"{name} n={n} {row['precision']}: ARI {row['ari_vs_float64']:.4f} against float64, ACC "
                     f"{row['acc_vs_float64_points']:+.2f} points")
        _save(args.json)

    return eigh_at


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[8000, 20000], help="n of the synthetic 6-view data")
    p.add_argument("--precisions", nargs="+", default=["float64", "mixed"], choices=["float64", "mixed"])
    p.add_argument("--datasets", nargs="*", default=["yale", "handwritten"], choices=["yale", "handwritten"],
                   help="bundled data sets fitted features -> labels at each precision")
    p.add_argument("--stack-dtype", choices=["float64", "float32"], default="float64",
                   help="the kernel stack built from features (float32: n = 40,000, m = 6 fits one H200)")
    p.add_argument("--polar", action="store_true",
                   help="also time K*'s polynomial positive part in float16 and float32 per synthetic n")
    p.add_argument("--parity-alphas", type=float, nargs="*", default=[1.0, 8.0, 64.0, 1024.0])
    p.add_argument("--sweep-n", type=int, default=8000, help="n of the 11-alpha sweep (0: none)")
    p.add_argument("--budget", type=float, default=540.0, help="seconds; later steps that would not fit are skipped")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--no-parity", action="store_true")
    p.add_argument("--fit-eigh", action="store_true",
                   help="eigh_s: the median of the fit's own float64 eigen steps, not two isolated eighs of its S "
                        "(at n = 40,000 those take about 80 s)")
    p.add_argument("--verbose", action="store_true", help="each iteration of each fit on stderr")
    p.add_argument("--dry-run", action="store_true", help="NumPy in place of CuPy (checks this script; not a GPU figure)")
    p.add_argument("--workspace-query", type=int, nargs="*", default=[],
                   help="n at which to ask cuSOLVER's workspace (xsyevd, the split route's sytrd/ormtr) first")
    args = p.parse_args(argv)

    from lswmkc_dask.engine import gpu

    cupy = None
    if args.dry_run:
        gpu._TEST_NAMESPACE = "numpy"
        device = "NumPy standing in for a GPU (dry run: no GPU figure)"
    else:
        ok, why = gpu.cuda_device()
        if not ok:
            print(f"bench_gpu: no GPU here ({why}); nothing measured", file=sys.stderr)
            return 1
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        free, total = cupy.cuda.runtime.memGetInfo()
        rt = cupy.cuda.runtime.runtimeGetVersion()
        device = (f"{props['name'].decode()}, {total / 2**30:.0f} GiB, CUDA runtime {rt // 1000}.{rt % 1000 // 10}, "
                  f"CuPy {cupy.__version__}")
    import dask
    import os

    from lswmkc_dask import LSWMKC, FeatureKernels, __version__, prepare, sweep
    from lswmkc_dask.datasets import load_dataset

    RESULTS["machine"] = {"device": device, "cpus": os.cpu_count(), "python": platform.python_version(),
                          "numpy": np.__version__, "dask": dask.__version__, "lswmkc_dask": __version__,
                          "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    _say("machine:", RESULTS["machine"])
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    if args.workspace_query:
        RESULTS["workspace"] = workspace_queries(args.workspace_query, args.dry_run)
        _save(args.json)

    # 1, 2: parity on YALE and Handwritten; Handwritten's timing.
    if not args.no_parity:
        yale, yale_labels = load_dataset("yale")
        ystore = prepare(yale, workdir / "yale.zarr", labels=yale_labels, overwrite=True)
        rows = []
        for alpha in args.parity_alphas:
            row, _ = parity(ystore, alpha, 15)
            rows.append(row)
            _say("parity YALE", row)
        RESULTS["steps"]["parity_yale"] = rows
        _save(args.json)
        hw, hw_labels = load_dataset("handwritten")
        hstore = prepare(hw, workdir / "handwritten.zarr", labels=hw_labels, overwrite=True)
        row, dev = parity(hstore, 64.0, 10)
        _say("parity Handwritten", row)
        t = time.perf_counter()
        again = LSWMKC(10, alpha=64.0, eig_device="cuda").fit(hstore)  # warm: CuPy's kernels compiled
        wall = time.perf_counter() - t
        first, steady = iteration_figures(again)
        eig = isolated_eigh(again.affinity_, cupy)
        row.update(gpu_fit_seconds_warm=wall, first_iteration=first, steady_iteration=steady, isolated_eigh=eig,
                   steady_over_eigh=steady / eig, execution=getattr(again, "execution_", ""))
        _say(f"Handwritten GPU fit {wall:.2f} s warm ({row['gpu_fit_seconds']:.2f} s first), {again.n_iter_} "
             f"iterations, steady {steady:.3f} s/iteration, isolated eigh {eig:.3f} s, ratio {steady / eig:.2f}; "
             f"CPU fit {row['cpu_fit_seconds']:.2f} s")
        RESULTS["steps"]["parity_handwritten"] = row
        _save(args.json)

    eigh_at = end_to_end(args, workdir, cupy)  # 3

    # 4: the 11-alpha sweep.
    if args.sweep_n:
        n = args.sweep_n
        per_fit = eigh_at.get(n, 0.5) * 1.6 * 22 + 3
        if left(args.budget) < 11 * per_fit:
            _say(f"sweep at n = {n}: skipped (about {11 * per_fit:.0f} s needed, {left(args.budget):.0f} s left)")
            RESULTS["steps"]["sweep"] = {"skipped": True}
        else:
            paths, labels = generate(n, workdir / f"n{n}")
            store = prepare(FeatureKernels([np.load(q) for q in paths]), workdir / f"n{n}.zarr",
                            labels=np.load(labels), overwrite=True)
            t = time.perf_counter()
            summary = sweep(store, workdir / "sweep", alphas=[2.0**k for k in range(11)], eig_device="cuda",
                            progress=False, overwrite=True)
            wall = time.perf_counter() - t
            reports = [json.loads(q.read_text()) for q in sorted((workdir / "sweep" / "runs").glob("*/report.json"))]
            routes = sorted({r["eig_device"].get("route", "?") for r in reports})
            iters = sum(int(r["n_iter"]) for r in reports)
            best = max((r.get("metrics", {}).get("honest", {}).get("ACC", math.nan) for r in reports), default=math.nan)
            RESULTS["steps"]["sweep"] = dict(n=n, alphas=11, seconds=wall, iterations=iters, routes=routes,
                                             best_ACC=best, selected=(summary.get("selected") or {}).get("alpha"))
            _say(f"sweep at n = {n}: 11 alphas in {wall:.1f} s ({iters} iterations, routes {routes}), best honest ACC "
                 f"{best:.3f}, label-free choice alpha = {RESULTS['steps']['sweep']['selected']}")
            _save(args.json)
    _say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

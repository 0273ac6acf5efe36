"""Scale past the paper: LSWMKC from an on-disk store at n = 2000 ... 12000 on 2 workers.

For each n of ``--sizes``:

1. a seeded synthetic multi-view data set (6 views of the Handwritten dimensions
   76, 216, 64, 240, 47, 6; k = 10 balanced clusters; each view = cluster centre
   (view-specific scale) + Gaussian noise (view-specific level, so the views differ in
   quality); float64), one ``.npy`` per view and ``labels.npy`` in ``--workdir``;
2. ``lswmkc prepare --features v0.npy ... v5.npy --labels labels.npy STORE.zarr`` in a
   subprocess (Gaussian kernels, ~8 m n^2 bytes on disk), timed;
3. a fit in a fresh subprocess (the client) on a LocalCluster of 2 worker processes, one
   thread each, ``--worker-memory`` each: alpha = 64, n_clusters = 10,
   ``cache_kernels="auto"``; the full fit (default stop rule) up to n = 4000
   (``--full-fit-max``), exactly 3 iterations beyond;
4. the isolated positive-subset eigendecomposition of the same final S in another
   subprocess that loads Z from an ``.npz`` (the client never holds an n x n array):
   ``S = (Z + Z^T)/2`` dense in Fortran order, ``scipy.linalg.eigh(S,
   subset_by_value=(0, inf))`` with 2 BLAS threads (threadpoolctl), median of 3 runs up
   to n = 4000, 1 run beyond.

Printed per n: prepare seconds; first and steady (median of iterations 2..) seconds per
iteration; the subset eigh and the ratio steady / eigh (both measured in this run);
the seconds of a steady iteration outside the eigensolver and the ratio steady / the
eigendecomposition timed inside the same iterations (the isolated eigh runs minutes
later, and this machine's speed drifts by 20% within minutes);
kernel bytes read per iteration (cached in worker memory: the stack once, 0 per
iteration after; out of core: the whole stack every iteration; the decision is the
package's own ``plan_memory``, and the bytes the workers actually read are measured
from /proc/PID/io); peak RSS of the client and of each worker (VmHWM) against the
limit; whether a worker was restarted (PIDs before and after); the fit's wall seconds.
At the end: a table, the fitted power laws ``steady ~ c n^b`` and ``eigh ~ c n^b``
(least squares on log-log), and whether every worker stayed under its limit and the
client under 1 GB. A size that fails (for instance refused up front because no worker's
memory limit holds the gathered step's dense S and eigenvectors) is reported with the
reason and the next size runs.

    python benchmarks/bench_scale.py                        # 2000 4000 8000 12000, 2GB workers
    python benchmarks/bench_scale.py --sizes 1000 2000      # a quick check (about a minute)
    python benchmarks/bench_scale.py --worker-memory 2GB 12000=3GB   # larger workers there

With 2 GB workers (the default) n = 8000 and 12000 run out of core (the stack is read
every iteration). At n = 12000 the first gathered step's S (1.07 GiB) and the
eigenvectors of its 5626 positive eigenvalues (0.5 GiB) stay under Dask's kill threshold
(95% of the limit) only because S is written in its lower half and the reflectors are
packed into it (docs/performance.md#what-the-sizes-show); `--worker-memory 2GB
12000=3GB` gives that step room, and a complete fit at n = 12000 is run with
`--full-fit-max 12000 --worker-memory 10GB` (the kernels then stay in worker memory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_iteration import peak_rss_mib

#: The views of UCI Multiple Features (Handwritten): fou, fac, kar, pix, zer, mor.
VIEW_DIMS = (76, 216, 64, 240, 47, 6)
#: Scale of the cluster centres and noise level of each view (signal to noise differs).
VIEW_SCALE = (1.0, 0.6, 1.2, 0.5, 1.0, 2.0)
VIEW_NOISE = (1.75, 2.1, 1.4, 2.45, 2.8, 1.75)  # n = 1000: one view alone ACC 0.59-1.0, all six 0.89
N_CLUSTERS = 10
DEFAULT_SIZES = (2000, 4000, 8000, 12000)
CLIENT_LIMIT = 2**30  # "the client stays < 1 GB"
HERE = Path(__file__).resolve()


# ---------------------------------------------------------------------------- helpers
def machine():
    from bench_iteration import machine as base

    return f"{base()} | load average {os.getloadavg()[0]:.2f} at start"


def gib(x):
    """Bytes as GiB (MiB below 1 GiB)."""
    return f"{x / 2**30:.2f} GiB" if abs(x) >= 2**30 else f"{x / 2**20:.1f} MiB"


def stack_bytes(n):
    """Bytes of the float64 kernel stack (m, n, n)."""
    return 8 * len(VIEW_DIMS) * n * n


def generate(n, directory, seed=0):
    """Seeded multi-view data: ``v0.npy`` ... ``v5.npy`` (n, d_v) float64 and ``labels.npy``."""
    rng = np.random.default_rng([seed, n])
    labels = rng.permutation(np.arange(n) % N_CLUSTERS).astype(np.int64)  # balanced
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for p, (d, scale, noise) in enumerate(zip(VIEW_DIMS, VIEW_SCALE, VIEW_NOISE)):
        centres = rng.normal(scale=scale, size=(N_CLUSTERS, d))
        x = centres[labels] + rng.normal(scale=noise, size=(n, d))
        path = directory / f"v{p}.npy"
        np.save(path, x.astype(np.float64))
        paths.append(path)
    np.save(directory / "labels.npy", labels)
    return paths, directory / "labels.npy"


def peak_rss_bytes():
    """Peak resident memory of this process in bytes (:func:`bench_iteration.peak_rss_mib`)."""
    return int(peak_rss_mib() * 2**20)


def run_child(cmd, timeout, log=None):
    """Run ``cmd`` in its own session; on timeout or Ctrl-C end its whole process group
    (a fit's LocalCluster workers with it). With ``log`` (a path) the child's stderr goes
    to that file as it runs (``tail -f`` it) and is read back at the end. Returns
    (returncode, stdout, stderr, seconds)."""
    t = time.perf_counter()
    with open(log or os.devnull, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=sink if log else subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as exc:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            out, err = proc.communicate()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            rc = None
        else:
            rc = proc.returncode
    err = Path(log).read_text() if log else err or ""
    if rc is None:
        err += f"\ntimed out after {timeout:.0f} s"
    return rc, out, err, time.perf_counter() - t


def print_eig_parts(res):
    """Where each iteration's eigendecomposition spent its time (``eig_parts_``): one row
    per iteration with its route, the rank of K*, the eigenvectors computed and the
    seconds of each part."""
    parts = res.get("eig_parts") or []
    names = list(dict.fromkeys(k for p in parts for k in p if k != "columns"))
    if not names:
        return
    print("   eigendecomposition by part (s), per iteration:", flush=True)
    print("     " + " | ".join(["t", "route", "rank", "columns", "total", *names]), flush=True)
    for t, p in enumerate(parts, 1):
        cells = [str(t), res["eig_drivers"][t - 1], str(res["kstar_rank"][t - 1]), str(p.get("columns", "")),
                 f"{res['eig_seconds'][t - 1]:.1f}", *(f"{p[k]:.1f}" if k in p else "" for k in names)]
        print("     " + " | ".join(cells), flush=True)


def result_of(stdout):
    for line in reversed((stdout or "").splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def last_lines(text, k=3):
    lines = [x for x in (text or "").strip().splitlines() if x.strip()]
    return " | ".join(lines[-k:]) if lines else "(no output)"


def lswmkc_command():
    exe = Path(sys.executable).parent / "lswmkc"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "lswmkc_dask.cli"]


def worker_memory_for(n, specs):
    """``--worker-memory 2GB 12000=3GB``: the limit for n (the plain value, or n's override)."""
    plain, per_n = "2GB", {}
    for spec in specs:
        if "=" in spec:
            k, v = spec.split("=", 1)
            per_n[int(k)] = v
        else:
            plain = spec
    return per_n.get(n, plain)


def plan_before_prepare(n, memory_limit, n_workers):
    """The package's own memory plan (``plan_memory``, what the fit calls first) for a
    store of this shape on workers of this limit, before the store is written: a size
    the fit would refuse is not prepared. Returns (cache, None) or (None, reason)."""
    from dask.utils import parse_bytes

    from lswmkc_dask.engine.runners import plan_memory
    from lswmkc_dask.io.store import KernelStore

    workers = {f"w{i}": {"memory_limit": parse_bytes(memory_limit)} for i in range(n_workers)}

    class Limits:  # the one thing plan_memory asks of a client: the scheduler's workers (engine.scheduler.workers_of)
        class scheduler:  # noqa: N801 - the client's attribute
            @staticmethod
            def identity(n_workers=-1):
                return {"workers": workers}

        @staticmethod
        def sync(func, *args, **kwargs):
            return func(*args, **kwargs)

    try:
        shape = KernelStore(location="(not written)", n_kernels=len(VIEW_DIMS), n_samples=n, block_rows=n,
                            labels=None, attrs={})
        return plan_memory(Limits(), shape), None
    except MemoryError as exc:
        return None, f"MemoryError: {exc}"
    except Exception:  # noqa: BLE001 - plan_memory changed its needs: let the fit decide
        return "unknown", None


def power_law(ns, ys):
    """(c, b) of y ~ c n^b by least squares on log-log, or None."""
    pts = [(n, y) for n, y in zip(ns, ys) if y is not None and np.isfinite(y) and y > 0]
    if len(pts) < 2 or len({n for n, _ in pts}) < 2:
        return None
    b, logc = np.polyfit(np.log([n for n, _ in pts]), np.log([y for _, y in pts]), 1)
    return float(np.exp(logc)), float(b)


# ------------------------------------------------------------------- child: one fit
def child_fit(args):
    """One fit on a fresh LocalCluster; prints ``RESULT {json}``. This process is the client."""
    import distributed
    import scipy.sparse as sp

    from lswmkc_dask import LSWMKC
    from lswmkc_dask.engine.cluster import local_cluster
    from lswmkc_dask.engine.runners import plan_memory
    from lswmkc_dask.io import open_store

    def worker_io():
        with open("/proc/self/io") as fh:
            return {k: int(v) for k, v in (line.split(":") for line in fh)}

    def worker_state():
        return os.getpid(), peak_rss_bytes()

    def warm_up():  # the fit's imports, so that the bytes read below are the kernels'
        import importlib

        for name in ("scipy.linalg", "scipy.sparse", "sklearn.cluster", "zarr", "lswmkc_dask.engine.postprocess",
                     "lswmkc_dask.engine.solver", "lswmkc_dask.core.equations"):
            importlib.import_module(name)

    out = {"n": args.n}
    store = open_store(args.fit)
    t = time.perf_counter()
    with local_cluster(n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit) as client:
        out["cluster_start_seconds"] = time.perf_counter() - t
        info = client.scheduler_info()["workers"]
        out["worker_limits"] = {a: w.get("memory_limit") for a, w in info.items()}
        client.run(warm_up)
        before = client.run(worker_state)
        io0 = client.run(worker_io)
        iters = args.iterations
        model = LSWMKC(N_CLUSTERS, alpha=args.alpha, client=client, cache_kernels="auto", random_state=0,
                       eig_precision=args.eig_precision, verbose=1, **({"max_iter": iters, "min_iter": iters} if iters else {}))
        try:
            out["cached"] = bool(plan_memory(client, store, "auto"))  # what the fit decides
            t = time.perf_counter()
            model.fit(store)
            out["fit_wall_seconds"] = time.perf_counter() - t
        except MemoryError as exc:
            out["error"] = f"MemoryError: {exc}"
        except Exception as exc:  # noqa: BLE001 - reported as the row of this size
            out["error"] = f"{type(exc).__name__}: {exc}"
        after = client.run(worker_state)
        try:
            io1 = client.run(worker_io)
        except Exception:  # noqa: BLE001
            io1 = {}
        out["worker_pids_before"] = {a: v[0] for a, v in before.items()}
        out["worker_pids_after"] = {a: v[0] for a, v in after.items()}
        out["worker_peak_rss"] = {a: v[1] for a, v in after.items()}
        same = set(io0) & set(io1)
        out["worker_rchar"] = sum(io1[a]["rchar"] - io0[a]["rchar"] for a in same)
        out["worker_read_bytes"] = sum(io1[a]["read_bytes"] - io0[a]["read_bytes"] for a in same)
    if "error" not in out:
        its = np.asarray(model.iteration_seconds_, dtype=float)
        out.update(
            n_iter=int(model.n_iter_),
            converged=bool(model.converged_),
            iteration_seconds=its.tolist(),
            eig_seconds=np.asarray(model.eig_seconds_, dtype=float).tolist(),
            eig_threads=np.asarray(model.eig_threads_).tolist(),
            kstar_rank=np.asarray(model.kstar_rank_).tolist(),
            fit_seconds=float(model.fit_seconds_),
            n_restarts=int(getattr(model, "n_restarts_", 0)),
            execution=str(model.execution_),
            weights=np.asarray(model.kernel_weights_).tolist(),
            acc=float(model.evaluate(store.labels)["ACC"]) if store.labels is not None else None,
            nnz=int(model.affinity_.nnz),
            stage_seconds={k: float(v) for k, v in model.stage_seconds_.items()},
            eig_drivers=[str(x) for x in model.eig_drivers_],
            eig_parts=[{k: (int(v) if k == "columns" else float(v)) for k, v in p.items()} for p in model.eig_parts_],
        )
        sp.save_npz(args.z_out, sp.csr_matrix(model.affinity_), compressed=False)
    out["client_peak_rss"] = peak_rss_bytes()
    out["distributed"] = distributed.__version__
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------- child: isolated eigh
def child_eigh(args):
    """Isolated eigendecompositions of S = (Z + Z^T)/2 from ``--eigh Z.npz``; prints ``RESULT {json}``.

    Times SciPy's positive-subset ``eigh`` (the yardstick) and the package's default
    route (``psd_factor(driver="mrrr")``, what the gathered step runs) on the same S.
    """
    import scipy.sparse as sp
    from scipy.linalg import eigh
    from threadpoolctl import threadpool_limits

    from lswmkc_dask.core.eigen import psd_factor

    z = sp.load_npz(args.eigh).tocsr()
    s = ((z + z.T) * 0.5).toarray(order="F")
    seconds, mrrr, rank = [], [], None
    with threadpool_limits(limits=args.eigh_threads):
        small = np.asfortranarray(s[:200, :200])  # start BLAS's threads outside the timing
        eigh(small, subset_by_value=(0.0, np.inf), check_finite=False)
        for _ in range(args.repeats):
            a = np.array(s, order="F", copy=True)
            t = time.perf_counter()
            w, _ = eigh(a, subset_by_value=(0.0, np.inf), overwrite_a=True, check_finite=False)
            seconds.append(time.perf_counter() - t)
            rank = int(w.size)
            del a, w, _
        del s
        for _ in range(args.repeats):
            t = time.perf_counter()
            w, lam = psd_factor(z, driver="mrrr")
            mrrr.append(time.perf_counter() - t)
            if abs(lam.size - rank) > 2:  # a round-off zero may fall on either side
                raise AssertionError(f"mrrr route rank {lam.size} != subset rank {rank}")
            del w, lam
    out = {"seconds": seconds, "median": statistics.median(seconds), "rank": rank, "threads": args.eigh_threads,
           "mrrr_seconds": mrrr, "mrrr_median": statistics.median(mrrr),
           "peak_rss": peak_rss_bytes()}
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------ the bench
def one_size(n, args, workdir):
    """Generate, prepare, fit, eigh for one n; returns the row's dict (``error`` on failure)."""
    row = {"n": n}
    m = len(VIEW_DIMS)
    limit = worker_memory_for(n, args.worker_memory)
    row["worker_memory"] = limit
    full = n <= args.full_fit_max
    row["mode"] = "full fit" if full else "3 iterations"
    print(f"\n== n = {n}: stack {gib(stack_bytes(n))} (m = {m}), {args.workers} workers x {limit}, "
          f"{row['mode']}", flush=True)

    cache, refusal = plan_before_prepare(n, limit, args.workers)
    if refusal:
        row["error"] = f"refused up front by the package's memory plan, store not prepared: {refusal}"
        print("   " + row["error"], flush=True)
        return row
    print(f"   memory plan (plan_memory, before the store is written): "
          f"{'kernels cached in worker memory' if cache is True else 'out of core' if cache is False else cache}",
          flush=True)
    free = shutil.disk_usage(workdir).free
    need = int(stack_bytes(n) * 1.05) + 64 * 2**20
    if free < need:
        row["error"] = f"not enough disk in {workdir}: the store needs about {gib(need)}, {gib(free)} free"
        print("   " + row["error"], flush=True)
        return row

    d = workdir / f"n{n}"
    t = time.perf_counter()
    views, labels = generate(n, d, seed=args.seed)
    print(f"   data: {len(views)} views {VIEW_DIMS}, k = {N_CLUSTERS}, written in {time.perf_counter() - t:.1f} s",
          flush=True)
    store = d / "kernels.zarr"
    cmd = [*lswmkc_command(), "prepare", "--features", *map(str, views), "--labels", str(labels), str(store)]
    rc, out, err, secs = run_child(cmd, args.step_timeout)
    if rc != 0:
        row["error"] = f"prepare failed (exit {rc}): {last_lines(err or out)}"
        print("   " + row["error"], flush=True)
        shutil.rmtree(store, ignore_errors=True)
        return row
    row["prepare_seconds"] = secs
    row["store_bytes"] = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    print(f"   prepare: {secs:.1f} s, store {gib(row['store_bytes'])} on disk ({last_lines(out, 1)})", flush=True)

    try:
        z_path = d / "affinity.npz"
        cmd = [sys.executable, str(HERE), "--fit", str(store), "--n", str(n), "--alpha", str(args.alpha),
               "--iterations", "0" if full else str(args.iterations), "--memory-limit", limit,
               "--workers", str(args.workers), "--z-out", str(z_path), "--eig-precision", args.eig_precision]
        fit_log = d / "fit.log"
        print(f"   fit: one line per iteration in {fit_log} as it runs", flush=True)
        rc, out, err, secs = run_child(cmd, args.step_timeout, log=fit_log)
        res = result_of(out)
        if res is None:
            row["error"] = f"fit process failed (exit {rc}, {secs:.0f} s): {last_lines(err)}"
            print("   " + row["error"], flush=True)
            return row
        row.update(res)
        row["memory_warnings"] = [x for x in (err or "").splitlines()
                                  if "memory" in x.lower() and ("warn" in x.lower() or "paus" in x.lower())]
        if "error" in res:
            print(f"   fit failed: {res['error']}", flush=True)
            memory_summary(row, res)
            return row
        its = res["iteration_seconds"]
        row["first"] = its[0]
        row["steady"] = statistics.median(its[1:]) if len(its) > 1 else its[0]
        stack = stack_bytes(n)
        row["read_per_iteration"] = 0 if res["cached"] else stack
        print(f"   fit: {res['n_iter']} iterations ({'converged' if res['converged'] else 'not converged'}), "
              f"{res['fit_wall_seconds']:.1f} s wall ({res['fit_seconds']:.1f} s in iterations); "
              f"first {row['first']:.2f} s, steady {row['steady']:.2f} s per iteration; "
              f"ACC {res['acc']:.3f}; {res['execution']}", flush=True)
        stages = res.get("stage_seconds") or {}
        print("   stages of fit() (s): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
              + f"; eigen routes {sorted(set(res.get('eig_drivers') or []))}", flush=True)
        eigs = res["eig_seconds"]
        steady_eig = statistics.median(eigs[1:]) if len(eigs) > 1 else eigs[0]
        row["outside"] = statistics.median(np.subtract(its, eigs)[1:]) if len(its) > 1 else its[0] - eigs[0]
        row["in_fit_ratio"] = row["steady"] / steady_eig
        print(f"   inside the iterations: eigendecomposition last {eigs[-1]:.2f} s, steady {steady_eig:.2f} s "
              f"({res['eig_threads'][-1]} threads), rank of K* {res['kstar_rank'][0]} -> {res['kstar_rank'][-1]} "
              f"of {n}; Z has {res['nnz']} non-zeros; outside the eigensolver {row['outside']:.2f} s per steady "
              f"iteration; steady / in-fit eigendecomposition = {row['in_fit_ratio']:.2f} (both timed in the "
              f"same iterations: immune to the machine's drift)", flush=True)
        print_eig_parts(res)
        kind = ("cached in worker memory: the stack read once, 0 bytes per iteration after" if res["cached"] else
                "out of core: the whole stack read from the store every iteration")
        print(f"   kernels: {kind} (plan_memory with {args.workers} x {limit}; stack {gib(stack)}, store on disk "
              f"{gib(row['store_bytes'])}); the workers read {gib(res['worker_rchar'])} in the fit "
              f"= {res['worker_rchar'] / stack:.2f} x the stack over {res['n_iter']} iterations + initialisation "
              f"({gib(res['worker_read_bytes'])} of it from the disk, the rest from the page cache)", flush=True)
        row["read_in_fit"] = res["worker_rchar"] / stack
        if res["cached"] and row["read_in_fit"] > 1.5:
            print("   NOTE: planned as cached, yet the workers read the stack more than once: Dask spilled cached "
                  "blocks to its local disk and read them back (the workers' memory is too tight to hold them)",
                  flush=True)

        repeats = args.repeats if n <= args.full_fit_max else 1
        cmd = [sys.executable, str(HERE), "--eigh", str(z_path), "--repeats", str(repeats),
               "--eigh-threads", str(args.eigh_threads)]
        rc, out, err, secs = run_child(cmd, args.step_timeout)
        eig = result_of(out)
        if eig is None:
            row["eigh_error"] = f"eigh process failed (exit {rc}): {last_lines(err)}"
            print("   " + row["eigh_error"], flush=True)
        else:
            row["eigh"] = eig["median"]
            row["ratio"] = row["steady"] / eig["median"]
            row["eigh_mrrr"] = eig["mrrr_median"]
            row["ratio_mrrr"] = row["steady"] / eig["mrrr_median"]
            row["fit_ratio"] = row["fit_seconds"] / (row["n_iter"] * eig["median"])
            print(f"   isolated eigh(S, subset_by_value=(0, inf)), {eig['threads']} threads, median of {repeats}: "
                  f"{eig['median']:.2f} s (runs {' '.join(f'{x:.2f}' for x in eig['seconds'])}; rank {eig['rank']}; "
                  f"that process's peak RSS {eig['peak_rss'] / 2**20:.0f} MiB); steady / eigh = {row['ratio']:.2f}; "
                  f"iterations / (n_iter x eigh) = {row['fit_ratio']:.2f}", flush=True)
            print(f"   the package's route (psd_factor, 'mrrr') on the same S: {eig['mrrr_median']:.2f} s "
                  f"(runs {' '.join(f'{x:.2f}' for x in eig['mrrr_seconds'])}); steady / mrrr = "
                  f"{row['ratio_mrrr']:.2f}", flush=True)
        if not args.keep:
            z_path.unlink(missing_ok=True)
    finally:
        if not args.keep:
            shutil.rmtree(store, ignore_errors=True)

    memory_summary(row, res)
    return row


def memory_summary(row, res):
    """Peak RSS of client and workers against the limits; worker restarts (PIDs, n_restarts_)."""
    limits = res["worker_limits"]
    peaks = res["worker_peak_rss"]
    row["restarted"] = (set(res["worker_pids_before"].values()) != set(res["worker_pids_after"].values())
                        or res.get("n_restarts", 0) > 0)
    row["under_limits"] = (not row["restarted"]) and all(
        limits.get(a) is None or peaks[a] < limits[a] for a in peaks)
    row["client_ok"] = res["client_peak_rss"] < CLIENT_LIMIT
    print(f"   peak RSS: client {res['client_peak_rss'] / 2**20:.0f} MiB "
          f"({'<' if row['client_ok'] else '>='} 1 GiB); workers "
          + ", ".join(f"{peaks[a] / 2**20:.0f} MiB of {limits[a] / 2**20:.0f}" if limits.get(a) else
                      f"{peaks[a] / 2**20:.0f} MiB" for a in sorted(peaks))
          + f"; worker restarted: {'YES' if row['restarted'] else 'no'} (PIDs before/after, n_restarts_ "
          f"{res.get('n_restarts', 0)}); Dask memory warnings: {len(row['memory_warnings'])}", flush=True)
    for line in row["memory_warnings"][:3]:
        print(f"     {line.strip()[:200]}")


def fmt(x, spec=".2f"):
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def table(rows):
    # seconds to three significant figures: a small n's eigh takes milliseconds, and two
    # decimals would print it as 0.00
    head = ("| n | prepare s | iterations | first s/it | steady s/it | subset eigh s | steady / eigh | "
            "fit / (n_iter x eigh) | mrrr s | steady / mrrr | outside eig s/it | steady / in-fit eig | "
            "kernel read / iteration | read in fit | fit wall s | peak RSS client / workers MiB (limit) | restarted |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        if "steady" not in r:
            why = r.get("error", "failed").replace("|", "/")
            why = why if len(why) <= 400 else why[:400] + " ..." 
            prep = fmt(r.get("prepare_seconds"), ".1f")
            lines.append(f"| {r['n']} | {prep} | failed: {why} |")
            continue
        read = "0 (stack once)" if r["cached"] else gib(r["read_per_iteration"])
        peaks = r["worker_peak_rss"]
        workers = ", ".join(f"{peaks[a] / 2**20:.0f}" for a in sorted(peaks))
        lines.append(
            f"| {r['n']} | {r['prepare_seconds']:.3g} | {r['n_iter']} | {r['first']:.3g} | {r['steady']:.3g} | "
            f"{fmt(r.get('eigh'), '.3g')} | {fmt(r.get('ratio'))} | {fmt(r.get('fit_ratio'))} | "
            f"{fmt(r.get('eigh_mrrr'), '.3g')} | {fmt(r.get('ratio_mrrr'))} | {r['outside']:.3g} | "
            f"{r['in_fit_ratio']:.2f} | {read} | {r['read_in_fit']:.2f} x stack | "
            f"{r['fit_wall_seconds']:.3g} | "
            f"{r['client_peak_rss'] / 2**20:.0f} / {workers} ({r['worker_memory']}) | "
            f"{'yes' if r['restarted'] else 'no'} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES), help="values of n (default %(default)s)")
    ap.add_argument("--worker-memory", nargs="+", default=["2GB"], metavar="LIMIT",
                    help="memory limit of each worker, as Dask reads it; N=LIMIT sets it for one n "
                         "(e.g. 2GB 8000=3GB 12000=6GB). Default 2GB")
    ap.add_argument("--workdir", type=Path, help="where data and stores go (default: a new directory under the temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep stores, data and Z (default: removed after each n)")
    ap.add_argument("--alpha", type=float, default=64.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full-fit-max", type=int, default=4000, help="full fits up to this n, --iterations beyond")
    ap.add_argument("--iterations", type=int, default=3, help="iterations beyond --full-fit-max (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="isolated eighs to take the median of (1 beyond --full-fit-max)")
    ap.add_argument("--eigh-threads", type=int, default=2)
    ap.add_argument("--eig-precision", choices=("float64", "float32"), default="float64",
                    help="the fit's eigen route precision (LSWMKC(eig_precision=...); default %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step-timeout", type=float, default=2400.0, help="seconds before a prepare/fit/eigh is ended")
    # internal: the child processes
    ap.add_argument("--fit", help=argparse.SUPPRESS)
    ap.add_argument("--eigh", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--memory-limit", help=argparse.SUPPRESS)
    ap.add_argument("--z-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fit:
        return child_fit(args)
    if args.eigh:
        return child_eigh(args)

    start = time.perf_counter()
    sizes = sorted(set(args.sizes))
    print("machine:", machine())
    made = args.workdir is None
    if made:
        base = Path(tempfile.gettempdir())
        workdir = Path(tempfile.mkdtemp(prefix="lswmkc-bench-scale-", dir=base))
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    need = sum(stack_bytes(n) for n in sizes) if args.keep else max(stack_bytes(n) for n in sizes)
    free = shutil.disk_usage(workdir).free
    print(f"workdir: {workdir}; disk needed about {gib(need)} (~8 m n^2 bytes per store, "
          f"{'all kept' if args.keep else 'one store at a time'}), {gib(free)} free"
          + ("" if free >= need else " -- NOT ENOUGH: sizes that do not fit are skipped"), flush=True)
    print(f"sizes {sizes}; alpha {args.alpha:g}; {args.workers} workers x 1 thread, memory "
          f"{' '.join(args.worker_memory)}; full fit up to n = {args.full_fit_max}, {args.iterations} iterations "
          f"beyond; isolated eigh with {args.eigh_threads} threads", flush=True)
    rows = []
    try:
        for n in sizes:
            try:
                rows.append(one_size(n, args, workdir))
                print(f"   ({time.perf_counter() - start:.0f} s since the start)", flush=True)
            except Exception as exc:  # noqa: BLE001 - the next size still runs
                rows.append({"n": n, "error": f"{type(exc).__name__}: {exc}"})
                print(f"   failed: {rows[-1]['error']}", flush=True)
            finally:
                if not args.keep:
                    shutil.rmtree(workdir / f"n{n}", ignore_errors=True)
    finally:
        if made and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    print("\n" + table(rows))
    ok = [r for r in rows if "steady" in r]
    for name, key in (("steady seconds per iteration", "steady"), ("isolated subset eigh seconds", "eigh")):
        fit = power_law([r["n"] for r in ok], [r.get(key) for r in ok])
        if fit:
            c, b = fit
            print(f"power law: {name} ~ {c:.3g} * n^{b:.2f} (least squares on log-log over n = "
                  f"{', '.join(str(r['n']) for r in ok if r.get(key))})")
        else:
            print(f"power law: {name}: not enough sizes (needs 2 that ran)")
    for r in rows:
        if "steady" in r:
            print(f"n = {r['n']}: every worker under its limit ({r['worker_memory']}) and none restarted: "
                  f"{'yes' if r['under_limits'] else 'NO'}; client < 1 GiB: {'yes' if r['client_ok'] else 'NO'}")
        else:
            print(f"n = {r['n']}: did not run: {r.get('error')}")
    print(f"total {time.perf_counter() - start:.0f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())

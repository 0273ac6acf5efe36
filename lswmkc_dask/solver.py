"""The LSWMKC alternating loop, mapped over row blocks.

One loop, two runners:

* :class:`DaskRunner` maps the row-block steps over a Dask client's workers and runs the
  gathered step (eigendecomposition for K*) as a task on one worker. The client holds
  only vectors of length m or n and scalars; Z blocks and the K* factor stay on the
  workers as futures.
* :class:`LocalRunner` runs the same steps in the current process (used inside a single
  Dask task for small problems in a sweep, and for debugging).

Per iteration t (docs/algorithm.md section 2):

1. ``omega_t = delta(Z_{t-1}) / ||delta||`` on the client (m numbers);
2. ONE pass over the kernel row blocks: combined rows ``sum_p omega_p K_p[b]``,
   ``K*_{t-1}[b] = W_{t-1}[b] W_{t-1}^T``, the projected rows ``Z_t[b]`` and the
   partial ``delta_p(Z_t)`` and norms that the objective and the next omega need;
3. Z gathered to one worker: ``S = (Z + Z^T)/2``, positive eigenpairs, ``W_t``; then,
   in a task of its own (W_{t-1} is not in memory beside S), ``||K*_t - K*_{t-1}||_F``
   from the factors; the objective (Eq. 10);
4. the reference stop rule.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
import time
import uuid
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from . import gpu, steps
from .cluster import blas_threads, call_with_array_malloc, limit_blas
from .errors import KernelInputError
from .io.store import read_store_rows

__all__ = [
    "BlockRef",
    "DaskRunner",
    "LocalRunner",
    "InitState",
    "FitResult",
    "blocks_in_memory",
    "kernel_blocks",
    "row_views",
    "solver_block_rows",
    "initialise",
    "iterate",
    "submit_read",
]


@dataclass(frozen=True)
class BlockRef:
    """A row block of a kernel store, read inside the task that needs it.

    Parameters
    ----------
    location : str
        Path or URL of the store.
    start, stop : int
        Row range.
    """

    location: str
    start: int
    stop: int

    def read(self):
        """Rows ``start:stop`` of every kernel, shape (m, b, n)."""
        return read_store_rows(self.location, self.start, self.stop)


def _rows(kernels):
    return kernels.read() if isinstance(kernels, BlockRef) else kernels


# ------------------------------------------------------- reads: data errors not retried
class _Refused:
    """A :class:`KernelInputError` caught in a task, returned as its result.

    Damaged kernels are a deterministic data error: Dask's ``retries`` would read the
    damaged chunk again (four times) before the error reached the user. The task that
    reads therefore returns the error, keeping its retries for transient failures (an
    unreachable object store), and a second task, never retried, raises it.
    """

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _refusal_returned(fn, *args):
    """``fn(*args)``, or a :class:`_Refused` holding the KernelInputError it raised."""
    try:
        return fn(*args)
    except KernelInputError as exc:
        return _Refused(exc)


def _raise_refused(value):
    """The result of :func:`_refusal_returned`: the value, or its KernelInputError raised."""
    if isinstance(value, _Refused):
        raise value.error
    return value


def _submit_refusing(client, fn, args, key=None, retries=3, priority=0):
    """A future of ``fn(*args)`` (a task reading the kernel store) whose data errors are not retried."""
    first = client.submit(_refusal_returned, fn, *args, key=key, pure=False, retries=retries, priority=priority)
    # Not retried: it raises only the deterministic KernelInputError. A worker lost while it runs
    # is not an error of the task (Dask reschedules it), and its lost result is recomputed.
    return client.submit(_raise_refused, first, key=None if key is None else f"{key}-checked", pure=False,
                         retries=0, priority=priority)


def submit_read(client, location, start, stop, retries=3):
    """Read rows of a kernel store on a Dask worker: a future of :func:`read_store_rows`.

    Parameters
    ----------
    client : distributed.Client
    location : str
        Path or URL of the store (:attr:`KernelStore.location`).
    start, stop : int
        Row range.
    retries : int
        Retries of the read when it fails otherwise than on damaged kernels (an I/O
        error of an object store, say).

    Returns
    -------
    distributed.Future
        Of the rows, shape (m, stop - start, n). Its result raises
        :class:`KernelInputError` (a damaged store or chunk: the message names the
        store, the kernel(s) and the rows) after ONE read: data errors are not
        retried. A worker lost while reading, or holding the rows, makes Dask read
        them again.
    """
    return _submit_refusing(client, read_store_rows, (location, start, stop), retries=retries)


# ----------------------------------------------------------------------------- tasks
def _init_block(kernels, start, weights0, n_neighbors):
    k = _rows(kernels)
    z, gamma = steps.init_graph_rows(steps.combine_kernels(k, weights0), start, n_neighbors)
    return z, gamma, steps.kernel_alignment(k, z)


def _weights(source):
    """omega from an array, or from the previous gathered step's summary (Eq. 12)."""
    return steps.kernel_weights(source["delta"]) if isinstance(source, dict) else source


def _graph_block(kernels, start, gamma, weights, kstar_factor, alpha, weights0):
    k = _rows(kernels)
    b = k.shape[1]
    if kstar_factor is None:  # K*_0 = sum_p omega0_p K_p (docs/algorithm.md section 1)
        kstar_rows = steps.combine_kernels(k, weights0)
    else:
        kstar_rows = kstar_factor[start : start + b] @ kstar_factor.T
    z = steps.graph_rows(steps.combine_kernels(k, _weights(weights)), kstar_rows, gamma, alpha, start)
    row_sq = np.asarray(z.multiply(z).sum(axis=1)).ravel()
    return z, (steps.kernel_alignment(k, z), float(gamma @ row_sq), float(row_sq.sum()))


def _memory_limit():
    """This Dask worker's memory limit in bytes, or None (no limit, or not on a worker)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker().memory_manager.memory_limit or None
    except (ValueError, AttributeError):  # not in a worker
        return None


def _resident_bytes():
    """Resident memory of this process (bytes), or None without psutil."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed
        return None
    return int(psutil.Process().memory_info().rss)


def _memory_left():
    """Bytes this process may still allocate before it is stopped, or None if unknown.

    On a Dask worker with a memory limit: 95% of the limit (where the nanny kills it)
    less the resident memory now. Elsewhere: the memory the system has available.
    """
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed
        return None
    limit = _memory_limit()
    if limit:
        return int(0.95 * limit) - psutil.Process().memory_info().rss
    return int(psutil.virtual_memory().available)


#: "auto" takes "subset" while the previous K* had rank <= SUBSET_MAX_FRACTION of n,
#: "evd" from EVD_MIN_FRACTION (each where its memory fits), "mrrr" between, at the
#: first step and wherever the others would not fit. Measured on 2 cores at n = 2000
#: and 4000 (benchmarks/bench_eig.py; benchmarks/README.md): "mrrr" is the fastest
#: route from ~15% to ~45% (its cost after the reduction grows with r: O(n r) for the
#: tridiagonal eigenvectors and 2 n^2 r for the back-transformation), the full
#: divide-and-conquer from ~45-50%; below 15% "subset" and "mrrr" cost the same alone,
#: and "subset" was faster in the alpha sweep, where two fits share the 2 cores; below
#: 5% the sparse Lanczos route (LANCZOS_MAX_FRACTION) beats both.
SUBSET_MAX_FRACTION = 0.15
EVD_MIN_FRACTION = 0.45
#: "auto" takes "lanczos" (ARPACK on the sparse S, no dense n x n array) while the
#: previous rank is <= LANCZOS_MAX_FRACTION of n, for n >= LANCZOS_MIN_N: at n = 2000 on
#: Handwritten's S it took 0.24 s at rank 4% against 0.68 s ("mrrr") and 0.70 s
#: ("subset"), 0.29 s against 0.90 s with two fits sharing the 2 cores; slower from 6%.
LANCZOS_MAX_FRACTION = 0.05
LANCZOS_MIN_N = 1000


def _dense_s_bytes(n):
    """Memory of the "mrrr" route's dense S until its reduction: the lower half written,
    the packing of the reflectors and LAPACK's workspace (bytes)."""
    return 5 * n * n + 4096 * n


def _route_bytes(route, n, r):
    """Memory of an eigen route beyond the sparse Z: S, eigenvectors, workspace (bytes)."""
    if route == "mrrr":  # S's lower half (and the packing), then the packed reflectors and the eigenvectors
        return max(_dense_s_bytes(n), steps._mrrr_bytes(n, r))
    if route == "subset":  # SciPy's n x n eigenvector buffer, then the r columns copied
        return 8 * n * (2 * n + r)
    if route == "lanczos":  # ARPACK's 2 k + 1 vectors (k = 1.1 r + 10, once doubled); sparse S at ~2 KiB a row
        return 8 * n * (4 * (int(1.1 * r) + 10) + 2) + 2048 * n
    return 4 * 8 * n * n  # evd: S, all eigenvectors, the divide-and-conquer workspace


def _fits(route, n, r):
    left = _memory_left()
    return left is None or _route_bytes(route, n, r) <= 0.8 * left


def _choose_driver(driver, n, prev):
    """The eigen route of this gathered step.

    "auto" is a rule on the rank r of the previous K* (the rank changes slowly from one
    iteration to the next), with the crossovers measured on 2 cores
    (:data:`SUBSET_MAX_FRACTION`, :data:`EVD_MIN_FRACTION`) and the memory of each
    route (:func:`_route_bytes`) against what this worker has left: "mrrr" at the
    first step and whenever another route would not fit. A rule, not timings taken
    during the fit, so that the same data gives the same result bit for bit.

    Returns
    -------
    str
        "mrrr", "subset", "evd" or "lanczos".
    """
    driver = steps.eigen_spec(driver).driver
    if driver != "auto":
        return driver
    if not prev or "rank" not in prev:
        return "mrrr"
    r = int(prev["rank"])
    if n >= LANCZOS_MIN_N and r <= LANCZOS_MAX_FRACTION * n and _fits("lanczos", n, r):
        return "lanczos"
    if r >= EVD_MIN_FRACTION * n and _fits("evd", n, r):
        return "evd"
    if r <= SUBSET_MAX_FRACTION * n and _fits("subset", n, r):
        return "subset"
    return "mrrr"


#: Bytes kept free beside the eigenvectors for the back-transformation's temporaries
#: (at most a tenth of a worker's memory limit: see :func:`_headroom`).
EIG_WORK_BYTES = 64 * 2**20


def _headroom():
    """Bytes the gathered step keeps free beyond its route's own need (:func:`_route_bytes`).

    :data:`EIG_WORK_BYTES`, but at most a tenth of this worker's memory limit: on a
    small worker (300 MB, Handwritten at n = 2000, 171 MiB resident between tasks) a
    fixed 64 MiB refused an eigendecomposition that peaked at 246 of the 272 MiB where
    the nanny stops the worker.
    """
    limit = _memory_limit()
    return EIG_WORK_BYTES if not limit else min(EIG_WORK_BYTES, int(limit) // 10)


class WorkerMemoryError(steps.EigenvectorMemoryError):
    """The gathered step's memory does not fit what is left under the worker's memory limit.

    Raised before the dense S is allocated (:func:`_make_room`), so that the worker is
    not stopped by its nanny half way. Attributes give the figures (bytes): ``need``,
    ``left``, ``limit`` (None where unknown) and ``resident`` (None where unknown).
    """

    def __init__(self, message, need=None, left=None, limit=None, resident=None):
        super().__init__(message)
        self.need, self.left, self.limit, self.resident = need, left, limit, resident


def _size(nbytes):
    from dask.utils import format_bytes

    return format_bytes(max(int(nbytes), 0))


def _make_room(need):
    """Check that ``need`` bytes fit under this process's memory limit now; return the
    bytes left (see :func:`_memory_left`; None where unknown).

    Dask itself spills a worker's data to disk only once the process is past its spill
    threshold, and a dense S reaches the nanny's limit faster than that: the worker
    would be killed half way and the task retried elsewhere, to the same end. Nothing
    is spilled here (a worker's spill buffer is Dask's own business); where the room
    is short the gathered step stops at once, before S is allocated, with the figures.

    Parameters
    ----------
    need : int
        Bytes the next allocation needs, headroom included.

    Returns
    -------
    int or None

    Raises
    ------
    WorkerMemoryError
        (a MemoryError) fewer than ``need`` bytes are left: the message gives the need,
        what is left, the worker's memory limit (where known) and what the process
        holds now, and what to do.
    """
    left = _memory_left()
    if left is None or left >= need:
        return left
    limit, resident = _memory_limit(), _resident_bytes()
    raise WorkerMemoryError(_short_of_memory("this step", need, left, limit, resident),
                            need=need, left=left, limit=limit, resident=resident)


def _short_of_memory(what, need, left, limit, resident, held=""):
    """The message of a :class:`WorkerMemoryError`: the figures, then what to do."""
    if limit:
        where = (f"only {_size(left)} are left under this worker's memory limit of {_size(limit)} (a worker is "
                 f"stopped at 95% of its limit)")
    else:
        where = f"only {_size(left)} of memory are available on this machine"
    holds = f"; the process holds {_size(resident)} now{held}" if resident is not None else ""
    return (f"{what} needs {_size(need)} on one worker, headroom included, but {where}{holds}: give the workers "
            f"more memory (a larger memory limit per worker, or fewer workers or threads sharing one machine's "
            f"memory)")


def _with_figures(message, held):
    """``message`` (the eigenvectors do not fit) with this worker's memory limit and what
    the process holds, before its advice."""
    limit, resident = _memory_limit(), _resident_bytes()
    figures = []
    if limit:
        figures.append(f"this worker's memory limit is {_size(limit)}")
    if resident is not None:
        figures.append(f"the process holds {_size(resident)} now, {_size(held)} of it the rows of Z and the "
                       f"previous factor of K*")
    if not figures:
        return message
    at = message.find(": give the workers more memory")
    extra = f" ({'; '.join(figures)})"
    return message[:at] + extra + message[at:] if at >= 0 else message + extra


def _held_bytes(*arrays):
    """Bytes of dense or sparse arrays (data, indices and pointers of a sparse one)."""
    total = 0
    for a in arrays:
        if a is None:
            continue
        if sp.issparse(a):
            total += sum(getattr(a, k).nbytes for k in ("data", "indices", "indptr") if hasattr(a, k))
        else:
            total += getattr(a, "nbytes", 0)
    return total


def _kstar_step(block_results, prev_part, driver, n_threads, max_threads=None, with_change=False, prev_factor=None):
    """Gathered step: S = (Z + Z^T)/2 -> positive eigenpairs -> W_t (Theorem 2).

    Returns ``(W_t, part)`` with the sums of the row blocks' partial delta and norms,
    ``||K*_t||_F^2`` and the rank. The change ``||K*_t - K*_{t-1}||_F`` is a separate
    task (:func:`_kstar_summary`), so that W_{t-1} need not be in memory beside S;
    ``with_change=True`` computes it here from ``prev_factor`` (W_{t-1}, or None at the
    first step), and ``part`` is the whole summary.
    ``prev_part`` (the previous step's, or None) carries the rank from which
    ``driver="auto"`` picks the route (:func:`_choose_driver`).
    """
    z = [r[0] for r in block_results]  # S is built from the blocks: no stacked copy
    part = {
        "delta": np.sum([r[1][0] for r in block_results], axis=0),
        "gamma_sq_norm": float(sum(r[1][1] for r in block_results)),
        "z_fro_sq": float(sum(r[1][2] for r in block_results)),
    }
    n = z[0].shape[1]
    spec = steps.eigen_spec(driver)
    if spec.device == "cuda":
        out = _kstar_step_device(z, part, n, prev_factor, prev_part, with_change, n_threads, max_threads)
        if out is not None:
            return out
    route = _choose_driver(spec, n, prev_part)
    rank = int(prev_part["rank"]) if prev_part and "rank" in prev_part else n // 2

    headroom = _headroom()
    used = {}

    def memory_left(dense_route):
        """Room for the "mrrr" route's dense S, checked just before S is built (also when
        "lanczos", which needs far less, falls back to it); the bytes left then, less the
        headroom, against which psd_factor checks the eigenvectors once their number (the
        rank of K*) is known."""
        used["driver"] = dense_route  # (psd_factor sets the route that gave the result)
        left = _make_room(_dense_s_bytes(n) + headroom)
        return None if left is None else left - headroom

    threads = blas_threads(n_threads, max_threads, n)
    with limit_blas(threads):
        t1 = time.perf_counter()
        try:
            if route != "mrrr":
                _make_room(_route_bytes(route, n, rank) + headroom)
            factor, lam = steps.psd_factor(z, driver=route, memory_left=memory_left, rank_hint=rank, used=used,
                                           precision=spec.precision)
        except WorkerMemoryError as exc:
            # Returned, not raised (as below); the message with what this step holds.
            held = _held_bytes(*z, prev_factor)
            which = used.get("driver", route)
            what = (f"the gathered step of the fit (the dense S = (Z + Z^T)/2 at n = {n}, eigen route 'mrrr')"
                    if which == "mrrr" else
                    f"the gathered step of the fit (S = (Z + Z^T)/2 at n = {n} and the eigenvectors of K*, eigen "
                    f"route {which!r}, rank about {rank})")
            holds = (f", {_size(held)} of it the rows of Z"
                     + (" and the previous factor of K*" if prev_factor is not None else ""))
            return None, dict(part, error=_short_of_memory(what, exc.need, exc.left, exc.limit, exc.resident, holds))
        except steps.EigenvectorMemoryError as exc:
            # Returned, not raised: Dask would retry a raised error on every worker,
            # recomputing S each time, before the same message reached the caller.
            return None, dict(part, error=_with_figures(str(exc), _held_bytes(*z, prev_factor)))
        t2 = time.perf_counter()
    part.update(kstar_sq=float(np.sum(lam**2)), rank=int(lam.size), seconds_eig=t2 - t1, threads=threads,
                driver=used.get("driver", route))
    if with_change:
        with limit_blas(threads):
            part["kstar_change"] = _kstar_change(part, factor, prev_factor, prev_part)
    return factor, part


def _kstar_step_device(z, part, n, prev_factor, prev_part, with_change, n_threads, max_threads):
    """The gathered step on the device (``eig_device="cuda"``, :mod:`lswmkc_dask.gpu`).

    S is built here on the host, copied to the device once, and only the ``n x r``
    factor comes back. Returns ``(W_t, part)`` as :func:`_kstar_step`, or None where the
    device cannot take this n (memory, solver limit): then a
    :class:`lswmkc_dask.gpu.DeviceFallbackWarning` says why, ``part["device_fallback"]``
    holds the reason, and the caller runs the CPU route.
    """
    xp = gpu.namespace("cuda")
    why = gpu.device_refusal(n, xp)
    if why:
        gpu.fallback_warning(f"the gathered step runs on the CPU: {why}")
        part["device_fallback"] = why
        return None
    t1 = time.perf_counter()
    factor, lam = gpu.positive_factor(steps.dense_lower_s(z), xp)
    t2 = time.perf_counter()
    threads = blas_threads(n_threads, max_threads, n)
    part.update(kstar_sq=float(np.sum(lam**2)), rank=int(lam.size), seconds_eig=t2 - t1, threads=threads,
                driver="cuda")
    if with_change:
        with limit_blas(threads):
            part["kstar_change"] = _kstar_change(part, factor, prev_factor, prev_part)
    return factor, part


def _kstar_summary(part, factor, prev_factor, prev_part, n_threads, max_threads=None):
    """The iteration's summary: ``part`` and ``||K*_t - K*_{t-1}||_F`` from the factors.

    ``||W_t W_t^T - W_{t-1} W_{t-1}^T||_F^2 = ||K*_t||^2 + ||K*_{t-1}||^2 - 2 ||W_t^T
    W_{t-1}||_F^2``, with ``W_t^T W_{t-1}`` formed a panel of columns at a time.
    """
    summary = dict(part)
    if "error" in part:
        return summary
    if prev_factor is None:  # t = 1: nothing to compare with (no thread count to choose)
        summary["kstar_change"] = math.nan
        return summary
    with limit_blas(blas_threads(n_threads, max_threads, factor.shape[0])):
        summary["kstar_change"] = _kstar_change(part, factor, prev_factor, prev_part)
    return summary


def _kstar_change(part, factor, prev_factor, prev_part):
    """``||W_t W_t^T - W_{t-1} W_{t-1}^T||_F`` (NaN without W_{t-1}); see :func:`_kstar_summary`."""
    if prev_factor is None:
        return math.nan
    cross = 0.0
    for c0 in range(0, prev_factor.shape[1], 1024):
        cross += float(np.sum(np.square(factor.T @ prev_factor[:, c0 : c0 + 1024])))
    return math.sqrt(max(part["kstar_sq"] + prev_part["kstar_sq"] - 2.0 * cross, 0.0))


def _factor_from_blocks(block_results, prev_rank, driver, n_threads, max_threads=None):
    """W_t from the checkpointed rows of Z_t (a restart after a lost worker).

    The route follows the rule of :func:`_kstar_step` with the rank of W_{t-1}, so the
    restored factor is the one the undisturbed fit computed.
    """
    z = [r[0] for r in block_results]
    n = z[0].shape[1]
    spec = steps.eigen_spec(driver)
    if spec.device == "cuda":

        xp = gpu.namespace("cuda")
        if not gpu.device_refusal(n, xp):
            return gpu.positive_factor(steps.dense_lower_s(z), xp)[0]
    route = _choose_driver(spec, n, None if prev_rank is None else {"rank": prev_rank})
    with limit_blas(blas_threads(n_threads, max_threads, n)):
        factor, _ = steps.psd_factor(z, driver=route, rank_hint=prev_rank, precision=spec.precision)
    return factor


def _stack_rows(parts):
    return sp.vstack(parts, format="csr")


def lost_errors():
    """Exceptions meaning that data on a worker was lost and cannot be recomputed.

    After these :func:`iterate` restarts from its last checkpoint. ``distributed`` is
    not imported for this (an in-process fit never raises them).
    """
    import concurrent.futures

    errors = [concurrent.futures.CancelledError]
    if "distributed" in sys.modules:
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        errors += [FutureCancelledError, KilledWorker]
    return tuple(errors)


# ---------------------------------------------------------------------------- runners
class LocalRunner:
    """Runs the steps in this process; handles are the values themselves."""

    #: Steps run eagerly, so the loop must not submit work ahead of the stop rule.
    lookahead = False
    #: The gathered step computes the change of K* itself (all is in this process).
    fused_summary = True

    def map(self, fn, per_block, *shared):
        """Apply ``fn(*block_args, *shared)`` to every block."""
        return [fn(*args, *shared) for args in per_block]

    def submit(self, fn, *args, priority=0, resources=None):
        """Run one (gathered) step (``priority`` and ``resources`` matter only on a cluster)."""
        return fn(*args)

    def split(self, handle, n):
        """The ``n`` items of a tuple-valued handle."""
        return [handle[i] for i in range(n)]

    def fetch(self, handles):
        """Values of handles (identity here)."""
        return handles

    def scatter(self, values):
        """Handles of values (identity here)."""
        return values

    def release(self, *handles):
        """Nothing to release in-process."""

    def cancel(self, *handles):
        """Nothing runs ahead in-process."""


class DaskRunner:
    """Runs the steps as tasks on a Dask ``distributed.Client``.

    Parameters
    ----------
    client : distributed.Client
    retries : int
        Retries of each task when its worker dies.
    kernels_in_memory : bool
        The kernels are held in worker memory (they fit with room to spare). Then
        (1) each step runs inside :func:`lswmkc_dask.cluster.array_malloc`, so that
        the worker's allocator reuses the step's freed temporaries instead of mapping
        fresh pages for each (Dask's nanny fixes glibc's thresholds at 64 KiB); and
        (2) the gathered step also computes the change of K*, with W_{t-1} in memory
        beside S, instead of a task of its own that delays a row block of the next
        iteration (:attr:`fused_summary`). Out of core both are left off: memory held
        back by the allocator made a worker spill (n = 12000: peak 1725 vs 1473 MiB,
        7.8 vs 4.1 x the stack read), and W_{t-1} beside S is memory S needs.
    """

    #: Submit iteration t + 1 before the client has read iteration t's summary, so
    #: that the client's round trip is off the critical path (cancelled on stop).
    lookahead = True

    def __init__(self, client, retries=3, kernels_in_memory=False):
        self.client = client
        self.retries = retries
        self.kernels_in_memory = kernels_in_memory

    @property
    def fused_summary(self):
        """Whether the gathered step computes ``||K*_t - K*_{t-1}||_F`` itself."""
        return self.kernels_in_memory

    def _submit(self, fn, args, priority=0, resources=None):
        options = {"pure": False, "retries": self.retries, "priority": priority}
        if resources:  # e.g. {"GPU": 1}: only workers that declare it run the task
            options["resources"] = resources
        reads = any(isinstance(a, BlockRef) for a in args)  # the task reads the store: data errors not retried
        if not self.kernels_in_memory and not reads:
            return self.client.submit(fn, *args, **options)
        # The key keeps the step's name (dashboards; cluster.raise_if_out_of_memory).
        key = f"{getattr(fn, '__name__', 'step')}-{uuid.uuid4().hex}"
        if reads:
            step = functools.partial(call_with_array_malloc, fn) if self.kernels_in_memory else fn
            return _submit_refusing(self.client, step, args, key=key, retries=self.retries, priority=priority)
        return self.client.submit(call_with_array_malloc, fn, *args, key=key, **options)

    def map(self, fn, per_block, *shared):
        return [self._submit(fn, (*args, *shared)) for args in per_block]

    def submit(self, fn, *args, priority=0, resources=None):
        """Submit one task; ``resources`` (e.g. ``{"GPU": 1}``) restricts the workers that may run it."""
        return self._submit(fn, args, priority, resources)

    def split(self, handle, n):
        return [self.client.submit(operator.getitem, handle, i, retries=self.retries) for i in range(n)]

    def fetch(self, handles):
        return self.client.gather(handles)

    def scatter(self, values):
        """Futures of client-held values (a restart's checkpoint)."""
        return self.client.scatter(values, hash=False)

    def release(self, *handles):
        """Drop futures the loop no longer needs (anything else is ignored)."""
        for f in self._futures(handles):
            f.release()

    def cancel(self, *handles):
        """Cancel work submitted ahead that is no longer wanted."""
        futures = self._futures(handles)
        if futures:
            self.client.cancel(futures)

    @staticmethod
    def _futures(handles):
        from distributed import Future

        out = []
        for h in handles:
            for f in h if isinstance(h, (list, tuple)) else [h]:
                if isinstance(f, Future):
                    out.append(f)
        return out


# ---------------------------------------------------------------- block planning
#: Rows per block of an in-process fit (and of a whole fit inside one task): keeps the
#: per-block temporaries (a few ``rows x n`` arrays) cache-sized instead of ``n x n``
#: (measured 1.28 s instead of 1.53 s for the non-eigensolver work of 6 Handwritten
#: iterations).
LOCAL_BLOCK_ROWS = 256


def row_views(kernels, block_rows=LOCAL_BLOCK_ROWS):
    """Views of an in-memory kernel stack in row blocks, for :class:`LocalRunner`.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    block_rows : int

    Returns
    -------
    blocks : list of ndarray of shape (m, b, n)
        Views (no copies).
    starts : list of int
    """
    n = kernels.shape[1]
    starts = list(range(0, n, block_rows))
    return [kernels[:, s : s + block_rows] for s in starts], starts


#: Largest row block held in a worker's memory for a fit (the 32-256 MB guidance).
MAX_BLOCK_BYTES = 256 * 2**20


def solver_block_rows(store, n_workers, cache=True):
    """Rows per solver block: one block per worker, in whole store chunks.

    Blocks held in worker memory are made as large as possible (few tasks per
    iteration: measured 0.62 s vs 0.74 s per iteration on Handwritten with 2 blocks
    instead of 6) but at most 256 MiB, and their number is a multiple of the number of
    workers so that every worker gets the same share. Blocks read from the store in
    every iteration (``cache=False``) keep the store's chunks.

    Parameters
    ----------
    store : KernelStore
    n_workers : int
    cache : bool

    Returns
    -------
    int
    """
    chunk = store.block_rows
    if not cache:
        return chunk
    row_bytes = store.itemsize * store.n_kernels * store.n_samples
    per_worker = math.ceil(store.n_samples / max(1, n_workers))
    rows = per_worker
    while rows * row_bytes > MAX_BLOCK_BYTES and rows > chunk:
        rows = math.ceil(rows / 2)
    return max(chunk, math.ceil(rows / chunk) * chunk)


def blocks_in_memory(store, cache):
    """Whether :func:`kernel_blocks` holds the row blocks in worker memory.

    Parameters
    ----------
    store : KernelStore
    cache : bool
        As given to :func:`kernel_blocks` (e.g. from ``plan_memory``).

    Returns
    -------
    bool
        True when asked to cache them, or when the store is in memory (its blocks are
        always scattered to the workers); False when they are read from the store in
        every iteration.
    """
    return bool(cache or store.in_memory)


def kernel_blocks(client, store, block_rows=None, cache=True):
    """Row-block handles of a store for the Dask runner.

    Parameters
    ----------
    client : distributed.Client
    store : KernelStore
    block_rows : int, optional
        Rows per block (default: :func:`solver_block_rows`).
    cache : bool
        For a store on disk/URL: read each block once into worker memory (futures
        that Dask recomputes from the store if a worker is lost) instead of reading it
        from the store in every iteration (:class:`BlockRef`, for stacks larger than
        the cluster's memory). In-memory stores are always scattered to the workers.

    Returns
    -------
    blocks : list
        Futures or :class:`BlockRef`.
    starts : list of int
    """
    workers = sorted(client.scheduler_info()["workers"])
    cache = blocks_in_memory(store, cache)
    bounds = store.blocks(block_rows or solver_block_rows(store, len(workers), cache))
    starts = [s for s, _ in bounds]
    if store.in_memory:
        return client.scatter([store.read_rows(s, e) for s, e in bounds], hash=False), starts
    if cache:
        # No worker pins: the scheduler spreads these root tasks itself, and a pin that
        # outlives its worker (all workers restarted) left tasks waiting forever.
        # A damaged chunk fails its read at once (submit_read: data errors are not retried).
        futures = [submit_read(client, store.location, s, e) for s, e in bounds]
        return futures, starts
    return [BlockRef(store.location, s, e) for s, e in bounds], starts



# ------------------------------------------------------------------------------ state
@dataclass
class InitState:
    """The alpha-free initialisation (docs/algorithm.md section 1), shared by a sweep.

    Attributes
    ----------
    starts : list of int
        First row of each block.
    gamma_blocks : list
        Handles of gamma per block.
    z_blocks : list
        Handles of the rows of Z0 per block (sparse).
    gamma : ndarray of shape (n,)
    delta : ndarray of shape (m,)
        ``Tr(K_p Z0^T)``.
    weights0 : ndarray of shape (m,)
        ``sqrt(1/m)``.
    """

    starts: list
    gamma_blocks: list
    z_blocks: list
    gamma: np.ndarray
    delta: np.ndarray
    weights0: np.ndarray


@dataclass
class FitResult:
    """What one LSWMKC fit returns.

    Attributes
    ----------
    alpha : float
    weights : ndarray of shape (m,)
        Kernel weights of the last iteration.
    n_iter : int
    objective : list of float
        Eq. (10) after each iteration.
    kstar_change : list of float
        ``||K*_t - K*_{t-1}||_F`` (NaN for t = 1, which the stop rule never reads).
    kstar_norm : float
        ``||K*||_F`` at the end.
    rank : list of int
        Number of positive eigenvalues of S per iteration.
    converged : bool
        Stopped by the tolerance rather than ``max_iter``.
    seconds : float
        Wall time of the iterations.
    z_blocks : list
        Handles of the final Z row blocks.
    factor : handle
        Handle of W with ``K* = W W^T``, shape (n, r).
    iteration_seconds : list of float
        Wall seconds of each iteration, seen from the client.
    eig_seconds : list of float
        Seconds of the eigendecomposition inside each gathered step.
    eig_threads : list of int
        BLAS threads it was given.
    eig_drivers : list of str
        The eigen route of each gathered step ("mrrr", "subset", "evd" or "lanczos").
    z_values : list
        The final rows of Z with their partial sums, held by the caller.
    recoveries : int
        Restarts after lost workers.
    snapshots : dict
        ``{t: (Z_t, W_t, omega_t)}`` at the iterations asked for
        (``iterate(snapshots=...)``): Z_t CSR of shape (n, n), W_t of shape (n, r_t)
        with K*_t = W_t W_t^T, omega_t (m,) the kernel weights that gave Z_t; at t = 0
        the initial graph Z0, None (K*_0 is the combined kernel K_w0, of full rank: no
        factor) and the initial weights sqrt(1/m).
    """

    alpha: float
    weights: np.ndarray
    n_iter: int
    objective: list
    kstar_change: list
    kstar_norm: float
    rank: list
    converged: bool
    seconds: float
    z_blocks: list = field(repr=False, default_factory=list)
    factor: object = field(repr=False, default=None)
    iteration_seconds: list = field(default_factory=list)
    eig_seconds: list = field(default_factory=list)
    eig_threads: list = field(default_factory=list)
    eig_drivers: list = field(default_factory=list)
    z_values: list = field(repr=False, default_factory=list)
    recoveries: int = 0
    snapshots: dict = field(repr=False, default_factory=dict)


def initialise(runner, kernel_blocks, starts, n_kernels, n_neighbors):
    """Alpha-free initialisation, Eqs. (25)-(28), one pass over the row blocks.

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
    kernel_blocks : list
        Handles (arrays, futures or :class:`BlockRef`) of the row blocks, shape (m, b, n).
    starts : list of int
        First row of each block.
    n_kernels : int
    n_neighbors : int

    Returns
    -------
    InitState
    """
    weights0 = np.full(n_kernels, math.sqrt(1.0 / n_kernels))
    results = runner.map(_init_block, list(zip(kernel_blocks, starts)), weights0, n_neighbors)
    parts = [runner.split(r, 3) for r in results]
    z_blocks = [p[0] for p in parts]
    gamma_blocks = [p[1] for p in parts]
    small = runner.fetch([p[2] for p in parts] + gamma_blocks)
    nb = len(starts)
    delta = np.sum(small[:nb], axis=0)
    gamma = np.concatenate(small[nb:])
    runner.release(results)
    if not np.any(delta) or not np.all(np.isfinite(delta)):  # Z0 = 0: omega (Eq. 12) undefined
        from .errors import KernelInputError

        runner.release(z_blocks, gamma_blocks)
        copies = runner.fetch(runner.submit(_copies_in_block, kernel_blocks[0], starts[0]))
        raise KernelInputError(_empty_graph_message(n_neighbors, copies))
    return InitState(list(starts), gamma_blocks, z_blocks, gamma, delta, weights0)


def with_gamma(runner, init, gamma="auto"):
    """``init`` with one scalar gamma for every sample (the paper's gamma ablation).

    The initial graph Z0 stays the learned one of Eqs. (25)-(27) (its c-neighbour
    construction is what sets each gamma_i); the scalar then replaces every gamma_i in
    the updates of Z (Eqs. 13-16, Theorem 1) and in the objective (Eq. 10).

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
    init : InitState
    gamma : "auto" or float
        "auto": ``init`` unchanged (the learned, per-sample gamma_i). A float > 0: that
        value for every sample.

    Returns
    -------
    InitState
        ``init`` itself for "auto", else a copy whose ``gamma`` and ``gamma_blocks``
        (new handles, sent once: n numbers) hold the scalar.

    Raises
    ------
    ValueError
        ``gamma`` is neither "auto" nor a finite number > 0.
    """
    if isinstance(gamma, str) and gamma == "auto":
        return init
    g = check_gamma(gamma)
    n = init.gamma.shape[0]
    bounds = [*init.starts, n]
    values = [np.full(bounds[i + 1] - bounds[i], g) for i in range(len(init.starts))]
    return replace(init, gamma_blocks=list(runner.scatter(values)), gamma=np.full(n, g))


def check_gamma(gamma):
    """``gamma`` as a float > 0, or "auto" (the learned per-sample gamma, Eqs. 25-27).

    Raises
    ------
    ValueError
        Neither "auto" nor a finite number > 0.
    """
    if isinstance(gamma, str):
        if gamma == "auto":
            return gamma
        raise ValueError(f"gamma must be 'auto' or a number > 0, got {gamma!r}")
    try:
        g = float(gamma)
    except (TypeError, ValueError):
        raise ValueError(f"gamma must be 'auto' or a number > 0, got {gamma!r}") from None
    if not math.isfinite(g) or g <= 0 or isinstance(gamma, bool):
        raise ValueError(f"gamma must be 'auto' or a number > 0, got {gamma!r}")
    return g


def _copies_in_block(kernels, start, limit=3):
    """Groups of identical samples (in every normalised kernel) among a block's rows."""
    k = _rows(kernels)
    b = k.shape[1]
    diag = k[:, np.arange(b), start + np.arange(b)]
    same = np.all(np.abs(k - diag[:, :, None]) <= 1e-9, axis=0)  # diag has the 1e-12 jitter
    groups, seen = [], set()
    for i in np.flatnonzero(same.sum(axis=1) > 1):
        if start + i in seen:
            continue
        group = np.flatnonzero(same[i]).tolist()
        seen.update(group)
        groups.append(group)
        if len(groups) == limit:
            break
    return groups


def _empty_graph_message(n_neighbors, groups):
    c = int(n_neighbors)
    msg = (
        f"the initial affinity graph Z0 is empty, so the kernel weights are undefined: for every sample, its "
        f"n_neighbors + 1 = {c + 1} nearest samples in the combined kernel are tied"
    )
    if groups:
        shown = "; ".join(
            f"samples {', '.join(map(str, g[:12]))}{' ...' if len(g) > 12 else ''} ({len(g)} copies)" for g in groups
        )
        fewest = min(len(g) for g in groups) - 1
        msg += (
            f". The input has duplicate samples, identical in every kernel: {shown}. Remove the duplicates, or "
            f"choose n_neighbors at least the number of other copies of a sample ({fewest} for the first groups)"
        )
    return msg


def should_stop(t, changes, kstar_norm, tol, min_iter, max_iter):
    """The reference stop rule (docs/algorithm.md section 2.5).

    Stop when ``t >= min_iter`` and ``|f_t - f_{t-1}| / ||K*_t||_F < tol``, or when
    ``t >= max_iter``.

    Returns
    -------
    (stop, converged) : tuple of bool
    """
    if t >= min_iter and len(changes) >= 2 and kstar_norm > 0:
        if abs(changes[-1] - changes[-2]) / kstar_norm < tol:
            return True, True
    return t >= max_iter, False


@dataclass
class _Step:
    """Handles of one submitted iteration."""

    blocks: list
    gathered: object
    factor: object
    part: object
    summary: object

    def handles(self):
        return (self.blocks, self.gathered, self.factor, self.part, self.summary)


def gathered_resources(eig_driver):
    """Worker resources of a gathered-step task: ``{"GPU": 1}`` for ``device="cuda"``."""
    return {"GPU": 1} if steps.eigen_spec(eig_driver).device == "cuda" else None


def _submit_step(runner, per_block, weights, prev, alpha, init, eig_driver, eig_threads, max_threads):
    factor = None if prev is None else prev.factor
    prev_part = None if prev is None else prev.part
    blocks = runner.map(_graph_block, per_block, weights, factor, float(alpha), init.weights0)
    resources = gathered_resources(eig_driver)
    if runner.fused_summary:
        # The change of K* inside the gathered step: no task of its own that takes a
        # core from a row block of t + 1 (measured 15-50 ms a step at n = 2000).
        gathered = runner.submit(_kstar_step, blocks, prev_part, eig_driver, eig_threads, max_threads, True, factor,
                                 resources=resources)
        new_factor, part = runner.split(gathered, 2)
        return _Step(blocks, gathered, new_factor, part, part)
    gathered = runner.submit(_kstar_step, blocks, prev_part, eig_driver, eig_threads, max_threads,
                             resources=resources)
    new_factor, part = runner.split(gathered, 2)
    # Before the row blocks of t + 1 where both are ready, so that it is not still
    # running (and taking a core) when the next gathered step starts.
    summary = runner.submit(_kstar_summary, part, new_factor, factor, prev_part, eig_threads, max_threads, priority=1)
    return _Step(blocks, gathered, new_factor, part, summary)


def iterate(
    runner,
    kernel_blocks,
    init,
    alpha,
    *,
    max_iter=101,
    min_iter=20,
    tol=1e-3,
    eig_driver="auto",
    eig_threads=None,
    max_threads=None,
    callback=None,
    recover=None,
    checkpoint_every=5,
    max_recoveries=5,
    snapshots=(),
):
    """Run the LSWMKC iterations for one alpha from a shared initialisation.

    Parameters
    ----------
    runner : LocalRunner or DaskRunner
    kernel_blocks : list
        Row-block handles, as for :func:`initialise`.
    init : InitState
    alpha : float
        Balance hyper-parameter (``>= 0``).
    max_iter : int
        Iteration cap. The reference runs while ``t <= 100``, i.e. 101 at most.
    min_iter : int
        The rule is not tested before this iteration (reference: 20).
    tol : float
        Tolerance on ``|f_t - f_{t-1}| / ||K*_t||_F``.
    eig_driver : {"auto", "mrrr", "subset", "evd", "lanczos"} or lswmkc_dask.steps.EigenSpec
        See :func:`lswmkc_dask.steps.psd_factor`; "auto" picks the route each
        iteration from the previous rank of K* and the memory left
        (:func:`_choose_driver`). An :class:`~lswmkc_dask.steps.EigenSpec` adds the
        precision and the device (``device="cuda"``: the gathered step is submitted
        with ``resources={"GPU": 1}``).
    eig_threads : int, optional
        BLAS threads for the gathered eigendecomposition (default: the cores free on
        the machine that runs it, :func:`lswmkc_dask.cluster.free_cores`).
    max_threads : int, optional
        Upper bound of that default (a fit's share of a machine in a sweep).
    callback : callable, optional
        ``callback(t, objective, change, seconds)`` after each iteration, and
        ``callback(t, nan, nan, nan, restarted=message)`` after a restart.
    snapshots : sequence of int
        Iterations whose Z_t and K*_t factor are kept (0: the initial graph), returned
        in :attr:`FitResult.snapshots`; never a dense n x n array.
    recover : callable, optional
        ``recover(exc) -> (kernel_blocks, gamma_blocks)``: new handles of the row blocks
        after a worker was lost with data nothing can recompute (scattered blocks,
        released lineage). Given, the loop keeps the rows of Z and the summary every
        ``checkpoint_every`` iterations on the caller (O(nnz(Z)), not n x n) and, on a
        loss, resumes from the last checkpoint: W is recomputed from that Z, so the fit
        ends with the result an undisturbed run gives. None: a loss is raised.
    checkpoint_every : int
        Iterations between checkpoints.
    max_recoveries : int
        Restarts before the loss is raised.

    Returns
    -------
    FitResult

    Raises
    ------
    concurrent.futures.CancelledError, distributed.scheduler.KilledWorker
        A lost worker without ``recover``, or more than ``max_recoveries`` times.
    """
    t0 = time.perf_counter()
    objective, changes, ranks, its, eig_secs, threads_used, drivers = [], [], [], [], [], [], []
    per_block = [[(kb, s, g) for kb, s, g in zip(kernel_blocks, init.starts, init.gamma_blocks)]]
    submit = lambda weights, prev: _submit_step(  # noqa: E731
        runner, per_block[0], weights, prev, alpha, init, eig_driver, eig_threads, max_threads
    )
    weights = steps.kernel_weights(init.delta)
    current = submit(weights, None)
    # The last checkpoint: (t, rows of Z_t with their partial sums, summary of t, omega_t).
    checkpoint = (0, None, None, weights)
    recoveries = 0
    wanted = {int(s) for s in snapshots}
    snaps = {}
    if 0 in wanted:  # Z0 (K*_0 = K_w0 has no low-rank factor)
        snaps[0] = (gather_affinity(runner, init.z_blocks), None, np.asarray(init.weights0))
    t = 0
    ti = time.perf_counter()
    while True:
        t += 1
        ahead = None
        try:
            if runner.lookahead and t < max_iter:
                # Its tasks derive omega_{t+1} from this step's summary themselves.
                ahead = submit(current.part, current)
            summary = runner.fetch(current.summary)
            if "error" in summary:  # the gathered step could not hold the eigenvectors
                if ahead is not None:
                    _cancel_quietly(runner, ahead)
                raise MemoryError(summary["error"])
            stop, converged = should_stop(
                t, changes + [summary["kstar_change"]], math.sqrt(summary["kstar_sq"]), tol, min_iter, max_iter
            )
            if stop or (recover is not None and t % checkpoint_every == 0):
                z_values = runner.fetch(current.blocks)
        except lost_errors() as exc:
            if recover is None or recoveries >= max_recoveries:
                raise
            recoveries += 1
            for step in (ahead, current):
                if step is not None:
                    _cancel_quietly(runner, step)
            kernel_blocks, gamma_blocks = recover(exc)
            per_block[0] = [(kb, s, g) for kb, s, g in zip(kernel_blocks, init.starts, gamma_blocks)]
            t, z_ck, summary_ck, weights = checkpoint
            for hist in (objective, changes, ranks, its, eig_secs, threads_used, drivers):
                del hist[t:]
            for later in [s for s in snaps if s > t]:
                del snaps[later]
            if z_ck is None:
                current = submit(weights, None)
            else:
                blocks = runner.scatter(z_ck)
                prev_rank = ranks[t - 2] if t >= 2 else None
                factor = runner.submit(_factor_from_blocks, blocks, prev_rank, eig_driver, eig_threads, max_threads,
                                       resources=gathered_resources(eig_driver))
                weights = steps.kernel_weights(summary_ck["delta"])
                current = submit(weights, _Step(blocks, None, factor, summary_ck, summary_ck))
            if callback is not None:
                callback(t, math.nan, math.nan, math.nan, restarted=f"worker lost ({type(exc).__name__}); "
                         f"resumed from iteration {t}")
            ti = time.perf_counter()
            continue
        obj = steps.objective(
            weights, summary["delta"], summary["gamma_sq_norm"], summary["z_fro_sq"], summary["kstar_sq"], alpha
        )
        objective.append(obj)
        changes.append(summary["kstar_change"])
        ranks.append(summary["rank"])
        eig_secs.append(summary["seconds_eig"])
        threads_used.append(summary["threads"])
        drivers.append(summary["driver"])
        now = time.perf_counter()
        its.append(now - ti)
        ti = now
        if t in wanted:  # the rows of Z_t (sparse) and the factor of K*_t: O(nnz + n r) here
            snaps[t] = (gather_affinity(runner, [r[0] for r in runner.fetch(current.blocks)]),
                        np.asarray(runner.fetch(current.factor)), np.asarray(weights))
        if callback is not None:
            callback(t, obj, summary["kstar_change"], its[-1])
        if stop:
            if ahead is not None:
                runner.cancel(*ahead.handles())
            break
        next_weights = steps.kernel_weights(summary["delta"])
        if recover is not None and t % checkpoint_every == 0:
            checkpoint = (t, z_values, summary, next_weights)
        if ahead is None:
            ahead = submit(next_weights, current)
        runner.release(*current.handles())
        current, weights = ahead, next_weights
    runner.release(current.blocks, current.gathered, current.part, current.summary)
    return FitResult(
        alpha=float(alpha),
        weights=weights,
        n_iter=t,
        objective=objective,
        kstar_change=changes,
        kstar_norm=math.sqrt(summary["kstar_sq"]),
        rank=ranks,
        converged=converged,
        seconds=time.perf_counter() - t0,
        z_blocks=[r[0] for r in z_values],
        factor=current.factor,
        iteration_seconds=its,
        eig_seconds=eig_secs,
        eig_threads=threads_used,
        eig_drivers=drivers,
        z_values=z_values,
        recoveries=recoveries,
        snapshots=snaps,
    )


def _cancel_quietly(runner, step):
    try:
        runner.cancel(*step.handles())
    except Exception:  # noqa: BLE001 - the cluster may be gone; nothing to keep
        pass


def refactor(runner, result, eig_driver="auto", eig_threads=None, max_threads=None):
    """A new handle of W (K* = W W^T) from the final Z held in ``result`` (after a loss)."""
    prev_rank = result.rank[-2] if len(result.rank) >= 2 else None
    blocks = runner.scatter(result.z_values)
    return runner.submit(_factor_from_blocks, blocks, prev_rank, eig_driver, eig_threads, max_threads,
                         resources=gathered_resources(eig_driver))


def gather_affinity(runner, z_blocks):
    """The affinity graph Z as a CSR matrix of shape (n, n) on the caller.

    Z is sparse (each row lives on the simplex with few non-zeros), so this is
    ``O(nnz)`` memory, not ``n x n``. ``z_blocks`` are handles or the rows themselves.
    """
    if all(sp.issparse(z) for z in z_blocks):
        return _stack_rows(z_blocks)
    return runner.fetch(runner.submit(_stack_rows, z_blocks))

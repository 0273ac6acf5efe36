"""Where the row-block steps run: two runners behind one small protocol, and block planning.

The loop (:mod:`lswmkc_dask.engine.solver`) is written once against a *runner*:
``map(fn, per_block, *shared)`` (one task per row block), ``submit(fn, *args, priority=0,
resources=None)`` (one task: the gathered step, ``{"GPU": 1}`` routes it), ``split``,
``fetch``, ``scatter``, ``release`` and ``cancel``. :class:`LocalRunner` calls the
functions in this process (handles are the values); :class:`DaskRunner` submits them to
a client (handles are futures, which stay on the workers); a runner with its own
``submit_step`` runs each iteration's step itself
(:class:`lswmkc_dask.engine.device_fit.DeviceRunner`, the whole fit on one device). :func:`place_blocks` plans
the workers' memory and places the kernel store's row blocks for a fit or a grid.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import KernelInputError
from ..io.store import read_store_rows
from .allocator import call_with_array_malloc
from .scheduler import workers_of

if TYPE_CHECKING:
    from ..io.inputs import KernelStack


@dataclass(frozen=True)
class BlockRef:
    """A row block of a kernel store, read inside the task that needs it.

    Parameters
    ----------
    location : str or zarr store
        Path or URL of the store (:attr:`KernelStore.location`).
    start, stop : int
        Row range.
    """

    location: Any
    start: int
    stop: int

    def read(self):
        """Rows ``start:stop`` of every kernel, shape (m, b, n)."""
        return read_store_rows(self.location, self.start, self.stop)


def read_rows(kernels):
    """The rows of a row block: a :class:`BlockRef` read from its store, else ``kernels`` as given."""
    return kernels.read() if isinstance(kernels, BlockRef) else kernels


# ------------------------------------------------------- reads: data errors not retried
class _Refused:
    """A :class:`KernelInputError` caught in a reading task, returned as its result: damaged
    kernels are a data error, which Dask's ``retries`` would read again four times.
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


def submit_read(client: Any, location: Any, start: int, stop: int, retries: int = 3) -> Any:
    """Read rows of a kernel store on a Dask worker: a future of :func:`read_store_rows`.

    Parameters
    ----------
    client : distributed.Client
    location : str or zarr store
        Path or URL of the store (:attr:`KernelStore.location`).
    start, stop : int
        Row range.
    retries : int
        Retries of a read that fails otherwise than on damaged kernels (an object
        store's I/O error).

    Returns
    -------
    distributed.Future
        Of the rows, shape (m, stop - start, n). Its result raises
        :class:`KernelInputError` (the store, kernel(s) and rows named) after ONE read;
        rows lost with a worker are read again.
    """
    return _submit_refusing(client, read_store_rows, (location, start, stop), retries=retries)


def stack_rows(parts):
    """Sparse row blocks stacked into one CSR matrix, in order (``scipy.sparse.vstack``)."""
    return sp.vstack(parts, format="csr")


def lost_errors():
    """Exceptions meaning that data on a worker was lost and cannot be recomputed (after
    them :func:`lswmkc_dask.engine.solver.iterate` restarts from its last checkpoint).
    """
    import concurrent.futures

    errors: list[type[BaseException]] = [concurrent.futures.CancelledError]
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
        The kernels are held in worker memory. Then each step runs inside
        :func:`lswmkc_dask.engine.allocator.array_malloc` (the worker's allocator reuses
        freed temporaries), and the gathered step also computes the change of K* with
        W_{t-1} beside S (:attr:`fused_summary`). Out of core both are off: memory held
        back by the allocator made a worker spill (n = 12000: peak 1725 vs 1473 MiB), and
        W_{t-1} beside S is memory S needs.
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
        """``fn(block, *shared)`` for every row block, as tasks."""
        return [self._submit(fn, (*args, *shared)) for args in per_block]

    def submit(self, fn, *args, priority=0, resources=None):
        """Submit one task; ``resources`` (e.g. ``{"GPU": 1}``) restricts the workers that may run it."""
        return self._submit(fn, args, priority, resources)

    def split(self, handle, n):
        """Futures of the ``n`` items of a tuple result."""
        return [self.client.submit(operator.getitem, handle, i, retries=self.retries) for i in range(n)]

    def fetch(self, handles):
        """The results, brought to the client."""
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

        flat = (f for h in handles for f in (h if isinstance(h, (list, tuple)) else [h]))
        return [f for f in flat if isinstance(f, Future)]


# ---------------------------------------------------------------- block planning
#: Rows per block of an in-process fit (and of a whole fit inside one task): keeps the
#: per-block temporaries (a few ``rows x n`` arrays) cache-sized instead of ``n x n``
#: (measured 1.28 s instead of 1.53 s for the non-eigensolver work of 6 Handwritten
#: iterations).
LOCAL_BLOCK_ROWS = 256


def row_views(kernels: Any, block_rows: int = LOCAL_BLOCK_ROWS) -> tuple[list[np.ndarray], list[int]]:
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


def solver_block_rows(store: KernelStack, n_workers: int, cache: bool = True) -> int:
    """Rows per solver block: one block per worker, in whole store chunks.

    Blocks held in worker memory are as large as possible (few tasks per iteration:
    0.62 s vs 0.74 s per iteration on Handwritten with 2 blocks instead of 6) but at most
    :data:`MAX_BLOCK_BYTES`, a multiple of the workers in number; blocks read from the
    store in every iteration (``cache=False``) keep the store's chunks.

    Parameters
    ----------
    store : KernelStack
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


def kernel_blocks(
    client: Any,
    store: KernelStack,
    block_rows: int | None = None,
    cache: bool = True,
) -> tuple[list[Any], list[int]]:
    """Row-block handles of a store for the Dask runner.

    Parameters
    ----------
    client : distributed.Client
    store : KernelStack
    block_rows : int, optional
        Rows per block (default: :func:`solver_block_rows`).
    cache : bool
        For a store on disk/URL: read each block once into worker memory (futures
        that Dask recomputes from the store if a worker is lost) instead of reading it
        from the store in every iteration (:class:`BlockRef`). Kernels in memory (an
        ArrayStack) are always scattered to the workers.

    Returns
    -------
    blocks : list
        Futures or :class:`BlockRef`.
    starts : list of int
    """
    workers = sorted(workers_of(client))
    cache = bool(cache or store.in_memory)
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


#: Part of the workers' memory in all that cached kernel blocks may take ("auto").
CACHE_MAX_FRACTION = 0.5


def plan_memory(client: Any, store: KernelStack, cache_kernels: str | bool = "auto") -> bool:
    """Check the workers' memory before a fit; decide whether to cache the kernels.

    The gathered step holds the dense S (``8 n^2`` bytes), then half of it beside the
    eigenvectors of K* (``8 n r``, r measured 10-47% of n) on ONE worker: a fit is refused
    up front where no worker's memory limit holds that peak at rank n/2 with 25%
    headroom; a larger rank is refused by the gathered step before the eigenvectors are
    allocated (:func:`lswmkc_dask.core.eigen.psd_factor`).

    Parameters
    ----------
    client : distributed.Client
    store : KernelStack
    cache_kernels : bool or "auto"

    Returns
    -------
    bool
        Whether to keep the row blocks in worker memory: as asked, or ("auto") while
        the stack is at most :data:`CACHE_MAX_FRACTION` of the workers' memory in all.

    Raises
    ------
    MemoryError
        The largest worker memory limit is below the gathered step's need, with the
        figures and what to do.
    """
    limits = [w.get("memory_limit") or 0 for w in workers_of(client).values()]
    n, m = store.n_samples, store.n_kernels
    stack = store.itemsize * m * n * n
    need = 8 * n * n  # the peak at rank n/2
    known = [x for x in limits if x]
    if known and max(known) < 1.25 * need:
        raise MemoryError(
            f"the gathered eigendecomposition needs at least {need / 2**30:.2f} GiB on one worker at n = {n} "
            f"(the dense S, n^2 x 8 bytes, then half of it and the eigenvectors of K* at rank n/2), "
            f"{1.25 * need / 2**30:.2f} GiB with headroom, but the largest worker memory limit is "
            f"{max(known) / 2**30:.2f} GiB: start workers with more memory (dask worker --memory-limit)"
        )
    if cache_kernels != "auto":
        return bool(cache_kernels)
    if len(known) < len(limits):  # some worker without a limit
        return True
    return stack <= CACHE_MAX_FRACTION * sum(known)


def place_blocks(client: Any, store: KernelStack, block_rows: int | None = None,
                 cache_kernels: str | bool = "auto") -> tuple[DaskRunner, list[Any], list[int], bool]:
    """The memory plan, the Dask runner and the placed row blocks of a fit (or a grid) on ``client``.

    Parameters
    ----------
    client : distributed.Client
    store : KernelStack
    block_rows : int, optional
        As :func:`kernel_blocks`.
    cache_kernels : bool or "auto"
        As :func:`plan_memory`.

    Returns
    -------
    runner : DaskRunner
        Its ``kernels_in_memory`` set where the blocks are held in worker memory.
    blocks, starts
        As :func:`kernel_blocks`.
    cache : bool
        :func:`plan_memory`'s answer.

    Raises
    ------
    MemoryError
        As :func:`plan_memory`.
    """
    cache = plan_memory(client, store, cache_kernels)
    runner = DaskRunner(client, kernels_in_memory=bool(cache or store.in_memory))
    blocks, starts = kernel_blocks(client, store, block_rows, cache)
    return runner, blocks, starts, cache

"""Memory of the process a step runs in: what is left under a Dask worker's limit.

The gathered step's dense S can reach the nanny's limit (95%) before Dask spills: the
step checks the room before it allocates (:func:`make_room`) and, where it is short,
stops at once with the figures (:class:`WorkerMemoryError`).
"""

from __future__ import annotations

import dataclasses
import sys

import psutil
import scipy.sparse as sp

from ..errors import WorkerMemoryError
from . import gpu


def _memory_limit():
    """The memory limit of this Dask worker in bytes, or None (no limit, or not on a worker)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker().memory_manager.memory_limit or None
    except (ValueError, AttributeError):  # not in a worker
        return None


def _resident_bytes():
    """Resident memory of this process (bytes)."""
    return int(psutil.Process().memory_info().rss)


def memory_left():
    """Bytes this process may still allocate before it is stopped: 95% of a Dask worker's
    memory limit less the resident memory, else the system's available memory.
    """
    limit = _memory_limit()
    if limit:
        return int(0.95 * limit) - _resident_bytes()
    return int(psutil.virtual_memory().available)


#: Bytes kept free beside the eigenvectors for the back-transformation's temporaries
#: (at most a tenth of a worker's memory limit: see :func:`headroom`).
EIG_WORK_BYTES = 64 * 2**20


def headroom():
    """Bytes the gathered step keeps free beyond its route's need: :data:`EIG_WORK_BYTES`, at most
    a tenth of the worker's memory limit (a small worker's step must still fit).
    """
    limit = _memory_limit()
    return EIG_WORK_BYTES if not limit else min(EIG_WORK_BYTES, int(limit) // 10)


def bytes_text(nbytes):
    """``nbytes`` as text, "1.50 GiB" (``dask.utils.format_bytes``; negatives as 0)."""
    from dask.utils import format_bytes

    return format_bytes(max(int(nbytes), 0))


def make_room(need):
    """Check that ``need`` bytes fit under this process's memory limit now; return the bytes
    left (:func:`memory_left`). Nothing is spilled here (Dask's business).

    Parameters
    ----------
    need : int
        Bytes the next allocation needs, headroom included.

    Returns
    -------
    int or None
        None where unknown (:func:`memory_left` replaced by a caller).

    Raises
    ------
    WorkerMemoryError
        (a MemoryError) fewer than ``need`` bytes are left: the need, what is left, the
        worker's limit, what the process holds, and what to do.
    """
    left = memory_left()
    if left is None or left >= need:
        return left
    limit, resident = _memory_limit(), _resident_bytes()
    raise WorkerMemoryError(short_of_memory("this step", need, left, limit, resident),
                            need=need, left=left, limit=limit, resident=resident)


def short_of_memory(what, need, left, limit, resident, held=""):
    """The message of a :class:`WorkerMemoryError`: the figures, then what to do."""
    if limit:
        where = (f"only {bytes_text(left)} are left under this worker's memory limit of {bytes_text(limit)} "
                 f"(a worker is stopped at 95% of its limit)")
    else:
        where = f"only {bytes_text(left)} of memory are available on this machine"
    holds = f"; the process holds {bytes_text(resident)} now{held}" if resident is not None else ""
    return (f"{what} needs {bytes_text(need)} on one worker, headroom included, but {where}{holds}: give the workers "
            f"more memory (a larger memory limit per worker, or fewer workers or threads sharing one machine's "
            f"memory)")


def with_figures(message, held):
    """``message`` (the eigenvectors do not fit) with this worker's memory limit and what
    the process holds, before its advice.
    """
    limit = _memory_limit()
    figures = [f"this worker's memory limit is {bytes_text(limit)}"] if limit else []
    figures.append(f"the process holds {bytes_text(_resident_bytes())} now, {bytes_text(held)} of it the rows of Z and "
                   f"the previous factor of K*")
    at = message.find(": give the workers more memory")
    extra = f" ({'; '.join(figures)})"
    return message[:at] + extra + message[at:] if at >= 0 else message + extra


def held_bytes(*arrays):
    """Bytes of dense or sparse arrays (data, indices and pointers of a sparse one)."""
    return sum(sum(getattr(a, k).nbytes for k in ("data", "indices", "indptr") if hasattr(a, k)) if sp.issparse(a)
               else getattr(a, "nbytes", 0) for a in arrays if a is not None)


# ---------------------------------------------------------------- device memory of a resident fit
#: Where the kernel stack of a resident fit lives (``stack=``): "device" (resident, ``m n^2``
#: entries on the device), "host" (precomputed kernels in host memory, each row block copied
#: to the device once per pass, :func:`lswmkc_dask.engine.gpu.stream_rows`) or "features"
#: (the row blocks rebuilt from the feature views on the device each pass).
STACKS = ("device", "host", "features")


@dataclasses.dataclass(frozen=True)
class DevicePlan:
    """Where a resident fit keeps its stack and which eigen route it runs, with the device memory counted.

    Attributes
    ----------
    stack : str
        One of :data:`STACKS`.
    eigen : str
        One of :data:`lswmkc_dask.engine.gpu.EIGEN_ROUTES`.
    need : int
        Device bytes (:func:`resident_bytes`).
    """

    stack: str
    eigen: str
    need: int

    def text(self) -> str:
        """``"stack on the device, syevd: 123.45 GiB"`` (for a refusal's figures)."""
        where = {"device": "on the device", "host": "streamed from host memory",
                 "features": "rebuilt from the features"}[self.stack]
        return f"the stack {where} with {self.eigen}: {bytes_text(self.need)}"


def stack_bytes(n_kernels: int, n: int, block_rows: int, itemsize: int, stack: str = "device",
                feature_columns: int = 0) -> int:
    """Device bytes of the kernel stack of a resident fit (:data:`STACKS`).

    Parameters
    ----------
    n_kernels, n, block_rows : int
        m, n and the rows per block of the pass.
    itemsize : int
        Bytes per entry of the stack (8 or 4).
    stack : {"device", "host", "features"}
    feature_columns : int
        ("features") the views' columns in all (their z-scored copies live on the device).

    Returns
    -------
    int
        "device": ``itemsize m n^2``; "host": two row blocks (the one in use and the next
        one's copy), ``2 itemsize m b n``; "features": the views ``8 n d`` and a block's
        raw rows with two temporaries, ``8 (m + 2) b n``.

    Raises
    ------
    ValueError
        Unknown ``stack``.
    """
    if stack == "device":
        return int(itemsize * n_kernels * n * n)
    if stack == "host":
        return int(2 * itemsize * n_kernels * block_rows * n)
    if stack == "features":
        return int(8 * n * feature_columns + 8 * (n_kernels + 2) * block_rows * n)
    raise ValueError(f"stack must be one of {', '.join(map(repr, STACKS))}, got {stack!r}")


def resident_bytes(n_kernels: int, n: int, block_rows: int, itemsize: int = 8, *, workspace: float | None = None,
                   low_itemsize: int = 2, s_copies: int = 0, stack: str = "device", eigen: str = "syevd",
                   feature_columns: int = 0, rank_fraction: float = 1.0) -> int:
    """Device memory of a resident fit (bytes): the stack and the peak of an iteration.

    Besides the stack (:func:`stack_bytes`), the larger of the two peaks of an iteration
    (r < n is K*'s rank; W counted as ``rank_fraction`` n x n, 1 by default, which also
    covers a memory pool's room around a smaller W):

    - the eigen step, "syevd": ``W_{t-1}`` (or a mixed iteration's dense ``K*_{t-1}``), S
      (in Z's buffer; on CuPy it takes the eigenvectors), ``s_copies`` copies of S (NumPy's
      ``eigh`` makes one: the array API has no in-place ``eigh``) and the eigensolver's
      workspace: ``(2 + s_copies + workspace) n^2`` float64; "split": ``W_{t-1}``, S (its
      buffer takes the reflectors), the positive eigenvectors and sytrd/ormtr's workspace
      (:func:`lswmkc_dask.engine.gpu.device_bytes` with ``route="split"``);
    - a polynomial iteration of "mixed": ``K*_{t-1}``, S and three n x n arrays of the
      working precision (``low_itemsize`` bytes: float16 on CUDA);

    plus one row block's temporaries, ``(m + 6) b n`` float64 (a float32 stack's float64
    rows included).

    Parameters
    ----------
    n_kernels, n : int
        m and n.
    block_rows : int
        Rows per block of the pass.
    itemsize : int, default 8
        Bytes per entry of the stack (8 for float64, 4 for float32).
    workspace : float, optional
        syevd's workspace in n x n float64 arrays (default
        :data:`lswmkc_dask.engine.gpu.EIGH_WORKSPACE`; 0 counts only the fit's own arrays).
    low_itemsize : int, default 2
        Bytes per entry of the polynomial's working precision.
    s_copies : int, default 0
        Copies of S the eigensolver makes (0: CuPy, the route this count plans for).
    stack : {"device", "host", "features"}
        :data:`STACKS`.
    eigen : {"syevd", "split"}
        The eigen route.
    feature_columns : int
        ("features") the views' columns in all.
    rank_fraction : float, default 1.0
        r / n counted for ``W_{t-1}`` and the split route's eigenvectors.

    Returns
    -------
    int
        :func:`stack_bytes` ``+ 8 (m + 6) b n`` plus the larger of the eigen step's and
        ``16 n^2 + 3 low_itemsize n^2``.

    Raises
    ------
    ValueError
        Unknown ``stack`` or ``eigen``.
    """
    work = gpu.EIGH_WORKSPACE if workspace is None else float(workspace)
    if eigen == "syevd":
        peak = 8 * (2.0 + int(s_copies) + work) * n * n
    elif eigen == "split":
        peak = 8 * (float(rank_fraction) + int(s_copies)) * n * n + gpu.device_bytes(n, route="split",
                                                                                     rank_fraction=rank_fraction)
    else:
        raise ValueError(f"eigen must be one of {', '.join(map(repr, gpu.EIGEN_ROUTES))}, got {eigen!r}")
    polynomial = 8 * 2 * n * n + 3 * int(low_itemsize) * n * n
    rows = stack_bytes(n_kernels, n, block_rows, itemsize, stack, feature_columns)
    return int(rows + 8 * (n_kernels + 6) * block_rows * n + max(peak, polynomial))


def device_plans(n_kernels: int, n: int, block_rows: int, itemsize: int, *, off_device: str = "host",
                 stack: str | None = None, eigen: str | None = None, feature_columns: int = 0) -> list[DevicePlan]:
    """The resident plans in the order a fit takes the first that fits: the stack on the device
    with syevd, off it (``off_device``) with syevd, then the split eigen route (up to
    :data:`lswmkc_dask.engine.gpu.SPLIT_MAX_N`) with the stack on and off the device.

    Parameters
    ----------
    n_kernels, n, block_rows, itemsize : int
        As :func:`resident_bytes`.
    off_device : {"host", "features"}
        Where the stack can live off the device: host memory (precomputed kernels) or the
        feature views.
    stack, eigen : str, optional
        Only the plans with this stack or eigen route.
    feature_columns : int
        The views' columns in all ("features").

    Returns
    -------
    list of DevicePlan
    """
    plans = []
    for route in gpu.EIGEN_ROUTES:
        if route == "split" and n > gpu.SPLIT_MAX_N:
            continue
        for where in ("device", off_device):
            if (stack is None or where == stack) and (eigen is None or route == eigen):
                plans.append(DevicePlan(where, route, resident_bytes(n_kernels, n, block_rows, itemsize, stack=where,
                                                                     eigen=route, feature_columns=feature_columns)))
    return plans


def choose_plan(plans: list[DevicePlan], free: int | None) -> DevicePlan | None:
    """The first of ``plans`` whose bytes fit ``free`` (the first one where ``free`` is None; None where none fits).

    Returns
    -------
    DevicePlan or None
    """
    return next((p for p in plans if free is None or p.need <= free), None)

"""Memory of the process a step runs in: what is left under a Dask worker's limit.

The gathered step's dense S can reach the nanny's limit (95%) before Dask spills: the
step checks the room before it allocates (:func:`make_room`) and, where it is short,
stops at once with the figures (:class:`WorkerMemoryError`).
"""

from __future__ import annotations

import sys

import psutil
import scipy.sparse as sp

from ..core.eigen import EigenvectorMemoryError

__all__ = ["WorkerMemoryError"]


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


class WorkerMemoryError(EigenvectorMemoryError):
    """The gathered step's memory does not fit what is left under the worker's memory limit
    (raised before S is allocated); ``need``, ``left``, ``limit`` and ``resident`` in bytes
    (None where unknown).
    """

    def __init__(self, message, need=None, left=None, limit=None, resident=None):
        super().__init__(message)
        self.need, self.left, self.limit, self.resident = need, left, limit, resident


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

"""BLAS threads: how many cores a numeric step may use now, and the limit itself.

:func:`free_cores` counts the cores of this process (affinity, cgroup quota) that no other
runnable thread uses now (from /proc: psutil has no runnable count of this moment, and
reads a thread's state four times slower), :func:`blas_threads` turns that and the problem
size into a thread count, and :func:`limit_blas` applies it with threadpoolctl.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from contextlib import AbstractContextManager
from typing import Any

from dask.system import CPU_COUNT  # honours affinity and cgroup CPU quotas


def _runnable_threads():
    """Runnable threads on this machine now (``/proc/loadavg``, 4th field), or None."""
    try:
        with open("/proc/loadavg") as fh:
            return int(fh.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


def _own_runnable_threads():
    """Runnable threads of this process now (state R in ``/proc/self/task/*/stat``).

    At least 1 (the thread that asks); 1 where ``/proc`` is missing.
    """
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    running = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # the thread ended meanwhile
            continue
        # "pid (comm) S ...": the state follows the last ')' (comm may hold spaces)
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] == b"R":
            running += 1
    return max(1, running)


def free_cores(limit: int | None = None, samples: int = 6, interval: float = 0.0005) -> int:
    """Cores free for this process's BLAS calls now.

    The cores this process may use (``dask.system.CPU_COUNT``) minus the threads of other
    programs that keep a core busy: the least of several readings of the runnable count
    (``/proc/loadavg``), which ignores short wake-ups of event loops, minus this process's
    own runnable threads (OpenBLAS's spin for about 0.1 s after a call). Too many BLAS
    threads run many times slower (15-40x on a loaded 2-core machine), too few only
    proportionally, so the count errs low.

    Parameters
    ----------
    limit : int, optional
        Upper bound (e.g. the cores a fit's share of the machine allows).
    samples : int
        Readings of the runnable count.
    interval : float
        Seconds between readings.

    Returns
    -------
    int
        At least 1; ``CPU_COUNT`` (or ``limit``) where ``/proc/loadavg`` is missing.
    """
    cores = min(int(limit) if limit else CPU_COUNT, CPU_COUNT)
    least = None
    for i in range(samples):
        r = _runnable_threads()
        if r is None:
            return max(1, cores)
        others = max(0, r - _own_runnable_threads())
        least = others if least is None else min(least, others)
        if least == 0:
            break
        if i + 1 < samples:
            time.sleep(interval)
    return max(1, min(cores, CPU_COUNT - (least or 0)))


@functools.cache
def _controller():
    """The ``ThreadpoolController`` of threadpoolctl, built once per process (it scans the loaded libraries)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def limit_blas(threads: int) -> AbstractContextManager[Any]:
    """Context manager limiting BLAS/OpenMP threads of this process to ``threads``."""
    return _controller().limit(limits=int(threads))


#: Below this many samples the default is one BLAS thread: a second gains under 10% on an
#: eigendecomposition of n < 1000 (1.08x at n = 700 on 2 cores) and costs a spinning core.
SINGLE_THREAD_BELOW = 1000


def blas_threads(threads: int | None = None, max_threads: int | None = None, n_samples: int | None = None) -> int:
    """BLAS threads for one numeric call: ``threads`` if given, else :func:`free_cores`.

    Parameters
    ----------
    threads : int, optional
        Asked for by the user (``eig_threads``).
    max_threads : int, optional
        Bound of the measured default.
    n_samples : int, optional
        n of the problem: below :data:`SINGLE_THREAD_BELOW` the default is 1.

    Returns
    -------
    int
    """
    if threads:
        return int(threads)
    if n_samples is not None and n_samples < SINGLE_THREAD_BELOW:
        return 1
    return free_cores(max_threads)


def worker_threads() -> int | None:
    """Threads of the Dask worker running this task, or None outside a worker (a bound of
    the default of :func:`blas_threads`: several tasks may run at once on one worker).
    """
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker().state.nthreads
    except (ValueError, AttributeError):
        return None

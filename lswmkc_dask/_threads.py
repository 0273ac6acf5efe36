"""BLAS threads: how many cores a numeric step may use now, and the limit itself.

Workers run one thread each; the BLAS inside a task may use more. :func:`free_cores`
counts the cores of this process (affinity, cgroup quota) that no other runnable thread
is using right now (from /proc), :func:`blas_threads` turns that and the problem size
into a thread count, and :func:`limit_blas` applies it with threadpoolctl.

The readings come from /proc rather than psutil, which offers neither: its
``getloadavg`` is a one-minute average, not the runnable count now, and a thread's
state needs a ``psutil.Process`` per thread (four times the time of reading its stat
file: 9 ms against 2.4 ms for 41 threads, up to six readings per call).
"""

from __future__ import annotations

import functools
import os
import time
from contextlib import AbstractContextManager
from typing import Any

from dask.system import CPU_COUNT  # honours affinity and cgroup CPU quotas

__all__ = ["CPU_COUNT", "blas_threads", "free_cores", "limit_blas"]


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

    The cores this process may use (affinity and cgroup CPU quota, as
    ``dask.system.CPU_COUNT``) minus the threads of other programs that keep a core busy:
    the least of several readings of the runnable count (``/proc/loadavg``) over a few
    milliseconds, minus this process's own runnable threads (the reading thread, and
    BLAS threads that still spin after a multi-threaded call: OpenBLAS keeps them
    runnable for about 0.1 s, and counting them made an in-process fit run its
    eigendecompositions on 1 thread, 0.75 s instead of 0.55 s at n = 2000). A program
    computing is runnable in every reading; the short wake-ups of event loops (Dask's
    own among them) are not, and the least reading ignores them. An eigendecomposition
    with more BLAS threads than free cores runs many times slower (measured 15-40x with
    2 threads on a loaded 2-core machine), with fewer only proportionally slower, so
    the count errs low.

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
    """The ``ThreadpoolController`` of threadpoolctl, built once per process (building it
    scans the loaded libraries, milliseconds that a small fit would pay every iteration).
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def limit_blas(threads: int) -> AbstractContextManager[Any]:
    """Context manager limiting BLAS/OpenMP threads of this process to ``threads``."""
    return _controller().limit(limits=int(threads))


#: Below this many samples the default is one BLAS thread: a second thread gains under
#: 10% on an eigendecomposition of n < 1000 (1.01x at n = 165, 1.08x at 700, 1.13x at
#: 1000, 1.19x at 1500 on the project's 2-core machine) and costs a spinning core.
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

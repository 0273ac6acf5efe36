"""Dask preload of the worker processes of the LocalClusters that lswmkc starts.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group, worker
processes included; each would print a ``KeyboardInterrupt`` traceback from the middle
of its event loop. The process that started the cluster handles the interrupt and
closes its workers, so they ignore SIGINT (SIGTERM and SIGKILL still end them).
"""

from __future__ import annotations

import signal
import threading


def dask_setup(worker):  # (the preload interface passes the worker)
    """Ignore SIGINT in this worker process (called once by Dask at worker start).

    Parameters
    ----------
    worker : distributed.Worker
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

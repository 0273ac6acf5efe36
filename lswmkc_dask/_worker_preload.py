"""Dask preload of the worker processes of the LocalClusters that lswmkc starts.

* Ctrl-C in a terminal sends SIGINT to the whole foreground process group, worker
  processes included; each would print a ``KeyboardInterrupt`` traceback from the
  middle of its event loop. The process that started the cluster handles the interrupt
  and closes its workers, so they ignore SIGINT (SIGTERM and SIGKILL still end them).
* A worker outlives the process that started it when that process is killed (SIGKILL,
  out of memory) or exits before its cluster has closed: it would stay, orphaned, with
  its memory, until rebooted. Each worker checks its parent once a second and exits
  when it is gone.
"""

from __future__ import annotations

import os
import signal
import threading
import time

#: Seconds between two looks at the parent process.
PARENT_CHECK_SECONDS = 1.0


def _exit_with_parent(parent):
    while True:
        time.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:  # re-parented: the process that started us is gone
            os._exit(0)


def dask_setup(worker):  # (the preload interface passes the worker)
    """Ignore SIGINT and follow the parent process (called once by Dask at worker start).

    Parameters
    ----------
    worker : distributed.Worker
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="lswmkc-parent-watch", daemon=True).start()

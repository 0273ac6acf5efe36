"""Dask preload of the worker processes of the LocalClusters that lswmkc starts.

* Ctrl-C in a terminal sends SIGINT to the whole foreground process group, worker
  processes included; each would print a ``KeyboardInterrupt`` traceback from the
  middle of its event loop. The process that started the cluster handles the interrupt
  and closes its workers, so they ignore SIGINT (SIGTERM and SIGKILL still end them).
* A worker outlives the process that started it when that process is killed (SIGKILL,
  out of memory) or exits before its cluster has closed: it would stay, orphaned, with
  its memory, until rebooted. Each worker checks its parent once a second and exits
  when it is gone.
* When the process that started the cluster closes it (at the end, or after Ctrl-C or
  SIGTERM), its scheduler can go before a worker whose heartbeat is under way; the
  worker then logs "Failed to communicate with scheduler during heartbeat." with a
  traceback, which would land after the command's last line. The scheduler of these
  clusters lives in the process that started them, so a worker that cannot reach it
  has nothing to tell: that process is closing, or has died and the worker follows it.
  These records are dropped (:class:`QuietLostHeartbeat`); every other record passes.
"""

from __future__ import annotations

import logging
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


class QuietLostHeartbeat(logging.Filter):
    """Drops a worker's "Failed to communicate with scheduler during heartbeat." record.

    Only the record that ``distributed.Worker.heartbeat`` logs when the connection to
    the scheduler fails (an ``OSError``) is dropped; every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a lost-heartbeat record (dropped), True for any other."""
        lost = record.exc_info is not None and isinstance(record.exc_info[1], OSError)
        return not (lost and str(record.msg).startswith("Failed to communicate with scheduler during heartbeat"))


_HEARTBEAT_FILTER = QuietLostHeartbeat()


def dask_setup(worker):  # (the preload interface passes the worker)
    """Ignore SIGINT, follow the parent process, drop lost-heartbeat records (called once by Dask at worker start).

    Parameters
    ----------
    worker : distributed.Worker
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_HEARTBEAT_FILTER)  # (the same filter twice is a no-op)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="lswmkc-parent-watch", daemon=True).start()

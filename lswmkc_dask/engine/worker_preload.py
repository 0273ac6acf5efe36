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
  Likewise a worker sending data to another worker that has just closed logs "failed
  during get data with ..." and a traceback (seen after SIGTERM in CI); on these
  clusters a worker that goes away mid-transfer is either this teardown or a lost worker
  that the client reports itself. These two records are dropped
  (:class:`QuietLostHeartbeat`); every other record passes.
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


#: Starts of the ``distributed.worker`` messages logged with an ``OSError`` when the peer
#: went away: the scheduler during a heartbeat (``Worker.heartbeat``), another worker
#: during a transfer (``Worker.get_data``).
LOST_PEER_MESSAGES = ("Failed to communicate with scheduler during heartbeat", "failed during get data with")


class QuietLostHeartbeat(logging.Filter):
    """Drops a worker's lost-heartbeat and lost-transfer records (the peer went away).

    Only the records that ``distributed.Worker.heartbeat`` ("Failed to communicate with
    scheduler during heartbeat.") and ``distributed.Worker.get_data`` ("failed during
    get data with ...") log when their connection fails (an ``OSError``) are dropped;
    every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a lost-peer record (dropped), True for any other."""
        lost = record.exc_info is not None and isinstance(record.exc_info[1], OSError)
        return not (lost and str(record.msg).startswith(LOST_PEER_MESSAGES))


_HEARTBEAT_FILTER = QuietLostHeartbeat()


def dask_setup(worker):  # (the preload interface passes the worker)
    """Ignore SIGINT, follow the parent process, drop lost-peer records (called once by Dask at worker start).

    Parameters
    ----------
    worker : distributed.Worker
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_HEARTBEAT_FILTER)  # (the same filter twice is a no-op)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="lswmkc-parent-watch", daemon=True).start()

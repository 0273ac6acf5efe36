"""Dask preload of the worker processes of the LocalClusters that lswmkc starts.

Each worker ignores SIGINT (the process that started the cluster handles Ctrl-C and
closes it), exits when its parent is gone (killed, out of memory) rather than stay
orphaned, and drops the records logged when a peer goes away during teardown: a lost
heartbeat to the scheduler, which lives in the parent, and a transfer to a worker that
has just closed (:class:`QuietLostHeartbeat`); every other record passes.
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
    """Drops a worker's lost-heartbeat and lost-transfer records (:data:`LOST_PEER_MESSAGES`
    with an ``OSError``); every other record passes.
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

"""The connection to a Dask scheduler: its address probed before connecting, a wait for
its first worker, and its loss while work runs told in one error with what to do.

A client that loses its scheduler tries to reconnect for Dask's connect timeout, then
closes itself; every run on a client opened by :func:`lswmkc_dask.engine.cluster.connect`
ends through :func:`settle_lost_scheduler` (the reconnection let end, the error made a
:class:`SchedulerLostError`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from ..errors import ClusterWarning, SchedulerLostError, warn_at_caller


def _say(out, text):
    """A wait the user must hear of: to ``out`` when given (``lswmkc: ...``), else a ClusterWarning."""
    if out is not None:  # a warning, not progress: to the caller's stream as is
        print(f"lswmkc: {text}", file=out, flush=True)
    else:
        warn_at_caller(text, ClusterWarning)


#: Seconds a fit or sweep waits for a first Dask worker before it gives up (the
#: ``LSWMKC_WORKER_TIMEOUT`` environment variable sets another).
WORKER_TIMEOUT = 60.0


def _scheduler_address(client):
    """The address of ``client``'s scheduler, or "?"."""
    return getattr(getattr(client, "scheduler", None), "address", None) or "?"


def _await_scheduler(client, timeout, out=None):
    """Whether ``client`` is (again) connected to its scheduler, waiting at most ``timeout`` s
    while it reconnects (saying so in one line).
    """
    if getattr(client, "status", "running") == "connecting":
        import dask
        from dask.utils import parse_timedelta

        wait = min(float(timeout), parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="s"))
        _say(out, f"lost the connection to the Dask scheduler at {_scheduler_address(client)}; waiting up to "
             f"{wait:g} s for it to come back")
    deadline = time.monotonic() + max(float(timeout), 0.0)
    while getattr(client, "status", "running") == "connecting" and time.monotonic() < deadline:
        time.sleep(0.1)
    return getattr(client, "status", "running") == "running"


def short_reason(exc: BaseException) -> str:
    """``exc`` in one line: its type and the first 160 characters of its message.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    str
        ``"TypeName: message"``, or the type's name alone without a message.
    """
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def scheduler_address(scheduler: str | None, scheduler_file: str | None) -> str | None:
    """The address of a scheduler given by address or by file (the file's wins).

    Parameters
    ----------
    scheduler : str, optional
        ``tcp://host:8786``, ``tls://...``.
    scheduler_file : str, optional
        Written by ``dask scheduler --scheduler-file`` (JSON with ``address``).

    Returns
    -------
    str or None

    Raises
    ------
    OSError, ValueError
        The file cannot be read, or is not JSON.
    """
    if not scheduler_file:
        return scheduler
    import json

    with open(scheduler_file) as fh:
        return json.load(fh).get("address")


def raise_if_scheduler_lost(exc: BaseException, client: Any) -> None:
    """Turn an error that came from losing the Dask scheduler (cancelled futures, a closed comm)
    into :class:`SchedulerLostError`.

    Parameters
    ----------
    exc : BaseException
        The error that ended the work.
    client : distributed.Client or None

    Raises
    ------
    SchedulerLostError
        ``client`` is no longer connected to its scheduler (it is reconnecting, or it
        gave up and closed), or ``exc`` says that the connection was lost.
    """
    if client is None or isinstance(exc, SchedulerLostError):
        return
    status = getattr(client, "status", "running")
    if status == "running" and "scheduler-connection-lost" not in str(exc):
        return
    raise SchedulerLostError(_scheduler_address(client), short_reason(exc)) from exc


def workers_of(client: Any) -> dict[str, dict]:
    """Every worker of ``client``'s cluster as the scheduler records it now (address -> info),
    asked directly (``client.scheduler_info()["workers"]`` can come back empty).

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.

    Returns
    -------
    dict
        Worker address -> its record (``memory_limit``, ``nthreads``, ``host``,
        ``resources``, ``status``, ...).
    """
    return dict(client.sync(client.scheduler.identity, n_workers=-1).get("workers", {}))


def smallest_memory_limit(workers: Mapping[str, dict]) -> int:
    """The smallest memory limit (bytes) among ``workers`` (:func:`workers_of`); 0 where none has one.

    Parameters
    ----------
    workers : dict
        Worker address -> its record.

    Returns
    -------
    int
    """
    return min((x for x in (w.get("memory_limit") or 0 for w in workers.values()) if x), default=0)


def wait_for_workers(client: Any, timeout: float | None = None, out: Any = None) -> None:
    """Return once a worker is running on ``client``'s cluster; wait at most ``timeout``.

    Parameters
    ----------
    client : distributed.Client
    timeout : float, optional
        Seconds (default :data:`WORKER_TIMEOUT`, or the ``LSWMKC_WORKER_TIMEOUT``
        environment variable).
    out : file, optional
        Where the one waiting message goes (default stderr).

    Raises
    ------
    TimeoutError
        No worker within ``timeout``, with the scheduler's address and what to do.
    SchedulerLostError
        The client lost its scheduler and could not reconnect (within ``timeout``).
    """
    if timeout is None:
        timeout = float(os.environ.get("LSWMKC_WORKER_TIMEOUT", WORKER_TIMEOUT))
    address = _scheduler_address(client)
    if not _await_scheduler(client, timeout, out):
        status = getattr(client, "status", "?")
        raise SchedulerLostError(address, "it did not come back within the client's reconnection time"
                                 if status in ("closing", "closed") else f"the client is {status}")
    try:
        workers = workers_of(client)
    except Exception as exc:  # CommClosedError, OSError, TimeoutError: the scheduler went away
        raise_if_scheduler_lost(exc, client)
        raise
    if any(w.get("status", "running") == "running" for w in workers.values()):
        return
    _say(out, f"no Dask worker is connected to the scheduler at {address} (yet); waiting up to {timeout:g} s for one")
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception as exc:  # distributed's WorkerStartTimeoutError (a TimeoutError)
        raise_if_scheduler_lost(exc, client)
        if not isinstance(exc, (TimeoutError, OSError)) and "Timeout" not in type(exc).__name__:
            raise
        raise TimeoutError(
            f"no Dask worker connected to the scheduler at {address} within {timeout:g} s: start workers "
            f"(`dask worker {address}`), or let it wait longer (the environment variable "
            f"LSWMKC_WORKER_TIMEOUT=SECONDS; now {timeout:g})"
        ) from None


#: Seconds :func:`connect` waits for a scheduler's port to answer before it says that
#: it is still connecting (Dask itself then waits up to its connect timeout).
PROBE_SECONDS = 2.0


def probe_scheduler(address: str, timeout: float = PROBE_SECONDS) -> OSError | None:
    """Try a TCP connection to a ``tcp://`` or ``tls://`` scheduler address.

    Parameters
    ----------
    address : str
        ``tcp://host:port``, ``tls://host:port`` or ``host:port``.
    timeout : float
        Seconds to wait for the connection.

    Returns
    -------
    OSError or None
        The error of the attempt (``ConnectionRefusedError``: nothing listens there;
        ``socket.gaierror``: unknown host; ``TimeoutError``: no answer), or None when
        the port answered or the address is of another kind (not probed).
    """
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(str(address))
        if scheme not in ("tcp", "tls"):
            return None
        host, port = parse_host_port(location, 8786)
    except (ValueError, TypeError):
        return None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return exc
    return None


def refuse_unreachable(address: str, out: Any = None) -> None:
    """Fail at once where nothing listens at ``address``; say so where it is slow to answer.

    Parameters
    ----------
    address : str
        The scheduler's address (other kinds than ``tcp://``/``tls://`` are not probed).
    out : file, optional
        Where the one waiting message goes (default: the library's logger).

    Raises
    ------
    ConnectionError
        Nothing listens at the address (connection refused), or its host is unknown.
    """
    import socket

    exc = probe_scheduler(address)
    if exc is None:
        return
    if isinstance(exc, ConnectionRefusedError):
        raise ConnectionError(
            f"cannot connect to the Dask scheduler at {address}: nothing listens there (connection refused); "
            f"start the scheduler (`dask scheduler`) or give its address"
        )
    if isinstance(exc, socket.gaierror):
        raise ConnectionError(f"cannot connect to the Dask scheduler at {address}: unknown host ({exc})")
    import dask
    from dask.utils import parse_timedelta

    wait = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="s")
    _say(out, f"connecting to the Dask scheduler at {address}: no answer within {PROBE_SECONDS:g} s "
         f"({short_reason(exc)}); waiting up to {wait:g} s")


def settle_lost_scheduler(client: Any, address: str, exc: Exception) -> None:
    """After ``exc`` ended the work on ``client``: where its scheduler is gone, raise
    :class:`SchedulerLostError` once the client's reconnection has ended (closing it before
    would make Dask log the cancelled reconnection with its traceback).

    Parameters
    ----------
    client : distributed.Client
        A client that the caller opened and closes next.
    address : str
        Its scheduler's address.
    exc : Exception
        What ended the work.

    Raises
    ------
    SchedulerLostError
        The scheduler does not answer and the client did not get it back (``exc``
        itself is left to the caller to raise where it is one already).
    """
    from distributed.comm import CommClosedError

    if getattr(client, "status", "running") == "running":
        if not isinstance(exc, CommClosedError) and probe_scheduler(address) is None:
            return  # it answers: not a lost scheduler
        deadline = time.monotonic() + PROBE_SECONDS  # a dying scheduler's port may still answer for a moment
        while getattr(client, "status", "running") == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        if getattr(client, "status", "running") == "running" and probe_scheduler(address) is None:
            return
    timeout = float(os.environ.get("LSWMKC_WORKER_TIMEOUT", WORKER_TIMEOUT))
    if (_await_scheduler(client, timeout) and probe_scheduler(address) is None) or isinstance(exc, SchedulerLostError):
        return  # it came back, or the error says so already
    gone = getattr(client, "status", "?") in ("closing", "closed")
    raise SchedulerLostError(address, "it did not come back within the client's reconnection time" if gone
                             else short_reason(exc)) from exc

"""Where a fit runs: this process, the active Dask client, or a cluster (:func:`execution`).

The Dask convention, in this order: a client (or scheduler address) the caller passes;
the ``distributed`` client already active in the process; otherwise this process for
stacks up to :data:`IN_PROCESS_MAX_BYTES` and a threaded LocalCluster above; process
workers only when asked (``n_workers=``/``processes=True``, the CLI). A LocalCluster
started here binds to loopback, runs one thread per worker process, closes with its
client, and declares this process's GPUs (:func:`gpu_worker_options`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dask.system import CPU_COUNT  # honours affinity and cgroup CPU quotas

from ..errors import Param, with_message
from .gpu import cuda_device_count
from .scheduler import (
    refuse_unreachable,
    scheduler_address,
    settle_lost_scheduler,
    smallest_memory_limit,
    workers_of,
)

if TYPE_CHECKING:
    from ..io.inputs import KernelStack

#: Kernel stacks up to this many bytes run in the calling process without Dask when no
#: client is given or active (measured crossover:
#: docs/performance.md#where-a-fit-runs-bench_executionpy).
IN_PROCESS_MAX_BYTES = 1024 * 2**20


def raise_if_out_of_memory(
    exc: BaseException,
    client: Any,
    store: KernelStack,
    block_rows: int,
    cached: bool | None = None,
    known_limit: int | None = None,
) -> None:
    """Turn a task that killed its workers (KilledWorker: almost always their memory limit) into
    an error with the limit, the block size and what to change.

    Parameters
    ----------
    exc : BaseException
    client : distributed.Client
    store : KernelStack
    block_rows : int
        Rows of the fit's row blocks.
    cached : bool, optional
        The row blocks were held in worker memory (``cache_kernels=False`` suggested too).
    known_limit : int, optional
        The smallest worker memory limit seen before the fit (bytes), named when no
        worker is left to tell it.

    Raises
    ------
    MemoryError
        When ``exc`` is a ``distributed.scheduler.KilledWorker``.
    """
    if type(exc).__name__ != "KilledWorker":
        return
    try:
        workers = workers_of(client)
    except Exception:  # the scheduler is gone too: no limit to tell
        workers = {}
    limit = smallest_memory_limit(workers) or known_limit or 0
    block = store.itemsize * store.n_kernels * block_rows * store.n_samples
    n = store.n_samples
    from dask.utils import format_bytes

    if "kstar_step" in str(exc) or "factor_from_blocks" in str(exc) or "cluster_factor" in str(exc):
        against = (f"against a memory limit of {format_bytes(limit)}" if limit else
                   "against the workers' memory limit (unknown now: no worker is left to tell it)")
        raise with_message(
            MemoryError, "the gathered eigendecomposition killed its worker repeatedly ({}): at n = {} it needs "
            "{}-{} on one worker (the dense S, then half of it and the eigenvectors of K*, max(n, n/2 + rank) n x 8 "
            "bytes; 4 n^2 x 8 with {}) {}: give the workers more memory (a larger memory limit per worker), "
            "and keep {} (the smallest need)", exc, n, format_bytes(8 * n * n), format_bytes(12 * n * n),
            Param("eig_driver", "evd"), against, Param("eig_driver", "auto"),
        ) from exc
    limit_text = f"the worker's memory limit ({limit / 2**20:.0f} MiB)" if limit else (
        "the workers' memory limit (unknown now: no worker is left to tell it)")
    uncache = (", or (from Python) cache_kernels=False, which reads the blocks from the store in every "
               "iteration instead of holding them in worker memory") if cached else ""
    raise with_message(
        MemoryError, "a task of the fit killed its worker repeatedly ({}); the usual cause is {} against row "
        "blocks of {} rows x {} kernels x {} columns = {} each (several are in memory at once): give the workers "
        "more memory (a larger memory limit per worker), or pass a smaller {}{}", exc, limit_text, block_rows,
        store.n_kernels, store.n_samples, format_bytes(block),
        Param("block_rows", max(1, block_rows // 2), hint="paren"), uncache,
    ) from exc


def active_client() -> Any:
    """The ``distributed`` client active in this process, or None (``distributed`` not
    imported where nothing imported it).

    Returns
    -------
    distributed.Client or None
    """
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def make_security(tls_ca_file: str | None = None, tls_cert: str | None = None, tls_key: str | None = None) -> Any:
    """A ``distributed.Security`` for TLS, or None when no file is given.

    Parameters
    ----------
    tls_ca_file, tls_cert, tls_key : str, optional
        PEM files: the certificate authority, the client certificate and its key.

    Returns
    -------
    distributed.Security or None

    Raises
    ------
    ValueError
        If only some of the three files are given.
    FileNotFoundError
        If a file does not exist.
    """
    files = {"--tls-ca-file": tls_ca_file, "--tls-cert": tls_cert, "--tls-key": tls_key}
    given = {k: v for k, v in files.items() if v}
    if not given:
        return None
    if len(given) != 3:
        missing = ", ".join(k for k in files if k not in given)
        raise ValueError(f"TLS needs a CA file, a certificate and a key; missing {missing}")
    for k, v in given.items():
        if not os.path.isfile(v):
            raise FileNotFoundError(f"{k} file not found: {v}")
    from distributed import Security

    return Security(
        tls_ca_file=tls_ca_file,
        tls_client_cert=tls_cert,
        tls_client_key=tls_key,
        require_encryption=True,
    )


#: The scheduler's worker-ttl of the clusters this package starts (see local_cluster).
WORKER_TTL = "1 hour"


class _QuietAllExit(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for ``distributed``'s ``AllExit``
    (a gather interrupted by Ctrl-C or SIGTERM); every other record passes.
    """

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return type(exc).__name__ != "AllExit" or type(exc).__module__ != "distributed.client"


_ASYNCIO_FILTER = _QuietAllExit()
logging.getLogger("asyncio").addFilter(_ASYNCIO_FILTER)  # adding the same filter again is a no-op


def gpu_worker_options(n_workers: int, n_gpus: int, processes: bool, visible: str | None = None) -> list[dict]:
    """What each worker of a LocalCluster declares of this machine's GPUs.

    Parameters
    ----------
    n_workers : int
        Workers of the cluster.
    n_gpus : int
        CUDA devices this process sees.
    processes : bool
        Worker processes (each may see its own device) or threads (which share this
        process's device: one of them declares it).
    visible : str, optional
        This process's ``CUDA_VISIBLE_DEVICES`` (default: the environment's).

    Returns
    -------
    list of dict
        Per worker, the options added to its spec: ``resources={"GPU": 1}`` for the
        first ``min(n_workers, n_gpus)`` worker processes (the first worker, with
        threads), with several GPUs ``env={"CUDA_VISIBLE_DEVICES": ID}`` one each; ``{}``
        for the others.
    """
    options: list[dict] = [{} for _ in range(n_workers)]
    if n_gpus < 1:
        return options
    if visible is None:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in visible.split(",") if x.strip()] if visible else [str(i) for i in range(n_gpus)]
    for i in range(min(n_workers, n_gpus if processes else 1)):
        options[i]["resources"] = {"GPU": 1}
        if processes and n_gpus > 1 and i < len(ids):
            options[i]["env"] = {"CUDA_VISIBLE_DEVICES": ids[i]}
    return options


def _start_cluster(n_workers, threads_per_worker, processes, memory_limit, n_gpus, kwargs):
    """A LocalCluster whose workers declare ``n_gpus`` GPUs (:func:`gpu_worker_options`; dask-cuda's
    LocalCUDACluster for several GPUs with worker processes where it is installed).
    """
    from distributed import LocalCluster

    if n_gpus > 1 and processes:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            LocalCUDACluster = None
        if LocalCUDACluster is not None:
            return LocalCUDACluster(n_workers=min(n_workers, n_gpus), threads_per_worker=threads_per_worker,
                                    memory_limit=memory_limit, resources={"GPU": 1}, **kwargs)
    plan = gpu_worker_options(n_workers, n_gpus, processes)
    cluster = LocalCluster(n_workers=0 if n_gpus else n_workers, threads_per_worker=threads_per_worker,
                           processes=processes, memory_limit=memory_limit, **kwargs)
    if n_gpus:
        import copy

        for i, extra in enumerate(plan):
            spec = copy.deepcopy(cluster.new_spec)
            spec["options"].update(extra)
            cluster.worker_spec[i] = spec
        cluster.scale(len(plan))  # starts the workers of worker_spec
    return cluster


@contextlib.contextmanager
def local_cluster(
    n_workers: int | None = None,
    threads_per_worker: int = 1,
    memory_limit: str | int | float = "auto",
    processes: bool = True,
    gpus: int | None = None,
    **kwargs: Any,
) -> Iterator[Any]:
    """Start a loopback-only LocalCluster and a client; close both on exit. This process's
    CUDA devices are declared (:func:`gpu_worker_options`).

    Parameters
    ----------
    n_workers : int, optional
        Workers (default: the number of cores available).
    threads_per_worker : int
    memory_limit : str or int
        Per worker, as Dask accepts it.
    processes : bool
        Worker processes (a script needs an ``if __name__ == "__main__":`` guard) or
        threads in this process.
    gpus : int, optional
        CUDA devices to declare (default: those this process sees,
        :func:`lswmkc_dask.engine.gpu.cuda_device_count`; 0: none).
    **kwargs
        Passed to ``distributed.LocalCluster``.

    Yields
    ------
    distributed.Client
        Its cluster has all its workers running.
    """
    from distributed import Client

    if n_workers is None:
        n_workers = CPU_COUNT
    # No dashboard, and its HTTP endpoint on a free loopback port: several clusters never collide.
    kwargs.setdefault("dashboard_address", "127.0.0.1:0")
    kwargs.setdefault("scheduler_kwargs", {"dashboard": False})
    # Worker logs below ERROR would precede the command line's one-line error for bad input.
    kwargs.setdefault("silence_logs", logging.ERROR)
    if processes:
        kwargs.setdefault("host", "127.0.0.1")  # loopback only
        # Ctrl-C reaches the workers too (one process group): this process handles it.
        kwargs.setdefault("preload", ["lswmkc_dask.engine.worker_preload"])
    import dask

    # SciPy's LAPACK calls ("subset", "evd") hold the GIL for minutes at n = 12000, and a
    # worker silent for the scheduler's worker-ttl (5 minutes by default) is removed.
    with dask.config.set({"distributed.scheduler.worker-ttl": WORKER_TTL}):
        n_gpus = cuda_device_count() if gpus is None else int(gpus)
        cluster = _start_cluster(n_workers, threads_per_worker, processes, memory_limit, n_gpus, kwargs)
    try:
        # Not the process's default client: it is private to this call.
        client = Client(cluster, set_as_default=False)
        try:
            if n_gpus:
                client.wait_for_workers(len(cluster.worker_spec))
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@contextlib.contextmanager
def connect(
    client: Any = None,
    scheduler: str | None = None,
    scheduler_file: str | None = None,
    security: Any = None,
    n_workers: int | None = None,
) -> Iterator[Any]:
    """A client for the work at hand.

    Parameters
    ----------
    client : distributed.Client or str, optional
        Used as is and left open; a string is a scheduler address to connect to.
    scheduler : str, optional
        Address of an existing scheduler (``tcp://host:8786``, ``tls://...``).
    scheduler_file : str, optional
        Scheduler file written by ``dask scheduler --scheduler-file``.
    security : distributed.Security, optional
        TLS settings for ``scheduler``/``scheduler_file``.
    n_workers : int, optional
        Workers of the private LocalCluster started when nothing else is given.

    Yields
    ------
    distributed.Client

    Raises
    ------
    FileNotFoundError
        ``scheduler_file`` does not exist.
    ValueError
        A ``tls://`` scheduler without TLS settings; a ``client`` that is closed.
    ConnectionError
        The scheduler cannot be reached: at once where nothing listens or the host is
        unknown (:func:`lswmkc_dask.engine.scheduler.refuse_unreachable`); else after Dask's
        connect timeout. :class:`SchedulerLostError` where the scheduler of a client opened
        here was lost while the work ran.
    """
    if isinstance(client, str):
        client, scheduler = None, scheduler or client
    if client is not None:
        if getattr(client, "status", "running") in ("closing", "closed"):
            raise ValueError(f"the Dask client given as client= is {client.status} ({client!r}); pass an open client, "
                             "or none to run without one")
        yield client
        return
    if scheduler or scheduler_file:
        import dask
        from distributed import Client

        if scheduler_file and not os.path.isfile(scheduler_file):
            raise FileNotFoundError(f"scheduler file not found: {scheduler_file}")
        address = scheduler_address(scheduler, scheduler_file) or ""
        if str(address).startswith("tls://") and security is None and not dask.config.get(
            "distributed.comm.tls.client.cert", None
        ):
            raise ValueError(
                f"{address} is a TLS scheduler: give --tls-ca-file, --tls-cert and --tls-key "
                "(or set distributed.comm.tls.* in the Dask config)"
            )
        kwargs = {"security": security} if security is not None else {}
        refuse_unreachable(address)
        try:  # (the scheduler file's address, as Client(scheduler_file=...) reads it)
            c = Client(address, set_as_default=False, **kwargs)
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to the Dask scheduler at {address}: {exc}") from exc
        try:
            yield c
        except Exception as exc:  # closed while it reconnects, the client logs the cancelled reconnection
            settle_lost_scheduler(c, address, exc)
            raise
        finally:
            c.close()
        return
    with local_cluster(n_workers=n_workers) as c:
        yield c


@contextlib.contextmanager
def execution(
    client: Any = None,
    *,
    n_workers: int | None = None,
    processes: bool | None = None,
    n_bytes: int = 0,
) -> Iterator[Any]:
    """Where to run: a client, or None for this process (the module's order).

    Parameters
    ----------
    client : distributed.Client or str, optional
        A client, or a scheduler address to connect to (closed on exit).
    n_workers : int, optional
        Start a LocalCluster with this many workers (processes unless
        ``processes=False``).
    processes : bool, optional
        True: a LocalCluster of worker processes; False: a threaded one; None (default):
        no cluster up to :data:`IN_PROCESS_MAX_BYTES`, a threaded LocalCluster above,
        unless ``n_workers`` asks for processes.
    n_bytes : int
        Size of the preprocessed kernel stack, in bytes.

    Yields
    ------
    distributed.Client or None
        None: run in this process with the in-process runner.

    Raises
    ------
    ConnectionError
        A scheduler address that cannot be reached.
    """
    if client is None and not n_workers and processes is None:
        client = active_client()
    if client is not None:
        with connect(client) as c:
            yield c
        return
    if not n_workers and not processes:
        if processes is None and n_bytes <= IN_PROCESS_MAX_BYTES:
            yield None
            return
        with local_cluster(n_workers=1, threads_per_worker=CPU_COUNT, processes=False) as c:
            yield c
        return
    with local_cluster(n_workers=n_workers, processes=True if processes is None else processes) as c:
        yield c

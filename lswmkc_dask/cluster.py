"""Getting a Dask client: a private LocalCluster, or an existing cluster.

A LocalCluster started here binds to loopback only (127.0.0.1), runs one thread per
worker process so that numeric code does not oversubscribe the cores (Dask already
sets BLAS to one thread in workers; the gathered eigendecomposition raises it with
threadpoolctl), and is closed with its client when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["connect", "local_cluster", "make_security"]


def make_security(tls_ca_file=None, tls_cert=None, tls_key=None):
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


@contextlib.contextmanager
def local_cluster(n_workers=None, threads_per_worker=1, memory_limit="auto", **kwargs):
    """Start a loopback-only LocalCluster and a client; close both on exit.

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default: the number of cores available).
    threads_per_worker : int
    memory_limit : str or int
        Per worker, as Dask accepts it.
    **kwargs
        Passed to ``distributed.LocalCluster``.

    Yields
    ------
    distributed.Client
    """
    from distributed import Client, LocalCluster

    if n_workers is None:
        from dask.system import CPU_COUNT  # honours affinity and cgroup CPU quotas

        n_workers = CPU_COUNT
    # No Bokeh dashboard by default, and its HTTP endpoint (health, metrics) on a free
    # loopback port rather than 8787, so that several clusters never collide.
    kwargs.setdefault("dashboard_address", "127.0.0.1:0")
    kwargs.setdefault("scheduler_kwargs", {"dashboard": False})
    cluster = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        host="127.0.0.1",
        memory_limit=memory_limit,
        **kwargs,
    )
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@contextlib.contextmanager
def connect(client=None, scheduler=None, scheduler_file=None, security=None, n_workers=None):
    """A client for the work at hand.

    Parameters
    ----------
    client : distributed.Client, optional
        Used as is and left open.
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
        A ``tls://`` scheduler without TLS settings.
    ConnectionError
        The scheduler cannot be reached (or refuses the connection).
    """
    if client is not None:
        yield client
        return
    if scheduler or scheduler_file:
        import dask
        from distributed import Client

        if scheduler_file and not os.path.isfile(scheduler_file):
            raise FileNotFoundError(f"scheduler file not found: {scheduler_file}")
        address = scheduler
        if scheduler_file:
            import json

            with open(scheduler_file) as fh:
                address = json.load(fh).get("address", "")
        if str(address).startswith("tls://") and security is None and not dask.config.get(
            "distributed.comm.tls.client.cert", None
        ):
            raise ValueError(
                f"{address} is a TLS scheduler: give --tls-ca-file, --tls-cert and --tls-key "
                "(or set distributed.comm.tls.* in the Dask config)"
            )
        kwargs = {"security": security} if security is not None else {}
        try:
            if scheduler_file:
                c = Client(scheduler_file=scheduler_file, **kwargs)
            else:
                c = Client(scheduler, **kwargs)
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to the Dask scheduler at {address}: {exc}") from exc
        try:
            yield c
        finally:
            c.close()
        return
    with local_cluster(n_workers=n_workers) as c:
        yield c

#!/usr/bin/env python
r"""Recipe: an LSWMKC alpha sweep on a SLURM (or PBS) cluster with dask-jobqueue.

Run it on a login node (or inside a small interactive/batch job) of the HPC system,
in the Python environment that has lswmkc-dask installed on a filesystem that every
compute node sees (the batch jobs start ``python -m distributed.cli.dask_worker`` with
this same interpreter). lswmkc-dask is not on PyPI: install it from the checkout, or
from your clone's git URL
(``pip install "git+https://<your-git-host>/lswmkc-dask.git" dask-jobqueue``)::

    source /shared/venv/bin/activate
    pip install /shared/src/lswmkc-dask dask-jobqueue      # the checkout + dask-jobqueue
    lswmkc prepare my_kernels.mat /shared/project/my_kernels.zarr     # once
    python cluster/jobqueue_slurm.py /shared/project/my_kernels.zarr \
        --output /shared/project/sweep --jobs 4 --cores 16 --memory 64GB \
        --walltime 02:00:00 --queue compute --account myproject \
        --job-extra=--exclusive --prologue "source /shared/venv/bin/activate"
    python cluster/jobqueue_slurm.py ... --batch-system pbs          # PBS Pro / Torque

Each batch job is one node-sized worker group: ``cores`` single-threaded worker
processes (``processes = cores``, so one thread per worker: the numeric code is BLAS
bound, and the gathered eigendecomposition raises its own BLAS threads with
threadpoolctl) sharing ``memory``. The scheduler runs inside this script's process.
The kernel store path must be the same on every node (a shared filesystem), or an
fsspec URL such as ``s3://bucket/k.zarr`` readable from the nodes.

The sweep is resumable: if the allocation ends, run the same command again and only
the missing grid points are computed.

This file is a recipe: adapt the queue, account, interface and prologue to your site.
It needs ``dask-jobqueue`` (not a dependency of lswmkc-dask).
"""

from __future__ import annotations

import argparse
import sys


def make_cluster(batch_system="slurm", *, cores=16, memory="64GB", walltime="02:00:00", queue=None,
                 account=None, interface=None, local_directory="/tmp", log_directory="dask-logs",
                 job_extra_directives=(), prologue=(), security=None):
    """A dask-jobqueue cluster whose jobs are node-sized groups of 1-thread workers.

    Parameters
    ----------
    batch_system : {"slurm", "pbs"}
        ``dask_jobqueue.SLURMCluster`` or ``dask_jobqueue.PBSCluster``.
    cores : int
        Cores per job; also the number of worker processes per job (1 thread each).
    memory : str
        Memory per job, shared equally by its worker processes.
    walltime : str
        Wall-clock limit of each job (``HH:MM:SS``).
    queue, account : str, optional
        Partition/queue and accounting project (``#SBATCH -p/-A``, ``#PBS -q/-A``).
    interface : str, optional
        Network interface of the nodes (e.g. ``ib0``) for scheduler and workers.
    local_directory : str
        Node-local scratch for worker spill files.
    log_directory : str
        Where the batch system writes the jobs' stdout/stderr.
    job_extra_directives : sequence of str
        Extra ``#SBATCH``/``#PBS`` lines, e.g. ``["--exclusive"]`` or ``["-l place=excl"]``.
    prologue : sequence of str
        Shell lines run before the worker starts, e.g.
        ``["module load python", "source /shared/venv/bin/activate"]``.
    security : distributed.Security, optional
        TLS for scheduler, workers and client (``protocol="tls"`` is then used).

    Returns
    -------
    dask_jobqueue.JobQueueCluster
    """
    if batch_system == "slurm":
        from dask_jobqueue import SLURMCluster as Cluster
    elif batch_system == "pbs":
        from dask_jobqueue import PBSCluster as Cluster
    else:
        raise ValueError(f"batch_system must be 'slurm' or 'pbs', got {batch_system!r}")
    kwargs = dict(
        cores=cores,
        processes=cores,  # one single-threaded worker process per core
        memory=memory,
        walltime=walltime,
        queue=queue,
        account=account,
        interface=interface,
        local_directory=local_directory,
        log_directory=log_directory,
        job_extra_directives=list(job_extra_directives),
        job_script_prologue=list(prologue),
        # Keep the dashboard/HTTP endpoint of the scheduler on the login node's loopback;
        # reach it with `ssh -L 8787:127.0.0.1:8787 login-node`.
        scheduler_options={"dashboard_address": "127.0.0.1:8787"},
    )
    if security is not None:
        kwargs.update(security=security, protocol="tls")
    return Cluster(**kwargs)


def main(argv=None):
    """Submit the worker jobs, run the sweep on them, release the jobs; returns 0."""
    p = argparse.ArgumentParser(description="LSWMKC alpha sweep on SLURM/PBS via dask-jobqueue")
    p.add_argument("store", nargs="?", help="kernel store (shared path or s3://...) written by `lswmkc prepare`")
    p.add_argument("--dataset", choices=("yale", "handwritten"), help="a shipped data set instead of a store")
    p.add_argument("--output", required=True, help="sweep directory on the shared filesystem (rerun to resume)")
    p.add_argument("--alphas", type=float, nargs="+", help="alpha grid (default 2^0..2^10)")
    p.add_argument("--n-neighbors", type=int, nargs="+", default=[5])
    p.add_argument("--n-clusters", type=int, help="k (default: number of distinct labels)")
    p.add_argument("--mode", choices=("auto", "task", "blockwise"), default="auto")
    p.add_argument("--batch-system", choices=("slurm", "pbs"), default="slurm")
    p.add_argument("--jobs", type=int, default=2, help="batch jobs (nodes) to request")
    p.add_argument("--cores", type=int, default=16, help="cores = worker processes per job")
    p.add_argument("--memory", default="64GB", help="memory per job")
    p.add_argument("--walltime", default="02:00:00")
    p.add_argument("--queue")
    p.add_argument("--account")
    p.add_argument("--interface", help="network interface of the nodes, e.g. ib0")
    p.add_argument("--local-directory", default="/tmp")
    p.add_argument("--job-extra", action="append", default=[], metavar="DIRECTIVE",
                   help='extra #SBATCH/#PBS directive, repeatable; e.g. --job-extra=--exclusive')
    p.add_argument("--prologue", action="append", default=[], metavar="LINE",
                   help="shell line before the worker starts, repeatable; "
                        'e.g. --prologue "source /shared/venv/bin/activate"')
    p.add_argument("--wait", type=float, default=600, help="seconds to wait for the first worker")
    p.add_argument("--tls-ca-file")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    args = p.parse_args(argv)
    if (args.store is None) == (args.dataset is None):
        p.error("give a kernel store or --dataset")

    from distributed import Client, Security

    from lswmkc_dask.engine.cluster import make_security
    from lswmkc_dask.grid.sweep import DEFAULT_ALPHAS, summary_table, sweep

    labels = None
    if args.dataset:
        from lswmkc_dask.datasets import load_dataset

        data, labels = load_dataset(args.dataset)
        description = f"dataset {args.dataset}"
    else:
        data, description = args.store, args.store

    security = None
    if args.tls_ca_file or args.tls_cert or args.tls_key:
        make_security(args.tls_ca_file, args.tls_cert, args.tls_key)  # checks: all three, files exist
        # One certificate (cluster/make_certs.py: node.pem) for the scheduler (in this
        # process), the workers and the client.
        security = Security(
            require_encryption=True, tls_ca_file=args.tls_ca_file,
            tls_client_cert=args.tls_cert, tls_client_key=args.tls_key,
            tls_scheduler_cert=args.tls_cert, tls_scheduler_key=args.tls_key,
            tls_worker_cert=args.tls_cert, tls_worker_key=args.tls_key,
        )

    cluster = make_cluster(
        args.batch_system, cores=args.cores, memory=args.memory, walltime=args.walltime, queue=args.queue,
        account=args.account, interface=args.interface, local_directory=args.local_directory,
        job_extra_directives=args.job_extra, prologue=args.prologue, security=security,
    )
    print(cluster.job_script(), file=sys.stderr)
    try:
        cluster.scale(jobs=args.jobs)
        client_kwargs = {"security": security} if security is not None else {}
        with Client(cluster, **client_kwargs) as client:
            # Jobs may wait in the queue; start as soon as one worker is up (more join later).
            client.wait_for_workers(1, timeout=args.wait)
            summary = sweep(
                data, args.output, n_clusters=args.n_clusters, alphas=args.alphas or DEFAULT_ALPHAS,
                n_neighbors=args.n_neighbors, labels=labels, client=client, mode=args.mode,
                data_description=description,
            )
        print(summary_table(summary["rows"]))
    finally:
        cluster.close()  # cancels the batch jobs
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a fit, a sweep or a comparison runs: :class:`Where` (a client, a scheduler address
or file with its TLS settings, or a LocalCluster of this machine); apart from the grid's
modules so that the parameter table (:mod:`lswmkc_dask._params`) can name it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .cluster import active_client, connect, execution


@dataclass(frozen=True)
class Where:
    """Where a sweep or a comparison runs (every field optional).

    Attributes
    ----------
    client : distributed.Client or str, optional
        A client (used as is and left open), or a scheduler address
        (``tcp://host:8786``, ``tls://...``) to connect to.
    scheduler_file : str, optional
        Scheduler file written by ``dask scheduler --scheduler-file``.
    security : distributed.Security, optional
        TLS settings for the address or the scheduler file.
    n_workers : int, optional
        Start a LocalCluster of this many workers when nothing else is given.
    processes : bool, optional
        As :func:`lswmkc_dask.engine.cluster.execution`.
    """

    client: Any = None
    scheduler_file: str | None = None
    security: Any = None
    n_workers: int | None = None
    processes: bool | None = None

    @classmethod
    def of(cls, client: Any) -> Where:
        """``client`` as a :class:`Where`: itself if it is one, else ``Where(client=client)``."""
        return client if isinstance(client, cls) else cls(client=client)

    def runs_here(self) -> bool:
        """Whether the work runs on this machine, with this process's devices: no client,
        address, scheduler file or active client.

        Returns
        -------
        bool
        """
        return self.client is None and not self.scheduler_file and active_client() is None

    @contextlib.contextmanager
    def open(self, n_bytes: int = 0) -> Iterator[Any]:
        """The client to run on (None: this process), closed on exit if opened here.

        Parameters
        ----------
        n_bytes : int
            Size of the preprocessed kernel stack (bytes): without a client, problems up
            to :data:`lswmkc_dask.engine.cluster.IN_PROCESS_MAX_BYTES` run in this process.

        Yields
        ------
        distributed.Client or None

        Raises
        ------
        ConnectionError, FileNotFoundError, ValueError
            As :func:`lswmkc_dask.engine.cluster.connect`.
        """
        if self.scheduler_file or isinstance(self.client, str):
            address = self.client if isinstance(self.client, str) else None
            with connect(None, address, self.scheduler_file, self.security, self.n_workers) as c:
                yield c
        else:
            with execution(self.client, n_workers=self.n_workers, processes=self.processes, n_bytes=n_bytes) as c:
                yield c

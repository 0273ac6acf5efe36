"""The records of one fit: :class:`FitOptions`, its settings, and :class:`LSWMKCResult`,
what it gives (a leaf module: the routes that run a fit and those that read one import
them from here; exported as ``lswmkc_dask.FitOptions`` and ``lswmkc_dask.LSWMKCResult``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._params import DEFAULTS
from .core.eigen import EigenSpec, eigen_spec


@dataclass(frozen=True)
class FitOptions:
    """The settings of one fit besides the data (each as in :class:`lswmkc_dask.LSWMKC`).

    Attributes
    ----------
    n_clusters : int
        k of the final kernel k-means.
    alpha : float
        The weight of the neighbourhood-kernel term (Eq. 10).
    n_neighbors : int
        c, neighbours of the initial graph (Eqs. 25-28).
    gamma : "auto" or float
        The learned per-sample gamma_i (Eqs. 25-27), or one gamma for every sample.
    max_iter, min_iter : int
        Iteration bounds of the reference stop rule.
    tol : float
        Relative change of K* that stops the loop (after ``min_iter``).
    n_init : int
        k-means starts (the lowest inertia is kept).
    random_state : int or None
        Seed of k-means.
    eig_driver : str or EigenSpec
        The eigen route of Theorem 2 ("auto" or one of
        :data:`lswmkc_dask.core.eigen.EIG_ROUTES`); an
        :class:`~lswmkc_dask.core.eigen.EigenSpec` overrides the precision and device.
    eig_precision : {"float64", "float32", "mixed"}
        Precision of the eigendecomposition of S.
    eig_device : {"cpu", "cuda", "auto"}
        Where the gathered step runs; "auto" must be resolved
        (:func:`lswmkc_dask.engine.route.choose_route`) before :func:`fit_store` or
        :func:`fit_blocks`.
    eig_threads : int or None
        BLAS threads of the gathered step (None: the cores free then).
    snapshot_iterations : tuple of int
        Iterations whose Z_t, factor of K*_t and omega_t are kept (0: the initialisation).
    resident : str or None
        None: the blockwise route; "cuda", "numpy" or "array-api-strict": the whole fit
        in this process on that array namespace's device
        (:func:`lswmkc_dask.engine.device_route.fit_on_device`).
    """

    n_clusters: int
    alpha: float = DEFAULTS["alpha"]  # the defaults are the parameter table's (lswmkc_dask._params)
    n_neighbors: int = DEFAULTS["n_neighbors"]
    gamma: str | float = DEFAULTS["gamma"]
    max_iter: int = DEFAULTS["max_iter"]
    min_iter: int = DEFAULTS["min_iter"]
    tol: float = DEFAULTS["tol"]
    n_init: int = DEFAULTS["n_init"]
    random_state: int | None = DEFAULTS["random_state"]
    eig_driver: str | EigenSpec = DEFAULTS["eig_driver"]
    eig_threads: int | None = DEFAULTS["eig_threads"]
    snapshot_iterations: tuple[int, ...] = ()  # the table's None: none kept
    resident: str | None = None
    eig_precision: str = DEFAULTS["eig_precision"]
    eig_device: str = DEFAULTS["eig_device"]

    def eigen(self) -> str | EigenSpec:
        """The gathered step's route for :func:`lswmkc_dask.engine.solver.iterate`: the plain
        ``eig_driver`` on the CPU in float64, else an :class:`~lswmkc_dask.core.eigen.EigenSpec`.

        Returns
        -------
        str or EigenSpec
        """
        if isinstance(self.eig_driver, EigenSpec):
            return self.eig_driver
        if self.eig_device == "cpu" and self.eig_precision == "float64":
            return self.eig_driver
        return EigenSpec(self.eig_driver, self.eig_precision, self.eig_device)

    @property
    def gathered_device(self) -> str:
        """Where the gathered steps go: "cuda" for a resident fit on CUDA, else the device
        of :meth:`eigen` (what :attr:`LSWMKCResult.eig_device` records).

        Returns
        -------
        str
        """
        return "cuda" if self.resident == "cuda" else str(eigen_spec(self.eigen()).device)


@dataclass
class LSWMKCResult:
    """What one fit gives: labels, the learned graph and kernel, and the fit's record.

    Attributes
    ----------
    labels : ndarray of shape (n,), int
        Cluster of each sample (kernel k-means on the embedding of K*).
    embedding : ndarray of shape (n, n_clusters)
        The spectral embedding of K* that k-means clustered.
    kstar_factor : ndarray of shape (n, r)
        W with K* = W W^T (Theorem 2); r is the rank of K*.
    affinity : scipy.sparse.csr_matrix of shape (n, n)
        The affinity graph Z (rows on the simplex, Theorem 1).
    kernel_weights : ndarray of shape (m,)
        omega of the last iteration (Eq. 12).
    gamma : ndarray of shape (n,)
        gamma_i used (learned, Eqs. 25-27, or the scalar repeated).
    objective, kstar_change : ndarray of shape (n_iter,)
        Eq. (10) and ``||K*_t - K*_{t-1}||_F`` per iteration (NaN at t = 1).
    n_iter : int
    converged : bool
        Whether the stop rule fired before ``max_iter``.
    fit_seconds : float
        Seconds of the iterations (wall clock).
    iteration_seconds, eig_seconds : ndarray of shape (n_iter,)
        Seconds of each iteration and of its eigendecomposition.
    eig_threads : ndarray of shape (n_iter,), int
    eig_drivers : ndarray of shape (n_iter,), object
        The eigen route each gathered step took.
    eig_parts : list of dict, length n_iter
        Seconds of each part of each eigendecomposition, and "columns" (empty dicts
        for routes that do not record them).
    kstar_rank : ndarray of shape (n_iter,), int
    n_restarts : int
        Restarts from a checkpoint after lost workers.
    n_clusters : int
    snapshots : dict or None
        ``{t: (Z_t, W_t or None, omega_t)}`` for the asked iterations, or None.
    execution : str
        Where it ran ("in-process (...)", "Dask: N workers at ADDRESS").
    kernel_names : list of str
        One name per base kernel (empty from :func:`fit_blocks`).
    stage_seconds : dict of str to float
        Wall seconds of each stage: "start", "initialise" (:func:`fit_store` only),
        "iterations", "cluster" (embedding and k-means), "gather" (Z to the caller).
    device_transfers : dict of str to int or None
        Resident route only: bytes copied to and from the device, and the largest copy
        (:func:`lswmkc_dask.engine.device_route.transfer_record`).
    eig_device : str
        Where the gathered steps were sent: "cpu" or "cuda" (:attr:`FitOptions.gathered_device`).
    """

    labels: np.ndarray
    embedding: np.ndarray
    kstar_factor: np.ndarray
    affinity: sp.csr_matrix
    kernel_weights: np.ndarray
    gamma: np.ndarray
    objective: np.ndarray
    kstar_change: np.ndarray
    n_iter: int
    converged: bool
    fit_seconds: float
    iteration_seconds: np.ndarray
    eig_seconds: np.ndarray
    eig_threads: np.ndarray
    eig_drivers: np.ndarray
    eig_parts: list
    kstar_rank: np.ndarray
    n_restarts: int
    n_clusters: int
    snapshots: dict | None = None
    execution: str = ""
    kernel_names: list[str] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    device_transfers: dict[str, int] | None = None
    eig_device: str = "cpu"

    @classmethod
    def from_fit(cls, fit: Any, options: FitOptions, *, labels: np.ndarray, embedding: np.ndarray,
                 kstar_factor: np.ndarray, affinity: sp.csr_matrix, gamma: Any, stage_seconds: dict[str, float],
                 execution: str = "", device_transfers: dict[str, int] | None = None) -> LSWMKCResult:
        """The record of one fit, from its iterations and its clustering (every route builds it here).

        Parameters
        ----------
        fit : lswmkc_dask.engine.solver.FitResult
            The iterations (weights, per-iteration columns, restarts, snapshots).
        options : FitOptions
            The fit's settings.
        labels, embedding, kstar_factor, affinity, gamma, stage_seconds, execution, device_transfers
            As the attributes.

        Returns
        -------
        LSWMKCResult
            ``kernel_names`` empty (the caller knows the store).
        """
        return cls(
            labels=labels,
            embedding=embedding,
            kstar_factor=kstar_factor,
            affinity=affinity,
            kernel_weights=np.asarray(fit.weights),
            gamma=np.asarray(gamma),
            objective=np.asarray(fit.objective),
            kstar_change=np.asarray(fit.kstar_change),
            n_iter=int(fit.n_iter),
            converged=bool(fit.converged),
            fit_seconds=float(fit.seconds),
            iteration_seconds=np.asarray(fit.iteration_seconds),
            eig_seconds=np.asarray(fit.eig_seconds),
            eig_threads=np.asarray(fit.eig_threads, dtype=np.int64),
            eig_drivers=np.asarray(fit.eig_drivers, dtype=object),
            eig_parts=[dict(p) for p in fit.eig_parts],
            kstar_rank=np.asarray(fit.rank),
            n_restarts=int(fit.recoveries),
            n_clusters=int(options.n_clusters),
            snapshots=dict(sorted(fit.snapshots.items())) if options.snapshot_iterations else None,
            execution=execution,
            stage_seconds=stage_seconds,
            device_transfers=device_transfers,
            eig_device=options.gathered_device,
        )

    def fitted_attributes(self, snapshot_iterations: Any = None) -> dict[str, Any]:
        """The fitted attributes of :class:`lswmkc_dask.LSWMKC` this record gives (``labels_``, ...).

        Parameters
        ----------
        snapshot_iterations : sequence of int or None
            The fit's parameter: ``snapshots_`` (a dict, empty when none was kept) only when not None.

        Returns
        -------
        dict of str to object
            By attribute name; ``kernel_names_`` and ``execution_`` only when known.
        """
        names = ("labels", "embedding", "kstar_factor", "affinity", "kernel_weights", "gamma", "objective",
                 "kstar_change", "n_iter", "converged", "fit_seconds", "iteration_seconds", "eig_seconds",
                 "eig_threads", "eig_drivers", "eig_parts", "n_restarts", "kstar_rank")
        out = {name + "_": getattr(self, name) for name in names}
        out.update(n_clusters_=int(self.n_clusters), stage_seconds_=dict(self.stage_seconds))
        if self.kernel_names:
            out["kernel_names_"] = np.asarray(self.kernel_names, dtype=object)
        if self.execution:
            out["execution_"] = self.execution
        if snapshot_iterations is not None:
            out["snapshots_"] = dict(self.snapshots or {})
        return out

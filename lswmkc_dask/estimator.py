"""LSWMKC as a scikit-learn style estimator running on Dask."""

from __future__ import annotations

import math
import numbers
import os
import sys
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin

from .cluster import connect
from .io import KernelStore, open_store, prepare
from .metrics import PROTOCOLS, evaluate, evaluate_embedding
from .postprocess import cluster_factor
from .solver import DaskRunner, gather_affinity, initialise, iterate, kernel_blocks

__all__ = ["LSWMKC", "as_store", "check_hyperparameters"]


def as_store(X, block_rows=None):
    """The kernel store for ``X``.

    Parameters
    ----------
    X : KernelStore, str or Path, array_like of shape (m, n, n) or list of (n, n) arrays
        A store (or its path, a directory written by :func:`lswmkc_dask.prepare`), a
        kernel file (``.mat``/``.npz``), or in-memory raw kernels. Anything but a store
        is preprocessed (docs/algorithm.md section 0) into an in-memory store.
    block_rows : int, optional
        Rows per block for a store made here.

    Returns
    -------
    KernelStore
    """
    if isinstance(X, KernelStore):
        return X
    if isinstance(X, (str, os.PathLike)) and (Path(X).is_dir() or "://" in str(X)):
        return open_store(X)
    return prepare(X, None, block_rows=block_rows)


def check_hyperparameters(n_samples, n_clusters=None, alpha=None, n_neighbors=None):
    """Validate LSWMKC hyper-parameters against the number of samples.

    Parameters
    ----------
    n_samples : int
    n_clusters : int, optional
        Must satisfy ``2 <= n_clusters <= n``.
    alpha : float, optional
        Must be finite and ``>= 0``.
    n_neighbors : int, optional
        c, must satisfy ``1 <= c < n - 1``.

    Raises
    ------
    ValueError
        With the offending value and the allowed range.
    """
    if n_clusters is not None:
        if not isinstance(n_clusters, numbers.Integral) or not 2 <= n_clusters <= n_samples:
            raise ValueError(f"n_clusters must be an integer in [2, n_samples={n_samples}], got {n_clusters!r}")
    if alpha is not None:
        if not isinstance(alpha, numbers.Real) or not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if n_neighbors is not None:
        if not isinstance(n_neighbors, numbers.Integral) or not 1 <= n_neighbors < n_samples - 1:
            raise ValueError(
                f"n_neighbors must be an integer in [1, n_samples - 2 = {n_samples - 2}], got {n_neighbors!r}"
            )


class LSWMKC(ClusterMixin, BaseEstimator):
    """Local Sample-weighted Multiple Kernel Clustering (Li et al., IEEE TNNLS).

    Learns kernel weights omega (Eqs. 11-12), a consensus affinity graph Z whose rows
    are projected onto the simplex (Eqs. 13-16, Theorem 1) and a neighbourhood kernel
    K* (Theorem 2), alternately, from the initialisation of Eqs. (25)-(28); then
    clusters K* with kernel k-means (docs/algorithm.md section 3). Row-block steps run on
    Dask workers; the eigendecomposition and the k-means run as tasks on one worker.

    Parameters
    ----------
    n_clusters : int
        k, number of clusters, ``2 <= k <= n``.
    alpha : float, default 1.0
        Balance hyper-parameter of the neighbourhood-kernel term (Eq. 10), ``>= 0``.
    n_neighbors : int, default 5
        c, neighbours per sample in the initial graph (Eq. 28), ``1 <= c <= n - 2``.
    max_iter : int, default 100
        Iteration cap (the reference code stops at 101).
    tol : float, default 1e-3
        Stop when ``|f_t - f_{t-1}| / ||K*_t||_F < tol`` with
        ``f_t = ||K*_t - K*_{t-1}||_F``, once ``t >= min_iter``.
    n_init : int, default 50
        k-means starts for ``labels_`` (lowest inertia kept) and runs of the paper
        protocol in :meth:`evaluate`.
    random_state : int or None
        Seed of the k-means starts.
    client : distributed.Client, optional
        Run on this client. Default: start a loopback-only LocalCluster with one
        single-threaded worker per core, and close it after ``fit``.
    block_rows : int, optional
        Rows per solver block (default: one block per worker in whole store chunks,
        at most 256 MiB each; see :func:`solver_block_rows`), and the chunking of the
        in-memory store made from array input.
    min_iter : int, default 20
        The stop rule is not tested earlier (reference: 20).
    n_workers : int, optional
        Workers of the private LocalCluster.
    cache_kernels : bool, default True
        Keep the kernel row blocks in worker memory for the whole fit (read once);
        False re-reads them from the store every iteration.
    eig_driver : {"auto", "evd", "subset"}, default "auto"
        LAPACK route for the positive eigenpairs of ``(Z + Z^T)/2``: "subset"
        (``subset_by_value=(0, inf)``) while K* has rank <= 25% of n, else the full
        divide-and-conquer "evd", which is faster for a large positive part.
    verbose : int, default 0
        1: one line per iteration (iteration, objective, change of K*, seconds) on
        stderr.

    Attributes
    ----------
    labels_ : ndarray of shape (n,)
        Cluster of each sample (k-means on K*, lowest inertia of ``n_init`` starts).
    kernel_weights_ : ndarray of shape (m,)
        omega of the last iteration, unit 2-norm (Eq. 12).
    affinity_ : scipy.sparse.csr_matrix of shape (n, n)
        The consensus affinity graph Z (rows on the simplex, zero diagonal).
    kstar_factor_ : ndarray of shape (n, r)
        W with ``K* = W W^T`` (r positive eigenvalues).
    neighborhood_kernel_ : ndarray of shape (n, n)
        K*, formed from ``kstar_factor_`` when read.
    embedding_ : ndarray of shape (n, n_clusters)
        Row-normalised top eigenvectors of the centred, normalised K*.
    gamma_ : ndarray of shape (n,)
        gamma_i of Eq. (27).
    objective_ : ndarray of shape (n_iter_,)
        Eq. (10) after each iteration.
    kstar_change_ : ndarray of shape (n_iter_,)
        ``||K*_t - K*_{t-1}||_F`` (NaN at t = 1).
    n_iter_ : int
    converged_ : bool
    fit_seconds_ : float
        Wall time of the iterations (excludes start-up and k-means).
    iteration_seconds_ : ndarray of shape (n_iter_,)
        Wall seconds of each iteration.
    eig_seconds_ : ndarray of shape (n_iter_,)
        Seconds of the eigendecomposition within each iteration.
    kstar_rank_ : ndarray of shape (n_iter_,)
        Number of positive eigenvalues of ``(Z + Z^T)/2`` per iteration.
    """

    def __init__(
        self,
        n_clusters,
        alpha=1.0,
        n_neighbors=5,
        max_iter=100,
        tol=1e-3,
        n_init=50,
        random_state=None,
        client=None,
        block_rows=None,
        min_iter=20,
        n_workers=None,
        cache_kernels=True,
        eig_driver="auto",
        verbose=0,
    ):
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state
        self.client = client
        self.block_rows = block_rows
        self.min_iter = min_iter
        self.n_workers = n_workers
        self.cache_kernels = cache_kernels
        self.eig_driver = eig_driver
        self.verbose = verbose

    def _progress(self, t, obj, change, seconds):
        if self.verbose:
            print(f"iter {t:3d}  objective {obj: .10g}  ||K*_t - K*_t-1|| {change:.4g}  {seconds:.2f} s", file=sys.stderr)

    def fit(self, X, y=None):
        """Fit LSWMKC to base kernels.

        Parameters
        ----------
        X : array_like of shape (m, n, n), list of (n, n) arrays, KernelStore, or str
            Base kernels in memory, a kernel store (or its path), or a kernel file.
            Anything but a store is preprocessed first (docs/algorithm.md section 0).
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Hyper-parameters out of range (n_clusters, alpha, n_neighbors).
        KernelInputError, FileNotFoundError
            Unusable kernels (see :func:`lswmkc_dask.prepare`).
        """
        self._check_params()
        store = as_store(X, self.block_rows)
        check_hyperparameters(store.n_samples, self.n_clusters, self.alpha, self.n_neighbors)
        with connect(self.client, n_workers=self.n_workers) as client:
            runner = DaskRunner(client)
            blocks, starts = kernel_blocks(client, store, self.block_rows, self.cache_kernels)
            init = initialise(runner, blocks, starts, store.n_kernels, self.n_neighbors)
            try:
                self._fit_runner(runner, blocks, init)
            finally:
                runner.release(blocks, init.z_blocks, init.gamma_blocks)
        return self

    def _check_params(self):
        check_hyperparameters(3, alpha=self.alpha)
        if not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        if not isinstance(self.min_iter, numbers.Integral) or self.min_iter < 1:
            raise ValueError(f"min_iter must be a positive integer, got {self.min_iter!r}")
        if not (isinstance(self.tol, numbers.Real) and self.tol >= 0):
            raise ValueError(f"tol must be a number >= 0, got {self.tol!r}")

    def _fit_runner(self, runner, blocks, init, eig_threads=None):
        """Iterate from a (shared) initialisation, cluster K*, set the attributes.

        ``runner`` is a DaskRunner (blockwise on the cluster) or a LocalRunner (the
        whole fit inside one task of a sweep); ``init`` may be shared by many alphas.
        """
        result = iterate(
            runner,
            blocks,
            init,
            float(self.alpha),
            max_iter=self.max_iter,
            min_iter=self.min_iter,
            tol=self.tol,
            eig_driver=self.eig_driver,
            eig_threads=eig_threads,
            callback=self._progress,
        )
        clustered = runner.submit(
            cluster_factor, result.factor, self.n_clusters, self.n_init, self.random_state, eig_threads
        )
        try:
            self.labels_, self.embedding_ = runner.fetch(clustered)
            self.affinity_ = gather_affinity(runner, result.z_blocks)
            self.kstar_factor_ = runner.fetch(result.factor)
        finally:
            runner.release(clustered, result.factor, result.z_blocks)
        self._set_result(result, init.gamma)
        return self

    def _set_result(self, result, gamma):
        self.kernel_weights_ = np.asarray(result.weights)
        self.gamma_ = np.asarray(gamma)
        self.objective_ = np.asarray(result.objective)
        self.kstar_change_ = np.asarray(result.kstar_change)
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)
        self.fit_seconds_ = float(result.seconds)
        self.iteration_seconds_ = np.asarray(result.iteration_seconds)
        self.eig_seconds_ = np.asarray(result.eig_seconds)
        self.kstar_rank_ = np.asarray(result.rank)

    @property
    def neighborhood_kernel_(self):
        """K* of shape (n, n), formed as ``W W^T`` from ``kstar_factor_`` (Theorem 2)."""
        if not hasattr(self, "kstar_factor_"):
            raise AttributeError("neighborhood_kernel_ is available after fit")
        return self.kstar_factor_ @ self.kstar_factor_.T

    def evaluate(self, labels_true, protocol="honest"):
        """ACC, NMI, Purity and ARI of the fitted clustering.

        Parameters
        ----------
        labels_true : array_like of shape (n,)
        protocol : {"honest", "paper"}
            ``"honest"``: the metrics of ``labels_``. ``"paper"``: the reference
            protocol, each metric the maximum over ``n_init`` single-start k-means
            runs on ``embedding_`` (docs/algorithm.md section 3).

        Returns
        -------
        dict
            ``{"ACC", "NMI", "Purity", "ARI"}`` -> float.

        Raises
        ------
        ValueError
            Unknown protocol, or labels of another length.
        """
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if not hasattr(self, "labels_"):
            raise AttributeError("call fit before evaluate")
        if protocol == "honest":
            return evaluate(labels_true, self.labels_)
        return evaluate_embedding(
            self.embedding_, labels_true, self.n_clusters, "paper", n_init=self.n_init, random_state=self.random_state
        )

"""What every compared method shares: input checks, the common final clustering, the estimator face.

A method is a subclass of :class:`MultipleKernelClustering` that implements ``_solve``: from the
preprocessed base kernels (m, n, n) it returns a :class:`Solution` (a kernel to cluster, an
embedding H to cluster, or labels the method assigns itself), plus its kernel weights, objective
history and iteration count. :meth:`MultipleKernelClustering.fit` ends every method as LSWMKC ends
(docs/algorithm.md section 3): the kernel's spectral embedding (or the method's own H, rows to
unit length) and the k-means of lowest inertia of ``n_init`` k-means++ starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.linalg import eigh
from sklearn.base import BaseEstimator, ClusterMixin

from .._threads import blas_threads, limit_blas, worker_threads
from ..engine.postprocess import kmeans_best_of, spectral_embedding
from ..engine.route import open_kernels
from ..errors import KernelInputError, Param, ParameterError


@dataclass
class Solution:
    """What a method's ``_solve`` returns; exactly one of ``kernel``, ``embedding``, ``labels``."""

    kernel_weights: np.ndarray
    objective: list[float] = field(default_factory=list)
    n_iter: int = 1
    converged: bool = True
    kernel: np.ndarray | None = None  # (n, n): clustered by its spectral embedding
    embedding: np.ndarray | None = None  # (n, c): rows to unit length, then k-means
    labels: np.ndarray | None = None  # (n,): the method's own assignment (e.g. OPLFMVC's argmax)
    extra: dict[str, Any] = field(default_factory=dict)


def check_kernels(kernels: Any, name: str = "kernels") -> np.ndarray:
    """Base kernels as a float64 (m, n, n) array, or a :class:`KernelInputError` naming the kernel."""
    k = np.asarray(kernels)
    if np.iscomplexobj(k):
        raise KernelInputError(f"{name}: complex values; base kernels must be real")
    k = np.asarray(k, dtype=np.float64)
    if k.ndim != 3 or k.shape[1] != k.shape[2] or k.shape[0] < 1 or k.shape[1] < 2:
        raise KernelInputError(f"{name} must have shape (n_kernels, n_samples, n_samples), got {k.shape}")
    for p in range(k.shape[0]):
        if not np.isfinite(k[p]).all():
            i, j = np.argwhere(~np.isfinite(k[p]))[0]
            raise KernelInputError(f"{name}: kernel {p} has a non-finite value at sample ({i}, {j})")
    return k


def unit_rows(h: np.ndarray) -> np.ndarray:
    """``h`` (n, c) with rows scaled to unit length (zero rows stay zero), as the spectral embedding ends."""
    h = np.array(h, dtype=np.float64)
    norms = np.linalg.norm(h, axis=1, keepdims=True)
    zero = norms[:, 0] <= 1e-10
    norms[zero] = 1.0
    h /= norms
    h[zero] = 0.0
    return h


def top_eigenpairs(kernel: np.ndarray, k: int, *, symmetrise: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues of a symmetric kernel and their eigenvectors (relaxed kernel k-means).

    ``max_{H^T H = I_k} Tr(H^T K H)`` is attained by these eigenvectors (Ky Fan), with value
    the sum of the eigenvalues: the H step of MKKM, LMKKM, MKKM-MR, LKAM, ONKC, SimpleMKKM and
    LSMKKM and the base partitions of LF-MVC and OPLFMVC (the authors' ``eigs(K, k, 'la')``).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        Symmetric; only its lower triangle is read unless ``symmetrise``.
    k : int
        1 <= k <= n.
    symmetrise : bool
        Decompose ``(K + K^T) / 2`` (as the authors' code of MKKM-MR, LKAM, ONKC, LF-MVC and
        OPLFMVC) in place of the lower triangle of K.

    Returns
    -------
    values : ndarray of shape (k,)
        Ascending.
    vectors : ndarray of shape (n, k)
        Orthonormal columns, in the order of ``values`` (``vectors[:, ::-1]``: largest first);
        signs and, for a repeated eigenvalue, the basis are LAPACK's.

    Raises
    ------
    ValueError
        ``k`` outside ``[1, n]``.
    """
    n = kernel.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"n_clusters must be in [1, {n}] (the number of samples), got {k}")
    if symmetrise:
        kernel = 0.5 * (kernel + kernel.T)
    return eigh(kernel, subset_by_index=(n - k, n - 1), check_finite=False)


def stop_rule(objective: list[float], tol: float, *, min_iter: int = 3, scale: int = -2) -> bool:
    """The authors' stop rule: ``t >= min_iter`` and ``|J_t - J_{t-1}| / |J_s| < tol``.

    ``J_s`` is ``J_{t-1}`` (``scale=-2``: MKKM, MKKM-MR, LKAM, ONKC, LF-MVC) or ``J_t``
    (``scale=-1``: OPLFMVC); a zero ``J_s`` never stops.

    Parameters
    ----------
    objective : list of float
        ``J_1 .. J_t``.
    tol : float
    min_iter : int
        The least t that may stop (at least 2).
    scale : {-2, -1}

    Returns
    -------
    bool
    """
    if len(objective) < max(min_iter, 2) or objective[scale] == 0:
        return False
    return bool(abs(objective[-1] - objective[-2]) / abs(objective[scale]) < tol)


class MultipleKernelClustering(ClusterMixin, BaseEstimator):
    """Base class of the compared methods (not used directly).

    Subclasses define ``__init__`` with their hyper-parameters (each stored under its own
    name, scikit-learn style, ``n_clusters`` and ``max_iter`` among them),
    ``_solve(kernels) -> Solution``, :attr:`name`, :attr:`param_grid` and the ranges
    :attr:`positive_params`, :attr:`non_negative_params` that :meth:`check_params` checks.
    """

    #: the method's name in ``lswmkc compare --methods`` (lower case)
    name: ClassVar[str] = ""
    #: the hyper-parameter grid of the method's paper or demo: {parameter: values}
    param_grid: ClassVar[dict[str, tuple]] = {}
    #: hyper-parameters that must be > 0 (NaN refused), checked by :meth:`check_params`
    positive_params: ClassVar[tuple[str, ...]] = ()
    #: hyper-parameters that must be >= 0 (NaN refused), checked by :meth:`check_params`
    non_negative_params: ClassVar[tuple[str, ...]] = ()

    def _solve(self, kernels: np.ndarray) -> Solution:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_params(self, n_samples: int) -> None:
        """The checks every method shares, before :meth:`fit` solves.

        Parameters
        ----------
        n_samples : int
            n, the bound of ``n_clusters``.

        Raises
        ------
        ParameterError
            ``n_clusters`` outside 1..n, ``max_iter`` below 1, or a hyper-parameter of
            :attr:`positive_params` not > 0 or of :attr:`non_negative_params` not >= 0 (each
            named with its value).
        """
        if not 1 <= int(self.n_clusters) <= n_samples:
            raise ParameterError("{} must be between 1 and the number of samples ({})",
                                 Param("n_clusters", self.n_clusters), n_samples)
        if int(self.max_iter) < 1:
            raise ParameterError("{} must be at least 1", Param("max_iter", self.max_iter))
        for key in self.positive_params:
            if not float(getattr(self, key)) > 0:
                raise ParameterError("{} must be positive", Param(key, getattr(self, key)))
        for key in self.non_negative_params:
            if not float(getattr(self, key)) >= 0:
                raise ParameterError("{} must be non-negative", Param(key, getattr(self, key)))

    def fit(self, kernels: Any, y: Any = None) -> MultipleKernelClustering:
        """Learn the method's combination of the base kernels and cluster it.

        Parameters
        ----------
        kernels : array_like of shape (n_kernels, n_samples, n_samples), or as LSWMKC.fit takes them
            Base kernels. With ``preprocess=True`` (the default) they are read as
            :meth:`lswmkc_dask.LSWMKC.fit` reads them (:func:`lswmkc_dask.engine.route.open_kernels`:
            also a kernel store or file): symmetrised, centred and normalised (docs/algorithm.md
            section 0). With ``preprocess=False``, an array taken as it is.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        KernelInputError
            Kernels of the wrong shape, complex, or with a non-finite entry (named by kernel
            and sample); through preprocessing, asymmetric kernels or a non-positive diagonal
            (as :func:`lswmkc_dask.prepare`).
        ParameterError
            A hyper-parameter out of its range (:meth:`check_params`, and the method's own).

        Warns
        -----
        DegenerateKernelWarning, DuplicateKernelWarning
            As :func:`lswmkc_dask.prepare` (with ``preprocess=True``).
        """
        if getattr(self, "preprocess", True):  # the input step of every entry point
            stack = open_kernels(kernels)
            k = stack.read_rows(0, stack.n_samples)
        else:
            k = check_kernels(kernels)
        self.check_params(k.shape[1])
        t0 = time.perf_counter()
        # one thread below n = 1000 (small dense steps); above, the free cores, at most the Dask worker's threads
        with limit_blas(blas_threads(None, worker_threads(), k.shape[1])):
            sol = self._solve(k)
        self.seconds_ = time.perf_counter() - t0
        self.kernel_weights_ = np.asarray(sol.kernel_weights, dtype=np.float64)
        self.objective_ = [float(v) for v in sol.objective]
        self.n_iter_ = int(sol.n_iter)
        self.converged_ = bool(sol.converged)
        self.extra_ = dict(sol.extra)
        n_clusters = int(self.n_clusters)
        t1 = time.perf_counter()
        self.embedding_: np.ndarray | None
        if sol.kernel is not None:
            self.embedding_ = spectral_embedding(sol.kernel, n_clusters)
        elif sol.embedding is not None:
            self.embedding_ = unit_rows(sol.embedding)
        else:
            self.embedding_ = None
        if sol.labels is not None:
            self.labels_ = np.asarray(sol.labels, dtype=np.int64)
        else:
            self.labels_, _ = kmeans_best_of(self.embedding_, n_clusters, int(getattr(self, "n_init", 50)),
                                             getattr(self, "random_state", None))
        self.cluster_seconds_ = time.perf_counter() - t1
        return self

    def fit_predict(self, kernels: Any, y: Any = None) -> np.ndarray:
        """:meth:`fit`, then ``labels_`` (shape (n_samples,))."""
        return self.fit(kernels).labels_

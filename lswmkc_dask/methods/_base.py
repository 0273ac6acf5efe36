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
from sklearn.base import BaseEstimator, ClusterMixin

from ..engine.postprocess import kmeans_best_of, spectral_embedding
from ..errors import KernelInputError
from ..kernels.features import preprocess_kernels


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


class MultipleKernelClustering(ClusterMixin, BaseEstimator):
    """Base class of the compared methods (not used directly).

    Subclasses define ``__init__`` with their hyper-parameters (each stored under its own
    name, scikit-learn style), ``_solve(kernels) -> Solution``, :attr:`name`, :attr:`param_grid`.
    """

    #: the method's name in ``lswmkc compare --methods`` (lower case)
    name: ClassVar[str] = ""
    #: the hyper-parameter grid of the method's paper or demo: {parameter: values}
    param_grid: ClassVar[dict[str, tuple]] = {}

    def _solve(self, kernels: np.ndarray) -> Solution:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, kernels: Any, y: Any = None) -> MultipleKernelClustering:
        """Learn the method's combination of the base kernels and cluster it.

        Parameters
        ----------
        kernels : array_like of shape (n_kernels, n_samples, n_samples)
            Base kernels. With ``preprocess=True`` (the default) they are symmetrised,
            centred and normalised first (docs/algorithm.md section 0), as LSWMKC does.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        KernelInputError
            Kernels of the wrong shape, complex, or with a non-finite entry (named by kernel
            and sample); through preprocessing, asymmetric kernels or a non-positive diagonal.
        """
        k = check_kernels(kernels)
        if getattr(self, "preprocess", True):
            k = preprocess_kernels(k)
        t0 = time.perf_counter()
        sol = self._solve(k)
        self.seconds_ = time.perf_counter() - t0
        self.kernel_weights_ = np.asarray(sol.kernel_weights, dtype=np.float64)
        self.objective_ = [float(v) for v in sol.objective]
        self.n_iter_ = int(sol.n_iter)
        self.converged_ = bool(sol.converged)
        self.extra_ = dict(sol.extra)
        n_clusters = int(self.n_clusters)
        t1 = time.perf_counter()
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

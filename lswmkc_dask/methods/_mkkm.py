"""MKKM: multiple kernel k-means with the closed-form weight update.

Huang, Chuang and Chen, "Multiple kernel fuzzy clustering", IEEE Transactions on Fuzzy
Systems, 2012, in the version that Liu et al. ship with SimpleMKKM (GitHub
``xinwangliu/SimpleMKKMcodes``, ``mkkmeans_train``): the combined kernel is
``K_theta = sum_p theta_p^2 K_p`` on the simplex, and the objective

    min_{theta, H}  Tr(K_theta (I - H H^T))   s.t.  H^T H = I_k,  theta >= 0,  sum_p theta_p = 1

(Eq. (5) of Li et al., "Local Sample-weighted Multiple Kernel Clustering with Consensus
Discriminative Graph", IEEE TNNLS, 2022; Eqs. (1)-(2) of Liu, Liu, Peng, Zhang, Hu, "Sample
Adaptive Localized Simple Multiple Kernel K-means", manuscript submitted to IEEE TPAMI,
2022) is minimised alternately: H is the top-k eigenvectors of ``K_theta`` (kernel k-means
relaxed), and, with H fixed, the weights minimise ``sum_p theta_p^2 a_p``
(``a_p = Tr(K_p (I - H H^T))``) over the simplex, whose Lagrange condition
``2 theta_p a_p = lambda`` gives ``theta_p = (1/a_p) / sum_q (1/a_q)``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.equations import combine_kernels
from ._base import MultipleKernelClustering, Solution, stop_rule, top_eigenpairs

#: The authors' loop runs at least this many iterations before it may stop.
MIN_ITER = 3


def projected_traces(kernels: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``Tr(H^T K_p H)`` for every base kernel (batched matmul, no n x n product per kernel).

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    h : ndarray of shape (n, k)

    Returns
    -------
    ndarray of shape (m,)
    """
    return np.sum(h * (kernels @ h), axis=(1, 2))


def residual_traces(kernels: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``a_p = Tr(K_p (I - H H^T)) = Tr(K_p) - Tr(H^T K_p H)`` per kernel (MKKM's a_p, MKKM-MR's Z).

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    h : ndarray of shape (n, k)
        Orthonormal columns.

    Returns
    -------
    ndarray of shape (m,)
    """
    return np.trace(kernels, axis1=1, axis2=2) - projected_traces(kernels, h)


def truncate_weights(gamma: np.ndarray, cutoff: float) -> np.ndarray:
    """Weights below ``cutoff`` set to zero and the rest renormalised to sum 1 (the authors' step).

    MKKM (cut-off: machine epsilon), MKKM-MR and LKAM (1e-6), ONKC (1e-8), SimpleMKKM and
    LSMKKM (``numerical_precision``).

    Parameters
    ----------
    gamma : ndarray of shape (m,)
        Non-negative, not all below ``cutoff``.
    cutoff : float

    Returns
    -------
    ndarray of shape (m,)
        On the simplex.
    """
    out = np.where(gamma < cutoff, 0.0, gamma)
    return out / out.sum()


def mkkm_weights(kernels: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MKKM's weight step: the minimiser of ``sum_p theta_p^2 a_p`` over the simplex for a fixed H.

    ``a_p = Tr(K_p (I - H H^T)) = Tr(K_p) - Tr(H^T K_p H)`` (:func:`residual_traces`); the
    minimiser is ``theta_p = (1/a_p) / sum_q (1/a_q)`` (Huang et al., IEEE TFS 2012; Eq. (2)
    of Liu et al.'s "Sample Adaptive Localized Simple Multiple Kernel K-means"). As the
    authors' code (``updateabsentkernelweightsV3``), weights below machine epsilon are set to
    zero and the rest renormalised. Where some ``a_p <= 0`` (a kernel of rank <= k, which
    1/a_p cannot weigh), those kernels share the weight equally: the limit of the formula.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    h : ndarray of shape (n, k)
        Orthonormal columns.

    Returns
    -------
    theta : ndarray of shape (m,)
        On the simplex.
    a : ndarray of shape (m,)
        ``Tr(K_p (I - H H^T))`` per kernel.
    """
    a = residual_traces(kernels, h)
    theta = (a <= 0).astype(np.float64) if np.any(a <= 0) else 1.0 / a
    return truncate_weights(theta / theta.sum(), np.finfo(np.float64).eps), a


class MKKM(MultipleKernelClustering):
    """Multiple kernel k-means (Huang, Chuang and Chen, IEEE TFS 2012), closed-form weights.

    Alternates H = the top-k eigenvectors of ``K_theta = sum_p theta_p^2 K_p`` and
    :func:`mkkm_weights`, from ``theta = 1/m``, as the authors' ``mkkmeans_train`` (GitHub
    ``xinwangliu/SimpleMKKMcodes``). The objective of iteration t is
    ``Tr(K_{theta_t} (I - H_t H_t^T))`` with the weights just updated from ``H_t`` (so it
    does not increase: both steps are exact minimisers). The loop stops after iteration t
    when ``t >= 3`` and ``|J_{t-1} - J_t| / J_{t-1} < tol``, or at ``t = max_iter``.

    The clustered embedding is the authors' returned H: the eigenvectors of the kernel of the
    last iteration (the weights before its update), rows to unit length, then k-means.

    Parameters
    ----------
    n_clusters : int
        k.
    max_iter : int
        Iteration cap (51: the authors stop when ``t > 50``).
    tol : float
        Relative change of the objective that stops the loop (1e-4).
    preprocess : bool
        Centre and normalise the kernels first (as the authors' demo, ``kcenter``, ``knorm``).
    n_init : int
        k-means starts of the final clustering.
    random_state : int or None
        Seed of the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        theta (on the simplex; the combined kernel is ``sum_p theta_p^2 K_p``), after the
        last update.
    objective_ : list of float
        ``J_t`` per iteration.
    n_iter_ : int
    converged_ : bool
        False when the cap stopped the loop.
    extra_ : dict
        ``theta_history`` (n_iter, m): theta after each iteration's update;
        ``eigenvalues`` (k,): the top eigenvalues of the kernel whose eigenvectors are the
        embedding (ascending); ``h`` (n, k): those eigenvectors (the embedding before its
        rows are normalised).
    labels_ : ndarray of shape (n,)

    Raises
    ------
    ParameterError
        From :meth:`fit`: ``n_clusters`` outside 1..n or ``max_iter < 1``.
    """

    name: ClassVar[str] = "mkkm"
    param_grid: ClassVar[dict[str, tuple]] = {}

    def __init__(self, n_clusters: int = 2, *, max_iter: int = 51, tol: float = 1e-4, preprocess: bool = True,
                 n_init: int = 50, random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def _solve(self, kernels: np.ndarray) -> Solution:
        m = kernels.shape[0]
        k = int(self.n_clusters)
        theta = np.full(m, 1.0 / m)
        objective: list[float] = []
        history = []
        converged = False
        while True:
            values, h = top_eigenpairs(combine_kernels(kernels, theta**2), k)
            theta, a = mkkm_weights(kernels, h)
            objective.append(float(np.dot(theta**2, a)))
            history.append(theta)
            if stop_rule(objective, float(self.tol), min_iter=MIN_ITER):
                converged = True
                break
            if len(objective) >= int(self.max_iter):
                break
        return Solution(kernel_weights=theta, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=h, extra={"theta_history": np.array(history), "eigenvalues": values, "h": h})

"""ONKC: optimal neighbourhood kernel clustering with multiple kernels.

Liu, Zhou, Wang, Wang, Zhu and Yin, "Optimal Neighborhood Kernel Clustering with Multiple
Kernels", Proceedings of the AAAI Conference on Artificial Intelligence (AAAI-17), 2017.
The clustering kernel G is not the combined kernel itself but a positive semi-definite
kernel in its neighbourhood (the paper's objective):

    min_{H, G, gamma}  Tr(G (I - H H^T)) + (rho/2) ||G - K_gamma||_F^2 + (lambda/2) gamma^T M gamma
    s.t.  H^T H = I_k,  G >= 0 (PSD),  gamma >= 0,  sum_p gamma_p = 1,

with ``K_gamma = sum_p gamma_p K_p`` (linear weights, as the authors' code) and
``M_pq = Tr(K_p^T K_q)``. The three blocks are minimised in turn: H is the top-k
eigenvectors of G; gamma solves the QP ``min 0.5 (rho + lambda) gamma^T M gamma
- rho sum_p gamma_p Tr(K_p G)`` over the simplex; G is the projection of
``K_gamma - (1/rho)(I - H H^T)`` onto the PSD cone (its eigenvalues below machine epsilon
set to zero).

As the authors' code (GitHub ``Tracesource/ONKC``, ``myoptimalNeighborhoodkernelclustering``
with ``updataGamma``, ``updateG``, ``calmyObj``): the start is gamma = 1/m, H from
``K_gamma``, G from that H; each iteration updates H (from G), gamma (weights below 1e-8
zeroed and renormalised), then G, and records the objective with all three new; it stops
after iteration t when ``t >= 3`` and the relative change is below 1e-3, or when ``t > 50``.
The authors' first G call passes an undefined ``rhon``, a typo for ``rho``; rho is used.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy.linalg import eigh

from ..core.equations import combine_kernels
from ._base import MultipleKernelClustering, Solution, stop_rule, top_eigenpairs
from ._mkkm import MIN_ITER, truncate_weights
from ._mkkm_mr import kernel_products
from ._qp import simplex_qp

#: ONKC's weight threshold: smaller weights are set to zero after each QP.
WEIGHT_CUTOFF = 1e-8


def neighbourhood_kernel(kernel: np.ndarray, rho: float, h: np.ndarray) -> np.ndarray:
    """ONKC's G step: the PSD projection of ``K_gamma - (1/rho)(I - H H^T)``.

    The minimiser over PSD G of ``Tr(G (I - H H^T)) + (rho/2) ||G - K_gamma||_F^2``
    (Liu et al., AAAI 2017, the G subproblem): the matrix symmetrised, its eigenvalues
    below machine epsilon set to zero (the authors' ``updateG``).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        K_gamma.
    rho : float
        > 0.
    h : ndarray of shape (n, k)
        Orthonormal columns.

    Returns
    -------
    ndarray of shape (n, n)
        Symmetric positive semi-definite.
    """
    n = kernel.shape[0]
    b = kernel - (np.eye(n) - h @ h.T) / rho
    w, v = eigh(0.5 * (b + b.T), check_finite=False)
    w = np.where(w < np.finfo(np.float64).eps, 0.0, w)
    g = (v * w) @ v.T
    return 0.5 * (g + g.T)


def onkc_objective(g: np.ndarray, h: np.ndarray, kernel: np.ndarray, gamma: np.ndarray, big_m: np.ndarray,
                   rho: float, lambda_: float) -> float:
    """``Tr(G (I - H H^T)) + (rho/2) ||G - K_gamma||_F^2 + (lambda/2) gamma^T M gamma`` (the authors' ``calmyObj``).

    Parameters
    ----------
    g : ndarray of shape (n, n)
    h : ndarray of shape (n, k)
    kernel : ndarray of shape (n, n)
        K_gamma.
    gamma : ndarray of shape (m,)
    big_m : ndarray of shape (m, m)
    rho, lambda_ : float

    Returns
    -------
    float
    """
    fit = np.trace(g) - np.sum((g @ h) * h)
    gap = g - kernel
    return float(fit + 0.5 * rho * np.sum(gap * gap) + 0.5 * lambda_ * (gamma @ big_m @ gamma))


class ONKC(MultipleKernelClustering):
    """Optimal neighbourhood kernel clustering with multiple kernels (Liu et al., AAAI 2017).

    From ``gamma = 1/m``: H_0 = the top-k eigenvectors of ``K_gamma = sum_p gamma_p K_p``,
    G_0 = :func:`neighbourhood_kernel` of K_gamma and H_0 (rho). Iteration t: H_t = the
    top-k eigenvectors of G_{t-1}; gamma = the exact minimiser over the simplex of
    ``0.5 (rho + lambda) gamma^T M gamma - rho sum_p gamma_p Tr(K_p G_{t-1})``, weights below
    1e-8 zeroed and renormalised; G_t from the new K_gamma and H_t; ``J_t`` =
    :func:`onkc_objective`. Stops after iteration t when ``t >= 3`` and
    ``|J_{t-1} - J_t| / J_{t-1} < tol``, or at ``t = max_iter`` (the authors: ``t > 50``).
    The embedding is the authors' returned H_t (the eigenvectors of G_{t-1}).

    Parameters
    ----------
    n_clusters : int
        k.
    rho : float
        rho > 0, the weight of ``||G - K_gamma||_F^2`` (the demo's grid ``2**-7 .. 2**9``).
    lambda_ : float
        lambda >= 0, the weight of the regulariser ``gamma^T M gamma`` (``2**-6 .. 2**7``).
    max_iter : int
        Iteration cap (51: the authors stop when ``t > 50``).
    tol : float
        Relative change of the objective that stops the loop (the authors' 1e-3).
    preprocess : bool
        Centre and normalise the kernels first (``kcenter``, ``knorm``).
    n_init : int
        k-means starts of the final clustering.
    random_state : int or None
        Seed of the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        gamma after the last update (on the simplex; linear weights).
    objective_ : list of float
    n_iter_ : int
    converged_ : bool
        False when ``max_iter`` stopped the loop.
    extra_ : dict
        ``gamma_history`` (n_iter, m); ``M`` (m, m); ``G`` (n, n): the last neighbourhood
        kernel; ``eigenvalues`` (k,): the top eigenvalues of the G whose eigenvectors are
        the embedding (ascending).
    labels_ : ndarray of shape (n,)

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, ``max_iter`` below 1,
        ``rho`` not positive, ``tol`` or ``lambda_`` negative.
    """

    name: ClassVar[str] = "onkc"
    param_grid: ClassVar[dict[str, tuple]] = {
        "rho": tuple(2.0**e for e in range(-7, 10)),
        "lambda_": tuple(2.0**e for e in range(-6, 8)),
    }
    positive_params: ClassVar[tuple[str, ...]] = ("rho",)
    non_negative_params: ClassVar[tuple[str, ...]] = ("tol", "lambda_")

    def __init__(self, n_clusters: int = 2, *, rho: float = 1.0, lambda_: float = 1.0, max_iter: int = 51,
                 tol: float = 1e-3, preprocess: bool = True, n_init: int = 50,
                 random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.rho = rho
        self.lambda_ = lambda_
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def _solve(self, kernels: np.ndarray) -> Solution:
        rho, lam, k = float(self.rho), float(self.lambda_), int(self.n_clusters)
        m = kernels.shape[0]
        big_m = kernel_products(kernels)
        gamma = np.full(m, 1.0 / m)
        k_gamma = combine_kernels(kernels, gamma)
        g = neighbourhood_kernel(k_gamma, rho, top_eigenpairs(k_gamma, k, symmetrise=True)[1])
        objective: list[float] = []
        history = []
        converged = False
        while True:
            values, h = top_eigenpairs(g, k, symmetrise=True)
            linear = -rho * np.sum(kernels * g, axis=(1, 2))
            gamma = truncate_weights(simplex_qp((rho + lam) * big_m, linear), WEIGHT_CUTOFF)
            history.append(gamma)
            k_gamma = combine_kernels(kernels, gamma)
            g = neighbourhood_kernel(k_gamma, rho, h)
            objective.append(onkc_objective(g, h, k_gamma, gamma, big_m, rho, lam))
            if stop_rule(objective, float(self.tol), min_iter=MIN_ITER):
                converged = True
                break
            if len(objective) >= int(self.max_iter):
                break
        extra = {"gamma_history": np.array(history), "M": big_m, "G": g, "eigenvalues": values}
        return Solution(kernel_weights=gamma, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=h, extra=extra)

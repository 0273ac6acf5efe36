"""LKAM: multiple kernel clustering with local kernel alignment maximisation.

Li, Liu, Wang, Zhang, Yin and Zhu, "Multiple Kernel Clustering with Local Kernel Alignment
Maximization", Proceedings of the International Joint Conference on Artificial Intelligence
(IJCAI-16), 2016. Each sample i has a neighbourhood N_i: its ``round(tau n)`` nearest samples
in the average kernel (the sample itself excluded). The objective (the paper's localised
formulation) aligns every local kernel ``K_gamma[N_i, N_i]`` with the local
``I - H[N_i] H[N_i]^T`` and adds MKKM-MR's kind of regulariser on the local kernels:

    min_{H, gamma}  (1/n) sum_i Tr(K_gamma[N_i, N_i] (I - H H^T)[N_i, N_i]) + (lambda/2) gamma^T M_loc gamma
    s.t.  H^T H = I_k,  gamma >= 0,  sum_p gamma_p = 1,

with ``K_gamma = sum_p gamma_p^2 K_p`` and ``M_loc[p, q] = (1/n) sum_i Tr(K_p[N_i, N_i] K_q[N_i, N_i])``.
Summing the neighbourhoods gives the co-occurrence count matrix ``A = sum_i 1_{N_i} 1_{N_i}^T``,
so the first term is ``Tr(K_gamma ((1/n) A o (I - H H^T)))``: H is the top-k eigenvectors of
``(1/n) A o K_gamma`` and, with H fixed, gamma solves the QP
``min 0.5 gamma^T (lambda M_loc + 2 diag(z)) gamma`` over the simplex,
``z_p = Tr(K_p ((1/n) A o (I - H H^T)))``.

As the authors' code (GitHub ``wangsiwei2010/latefusionalignment``,
``mylocalizedregmultikernelclustering`` with ``genarateNeighborhood`` and ``calHessian``):
gamma starts at 1/m, weights below 1e-6 are zeroed after each QP and renormalised, the
objective is evaluated with the weights that produced H, and the loop stops after
iteration t when ``t >= 3`` and the relative change is below 1e-6, or when ``t > 10``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..core.equations import combine_kernels
from ..errors import Param, ParameterError
from ..report.localise import neighbour_ranks
from ._base import MultipleKernelClustering, Solution, stop_rule, top_eigenpairs
from ._mkkm import MIN_ITER, truncate_weights
from ._qp import simplex_qp

#: LKAM's weight threshold: smaller weights are set to zero after each QP.
WEIGHT_CUTOFF = 1e-6
#: The authors' exponent of the weights in the combined kernel (``qnorm = 2``).
QNORM = 2


def neighbourhood_counts(kernel: np.ndarray, n_neighbors: int) -> np.ndarray:
    """``A = sum_i 1_{N_i} 1_{N_i}^T``: how many neighbourhoods N_i hold both samples a and b.

    N_i is the ``n_neighbors`` samples of largest ``kernel[:, i]``, sample i itself ranked
    last (excluded unless ``n_neighbors = n``), ties in the order of the samples: the authors'
    ``genarateNeighborhood`` of LKAM and LSMKKM, a stable descending sort of each column of
    ``kernel - 1e8 I``. With S the (n, n) 0/1 matrix ``S[j, i] = 1`` for j in N_i, ``A = S S^T``
    (LKAM's co-occurrence counts; ``sum_i A^(i)`` of Eq. (10) of the journal version of LSMKKM).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        The average kernel.
    n_neighbors : int
        1 <= n_neighbors <= n.

    Returns
    -------
    ndarray of shape (n, n)
        Symmetric counts (float64), diagonal ``A_ii`` = the number of neighbourhoods holding i.

    Raises
    ------
    ParameterError
        ``n_neighbors`` outside ``[1, n]``.
    """
    n = kernel.shape[0]
    if not 1 <= n_neighbors <= n:
        raise ParameterError("{} must be in [1, {}] (the number of samples)", Param("n_neighbors", n_neighbors), n)
    rank = neighbour_ranks((kernel - 1e8 * np.eye(n)).T).T  # rank[j, i]: the place of sample j in column i
    s = (rank < n_neighbors).astype(np.float64)
    return s @ s.T


def local_kernel_products(kernels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """LKAM's regulariser: ``M_loc[p, q] = (1/n) sum_i Tr(K_p[N_i, N_i] K_q[N_i, N_i])``.

    For symmetric kernels the sum over neighbourhoods is ``sum_ab A_ab K_p[a, b] K_q[a, b]``
    with A the co-occurrence counts (:func:`neighbourhood_counts`); the authors' ``calHessian``
    with ``localFlag = 1``.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        Symmetric.
    counts : ndarray of shape (n, n)
        A.

    Returns
    -------
    ndarray of shape (m, m)
        Symmetric, positive semi-definite.
    """
    m, n = kernels.shape[0], kernels.shape[1]
    flat = kernels.reshape(m, -1)
    out = (flat * counts.reshape(1, -1)) @ flat.T / n
    return 0.5 * (out + out.T)


def neighbour_count(tau: float, n_neighbors: int | None, n: int, *, most: int | None = None) -> int:
    """The neighbourhood size of LKAM and LSMKKM: ``n_neighbors`` if given, else ``round(tau n)``, at least 1.

    Rounded half away from zero in floating point, as MATLAB's ``round(tau * n)`` in the
    authors' calling sequences: 0.7 * 165 is 115.49999999999999 and gives 115, as in their runs
    (:func:`lswmkc_dask.report.localise.neighbour_count` rounds the decimal 0.7 exactly, to 116).

    Parameters
    ----------
    tau : float
        Fraction of n, in (0, 1]; ignored when ``n_neighbors`` is given.
    n_neighbors : int or None
    n : int
        Number of samples.
    most : int, optional
        The largest size allowed: n - 1 (the default: LKAM's neighbourhoods exclude the sample
        itself) or n (LSMKKM's).

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        ``tau`` outside (0, 1] when it is used, or a size outside ``[1, most]`` (named by the
        parameter that gave it).
    """
    most = n - 1 if most is None else int(most)
    if n_neighbors is not None:
        if not 1 <= int(n_neighbors) <= most:
            raise ParameterError("{} must be in [1, {}]", Param("n_neighbors", n_neighbors), most)
        return int(n_neighbors)
    if not 0 < float(tau) <= 1:
        raise ParameterError("{} must be in (0, 1]", Param("tau", tau))
    count = max(1, math.floor(float(tau) * n + 0.5))
    if count > most:
        raise ParameterError("{} gives {} neighbours, more than {}", Param("tau", tau), count, most)
    return count


class LKAM(MultipleKernelClustering):
    """Multiple kernel clustering with local kernel alignment maximisation (Li et al., IJCAI 2016).

    Neighbourhoods of ``round(tau n)`` samples in the average kernel (or ``n_neighbors``),
    their co-occurrence counts A and ``M_loc`` (:func:`local_kernel_products`); then from
    ``gamma = 1/m``, iteration t: H_t = the top-k eigenvectors of ``(1/n) A o K_gamma``
    (``K_gamma = sum_p gamma_p^2 K_p``); ``z_p = Tr(K_p ((1/n) A o (I - H_t H_t^T)))``;
    ``J_t = 0.5 gamma^T (lambda M_loc + 2 diag(z)) gamma``; gamma = the exact minimiser of
    that quadratic over the simplex, weights below 1e-6 zeroed and renormalised. Stops
    after iteration t when ``t >= 3`` and ``|J_{t-1} - J_t| / J_{t-1} < tol``, or at
    ``t = max_iter`` (the authors: ``t > 10``). The embedding is the authors' returned H,
    from the weights before their last update.

    Parameters
    ----------
    n_clusters : int
        k.
    tau : float
        Neighbourhood size as a fraction of n, in (0, 1).
    lambda_ : float
        lambda, the regulariser's weight.
    n_neighbors : int or None
        The neighbourhood size itself (overrides ``tau``); 1 <= n_neighbors <= n - 1.
    max_iter : int
        Iteration cap (11: the authors stop when ``t > 10``).
    tol : float
        Relative change of the objective that stops the loop (the authors' 1e-6).
    preprocess : bool
        Centre and normalise the kernels first (``kcenter``, ``knorm``).
    n_init : int
        k-means starts of the final clustering.
    random_state : int or None
        Seed of the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        gamma after the last update (on the simplex; the kernel is ``sum_p gamma_p^2 K_p``).
    objective_ : list of float
    n_iter_ : int
    converged_ : bool
        False when ``max_iter`` stopped the loop.
    extra_ : dict
        ``gamma_history`` (n_iter, m); ``M_loc`` (m, m); ``n_neighbors``; ``counts`` (n, n):
        A; ``eigenvalues`` (k,): the top eigenvalues of the local kernel of the embedding.
    labels_ : ndarray of shape (n,)

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, ``max_iter`` below 1,
        ``tol`` or ``lambda_`` negative, ``tau`` outside (0, 1] or a neighbourhood size outside 1..n-1.
    """

    name: ClassVar[str] = "lkam"
    param_grid: ClassVar[dict[str, tuple]] = {
        "tau": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8),
        "lambda_": tuple(2.0**e for e in range(-5, 10, 2)),
    }
    non_negative_params: ClassVar[tuple[str, ...]] = ("tol", "lambda_")

    def __init__(self, n_clusters: int = 2, *, tau: float = 0.5, lambda_: float = 1.0,
                 n_neighbors: int | None = None, max_iter: int = 11, tol: float = 1e-6, preprocess: bool = True,
                 n_init: int = 50, random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.tau = tau
        self.lambda_ = lambda_
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def _solve(self, kernels: np.ndarray) -> Solution:
        lam = float(self.lambda_)
        m, n = kernels.shape[0], kernels.shape[1]
        count = neighbour_count(self.tau, self.n_neighbors, n)
        counts = neighbourhood_counts(combine_kernels(kernels, np.full(m, 1.0 / m)), count) / n
        big_m = local_kernel_products(kernels, counts * n)
        gamma = np.full(m, 1.0 / m)
        objective: list[float] = []
        history = []
        converged = False
        while True:
            values, h = top_eigenpairs(counts * combine_kernels(kernels, gamma**QNORM), int(self.n_clusters),
                                       symmetrise=True)
            local = counts * (np.eye(n) - h @ h.T)
            z = np.sum(kernels * local, axis=(1, 2))
            hessian = lam * big_m + 2.0 * np.diag(z)
            objective.append(float(0.5 * gamma @ hessian @ gamma))
            gamma = truncate_weights(simplex_qp(hessian, np.zeros(m)), WEIGHT_CUTOFF)
            history.append(gamma)
            if stop_rule(objective, float(self.tol), min_iter=MIN_ITER):
                converged = True
                break
            if len(objective) >= int(self.max_iter):
                break
        extra = {"gamma_history": np.array(history), "M_loc": big_m, "n_neighbors": count, "counts": counts * n,
                 "eigenvalues": values}
        return Solution(kernel_weights=gamma, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=h, extra=extra)

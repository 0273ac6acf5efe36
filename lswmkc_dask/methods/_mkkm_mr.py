"""MKKM-MR: multiple kernel k-means with matrix-induced regularisation.

Liu, Dou, Yin, Wang and Zhu, "Multiple Kernel k-Means Clustering with Matrix-Induced
Regularization", Proceedings of the AAAI Conference on Artificial Intelligence (AAAI-16),
2016. The objective (the paper's proposed formulation) adds to multiple kernel k-means the
regulariser ``(lambda/2) gamma^T M gamma``, ``M_pq = Tr(K_p^T K_q)``, which penalises giving
weight to two kernels that carry the same information:

    min_{H, gamma}  Tr(K_gamma (I - H H^T)) + (lambda/2) gamma^T M gamma
    s.t.  H^T H = I_k,  gamma >= 0,  sum_p gamma_p = 1,

with ``K_gamma = sum_p gamma_p^2 K_p``. With H fixed the weights solve the quadratic
programme ``min 0.5 gamma^T (lambda M + 2 Z) gamma`` over the simplex,
``Z = diag(Tr(K_p (I - H H^T)))``; with gamma fixed H is the top-k eigenvectors.

As in the authors' code (GitHub ``wangsiwei2010/Multiple-Kernel-k-Means-Clustering-with-
Matrix-Induced-Regularization``, ``myregmultikernelclustering``), the kernel whose
eigenvectors give H is the LINEAR combination ``sum_p gamma_p K_p`` (the objective and the
weight step use ``gamma_p^2``), weights below 1e-6 are set to zero after each step and the
rest renormalised, and the objective is evaluated with the weights that produced H.

:func:`kernel_products` is shared with ONKC; the kernel k-means step
(:func:`~lswmkc_dask.methods._base.top_eigenpairs`), the stop rule and the weight cut-off
(:func:`~lswmkc_dask.methods._mkkm.truncate_weights`) with MKKM, LKAM and ONKC.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..core.equations import combine_kernels
from ._base import MultipleKernelClustering, Solution, stop_rule, top_eigenpairs
from ._mkkm import MIN_ITER, residual_traces, truncate_weights
from ._qp import simplex_qp

#: MKKM-MR's weight threshold: smaller weights are set to zero after each QP.
WEIGHT_CUTOFF = 1e-6


def kernel_products(kernels: np.ndarray) -> np.ndarray:
    """The matrix-induced regulariser's M: ``M_pq = Tr(K_p^T K_q)``.

    Liu et al., AAAI 2016 (MKKM-MR), the definition of M; the authors' ``calM``. ONKC
    (Liu et al., AAAI 2017) uses the same matrix.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)

    Returns
    -------
    ndarray of shape (m, m)
        Symmetric, positive semi-definite (a Gram matrix of the flattened kernels).
    """
    flat = kernels.reshape(kernels.shape[0], -1)
    out = flat @ flat.T
    return 0.5 * (out + out.T)


class MKKMMR(MultipleKernelClustering):
    """Multiple kernel k-means with matrix-induced regularisation (Liu et al., AAAI 2016).

    From ``gamma = 1/m``, iteration t: H_t = the top-k eigenvectors of ``sum_p gamma_p K_p``
    (:func:`~lswmkc_dask.methods._base.top_eigenpairs`); ``J_t = 0.5 gamma^T (lambda M + 2 diag(a)) gamma``
    with ``a_p = Tr(K_p (I - H_t H_t^T))`` (:func:`~lswmkc_dask.methods._mkkm.residual_traces`); gamma = the
    minimiser of ``0.5 gamma^T (lambda M + 2 diag(a)) gamma`` over the simplex
    (:func:`~lswmkc_dask.methods._qp.simplex_qp`, exact), weights below 1e-6 zeroed and
    renormalised. Stops after iteration t when ``t >= 3`` and
    ``|J_{t-1} - J_t| / J_{t-1} < tol``, or at ``max_iter`` (the authors' loop has no cap). The
    embedding is the authors' returned H: that of the last iteration,
    computed from the weights before their last update.

    Parameters
    ----------
    n_clusters : int
        k.
    lambda_ : float
        lambda, the regulariser's weight (the demo's grid: ``2**-15 .. 2**10``).
    max_iter : int
        Iteration cap.
    tol : float
        Relative change of the objective that stops the loop (the authors' 1e-6).
    preprocess : bool
        Centre and normalise the kernels first (the authors' demo: ``kcenter``, ``knorm``).
    n_init : int
        k-means starts of the final clustering.
    random_state : int or None
        Seed of the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        gamma after the last update (on the simplex).
    objective_ : list of float
        ``J_t`` per iteration.
    n_iter_ : int
    converged_ : bool
        False when ``max_iter`` stopped the loop.
    extra_ : dict
        ``gamma_history`` (n_iter, m): gamma after each update; ``M`` (m, m);
        ``eigenvalues`` (k,): the top eigenvalues of the kernel of the embedding (ascending).
    labels_ : ndarray of shape (n,)

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, ``max_iter`` below 1,
        ``tol`` or ``lambda_`` negative.
    """

    name: ClassVar[str] = "mkkm-mr"
    param_grid: ClassVar[dict[str, tuple]] = {"lambda_": tuple(2.0**e for e in range(-15, 11))}
    non_negative_params: ClassVar[tuple[str, ...]] = ("tol", "lambda_")

    def __init__(self, n_clusters: int = 2, *, lambda_: float = 1.0, max_iter: int = 200, tol: float = 1e-6,
                 preprocess: bool = True, n_init: int = 50, random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.lambda_ = lambda_
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def _solve(self, kernels: np.ndarray) -> Solution:
        lam = float(self.lambda_)
        m = kernels.shape[0]
        big_m = kernel_products(kernels)
        gamma = np.full(m, 1.0 / m)
        objective: list[float] = []
        history = []
        converged = False
        while True:
            values, h = top_eigenpairs(combine_kernels(kernels, gamma), int(self.n_clusters), symmetrise=True)
            hessian = lam * big_m + 2.0 * np.diag(residual_traces(kernels, h))
            objective.append(float(0.5 * gamma @ hessian @ gamma))
            gamma = truncate_weights(simplex_qp(hessian, np.zeros(m)), WEIGHT_CUTOFF)
            history.append(gamma)
            if stop_rule(objective, float(self.tol), min_iter=MIN_ITER):
                converged = True
                break
            if len(objective) >= int(self.max_iter):
                break
        return Solution(kernel_weights=gamma, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=h, extra={"gamma_history": np.array(history), "M": big_m, "eigenvalues": values})

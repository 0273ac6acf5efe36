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

The helpers :func:`kernel_products`, :func:`combine`, :func:`top_eigenvectors`,
:func:`residual_traces`, :func:`truncate_weights`, :func:`check_iterations` and
:func:`stop_now` are shared with LKAM and ONKC.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from scipy.linalg import eigh

from ._base import MultipleKernelClustering, Solution
from ._qp import simplex_qp

__all__ = [
    "MKKMMR", "check_iterations", "combine", "kernel_products", "residual_traces", "stop_now", "top_eigenvectors",
    "truncate_weights",
]

#: The authors' loop checks its stop rule only from this iteration on (``iter > 2``).
MIN_ITER = 3
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


def combine(kernels: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``sum_p c_p K_p``: the base kernels combined with the given coefficients.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    coefficients : ndarray of shape (m,)
        Pass ``gamma**2`` for a ``gamma_p^2`` combination.

    Returns
    -------
    ndarray of shape (n, n)
    """
    return np.tensordot(np.asarray(coefficients, dtype=np.float64), kernels, axes=1)


def top_eigenvectors(kernel: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Relaxed kernel k-means: the k largest eigenpairs of ``(K + K^T) / 2``.

    ``max_{H^T H = I_k} Tr(H^T K H)`` is attained by these eigenvectors (Ky Fan): the H
    step of MKKM-MR, LKAM and ONKC (the authors' ``eigs(K, k, 'la')``; only the span
    matters to them, so the signs and the basis of a repeated eigenvalue are immaterial).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
    k : int
        1 <= k <= n.

    Returns
    -------
    values : ndarray of shape (k,)
        Ascending.
    vectors : ndarray of shape (n, k)
        Orthonormal columns, in the order of ``values``.

    Raises
    ------
    ValueError
        ``k`` outside ``[1, n]``.
    """
    n = kernel.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"n_clusters must be in [1, {n}] (the number of samples), got {k}")
    sym = 0.5 * (kernel + kernel.T)
    return eigh(sym, subset_by_index=(n - k, n - 1), check_finite=False)


def residual_traces(kernels: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``Tr(K_p (I - H H^T)) = Tr(K_p) - Tr(H^T K_p H)`` per kernel (the diagonal of MKKM-MR's Z).

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    h : ndarray of shape (n, k)
        Orthonormal columns.

    Returns
    -------
    ndarray of shape (m,)
    """
    traces = np.trace(kernels, axis1=1, axis2=2)
    return traces - np.sum((kernels @ h) * h, axis=(1, 2))


def truncate_weights(gamma: np.ndarray, cutoff: float) -> np.ndarray:
    """Weights below ``cutoff`` set to zero and the rest renormalised to sum 1 (the authors' step).

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


def check_iterations(max_iter: int, tol: float) -> None:
    """Check the loop's settings shared by MKKM-MR, LKAM and ONKC.

    Parameters
    ----------
    max_iter : int
    tol : float

    Raises
    ------
    ValueError
        ``max_iter`` below 1, or ``tol`` negative or NaN.
    """
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}")
    if not float(tol) >= 0:
        raise ValueError(f"tol must be non-negative, got {tol}")


def stop_now(objective: list[float], tol: float, min_iter: int = MIN_ITER) -> bool:
    """The authors' rule: ``t >= min_iter`` and ``|J_{t-1} - J_t| / J_{t-1} < tol``.

    Parameters
    ----------
    objective : list of float
        ``J_1 .. J_t``.
    tol : float
    min_iter : int

    Returns
    -------
    bool
    """
    if len(objective) < max(min_iter, 2):
        return False
    return bool(abs((objective[-2] - objective[-1]) / objective[-2]) < tol)


class MKKMMR(MultipleKernelClustering):
    """Multiple kernel k-means with matrix-induced regularisation (Liu et al., AAAI 2016).

    From ``gamma = 1/m``, iteration t: H_t = the top-k eigenvectors of ``sum_p gamma_p K_p``
    (:func:`top_eigenvectors`); ``J_t = 0.5 gamma^T (lambda M + 2 diag(a)) gamma`` with
    ``a_p = Tr(K_p (I - H_t H_t^T))`` (:func:`residual_traces`); gamma = the minimiser of
    ``0.5 gamma^T (lambda M + 2 diag(a)) gamma`` over the simplex (:func:`~lswmkc_dask.methods._qp.simplex_qp`,
    exact), weights below 1e-6 zeroed and renormalised. Stops after iteration t when
    ``t >= 3`` and ``|J_{t-1} - J_t| / J_{t-1} < tol``, or at ``max_iter`` (the authors'
    loop has no cap). The embedding is the authors' returned H: that of the last iteration,
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
    """

    name: ClassVar[str] = "mkkm-mr"
    param_grid: ClassVar[dict[str, tuple]] = {"lambda_": tuple(2.0**e for e in range(-15, 11))}

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
        check_iterations(self.max_iter, self.tol)
        lam = float(self.lambda_)
        if not lam >= 0:
            raise ValueError(f"lambda_ must be non-negative, got {self.lambda_}")
        m = kernels.shape[0]
        big_m = kernel_products(kernels)
        gamma = np.full(m, 1.0 / m)
        objective: list[float] = []
        history = []
        converged = False
        while True:
            values, h = top_eigenvectors(combine(kernels, gamma), int(self.n_clusters))
            hessian = lam * big_m + 2.0 * np.diag(residual_traces(kernels, h))
            objective.append(float(0.5 * gamma @ hessian @ gamma))
            gamma = truncate_weights(simplex_qp(hessian, np.zeros(m)), WEIGHT_CUTOFF)
            history.append(gamma)
            if stop_now(objective, float(self.tol)):
                converged = True
                break
            if len(objective) >= int(self.max_iter):
                break
        return Solution(kernel_weights=gamma, objective=objective, n_iter=len(objective), converged=converged,
                        embedding=h, extra={"gamma_history": np.array(history), "M": big_m, "eigenvalues": values})

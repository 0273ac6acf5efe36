"""LMKKM: localized multiple kernel k-means, with sample-wise kernel weights.

Gönen and Margolin, "Localized Data Fusion for Kernel k-Means Clustering with Application to
Cancer Biology", NIPS 2014 (authors' code: ``mehmetgonen/lmkkmeans``, ``lmkkmeans_train.m``).
Each sample i has its own weights theta_i on the simplex (Theta, n x m, rows summing to 1),
and the combined kernel is the localized kernel

    K_Theta = sum_m (theta_m theta_m^T) o K_m        (o: entry-wise product),

i.e. K_Theta[i, j] = sum_m theta_{i m} theta_{j m} K_m[i, j]. The method minimises the kernel
k-means cost tr((I - H H^T) K_Theta) over H (H^T H = I) and Theta by alternation: H is the
top-k eigenvectors of K_Theta; Theta is the minimiser of the convex quadratic program

    min_Theta  sum_m theta_m^T ((I - H H^T) o K_m) theta_m
    s.t.       Theta 1_m = 1_n,  Theta >= 0,

which the authors solve with MOSEK's ``mskqpopt``. Here :func:`simplex_rows_qp` solves it
exactly (a primal active-set method). The program does not separate per sample: each block
(I - H H^T) o K_m couples all samples, and the constraints couple the blocks sample by
sample.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, solve

from ._base import MultipleKernelClustering, Solution, top_eigenpairs


def localized_kernel(kernels: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The localized kernel sum_m (theta_m theta_m^T) o K_m of LMKKM.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
    theta : ndarray of shape (n, m)
        Sample-wise kernel weights.

    Returns
    -------
    ndarray of shape (n, n)
    """
    t = theta.T  # (m, n)
    return np.sum(t[:, :, None] * kernels * t[:, None, :], axis=0)


def _inverse(block: np.ndarray) -> np.ndarray:
    """The inverse of a symmetric positive definite block (a relative 1e-12 ridge if Cholesky fails)."""
    eye = np.eye(block.shape[0])
    try:
        return cho_solve(cho_factor(block), eye)
    except LinAlgError:
        ridge = 1e-12 * max(float(np.trace(block)) / block.shape[0], np.finfo(np.float64).tiny)
        return cho_solve(cho_factor(block + ridge * eye), eye)


def _equality_solution(blocks: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimiser and row multipliers of the program with the non-free entries fixed at 0.

    With F_m the free samples of kernel m, stationarity gives theta_m[F_m] =
    Q_m[F_m, F_m]^{-1} nu[F_m], and the row sums give S nu = 1 with
    S = sum_m (the inverse blocks placed at F_m x F_m), an n x n positive definite matrix.
    """
    m, n, _ = blocks.shape
    s = np.zeros((n, n))
    parts = []
    for p in range(m):
        idx = np.flatnonzero(free[:, p])
        inv = _inverse(blocks[p][np.ix_(idx, idx)]) if idx.size else np.zeros((0, 0))
        s[np.ix_(idx, idx)] += inv
        parts.append((idx, inv))
    nu = solve(s, np.ones(n), assume_a="pos")
    theta = np.zeros((n, m))
    for p, (idx, inv) in enumerate(parts):
        theta[idx, p] = inv @ nu[idx]
    return theta, nu


def simplex_rows_qp(blocks: np.ndarray, start: np.ndarray | None = None, max_iter: int | None = None,
                    ) -> tuple[np.ndarray, int]:
    """Exact minimiser of sum_m theta_m^T Q_m theta_m over Theta with rows on the simplex.

    The program of LMKKM's Theta step (Gönen and Margolin, NIPS 2014): minimise
    (1/2) sum_m theta_m^T Q_m theta_m subject to sum_m theta_{i m} = 1 for every sample i and
    Theta >= 0 (the upper bound 1 then holds by itself). A primal active-set method (Nocedal and
    Wright, "Numerical Optimization", 2nd ed., Springer 2006, Algorithm 16.3): each step solves
    the equality-constrained program on the current working set of zero entries in closed
    form (one Cholesky factorisation per kernel and one n x n solve), moves to it or to the
    first bound it crosses (which joins the working set), and frees the bound of most negative
    multiplier once the step is taken in full. It ends at a point satisfying the KKT
    conditions, to rounding (the minimiser is unique when every Q_m is positive definite).

    Parameters
    ----------
    blocks : ndarray of shape (m, n, n)
        Q_m, symmetric positive (semi)definite; LMKKM's are (I - H H^T) o K_m.
    start : ndarray of shape (n, m) or None
        A feasible start (rows on the simplex); its zero entries form the first working set.
        None: the uniform 1/m (LMKKM's own start). A previous solution is a good warm start.
    max_iter : int or None
        Active-set changes allowed; None: 10 n m + 100.

    Returns
    -------
    theta : ndarray of shape (n, m)
        The minimiser, rows on the simplex.
    n_iter : int
        Equality-constrained solves made.

    Raises
    ------
    ValueError
        ``start`` of the wrong shape or not on the simplex.
    RuntimeError
        No KKT point within ``max_iter`` changes of the working set.
    """
    m, n, _ = blocks.shape
    theta = np.full((n, m), 1.0 / m) if start is None else np.array(start, dtype=np.float64)
    if theta.shape != (n, m) or (theta < 0).any() or not np.allclose(theta.sum(axis=1), 1.0, atol=1e-10):
        raise ValueError(f"start must have shape {(n, m)} with rows on the simplex")
    free = theta > 0
    scale = max(float(np.abs(np.diagonal(blocks, axis1=1, axis2=2)).max()), 1.0)
    limit = 10 * n * m + 100 if max_iter is None else int(max_iter)
    for it in range(1, limit + 1):
        target, nu = _equality_solution(blocks, free)
        step = target - theta
        crossing = free & (target < 0)
        if not crossing.any():  # full step: a KKT point if no bound's multiplier is negative
            theta = target
            mult = (blocks @ theta.T[:, :, None])[:, :, 0].T - nu[:, None]  # (Q_m theta_m)_i - nu_i
            mult[free] = np.inf
            j = np.unravel_index(np.argmin(mult), mult.shape)
            if mult[j] >= -1e-12 * scale:
                theta[~free] = 0.0
                return theta, it
            free[j] = True
            continue
        ratios = np.full(theta.shape, np.inf)
        ratios[crossing] = theta[crossing] / -step[crossing]
        j = np.unravel_index(np.argmin(ratios), ratios.shape)
        theta = theta + ratios[j] * step
        theta[j] = 0.0
        free[j] = False
    raise RuntimeError(f"simplex_rows_qp: no KKT point after {limit} active-set changes")


class LMKKM(MultipleKernelClustering):
    """LMKKM: localized (sample-weighted) multiple kernel k-means.

    Gönen and Margolin, "Localized Data Fusion for Kernel k-Means Clustering with Application
    to Cancer Biology", NIPS 2014; the alternation of the authors' ``lmkkmeans_train.m``
    (repository ``mehmetgonen/lmkkmeans``). Start: Theta = 1/m for every sample. Each
    iteration: H = top-k eigenvectors of K_Theta = sum_m (theta_m theta_m^T) o K_m; Theta =
    the exact minimiser of sum_m theta_m^T ((I - H H^T) o K_m) theta_m with rows of Theta on the
    simplex (:func:`simplex_rows_qp`, warm-started from the previous Theta); the objective
    recorded is tr(H^T K_Theta H) - tr(K_Theta) with the new Theta and that H (it never
    decreases). The authors run a fixed number of iterations (10 in their demo) and cluster
    the last H (computed before the last Theta step), rows to unit length, by k-means; so
    does this class.

    Parameters
    ----------
    n_clusters : int
        k.
    max_iter : int
        Iterations (the demo's ``iteration_count = 10``).
    tol : float
        Stop early when the relative change of the objective falls below ``tol``; the
        default 0 never does (the authors' fixed iteration count; ``converged_`` is then True).
    preprocess : bool
        Centre and normalise the kernels first.
    n_init : int
        k-means starts of the final clustering.
    random_state : int, RandomState or None
        Seeds the final k-means.

    Attributes
    ----------
    kernel_weights_ : ndarray of shape (m,)
        The column means of Theta: each kernel's weight averaged over the samples (the
        method's own weights are sample-wise, in ``sample_weights_``).
    sample_weights_ : ndarray of shape (n, m)
        Theta, rows on the simplex.
    extra_ : dict
        ``sample_weights`` (Theta), ``weights_history`` (the column means of Theta after each
        iteration), ``qp_iterations`` (active-set solves per iteration).

    Raises
    ------
    ParameterError
        From :meth:`fit` (a ``ValueError``): ``n_clusters`` outside 1..n, or ``max_iter`` below 1.
    RuntimeError
        From :meth:`fit`: the Theta program not solved (see :func:`simplex_rows_qp`).
    """

    name: ClassVar[str] = "lmkkm"
    param_grid: ClassVar[dict[str, tuple]] = {}

    def __init__(self, n_clusters: int = 2, *, max_iter: int = 10, tol: float = 0.0, preprocess: bool = True,
                 n_init: int = 50, random_state: int | None = None) -> None:
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, kernels: Any, y: Any = None) -> LMKKM:
        """:meth:`MultipleKernelClustering.fit`, then ``sample_weights_`` = Theta (n, m)."""
        super().fit(kernels, y)
        self.sample_weights_ = self.extra_["sample_weights"]
        return self

    def _solve(self, kernels: np.ndarray) -> Solution:
        m, n, _ = kernels.shape
        k = int(self.n_clusters)
        theta = np.full((n, m), 1.0 / m)
        combined = localized_kernel(kernels, theta)
        objective: list[float] = []
        history, qp_iterations = [], []
        tol = float(self.tol)
        converged = tol <= 0  # a fixed number of iterations (the authors') counts as done
        h = np.zeros((n, k))
        for _ in range(int(self.max_iter)):
            h = top_eigenpairs(combined, k)[1][:, ::-1]
            residual = np.eye(n) - h @ h.T
            theta, qp_iter = simplex_rows_qp(residual[None] * kernels, start=theta)
            combined = localized_kernel(kernels, theta)
            objective.append(float(np.sum(h * (combined @ h)) - np.trace(combined)))
            history.append(theta.mean(axis=0))
            qp_iterations.append(qp_iter)
            if len(objective) > 1 and abs(objective[-1] - objective[-2]) < tol * abs(objective[-2]):
                converged = True
                break
        return Solution(kernel_weights=theta.mean(axis=0), objective=objective, n_iter=len(objective),
                        converged=converged, embedding=h,
                        extra={"sample_weights": theta, "weights_history": np.array(history),
                               "qp_iterations": qp_iterations})

"""CAGL: consensus affinity graph learning for multiple kernel clustering.

Ren, Z. et al., "Consensus Affinity Graph Learning for Multiple Kernel
Clustering", IEEE Transactions on Cybernetics 51(6), 2021 (online 2020): one candidate affinity
graph per kernel from kernel self-expressiveness with an adaptive local-structure term, fused into
a consensus graph by self-weighted (auto-weighted) fusion, with a self-tuned Laplacian rank
constraint and a top-k sparse neighbourhood, so that the consensus graph's connected components
are the clusters. The module also holds the exact solver of the self-expressive graph step,
:func:`self_expressive_graph`, that :mod:`._spmkc` shares.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.linalg import eigh

from ._base import MultipleKernelClustering, Solution
from ._swmc import (
    RANK_TOL,
    graph_components,
    kernel_distances,
    laplacian,
    laplacian_bottom,
    pairwise_sq_distances,
    project_rows_simplex,
    self_weights,
)


def row_simplex_qp(a: np.ndarray, b: np.ndarray, support: np.ndarray | None = None, *, tol: float = 1e-12,
                   max_iter: int = 20000, z0: np.ndarray | None = None) -> np.ndarray:
    """Rows z_i minimising z^T A z - 2 b_i^T z over the simplex (z >= 0, 1^T z = 1, zero off the support).

    Accelerated projected gradient (Beck and Teboulle, "A fast iterative shrinkage-thresholding
    algorithm", SIAM J. Imaging Sci. 2009) with adaptive restart (O'Donoghue and Candes, Found.
    Comput. Math. 2015) and the exact projection :func:`~._swmc.project_rows_simplex`, all rows at
    once; stops when no entry moves by more than ``tol``.

    Parameters
    ----------
    a : ndarray of shape (n, n)
        Symmetric positive semi-definite, shared by all rows.
    b : ndarray of shape (r, n)
    support : ndarray of bool, shape (r, n), optional
    tol : float
    max_iter : int
    z0 : ndarray of shape (r, n), optional
        Warm start.

    Returns
    -------
    ndarray of shape (r, n)
        The minimisers (unique when A is positive definite), to about ``tol`` times the
        condition number of A.
    """
    lip = 2.0 * max(float(eigh(a, eigvals_only=True, subset_by_index=(a.shape[0] - 1, a.shape[0] - 1))[0]),
                    1e-12)
    z = project_rows_simplex(b if z0 is None else z0, support)
    y, t = z, 1.0
    for _ in range(int(max_iter)):
        grad = 2.0 * (y @ a - b)
        z_new = project_rows_simplex(y - grad / lip, support)
        step = z_new - z
        if np.abs(step).max() <= tol:
            return z_new
        if np.sum((y - z_new) * step) > 0:  # restart: the momentum points uphill
            y, t = z_new, 1.0
        else:
            t_new = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
            y = z_new + ((t - 1.0) / t_new) * step
            t = t_new
        z = z_new
    return z


def self_expressive_objective(kernel: np.ndarray, z: np.ndarray, alpha: float, beta: float) -> float:
    """tr(K - 2 Z K + Z K Z^T) + alpha sum_ij d_ij z_ij + beta ||Z||_F^2, d the kernel's squared distances.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
    z : ndarray of shape (n, n)
        Rows express the samples: phi(x_i) ~ sum_j z_ij phi(x_j).
    alpha, beta : float

    Returns
    -------
    float
    """
    r = np.eye(kernel.shape[0]) - z
    return float(np.sum((r @ kernel) * r) + alpha * np.sum(kernel_distances(kernel) * z) + beta * np.sum(z * z))


def self_expressive_graph(kernel: np.ndarray, alpha: float, beta: float, *, anchor: np.ndarray | None = None,
                          anchor_weight: float = 0.0, z0: np.ndarray | None = None, tol: float = 1e-12) -> np.ndarray:
    """The affinity graph Z of a kernel by self-expressiveness with adaptive local structure.

    Minimises :func:`self_expressive_objective` + ``anchor_weight`` ||Z - anchor||_F^2 over graphs
    whose rows lie on the simplex with zero diagonal (z_ij >= 0, 1^T z_i = 1, z_ii = 0): per row the
    QP z^T (K + (beta + w) I) z - 2 (K_i - alpha/2 d_i + w anchor_i)^T z, by :func:`row_simplex_qp`.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        Positive semi-definite.
    alpha : float
        Weight of the local term sum_ij ||phi(x_i) - phi(x_j)||^2 z_ij (>= 0).
    beta : float
        Weight of ||Z||_F^2 (> 0 makes the minimiser unique).
    anchor : ndarray of shape (n, n), optional
        A graph Z is pulled towards (CAGL's consensus graph).
    anchor_weight : float
    z0 : ndarray of shape (n, n), optional
        Warm start.
    tol : float

    Returns
    -------
    ndarray of shape (n, n)
    """
    n = kernel.shape[0]
    a = kernel + (beta + anchor_weight) * np.eye(n)
    b = kernel - 0.5 * alpha * kernel_distances(kernel)
    if anchor is not None and anchor_weight:
        b = b + anchor_weight * anchor
    return row_simplex_qp(a, b, ~np.eye(n, dtype=bool), tol=tol, z0=z0)


def top_k_support(v: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of the k largest off-diagonal entries of each row of ``v`` (n, n).

    Projecting a row onto the simplex restricted to its k largest entries is the exact projection
    onto the k-sparse simplex (Kyrillidis et al., "Sparse projections onto the simplex", ICML 2013).
    """
    n = v.shape[0]
    w = np.array(v, dtype=np.float64)
    np.fill_diagonal(w, -np.inf)
    idx = np.argsort(-w, axis=1, kind="stable")[:, : min(int(k), n - 1)]
    mask = np.zeros(v.shape, dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask


def _consensus_step(graphs, w, f, lam, k):
    """S = argmin sum_p w_p ||S - Z_p||^2 + lam sum_ij ||f_i - f_j||^2 s_ij over k-sparse simplex rows."""
    v = (np.tensordot(w, graphs, axes=1) - 0.5 * lam * pairwise_sq_distances(f)) / w.sum()
    return project_rows_simplex(v, top_k_support(v, k))


class CAGL(MultipleKernelClustering):
    """Consensus affinity graph learning (CAGL) for multiple kernel clustering.

    Minimises, over candidate graphs Z_p (one per kernel), the consensus graph S and F (n x c,
    F^T F = I),

        sum_p [tr(K_p - 2 Z_p K_p + Z_p K_p Z_p^T) + alpha sum_ij d^p_ij z^p_ij + beta ||Z_p||_F^2]
        + sum_p ||S - Z_p||_F + 2 lam tr(F^T L_S F)

    with every row of Z_p and S on the simplex, zero diagonals, at most ``n_neighbors`` non-zeros
    per row of S (the top-k strategy), d^p the squared distances in kernel p's feature space. The
    square-root fusion is self-weighted: w_p = 1 / (2 ||S - Z_p||_F) (the auto-weighted fusion);
    lam is self-tuned (doubled while L_S has fewer than c zero eigenvalues, halved when it has more).

    Parameters
    ----------
    n_clusters : int
        c.
    alpha : float
        Weight of the adaptive local-structure term.
    beta : float
        Weight of ||Z_p||_F^2 (> 0).
    n_neighbors : int
        k of the top-k sparse consensus graph.
    lam : float
        Start value of the self-tuned rank weight.
    max_iter : int
    tol : float
        Stop when S has exactly c components and the objective's relative change is below ``tol``.
    preprocess : bool
    n_init : int
        k-means starts of the fallback (Notes).
    random_state : int, RandomState or None
        Seeds the fallback k-means only (the method is deterministic).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    kernel_weights_ : ndarray of shape (n_kernels,)
        The self-weights w_p = 1 / (2 ||S - Z_p||_F) of the last iteration (not normalised).
    objective_ : list of float
        The objective above after each iteration, with that iteration's lam.
    extra_ : dict
        ``graph`` (S), ``candidate_graphs`` ((m, n, n)), ``lam_history``, ``weights_history``,
        ``n_components``, ``eigenvalues`` (c + 1 smallest of L_S).

    Raises
    ------
    ParameterError
        From ``fit`` (a ``ValueError``): beta not positive, alpha negative, ``n_clusters``
        outside 1..n or ``max_iter`` below 1.

    Notes
    -----
    No public code of CAGL's authors was found (searched GitHub for the authors and the method
    name; the LSWMKC reference outputs have none either), so nothing here was matched to their
    code: the model above is written from the paper's description (self-expressive candidate
    graphs with adaptive local structure, thin auto-weighted fusion, self-tuned Laplacian rank
    constraint, top-k sparsity), and its exact equations and hyper-parameter grid could not be
    checked against the paper's text. Each block step is an exact minimiser: the Z_p steps by
    :func:`self_expressive_graph`, S in closed form (:func:`top_k_support`), F by eigh. Start: the
    candidate graphs without fusion (w = 0), S their top-k-sparse mean. When S does not have exactly
    c components the labels are the k-means of F's unit rows. tests/test_methods_graph.py checks
    each step against scipy.optimize, the constraints, the non-increasing objective while lam is
    unchanged, perfect labels on separated synthetic kernels and an accuracy floor on YALE.
    """

    name: ClassVar[str] = "cagl"
    param_grid: ClassVar[dict[str, tuple]] = {"alpha": (0.01, 0.1, 1.0), "beta": (0.1, 1.0, 10.0)}
    positive_params: ClassVar[tuple[str, ...]] = ("beta",)
    non_negative_params: ClassVar[tuple[str, ...]] = ("alpha",)

    def __init__(self, n_clusters: int = 2, *, alpha: float = 0.1, beta: float = 1.0, n_neighbors: int = 10,
                 lam: float = 1.0, max_iter: int = 30, tol: float = 1e-6, preprocess: bool = True, n_init: int = 50,
                 random_state: Any = None) -> None:
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.beta = beta
        self.n_neighbors = n_neighbors
        self.lam = lam
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state

    def objective(self, kernels: np.ndarray, graphs: np.ndarray, s: np.ndarray, f: np.ndarray, lam: float) -> float:
        """The CAGL objective (class docstring) at (Z_p, S, F) for the rank weight ``lam``.

        Parameters
        ----------
        kernels, graphs : ndarray of shape (m, n, n)
        s : ndarray of shape (n, n)
        f : ndarray of shape (n, c)
        lam : float

        Returns
        -------
        float
        """
        total = sum(self_expressive_objective(k, z, self.alpha, self.beta) for k, z in zip(kernels, graphs))
        total += sum(float(np.linalg.norm(s - z)) for z in graphs)
        return float(total + 2.0 * lam * np.sum(f * (laplacian(s) @ f)))

    def _solve(self, kernels: np.ndarray) -> Solution:
        c, k = int(self.n_clusters), int(self.n_neighbors)
        graphs = np.stack([self_expressive_graph(kp, self.alpha, self.beta) for kp in kernels])
        mean = graphs.mean(axis=0)
        s = project_rows_simplex(mean, top_k_support(mean, k))
        lam_c, f = laplacian_bottom(s, c)
        w = self_weights(graphs, s)
        lam = float(self.lam)
        objective: list[float] = []
        lams, weights = [], []
        converged = False
        for _ in range(int(self.max_iter)):
            graphs = np.stack([self_expressive_graph(kp, self.alpha, self.beta, anchor=s, anchor_weight=wp, z0=z)
                               for kp, wp, z in zip(kernels, w, graphs)])
            s = _consensus_step(graphs, w, f, lam, k)
            lam_c, f = laplacian_bottom(s, c)
            w = self_weights(graphs, s)
            objective.append(self.objective(kernels, graphs, s, f, lam))
            lams.append(lam)
            weights.append(w.copy())
            rank_ok = lam_c[:c].sum() <= RANK_TOL < lam_c.sum()
            if rank_ok and len(objective) > 1 and abs(objective[-2] - objective[-1]) <= self.tol * abs(objective[-1]):
                converged = True
                break
            if lam_c[:c].sum() > RANK_TOL:
                lam *= 2.0
            elif lam_c.sum() <= RANK_TOL:
                lam /= 2.0
        count, labels = graph_components(s)
        extra = {"graph": s, "candidate_graphs": graphs, "lam_history": np.array(lams),
                 "weights_history": np.array(weights), "n_components": count, "eigenvalues": lam_c}
        sol = Solution(kernel_weights=w, objective=objective, n_iter=len(objective), converged=converged, extra=extra)
        if count == c:
            sol.labels = labels
        else:
            sol.embedding = f
        return sol

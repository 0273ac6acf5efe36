"""SwMC: self-weighted multiview clustering with multiple graphs, on base kernels.

Nie, F., Li, J., Li, X., "Self-weighted Multiview Clustering with Multiple Graphs", IJCAI 2017,
pp. 2564-2570: one target graph S close to every view's graph A_v (the sum of the Frobenius
distances), with the Laplacian rank constraint rank(L_S) = n - c, so that the
connected components of S are the clusters. The module also holds the graph steps that the
other graph-based methods (:mod:`._cagl`) share: row-wise projection onto the simplex, the
adaptive-neighbour graph of a kernel, the bottom Laplacian eigenvectors and the components.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.linalg import eigh
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.utils import check_random_state

from ._base import MultipleKernelClustering, Solution

#: The rank test of the authors' CLR step: eigenvalues summing below this count as zero.
RANK_TOL = 1e-10


def project_rows_simplex(v: np.ndarray, support: np.ndarray | None = None) -> np.ndarray:
    """Each row of ``v`` projected onto the probability simplex (Euclidean projection).

    Solves, row by row, min_x 1/2 ||x - v_i||^2 s.t. x >= 0, 1^T x = 1, x_j = 0 off the support
    (Duchi et al., "Efficient projections onto the l1-ball", ICML 2008, Fig. 1; exact, by sorting).

    Parameters
    ----------
    v : ndarray of shape (r, n)
    support : ndarray of bool, shape (r, n), optional
        Entries allowed to be non-zero (each row needs at least one); default all.

    Returns
    -------
    ndarray of shape (r, n)
        Rows on the simplex, zero off the support.

    Raises
    ------
    ValueError
        A row with an empty support.
    """
    v = np.array(v, dtype=np.float64, ndmin=2)
    if support is not None:
        support = np.asarray(support, dtype=bool)
        if not support.any(axis=1).all():
            raise ValueError("every row needs at least one entry in its support")
        # an entry 2 below the row's largest supported value projects to 0 (the threshold is >= max - 1)
        top = np.where(support, v, -np.inf).max(axis=1, keepdims=True)
        v = np.where(support, v, top - 2.0)
    u = -np.sort(-v, axis=1)
    css = np.cumsum(u, axis=1) - 1.0
    ind = np.arange(1, v.shape[1] + 1)
    rho = np.count_nonzero(u - css / ind > 0, axis=1)
    theta = css[np.arange(v.shape[0]), rho - 1] / rho
    return np.maximum(v - theta[:, None], 0.0)


def kernel_distances(kernel: np.ndarray) -> np.ndarray:
    """Squared feature-space distances of a kernel, ||phi(x_i) - phi(x_j)||^2 = K_ii + K_jj - 2 K_ij.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)

    Returns
    -------
    ndarray of shape (n, n)
        Symmetric, zero diagonal, clipped at 0 (rounding).
    """
    d = np.diag(kernel)
    out = d[:, None] + d[None, :] - 2.0 * kernel
    out = np.maximum((out + out.T) / 2.0, 0.0)
    np.fill_diagonal(out, 0.0)
    return out


def pairwise_sq_distances(f: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``f`` (n, c), clipped at 0: shape (n, n)."""
    sq = np.sum(f * f, axis=1)
    return np.maximum(sq[:, None] + sq[None, :] - 2.0 * (f @ f.T), 0.0)


def adaptive_neighbour_graph(kernel: np.ndarray, n_neighbors: int) -> np.ndarray:
    """The sparse adaptive-neighbour graph of a kernel (rows on the simplex, ``n_neighbors`` non-zeros).

    Row i weights its k nearest samples in the kernel's feature space by
    s_ij = (d_i,k+1 - d_ij) / (k d_i,k+1 - sum_h<=k d_ih), the closed form of Nie, Wang, Huang,
    "Clustering and projected clustering with adaptive neighbors", KDD 2014, section 2.2): the graph
    SwMC's authors build for each view.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
    n_neighbors : int
        k, 1 <= k <= n - 2.

    Returns
    -------
    ndarray of shape (n, n)
        Row-stochastic, zero diagonal (not symmetrised).

    Raises
    ------
    ValueError
        k outside 1..n-2.
    """
    n = kernel.shape[0]
    k = int(n_neighbors)
    if not 1 <= k <= n - 2:
        raise ValueError(f"n_neighbors must be in 1..{n - 2}, got {n_neighbors}")
    d = kernel_distances(kernel)
    np.fill_diagonal(d, np.inf)
    order = np.argsort(d, axis=1, kind="stable")[:, : k + 1]
    dk = np.take_along_axis(d, order, axis=1)
    num = dk[:, k : k + 1] - dk[:, :k]
    den = k * dk[:, k] - dk[:, :k].sum(axis=1)
    w = np.where(den[:, None] > 0, num / np.where(den > 0, den, 1.0)[:, None], 1.0 / k)
    out = np.zeros_like(kernel)
    np.put_along_axis(out, order[:, :k], w, axis=1)
    return out


def laplacian(s: np.ndarray) -> np.ndarray:
    """The Laplacian D - W of W = (S + S^T)/2 with its diagonal removed (the CLR graph's), shape (n, n)."""
    w = (s + s.T) / 2.0
    np.fill_diagonal(w, 0.0)
    return np.diag(w.sum(axis=1)) - w


def laplacian_bottom(s: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_clusters`` + 1 smallest eigenvalues of the graph's Laplacian, and the bottom c eigenvectors.

    Parameters
    ----------
    s : ndarray of shape (n, n)
        A graph (symmetrised inside, diagonal ignored; see :func:`laplacian`).
    n_clusters : int
        c, below n.

    Returns
    -------
    eigenvalues : ndarray of shape (c + 1,)
        Ascending.
    f : ndarray of shape (n, c)
        Orthonormal eigenvectors of the c smallest.
    """
    c = int(n_clusters)
    lam, vec = eigh(laplacian(s), subset_by_index=(0, c))
    return lam, vec[:, :c]


def graph_components(s: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of the graph (S + S^T)/2 (non-zero entries are edges).

    Parameters
    ----------
    s : ndarray of shape (n, n)

    Returns
    -------
    n_components : int
    labels : ndarray of shape (n,), int64
        0..n_components-1, numbered by first appearance.
    """
    count, labels = connected_components(csr_matrix((s + s.T) != 0), directed=False)
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(first)
    renumber = np.empty_like(order)
    renumber[order] = np.arange(order.size)
    return int(count), renumber[labels].astype(np.int64)


def self_weights(kernels: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The self-tuned weights w_p = 1 / (2 ||K - K_p||_F) of a consensus matrix K (SPMKC's kernel, CAGL's graph).

    The auto-weighting of SwMC's alpha_v = 1 / (2 ||S - A_v||_F) (Nie, Li, Li, IJCAI 2017; SwMC
    itself keeps its distances, which its objective sums, and no floor). With them,
    sum_p w_p ||K - K_p||_F^2 majorises sum_p ||K - K_p||_F at K (the re-weighting of Kang et al.,
    "Self-weighted multiple kernel learning for graph-based clustering and semi-supervised
    classification", IJCAI 2018), so minimising the weighted term does not increase the
    unweighted one; for SPMKC, the K that minimises it is an affine combination
    sum_p w_p K_p / sum_p w_p of the base kernels, moved by the graph terms.

    Parameters
    ----------
    kernels : ndarray of shape (m, n, n)
        The base kernels K_p (CAGL: the candidate graphs Z_p).
    k : ndarray of shape (n, n)
        K (CAGL: the consensus graph S).

    Returns
    -------
    ndarray of shape (m,)
        Positive (a distance below 1e-12 counts as 1e-12).
    """
    return 0.5 / np.maximum(np.sqrt(((kernels - k[None]) ** 2).sum(axis=(1, 2))), 1e-12)


def _clr_step(alpha, graphs, c, s0, lam=1.0, max_iter=50):
    """The S-step of SwMC (its authors' CLR routine): S with L_S of rank n - c, for fixed alpha.

    Per row, s_i = projection onto the simplex, over the entries where sum_v alpha_v a_v,i > 0, of
    (sum_v alpha_v a_v,i - lam/2 d^F_i) / sum_v alpha_v;
    F are the bottom c eigenvectors of L_S; lam doubles while the c smallest eigenvalues are not all
    zero, halves (keeping the previous F) when c + 1 are, and the loop stops when exactly c are.
    Returns S, F, the c + 1 smallest eigenvalues of L_S, the lam that gave S and the number of S-steps.
    """
    a0 = np.tensordot(alpha, graphs, axes=1)
    support = a0 > 0
    _, f = laplacian_bottom(s0, c)
    s, lam_c, lam_used, steps = s0, np.zeros(c + 1), lam, 0
    while steps < max_iter:
        steps += 1
        lam_used = lam
        v = (a0 - 0.5 * lam * pairwise_sq_distances(f)) / alpha.sum()
        s = project_rows_simplex(v, support)
        lam_c, f_new = laplacian_bottom(s, c)
        if lam_c[:c].sum() > RANK_TOL:
            lam, f = 2.0 * lam, f_new
        elif lam_c.sum() < RANK_TOL:
            lam = lam / 2.0  # the authors keep F_old here
        else:
            f = f_new
            break
    return s, f, lam_c, lam_used, steps


class SwMC(MultipleKernelClustering):
    """Self-weighted multiview clustering (SwMC) on base kernels; the view graphs are built from the kernels.

    Each preprocessed kernel K_v gives a view graph A_v, its sparse adaptive-neighbour graph
    (:func:`adaptive_neighbour_graph`, ``n_neighbors`` per row). SwMC solves (Nie, Li, Li,
    "Self-weighted Multiview Clustering with Multiple Graphs", IJCAI 2017, section 3)::

        min_S sum_v ||S - A_v||_F  s.t.  s_ij >= 0, 1^T s_i = 1, rank(L_S) = n - c

    by alternating the weights ``alpha_v = 1 / (2 ||S - A_v||_F)`` with the Laplacian-rank
    S-step (:func:`_clr_step`), and reads the clusters off the connected components
    of S.

    Parameters
    ----------
    n_clusters : int
        c.
    n_neighbors : int
        Neighbours per row of each view graph.
    max_iter : int
        Outer iterations (the authors' NITER = 50).
    tol : float
        Stop when the objective changes by less than ``tol`` (absolute; the authors' 1e-8).
    preprocess : bool
        Centre and normalise the kernels first (as LSWMKC).
    n_init : int
        k-means starts of the fallback (see Notes).
    random_state : int, RandomState or None
        Seeds the random start of the weights and the fallback k-means.
    init : array_like of shape (n_kernels,), optional
        Start weights alpha (normalised to sum 1); default uniform random numbers, normalised, as
        the authors' code draws them (``rand``).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    kernel_weights_ : ndarray of shape (n_kernels,)
        The final ``alpha_v = 1 / (2 ||S - A_v||_F)`` (not normalised, as the method defines them).
    objective_ : list of float
        ``sum_v ||S - A_v||_F`` after each iteration.
    n_iter_ : int
    extra_ : dict
        ``graph`` (S, (n, n)), ``weights_history`` ((n_iter, m)), ``init`` (the start weights),
        ``n_components`` (of S), ``eigenvalues`` (the c + 1 smallest of L_S), ``lambda_history``
        ((n_iter,): the lambda of the S-step that each outer iteration kept) and ``inner_iterations``
        ((n_iter,): S-steps of each outer iteration's lambda search, at most 50).

    Raises
    ------
    ValueError
        From :meth:`fit`: ``n_clusters`` outside 1..n or ``max_iter`` below 1 (a
        :class:`~lswmkc_dask.errors.ParameterError`), ``n_neighbors`` outside 1..n-2, or an
        ``init`` not of m non-negative weights.

    Notes
    -----
    The LSWMKC paper (Li et al., IEEE TNNLS) does not say how it built SwMC's graphs from
    kernels; the adaptive-neighbour graph of each kernel's feature-space distances is the choice
    made here. Written from the paper's equations and matched to the authors' public code,
    github.com/kylejingli/SwMC-IJCAI17 at commit 770ba1c0773bb53c752e4b2a92eee9f5ce5528de
    (``SwMC.m``, ``CLR.m``): the random start of alpha, its normalisation at the start only, the
    inner lambda rule starting at lambda = 1 in every outer iteration, the support of each row,
    the stop on an absolute objective change of 1e-8 and 50 iterations. The authors' code gives
    the components' labels even when their number is not c; here, when S does not have exactly c
    components, the labels are the k-means (``n_init`` starts) of the rows of F (the bottom c
    eigenvectors of L_S) scaled to unit length.

    Checked against the authors' ``SwMC`` run unchanged under GNU Octave 7.3 on YALE
    (tests/test_methods_swmc_reference.py; tests/data/competitors/swmc_yale.json says how), on the
    view graphs built here, from the authors' random start (saved), at ``n_neighbors`` 5, 10 and 15:
    the number of iterations, the lambda each S-step kept and the number of S-steps match exactly;
    the weights and objective of every iteration, the final S and the (c + 1)-th smallest Laplacian
    eigenvalue to 1e-13 relative or better (asserted to 1e-9); the components are the same partition.
    The c zero eigenvalues are round-off (magnitude below 1e-12) on both sides. The objective is not monotone
    (on YALE it rises and falls in both codes): the S-step restarts lambda at 1 and minimises the
    weighted squared distances under the rank constraint, not the objective itself.
    tests/test_methods_graph.py also checks the S-step against a brute-force solver.
    """

    name: ClassVar[str] = "swmc"
    param_grid: ClassVar[dict[str, tuple]] = {"n_neighbors": (5, 10, 15, 20)}

    def __init__(self, n_clusters: int = 2, *, n_neighbors: int = 10, max_iter: int = 50, tol: float = 1e-8,
                 preprocess: bool = True, n_init: int = 50, random_state: Any = None, init: Any = None) -> None:
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.preprocess = preprocess
        self.n_init = n_init
        self.random_state = random_state
        self.init = init

    def _start(self, m: int) -> np.ndarray:
        if self.init is None:
            alpha = check_random_state(self.random_state).rand(m)
        else:
            alpha = np.asarray(self.init, dtype=np.float64).ravel()
            if alpha.shape != (m,) or not (alpha >= 0).all() or alpha.sum() <= 0:
                raise ValueError(f"init must be {m} non-negative weights, not all zero")
        return alpha / alpha.sum()

    def _solve(self, kernels: np.ndarray) -> Solution:
        c = int(self.n_clusters)
        graphs = np.stack([adaptive_neighbour_graph(k, self.n_neighbors) for k in kernels])
        alpha = self._start(len(graphs))
        start = alpha.copy()
        s = np.tensordot(alpha, graphs, axes=1)
        objective: list[float] = []
        history, lambdas, steps = [], [], []
        converged = False
        for _ in range(int(self.max_iter)):
            s, f, lam_c, lam, n_steps = _clr_step(alpha, graphs, c, s)
            dist = np.sqrt(((s[None] - graphs) ** 2).sum(axis=(1, 2)))
            alpha = 0.5 / dist
            history.append(alpha.copy())
            lambdas.append(lam)
            steps.append(n_steps)
            objective.append(float(dist.sum()))
            if len(objective) > 1 and abs(objective[-2] - objective[-1]) < self.tol:
                converged = True
                break
        count, labels = graph_components(s)
        extra = {"graph": s, "weights_history": np.array(history), "init": start, "n_components": count,
                 "eigenvalues": lam_c, "lambda_history": np.array(lambdas), "inner_iterations": np.array(steps)}
        sol = Solution(kernel_weights=alpha, objective=objective, n_iter=len(objective), converged=converged,
                       extra=extra)
        if count == c:
            sol.labels = labels
        else:
            sol.embedding = f
        return sol

"""Research criteria for choosing alpha and k without labels, measured by bench_selection.py.

The package ships the silhouette of each grid point's partition on the average
preprocessed base kernel (:data:`lswmkc_dask.grid.selection.SHIPPED`) and the few scores it
computes in the same pass over the store (:mod:`lswmkc_dask.grid.selection`); the other
criteria compared in ``docs/performance.md`` (model selection) live here, beside their benchmark. Each
function scores ONE grid point from what the point has -- the factor W of
``K* = W W^T`` (n x r), the predicted labels, the affinity graph Z (sparse) -- and,
where said, an alpha-independent reference kernel (for example
:func:`average_kernel`). Every score is "greater is better"
(objectives to minimise are negated), so a grid point is chosen by ``argmax``.

Comparability across alpha: K* changes with alpha, so a score computed in K*'s own
geometry (``silhouette_kstar``, ``silhouette_embedding``, ``eigengap_kstar``,
``eigengap_laplacian``, ``seed_stability``, ``bootstrap_stability``) may drift with
alpha for reasons unrelated to the quality of the partition. Scores of each alpha's
partition on one fixed kernel or graph (``silhouette_kernel``,
``kernel_kmeans_objective``, ``kernel_alignment``, ``normalized_cut`` on
:func:`knn_graph` of the reference kernel) and the grid consensus are comparable by
construction.

The names of :mod:`lswmkc_dask.grid.selection` are re-exported (with :func:`select` and
:func:`average_kernel`, which only the benchmarks use), so that
``import selection_criteria as selection`` reads as the package module did.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import eigh
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, calinski_harabasz_score, silhouette_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lswmkc_dask._threads import limit_blas  # noqa: E402
from lswmkc_dask.errors import Param, ParameterError  # noqa: E402
from lswmkc_dask.engine.postprocess import factor_embedding, kmeans_best_of  # noqa: E402
from lswmkc_dask.grid.selection import (  # noqa: E402,F401  (re-exported)
    SHIPPED,
    _check_kernel,
    _labels,
    consensus,
    silhouette_kernel,
    silhouette_sums_block,
)
from lswmkc_dask.kernels.features import preprocess_kernels  # noqa: E402

#: a seed for numpy's generators, as scikit-learn's ``random_state``
Seed = int | np.random.RandomState | np.random.Generator | None


def average_kernel(kernels: ArrayLike) -> NDArray[np.float64]:
    """Mean of the preprocessed (centred, unit-diagonal) base kernels: the fixed yardstick.

    Parameters
    ----------
    kernels : array_like of shape (m, n, n)
        Raw base kernels.

    Returns
    -------
    ndarray of shape (n, n)
        Dense: compute it on a worker in the package (m n^2 numbers are read).

    Raises
    ------
    KernelInputError
        As :func:`lswmkc_dask.kernels.features.preprocess_kernels`.
    """
    return preprocess_kernels(kernels).mean(axis=0)


def select(scores_per_point: Mapping[Any, Mapping[str, float]], criterion: str | None = None) -> dict[str, Any]:
    """Choose a grid point by one criterion.

    Parameters
    ----------
    scores_per_point : mapping or sequence
        ``{point: {criterion: score}}`` (a point is anything hashable: an alpha, a
        :class:`lswmkc_dask.grid.sweep.GridPoint`), or a sequence of such dicts (the point
        is then its index). Grid criteria (``consensus_ari``) must be filled in, for
        example by :func:`consensus`.
    criterion : str, optional
        Default :data:`SHIPPED`.

    Returns
    -------
    dict
        ``{"criterion": name, "point": chosen point, "score": its score,
        "scores": {point: score}}``; ties go to the first point in the given order.

    Raises
    ------
    ValueError
        Empty input, or a point without the criterion or with a NaN score.
    """
    criterion = SHIPPED if criterion is None else criterion
    items = list(scores_per_point.items()) if hasattr(scores_per_point, "items") else list(enumerate(scores_per_point))
    if not items:
        raise ValueError("no grid points to select from")
    scores = {}
    for point, s in items:
        if criterion not in s:
            raise ValueError(f"grid point {point!r} has no score {criterion!r}")
        v = float(s[criterion])
        if not np.isfinite(v):
            raise ValueError(f"grid point {point!r} has a non-finite {criterion!r}: {v}")
        scores[point] = v
    best = max(scores.values())
    point = next(p for p, v in scores.items() if v == best)
    return {"criterion": criterion, "point": point, "score": best, "scores": scores}


def _check_factor(factor):
    w = np.asarray(factor, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"factor must be 2-D (n, r), got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("factor contains NaN or Inf")
    return w

def normalized_factor(factor: ArrayLike) -> NDArray[np.float64]:
    """Rows of ``Wn = D^-1/2 C W``: the factor of the centred, normalised K*.

    This is the kernel the package's embedding is computed from
    (:func:`lswmkc_dask.engine.postprocess.factor_embedding`); Euclidean distances between its
    rows are the kernel distances ``d^2 = K_ii + K_jj - 2 K_ij`` of that kernel.

    Parameters
    ----------
    factor : array_like of shape (n, r)
        W with ``K* = W W^T``.

    Returns
    -------
    ndarray of shape (n, r)
        Zero rows (a zero diagonal of the centred K*) are left zero.
    """
    w = _check_factor(factor)
    wc = w - w.mean(axis=0)
    d = np.einsum("ij,ij->i", wc, wc)
    d[d <= 0] = 1.0
    return wc / np.sqrt(d)[:, None]

def _embedding(factor, n_clusters):
    return factor_embedding(_check_factor(factor), n_clusters, method="svd")

def seed_stability(factor: ArrayLike, n_clusters: int, n_runs: int = 10, random_state: Seed = 0) -> float:
    """Mean pairwise ARI between single-start k-means partitions of the embedding.

    The embedding is the package's (top-k eigenvectors of the centred, normalised K*,
    rows unit length). ``n_runs`` k-means runs with one k-means++ start each and seeds
    drawn from ``random_state``; the score is the mean ARI over all pairs of runs.
    The "seed-only" stability of von Luxburg (2010, section 2).

    Parameters
    ----------
    factor : array_like of shape (n, r)
    n_clusters : int
    n_runs : int, default 10
        At least 2.
    random_state : int, default 0

    Returns
    -------
    float
        In [-1, 1]; 1 when every start finds the same partition.

    Raises
    ------
    ValueError
        ``n_runs < 2`` or a bad factor.

    References
    ----------
    U. von Luxburg, "Clustering stability: an overview", Found. Trends Mach. Learn.
    2(3), 2010.
    """
    if n_runs < 2:
        raise ValueError(f"n_runs must be >= 2, got {n_runs}")
    h = _embedding(factor, n_clusters)
    return _seed_stability_embedding(h, n_clusters, n_runs, random_state)

def _seed_stability_embedding(h, n_clusters, n_runs, random_state):
    rng = np.random.default_rng(random_state)
    parts = []
    with limit_blas(1):
        for seed in rng.integers(2**31 - 1, size=n_runs):
            parts.append(KMeans(n_clusters, n_init=1, random_state=int(seed)).fit_predict(h))
    return float(np.mean([adjusted_rand_score(parts[i], parts[j])
                          for i in range(n_runs) for j in range(i + 1, n_runs)]))

def bootstrap_stability(
    factor: ArrayLike, n_clusters: int, n_pairs: int = 10, fraction: float = 0.8, n_init: int = 10,
    random_state: Seed = 0,
) -> float:
    """Ben-Hur et al. subsampling stability of the whole clustering step.

    For each of ``n_pairs`` pairs, two subsamples of ``fraction * n`` rows are drawn
    without replacement; each is clustered from scratch as the package clusters K*
    (the sub-kernel ``K*[S, S] = W[S] W[S]^T`` is centred and normalised again, its
    top-k eigenvectors embedded, k-means best of ``n_init`` starts), and the two
    partitions are compared by ARI on the samples they share. The score is the mean.

    Parameters
    ----------
    factor : array_like of shape (n, r)
    n_clusters : int
    n_pairs : int, default 10
    fraction : float, default 0.8
        Ben-Hur et al. (2002) use 0.8.
    n_init : int, default 10
    random_state : int, default 0

    Returns
    -------
    float
        Mean ARI on the overlaps, in [-1, 1].

    Raises
    ------
    ValueError
        ``fraction`` not in (0, 1] or a subsample smaller than ``n_clusters``.

    References
    ----------
    A. Ben-Hur, A. Elisseeff, I. Guyon, "A stability based method for discovering
    structure in clustered data", Pacific Symposium on Biocomputing, 2002.
    T. Lange, V. Roth, M. L. Braun, J. M. Buhmann, "Stability-based validation of
    clustering solutions", Neural Computation 16(6), 2004.
    """
    w = _check_factor(factor)
    n = w.shape[0]
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    size = int(round(fraction * n))
    if size < n_clusters:
        raise ValueError(f"a subsample of {size} rows cannot hold {n_clusters} clusters")
    rng = np.random.default_rng(random_state)
    scores = []
    for _ in range(n_pairs):
        labs = []
        idx = []
        for _ in range(2):
            s = np.sort(rng.choice(n, size, replace=False))
            h = _embedding(w[s], n_clusters)
            lab, _ = kmeans_best_of(h, n_clusters, n_init, int(rng.integers(2**31 - 1)))
            full = np.full(n, -1)
            full[s] = lab
            labs.append(full)
            idx.append(s)
        both = np.intersect1d(idx[0], idx[1], assume_unique=True)
        scores.append(adjusted_rand_score(labs[0][both], labs[1][both]))
    return float(np.mean(scores))

def silhouette_kstar(factor: ArrayLike, labels: ArrayLike) -> float:
    """Silhouette of the partition with the kernel distances of the centred, normalised K*.

    ``d^2 = K_ii + K_jj - 2 K_ij`` of ``K = Wn Wn^T`` is the squared Euclidean distance
    between rows of :func:`normalized_factor`, so this is
    ``silhouette_score(Wn, labels)`` (scikit-learn works in row chunks: no n x n array).
    K* depends on alpha: this yardstick moves with alpha.

    Parameters
    ----------
    factor : array_like of shape (n, r)
    labels : array_like of shape (n,)

    Returns
    -------
    float
        In [-1, 1]; -1 when there is a single cluster.

    References
    ----------
    P. J. Rousseeuw, "Silhouettes", J. Comput. Appl. Math. 20, 1987.
    """
    wn = normalized_factor(factor)
    y = _labels(labels, wn.shape[0])
    if np.unique(y).size < 2:
        return -1.0
    return float(silhouette_score(wn, y))

def silhouette_embedding(factor: ArrayLike, labels: ArrayLike, n_clusters: int) -> float:
    """Silhouette of the partition on the package's k-dimensional spectral embedding.

    Parameters
    ----------
    factor : array_like of shape (n, r)
    labels : array_like of shape (n,)
    n_clusters : int

    Returns
    -------
    float
    """
    h = _embedding(factor, n_clusters)
    y = _labels(labels, h.shape[0])
    if np.unique(y).size < 2:
        return -1.0
    return float(silhouette_score(h, y))

def calinski_harabasz_embedding(factor: ArrayLike, labels: ArrayLike, n_clusters: int) -> float:
    """Calinski-Harabasz index of the partition on the spectral embedding.

    Parameters
    ----------
    factor : array_like of shape (n, r)
    labels : array_like of shape (n,)
    n_clusters : int

    Returns
    -------
    float
        0 for a single cluster.

    References
    ----------
    T. Calinski, J. Harabasz, Commun. Stat. 3(1), 1974.
    """
    h = _embedding(factor, n_clusters)
    y = _labels(labels, h.shape[0])
    if np.unique(y).size < 2:
        return 0.0
    return float(calinski_harabasz_score(h, y))

def _centre(kernel):
    d = kernel.mean(axis=0)
    return kernel - d[None, :] - d[:, None] + d.mean()

def _cluster_sums(kernel, y):
    """``1_c^T K 1_c`` and sizes per cluster."""
    k = int(y.max()) + 1
    ind = sp.csr_matrix((np.ones(y.size), (y, np.arange(y.size))), shape=(k, y.size))
    return np.einsum("ij,ij->i", (ind @ kernel), ind.toarray()), np.bincount(y, minlength=k).astype(float)

def kernel_kmeans_objective(kernel: ArrayLike, labels: ArrayLike) -> float:
    """Negative within-cluster share of the kernel k-means objective on a fixed kernel.

    With ``Kc`` the centred kernel, the within-cluster scatter of the partition in the
    kernel's feature space is ``tr(Kc) - sum_c 1_c^T Kc 1_c / n_c``; its share of the
    total scatter ``tr(Kc)`` is in [0, 1], lower is tighter. Returned negated (greater
    is better).

    Parameters
    ----------
    kernel : array_like of shape (n, n)
        Dense (on a worker in the package).
    labels : array_like of shape (n,)

    Returns
    -------
    float
        In [-1, 0].

    References
    ----------
    I. S. Dhillon, Y. Guan, B. Kulis, "Kernel k-means, spectral clustering and
    normalized cuts", KDD 2004.
    """
    kc = _centre(_check_kernel(kernel))
    y = _labels(labels, kc.shape[0])
    sums, sizes = _cluster_sums(kc, y)
    total = float(np.trace(kc))
    if total <= 0:
        return 0.0
    return -float((total - np.sum(sums / sizes)) / total)

def kernel_alignment(kernel: ArrayLike, labels: ArrayLike) -> float:
    """Centred kernel alignment between a kernel and the partition's ideal kernel ``Y Y^T``.

    ``A = <Kc, Lc>_F / (||Kc||_F ||Lc||_F)`` with ``L = Y Y^T`` (1 where two samples
    share a cluster) and ``Xc = H X H``, ``H = I - 1 1^T / n``.

    Parameters
    ----------
    kernel : array_like of shape (n, n)
        Dense (on a worker in the package).
    labels : array_like of shape (n,)

    Returns
    -------
    float
        In [-1, 1]; 0 for a single cluster.

    References
    ----------
    C. Cortes, M. Mohri, A. Rostamizadeh, "Algorithms for learning kernels based on
    centered alignment", JMLR 13, 2012; N. Cristianini et al., "On kernel-target
    alignment", NIPS 2001.
    """
    kc = _centre(_check_kernel(kernel))
    n = kc.shape[0]
    y = _labels(labels, n)
    sums, sizes = _cluster_sums(kc, y)
    # ||H L H||_F^2 = ||L||^2 - 2/n ||L 1||^2 + (1^T L 1)^2 / n^2 for L = Y Y^T
    s2, s3 = np.sum(sizes**2), np.sum(sizes**3)
    lnorm2 = s2 - 2.0 * s3 / n + s2**2 / n**2
    knorm = float(np.linalg.norm(kc))
    if lnorm2 <= 1e-12 * n * n or knorm == 0:
        return 0.0
    return float(np.sum(sums) / (knorm * np.sqrt(lnorm2)))

def knn_graph(kernel: ArrayLike, n_neighbors: int = 5) -> sp.csr_matrix:
    """Symmetric k-nearest-neighbour graph of a kernel (kernel distances), 0/1 weights.

    Parameters
    ----------
    kernel : array_like of shape (n, n)
        Dense (on a worker in the package).
    n_neighbors : int, default 5
        The default c of LSWMKC (not tuned here).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)
        ``max(A, A^T)`` with ``A_ij = 1`` when j is among the ``n_neighbors`` nearest
        neighbours of i (i itself excluded; ties to the lower index).
    """
    k = _check_kernel(kernel)
    n = k.shape[0]
    if not 1 <= n_neighbors < n:
        raise ParameterError("{} must be in [1, n - 1 = {}], got {}", Param("n_neighbors"), n - 1, n_neighbors)
    d2 = np.diag(k)[:, None] + np.diag(k)[None, :] - 2.0 * k
    np.fill_diagonal(d2, np.inf)
    nn = np.argsort(d2, axis=1, kind="stable")[:, :n_neighbors]
    a = sp.csr_matrix((np.ones(n * n_neighbors), (np.repeat(np.arange(n), n_neighbors), nn.ravel())), shape=(n, n))
    return a.maximum(a.T).tocsr()

def normalized_cut(graph: Any, labels: ArrayLike) -> float:
    """Negative normalised cut ``sum_c cut(c, not c) / vol(c)`` of a partition on a graph.

    Parameters
    ----------
    graph : sparse or dense array of shape (n, n)
        Non-negative affinities; symmetrised as ``(G + G^T) / 2``. With a fixed graph
        (for example :func:`knn_graph` of :func:`average_kernel`) scores of different
        alphas are comparable; with each alpha's own Z they are not.
    labels : array_like of shape (n,)

    Returns
    -------
    float
        In [-k, 0]; greater (closer to 0) is a better cut.

    References
    ----------
    J. Shi, J. Malik, "Normalized cuts and image segmentation", IEEE TPAMI 22(8), 2000.
    """
    g = sp.csr_matrix(graph, dtype=np.float64)
    if g.shape[0] != g.shape[1]:
        raise ValueError(f"graph must be square, got shape {g.shape}")
    g = (g + g.T) * 0.5
    y = _labels(labels, g.shape[0])
    k = int(y.max()) + 1
    ind = sp.csr_matrix((np.ones(y.size), (np.arange(y.size), y)), shape=(y.size, k))
    within = (ind.T @ g @ ind).diagonal()
    vol = np.asarray(ind.T @ g.sum(axis=1)).ravel()
    ok = vol > 0
    return -float(np.sum((vol[ok] - within[ok]) / vol[ok]))

def eigengap_kstar(factor: ArrayLike, n_clusters: int) -> float:
    """Relative eigengap ``(lambda_k - lambda_{k+1}) / lambda_k`` of the centred, normalised K*.

    The eigenvalues are the squared singular values of :func:`normalized_factor`
    (``O(n r^2)``, no n x n array).

    Parameters
    ----------
    factor : array_like of shape (n, r)
    n_clusters : int

    Returns
    -------
    float
        In [0, 1]; 0 when K* has rank below k (lambda_k = 0), 1 when its rank is k.

    References
    ----------
    U. von Luxburg, "A tutorial on spectral clustering", Stat. Comput. 17, 2007,
    section 8.3.
    """
    wn = normalized_factor(factor)
    s = np.linalg.svd(wn, compute_uv=False)
    lam = np.zeros(n_clusters + 1)
    top = min(n_clusters + 1, s.size)
    lam[:top] = s[:top] ** 2
    tol = max(1e-10, 64 * wn.shape[0] * np.finfo(float).eps) * max(lam[0], 0.0)
    if lam[n_clusters - 1] <= tol:
        return 0.0
    return float((lam[n_clusters - 1] - lam[n_clusters]) / lam[n_clusters - 1])

def _normalized_adjacency(graph):
    g = sp.csr_matrix(graph, dtype=np.float64)
    g = (g + g.T) * 0.5
    d = np.asarray(g.sum(axis=1)).ravel()
    inv = np.zeros_like(d)
    inv[d > 0] = 1.0 / np.sqrt(d[d > 0])
    return sp.diags(inv) @ g @ sp.diags(inv)

def eigengap_laplacian(graph: Any, n_clusters: int) -> float:
    """Eigengap ``lambda_{k+1} - lambda_k`` of the symmetric normalised Laplacian of a graph.

    ``L = I - D^-1/2 S D^-1/2`` with ``S = (Z + Z^T)/2``; computed as the gap between
    the k-th and (k+1)-th largest eigenvalues of ``D^-1/2 S D^-1/2`` (dense ``eigh``
    below n = 3000, else ARPACK on the sparse matrix).

    Parameters
    ----------
    graph : sparse or dense array of shape (n, n)
        Z of a grid point (non-negative).
    n_clusters : int

    Returns
    -------
    float
        In [0, 2].

    References
    ----------
    U. von Luxburg, "A tutorial on spectral clustering", Stat. Comput. 17, 2007.
    """
    mu = _adjacency_top(graph, n_clusters + 1)
    return float(mu[n_clusters - 1] - mu[n_clusters])

def _adjacency_top(graph, count):
    a = _normalized_adjacency(graph)
    n = a.shape[0]
    if n < 3000:
        mu = eigh(a.toarray(), eigvals_only=True, subset_by_index=(n - count, n - 1))
    else:
        from scipy.sparse.linalg import eigsh

        mu = eigsh(a, k=count, which="LA", return_eigenvectors=False, v0=np.ones(n))
    return np.sort(mu)[::-1]

def neighbour_agreement(partitions: Sequence[ArrayLike]) -> NDArray[np.float64]:
    """For each partition of an ordered grid, its mean ARI with its neighbours on the grid.

    The partitions must be in grid order (alpha ascending); the first and last have one
    neighbour. A point on a plateau of the regularisation path (its partition barely
    changes when alpha is halved or doubled) scores high: the stability of the
    solution path rather than of the resampling.

    Parameters
    ----------
    partitions : sequence of array_like, each of shape (n,)
        At least 2, in grid order.

    Returns
    -------
    ndarray of shape (len(partitions),)

    Raises
    ------
    ValueError
        Fewer than 2 partitions or partitions of different lengths.
    """
    parts = [np.asarray(p).ravel() for p in partitions]
    if len(parts) < 2:
        raise ValueError("neighbour_agreement needs at least 2 partitions")
    if len({p.size for p in parts}) != 1:
        raise ValueError("partitions have different lengths")
    adj = np.array([adjusted_rand_score(parts[i], parts[i + 1]) for i in range(len(parts) - 1)])
    out = np.empty(len(parts))
    for i in range(len(parts)):
        out[i] = np.mean([adj[j] for j in (i - 1, i) if 0 <= j < adj.size])
    return out

#: Per-point criteria: name -> what they read ("W", "labels", "Z", "kernel", "graph").
CRITERIA = {
    "seed_stability": ("W",),
    "bootstrap_stability": ("W",),
    "silhouette_kstar": ("W", "labels"),
    "silhouette_embedding": ("W", "labels"),
    "calinski_harabasz_embedding": ("W", "labels"),
    "eigengap_kstar": ("W",),
    "eigengap_laplacian_Z": ("Z",),
    "ncut_own_Z": ("Z", "labels"),
    "silhouette_avg_kernel": ("kernel", "labels"),
    "kkm_objective_avg_kernel": ("kernel", "labels"),
    "alignment_avg_kernel": ("kernel", "labels"),
    "ncut_knn_avg_kernel": ("graph", "labels"),
}

#: Criteria computed from all the grid's partitions at once.
GRID_CRITERIA = ("consensus_ari", "consensus_nmi", "neighbour_agreement")

def score_point(
    factor: Any, labels: Any, n_clusters: int, affinity: Any = None, kernel: Any = None,
    graph: Any = None, random_state: Seed = 0, only: Iterable[str] | None = None,
) -> dict[str, float]:
    """Every per-point criterion that the given inputs allow.

    Parameters
    ----------
    factor : array_like of shape (n, r)
        W of the grid point.
    labels : array_like of shape (n,)
        Its predicted labels (never the ground truth).
    n_clusters : int
    affinity : sparse matrix of shape (n, n), optional
        Z of the grid point.
    kernel : ndarray of shape (n, n), optional
        Alpha-independent reference kernel (:func:`average_kernel`); dense.
    graph : sparse matrix of shape (n, n), optional
        Alpha-independent graph (:func:`knn_graph` of ``kernel``).
    random_state : int, default 0
    only : iterable of str, optional
        Compute only these criteria.

    Returns
    -------
    dict
        criterion name -> float (greater is better); criteria whose inputs are missing
        are left out.
    """
    want = set(CRITERIA if only is None else only)
    unknown = want - set(CRITERIA)
    if unknown:
        raise ValueError(f"unknown criteria {sorted(unknown)}")
    fns = {
        "seed_stability": lambda: seed_stability(factor, n_clusters, random_state=random_state),
        "bootstrap_stability": lambda: bootstrap_stability(factor, n_clusters, random_state=random_state),
        "silhouette_kstar": lambda: silhouette_kstar(factor, labels),
        "silhouette_embedding": lambda: silhouette_embedding(factor, labels, n_clusters),
        "calinski_harabasz_embedding": lambda: calinski_harabasz_embedding(factor, labels, n_clusters),
        "eigengap_kstar": lambda: eigengap_kstar(factor, n_clusters),
        "eigengap_laplacian_Z": lambda: eigengap_laplacian(affinity, n_clusters),
        "ncut_own_Z": lambda: normalized_cut(affinity, labels),
        "silhouette_avg_kernel": lambda: silhouette_kernel(kernel, labels),
        "kkm_objective_avg_kernel": lambda: kernel_kmeans_objective(kernel, labels),
        "alignment_avg_kernel": lambda: kernel_alignment(kernel, labels),
        "ncut_knn_avg_kernel": lambda: normalized_cut(graph, labels),
    }
    have = {"W": factor is not None, "labels": labels is not None, "Z": affinity is not None,
            "kernel": kernel is not None, "graph": graph is not None}
    return {name: fns[name]() for name in CRITERIA if name in want and all(have[x] for x in CRITERIA[name])}

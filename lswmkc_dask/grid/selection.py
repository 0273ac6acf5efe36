"""The label-free choice of a grid point (alpha, c, k) and how sure it is (docs/algorithm.md section 4a).

Every grid point's partition is scored on one fixed, alpha-independent kernel, the average
of the preprocessed base kernels, in ONE pass over the store (:func:`partition_scores_block`,
summed by :func:`finish_partition_scores`): the silhouette :data:`SHIPPED` per sample, and
the two :data:`VOTES`. Then, on the client: :func:`near_ties`, :func:`medoid_partition`
(the consensus over them), and for a k grid :func:`prediction_strength`,
:func:`agreed_n_clusters` and :func:`k_grid_edge`. Every score is "greater is better".
Functions taking a dense ``(n, n)`` ``kernel`` serve tests and benchmarks; the package
runs the blockwise forms on the workers that hold the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, silhouette_score

from .._threads import limit_blas
from ..engine.postprocess import kmeans_best_of


def _labels(labels, n=None):
    y = np.asarray(labels).ravel()
    if n is not None and y.size != n:
        raise ValueError(f"labels has {y.size} entries, expected {n}")
    _, y = np.unique(y, return_inverse=True)
    return y.ravel()


def _check_kernel(kernel):
    k = np.asarray(kernel, dtype=np.float64)
    if k.ndim != 2 or k.shape[0] != k.shape[1]:
        raise ValueError(f"kernel must be square (n, n), got shape {k.shape}")
    if not np.all(np.isfinite(k)):
        raise ValueError("kernel contains NaN or Inf")
    return k


def _kernel_distances(kernel):
    d = np.diag(kernel)
    d2 = d[:, None] + d[None, :] - 2.0 * kernel
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return np.sqrt(d2, out=d2)


def silhouette_kernel(kernel: ArrayLike, labels: ArrayLike) -> float:
    """Silhouette of the partition with the distances of a fixed kernel.

    ``silhouette_score(D, labels, metric="precomputed")`` with
    ``D_ij = sqrt(K_ii + K_jj - 2 K_ij)``. With an alpha-independent ``kernel`` (for
    example the average preprocessed base kernel) scores of different alphas are comparable.

    Parameters
    ----------
    kernel : array_like of shape (n, n)
        Dense: on a worker in the package (a second n x n array is formed).
    labels : array_like of shape (n,)

    Returns
    -------
    float
        In [-1, 1]; -1 for a single cluster.
    """
    k = _check_kernel(kernel)
    y = _labels(labels, k.shape[0])
    if np.unique(y).size < 2:
        return -1.0
    return float(silhouette_score(_kernel_distances(k), y, metric="precomputed"))


def silhouette_sums_block(rows: ArrayLike, start: int, partitions: ArrayLike) -> NDArray[np.float64]:
    """Silhouettes of several partitions on the average kernel, summed over a row block.

    The blockwise form of :func:`silhouette_kernel`: summed over all blocks and divided by n,
    ``silhouette_score(D, labels, metric="precomputed")``.

    Parameters
    ----------
    rows, start, partitions
        As :func:`partition_scores_block`.

    Returns
    -------
    ndarray of shape (P,)
        Sum over the block's rows of each partition's per-sample silhouette (0 for a
        partition with one cluster).

    Raises
    ------
    ValueError
        ``rows`` and ``partitions`` disagree on n, or the block overruns n.
    """
    return partition_scores_block(rows, start, partitions)["silhouette"].sum(axis=1)


def _block_kernel(rows, start, partitions):
    rows = np.asarray(rows)
    parts = np.atleast_2d(np.asarray(partitions))
    if rows.ndim != 3 or parts.shape[1] != rows.shape[2]:
        raise ValueError(f"rows of shape {rows.shape} and partitions of shape {parts.shape} disagree on n")
    b, n = rows.shape[1], rows.shape[2]
    if not 0 <= start <= n - b:
        raise ValueError(f"a block of {b} rows from row {start} overruns n = {n}")
    return rows.mean(axis=0, dtype=np.float64), parts


def _block_silhouettes(kbar, start, y, dist, indicator):
    """Per-sample silhouettes of the block's rows for one partition ``y`` (k >= 2)."""
    b, n = kbar.shape
    own_rows = np.arange(b)
    sizes = np.asarray(indicator.sum(axis=0)).ravel()
    to_cluster = np.asarray(dist @ indicator)  # (b, k)
    own = y[start:start + b]
    alone = sizes[own] <= 1
    a = to_cluster[own_rows, own] / np.maximum(sizes[own] - 1, 1)
    mean_to = to_cluster / sizes
    mean_to[own_rows, own] = np.inf
    nearest = mean_to.min(axis=1)
    denom = np.maximum(a, nearest)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(alone | (denom == 0), 0.0, (nearest - a) / denom)


def partition_scores_block(rows: ArrayLike, start: int, partitions: ArrayLike) -> dict[str, Any]:
    """What one row block of the store contributes to every partition's label-free scores.

    The rows of the average preprocessed base kernel ``Kbar`` give, for each partition, the
    per-sample silhouettes with the distances ``D_ij = sqrt(2 - 2 Kbar_ij)`` (0 for a sample
    alone in its cluster, as scikit-learn's ``silhouette_samples``) and the per-cluster sums
    of :func:`finish_partition_scores`. Never more than a (b, n) block in memory.

    Parameters
    ----------
    rows : array_like of shape (m, b, n)
        Rows ``start:start + b`` of the m preprocessed base kernels (unit diagonal).
    start : int
        Index of the block's first row.
    partitions : array_like of shape (P, n)
        Cluster labels of P partitions (predicted, never the ground truth).

    Returns
    -------
    dict
        ``"silhouette"`` (P, b): per-sample silhouettes (0 for a partition with one
        cluster); ``"within"`` (P, K): per cluster c, the block's part of
        ``1_c^T Kbar 1_c`` (rows of c in the block); ``"column"`` (P, K): the block's
        part of ``1^T Kbar 1_c``; ``"trace"``, ``"sum_sq"`` (``||Kbar||_F^2``) and
        ``"row_sq"`` (``||Kbar 1||^2``): the block's parts of these partition-free
        numbers. K is the largest cluster count of the P partitions.

    Raises
    ------
    ValueError
        ``rows`` and ``partitions`` disagree on n, or the block overruns n.
    """
    kbar, parts = _block_kernel(rows, start, partitions)
    b, n = kbar.shape
    dist = np.sqrt(np.maximum(2.0 - 2.0 * kbar, 0.0))
    dist[np.arange(b), start + np.arange(b)] = 0.0
    labels = [_labels(p, n) for p in parts]
    width = max(int(y.max()) + 1 for y in labels)
    sil, within, column = np.zeros((len(labels), b)), np.zeros((len(labels), width)), np.zeros((len(labels), width))
    for i, y in enumerate(labels):
        k = int(y.max()) + 1
        indicator = sp.csr_matrix((np.ones(n), (np.arange(n), y)), shape=(n, k))
        to_cluster = np.asarray(kbar @ indicator)  # (b, k): Kbar rows summed over each cluster
        column[i, :k] = to_cluster.sum(axis=0)
        own = y[start:start + b]
        within[i, :k] = np.bincount(own, weights=to_cluster[np.arange(b), own], minlength=k)
        if k >= 2:
            sil[i] = _block_silhouettes(kbar, start, y, dist, indicator)
    return {"silhouette": sil, "within": within, "column": column, "trace": float(np.trace(kbar[:, start:start + b])),
            "sum_sq": float(np.sum(kbar * kbar)), "row_sq": float(np.sum(kbar.sum(axis=1) ** 2))}


#: The votes computed beside :data:`SHIPPED` in the same pass (greater is better).
VOTES = ("kkm_objective_avg_kernel", "alignment_avg_kernel")


def finish_partition_scores(blocks: Sequence[Mapping[str, Any]], partitions: ArrayLike) -> dict[str, NDArray]:
    """Every partition's label-free scores from the blocks of :func:`partition_scores_block`.

    Parameters
    ----------
    blocks : sequence of dict
        One per row block, in row order, covering rows 0..n-1.
    partitions : array_like of shape (P, n)
        The partitions the blocks were computed for.

    Returns
    -------
    dict
        ``"samples"`` (P, n): per-sample silhouettes; :data:`SHIPPED` (P,): their mean;
        ``"kkm_objective_avg_kernel"`` (P,): ``-(tr Kc - sum_c 1_c^T Kc 1_c / n_c) /
        tr Kc`` in [-1, 0] (Dhillon, Guan & Kulis 2004; the within-cluster share of the
        kernel k-means objective); ``"alignment_avg_kernel"`` (P,):
        ``<Kc, Lc>_F / (||Kc||_F ||Lc||_F)``, ``L = Y Y^T``, ``Xc = H X H`` (Cortes,
        Mohri & Rostamizadeh 2012; 0 for one cluster). ``Kc`` is ``Kbar`` centred.
    """
    parts = np.atleast_2d(np.asarray(partitions))
    n = parts.shape[1]
    samples = np.concatenate([np.asarray(b["silhouette"]) for b in blocks], axis=1)
    within = np.sum([np.asarray(b["within"]) for b in blocks], axis=0)
    column = np.sum([np.asarray(b["column"]) for b in blocks], axis=0)
    trace, sum_sq, row_sq = (sum(float(b[key]) for b in blocks) for key in ("trace", "sum_sq", "row_sq"))
    total = float(np.sum(column[0]))  # 1^T Kbar 1, the same for every partition
    kkm, align = np.zeros(len(parts)), np.zeros(len(parts))
    scatter = trace - total / n  # tr(Kc)
    knorm = np.sqrt(max(sum_sq - 2.0 * row_sq / n + total**2 / n**2, 0.0))
    for i, p in enumerate(parts):
        sizes = np.bincount(_labels(p, n), minlength=within.shape[1]).astype(float)
        used = sizes > 0
        centred = within[i] - 2.0 * sizes * column[i] / n + sizes**2 * total / n**2  # 1_c^T Kc 1_c
        if scatter > 0:
            kkm[i] = -(scatter - float(np.sum(centred[used] / sizes[used]))) / scatter
        s2, s3 = np.sum(sizes**2), np.sum(sizes**3)
        lnorm2 = s2 - 2.0 * s3 / n + s2**2 / n**2
        if lnorm2 > 1e-12 * n * n and knorm > 0:
            align[i] = float(np.sum(centred)) / (knorm * np.sqrt(lnorm2))
    return {"samples": samples, SHIPPED: samples.mean(axis=1), VOTES[0]: kkm, VOTES[1]: align}


# --------------------------------------------------------------------------- grid level


def consensus(partitions: Sequence[ArrayLike], score: str = "ari") -> NDArray[np.float64]:
    """For each partition, its mean agreement with all the other partitions of the grid.

    Parameters
    ----------
    partitions : sequence of array_like, each of shape (n,)
        One partition per grid point.
    score : {"ari", "nmi"}

    Returns
    -------
    ndarray of shape (len(partitions),)
        Mean ARI (or NMI) with the others; the grid's "median partition" scores highest.

    Raises
    ------
    ValueError
        Fewer than 2 partitions, an unknown ``score``, or partitions of different lengths.

    References
    ----------
    A. Strehl, J. Ghosh, "Cluster ensembles", JMLR 3, 2002 (average NMI to the ensemble).
    """
    fn = {"ari": adjusted_rand_score, "nmi": normalized_mutual_info_score}.get(score)
    if fn is None:
        raise ValueError(f"score must be 'ari' or 'nmi', got {score!r}")
    parts = [np.asarray(p).ravel() for p in partitions]
    if len(parts) < 2:
        raise ValueError("consensus needs at least 2 partitions")
    if len({p.size for p in parts}) != 1:
        raise ValueError("partitions have different lengths")
    m = len(parts)
    s = np.eye(m)
    for i in range(m):
        for j in range(i + 1, m):
            s[i, j] = s[j, i] = fn(parts[i], parts[j])
    return (s.sum(axis=1) - 1.0) / (m - 1)


#: AutoSC's guard against a zero denominator in :func:`relative_eigengap` (Fan et al. 2022, their
#: constant, not tuned here).
EIGENGAP_EPS = 1e-6
#: Above this n the eigenvalues of :func:`relative_eigengap` come from ARPACK, not a dense solver.
EIGENGAP_DENSE_MAX = 1500


def relative_eigengap(graph: Any, n_clusters: int) -> float:
    """AutoSC's relative eigen-gap of a graph's normalised Laplacian at ``n_clusters``.

    With ``W = (G + G^T) / 2``, ``D = diag(W 1)`` and ``L = I - D^{-1/2} W D^{-1/2}``
    (a vertex of degree 0 contributes the eigenvalue 1), eigenvalues ``l_1 <= l_2 <= ...``:
    ``(l_{k+1} - mean(l_1..l_k)) / (EIGENGAP_EPS + mean(l_1..l_k))`` (Fan, Chow, Zhang,
    Sun, Ren, "A simple approach to automated spectral clustering", NeurIPS 2022). Greater
    is better: k well separated components give a large gap.

    Parameters
    ----------
    graph : array_like or scipy.sparse matrix of shape (n, n)
        A non-negative affinity (in the sweep, a grid point's Z, in its ``model.safetensors``).
    n_clusters : int
        k, with ``1 <= k < n``.

    Returns
    -------
    float
        The relative gap (>= -1).

    Raises
    ------
    ValueError
        ``graph`` not square, with NaN, Inf or a negative entry, or ``n_clusters`` not in
        ``[1, n - 1]``.
    """
    w = sp.csr_matrix(graph, dtype=np.float64) if sp.issparse(graph) else sp.csr_matrix(np.asarray(graph, float))
    n = w.shape[0]
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"graph must be square (n, n), got shape {w.shape}")
    if not np.all(np.isfinite(w.data)) or (w.data < 0).any():
        raise ValueError("graph has a NaN, Inf or negative entry: an affinity is finite and non-negative")
    k = int(n_clusters)
    if not 1 <= k < n:
        raise ValueError(f"n_clusters = {n_clusters} must be in [1, n - 1 = {n - 1}]")
    w = (w + w.T) * 0.5
    deg = np.asarray(w.sum(axis=1)).ravel()
    inv = np.zeros(n)
    inv[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    a = sp.diags(inv) @ w @ sp.diags(inv)
    with limit_blas(1):
        if n <= EIGENGAP_DENSE_MAX:
            mu = np.linalg.eigvalsh(a.toarray())[::-1][: k + 1]
        else:
            from scipy.sparse.linalg import eigsh

            mu = np.sort(eigsh(a, k=k + 1, which="LA", return_eigenvectors=False))[::-1]
    lam = np.sort(1.0 - mu)
    low = float(np.mean(lam[:k]))
    return float((lam[k] - low) / (EIGENGAP_EPS + low))


def default_decision(samples: ArrayLike, best: int, default: int) -> dict[str, Any]:
    """Whether the criterion's best grid point has earned leaving the default.

    The default holds unless the best's mean per-sample score exceeds the default's by
    more than the standard error of the paired differences ``d_i = s_best,i - s_default,i``
    (``std(d) / sqrt(n)``): the spread of the win over resamples of the samples, the same
    one-standard-error statement as :func:`near_ties` (the default is kept exactly where it
    is a near-tie of the best). No constant is tuned.

    Parameters
    ----------
    samples : array_like of shape (P, n)
        Per-sample scores of P grid points (:func:`finish_partition_scores`'s ``"samples"``).
    best : int
        Row of the criterion's best point.
    default : int
        Row of the default point (alpha = 1, or the user's alpha).

    Returns
    -------
    dict
        ``"moved"`` (bool): leave the default for ``best``; ``"win"``: the best's mean
        score minus the default's; ``"spread"``: the standard error of that win.

    Raises
    ------
    ValueError
        ``samples`` not 2-D with at least 2 samples, or ``best``/``default`` out of range.
    """
    s = np.asarray(samples, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise ValueError(f"samples must have shape (P, n) with n >= 2, got {s.shape}")
    for name, i in (("best", best), ("default", default)):
        if not 0 <= i < s.shape[0]:
            raise ValueError(f"{name} = {i} is not a row of {s.shape[0]} grid points")
    d = s[best] - s[default]
    win = float(d.mean())
    spread = float(d.std(ddof=1) / np.sqrt(d.size))
    return {"moved": bool(best != default and win > spread), "win": win, "spread": spread}


#: The shipped criterion: the silhouette of each alpha's partition with the distances of the
#: average preprocessed base kernel (measured in
#: docs/performance.md#choosing-alpha-and-k-without-labels-bench_selectionpy).
SHIPPED = "silhouette_avg_kernel"


# --------------------------------------------------------------------------- confidence


def near_ties(samples: ArrayLike, best: int) -> dict[str, NDArray]:
    """The grid points that the paired one-standard-error rule cannot tell from the best.

    Through the paired per-sample differences ``d_i = s_best,i - s_j,i``: point j is a
    near-tie when their mean is at most their standard error ``std(d) / sqrt(n)`` (Breiman,
    Friedman, Olshen & Stone 1984, section 3.4.3; Hastie, Tibshirani & Friedman 2009,
    section 7.10), conditional on the partitions.

    Parameters
    ----------
    samples : array_like of shape (P, n)
        Per-sample silhouettes of P grid points (:func:`finish_partition_scores`).
    best : int
        Index of the chosen point (the largest mean).

    Returns
    -------
    dict
        ``"difference"`` (P,): best's score minus each point's; ``"standard_error"``
        (P,): of that difference; ``"tied"`` (P,) bool: difference <= standard error
        (always True at ``best``).

    Raises
    ------
    ValueError
        ``samples`` not 2-D with at least 2 samples, or ``best`` out of range.
    """
    s = np.asarray(samples, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] < 2:
        raise ValueError(f"samples must have shape (P, n) with n >= 2, got {s.shape}")
    if not 0 <= best < s.shape[0]:
        raise ValueError(f"best = {best} is not a row of {s.shape[0]} grid points")
    d = s[best][None, :] - s
    diff = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(s.shape[1])
    tied = diff <= se
    tied[best] = True
    return {"difference": diff, "standard_error": se, "tied": tied}


def medoid_partition(partitions: Sequence[ArrayLike]) -> tuple[int, NDArray[np.float64]]:
    """The partition that agrees best with the others: the medoid by adjusted Rand index.

    The consensus over near-ties (best score first): the one of largest mean ARI with the
    others (:func:`consensus`); ties, and the case of two partitions, go to the first.

    Parameters
    ----------
    partitions : sequence of array_like, each of shape (n,)
        At least 1.

    Returns
    -------
    index : int
        Of the medoid in ``partitions``.
    agreement : ndarray of shape (len(partitions),)
        Each partition's mean ARI with the others (1.0 for a single one).

    Raises
    ------
    ValueError
        No partitions, or partitions of different lengths.
    """
    parts = list(partitions)
    if not parts:
        raise ValueError("medoid_partition needs at least 1 partition")
    if len(parts) == 1:
        return 0, np.ones(1)
    agreement = consensus(parts, "ari")
    return int(np.argmax(agreement)), agreement


#: The prediction strength above which a k is stable: Tibshirani & Walther (2005)
#: recommend 0.8 to 0.9; the lower end, fixed before any measurement here.
PS_THRESHOLD = 0.8
#: Random halvings per k whose prediction strengths are averaged.
PS_SPLITS = 5
#: k-means starts per half (the clusterings compared, not the package's labels).
PS_N_INIT = 10


def _strength(test_labels, predicted):
    """Smallest over test clusters of the share of their pairs that ``predicted`` co-assigns."""
    worst = 1.0
    for c in np.unique(test_labels):
        members = predicted[test_labels == c]
        m = members.size
        if m < 2:
            continue
        counts = np.bincount(members).astype(float)
        worst = min(worst, float(np.sum(counts * (counts - 1)) / (m * (m - 1))))
    return worst


def prediction_strength(
    embedding: ArrayLike, n_clusters: int, random_state: int = 0, n_splits: int = PS_SPLITS,
    n_init: int = PS_N_INIT,
) -> float:
    """Prediction strength of k-means with ``n_clusters`` clusters on an embedding.

    Tibshirani & Walther (2005): each of ``n_splits`` random halvings clusters both halves
    (:func:`lswmkc_dask.engine.postprocess.kmeans_best_of`), assigns each test point to the
    nearest training centroid and takes the smallest share, over test clusters, of pairs
    kept together; the mean over halvings. 1.0 for ``n_clusters = 1``.

    Parameters
    ----------
    embedding : array_like of shape (n, d)
        Rows to cluster (in the sweep, the spectral embedding of K* at k).
    n_clusters : int
    random_state : int, default 0
        Seeds the halvings and the k-means starts: the same value, the same result.
    n_splits : int, default :data:`PS_SPLITS`
    n_init : int, default :data:`PS_N_INIT`

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        Fewer than ``2 n_clusters`` rows, or ``n_clusters < 1``.

    References
    ----------
    R. Tibshirani, G. Walther, "Cluster validation by prediction strength", J. Comput.
    Graph. Stat. 14(3), 2005.
    """
    x = np.asarray(embedding, dtype=np.float64)
    n = x.shape[0]
    if n_clusters < 1 or n < 2 * n_clusters:
        raise ValueError(f"prediction strength of {n_clusters} clusters needs at least {2 * n_clusters} rows, got {n}")
    if n_clusters == 1:
        return 1.0
    rng = np.random.default_rng(random_state)
    values = []
    with limit_blas(1):
        for _ in range(n_splits):
            order = rng.permutation(n)
            train, test = x[order[: n // 2]], x[order[n // 2:]]
            seeds = rng.integers(2**31 - 1, size=2)
            y_train, _ = kmeans_best_of(train, n_clusters, n_init, int(seeds[0]))
            y_test, _ = kmeans_best_of(test, n_clusters, n_init, int(seeds[1]))
            present = np.unique(y_train)
            centres = np.stack([train[y_train == c].mean(axis=0) for c in present])
            nearest = np.argmin(((test[:, None, :] - centres[None]) ** 2).sum(axis=2), axis=1)
            values.append(_strength(y_test, nearest))
    return float(np.mean(values))


def choose_n_clusters(strengths: Mapping[int, float], threshold: float = PS_THRESHOLD) -> int | None:
    """The largest k whose prediction strength reaches ``threshold``, or None.

    Tibshirani & Walther's rule (2005, section 3); None ("k not determined") where no
    k >= 2 reaches it.

    Parameters
    ----------
    strengths : mapping of int to float
        k -> :func:`prediction_strength`.
    threshold : float, default :data:`PS_THRESHOLD`

    Returns
    -------
    int or None
    """
    stable = [int(k) for k, v in strengths.items() if int(k) >= 2 and v >= threshold]
    return max(stable) if stable else None


#: How far apart (in clusters) the silhouette's k and prediction strength's k may be for
#: :func:`agreed_n_clusters` to report a k (the aim's "k within 1 of the class count").
K_TOLERANCE = 1


def agreed_n_clusters(k_score: int, k_stability: int | None, tolerance: int = K_TOLERANCE) -> int | None:
    """The number of clusters where two independent signals agree, else None ("k not determined").

    The silhouette's k and prediction strength's measure different things (separation on a
    fixed kernel; reproducibility on held-out halves), so a k is reported only where they
    agree: the silhouette's, chosen jointly with alpha (docs/algorithm.md section 4a).

    Parameters
    ----------
    k_score : int
        The k of the largest silhouette over alpha and k (the sweep's joint choice).
    k_stability : int or None
        The k of prediction strength (:func:`choose_n_clusters`); None when no k >= 2
        is stable, which is never an agreement.
    tolerance : int, default :data:`K_TOLERANCE`
        Largest ``|k_score - k_stability|`` that counts as agreement.

    Returns
    -------
    int or None
        ``k_score`` where ``k_stability`` is within ``tolerance`` of it, else None.

    Raises
    ------
    ValueError
        ``tolerance`` negative.
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if k_stability is None or abs(int(k_score) - int(k_stability)) > tolerance:
        return None
    return int(k_score)


def k_grid_edge(k: int, ks: Sequence[int]) -> str | None:
    """Whether a k chosen on the k grid ``ks`` lies at an edge that a k beyond the grid could move.

    A k at the grid's largest k cannot be told from a larger one, nor a k at its smallest k
    from a smaller one unless that k is 2; such a k is not reported as determined.

    Parameters
    ----------
    k : int
        A k of the grid.
    ks : sequence of int
        The k grid.

    Returns
    -------
    str or None
        ``"largest"`` or ``"smallest"`` (the edge k lies on), or None: inside the grid,
        at k = 2, or a grid of one k.
    """
    grid = sorted({int(v) for v in ks})
    if len(grid) < 2:
        return None
    if int(k) == grid[-1]:
        return "largest"
    return "smallest" if int(k) == grid[0] > 2 else None

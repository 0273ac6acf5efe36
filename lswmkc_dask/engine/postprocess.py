"""Kernel k-means on the neighbourhood kernel K* (docs/algorithm.md section 3).

K* = W W^T is centred and normalised on its factor, its top-k eigenvectors form H, each
row of H is scaled to unit length, and k-means clusters the rows of H: on the host
(:func:`cluster_factor`) or where W is (:func:`cluster_factor_on`). The labels do not
depend on the layout of the fit, where W agrees only to about 1e-15: null-space columns
of H are zeroed (:data:`NULL_RTOL`), signs fixed, H rounded to :data:`EMBEDDING_GRID`,
k-means single-threaded with ties (:data:`TIE_RTOL`) resolved to the first run, and
clusters numbered in order of first appearance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import array_namespace
from scipy.linalg import eigh
from sklearn import config_context
from sklearn.cluster import KMeans
from sklearn.utils import check_random_state

from .._threads import blas_threads, limit_blas
from ._memory import memory_left

#: Eigenvalues of the centred, normalised K* at most this fraction of the largest one are
#: treated as zero (their eigenvectors are not determined by K*). Layout noise puts them
#: near 1e-16 of the largest; real ones on the bundled data are above 1e-4.
NULL_RTOL = 1e-10
#: Spacing of the grid the embedding is rounded to before k-means (2**-26, about
#: 1.5e-8 on rows of unit length: half the digits of a double).
EMBEDDING_GRID = 2.0**-26
#: k-means runs whose inertias differ by at most this fraction are ties; the first
#: run among the lowest is kept.
TIE_RTOL = 1e-9
#: Rows of H shorter than this (before scaling) are numerically zero and stay zero.
ZERO_ROW_TOL = 1e-10


def centre_normalise(kernel: np.ndarray) -> np.ndarray:
    """Centre then normalise one dense kernel (docs/algorithm.md section 0).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)

    Returns
    -------
    ndarray of shape (n, n)
        Zero diagonal entries are left unscaled instead of dividing by zero.
    """
    k = np.asarray(kernel, dtype=np.float64)
    d = k.mean(axis=0)
    k = k - d[None, :] - d[:, None] + d.mean()
    k = 0.5 * (k + k.T)
    diag = np.diag(k).copy()
    diag[diag <= 0] = 1.0
    s = np.sqrt(diag)
    return k / s[:, None] / s[None, :]


def _orient(h):
    """Flip each column so that its entry of largest magnitude is positive (in place); entries
    within a relative 1e-8 of it count as equal and the first decides.
    """
    mag = np.abs(h)
    top = mag.max(axis=0)
    pivot = np.argmax(mag >= top * (1.0 - 1e-8), axis=0)
    signs = np.sign(h[pivot, np.arange(h.shape[1])])
    signs[signs == 0] = 1.0
    h *= signs
    return h


def spectral_embedding(
    kernel: np.ndarray,
    n_clusters: int,
    null_rtol: float = NULL_RTOL,
    grid: float = EMBEDDING_GRID,
) -> np.ndarray:
    """Row-normalised top-k eigenvectors of the centred, normalised kernel.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        K*.
    n_clusters : int
        k.
    null_rtol : float
        Eigenvectors whose eigenvalue is at most ``null_rtol`` times the largest (the
        null space of K*, fixed only by rounding) are set to zero.
    grid : float or None
        Round the result to multiples of ``grid`` (None: no rounding).

    Returns
    -------
    ndarray of shape (n, k)
        H, eigenvalues ascending by column, each column's largest entry positive, rows
        of unit length (zero rows stay zero), rounded to ``grid``.
    """
    k = centre_normalise(kernel)
    n = k.shape[0]
    # k is symmetric: its transpose is the same matrix in Fortran order (no copy).
    lam, h = eigh(k.T, subset_by_index=(n - n_clusters, n - 1), overwrite_a=True, check_finite=False)
    return _finish_embedding(lam, h, null_rtol, grid)


def factor_embedding(factor, n_clusters, null_rtol=NULL_RTOL, grid=EMBEDDING_GRID, method="auto"):
    """:func:`spectral_embedding` of ``K* = W W^T`` from the factor W, without K*.

    ``C K* C = (C W)(C W)^T`` with ``C = I - 1 1^T / n``, the normalisation is the row
    scaling ``Wn = D^-1/2 C W`` (``D = diag(C K* C)``, zeros guarded), and the top
    eigenvectors of ``Wn Wn^T`` are the left singular vectors of Wn: the dense
    embedding to rounding, in ``O(n r)`` memory.

    Parameters
    ----------
    factor : ndarray of shape (n, r)
    n_clusters : int
    null_rtol, grid : float
        As :func:`spectral_embedding`.
    method : {"auto", "svd", "gram"}
        "svd": the thin SVD of Wn (``gesdd``), about ``4 n r + 4 r^2`` numbers of memory.
        "gram": the top eigenvectors ``V`` of ``Wn^T Wn`` (r x r, formed by row blocks),
        then ``U = Wn V / s``: ``r^2 + n n_clusters`` numbers beside W. "auto": "svd"
        where its memory fits, else "gram". They agree to rounding times ``(s_1 /
        s_k)^2``, far below ``grid``.

    Returns
    -------
    ndarray of shape (n, n_clusters)
        As :func:`spectral_embedding`.

    Raises
    ------
    ValueError
        Unknown ``method``.
    """
    if method not in ("auto", "svd", "gram"):
        raise ValueError(f"method must be 'auto', 'svd' or 'gram', got {method!r}")
    w = np.asarray(factor, dtype=np.float64)
    n, r = w.shape
    if r == 0:
        return _finish_embedding(np.zeros(n_clusters), np.zeros((n, n_clusters)), null_rtol, grid)
    if method == "auto":
        left = memory_left()
        method = "svd" if left is None or 8 * (4 * n * r + 4 * r * r) <= 0.8 * left else "gram"
    if method == "svd":
        return _svd_embeddings(w, (n_clusters,), null_rtol, grid)[n_clusters]
    return _gram_embedding(w, n_clusters, null_rtol, grid, np.asarray)


def _columns(k, vals, vecs):
    """``(eigenvalues, H)`` of k columns, ascending as eigh returns them, from the top eigenpairs
    ``vals`` (descending, at most k) and ``vecs``; the columns beyond the rank stay zero.
    """
    top = vals.size
    lam, h = np.zeros(k), np.zeros((vecs.shape[0], k))
    lam[k - top :], h[:, k - top :] = vals[::-1], vecs[:, ::-1]
    return lam, h


def _svd_embeddings(w, ks, null_rtol, grid):
    """:func:`factor_embedding`'s "svd" method at every k of ``ks`` from one thin SVD of Wn (r > 0)."""
    wc = w - w.mean(axis=0)
    diag = np.einsum("ij,ij->i", wc, wc)
    diag[diag <= 0] = 1.0
    wc /= np.sqrt(diag)[:, None]
    u, s, _ = np.linalg.svd(wc, full_matrices=False)
    out = {}
    for k in ks:
        lam, h = _columns(k, s[: min(k, s.size)] ** 2, u[:, : min(k, s.size)])
        out[k] = _finish_embedding(lam, h, null_rtol, grid)
    return out


def factor_embeddings(factor: np.ndarray, ks: Any) -> dict[int, np.ndarray]:
    """:func:`factor_embedding` (the "svd" method) at several k from ONE thin SVD of Wn.

    Parameters
    ----------
    factor : ndarray of shape (n, r)
    ks : iterable of int

    Returns
    -------
    dict
        k -> ndarray of shape (n, k), equal to ``factor_embedding(factor, k, method="svd")``.
    """
    w = np.asarray(factor, dtype=np.float64)
    ks = sorted({int(k) for k in ks})
    if w.shape[1] == 0:
        return {k: factor_embedding(w, k) for k in ks}
    return _svd_embeddings(w, ks, NULL_RTOL, EMBEDDING_GRID)


def factor_embedding_on(w: Any, n_clusters: int, to_host: Any = None) -> np.ndarray:
    """:func:`factor_embedding` ("gram") with the factor W where it is (any array-API namespace).

    ``Wn``, ``Wn^T Wn`` and its top eigenvectors are formed on W's device; only U (n x k)
    and its k eigenvalues come to the host, where the embedding is finished as every
    route finishes it.

    Parameters
    ----------
    w : array of shape (n, r), float64
        The factor of K* on its device.
    n_clusters : int
    to_host : callable, optional
        Copies a device array to a NumPy array; default ``np.asarray``.

    Returns
    -------
    ndarray of shape (n, n_clusters)
        As :func:`factor_embedding` (equal to rounding, below its grid).
    """
    if w.shape[1] == 0:
        return factor_embedding(np.zeros((w.shape[0], 0)), n_clusters)
    return _gram_embedding(w, n_clusters, NULL_RTOL, EMBEDDING_GRID, np.asarray if to_host is None else to_host)


def _gram_embedding(w, n_clusters, null_rtol, grid, to_host):
    """:func:`factor_embedding`'s "gram" method on W's device (r > 0): ``Wn`` a row block of
    :data:`GRAM_BLOCK` at a time, ``G = Wn^T Wn`` (r x r) and its top eigenvectors V, then
    ``U = Wn V / s``; only U (n x k) and its eigenvalues come to the host (``to_host``).
    """
    xp = array_namespace(w)
    n, r = w.shape
    mean = xp.mean(w, axis=0)

    def rows(b0):  # rows b0: b0 + GRAM_BLOCK of Wn = D^-1/2 C W
        x = w[b0 : min(n, b0 + GRAM_BLOCK), :] - mean
        d = xp.sum(x * x, axis=1)
        return x / xp.sqrt(xp.where(d <= 0, 1.0, d))[:, None]

    g = None
    for b0 in range(0, n, GRAM_BLOCK):
        x = rows(b0)
        g = xp.matrix_transpose(x) @ x if g is None else g + xp.matrix_transpose(x) @ x
    lam, v = xp.linalg.eigh(g)
    del g
    top = min(n_clusters, r)
    vals = xp.clip(lam[r - top :], min=0.0)  # ascending, as eigh returns them
    s = xp.sqrt(vals)
    v = v[:, r - top :]
    u = xp.concat([rows(b0) @ v for b0 in range(0, n, GRAM_BLOCK)], axis=0) / xp.where(s > 0, s, 1.0)[None, :]
    lam_out, h = np.zeros(n_clusters), np.zeros((n, n_clusters))
    lam_out[n_clusters - top :], h[:, n_clusters - top :] = to_host(vals), to_host(u)
    return _finish_embedding(lam_out, h, null_rtol, grid)


def cluster_factor_on(w: Any, n_clusters: int, n_init: int = 50, random_state: int | None = None,
                      to_host: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cluster_factor` where the factor W is: the embedding
    (:func:`factor_embedding_on`) and the k-means (:func:`kmeans_on`) on W's device.

    Parameters
    ----------
    w : array of shape (n, r), float64, of any array-API namespace
    n_clusters, n_init, random_state
        As :func:`cluster_factor`.
    to_host : callable, optional
        As :func:`kmeans_on`.

    Returns
    -------
    labels : ndarray of shape (n,)
    embedding : ndarray of shape (n, n_clusters)
        On the host (n x k numbers crossed).
    """
    xp = array_namespace(w)
    h = factor_embedding_on(w, n_clusters, to_host)
    labels, _ = kmeans_on(xp.asarray(h, device=w.device), n_clusters, n_init, random_state, to_host=to_host)
    return labels, h


#: Rows of Wn per block when the Gram matrix is formed (factor_embedding, "gram").
GRAM_BLOCK = 2048


def _finish_embedding(lam, h, null_rtol, grid):
    """Null-space columns zeroed, signs fixed, rows normalised, rounded to ``grid``."""
    n = h.shape[0]
    tol = max(null_rtol, 64 * n * np.finfo(np.float64).eps) * max(float(lam[-1]), 0.0)
    h[:, lam <= tol] = 0.0
    _orient(h)
    norms = np.linalg.norm(h, axis=1, keepdims=True)
    zero = norms <= ZERO_ROW_TOL
    norms[zero] = 1.0
    h /= norms
    h[zero[:, 0]] = 0.0
    if grid:
        h = np.round(h / grid) * grid
    return h


def canonical_labels(labels: Any) -> np.ndarray:
    """Renumber clusters ``0, 1, ...`` in order of first appearance.

    Parameters
    ----------
    labels : array_like of shape (n,)

    Returns
    -------
    ndarray of shape (n,), int64
    """
    labels = np.asarray(labels)
    values, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(values.size)
    return rank[inverse.ravel()]


def kmeans_best_of(
    x: Any,
    n_clusters: int,
    n_init: int = 50,
    random_state: int | None = None,
    max_iter: int = 250,
    tie_rtol: float = TIE_RTOL,
) -> tuple[np.ndarray, float]:
    """k-means with ``n_init`` k-means++ starts; the run of lowest inertia.

    The starts are those of ``KMeans(n_clusters, n_init=n_init, random_state=random_state)``;
    runs are single-threaded; among runs within ``tie_rtol`` of the lowest inertia the
    first is kept.

    Parameters
    ----------
    x : ndarray of shape (n, d)
    n_clusters : int
    n_init : int
    random_state : int, numpy RandomState or None
    max_iter : int
    tie_rtol : float

    Returns
    -------
    labels : ndarray of shape (n,), int64
        Numbered by :func:`canonical_labels`.
    inertia : float
    """
    rng = check_random_state(random_state)
    runs = []
    with limit_blas(1), config_context(assume_finite=True, skip_parameter_validation=True):  # x is ours
        for _ in range(n_init):
            km = KMeans(n_clusters, n_init=1, max_iter=max_iter, random_state=rng).fit(x)
            runs.append((float(km.inertia_), km.labels_))
    best = min(inertia for inertia, _ in runs)
    inertia, labels = next(r for r in runs if r[0] <= best + tie_rtol * abs(best))
    return canonical_labels(labels), inertia


def cluster_factor(
    factor: np.ndarray,
    n_clusters: int,
    n_init: int = 50,
    random_state: int | None = None,
    n_threads: int | None = None,
    max_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """K* = W W^T -> spectral embedding -> k-means with ``n_init`` starts.

    Parameters
    ----------
    factor : ndarray of shape (n, r)
        W from :func:`lswmkc_dask.core.eigen.psd_factor`.
    n_clusters : int
    n_init : int
        k-means starts; the run of lowest inertia is kept (:func:`kmeans_best_of`).
    random_state : int or None
    n_threads : int, optional
        BLAS threads of the eigendecomposition (default: the cores free now,
        :func:`lswmkc_dask._threads.free_cores`); k-means runs on one thread.
    max_threads : int, optional
        Upper bound of that default.

    Returns
    -------
    labels : ndarray of shape (n,)
    embedding : ndarray of shape (n, k)
    """
    with limit_blas(blas_threads(n_threads, max_threads, factor.shape[0])):
        h = factor_embedding(factor, n_clusters)
    labels, _ = kmeans_best_of(h, n_clusters, n_init, random_state)
    return labels, h


def _squared_distances(c, x, sq, xp):
    """Squared distances of the rows of ``c`` to those of ``x`` (len(c), n), as scikit-learn forms them."""
    return xp.clip(-2.0 * (c @ xp.matrix_transpose(x)) + xp.sum(c * c, axis=1)[:, None] + sq[None, :], min=0.0)


def _plus_plus(x, sq, rng, n_clusters, xp):
    """Greedy k-means++ centres of the rows of ``x`` on its device: scikit-learn's
    ``_kmeans_plusplus`` with unit weights and the same host draws from ``rng``.
    """
    n = x.shape[0]
    trials = 2 + int(np.log(n_clusters))
    first = int(rng.choice(n, p=np.ones(n) / n))
    ids = xp.asarray([first], device=x.device)
    closest = _squared_distances(x[first : first + 1, :], x, sq, xp)[0, :]
    pot = xp.sum(closest)
    for _ in range(1, n_clusters):
        draws = xp.asarray(rng.uniform(size=trials), dtype=x.dtype, device=x.device) * pot
        cand = xp.clip(xp.searchsorted(xp.cumulative_sum(closest), draws), max=n - 1)
        dist = xp.minimum(closest[None, :], _squared_distances(xp.take(x, cand, axis=0), x, sq, xp))
        pots = xp.sum(dist, axis=1)
        best = xp.reshape(xp.argmin(pots), (1,))
        pot, closest = xp.take(pots, best)[0], xp.take(dist, best, axis=0)[0, :]
        ids = xp.concat([ids, xp.take(cand, best)])
    return xp.take(x, ids, axis=0)


def _assign(x, centres, xp):
    """Nearest centre of each row (scikit-learn's Lloyd step: ``||c||^2 - 2 x.c``, first on ties)."""
    return xp.argmin(xp.sum(centres * centres, axis=1)[None, :] - 2.0 * (x @ xp.matrix_transpose(centres)), axis=1)


def _update(x, labels, centres, xp, to_host):
    """New centres, the means of their points; an empty cluster takes the point farthest from its
    centre, as scikit-learn relocates it.
    """
    k = centres.shape[0]
    onehot = xp.astype(labels[:, None] == xp.arange(k, device=x.device)[None, :], x.dtype)
    counts = xp.sum(onehot, axis=0)
    sums = xp.matrix_transpose(onehot) @ x
    empty = int(to_host(xp.sum(xp.astype(counts == 0, xp.int64))))
    if empty:
        far = to_host(xp.argsort(xp.sum(xp.square(x - xp.take(centres, labels, axis=0)), axis=1),
                                 descending=True)[:empty])
        owners, hosts = to_host(labels), to_host(counts)
        sums_h = to_host(sums)
        xs = to_host(xp.take(x, xp.asarray(far, device=x.device), axis=0))
        for new, (i, row) in zip(np.flatnonzero(hosts == 0), zip(far, xs)):
            sums_h[owners[i]] -= row
            hosts[owners[i]] -= 1
            sums_h[new], hosts[new] = row, 1
        sums, counts = xp.asarray(sums_h, device=x.device), xp.asarray(hosts, device=x.device)
    return xp.where(counts[:, None] > 0, sums / xp.where(counts > 0, counts, 1.0)[:, None], centres)


def _lloyd(x, centres, tol, max_iter, xp, to_host):
    """scikit-learn's ``_kmeans_single_lloyd``: until no label changes or the squared shift of
    the centres is at most ``tol``; labels and inertia as device arrays.
    """
    labels = _assign(x, centres, xp)
    strict = False
    for _ in range(max_iter):
        moved = _update(x, labels, centres, xp, to_host)
        new = _assign(x, moved, xp)
        same = xp.all(new == labels)
        shift = xp.sum(xp.square(moved - centres))
        centres, labels = moved, new
        flags = to_host(xp.stack([xp.astype(same, x.dtype), shift]))
        if flags[0]:
            strict = True
            break
        if flags[1] <= tol:
            break
    if not strict:
        labels = _assign(x, centres, xp)
    return labels, xp.sum(xp.square(x - xp.take(centres, labels, axis=0)))


def kmeans_on(
    x: Any,
    n_clusters: int,
    n_init: int = 50,
    random_state: int | None = None,
    max_iter: int = 250,
    *,
    to_host: Any = None,
    tie_rtol: float = TIE_RTOL,
) -> tuple[np.ndarray, float]:
    """:func:`kmeans_best_of` on the rows of ``x`` where ``x`` is (any array-API namespace and device).

    The same protocol and random numbers as :func:`kmeans_best_of` (scikit-learn's
    ``KMeans(n_init=1)`` run ``n_init`` times): the host's labels unless rounding of the
    distances on the device breaks a tie. A few numbers per Lloyd iteration, the
    inertias and the kept run's labels come to the host.

    Parameters
    ----------
    x : array of shape (n, d), float64
    n_clusters, n_init, random_state, max_iter, tie_rtol
        As :func:`kmeans_best_of`.
    to_host : callable, optional
        Copies a device array to a NumPy array (e.g. a counted link); default ``np.asarray``.

    Returns
    -------
    labels : ndarray of shape (n,), int64
    inertia : float
    """
    xp = array_namespace(x)
    bring = (lambda a: np.asarray(a)) if to_host is None else to_host
    rng = check_random_state(random_state)
    x = x - xp.mean(x, axis=0)
    tol = float(bring(xp.mean(xp.var(x, axis=0)))) * 1e-4
    sq = xp.sum(x * x, axis=1)
    runs = [_lloyd(x, _plus_plus(x, sq, rng, n_clusters, xp), tol, max_iter, xp, bring) for _ in range(n_init)]
    inertias = bring(xp.stack([inertia for _, inertia in runs]))
    best = float(inertias.min())
    keep = int(np.flatnonzero(inertias <= best + tie_rtol * abs(best))[0])
    return canonical_labels(bring(runs[keep][0])), float(inertias[keep])

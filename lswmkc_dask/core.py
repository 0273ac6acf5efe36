"""The paper's equations written once against the array API.

Every route runs these functions: the in-process and Dask blockwise routes on NumPy
(:mod:`lswmkc_dask.steps`, :mod:`lswmkc_dask.solver`) and the device-resident route on
any array-API namespace (:mod:`lswmkc_dask._device_fit`: CuPy on a GPU; NumPy and
array-api-strict in CI). The namespace is the ``xp`` argument, or the arrays' own
(``array_api_compat.array_namespace``). Nothing here reads files or knows Dask.
Equation numbers follow docs/algorithm.md (Li et al., "Local Sample-weighted Multiple
Kernel Clustering with Consensus Discriminative Graph", IEEE TNNLS):

=====================  ==========================================
function               source
=====================  ==========================================
initial_neighbours     Eqs. (25)-(28): neighbours, Z0 and gamma (alpha = 0)
init_graph_rows        the same as CSR rows of Z0 (NumPy)
simplex_threshold      Theorem 1: theta and rho from sorted rows
project_rows_simplex   Theorem 1 (Eq. 16): Euclidean projection on the simplex
positive_factor        Theorem 2: ``W = U_+ diag(sqrt(lambda_+))`` of S
=====================  ==========================================

On NumPy arrays two of them take a faster road to the same numbers: the neighbours of
Eqs. (25)-(28) from a partition of each row instead of a full sort, and the threshold
of Theorem 1 from the largest entries of each row (a partial sort) before a full sort.
``full_sort=True`` sorts each row fully on every namespace (the resident route, so
that NumPy runs there what CuPy runs). The LAPACK routes of Theorem 2 on the host
(tridiagonal reduction, subsets, ARPACK, float32) are :func:`lswmkc_dask._eigen.psd_factor`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from array_api_compat import array_namespace, is_numpy_namespace

__all__ = [
    "EPS",
    "init_graph_rows",
    "initial_neighbours",
    "positive_factor",
    "project_rows_simplex",
    "simplex_threshold",
]

#: Machine epsilon of float64, added to the denominator of Eq. (28).
EPS = float(np.finfo(np.float64).eps)

#: Entries per row the NumPy road of :func:`project_rows_simplex` sorts first (then 8
#: times as many, until the support fits or the whole row is sorted).
_FIRST_TOP = 128


def initial_neighbours(
    combined_rows: Any, row_start: int, n_neighbors: int, *, xp: Any = None, full_sort: bool = False
) -> tuple[Any, Any, Any]:
    """The initial graph's neighbours, weights and gamma, Eqs. (25)-(28) with alpha = 0.

    For each row i, ``e_i = -Kw[i, :]`` is sorted ascending with the sample itself
    first (ties broken by column index); the next ``c + 1`` values ``d_1 .. d_{c+1}``
    give ``Z0[i, j_t] = (d_{c+1} - d_t) / (c d_{c+1} - sum_{t<=c} d_t + eps)`` (Eq. 28)
    and ``gamma_i = c/2 d_{c+1} - 1/2 sum_{t<=c} d_t`` (Eq. 27, the largest gamma_i for
    which row i has exactly c non-zeros). The sample itself is pinned to ``-inf``, so
    it ranks first even beside a duplicate of itself.

    Parameters
    ----------
    combined_rows : array of shape (b, n), float64
        Rows ``row_start .. row_start + b`` of ``sum_p omega0_p K_p``.
    row_start : int
        Index of the first row of the block in the full sample order.
    n_neighbors : int
        c, the number of neighbours, ``1 <= c <= n - 2``.
    xp : array-API namespace, optional
        Default: the namespace of ``combined_rows``.
    full_sort : bool
        Rank with a stable sort of each whole row on NumPy too (otherwise NumPy ranks
        the ``c + 2`` smallest of a partition: the same weights and gamma; a column
        tied with the ``(c + 1)``-th value, of weight 0, may differ).

    Returns
    -------
    neighbours : integer array of shape (b, c)
        Columns ``j_1 .. j_c`` of each row, nearest first.
    weights : array of shape (b, c)
        ``Z0[i, j_t]``; each row sums to 1.
    gamma : array of shape (b,)
        gamma_i of those rows (same units as the kernel values).
    """
    xp = array_namespace(combined_rows) if xp is None else xp
    b, n = combined_rows.shape
    c = int(n_neighbors)
    if is_numpy_namespace(xp) and not full_sort:
        e = -np.asarray(combined_rows, dtype=np.float64)
        rows = np.arange(b)
        e[rows, row_start + rows] = -np.inf
        part = np.argpartition(e, c + 1, axis=1)[:, : c + 2]  # the c + 2 smallest, then sorted stably
        order = np.lexsort((part, np.take_along_axis(e, part, axis=1)), axis=1)
        idx = np.take_along_axis(part, order, axis=1)[:, 1:]
    else:
        dev = combined_rows.device
        own = xp.arange(row_start, row_start + b, device=dev)
        e = xp.where(xp.arange(n, device=dev)[None, :] == own[:, None], -xp.inf, -combined_rows)
        idx = xp.argsort(e, axis=1, stable=True)[:, 1 : c + 2]
    d = xp.take_along_axis(e, idx, axis=1)  # (b, c + 1)
    d_last = d[:, c]
    top_sum = xp.sum(d[:, :c], axis=1)
    weights = (d_last[:, None] - d[:, :c]) / (c * d_last - top_sum + EPS)[:, None]
    gamma = 0.5 * c * d_last - 0.5 * top_sum
    return idx[:, :c], weights, gamma


def init_graph_rows(combined_rows: np.ndarray, row_start: int, n_neighbors: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Initial affinity-graph rows and gamma as CSR, Eqs. (25)-(28) (:func:`initial_neighbours`).

    Parameters
    ----------
    combined_rows : ndarray of shape (b, n)
        Rows ``row_start .. row_start + b`` of ``sum_p omega0_p K_p``.
    row_start : int
        Index of the first row of the block in the full sample order.
    n_neighbors : int
        c, the number of neighbours, ``1 <= c <= n - 2``.

    Returns
    -------
    z_rows : scipy.sparse.csr_matrix of shape (b, n)
        Rows of Z0; each has ``c`` non-zeros summing to 1 and ``z_ii = 0``.
    gamma : ndarray of shape (b,)
        gamma_i of those rows (same units as the kernel values).
    """
    b, n = combined_rows.shape
    idx, weights, gamma = initial_neighbours(np.asarray(combined_rows), row_start, n_neighbors)
    c = idx.shape[1]
    z_rows = sp.csr_matrix((weights.ravel(), idx.ravel(), np.arange(0, b * c + 1, c)), shape=(b, n))
    z_rows.sort_indices()
    return z_rows, gamma


def simplex_threshold(u_desc: Any, xp: Any) -> tuple[Any, Any]:
    """Threshold theta and support size rho of Theorem 1 from rows sorted in descending order.

    ``rho`` is the number of entries with ``u_r - (sum_{s<=r} u_s - 1) / r > 0`` and
    ``theta = (sum_{s<=rho} u_s - 1) / rho`` (``-inf`` entries, the excluded ones, add 0
    to the sums). The cumulative sum runs left to right, so the first k entries of a
    row give the same sums, and the same theta, as the whole row whenever ``rho < k``.

    Parameters
    ----------
    u_desc : array of shape (b, k), float64
        The k largest entries of each row, in descending order (k = n: the whole row).
    xp : array-API namespace

    Returns
    -------
    theta : array of shape (b,)
    rho : integer array of shape (b,)
    """
    k = u_desc.shape[1]
    css = xp.cumulative_sum(xp.where(xp.isfinite(u_desc), u_desc, 0.0), axis=1) - 1.0
    ranks = xp.arange(1, k + 1, dtype=xp.float64, device=u_desc.device)
    rho = xp.sum(xp.astype(u_desc - css / ranks > 0, xp.int64), axis=1)
    theta = xp.take_along_axis(css, (rho - 1)[:, None], axis=1)[:, 0] / xp.astype(rho, xp.float64)
    return theta, rho


def _partial_sort_thresholds(work, xp):
    """The threshold of each row of a NumPy array from its largest entries (128, then 1024, ...).

    Only the largest entries can be in the support, so a row is sorted fully only when
    its support is larger.
    """
    b, n = work.shape
    theta = np.empty(b)
    todo = np.arange(b)
    top = _FIRST_TOP
    while todo.size:
        if top >= n:
            theta[todo], _ = simplex_threshold(-np.sort(-work[todo], axis=1), xp)
            break
        part = np.partition(work[todo], n - top, axis=1)[:, n - top :]
        th, rho = simplex_threshold(-np.sort(-part, axis=1), xp)
        ok = rho < top  # the (top+1)-th largest entry is <= the top-th <= theta
        theta[todo[ok]] = th[ok]
        todo = todo[~ok]
        top *= 8
    return theta


def project_rows_simplex(
    v: Any,
    exclude: Any = None,
    *,
    xp: Any = None,
    full_sort: bool = False,
    sparse: bool = False,
    overwrite: bool = False,
) -> Any:
    """Euclidean projection of each row onto the probability simplex (Theorem 1).

    Solves ``min_z 1/2 ||z - v||^2`` s.t. ``z >= 0``, ``sum z = 1`` row by row, with
    entry ``exclude[i]`` of row i forced to 0 (``z_ii = 0``). The solution is
    ``z = max(v - theta, 0)`` (Eq. 16, theta = -beta_i), theta from the sorted row
    (:func:`simplex_threshold`), which equals the reference's Newton search on beta_i
    to round-off. On NumPy, rows are first partially sorted (top 128, then 1024
    entries) and fully sorted only when the support is larger: the same theta.

    Parameters
    ----------
    v : array of shape (b, n), float64
        Rows to project (``z_hat``).
    exclude : integer array of shape (b,), optional
        Column forced to zero in each row (the sample itself); same namespace and device.
    xp : array-API namespace, optional
        Default: the namespace of ``v``.
    full_sort : bool
        Sort each whole row on NumPy too (other namespaces always do).
    sparse : bool
        Return a scipy.sparse CSR matrix holding only the support (NumPy only).
    overwrite : bool
        Allow ``v`` to be modified (NumPy: saves a copy of a row block).

    Returns
    -------
    array or scipy.sparse.csr_matrix of shape (b, n)
        Projected rows, each non-negative and summing to 1.

    Raises
    ------
    ValueError
        ``sparse=True`` on another namespace than NumPy.
    """
    xp = array_namespace(v) if xp is None else xp
    host = is_numpy_namespace(xp)
    if sparse and not host:
        raise ValueError("project_rows_simplex: sparse=True needs NumPy arrays (scipy.sparse output)")
    b, n = v.shape
    if host:
        v = np.asarray(v, dtype=np.float64)
        work = v if overwrite else v.copy()
        if exclude is not None:
            work[np.arange(b), exclude] = -np.inf
    elif exclude is not None:
        work = xp.where(xp.arange(n, device=v.device)[None, :] == exclude[:, None], -xp.inf, v)
    else:
        work = v
    if host and not full_sort:
        with np.errstate(invalid="ignore"):
            theta = _partial_sort_thresholds(work, xp)
    else:
        theta, _ = simplex_threshold(xp.sort(work, axis=1, descending=True), xp)
    support = work > theta[:, None]
    if sparse:
        r, c = np.nonzero(support)
        z = sp.csr_matrix((work[r, c] - theta[r], (r, c)), shape=(b, n))
        z.sort_indices()
        return z
    return xp.where(support, work - theta[:, None], 0.0)


def positive_factor(s: Any, xp: Any, to_host: Callable[[Any], Any] | None = None) -> tuple[Any, Any]:
    """``W = U_+ diag(sqrt(lambda_+))`` of a symmetric S, on its namespace (Theorem 2).

    ``K* = U max(Lambda, 0) U^T = W W^T``: the eigenpairs of S with eigenvalue > 0,
    ascending. S is released once decomposed when the caller passes it as a temporary
    (no other reference), so that its room serves the factor.

    Parameters
    ----------
    s : array of shape (n, n), float64
        ``S = (Z + Z^T)/2``.
    xp : array-API namespace
        That of ``s`` (e.g. ``array_api_compat.cupy``).
    to_host : callable, optional
        Brings the rank r (a 0-d integer array) to the host, e.g. through a counted
        link; default ``int`` on the array.

    Returns
    -------
    factor : array of shape (n, r), float64, of namespace ``xp``
    eigenvalues : array of shape (r,)
        The positive eigenvalues, ascending (r = ``eigenvalues.shape[0]``).
    """
    lam, u = xp.linalg.eigh(s)
    del s
    order = xp.argsort(lam)
    lam = xp.take(lam, order)
    n = lam.shape[0]
    count = xp.sum(xp.astype(lam > 0, xp.int64))
    r = int(count if to_host is None else to_host(count))
    lam = lam[n - r :]
    return xp.take(u, order[n - r :], axis=1) * xp.sqrt(lam)[None, :], lam

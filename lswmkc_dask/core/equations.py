"""The paper's equations written once against the array API.

Every route runs these functions: the in-process and Dask blockwise routes on NumPy
(:mod:`lswmkc_dask.engine.solver`, :mod:`lswmkc_dask.kernels.features`) and the device-resident route on
any array-API namespace (:mod:`lswmkc_dask.engine.device_fit`: CuPy on a GPU; NumPy and
array-api-strict in CI). The namespace is the ``xp`` argument, or the arrays' own
(``array_api_compat.array_namespace``). Nothing here reads files or knows Dask.
Equation numbers follow docs/algorithm.md (Li et al., "Local Sample-weighted Multiple
Kernel Clustering with Consensus Discriminative Graph", IEEE TNNLS):

=====================  ==========================================
function               source
=====================  ==========================================
centre_normalise_rows  section 0: symmetrise, centre, normalise rows
initial_neighbours     Eqs. (25)-(28): neighbours, Z0 and gamma (alpha = 0)
init_graph_rows        the same as CSR rows of Z0 (NumPy)
combine_kernels        Eq. (10) first term, Eq. (13) ``sum_p w_p K_p``
kstar_rows             rows of ``K*_{t-1} = W W^T`` (K*_0 = K_omega0)
graph_rows             Eqs. (13)-(16): rows of Z for fixed omega, K*
graph_block            the same with delta_p and the row norms
simplex_threshold      Theorem 1: theta and rho from sorted rows
project_rows_simplex   Theorem 1 (Eq. 16): Euclidean projection on the simplex
kernel_alignment       delta_p = Tr(K_p Z^T) of Eq. (11), per row block
kernel_weights         Eqs. (11)-(12): closed-form kernel weights
objective              Eq. (10)
positive_factor        Theorem 2: ``W = U_+ diag(sqrt(lambda_+))`` of S
=====================  ==========================================

On NumPy, :func:`initial_neighbours` and :func:`project_rows_simplex` partially sort
each row (the same numbers) unless ``full_sort=True``, which the resident route passes
so that NumPy runs there what CuPy runs. The LAPACK routes of Theorem 2 are
:func:`lswmkc_dask.core.eigen.psd_factor`; the statistics that centring needs are
:func:`lswmkc_dask.kernels.features.scan_kernels`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from array_api_compat import array_namespace, is_numpy_namespace

from ..errors import Param, ParameterError

#: Machine epsilon of float64, added to the denominator of Eq. (28).
EPS = float(np.finfo(np.float64).eps)

#: Largest accepted alpha (and scalar gamma). :func:`graph_rows` forms
#: ``2 alpha K*[i, :]`` and ``2 (alpha + gamma_i)`` (Eq. 15; |K*_ij| <= 1): in float64
#: these overflow from alpha (or gamma) = DBL_MAX / 2, about 9e307, and Z, delta and
#: the kernel weights then turn NaN. :func:`objective` forms ``alpha ||K* - Z||_F^2`` and
#: ``sum_i gamma_i ||Z_i||^2``, both at most ``alpha n`` (``gamma n``) since each row of
#: Z lies on the simplex (``||Z_i||^2 <= 1``): infinite from DBL_MAX / n. 1e300 keeps
#: every one of these finite for any n up to 1e8.
ALPHA_MAX = 1e300
#: Why alpha has an upper bound, added to the message that refuses a larger one.
ALPHA_RANGE_WHY = (" (from about 9e307, 2 alpha overflows float64 in the update of Z, Eq. 15, and alpha ||K* - Z||^2 "
                   "in the objective from 1.8e308 / n; the bound keeps both finite for n up to 1e8)")
#: Largest accepted scalar gamma (as :data:`ALPHA_MAX`).
GAMMA_MAX = ALPHA_MAX
#: Smallest accepted scalar gamma. With alpha = 0 the update of Z divides the combined
#: kernel rows (entries up to sqrt(m): unit-norm weights, unit-diagonal kernels) by
#: ``2 gamma``; the simplex projection then subtracts its threshold from entries that
#: differ by 1, which rounding loses once the entries pass 1 / EPS (about 4.5e15): from
#: gamma of about 1e-16 on YALE every row's support is empty and the fit fails. 1e-12
#: leaves a factor 1e4 (m up to 1e8 kernels).
GAMMA_MIN = 1e-12
#: Added to every centred kernel's diagonal, as the reference code does (section 0).
DIAGONAL_JITTER = 1e-12

#: Entries per row the NumPy road of :func:`project_rows_simplex` sorts first (then 8
#: times as many, until the support fits or the whole row is sorted).
_FIRST_TOP = 128


def mean_of_means(col_means: Any, xp: Any = None) -> Any:
    """``e``, the mean of all entries of each kernel from its column means (section 0).

    Summed left to right (a cumulative sum), as the reference code does.

    Parameters
    ----------
    col_means : array of shape (m, n)
        Column means ``d`` of each raw kernel.
    xp : array-API namespace, optional
        Default: the namespace of ``col_means``.

    Returns
    -------
    array of shape (m,)
    """
    xp = array_namespace(col_means) if xp is None else xp
    return xp.cumulative_sum(col_means, axis=1)[:, -1] / col_means.shape[1]


def centre_normalise_rows(
    rows: Any,
    start: int,
    col_means: Any,
    diag: Any,
    transposed_rows: Any = None,
    *,
    xp: Any = None,
) -> Any:
    """Centre and normalise a row block of kernels (docs/algorithm.md section 0).

    With ``d`` the column means and ``e`` their mean, the centred kernel is
    ``Kc = K - 1 d^T - d 1^T + e`` (Shawe-Taylor & Cristianini 2004), symmetrised as
    ``(Kc + Kc^T) / 2``, given ``+ 1e-12`` on the diagonal, and normalised to
    ``Kc_ij / sqrt(Kc_ii Kc_jj)`` (Cortes et al. 2012). The operations are done in the
    reference code's order, ``((K_ij - d_j) - d_i) + e`` then the symmetrisation, so
    that a kernel close to a constant, where centring cancels almost every digit, is
    rounded as the reference rounds it. Blocks written separately form an exactly
    symmetric matrix (each entry is a commutative sum of the same two terms).

    Parameters
    ----------
    rows : array of shape (m, b, n)
        Rows ``start .. start + b`` of the raw kernels.
    start : int
    col_means : array of shape (m, n)
        Column means ``d`` of each raw kernel.
    diag : array of shape (m, n)
        Diagonal of each *centred* kernel including the jitter (must be > 0), as
        :func:`lswmkc_dask.kernels.features.scan_kernels` returns it.
    transposed_rows : array of shape (m, b, n), optional
        Columns ``start .. start + b`` transposed (``K[:, :, start:stop]^T``); default
        ``rows`` (symmetric kernels).
    xp : array-API namespace, optional
        Default: the namespace of ``rows``.

    Returns
    -------
    array of shape (m, b, n)
        The preprocessed rows; their diagonal entries are exactly 1.
    """
    xp = array_namespace(rows) if xp is None else xp
    _, b, n = rows.shape
    trows = rows if transposed_rows is None else transposed_rows
    stop = start + b
    e = mean_of_means(col_means, xp)[:, None, None]
    d_rows = col_means[:, start:stop, None]
    d_cols = col_means[:, None, :]
    out = ((rows - d_cols) - d_rows) + e  # Kc[i, j]
    out += ((trows - d_rows) - d_cols) + e  # Kc[j, i]
    out *= 0.5
    if is_numpy_namespace(xp):
        idx = np.arange(b)
        out[:, idx, start + idx] += DIAGONAL_JITTER
    else:
        dev = rows.device
        own = xp.arange(n, device=dev)[None, :] == xp.arange(start, stop, device=dev)[:, None]
        out = xp.where(own[None, ...], out + DIAGONAL_JITTER, out)
    out /= xp.sqrt(diag[:, start:stop, None] * diag[:, None, :])
    return out


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


def combine_kernels(kernel_rows: Any, weights: Any, *, xp: Any = None) -> Any:
    """Weighted sum of base-kernel rows, ``sum_p w_p K_p[rows, :]``.

    Parameters
    ----------
    kernel_rows : array of shape (m, b, n)
        Rows ``b`` of the ``m`` base kernels.
    weights : array of shape (m,)
        Kernel weights omega (dimensionless); same namespace and device (any array-like
        on NumPy).
    xp : array-API namespace, optional
        Default: the namespace of ``kernel_rows``.

    Returns
    -------
    array of shape (b, n)
        The combined kernel rows (first term of Eq. 13).
    """
    xp = array_namespace(kernel_rows) if xp is None else xp
    if is_numpy_namespace(xp):
        return np.tensordot(np.asarray(weights, dtype=np.float64), kernel_rows, axes=1)
    return xp.tensordot(weights, kernel_rows, axes=1)


def kstar_rows(kernel_rows: Any, row_start: int, factor: Any, weights0: Any, *, xp: Any = None) -> Any:
    """Rows of ``K*_{t-1}`` for the update of Z: ``W[rows] W^T``, or ``K*_0 = sum_p omega0_p K_p``.

    Parameters
    ----------
    kernel_rows : array of shape (m, b, n)
        Rows ``row_start .. row_start + b`` of the base kernels.
    row_start : int
    factor : array of shape (n, r), or None
        W of the previous iteration (Theorem 2); None at t = 1 (docs/algorithm.md section 1).
    weights0 : array of shape (m,)
        omega0, used when ``factor`` is None.
    xp : array-API namespace, optional

    Returns
    -------
    array of shape (b, n)
    """
    xp = array_namespace(kernel_rows) if xp is None else xp
    if factor is None:
        return combine_kernels(kernel_rows, weights0, xp=xp)
    b = kernel_rows.shape[1]
    return factor[row_start : row_start + b, ...] @ xp.matrix_transpose(factor)


def graph_rows(
    combined_rows: Any,
    kstar: Any,
    gamma: Any,
    alpha: float,
    row_start: int,
    *,
    xp: Any = None,
    full_sort: bool = False,
    sparse: bool = False,
) -> Any:
    """Rows of the affinity graph Z for fixed omega and K*, Eqs. (13)-(16).

    ``z_hat_i = (2 alpha K*[i, :] + sum_p omega_p K_p[i, :]) / (2 (alpha + gamma_i))``
    projected onto the simplex over ``j != i`` (Theorem 1, :func:`project_rows_simplex`).

    Parameters
    ----------
    combined_rows : array of shape (b, n)
        ``sum_p omega_p K_p[rows, :]`` with the current weights.
    kstar : array of shape (b, n)
        ``K*_{t-1}[rows, :]`` (:func:`kstar_rows`).
    gamma : array of shape (b,)
        gamma_i of the rows (Eq. 27).
    alpha : float
        The balance hyper-parameter, ``alpha >= 0``.
    row_start : int
        Index of the first row of the block.
    xp : array-API namespace, optional
    full_sort, sparse : bool
        As in :func:`project_rows_simplex`.

    Returns
    -------
    array or scipy.sparse.csr_matrix of shape (b, n)
        Rows of Z; each is on the simplex with ``z_ii = 0``.
    """
    xp = array_namespace(combined_rows) if xp is None else xp
    b = combined_rows.shape[0]
    if is_numpy_namespace(xp):
        gamma = np.asarray(gamma, dtype=np.float64)
        exclude = row_start + np.arange(b)
    else:
        exclude = xp.arange(row_start, row_start + b, device=combined_rows.device)
    z_hat = kstar * (2.0 * alpha)
    z_hat += combined_rows
    z_hat /= (2.0 * (alpha + gamma))[:, None]
    return project_rows_simplex(z_hat, exclude, xp=xp, full_sort=full_sort, sparse=sparse, overwrite=True)


def graph_block(
    kernel_rows: Any,
    row_start: int,
    gamma: Any,
    weights: Any,
    kstar: Any,
    alpha: float,
    *,
    xp: Any = None,
    full_sort: bool = False,
    sparse: bool = False,
) -> tuple[Any, Any, Any, Any]:
    """One row block of Z_t (Eqs. 13-16) and what the next weights and the objective need.

    Parameters
    ----------
    kernel_rows : array of shape (m, b, n)
        Rows ``row_start .. row_start + b`` of the base kernels.
    row_start : int
    gamma : array of shape (b,)
        gamma_i of the rows.
    weights : array of shape (m,)
        omega_t.
    kstar : array of shape (b, n)
        ``K*_{t-1}`` rows (:func:`kstar_rows`).
    alpha : float
    xp : array-API namespace, optional
    full_sort : bool
        As in :func:`project_rows_simplex`.
    sparse : bool
        Z as scipy.sparse CSR rows and the sums as floats (NumPy only); otherwise dense
        rows and 0-d arrays of ``xp``.

    Returns
    -------
    z : array or scipy.sparse.csr_matrix of shape (b, n)
    delta : array of shape (m,)
        The block's part of ``delta_p = Tr(K_p Z^T)`` (:func:`kernel_alignment`).
    gamma_sq_norm : float or 0-d array
        ``sum_i gamma_i ||Z[i, :]||^2`` over the block.
    z_sq : float or 0-d array
        ``||Z[rows, :]||_F^2``.
    """
    xp = array_namespace(kernel_rows) if xp is None else xp
    combined = combine_kernels(kernel_rows, weights, xp=xp)
    z = graph_rows(combined, kstar, gamma, alpha, row_start, xp=xp, full_sort=full_sort, sparse=sparse)
    if sparse:
        row_sq = np.asarray(z.multiply(z).sum(axis=1)).ravel()
        return z, kernel_alignment(kernel_rows, z), float(gamma @ row_sq), float(row_sq.sum())
    row_sq = xp.sum(z * z, axis=1)
    return z, kernel_alignment(kernel_rows, z, xp=xp), xp.sum(gamma * row_sq), xp.sum(row_sq)


def kernel_alignment(kernel_rows: Any, z_rows: Any, *, xp: Any = None) -> Any:
    """Partial ``delta_p = Tr(K_p Z^T) = sum(K_p * Z)`` over a row block, Eq. (11).

    Parameters
    ----------
    kernel_rows : array of shape (m, b, n)
    z_rows : array or scipy.sparse matrix of shape (b, n), or (columns, values)
        The rows of Z: dense, sparse (NumPy), or their non-zeros as two (b, c) arrays
        (the neighbours and weights of :func:`initial_neighbours`).
    xp : array-API namespace, optional
        Default: the namespace of ``kernel_rows``.

    Returns
    -------
    array of shape (m,)
        The block's contribution to delta_p; sum it over all blocks.
    """
    if sp.issparse(z_rows):
        z = sp.coo_matrix(z_rows)
        return kernel_rows[:, z.row, z.col] @ z.data
    xp = array_namespace(kernel_rows) if xp is None else xp
    if isinstance(z_rows, tuple):
        columns, values = z_rows
        return xp.stack([xp.sum(xp.take_along_axis(kernel_rows[p, ...], columns, axis=1) * values)
                         for p in range(kernel_rows.shape[0])])
    return xp.tensordot(kernel_rows, z_rows, axes=([1, 2], [0, 1]))


def kernel_weights(delta: np.ndarray) -> np.ndarray:
    """Closed-form kernel weights, Eq. (12): ``omega = delta / ||delta||_2``.

    Negative delta_p are kept, as the reference code does. Every route computes them
    on the host (m numbers).

    Parameters
    ----------
    delta : ndarray of shape (m,)
        ``delta_p = Tr(K_p Z^T)`` summed over all rows.

    Returns
    -------
    ndarray of shape (m,)
        Kernel weights with unit Euclidean norm.

    Raises
    ------
    FloatingPointError
        If every delta_p is zero (Z is orthogonal to every kernel).
    """
    delta = np.asarray(delta, dtype=np.float64)
    norm = np.linalg.norm(delta)
    if not np.isfinite(norm) or norm == 0.0:
        raise FloatingPointError(f"kernel weights undefined: delta = {delta.tolist()}")
    return delta / norm


def objective(
    weights: np.ndarray, delta: np.ndarray, gamma_sq_norm: float, z_fro_sq: float, kstar_sq: float, alpha: float
) -> float:
    """The LSWMKC objective, Eq. (10), from per-iteration summaries (on the host).

    ``-sum_p omega_p Tr(K_p Z^T) + sum_i gamma_i ||Z_i||^2 + alpha ||K* - Z||_F^2``,
    where ``||K* - Z||_F^2 = ||Z||_F^2 - sum_{lambda>0} lambda^2`` because K* is the
    positive part of ``S = (Z + Z^T)/2`` (Theorem 2) and ``<K*, Z> = <K*, S>``.

    Parameters
    ----------
    weights : ndarray of shape (m,)
        omega used to compute this Z.
    delta : ndarray of shape (m,)
        ``Tr(K_p Z^T)`` of this Z.
    gamma_sq_norm : float
        ``sum_i gamma_i ||Z[i, :]||^2``.
    z_fro_sq : float
        ``||Z||_F^2``.
    kstar_sq : float
        ``||K*||_F^2 = sum_{lambda>0} lambda^2`` over the eigenvalues of S.
    alpha : float

    Returns
    -------
    float
    """
    gap = max(z_fro_sq - kstar_sq, 0.0)
    return float(-np.dot(weights, delta) + gamma_sq_norm + alpha * gap)


def positive_factor(s: Any, xp: Any, to_host: Callable[[Any], Any] | None = None, *,
                    eigh: Callable[[Any], tuple[Any, Any]] | None = None) -> tuple[Any, Any]:
    """``W = U_+ diag(sqrt(lambda_+))`` of a symmetric S, on its namespace (Theorem 2).

    ``K* = U max(Lambda, 0) U^T = W W^T``: the eigenpairs of S with eigenvalue > 0,
    ascending. S is released once decomposed when the caller passes it as a temporary
    (no other reference), the eigenvectors before W is scaled in place.

    Parameters
    ----------
    s : array of shape (n, n), float64
        ``S = (Z + Z^T)/2``.
    xp : array-API namespace
        That of ``s`` (e.g. ``array_api_compat.cupy``).
    to_host : callable, optional
        Brings the rank r (a 0-d integer array) to the host, e.g. through a counted
        link; default ``int`` on the array.
    eigh : callable, optional
        ``eigh(s) -> (eigenvalues, eigenvectors)``; default ``xp.linalg.eigh``
        (:func:`lswmkc_dask.engine.gpu.eigh_in_place` puts the eigenvectors in S's buffer).

    Returns
    -------
    factor : array of shape (n, r), float64, of namespace ``xp``
    eigenvalues : array of shape (r,)
        The positive eigenvalues, ascending (r = ``eigenvalues.shape[0]``).
    """
    lam, u = (xp.linalg.eigh if eigh is None else eigh)(s)
    del s
    order = xp.argsort(lam)
    lam = xp.take(lam, order)
    n = lam.shape[0]
    count = xp.sum(xp.astype(lam > 0, xp.int64))
    r = int(count if to_host is None else to_host(count))
    lam = lam[n - r :]
    w = xp.take(u, order[n - r :], axis=1)
    del u
    w *= xp.sqrt(lam)[None, :]
    return w, lam


def check_gamma(gamma: Any) -> str | float:
    """``gamma`` as a float in ``[GAMMA_MIN, GAMMA_MAX]``, or "auto" (the learned per-sample gamma, Eqs. 25-27).

    Raises
    ------
    ValueError
        Neither "auto" nor a number in ``[1e-12, 1e300]``
        (:data:`lswmkc_dask.GAMMA_MIN`, :data:`lswmkc_dask.GAMMA_MAX`; the
        message says why the range).
    """
    wanted = f"'auto' or a number > 0 in [{GAMMA_MIN:g}, {GAMMA_MAX:g}]"
    if isinstance(gamma, str):
        if gamma == "auto":
            return gamma
        raise ParameterError("{} must be {}, got {!r}", Param("gamma"), wanted, gamma)
    try:
        g = float(gamma)
    except (TypeError, ValueError):
        raise ParameterError("{} must be {}, got {!r}", Param("gamma"), wanted, gamma) from None
    if not math.isfinite(g) or g <= 0 or isinstance(gamma, bool):
        raise ParameterError("{} must be {}, got {!r}", Param("gamma"), wanted, gamma)
    if not GAMMA_MIN <= g <= GAMMA_MAX:
        why = (" (the update of Z divides by 2 gamma: below it the simplex projection loses every entry to "
               "rounding)" if g < GAMMA_MIN else
               " (2 gamma and gamma ||Z||^2 overflow float64 from about 9e307 and 1.8e308 / n)")
        raise ParameterError("{} must be {}, got {!r}{}", Param("gamma"), wanted, gamma, why)
    return g

"""The paper's equations as pure NumPy functions on a block of rows.

Nothing here knows about Dask: every function takes the rows ``rows`` (a slice of
sample indices, the *row block*) of the base kernels and returns the matching rows of
the result, so that :mod:`lswmkc_dask.solver` can map them over row blocks on the
workers. Equation numbers follow docs/algorithm.md (Li et al., "Local Sample-weighted
Multiple Kernel Clustering with Consensus Discriminative Graph", IEEE TNNLS):

=====================  ==========================================
function               source
=====================  ==========================================
combine_kernels        Eq. (10) first term, Eq. (13) ``sum_p w_p K_p``
init_graph_rows        Eqs. (25)-(28): initial Z and gamma (alpha = 0)
kernel_weights         Eqs. (11)-(12): closed-form kernel weights
kernel_alignment       delta_p = Tr(K_p Z^T) of Eq. (11), per row block
project_rows_simplex   Theorem 1 (Eq. 16): Euclidean projection on the simplex
graph_rows             Eqs. (13)-(16): one row block of the affinity graph Z
objective              Eq. (10)
=====================  ==========================================

Theorem 2 (K* = U max(Lambda, 0) U^T, kept as a factor W W^T) needs an
eigendecomposition and its memory policy: :func:`lswmkc_dask._eigen.psd_factor`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "combine_kernels",
    "init_graph_rows",
    "kernel_weights",
    "kernel_alignment",
    "project_rows_simplex",
    "graph_rows",
    "objective",
    "ALPHA_MAX",
    "ALPHA_RANGE_WHY",
    "GAMMA_MAX",
    "GAMMA_MIN",
]

EPS = np.finfo(np.float64).eps

#: Largest accepted alpha (and scalar gamma). :func:`graph_rows` forms
#: ``2 alpha K*[i, :]`` and ``2 (alpha + gamma_i)`` (Eq. 15; |K*_ij| <= 1): in float64
#: these overflow from alpha (or gamma) = DBL_MAX / 2, about 9e307, and Z, delta and
#: the kernel weights then turn NaN (the fit ended in "kernel weights undefined", a
#: FloatingPointError). :func:`objective` forms ``alpha ||K* - Z||_F^2`` and
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


def combine_kernels(kernel_rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted sum of base-kernel rows, ``sum_p w_p K_p[rows, :]``.

    Parameters
    ----------
    kernel_rows : ndarray of shape (m, b, n)
        Rows ``b`` of the ``m`` base kernels.
    weights : ndarray of shape (m,)
        Kernel weights omega (dimensionless).

    Returns
    -------
    ndarray of shape (b, n)
        The combined kernel rows (first term of Eq. 13).
    """
    weights = np.asarray(weights, dtype=np.float64)
    return np.tensordot(weights, kernel_rows, axes=1)


def init_graph_rows(combined_rows: np.ndarray, row_start: int, n_neighbors: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """Initial affinity-graph rows and gamma, Eqs. (25)-(28) with alpha = 0.

    For each row i, ``e_i = -Kw[i, :]`` is sorted ascending with the sample itself
    first; the next ``c + 1`` values ``d_1 .. d_{c+1}`` give
    ``Z0[i, j_t] = (d_{c+1} - d_t) / (c d_{c+1} - sum_{t<=c} d_t + eps)`` and
    ``gamma_i = c/2 d_{c+1} - 1/2 sum_{t<=c} d_t`` (Eq. 27, the largest gamma_i for
    which row i has exactly c non-zeros).

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
    c = int(n_neighbors)
    e = -np.asarray(combined_rows, dtype=np.float64)
    rows = np.arange(b)
    # The sample itself ranks first (the reference skips the first sorted entry; a
    # normalised kernel has its maximum on the diagonal). Pinning it to -inf keeps
    # that true even for duplicate samples.
    e[rows, row_start + rows] = -np.inf
    # Only the c + 2 smallest are needed: partition, then sort that slice stably.
    part = np.argpartition(e, c + 1, axis=1)[:, : c + 2]
    vals = np.take_along_axis(e, part, axis=1)
    order = np.lexsort((part, vals), axis=1)
    idx = np.take_along_axis(part, order, axis=1)[:, 1:]
    d = np.take_along_axis(e, idx, axis=1)  # (b, c + 1)
    d_last = d[:, c]
    top_sum = d[:, :c].sum(axis=1)
    denom = c * d_last - top_sum + EPS
    z = (d_last[:, None] - d) / denom[:, None]
    gamma = 0.5 * c * d_last - 0.5 * top_sum
    z_rows = sp.csr_matrix((z[:, :c].ravel(), idx[:, :c].ravel(), np.arange(0, b * c + 1, c)), shape=(b, n))
    z_rows.sort_indices()
    return z_rows, gamma


def kernel_alignment(kernel_rows: np.ndarray, z_rows: np.ndarray | sp.spmatrix) -> np.ndarray:
    """Partial ``delta_p = Tr(K_p Z^T) = sum(K_p * Z)`` over a row block, Eq. (11).

    Parameters
    ----------
    kernel_rows : ndarray of shape (m, b, n)
    z_rows : ndarray or scipy.sparse matrix of shape (b, n)

    Returns
    -------
    ndarray of shape (m,)
        The block's contribution to delta_p; sum it over all blocks.
    """
    if sp.issparse(z_rows):
        z = sp.coo_matrix(z_rows)
        return kernel_rows[:, z.row, z.col] @ z.data
    return np.einsum("pij,ij->p", kernel_rows, z_rows)


def kernel_weights(delta: np.ndarray) -> np.ndarray:
    """Closed-form kernel weights, Eq. (12): ``omega = delta / ||delta||_2``.

    Negative delta_p are kept, as the reference code does.

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


def _simplex_threshold(u_desc):
    """Threshold theta and support size rho from rows sorted in descending order."""
    b, n = u_desc.shape
    css = np.cumsum(np.where(np.isfinite(u_desc), u_desc, 0.0), axis=1) - 1.0
    with np.errstate(invalid="ignore"):
        rho = np.count_nonzero(u_desc - css / np.arange(1, n + 1) > 0, axis=1)
    return css[np.arange(b), rho - 1] / rho, rho


def project_rows_simplex(
    v: np.ndarray, exclude: np.ndarray | None = None, sparse: bool = False, overwrite: bool = False
) -> np.ndarray | sp.csr_matrix:
    """Euclidean projection of each row onto the probability simplex (Theorem 1).

    Solves ``min_z 1/2 ||z - v||^2`` s.t. ``z >= 0``, ``sum z = 1`` row by row,
    with entry ``exclude[i]`` of row i forced to 0 (``z_ii = 0``). The solution is
    ``z = max(v - theta, 0)`` (Eq. 16, theta = -beta_i); theta is found exactly from
    the sorted row, which equals the reference's Newton search on beta_i to
    round-off. Only the largest entries can be in the support, so rows are first
    partially sorted (top 128, then 1024 entries) and fully sorted only when the
    support is larger.

    Parameters
    ----------
    v : ndarray of shape (b, n)
        Rows to project (``z_hat``).
    exclude : ndarray of shape (b,) of int, optional
        Column forced to zero in each row (the sample itself).
    sparse : bool
        Return a CSR matrix holding only the support.
    overwrite : bool
        Allow ``v`` to be modified (saves a copy of a row block).

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix of shape (b, n)
        Projected rows, each non-negative and summing to 1.
    """
    v = np.asarray(v, dtype=np.float64)
    b, n = v.shape
    rows = np.arange(b)
    work = v if overwrite else v.copy()
    if exclude is not None:
        work[rows, exclude] = -np.inf
    theta = np.empty(b)
    todo = rows
    top = 128
    while todo.size:
        if top >= n:
            u = -np.sort(-work[todo], axis=1)
            theta[todo], _ = _simplex_threshold(u)
            break
        part = np.partition(work[todo], n - top, axis=1)[:, n - top :]
        u = -np.sort(-part, axis=1)
        th, rho = _simplex_threshold(u)
        ok = rho < top  # the (top+1)-th largest entry is <= the top-th <= theta
        theta[todo[ok]] = th[ok]
        todo = todo[~ok]
        top *= 8
    support = work > theta[:, None]
    if sparse:
        r, c = np.nonzero(support)
        z = sp.csr_matrix((work[r, c] - theta[r], (r, c)), shape=(b, n))
        z.sort_indices()
        return z
    return np.where(support, work - theta[:, None], 0.0)


def graph_rows(
    combined_rows: np.ndarray, kstar_rows: np.ndarray, gamma: np.ndarray, alpha: float, row_start: int
) -> sp.csr_matrix:
    """Rows of the affinity graph Z for fixed omega and K*, Eqs. (13)-(16).

    ``z_hat_i = (2 alpha K*[i, :] + sum_p omega_p K_p[i, :]) / (2 (alpha + gamma_i))``
    projected onto the simplex over ``j != i`` (Theorem 1).

    Parameters
    ----------
    combined_rows : ndarray of shape (b, n)
        ``sum_p omega_p K_p[rows, :]`` with the current weights.
    kstar_rows : ndarray of shape (b, n)
        ``K*_{t-1}[rows, :]``.
    gamma : ndarray of shape (b,)
        gamma_i of the rows (Eq. 27).
    alpha : float
        The balance hyper-parameter, ``alpha >= 0``.
    row_start : int
        Index of the first row of the block.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (b, n)
        Rows of Z; each is on the simplex with ``z_ii = 0``.
    """
    b, _ = combined_rows.shape
    gamma = np.asarray(gamma, dtype=np.float64)
    z_hat = np.multiply(kstar_rows, 2.0 * alpha)
    z_hat += combined_rows
    z_hat /= (2.0 * (alpha + gamma))[:, None]
    return project_rows_simplex(z_hat, exclude=row_start + np.arange(b), sparse=True, overwrite=True)


def objective(
    weights: np.ndarray, delta: np.ndarray, gamma_sq_norm: float, z_fro_sq: float, kstar_sq: float, alpha: float
) -> float:
    """The LSWMKC objective, Eq. (10), from per-iteration summaries.

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

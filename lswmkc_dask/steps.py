"""The paper's row-block steps of the blockwise routes, NumPy functions on a block of rows.

Nothing here knows about Dask: every function takes the rows ``rows`` (a slice of
sample indices, the *row block*) of the base kernels and returns the matching rows of
the result, so that :mod:`lswmkc_dask.solver` can map them over row blocks on the
workers. Equation numbers follow docs/algorithm.md (Li et al., "Local Sample-weighted
Multiple Kernel Clustering with Consensus Discriminative Graph", IEEE TNNLS):

=====================  ==========================================
function               source
=====================  ==========================================
combine_kernels        Eq. (10) first term, Eq. (13) ``sum_p w_p K_p``
kernel_weights         Eqs. (11)-(12): closed-form kernel weights
kernel_alignment       delta_p = Tr(K_p Z^T) of Eq. (11), per row block
graph_rows             Eqs. (13)-(16): one row block of the affinity graph Z
objective              Eq. (10)
=====================  ==========================================

The equations every route shares, written once against the array API, are in
:mod:`lswmkc_dask.core`: the initial graph (Eqs. 25-28), the simplex projection
(Theorem 1, which :func:`graph_rows` calls) and the positive factor of Theorem 2,
whose LAPACK routes and memory policy are :func:`lswmkc_dask._eigen.psd_factor`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import core

__all__ = [
    "combine_kernels",
    "kernel_weights",
    "kernel_alignment",
    "graph_rows",
    "objective",
    "ALPHA_MAX",
    "ALPHA_RANGE_WHY",
    "GAMMA_MAX",
    "GAMMA_MIN",
]

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
    return core.project_rows_simplex(z_hat, exclude=row_start + np.arange(b), sparse=True, overwrite=True)


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

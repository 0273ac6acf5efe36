"""The KNN mechanism of the LSWMKC paper: each sample keeps its round(tau n) nearest samples.

The mask N has ``N_ij = 1`` for those of ``K_avg`` (:func:`knn_mask`); :func:`localise`
gives the kernel the baseline ``knn`` clusters (:mod:`lswmkc_dask.grid.baselines`).
Where the paper is silent:

- *nearest* = largest entry of row i of ``K_avg`` (``||psi_i - psi_j||^2 = 2 - 2 K_ij``
  for normalised kernels);
- the sample itself counts among its neighbours (tau = 1 keeps the whole row, which the
  paper calls fully connected; the diagonal is a row's largest entry);
- *round* is MATLAB's (half away from zero), exact: tau = 0.1, n = 165 keeps 17, not 16;
- ties within a row go to the lower column, so every row of ``N`` has exactly
  ``round(tau n)`` ones;
- ``N`` is not symmetric and kernel k-means needs a symmetric kernel: the one clustered
  is the symmetric part ``((N + N^T)/2) ⊙ K_avg`` (as ``S = (Z + Z^T)/2``, Theorem 2).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def neighbour_count(tau: float, n: int) -> int:
    """``round(tau n)`` with MATLAB's rounding (half away from zero), computed exactly.

    Parameters
    ----------
    tau : float
        Neighbour ratio in (0, 1].
    n : int

    Returns
    -------
    int
        At least 1 and at most n.

    Raises
    ------
    ValueError
        tau outside (0, 1].
    """
    if not (isinstance(tau, (int, float)) and 0 < tau <= 1):
        raise ValueError(f"tau must be a number in (0, 1], got {tau!r}")
    x = Fraction(repr(float(tau))) * int(n)  # 0.1 is 1/10 here, not 0.1000000000000000055...
    return int(min(n, max(1, math.floor(x + Fraction(1, 2)))))


def neighbour_ranks(kernel: np.ndarray) -> np.ndarray:
    """Rank of every entry within its row, largest first (ties: lower column first).

    ``ranks[i, j] < c`` marks the c nearest samples of i (computed once for every tau).

    Parameters
    ----------
    kernel : ndarray of shape (n, n)

    Returns
    -------
    ndarray of shape (n, n), int32
    """
    k = np.asarray(kernel)
    order = np.argsort(-k, axis=1, kind="stable")
    ranks = np.empty(k.shape, dtype=np.int32)
    np.put_along_axis(ranks, order, np.arange(k.shape[1], dtype=np.int32)[None, :], axis=1)
    return ranks


def knn_mask(kernel: np.ndarray, tau: float, ranks: np.ndarray | None = None) -> np.ndarray:
    """The paper's neighbour mask N: row i marks the round(tau n) nearest samples of i.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        The average kernel (nearest = largest entry; the sample itself included).
    tau : float
        Neighbour ratio in (0, 1].
    ranks : ndarray of shape (n, n), optional
        :func:`neighbour_ranks` of ``kernel``, if already computed.

    Returns
    -------
    ndarray of shape (n, n), bool
        Every row has exactly :func:`neighbour_count` ``(tau, n)`` True entries; not
        symmetric in general.
    """
    if ranks is None:
        ranks = neighbour_ranks(kernel)
    return ranks < neighbour_count(tau, ranks.shape[0])


def localise(kernel: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The clustered KNN kernel: the symmetric part of ``N ⊙ K``, ``((N + N^T)/2) ⊙ K``.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        Symmetric.
    mask : ndarray of shape (n, n), bool

    Returns
    -------
    ndarray of shape (n, n)
    """
    local = np.where(mask, kernel, 0.0)
    local += local.T
    local *= 0.5
    return local

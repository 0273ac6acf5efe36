"""Kernel k-means on the neighbourhood kernel K* (docs/algorithm.md section 3).

K* is centred and normalised as the base kernels (zero diagonals guarded), its top-k
eigenvectors form H, each row of H is scaled to unit length, and k-means clusters the
rows of H. Runs as one task on the worker that holds the factor W of ``K* = W W^T``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh
from sklearn import config_context
from sklearn.cluster import KMeans

from .cluster import blas_threads, limit_blas

__all__ = ["centre_normalise", "spectral_embedding", "cluster_factor"]


def centre_normalise(kernel):
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


def spectral_embedding(kernel, n_clusters):
    """Row-normalised top-k eigenvectors of the centred, normalised kernel.

    Parameters
    ----------
    kernel : ndarray of shape (n, n)
        K*.
    n_clusters : int
        k.

    Returns
    -------
    ndarray of shape (n, k)
        H with unit-length rows (zero rows stay zero).
    """
    k = centre_normalise(kernel)
    n = k.shape[0]
    # k is symmetric: its transpose is the same matrix in Fortran order (no copy).
    _, h = eigh(k.T, subset_by_index=(n - n_clusters, n - 1), overwrite_a=True, check_finite=False)
    norms = np.linalg.norm(h, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return h / norms


def cluster_factor(factor, n_clusters, n_init=50, random_state=None, n_threads=None, max_threads=None):
    """K* = W W^T -> spectral embedding -> k-means with ``n_init`` starts.

    Parameters
    ----------
    factor : ndarray of shape (n, r)
        W from :func:`lswmkc_dask.steps.psd_factor`.
    n_clusters : int
    n_init : int
        k-means starts; the run of lowest inertia is kept.
    random_state : int or None
    n_threads : int, optional
        BLAS threads (default: the cores free now, :func:`lswmkc_dask.cluster.free_cores`).
    max_threads : int, optional
        Upper bound of that default.

    Returns
    -------
    labels : ndarray of shape (n,)
    embedding : ndarray of shape (n, k)
    """
    with limit_blas(blas_threads(n_threads, max_threads, factor.shape[0])):
        h = spectral_embedding(factor @ factor.T, n_clusters)
        with config_context(assume_finite=True, skip_parameter_validation=True):  # h is ours
            km = KMeans(n_clusters, n_init=n_init, max_iter=250, random_state=random_state).fit(h)
    return km.labels_.astype(np.int64), h

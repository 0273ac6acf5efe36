"""Base kernels from features, and the preprocessing of ALGORITHM.md section 0.

Every function works on a block of rows so that the zarr store can be written without
holding a whole ``n x n`` kernel: :class:`FeatureKernels` produces kernel rows from
multi-view features on demand, and :func:`centre_normalise_rows` applies centring
(Shawe-Taylor & Cristianini 2004) and normalisation (Cortes et al. 2012) to a row block
given global statistics gathered in a first pass.
"""

from __future__ import annotations

import numpy as np

from .errors import KernelInputError

__all__ = [
    "KERNEL_KINDS",
    "FeatureKernels",
    "kernels_from_features",
    "centre_normalise_rows",
    "preprocess_kernels",
]

KERNEL_KINDS = ("gaussian", "linear", "polynomial")
DIAGONAL_JITTER = 1e-12  # added to every centred kernel's diagonal, as the reference


def _zscore(x):
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0  # constant features stay 0 after centring
    return (x - mu) / sd


class FeatureKernels:
    """Base kernels computed row block by row block from multi-view features.

    One kernel per view. ``"gaussian"``: features z-scored, squared distances
    ``D2``, ``K = exp(-D2 / mean(D2))`` (bandwidth = mean squared pairwise distance
    over all n^2 pairs, obtained in closed form as ``2 (mean ||x||^2 - ||mean x||^2)``).
    ``"linear"``: ``K = X X^T`` on z-scored features. ``"polynomial"``:
    ``K = (X X^T / d + coef0)^degree`` on z-scored features (d features).

    Parameters
    ----------
    views : sequence of ndarray, each of shape (n, d_v)
        Features of each view, samples in rows.
    kernel : {"gaussian", "linear", "polynomial"}
    degree : int, default 2
        Degree of the polynomial kernel.
    coef0 : float, default 1.0
        Constant of the polynomial kernel.

    Raises
    ------
    KernelInputError
        If the views have different numbers of samples, are not 2-D, or hold NaN/Inf.
    ValueError
        If ``kernel`` is unknown.
    """

    def __init__(self, views, kernel="gaussian", degree=2, coef0=1.0):
        if kernel not in KERNEL_KINDS:
            raise ValueError(f"kernel must be one of {KERNEL_KINDS}, got {kernel!r}")
        views = [np.asarray(v, dtype=np.float64) for v in views]
        if not views:
            raise KernelInputError("no feature views given")
        for i, v in enumerate(views):
            if v.ndim != 2:
                raise KernelInputError(f"view {i} must be 2-D (samples x features), got shape {v.shape}")
            if v.shape[0] != views[0].shape[0]:
                raise KernelInputError(
                    f"view {i} has {v.shape[0]} samples but view 0 has {views[0].shape[0]}"
                )
            bad = ~np.isfinite(v)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise KernelInputError(
                    f"view {i} has {int(bad.sum())} NaN/Inf feature values (first at sample {r}, feature {c})"
                )
        self.kernel = kernel
        self.degree = int(degree)
        self.coef0 = float(coef0)
        self.views = [_zscore(v) for v in views]
        self.sq_norms = [np.einsum("ij,ij->i", v, v) for v in self.views]
        n = views[0].shape[0]
        self.bandwidths = [
            2.0 * (s.mean() - float(np.dot(v.mean(axis=0), v.mean(axis=0))))
            for v, s in zip(self.views, self.sq_norms)
        ]
        self.shape = (len(views), n, n)

    def rows(self, start, stop):
        """Rows ``start:stop`` of every kernel, an ndarray of shape (m, stop - start, n)."""
        out = np.empty((self.shape[0], stop - start, self.shape[1]))
        for p, (x, sq, bw) in enumerate(zip(self.views, self.sq_norms, self.bandwidths)):
            gram = x[start:stop] @ x.T
            if self.kernel == "gaussian":
                d2 = np.maximum(sq[start:stop, None] + sq[None, :] - 2.0 * gram, 0.0)
                out[p] = np.exp(-d2 / bw) if bw > 0 else 1.0
            elif self.kernel == "linear":
                out[p] = gram
            else:
                out[p] = (gram / x.shape[1] + self.coef0) ** self.degree
        return out


def kernels_from_features(views, kernel="gaussian", degree=2, coef0=1.0):
    """Dense base kernels from multi-view features (see :class:`FeatureKernels`).

    Parameters
    ----------
    views : sequence of ndarray, each of shape (n, d_v)
    kernel : {"gaussian", "linear", "polynomial"}
    degree, coef0 : polynomial kernel parameters

    Returns
    -------
    ndarray of shape (m, n, n)
        Raw (not yet centred or normalised) kernels, one per view.
    """
    fk = FeatureKernels(views, kernel, degree, coef0)
    return fk.rows(0, fk.shape[1])


def centre_normalise_rows(sym_rows, start, col_means, diag):
    """Centre and normalise a row block of symmetric kernels (ALGORITHM.md section 0).

    ``Kc = K - 1 d^T - d 1^T + e`` with ``d`` the column means and ``e`` their mean,
    ``+ 1e-12`` on the diagonal, then ``Kc_ij / sqrt(Kc_ii Kc_jj)``. The formula is
    evaluated symmetrically in (i, j), so blocks written separately form an exactly
    symmetric matrix.

    Parameters
    ----------
    sym_rows : ndarray of shape (m, b, n)
        Rows ``start .. start + b`` of the symmetrised kernels ``(K + K^T) / 2``.
    start : int
    col_means : ndarray of shape (m, n)
        Column means ``d`` of each symmetrised kernel.
    diag : ndarray of shape (m, n)
        Diagonal of each *centred* kernel including the jitter (must be > 0).

    Returns
    -------
    ndarray of shape (m, b, n)
        The preprocessed rows; their diagonal entries are 1.
    """
    m, b, n = sym_rows.shape
    e = col_means.mean(axis=1)
    stop = start + b
    out = sym_rows - (col_means[:, start:stop, None] + col_means[:, None, :]) + e[:, None, None]
    idx = np.arange(b)
    out[:, idx, start + idx] += DIAGONAL_JITTER
    scale = np.sqrt(diag)
    out /= scale[:, start:stop, None] * scale[:, None, :]
    return out


def preprocess_kernels(kernels):
    """Symmetrise, centre and normalise in-memory kernels (ALGORITHM.md section 0).

    Parameters
    ----------
    kernels : array_like of shape (m, n, n)

    Returns
    -------
    ndarray of shape (m, n, n)
        Preprocessed kernels with unit diagonal.

    Raises
    ------
    KernelInputError
        As :func:`lswmkc_dask.io.prepare` (NaN/Inf, asymmetry, non-positive diagonal).
    """
    from .io import ArrayKernelSource, scan_kernels

    source = ArrayKernelSource(kernels)
    stats = scan_kernels(source)
    n = source.shape[1]
    sym = 0.5 * (source.rows(0, n) + source.transposed_rows(0, n))
    return centre_normalise_rows(sym, 0, stats.col_means, stats.diag)

"""Labels and embeddings of new samples from a fitted LSWMKC (docs/algorithm.md section 8).

Every quantity comes from the fit; the new samples never change it. For a block of new
samples x:

1. the raw base-kernel rows ``k_p(x, X_train)`` (built from the features kept by the
   fit, or given as cross-kernels), centred and normalised with the training
   statistics of section 0 (:func:`preprocess_cross_rows`);
2. combined with the learned kernel weights omega;
3. each affinity row by the simplex projection of Theorem 1 (Eq. 16) of
   ``z_hat = K_omega(x, .) / (2 gamma_x)``, with gamma_x from the c-neighbour rule of
   Eq. (27) on the row of the initial combined kernel (:func:`knn_gamma`); the alpha
   term of Eq. (15) needs ``K*(x, .)``, which a new sample has not: it is 0 by
   default (as in the initial graph), or ``K*(x, .) = (z0 W) W^T`` through K*'s
   factor W (``alpha_term="kstar"``; :func:`affinity_rows`);
4. the embedding ``h = z H`` (H = ``embedding_``, rows scaled to unit length, zero
   rows kept zero), and the label of the nearest k-means centroid
   (``cluster_centers_``: the mean of ``embedding_`` over each cluster of ``labels_``).

The math (:func:`preprocess_cross_rows`, :func:`knn_gamma`, :func:`affinity_rows`,
:func:`embed_rows`, :func:`nearest_centre`) is written against the array API (NumPy is
the route tested); the checks of the input and the loop over blocks are NumPy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import array_namespace
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .core.equations import GAMMA_MIN, project_rows_simplex
from .errors import KernelInputError
from .kernels.features import DIAGONAL_JITTER, FeatureKernels, canonical_kernel

__all__ = [
    "ALPHA_TERMS",
    "PREDICT_STATE",
    "affinity_rows",
    "embed_rows",
    "knn_gamma",
    "nearest_centre",
    "predict_labels",
    "prediction_state",
    "preprocess_cross_rows",
    "transform_samples",
]

#: The fitted attributes that :meth:`lswmkc_dask.LSWMKC.predict` and ``transform``
#: read beyond the fit's own (``kernel_weights_``, ``embedding_``, ``kstar_factor_``,
#: ``labels_``): the training statistics of section 0 (column means and centred
#: diagonals of the kept base kernels), which input kernels were kept, the z-scored
#: training features with their means, scales and bandwidths (feature views only;
#: None for precomputed kernels), and the k-means centroids.
PREDICT_STATE = (
    "kernel_col_means_",
    "kernel_diag_",
    "kernel_index_",
    "n_kernels_in_",
    "train_features_",
    "feature_means_",
    "feature_scales_",
    "feature_bandwidths_",
    "cluster_centers_",
)
#: The alpha term of a new sample's affinity row: "zero" (the initial graph's rule,
#: shipped: benchmarks/README.md#bench_predictpy-labels-of-new-samples) or "kstar"
#: (``K*(x, .)`` extended through K*'s factor).
ALPHA_TERMS = ("zero", "kstar")
#: Bytes of one block of new samples' kernel rows (all m kernels and the work arrays).
BLOCK_BYTES = 64 * 2**20


def prediction_state(estimator: Any, X: Any, stats: Any) -> dict[str, Any]:
    """The attributes of :data:`PREDICT_STATE` for a fit of ``estimator`` on ``X``.

    The training statistics are those of the fit's kernels (a store's
    :meth:`KernelStore.preprocessing_statistics`: ``prepare`` keeps those of its first
    pass; or those of kernels built on the device); the feature views' own state from ``X``.

    Parameters
    ----------
    estimator : LSWMKC
        Fitted on ``X`` (``embedding_``, ``labels_``, ``n_clusters_``, ``kernel``,
        ``kernel_params``).
    X : as :meth:`lswmkc_dask.LSWMKC.fit` took it
        Used for feature views only.
    stats : lswmkc_dask.io.PreprocessingStatistics or None
        The training statistics of the fit's kernels (None: a store prepared by an
        earlier version, which keeps none).

    Returns
    -------
    dict
        Attribute name -> value; the statistics are None for a fit on a store prepared
        by an earlier version (it keeps none: such a model cannot predict).
    """
    state: dict[str, Any] = dict.fromkeys(PREDICT_STATE)
    h, labels, k = estimator.embedding_, np.asarray(estimator.labels_), estimator.n_clusters_
    counts = np.bincount(labels, minlength=k)[:, None]
    sums = np.zeros((k, h.shape[1]))
    np.add.at(sums, labels, h)
    state["cluster_centers_"] = np.where(counts > 0, sums / np.maximum(counts, 1), np.inf)
    if estimator.kernel != "precomputed":
        views = [X] if getattr(X, "ndim", None) == 2 else list(X)
        source = FeatureKernels(views, estimator.kernel, **dict(estimator.kernel_params or {}))
        state.update(train_features_=source.views, feature_means_=source.means, feature_scales_=source.scales,
                     feature_bandwidths_=np.asarray(source.bandwidths))
    if stats is not None:
        state.update(kernel_col_means_=stats.col_means, kernel_diag_=stats.diag, kernel_index_=stats.kernel_index,
                     n_kernels_in_=stats.n_kernels_in)
    return state


def preprocess_cross_rows(raw: Any, raw_diag: Any, col_means: Any, diag: Any) -> Any:
    """Centre and normalise new samples' kernel rows with the training statistics (section 0).

    With d the training column means, e their mean and ``d_x = mean_j k(x, x_j)``:
    ``kc(x, j) = ((k(x, j) - d_j) - d_x) + e``, ``kc(x, x) = ((k(x, x) - d_x) - d_x)
    + e + 1e-12``, and ``kn(x, j) = kc(x, j) / sqrt(kc(x, x) Kc_jj)``: for a training
    sample, its preprocessed training row (to rounding).

    Parameters
    ----------
    raw : array of shape (m, b, n)
        ``k_p(x, X_train)``.
    raw_diag : array of shape (m, b) or None
        ``k_p(x, x)``; None: the rows are not divided by ``sqrt(kc(x, x))`` (for a
        caller whose result does not depend on a positive factor per row).
    col_means, diag : array of shape (m, n)
        The training statistics (:meth:`lswmkc_dask.io.store.KernelStore.preprocessing_statistics`).

    Returns
    -------
    rows : array of shape (m, b, n)
    centred_diag : array of shape (m, b) or None
        ``kc(x, x)`` (a value not above 0 cannot be normalised: the caller refuses it).
    """
    xp = array_namespace(raw)
    n = col_means.shape[1]
    e = (xp.cumulative_sum(col_means, axis=1)[:, -1] / n)[:, None]
    d_x = xp.mean(raw, axis=2)
    out = ((raw - col_means[:, None, :]) - d_x[:, :, None]) + e[:, :, None]
    if raw_diag is None:
        return out / xp.sqrt(diag[:, None, :]), None
    cdiag = ((raw_diag - d_x) - d_x) + e + DIAGONAL_JITTER
    return out / xp.sqrt(xp.abs(cdiag)[:, :, None] * diag[:, None, :]), cdiag


def knn_gamma(combined0: Any, n_neighbors: int) -> Any:
    """gamma_x of Eq. (27) from a new sample's row of the initial combined kernel.

    ``e = -K_omega0(x, .)`` sorted ascending, ``d_1 .. d_{c+1}`` its first c + 1 values
    (no entry is the sample itself: every training sample is a candidate neighbour),
    ``gamma_x = c/2 d_{c+1} - 1/2 sum_{t<=c} d_t``, the largest gamma for which the
    projection of ``K_omega0(x, .) / (2 gamma)`` keeps c entries.

    Parameters
    ----------
    combined0 : array of shape (b, n)
        ``sum_p K_p(x, .) / sqrt(m)``.
    n_neighbors : int
        c, ``c + 1 <= n``.

    Returns
    -------
    array of shape (b,)
    """
    xp = array_namespace(combined0)
    c = int(n_neighbors)
    d = xp.sort(-combined0, axis=1)[:, : c + 1]
    return 0.5 * c * d[:, c] - 0.5 * xp.sum(d[:, :c], axis=1)


def affinity_rows(
    combined: Any, gamma: Any, alpha: float = 0.0, kstar_rows: Any = None
) -> Any:
    """New samples' affinity rows: the projection of Theorem 1 (Eqs. 15-16).

    ``z = P_simplex((2 alpha K*(x, .) + K_omega(x, .)) / (2 (alpha + gamma_x)))``, with
    ``K*(x, .)`` given (``kstar_rows``) or 0 (then alpha drops out: the initial graph's
    rule). No entry is excluded: a new sample is none of the training samples.

    Parameters
    ----------
    combined : array of shape (b, n)
        ``K_omega(x, .)`` with the learned weights.
    gamma : array of shape (b,)
        Floored at :data:`lswmkc_dask.core.GAMMA_MIN` (ties leave it 0).
    alpha : float
    kstar_rows : array of shape (b, n), optional

    Returns
    -------
    array of shape (b, n)
        Rows on the probability simplex.
    """
    xp = array_namespace(combined)
    gamma = xp.maximum(gamma, GAMMA_MIN)
    if kstar_rows is None:
        return project_rows_simplex(combined / (2.0 * gamma)[:, None], xp=xp, overwrite=True)
    z_hat = (2.0 * alpha * kstar_rows + combined) / (2.0 * (alpha + gamma))[:, None]
    return project_rows_simplex(z_hat, xp=xp, overwrite=True)


def embed_rows(z: Any, embedding: Any) -> Any:
    """``h = z H``, each row scaled to unit length (zero rows stay zero), as ``embedding_``.

    Parameters
    ----------
    z : array of shape (b, n)
    embedding : array of shape (n, k)

    Returns
    -------
    array of shape (b, k)
    """
    xp = array_namespace(z)
    h = z @ embedding
    norms = xp.linalg.vector_norm(h, axis=1, keepdims=True)
    return xp.where(norms > 1e-10, h / xp.where(norms > 1e-10, norms, 1.0), 0.0)


def nearest_centre(h: Any, centres: Any) -> Any:
    """Index of the nearest centre of each row (squared Euclidean distance; first on ties).

    Parameters
    ----------
    h : array of shape (b, k)
    centres : array of shape (k, k)
        Rows of an empty cluster are ``inf`` (never nearest).

    Returns
    -------
    integer array of shape (b,)
    """
    xp = array_namespace(h)
    finite = xp.all(xp.isfinite(centres), axis=1)
    safe = xp.where(finite[:, None], centres, 0.0)
    d2 = xp.sum(safe * safe, axis=1)[None, :] - 2.0 * (h @ safe.T)
    return xp.argmax(xp.where(finite[None, :], -d2, -xp.inf), axis=1)


def _refuse_non_finite(a, what):
    bad = ~np.isfinite(a)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what} hold {int(bad.sum())} NaN/Inf values (the first at index {where})")


def _feature_batch(estimator, X):
    """The new samples' views, checked against the training views."""
    train = estimator.train_features_
    views = [X] if getattr(X, "ndim", None) == 2 else list(X)  # one view as one array, as fit takes it
    if len(views) != len(train):
        raise ValueError(f"X has {len(views)} feature views but the model was fitted on {len(train)}")
    out: list[np.ndarray] = []
    for p, (v, t) in enumerate(zip(views, train)):
        v = np.asarray(v, dtype=np.float64)
        if v.ndim != 2:
            raise ValueError(f"view {p} must be 2-D (samples x features), got shape {v.shape}")
        if v.shape[1] != t.shape[1]:
            raise ValueError(f"view {p} has {v.shape[1]} features but the model was fitted on {t.shape[1]}")
        if out and v.shape[0] != out[0].shape[0]:
            raise ValueError(f"view {p} has {v.shape[0]} samples but view 0 has {out[0].shape[0]}")
        _refuse_non_finite(v, f"view {p}")
        out.append(v)
    return out


def _feature_rows(estimator, views, start, stop):
    """Raw kernel rows ``k_p(x, X_train)`` and ``k_p(x, x)`` of new samples start:stop (as FeatureKernels)."""
    train, kernel = estimator.train_features_, canonical_kernel(estimator.kernel)
    params = dict(estimator.kernel_params or {})
    m, n = len(train), train[0].shape[0]
    raw, raw_diag = np.empty((m, stop - start, n)), np.empty((m, stop - start))
    for p, (v, t) in enumerate(zip(views, train)):
        x = (v[start:stop] - estimator.feature_means_[p]) / estimator.feature_scales_[p]
        sq = np.einsum("ij,ij->i", x, x)
        gram = x @ t.T
        if kernel == "rbf":
            bw = estimator.feature_bandwidths_[p]
            d2 = np.maximum(sq[:, None] + np.einsum("ij,ij->i", t, t)[None, :] - 2.0 * gram, 0.0)
            raw[p] = np.exp(-d2 / bw) if bw > 0 else 1.0
            raw_diag[p] = 1.0
        elif kernel == "linear":
            raw[p], raw_diag[p] = gram, sq
        else:
            degree, coef0 = int(params.get("degree", 2)), float(params.get("coef0", 1.0))
            raw[p] = (gram / t.shape[1] + coef0) ** degree
            raw_diag[p] = (sq / t.shape[1] + coef0) ** degree
    return raw, raw_diag


def _kernel_batch(estimator, X, diagonals):
    """The cross-kernels (m_in, n_new, n_train) and new diagonals (m_in, n_new), checked."""
    m_in, n = estimator.n_kernels_in_, estimator.kernel_col_means_.shape[1]
    cross = np.asarray(np.stack([np.asarray(k) for k in X]) if isinstance(X, (list, tuple)) else X, dtype=np.float64)
    if cross.ndim == 2 and m_in == 1:
        cross = cross[None]
    if cross.ndim == 3 and cross.shape[0] == m_in and cross.shape[2] != n:  # scikit-learn's wording first
        raise ValueError(f"X has {cross.shape[2]} features, but LSWMKC is expecting {n} features as input: the "
                         f"cross-kernels k_p(x, X_train) against the {n} training samples")
    if cross.ndim != 3 or cross.shape[0] != m_in:
        raise ValueError(f"the cross-kernels must have shape (m, n_new, n_train) = ({m_in}, n_new, {n}) "
                         f"(the model was fitted on {m_in} kernels of {n} samples), got {cross.shape}")
    _refuse_non_finite(cross, "the cross-kernels")
    if diagonals is None:  # one kernel, learned gamma: the row's scale does not matter (see _batches)
        return cross, None
    diagonals = np.asarray(diagonals, dtype=np.float64)
    if diagonals.ndim == 1 and m_in == 1:
        diagonals = diagonals[None]
    if diagonals.shape != cross.shape[:2]:
        raise ValueError(f"diagonals must have shape (m, n_new) = {cross.shape[:2]}, got {diagonals.shape}")
    _refuse_non_finite(diagonals, "the diagonals")
    return cross, diagonals


def _batches(estimator, X, diagonals, alpha_term):
    """(start, stop, affinity rows) of each block of new samples."""
    check_is_fitted(estimator, "embedding_")
    if getattr(estimator, "cluster_centers_", None) is None:
        raise NotFittedError("this model holds no prediction state (a model of a sweep, or loaded from a file "
                             "written without it): fit it with LSWMKC.fit to predict")
    if alpha_term not in ALPHA_TERMS:
        raise ValueError(f"alpha_term must be one of {ALPHA_TERMS}, got {alpha_term!r}")
    if estimator.kernel_col_means_ is None:
        raise ValueError("this model was fitted on a kernel store prepared by an earlier version, which keeps no "
                         "preprocessing statistics of the raw kernels: prepare the store again (lswmkc prepare) and "
                         "fit on it, or fit on the kernels or the features, to predict")
    features = estimator.train_features_ is not None
    if features and diagonals is not None:
        raise ValueError(f"diagonals are for precomputed kernels; this model builds {estimator.kernel!r} kernels "
                         "from feature views: pass the new samples' views alone")
    # With one kernel and the learned gamma, a positive factor on a new row (its 1 / sqrt(kc(x, x)))
    # scales K_omega(x, .) and gamma_x alike: the affinity row does not depend on k(x, x), which
    # scikit-learn's precomputed convention (X of shape (n_new, n_train)) does not give.
    scale_free = not features and estimator.n_kernels_in_ == 1 and isinstance(estimator.gamma, str)
    if not features and diagonals is None and not scale_free:
        raise ValueError("this model was fitted on precomputed kernels, not features: pass the cross-kernels "
                         f"k_p(x, X_train) of shape (m, n_new, n_train) = ({estimator.n_kernels_in_}, n_new, "
                         f"{estimator.kernel_col_means_.shape[1]}) and the diagonals k_p(x, x) of shape (m, n_new)")
    batch = _feature_batch(estimator, X) if features else _kernel_batch(estimator, X, diagonals)
    n_new = batch[0].shape[0] if features else batch[0].shape[1]
    if n_new == 0:
        raise ValueError("no samples to predict: the batch is empty (n_new = 0)")
    keep, means, diag = estimator.kernel_index_, estimator.kernel_col_means_, estimator.kernel_diag_
    weights = np.asarray(estimator.kernel_weights_, dtype=np.float64)
    m, n = means.shape
    block = max(1, BLOCK_BYTES // (8 * n * (2 * len(estimator.kernel_index_) + 4)))
    for start in range(0, n_new, block):
        stop = min(n_new, start + block)
        if features:
            raw, raw_diag = _feature_rows(estimator, batch, start, stop)
        else:
            raw = batch[0][keep, start:stop]
            raw_diag = None if batch[1] is None else batch[1][keep, start:stop]
        rows, cdiag = preprocess_cross_rows(raw, raw_diag, means, diag)
        if cdiag is not None and not np.all(cdiag > 0):
            p, i = (int(a) for a in np.argwhere(~(cdiag > 0))[0])
            raise KernelInputError(f"new sample {start + i}: its centred diagonal in kernel {int(keep[p])} is "
                                   f"{cdiag[p, i]:.3g}, not positive (it sits at the training mean in feature space, "
                                   "or its diagonal k(x, x) is wrong): the row cannot be normalised")
        combined = np.tensordot(weights, rows, axes=1)
        gamma = (knn_gamma(rows.sum(axis=0) / math.sqrt(m), estimator.n_neighbors)
                 if isinstance(estimator.gamma, str) else np.full(stop - start, float(estimator.gamma)))
        kstar = None
        if alpha_term == "kstar":
            z0 = affinity_rows(combined, gamma)
            kstar = (z0 @ estimator.kstar_factor_) @ estimator.kstar_factor_.T
        yield start, stop, affinity_rows(combined, gamma, float(estimator.alpha), kstar)


def transform_samples(estimator: Any, X: Any, diagonals: Any = None, alpha_term: str = "zero") -> np.ndarray:
    """The embedding of new samples (:meth:`lswmkc_dask.LSWMKC.transform`).

    Parameters
    ----------
    estimator : LSWMKC
        Fitted.
    X : list of ndarray of shape (n_new, d_v), or ndarray of shape (m, n_new, n_train)
        Feature views (a model fitted on features) or cross-kernels (on precomputed kernels).
    diagonals : ndarray of shape (m, n_new), optional
        ``k_p(x, x)``; required with cross-kernels.
    alpha_term : {"zero", "kstar"}
        See :func:`affinity_rows`.

    Returns
    -------
    ndarray of shape (n_new, n_clusters_)

    Raises
    ------
    sklearn.exceptions.NotFittedError
    ValueError
        Wrong number of views, features or kernels, features given to a model fitted
        on kernels (or the reverse), NaN/Inf, an empty batch, a model fitted on a store
        prepared by an earlier version.
    KernelInputError
        A new sample whose centred diagonal is not positive.
    """
    blocks = [embed_rows(z, estimator.embedding_) for _, _, z in _batches(estimator, X, diagonals, alpha_term)]
    return np.concatenate(blocks)


def predict_labels(estimator: Any, X: Any, diagonals: Any = None, alpha_term: str = "zero") -> np.ndarray:
    """The cluster of each new sample (:meth:`lswmkc_dask.LSWMKC.predict`).

    Parameters
    ----------
    estimator, X, diagonals, alpha_term
        As :func:`transform_samples`.

    Returns
    -------
    ndarray of shape (n_new,), int64
        The nearest centroid of ``cluster_centers_`` to each embedding row.

    Raises
    ------
    sklearn.exceptions.NotFittedError, ValueError, KernelInputError
        As :func:`transform_samples`.
    """
    h = transform_samples(estimator, X, diagonals, alpha_term)
    return np.asarray(nearest_centre(h, estimator.cluster_centers_), dtype=np.int64)

"""The four steps of docs/algorithm.md section 8 for one block of new samples, in the array API.

:func:`predict_block` takes a block's raw kernel rows ``k_p(x, X_train)`` (from the kept
features, :func:`feature_rows`, or given), preprocesses them with the training statistics,
combines them with omega, projects each row by Theorem 1 with gamma_x of Eq. (27), embeds
and labels it; everything it reads from the fit is one :class:`PredictState`. The same
code runs on NumPy, on a Dask worker or on a device (:mod:`lswmkc_dask.predict` chooses).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from array_api_compat import array_namespace, device

from .core.equations import GAMMA_MIN, project_rows_simplex
from .kernels.features import DIAGONAL_JITTER, canonical_kernel

__all__ = ["PredictState", "affinity_rows", "embed_rows", "feature_rows", "knn_gamma", "nearest_centre",
           "predict_block", "preprocess_cross_rows", "vote_labels"]


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


def vote_labels(z: Any, onehot: Any) -> Any:
    """The label of largest affinity-weighted vote: ``argmax_c sum_{j: labels_j = c} z_j`` (first on ties).

    Parameters
    ----------
    z : array of shape (b, n)
    onehot : array of shape (n, k)
        ``labels_`` one-hot.

    Returns
    -------
    integer array of shape (b,)
    """
    xp = array_namespace(z)
    return xp.argmax(z @ onehot, axis=1)


@dataclass
class PredictState:
    """What one block of new samples needs from the fit (sent once to each worker or device).

    Attributes
    ----------
    col_means, diag : array of shape (m, n)
        The training statistics of the kept kernels.
    weights, embedding, centres, factor : arrays
        omega, ``embedding_``, ``cluster_centers_``, K*'s factor (``alpha_term="kstar"``
        only, else None).
    onehot : array of shape (n, k)
        ``labels_`` one-hot (:func:`vote_labels`).
    n_neighbors, gamma, alpha, alpha_term, label_rule
        As the model's; ``gamma`` None for the learned one (:func:`knn_gamma`).
    kernel, degree, coef0, train, feature_means, feature_scales, bandwidths
        Feature views only (else None): the canonical kernel and its parameters, the
        z-scored training features and the training means, scales and bandwidths.
    """

    col_means: Any
    diag: Any
    weights: Any
    embedding: Any
    onehot: Any
    centres: Any
    factor: Any
    n_neighbors: int
    gamma: float | None
    alpha: float
    alpha_term: str
    label_rule: str
    kernel: str | None = None
    degree: float = 2.0
    coef0: float = 1.0
    train: Any = None  # the four lists: None for precomputed kernels
    feature_means: Any = None
    feature_scales: Any = None
    bandwidths: Any = None

    @classmethod
    def of(cls, estimator: Any, alpha_term: str = "zero", label_rule: str = "vote") -> PredictState:
        """The state of a fitted ``estimator`` (host NumPy arrays)."""
        labels, k = np.asarray(estimator.labels_), int(estimator.n_clusters_)
        state = cls(
            col_means=np.asarray(estimator.kernel_col_means_, dtype=np.float64),
            diag=np.asarray(estimator.kernel_diag_, dtype=np.float64),
            weights=np.asarray(estimator.kernel_weights_, dtype=np.float64),
            embedding=np.asarray(estimator.embedding_, dtype=np.float64),
            onehot=(labels[:, None] == np.arange(k)[None, :]).astype(np.float64),
            centres=np.asarray(estimator.cluster_centers_, dtype=np.float64),
            factor=np.asarray(estimator.kstar_factor_, dtype=np.float64) if alpha_term == "kstar" else None,
            n_neighbors=int(estimator.n_neighbors),
            gamma=None if isinstance(estimator.gamma, str) else float(estimator.gamma),
            alpha=float(estimator.alpha), alpha_term=alpha_term, label_rule=label_rule,
        )
        if estimator.train_features_ is not None:
            params = dict(estimator.kernel_params or {})
            state.kernel = canonical_kernel(estimator.kernel)
            state.degree, state.coef0 = float(params.get("degree", 2)), float(params.get("coef0", 1.0))
            state.train = [np.asarray(t, dtype=np.float64) for t in estimator.train_features_]
            state.feature_means = [np.asarray(a, dtype=np.float64) for a in estimator.feature_means_]
            state.feature_scales = [np.asarray(a, dtype=np.float64) for a in estimator.feature_scales_]
            state.bandwidths = [float(b) for b in estimator.feature_bandwidths_]
        return state

    def to(self, convert: Callable[[Any, str], Any]) -> PredictState:
        """The state with every array passed through ``convert(array, name)`` (to a device)."""
        out = dataclasses.replace(self)
        for f in ("col_means", "diag", "weights", "embedding", "onehot", "centres", "factor"):
            value = getattr(self, f)
            setattr(out, f, None if value is None else convert(value, f))
        for f in ("train", "feature_means", "feature_scales"):
            value = getattr(self, f)
            if value is not None:
                setattr(out, f, [convert(a, f"{f}[{p}]") for p, a in enumerate(value)])
        return out


def feature_rows(state: PredictState, views: Sequence[Any]) -> tuple[Any, Any]:
    """Raw kernel rows ``k_p(x, X_train)`` and ``k_p(x, x)`` of new samples, from their views.

    As :class:`lswmkc_dask.kernels.features.FeatureKernels` builds them: each view z-scored
    with the training means and scales; Gaussian ``exp(-||x - t||^2 / bandwidth)``,
    linear ``x . t``, polynomial ``(x . t / d + coef0) ** degree``.

    Parameters
    ----------
    state : PredictState
        Of a model fitted on feature views (arrays in the namespace of ``views``).
    views : list of array of shape (b, d_v)

    Returns
    -------
    raw : array of shape (m, b, n)
    raw_diag : array of shape (m, b)
    """
    xp = array_namespace(*views)
    raw, raw_diag = [], []
    for p, v in enumerate(views):
        t = state.train[p]
        x = (v - state.feature_means[p]) / state.feature_scales[p]
        sq = xp.sum(x * x, axis=1)
        gram = x @ t.T
        if state.kernel == "rbf":
            bw = state.bandwidths[p]
            d2 = xp.maximum(sq[:, None] + xp.sum(t * t, axis=1)[None, :] - 2.0 * gram, 0.0)
            raw.append(xp.exp(-d2 / bw) if bw > 0 else xp.ones_like(gram))
            raw_diag.append(xp.ones_like(sq))
        elif state.kernel == "linear":
            raw.append(gram)
            raw_diag.append(sq)
        else:
            d = t.shape[1]
            raw.append((gram / d + state.coef0) ** state.degree)
            raw_diag.append((sq / d + state.coef0) ** state.degree)
    return xp.stack(raw), xp.stack(raw_diag)


def predict_block(state: PredictState, new: Any, new_diag: Any = None) -> tuple[Any, Any, Any]:
    """One block of new samples, in the namespace of its arrays (steps 1-4 of section 8).

    Parameters
    ----------
    state : PredictState
        In the namespace and on the device of ``new``.
    new : list of array of shape (b, d_v), or array of shape (m, b, n)
        The block's feature views (a model of features), or its raw cross-kernels of
        the kept kernels.
    new_diag : array of shape (m, b), optional
        ``k_p(x, x)`` of the kept kernels (cross-kernels only; None: see
        :func:`preprocess_cross_rows`).

    Returns
    -------
    h : array of shape (b, k)
        The embedding (:func:`embed_rows`).
    labels : integer array of shape (b,)
        :func:`vote_labels` (``label_rule="vote"``) or :func:`nearest_centre`.
    centred_diag : array of shape (m, b) or None
        ``kc(x, x)``, for the caller to refuse a value not above 0.
    """
    if state.train is not None:
        new, new_diag = feature_rows(state, new)
    xp = array_namespace(new)
    rows, cdiag = preprocess_cross_rows(new, new_diag, state.col_means, state.diag)
    combined = xp.tensordot(state.weights, rows, axes=1)
    if state.gamma is None:
        gamma = knn_gamma(xp.sum(rows, axis=0) / math.sqrt(rows.shape[0]), state.n_neighbors)
    else:
        gamma = xp.full((rows.shape[1],), state.gamma, dtype=rows.dtype, device=device(rows))
    kstar = None
    if state.alpha_term == "kstar":
        kstar = (affinity_rows(combined, gamma) @ state.factor) @ state.factor.T
    z = affinity_rows(combined, gamma, state.alpha, kstar)
    h = embed_rows(z, state.embedding)
    labels = vote_labels(z, state.onehot) if state.label_rule == "vote" else nearest_centre(h, state.centres)
    return h, labels, cdiag

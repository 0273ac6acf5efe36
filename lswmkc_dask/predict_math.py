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

from .core.equations import GAMMA_MIN, mean_of_means, project_rows_simplex
from .kernels.features import DIAGONAL_JITTER, canonical_kernel


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
        z-scored training features and the training means, scales and bandwidths of the
        views of the kept kernels (``kernel_index_``).
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
        attributes = {"col_means": "kernel_col_means_", "diag": "kernel_diag_", "weights": "kernel_weights_",
                      "embedding": "embedding_", "centres": "cluster_centers_"}  # field -> the model's attribute
        fitted: dict[str, Any] = {f: np.asarray(getattr(estimator, a), dtype=np.float64) for f, a in attributes.items()}
        state = cls(
            **fitted,
            onehot=(labels[:, None] == np.arange(k)[None, :]).astype(np.float64),
            factor=np.asarray(estimator.kstar_factor_, dtype=np.float64) if alpha_term == "kstar" else None,
            n_neighbors=int(estimator.n_neighbors),
            gamma=None if isinstance(estimator.gamma, str) else float(estimator.gamma),
            alpha=float(estimator.alpha), alpha_term=alpha_term, label_rule=label_rule,
        )
        if estimator.train_features_ is not None:
            params = dict(estimator.kernel_params or {})
            state.kernel = canonical_kernel(estimator.kernel)
            state.degree, state.coef0 = float(params.get("degree", 2)), float(params.get("coef0", 1.0))
            keep = np.asarray(estimator.kernel_index_).tolist()  # the views of the kept kernels
            state.train = [np.asarray(estimator.train_features_[p], dtype=np.float64) for p in keep]
            state.feature_means = [np.asarray(estimator.feature_means_[p], dtype=np.float64) for p in keep]
            state.feature_scales = [np.asarray(estimator.feature_scales_[p], dtype=np.float64) for p in keep]
            state.bandwidths = [float(estimator.feature_bandwidths_[p]) for p in keep]
        return state

    def to(self, convert: Callable[[Any, str], Any]) -> PredictState:
        """The state with every array passed through ``convert(array, name)`` (to a device)."""
        own = vars(self)
        arrays: dict[str, Any] = {f: None if own[f] is None else convert(own[f], f)
                  for f in ("col_means", "diag", "weights", "embedding", "onehot", "centres", "factor")}
        lists: dict[str, Any] = {f: [convert(a, f"{f}[{p}]") for p, a in enumerate(own[f])]
                 for f in ("train", "feature_means", "feature_scales") if own[f] is not None}
        return dataclasses.replace(self, **arrays, **lists)


def _dot_kernel(state: PredictState, dots: Any, d: int) -> Any:
    """The linear (``x . t``) or polynomial (``(x . t / d + coef0) ** degree``) kernel of the products ``dots``."""
    return dots if state.kernel == "linear" else (dots / d + state.coef0) ** state.degree


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
        else:
            raw.append(_dot_kernel(state, gram, t.shape[1]))
            raw_diag.append(_dot_kernel(state, sq, t.shape[1]))
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


# --- the state checked against itself, and new views against the training views ------------------------

#: Training samples (evenly spaced) whose kernel columns :func:`state_problem` computes again.
CHECKED_COLUMNS = 32
#: Tolerance of :func:`state_problem`, relative to the largest raw kernel entry (at least 1).
STATE_RTOL = 1e-7
#: The deciles compared by :func:`order_evidence`.
QUANTILES = np.linspace(0.1, 0.9, 9)
#: A new column is far from a fitted one when its deciles lie on average this many of the fitted
#: column's standard deviations from the fitted deciles ...
FAR = 2.0
#: ... and near when within this many, and at most a quarter of its distance to its own fitted column.
NEAR = 1.0
#: :func:`order_evidence` compares statistics from this many new samples on (fewer say too little).
MIN_SAMPLES = 10
#: Views of more features than this are not compared column by column (the comparison is d x d).
MAX_COLUMNS = 2048
#: The deciles are taken of at most this many samples (evenly spaced) of each view.
MAX_ROWS = 10_000


def _rows(a):
    return a[:: max(1, -(-a.shape[0] // MAX_ROWS))]


def state_problem(state: PredictState, kernel_index: Any) -> tuple[str, str] | None:
    """What is wrong with a features model's predict state, or None: (member, why).

    The training views are z-scored (each column of mean 0 and standard deviation 1, or 0 for
    a constant feature); the bandwidths are the views' mean squared distances; the kernel
    statistics of each kept kernel follow from its view: the column means at
    :data:`CHECKED_COLUMNS` samples computed again, and the centred diagonals, within
    :data:`STATE_RTOL` (O(n d) work per view).

    Parameters
    ----------
    state : PredictState
        Of a model fitted on feature views (host NumPy arrays; the kept views).
    kernel_index : array of shape (m,)
        The input kernel, one per view, of each kept kernel (to name the views).

    Returns
    -------
    tuple of (str, str) or None
    """
    index = np.asarray(kernel_index).tolist()
    for p, t, bandwidth in zip(index, state.train, state.bandwidths):
        mean, sd = t.mean(axis=0), t.std(axis=0)
        bad = np.flatnonzero((np.abs(mean) > 1e-6) | ((np.abs(sd - 1) > 1e-6) & (sd > 1e-6)))
        if bad.size:
            return (f"train_features_{p}", f"is not z-scored: column {int(bad[0])} has mean {mean[bad[0]]:.3g} and "
                    f"standard deviation {sd[bad[0]]:.3g} (the training features are kept standardised)")
        bw = 2.0 * (np.einsum("ij,ij->i", t, t).mean() - float(mean @ mean))
        if state.kernel == "rbf" and not abs(bw - bandwidth) <= 1e-9 * max(1.0, abs(bw)):
            return ("feature_bandwidths_", f"is {bandwidth:.9g} for view {p}, but its training features give "
                    f"{bw:.9g} (their mean squared distance)")
    n = state.col_means.shape[1]
    cols = np.unique(np.linspace(0, n - 1, min(n, CHECKED_COLUMNS)).astype(np.int64))
    for r, (p, t) in enumerate(zip(index, state.train)):
        one = dataclasses.replace(state, train=[t], feature_means=[np.zeros(t.shape[1])],
                                  feature_scales=[np.ones(t.shape[1])], bandwidths=[state.bandwidths[r]])
        raw, _ = feature_rows(one, [t[cols]])
        scale = max(1.0, float(np.abs(raw).max()))
        got = raw[0].mean(axis=1)  # k(x_j, .) over the training samples: the column mean at j (symmetric)
        j = np.flatnonzero(~(np.abs(got - state.col_means[r, cols]) <= STATE_RTOL * scale))
        if j.size:
            return ("kernel_col_means_", f"does not follow from train_features_{p}: at sample {int(cols[j[0]])} of "
                    f"kernel {r} it is {state.col_means[r, cols[j[0]]]:.9g}, the training features give "
                    f"{got[j[0]]:.9g} (members of different fits?)")
        sq = np.einsum("ij,ij->i", t, t)
        raw_diag = np.ones(n) if state.kernel == "rbf" else _dot_kernel(state, sq, t.shape[1])
        cm = state.col_means[r][None]
        want = ((((raw_diag[None] - cm) - cm) + mean_of_means(cm)[:, None]) + DIAGONAL_JITTER)[0]
        j = np.flatnonzero(~(np.abs(want - state.diag[r]) <= STATE_RTOL * scale))
        if j.size:
            return ("kernel_diag_", f"does not follow from train_features_{p}: at sample {int(j[0])} of kernel {r} "
                    f"it is {state.diag[r, j[0]]:.9g}, the training features give {want[j[0]]:.9g}")
    return None


def identity_problem(name: str, value: Any, widths: Sequence[int]) -> str | None:
    """Why ``value`` is not a model's ``view_names_`` or ``view_columns_``, or None.

    Parameters
    ----------
    name : {"view_names_", "view_columns_"}
    value : object
        As read from JSON: one text per view ("" unknown), or per view a list of its d_v
        column names ([] unknown).
    widths : sequence of int
        d_v of each view.

    Returns
    -------
    str or None
    """
    if not isinstance(value, list) or len(value) != len(widths):
        return f"is not a JSON list of {len(widths)} entries, one per feature view"
    for p, (v, w) in enumerate(zip(value, widths)):
        if name == "view_names_" and not isinstance(v, str):
            return f"holds {str(v)[:40]!r} for view {p}, not a text"
        if name != "view_names_" and not (isinstance(v, list) and len(v) in (0, w)
                                          and all(isinstance(x, str) for x in v)):
            return f"holds no list of {w} column names (or []) for view {p} of {w} features"
    return None


def _fingerprints(train, means, scales):
    """Per view: the deciles of each training column in its raw units and its standard deviation."""
    out = []
    for t, mu, sd in zip(train, means, scales):
        t = _rows(t)
        q = np.quantile(t, QUANTILES, axis=0).T * sd[:, None] + mu[:, None]
        out.append((q, np.maximum(sd * t.std(axis=0), 1e-9 * np.maximum(1.0, np.abs(mu)))))
    return out


def _distances(new, print_):
    """(d_new, d_fit): the mean distance of each new column's deciles to each fitted column's, in the
    fitted column's standard deviations (capped at 100).
    """
    q, spread = print_
    qn = np.quantile(_rows(new), QUANTILES, axis=0).T
    d = sum(np.abs(qn[:, k, None] - q[None, :, k]) for k in range(QUANTILES.size))
    return np.minimum(d / QUANTILES.size / spread[None, :], 100.0)


def _moved(cost):
    """The first (i, j) of a cycle of the best assignment among themselves of the candidates far
    (:data:`FAR`) from their own fitted position in which each i is near the j it moves to; else None.
    """
    from scipy.optimize import linear_sum_assignment

    idx = np.flatnonzero(np.diagonal(cost) > FAR)  # fewer than two: no cycle of two or more
    rows, cols = linear_sum_assignment(cost[np.ix_(idx, idx)])
    to = dict(zip(idx[rows].tolist(), idx[cols].tolist()))
    for start in to:  # ``to`` is a permutation of ``idx``: each walk from ``start`` comes back to it
        cycle = [start]
        while to[cycle[-1]] != start:
            cycle.append(to[cycle[-1]])
        if len(cycle) > 1 and all(cost[a, to[a]] <= NEAR and 4 * cost[a, to[a]] <= cost[a, a] for a in cycle):
            return start, to[start]
    return None


def order_evidence(train: Sequence[Any], means: Sequence[Any], scales: Sequence[Any],
                   views: Sequence[Any]) -> str | None:
    """Why the new ``views`` look passed in another order than the fit's (views or columns), or None.

    Each column is summarised by its deciles. A new view far (:data:`FAR`) from its own
    fitted view and near (:data:`NEAR`) another of the same width, in a cycle of the best
    assignment of the views among themselves, says the views came in another order; within
    a view the same test on its columns says the columns did. A distribution that only
    shifted moves nothing (it is near no other column in a cycle); a batch drawn from part
    of the population can look moved, so this is evidence for a warning, not a refusal.
    Nothing is said below :data:`MIN_SAMPLES` new samples; views wider than
    :data:`MAX_COLUMNS` are compared as views only; deciles of :data:`MAX_ROWS` samples at most.

    Parameters
    ----------
    train, means, scales : lists of arrays, of shapes (n, d_v), (d_v,), (d_v,)
        The model's ``train_features_``, ``feature_means_``, ``feature_scales_``.
    views : list of ndarray of shape (n_new, d_v)
        The new samples' views, checked for shape.

    Returns
    -------
    str or None
        One line naming the view (and column).
    """
    if views[0].shape[0] < MIN_SAMPLES:
        return None
    prints = _fingerprints(train, means, scales)
    m = len(views)
    cost = np.full((m, m), np.inf)
    for p in range(m):
        for q in range(m):
            if views[p].shape[1] == train[q].shape[1]:
                cost[p, q] = float(np.mean(np.diagonal(_distances(views[p], prints[q]))))
    if moved := _moved(np.where(np.isfinite(cost), cost, 1e300)):
        return (f"view {moved[0]} has the feature statistics of the fitted view {moved[1]}, not of view {moved[0]}: "
                f"were the views passed in another order than the fit's?")
    for p, v in enumerate(views):
        if v.shape[1] > MAX_COLUMNS:
            continue
        if moved := _moved(_distances(v, prints[p])):
            return (f"view {p}: its column {moved[0]} has the statistics of the fitted column {moved[1]}, not of "
                    f"column {moved[0]}: were its columns passed in another order than the fit's?")
    return None

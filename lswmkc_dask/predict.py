"""Labels and embeddings of new samples from a fitted LSWMKC (docs/algorithm.md section 8).

Every quantity comes from the fit. This module checks the new samples against the model
and runs the math of :mod:`lswmkc_dask.predict_math` block by block where the model
says: on a resident fit's device (:func:`resident_of`), on the Dask workers (the fitted
state scattered once, sent again after a lost worker) or in this process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .engine.cluster import active_client, connect
from .engine.device_fit import Link, resident_namespace
from .engine.runners import lost_errors
from .engine.scheduler import wait_for_workers, workers_of
from .engine.where import Where
from .errors import (
    ClusterWarning,
    KernelInputError,
    ViewMismatchError,
    ViewOrderWarning,
    WorkersLostError,
    warn_at_caller,
)
from .kernels.features import FeatureKernels, text_columns
from .predict_math import PredictState, order_evidence, predict_block

#: The fitted attributes that ``predict`` and ``transform`` read beyond the fit's own: the
#: training statistics of section 0 of the kept kernels, which input kernels were kept,
#: the z-scored training features with their means, scales and bandwidths (feature views
#: only), the k-means centroids, and what identifies each feature view and its columns: its name
#: (``""`` unknown) and its column names (``[]`` unknown).
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
    "view_names_",
    "view_columns_",
)
#: The alpha term of a new sample's affinity row: "zero" (the initial graph's rule, shipped:
#: docs/algorithm.md section 8) or "kstar" (``K*(x, .)`` extended through K*'s factor).
ALPHA_TERMS = ("zero", "kstar")
#: A new sample's label from its affinity row z: "vote" (shipped: ``argmax_c sum_{j: labels_j = c}
#: z_j``) or "centroid" (the nearest k-means centroid to ``z H``); docs/algorithm.md section 8.
LABEL_RULES = ("vote", "centroid")
#: Bytes of one block of new samples' kernel rows (all m kernels and the work arrays).
BLOCK_BYTES = 64 * 2**20
#: Times the fitted state is sent again to the Dask workers, and the blocks whose results
#: were lost run again, after workers died (then :class:`WorkersLostError`).
MAX_RESENDS = 3


def _view_identity(estimator, views, kernel_index, m_in, estimator_input=None):
    """(view_names_, view_columns_) at fit: the views' names from the kernel names where they are
    not the default ``kernel p`` (the command line names each view by its file), the DataFrames' columns.
    """
    names = [""] * m_in
    kept = getattr(estimator, "kernel_names_", None)
    for name, p in zip(kept if kept is not None else (), np.asarray(kernel_index).tolist()):
        names[p] = "" if str(name) == f"kernel {p}" else str(name)
    columns = getattr(estimator_input, "columns", None)
    return names, list(columns) if columns else [text_columns(v) for v in views]


def prediction_state(estimator: Any, X: Any, stats: Any, features: Any = None) -> dict[str, Any]:
    """The attributes of :data:`PREDICT_STATE` for a fit of ``estimator`` on ``X``.

    Parameters
    ----------
    estimator : LSWMKC
        Fitted on ``X`` (``embedding_``, ``labels_``, ``n_clusters_``, ``kernel``,
        ``kernel_params``).
    X : as :meth:`lswmkc_dask.LSWMKC.fit` took it
        Used for feature views only.
    stats : lswmkc_dask.io.PreprocessingStatistics or None
        The training statistics of the fit's kernels (None: a store prepared by an
        earlier version, which keeps none: such a model cannot predict).
    features : lswmkc_dask.io.store.FeatureViews, optional
        What a store prepared from feature views keeps of them (``KernelStore.feature_views()``),
        for a fit on that store: the feature state is taken from it (the same as a fit on the
        views gives), whatever ``X`` is. ``estimator.kernel`` must then be the store's kernel.

    Returns
    -------
    dict
        Attribute name -> value.
    """
    state: dict[str, Any] = dict.fromkeys(PREDICT_STATE)
    h, labels, k = estimator.embedding_, np.asarray(estimator.labels_), estimator.n_clusters_
    counts = np.bincount(labels, minlength=k)[:, None]
    sums = np.zeros((k, h.shape[1]))
    np.add.at(sums, labels, h)
    state["cluster_centers_"] = np.where(counts > 0, sums / np.maximum(counts, 1), np.inf)
    if features is not None or estimator.kernel != "precomputed":
        if features is not None:  # a store prepared from feature views keeps them
            source, views, X = features, features.views, features
        elif isinstance(X, FeatureKernels):  # views with their kernel chosen (fit takes them so)
            source, views = X, X.views
        else:
            views = [X] if getattr(X, "ndim", None) == 2 else list(X)
            source = FeatureKernels(views, estimator.kernel, **dict(estimator.kernel_params or {}))
        state.update(train_features_=source.views, feature_means_=source.means, feature_scales_=source.scales,
                     feature_bandwidths_=np.asarray(source.bandwidths))
        index = np.arange(len(views)) if stats is None else stats.kernel_index
        given = X if isinstance(X, FeatureKernels) or X is features else None
        state["view_names_"], state["view_columns_"] = _view_identity(estimator, views, index, len(views), given)
    if stats is not None:
        state.update(kernel_col_means_=stats.col_means, kernel_diag_=stats.diag, kernel_index_=stats.kernel_index,
                     n_kernels_in_=stats.n_kernels_in)
    return state


def _refuse_non_finite(a, what):
    bad = ~np.isfinite(a)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what} hold {int(bad.sum())} NaN/Inf values (the first at index {where})")


def _check_names(estimator, given):
    """Refuse new views whose names (``given``, one per view or None) are other fitted views' names."""
    fitted = list(getattr(estimator, "view_names_", None) or ())
    if not given or not any(fitted):
        return
    order = " ".join(name or f"view {q}" for q, name in enumerate(fitted))
    for p, name in enumerate(given):
        if name and (p >= len(fitted) or name != fitted[p]) and name in fitted:
            q = fitted.index(name)
            raise ViewMismatchError(f"view {p} ({name}) is the fitted view {q} ({fitted[q]}); pass the views in the "
                                    f"fitted order: {order}")


def _check_columns(estimator, p, view):
    """Refuse a view whose column names differ from the fitted view's (both known)."""
    fitted = (getattr(estimator, "view_columns_", None) or [[]] * (p + 1))[p]
    given = text_columns(view)
    if not fitted or not given or given == list(fitted):
        return
    if sorted(given) == sorted(fitted):
        i = next(i for i, (a, b) in enumerate(zip(given, fitted)) if a != b)
        raise ViewMismatchError(f"view {p}: its columns are not in the fitted order (column {i} is {given[i]!r}, "
                                f"fitted {fitted[i]!r}): pass view[model.view_columns_[{p}]]")
    extra = [c for c in given if c not in fitted]
    what = (f"column {extra[0]!r} is not among its fitted columns" if extra
            else f"the fitted column {next(c for c in fitted if c not in given)!r} is missing")
    raise ViewMismatchError(f"view {p}: {what} ({len(given)} columns given, {len(fitted)} fitted: "
                            f"{', '.join(map(repr, fitted[:3]))}{', ...' if len(fitted) > 3 else ''})")


def _as_float(v, p):
    """View ``p`` as float64; complex or text values refused naming the view."""
    a = np.asarray(v)
    if a.dtype.kind == "c":
        raise ValueError(f"view {p} holds complex values (dtype {a.dtype}); features must be real numbers")
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"view {p} is not numeric: {exc}") from None


def _feature_batch(estimator, X, view_names=None):
    """The new samples' views, checked against the training views (their names and columns where
    known, their statistics: :class:`ViewOrderWarning`).
    """
    train = estimator.train_features_
    views = [X] if getattr(X, "ndim", None) == 2 else list(X)  # one view as one array, as fit takes it
    if len(views) != len(train):
        raise ValueError(f"X has {len(views)} feature views but the model was fitted on {len(train)}")
    if view_names is not None and len(view_names) != len(views):
        raise ValueError(f"{len(view_names)} view names for {len(views)} feature views")
    _check_names(estimator, view_names)
    out: list[np.ndarray] = []
    for p, (v, t) in enumerate(zip(views, train)):
        _check_columns(estimator, p, v)
        v = _as_float(v, p)
        if v.ndim != 2:
            raise ValueError(f"view {p} must be 2-D (samples x features), got shape {v.shape}")
        if v.shape[1] != t.shape[1]:
            raise ValueError(f"view {p} has {v.shape[1]} features but the model was fitted on {t.shape[1]}")
        if out and v.shape[0] != out[0].shape[0]:
            raise ValueError(f"view {p} has {v.shape[0]} samples but view 0 has {out[0].shape[0]}")
        _refuse_non_finite(v, f"view {p}")
        out.append(v)
    if evidence := order_evidence(train, estimator.feature_means_, estimator.feature_scales_, out):
        warn_at_caller(f"predict: {evidence} (labelled as given; names or column names identify the views where "
                       "they are given)", ViewOrderWarning)
    return out


def _kernel_axis(a, ndim, m_in):
    """``a`` with a leading kernel axis where the model has one kernel and ``a`` is ``ndim``-D without it."""
    return a[None] if a.ndim == ndim and m_in == 1 else a


def _kernel_batch(estimator, X, diagonals):
    """The cross-kernels (m_in, n_new, n_train) and new diagonals (m_in, n_new), checked."""
    m_in, n = estimator.n_kernels_in_, estimator.kernel_col_means_.shape[1]
    cross = np.asarray(np.stack([np.asarray(k) for k in X]) if isinstance(X, (list, tuple)) else X, dtype=np.float64)
    cross = _kernel_axis(cross, 2, m_in)
    if cross.ndim == 3 and cross.shape[0] == m_in and cross.shape[2] != n:  # scikit-learn's wording first
        raise ValueError(f"X has {cross.shape[2]} features, but LSWMKC is expecting {n} features as input: the "
                         f"cross-kernels k_p(x, X_train) against the {n} training samples")
    if cross.ndim != 3 or cross.shape[0] != m_in:
        raise ValueError(f"the cross-kernels must have shape (m, n_new, n_train) = ({m_in}, n_new, {n}) "
                         f"(the model was fitted on {m_in} kernels of {n} samples), got {cross.shape}")
    _refuse_non_finite(cross, "the cross-kernels")
    if diagonals is None:  # one kernel, learned gamma: the row's scale does not matter (see _batches)
        return cross, None
    diagonals = _kernel_axis(np.asarray(diagonals, dtype=np.float64), 1, m_in)
    if diagonals.shape != cross.shape[:2]:
        raise ValueError(f"diagonals must have shape (m, n_new) = {cross.shape[:2]}, got {diagonals.shape}")
    _refuse_non_finite(diagonals, "the diagonals")
    return cross, diagonals


def _checked_batch(estimator, X, diagonals, alpha_term, label_rule, view_names=None):
    """The new samples, checked against the model: (views or cross-kernels, diagonals, n_new)."""
    check_is_fitted(estimator, "embedding_")
    if getattr(estimator, "cluster_centers_", None) is None:
        raise NotFittedError("this model holds no prediction state (built by LSWMKC.from_result, loaded from a "
                             "sweep's run, or from a file written by an earlier version): fit it with "
                             "LSWMKC.fit to predict (a sweep's choice: selected_model(result).fit(X))")
    for name, value, allowed in (("alpha_term", alpha_term, ALPHA_TERMS), ("label_rule", label_rule, LABEL_RULES)):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
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
    if features:
        views = _feature_batch(estimator, X, view_names)
        batch, n_new = (views, None), views[0].shape[0]
    else:
        batch = _kernel_batch(estimator, X, diagonals)
        n_new = batch[0].shape[1]
    if n_new == 0:
        raise ValueError("no samples to predict: the batch is empty (n_new = 0)")
    return batch, n_new


def _blocks(state, batch, n_new, keep):
    """(start, stop, new, new_diag) of each block of new samples, about BLOCK_BYTES each."""
    m, n = state.col_means.shape
    size = max(1, BLOCK_BYTES // (8 * n * (2 * m + 4)))
    for start in range(0, n_new, size):
        stop = min(n_new, start + size)
        if state.train is not None:
            yield start, stop, [batch[0][p][start:stop] for p in keep], None  # the views of the kept kernels
        else:
            yield start, stop, batch[0][keep, start:stop], None if batch[1] is None else batch[1][keep, start:stop]


def _run_on_workers(client, state, blocks):
    """Each block a task on the workers, the state scattered once to every worker.

    The scattered state has no lineage: after a worker's death it is sent again and the
    blocks not back run again (the same result), :data:`MAX_RESENDS` times at most, each
    with a :class:`~lswmkc_dask.errors.ClusterWarning`; then :class:`WorkersLostError`.
    """
    pending: Iterator[tuple[int, Any]] = enumerate(blocks)
    held: dict[int, Any] = {}  # index -> block: sent, its result not back yet
    done: dict[int, Any] = {}
    for resends in itertools.count():
        try:
            _send_blocks(client, state, pending, held, done)
            return [done[i] for i in range(len(done))]
        except lost_errors() as exc:
            reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}".rstrip(": ")
            if resends == MAX_RESENDS:
                raise WorkersLostError(
                    f"predict: Dask workers died {MAX_RESENDS + 1} times while the new samples were predicted "
                    f"(the last: {reason}); nothing is returned: look at the workers' logs and memory limits, or "
                    "predict in this process (no client given or active)") from exc
            wait_for_workers(client)
            warn_at_caller(f"predict: a Dask worker was lost ({reason}); the fitted state was sent again and "
                           f"{len(held)} blocks of new samples run again ({len(done)} done)", ClusterWarning)
            pending = itertools.chain(sorted(held.items(), key=lambda item: item[0]), pending)
            held.clear()


def _send_blocks(client, state, pending, held, done):
    """Scatter ``state`` to every worker and run the ``pending`` (index, block) pairs there, two per worker
    at a time; a block is in ``held`` from its submission until its result is in ``done``.
    """
    from distributed import as_completed

    shared = client.scatter(state, broadcast=True, hash=False)
    live: dict[str, tuple[int, Any]] = {}  # key -> (index, future)

    def submit(i, block):
        held[i] = block
        future = client.submit(predict_block, shared, block[2], block[3], pure=False)
        live[future.key] = (i, future)
        return future

    slots = 2 * len(workers_of(client)) or 2
    running = as_completed([submit(*item) for item in itertools.islice(pending, slots)], loop=client.loop)
    try:
        for future in running:
            i = live.pop(future.key)[0]
            done[i] = future.result()
            del held[i]
            if (item := next(pending, None)) is not None:
                running.add(submit(*item))
    finally:
        client.cancel([f for _, f in live.values()] + [shared])


def _run_resident(name, state, blocks):
    """The result of each block on the device of the resident namespace ``name``; the state copied there once."""
    link = Link(*resident_namespace(name))
    on_device = state.to(link.to_device)
    for start, stop, new, new_diag in blocks:
        if state.train is not None:
            new = [link.to_device(v, f"view {p} of samples {start}:{stop}") for p, v in enumerate(new)]
        else:
            new = link.to_device(new, f"cross-kernels of samples {start}:{stop}")
            new_diag = None if new_diag is None else link.to_device(new_diag, "diagonals")
        h, labels, cdiag = predict_block(on_device, new, new_diag)
        yield (link.to_host(h, "embedding"), link.to_host(labels, "labels"),
               None if cdiag is None else link.to_host(cdiag, "centred diagonals"))


def resident_of(estimator: Any) -> str | None:
    """The resident namespace a model was fitted in (``execution_`` "resident on NAME ..."), or None.

    Parameters
    ----------
    estimator : LSWMKC

    Returns
    -------
    str or None
        "cuda" only where CuPy imports here (else the host predicts).
    """
    words = str(getattr(estimator, "execution_", "")).split()
    if words[:2] != ["resident", "on"] or len(words) < 3:
        return None
    return None if words[2] == "cuda" and importlib.util.find_spec("cupy") is None else words[2]


def _where(estimator):
    """The client of the model's ``client`` parameter, else the active one, else None (this process), to enter."""
    where = Where.of(estimator.client)
    if where.client is None and not where.scheduler_file:
        return contextlib.nullcontext(active_client())
    return connect(where.client, scheduler_file=where.scheduler_file, security=where.security)


def _predict(estimator, X, diagonals, alpha_term, label_rule, resident, view_names=None):
    """(embedding, labels) of the new samples, block by block on the model's route."""
    batch, n_new = _checked_batch(estimator, X, diagonals, alpha_term, label_rule, view_names)
    keep = np.asarray(estimator.kernel_index_)
    state = PredictState.of(estimator, alpha_term, label_rule)
    blocks = _blocks(state, batch, n_new, keep)
    resident = resident_of(estimator) if resident is None else resident
    if resident is not None:
        results = _run_resident(resident, state, blocks)
    else:
        with _where(estimator) as client:
            results = ([predict_block(state, b[2], b[3]) for b in blocks] if client is None
                       else _run_on_workers(client, state, blocks))
    h, labels, cdiags = zip(*results)
    cdiag = None if cdiags[0] is None else np.concatenate(cdiags, axis=1)
    if cdiag is not None and not np.all(cdiag > 0):
        p, i = (int(a) for a in np.argwhere(~(cdiag > 0))[0])
        raise KernelInputError(f"new sample {i}: its centred diagonal in kernel {int(keep[p])} is "
                               f"{cdiag[p, i]:.3g}, not positive (it sits at the training mean in feature space, "
                               "or its diagonal k(x, x) is wrong): the row cannot be normalised")
    return np.concatenate(h), np.concatenate(labels).astype(np.int64)


def transform_samples(estimator: Any, X: Any, diagonals: Any = None, alpha_term: str = "zero",
                      resident: str | None = None, view_names: Any = None) -> np.ndarray:
    """The embedding of new samples (:meth:`lswmkc_dask.LSWMKC.transform`).

    Block by block (about :data:`BLOCK_BYTES` of kernel rows each): on the model's
    resident namespace (:func:`resident_of`), else on the Dask workers of its ``client``
    or the active client, else in this process.

    Parameters
    ----------
    estimator : LSWMKC
        Fitted.
    X : list of ndarray of shape (n_new, d_v), or ndarray of shape (m, n_new, n_train)
        Feature views (a model fitted on features) or cross-kernels (on precomputed kernels).
    diagonals : ndarray of shape (m, n_new), optional
        ``k_p(x, x)``; required with cross-kernels.
    alpha_term : {"zero", "kstar"}
        See :func:`lswmkc_dask.predict_math.affinity_rows`.
    resident : {"cuda", "numpy", "array-api-strict"}, optional
        Run every block in this namespace (:func:`lswmkc_dask.engine.device_fit.resident_namespace`)
        whatever the model's route.
    view_names : sequence of str, optional
        One name per feature view (``lswmkc predict`` gives the files' names as ``fit``
        names them); a name that is another fitted view's (``view_names_``) is refused.

    Returns
    -------
    ndarray of shape (n_new, n_clusters_)

    Raises
    ------
    sklearn.exceptions.NotFittedError
    ValueError
        Wrong number of views, features or kernels, features given to a model fitted
        on kernels (or the reverse), NaN/Inf, an empty batch, a model fitted on a store
        prepared by an earlier version; complex or text feature values.
    ViewMismatchError
        A view's name is another fitted view's, or its column names (a DataFrame's)
        are not the fitted view's in the fitted order (a ``ValueError``).
    KernelInputError
        A new sample whose centred diagonal is not positive.
    WorkersLostError
        On Dask workers: workers died more than :data:`MAX_RESENDS` times.

    Warns
    -----
    ViewOrderWarning
        The views' feature statistics look like the fitted views' (or columns') in another
        order (:func:`lswmkc_dask.predict_math.order_evidence`).
    """
    return _predict(estimator, X, diagonals, alpha_term, "vote", resident, view_names)[0]


def predict_labels(estimator: Any, X: Any, diagonals: Any = None, alpha_term: str = "zero",
                   label_rule: str = "vote", resident: str | None = None, view_names: Any = None) -> np.ndarray:
    """The cluster of each new sample (:meth:`lswmkc_dask.LSWMKC.predict`).

    Parameters
    ----------
    estimator, X, diagonals, alpha_term, resident, view_names
        As :func:`transform_samples`.
    label_rule : {"vote", "centroid"}
        "vote" (shipped): the label of largest affinity-weighted vote of ``labels_``;
        "centroid": the nearest centroid of ``cluster_centers_`` to the embedding
        (:mod:`lswmkc_dask.predict_math`).

    Returns
    -------
    ndarray of shape (n_new,), int64
        Labels in the numbering of ``labels_``.

    Raises
    ------
    sklearn.exceptions.NotFittedError, ValueError, ViewMismatchError, KernelInputError, WorkersLostError
        As :func:`transform_samples`.

    Warns
    -----
    ViewOrderWarning
        As :func:`transform_samples`.
    """
    return _predict(estimator, X, diagonals, alpha_term, label_rule, resident, view_names)[1]

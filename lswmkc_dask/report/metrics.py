"""Clustering metrics (ACC, NMI, Purity, ARI) and the two evaluation protocols.

The definitions are those of docs/algorithm.md section 4, the protocols (``"honest"``,
``"paper"``) those of its section 3. The paper protocol starts each run by plain k-means++
(one candidate per centre, as MATLAB's ``kmeans``): scikit-learn's greedy variant spreads
less and so gives a lower maximum. ``METRICS`` (the columns of sweeps, compares and
tables) holds the first four only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import linear_sum_assignment
from sklearn import config_context
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import mutual_info_score
from sklearn.metrics.cluster import contingency_matrix

from .._threads import limit_blas
from ..engine.postprocess import kmeans_best_of
from ..errors import Param, ParameterError
from ..io.labels import check_labels

METRICS = ("ACC", "NMI", "Purity", "ARI")
#: Normalisation of each NMI key of :func:`evaluate`, as scikit-learn's ``average_method``
#: names it (``normalized_mutual_info_score(y, p, average_method=...)`` gives the same value).
NMI_NORMALIZATION = {"NMI": "max", "NMI_arithmetic": "arithmetic"}
PROTOCOLS = ("honest", "paper")


def _check(labels_true, labels_pred):
    y = np.asarray(labels_true).ravel()
    p = np.asarray(labels_pred).ravel()
    if y.shape != p.shape:
        raise ValueError(f"labels_true has {y.shape[0]} samples but labels_pred has {p.shape[0]}")
    # A missing label (NaN, None, "") is refused, naming the samples, not counted as a class.
    return check_labels(y, y.shape[0], "labels_true"), p


def evaluate(labels_true: ArrayLike, labels_pred: ArrayLike) -> dict[str, float]:
    """ACC, NMI, Purity and ARI as the reference computes them (docs/algorithm.md section 4).

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n,)

    Returns
    -------
    dict
        ``{"ACC": float, "NMI": float, "Purity": float, "ARI": float, "NMI_arithmetic":
        float}``, all in [-0.5, 1] (ARI) or [0, 1]. ``NMI`` is normalised by the larger
        entropy, as the authors' code (scikit-learn's ``average_method="max"``);
        ``NMI_arithmetic`` by the mean of the two entropies, scikit-learn's default
        (:data:`NMI_NORMALIZATION`).

    Raises
    ------
    ValueError
        If the two label vectors differ in length, or a true label is missing (NaN,
        None, empty string; a :class:`KernelInputError`, naming the samples).

    Examples
    --------
    Clusters are matched to classes, so their numbering does not matter:

    >>> from lswmkc_dask import evaluate
    >>> scores = evaluate([0, 0, 1, 1, 2, 2], [1, 1, 0, 0, 2, 0])
    >>> {name: round(value, 4) for name, value in scores.items()}
    {'ACC': 0.8333, 'NMI': 0.7103, 'Purity': 0.8333, 'ARI': 0.4444, 'NMI_arithmetic': 0.7397}
    """
    y, p = _check(labels_true, labels_pred)
    return _scores(y, p)


def _comb2(x):
    x = np.asarray(x, dtype=np.float64)
    return x * (x - 1.0) / 2.0


def _scores(y, p):
    """The metrics from one contingency table, built once (scikit-learn's per-call label checks would cost
    the paper protocol milliseconds 50 times); NMI and ARI equal scikit-learn's to rounding (test_core).
    """
    c = contingency_matrix(y, p)
    n = float(y.size)
    rows, cols = linear_sum_assignment(c, maximize=True)
    acc = float(c[rows, cols].sum() / n)
    purity_ = float(c.max(axis=0).sum() / n)
    a, b = c.sum(axis=1), c.sum(axis=0)
    if c.shape[0] == c.shape[1] == 1 or c.shape[0] == c.shape[1] == n:
        nmi = nmi_arithmetic = 1.0  # scikit-learn's convention for identical trivial labelings
    else:
        mi = mutual_info_score(None, None, contingency=c)
        h_true = float(-np.sum((a / n) * np.log(a / n)))
        h_pred = float(-np.sum((b / n) * np.log(b / n)))
        # NMI_NORMALIZATION: max (the authors'), arithmetic (scikit-learn's default);
        # (1 + 2e-16 from rounding is 1)
        nmi, nmi_arithmetic = (min(float(mi / d), 1.0) if d > 0 and mi > 0 else 0.0
                               for d in (max(h_true, h_pred), (h_true + h_pred) / 2.0))
    index = _comb2(c).sum()
    sum_a, sum_b = _comb2(a).sum(), _comb2(b).sum()
    expected = sum_a * sum_b / _comb2(n)
    maximum = (sum_a + sum_b) / 2.0
    ari = 1.0 if maximum == expected else float((index - expected) / (maximum - expected))
    return {"ACC": acc, "NMI": nmi, "Purity": purity_, "ARI": ari, "NMI_arithmetic": nmi_arithmetic}


def evaluate_embedding(
    embedding: ArrayLike, labels_true: ArrayLike, n_clusters: int, protocol: str = "honest", n_init: int = 50,
    random_state: int | np.random.RandomState | None = None,
) -> dict[str, float]:
    """Cluster a spectral embedding with k-means and score it under a protocol.

    Parameters
    ----------
    embedding : ndarray of shape (n, k)
        Row-normalised top-k eigenvectors of the centred, normalised K*.
    labels_true : array_like of shape (n,)
    n_clusters : int
    protocol : {"honest", "paper"}
        See the module docstring.
    n_init : int
        Starts (honest) or runs (paper; the reference uses 50).
    random_state : int, numpy Generator or None

    Returns
    -------
    dict
        The four metrics and ``NMI_arithmetic`` (see :func:`evaluate`); under the paper
        protocol each the maximum over the runs.

    Raises
    ------
    ValueError
        Unknown protocol or labels of another length.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    y, _ = _check(labels_true, np.zeros(np.shape(embedding)[0]))
    # Inputs are checked once here: skip scikit-learn's per-call validation (half the time of the paper
    # protocol's 50 runs on YALE); single-threaded k-means, as labels_ (lswmkc_dask.engine.postprocess):
    # its OpenMP reduction order would make the runs depend on the thread count.
    with limit_blas(1), config_context(assume_finite=True, skip_parameter_validation=True):
        if protocol == "honest":
            km = KMeans(n_clusters, n_init=n_init, max_iter=250, random_state=random_state).fit(embedding)
            return _scores(y, km.labels_)
        rng = np.random.default_rng(random_state)
        best: dict[str, float] = {}
        for _ in range(n_init):
            seed = int(rng.integers(2**31 - 1))
            centres, _ = kmeans_plusplus(embedding, n_clusters, n_local_trials=1, random_state=seed)
            pred = KMeans(n_clusters, init=centres, n_init=1, max_iter=250).fit_predict(embedding)
            for k, v in _scores(y, pred).items():
                best[k] = max(best.get(k, -np.inf), v)
        return best


def protocol_metrics(
    labels_true: ArrayLike, labels: ArrayLike, embedding: ArrayLike, n_clusters: int, n_init: int,
    random_state: int | np.random.RandomState | None,
) -> dict[str, dict[str, float]]:
    """Both protocols' metrics of one run: its labels (honest) and its embedding (paper).

    Parameters
    ----------
    labels_true : array_like of shape (n,)
    labels : array_like of shape (n,)
        The run's labels (the k-means of lowest inertia over ``n_init`` starts).
    embedding : ndarray of shape (n, k)
        The spectral embedding they were clustered from.
    n_clusters, n_init, random_state
        As :func:`evaluate_embedding` (the paper protocol's single-start runs).

    Returns
    -------
    dict
        ``{"honest": evaluate(labels_true, labels), "paper": evaluate_embedding(...)}``.
    """
    return {"honest": evaluate(labels_true, labels),
            "paper": evaluate_embedding(embedding, labels_true, n_clusters, "paper", n_init=n_init,
                                        random_state=random_state)}


def repeat_seeds(random_state: Any, repeats: int) -> list[Any]:
    """The k-means seeds of ``repeats`` repetitions of the final clustering.

    The first is ``random_state`` itself (the report's own ``metrics``); repetition
    ``r >= 1`` gets ``SeedSequence([random_state, r]).generate_state(1)[0]``, a 32-bit
    integer that does not overlap the neighbouring seeds a user might try by hand.

    Parameters
    ----------
    random_state : int
        The run's seed (``random_state`` of the fit, sweep or compare).
    repeats : int
        Number of repetitions, at least 1.

    Returns
    -------
    list of int
        ``repeats`` seeds, the first ``random_state``.

    Raises
    ------
    ValueError
        ``repeats`` below 1 or not an integer, or ``repeats > 1`` with a
        ``random_state`` that is not an integer (None would make the repetitions
        irreproducible).
    """
    if isinstance(repeats, (bool, np.bool_)) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ParameterError("{} must be an integer >= 1, got {!r}", Param("repeats"), repeats)
    if repeats > 1 and (isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer))):
        raise ParameterError("{} > 1 needs an integer {} (the seeds are derived from it), got {!r}", Param("repeats"),
                             Param("random_state"), random_state)
    if repeats == 1:
        return [random_state]
    base = int(random_state)
    return [base] + [int(np.random.SeedSequence([abs(base), r]).generate_state(1)[0]) for r in range(1, repeats)]


def repeat_metrics(
    embedding: ArrayLike, labels_true: ArrayLike, n_clusters: int, n_init: int, seeds: Sequence[int | None],
    first: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Both protocols' metrics of the final k-means step repeated with several seeds.

    Each repetition clusters the run's spectral embedding again with its seed
    (:func:`protocol_metrics`); the kernel and its embedding are not recomputed: only
    the clustering's randomness is measured.

    Parameters
    ----------
    embedding : ndarray of shape (n, k)
        The run's spectral embedding.
    labels_true : array_like of shape (n,)
    n_clusters : int
    n_init : int
    seeds : list of int
        From :func:`repeat_seeds`.
    first : dict, optional
        ``{"honest": {...}, "paper": {...}}`` already computed with ``seeds[0]`` (the
        report's metrics): reused instead of clustering again.

    Returns
    -------
    dict
        ``{"n": len(seeds), "seeds": seeds, "values": {protocol: {metric: [one per
        seed]}}, "mean": {protocol: {metric: float}}, "std": {protocol: {metric:
        float}}}``; ``std`` is the sample standard deviation (``ddof=1``, MATLAB's
        ``std``), 0 for one seed.
    """
    values: dict[str, dict[str, list[float]]] = {p: {m: [] for m in METRICS} for p in PROTOCOLS}
    for i, seed in enumerate(seeds):
        if i == 0 and first is not None:
            scores = first
        else:
            labels, _ = kmeans_best_of(embedding, n_clusters, n_init, seed)
            scores = protocol_metrics(labels_true, labels, embedding, n_clusters, n_init, seed)
        for p in PROTOCOLS:
            for m in METRICS:
                values[p][m].append(float(scores[p][m]))
    ddof = 1 if len(seeds) > 1 else 0
    return {
        "n": len(seeds),
        "seeds": [None if s is None else int(s) for s in seeds],
        "values": values,
        "mean": {p: {m: float(np.mean(v)) for m, v in values[p].items()} for p in PROTOCOLS},
        "std": {p: {m: float(np.std(v, ddof=ddof)) for m, v in values[p].items()} for p in PROTOCOLS},
    }


def repeat_summary_columns(repeats: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The summary columns of a run's ``repeats`` record, in their order.

    Parameters
    ----------
    repeats : dict or None
        ``report["repeats"]`` (:func:`repeat_metrics`).

    Returns
    -------
    dict
        ``{"ACC_honest_mean": ..., "ACC_honest_std": ..., ..., "ARI_paper_std": ...}``
        (protocol-major, then metric); every value None without a record.
    """
    return {f"{m}_{p}_{stat}": None if not repeats else repeats.get(stat, {}).get(p, {}).get(m)
            for p in PROTOCOLS for m in METRICS for stat in ("mean", "std")}

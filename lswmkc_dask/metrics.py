"""Clustering metrics and the two evaluation protocols (docs/algorithm.md sections 3-4).

* ACC: best one-to-one map of clusters to classes (Hungarian algorithm,
  :func:`scipy.optimize.linear_sum_assignment`), then accuracy.
* NMI: mutual information / max(H(Y), H(pred)) (scikit-learn, ``average_method="max"``).
* Purity: sum over clusters of the largest class count in it, / n.
* ARI: adjusted Rand index (Hubert & Arabie 1985; scikit-learn).

Protocols on a spectral embedding H of K*:

* ``"honest"``: k-means with ``n_init`` random starts, keep the run of lowest
  inertia, report its metrics (what ``labels_`` is).
* ``"paper"``: the reference code's protocol: 50 k-means runs with one start each
  (at most 250 iterations), and each metric is the MAXIMUM over the runs, taken
  separately. Optimistic; given to compare with the paper's tables. Each start is
  plain k-means++ (one candidate per centre, as MATLAB's and Octave's ``kmeans``
  'plus' start), not scikit-learn's greedy variant: on YALE (alpha = 8) the
  greedy start gives a narrower spread and so a lower maximum (0.65 vs 0.68 median
  over seeds).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn import config_context
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.cluster import contingency_matrix

__all__ = ["METRICS", "accuracy", "purity", "evaluate", "evaluate_embedding", "PROTOCOLS"]

METRICS = ("ACC", "NMI", "Purity", "ARI")
PROTOCOLS = ("honest", "paper")


def _check(labels_true, labels_pred):
    y = np.asarray(labels_true).ravel()
    p = np.asarray(labels_pred).ravel()
    if y.shape != p.shape:
        raise ValueError(f"labels_true has {y.shape[0]} samples but labels_pred has {p.shape[0]}")
    return y, p


def accuracy(labels_true, labels_pred):
    """Clustering accuracy under the best one-to-one map of clusters to classes.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n,)

    Returns
    -------
    float in [0, 1]

    Raises
    ------
    ValueError
        If the two label vectors differ in length.
    """
    y, p = _check(labels_true, labels_pred)
    c = contingency_matrix(y, p)
    rows, cols = linear_sum_assignment(c, maximize=True)
    return float(c[rows, cols].sum() / y.size)


def purity(labels_true, labels_pred):
    """Purity: sum over clusters of the largest class count, divided by n.

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n,)

    Returns
    -------
    float in [0, 1]
    """
    y, p = _check(labels_true, labels_pred)
    return float(contingency_matrix(y, p).max(axis=0).sum() / y.size)


def evaluate(labels_true, labels_pred):
    """ACC, NMI, Purity and ARI as the reference computes them (docs/algorithm.md section 4).

    Parameters
    ----------
    labels_true, labels_pred : array_like of shape (n,)

    Returns
    -------
    dict
        ``{"ACC": float, "NMI": float, "Purity": float, "ARI": float}``.

    Raises
    ------
    ValueError
        If the two label vectors differ in length.
    """
    y, p = _check(labels_true, labels_pred)
    return {
        "ACC": accuracy(y, p),
        "NMI": float(normalized_mutual_info_score(y, p, average_method="max")),
        "Purity": purity(y, p),
        "ARI": float(adjusted_rand_score(y, p)),
    }


def evaluate_embedding(embedding, labels_true, n_clusters, protocol="honest", n_init=50, random_state=None):
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
        The four metrics.

    Raises
    ------
    ValueError
        Unknown protocol or labels of another length.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    y, _ = _check(labels_true, np.zeros(embedding.shape[0]))
    # Inputs are checked once here: skip scikit-learn's per-call validation (it was
    # half the time of the 50 runs of the paper protocol on YALE).
    with config_context(assume_finite=True, skip_parameter_validation=True):
        return _evaluate_embedding(embedding, y, n_clusters, protocol, n_init, random_state)


def _evaluate_embedding(embedding, y, n_clusters, protocol, n_init, random_state):
    if protocol == "honest":
        km = KMeans(n_clusters, n_init=n_init, max_iter=250, random_state=random_state).fit(embedding)
        return evaluate(y, km.labels_)
    rng = np.random.default_rng(random_state)
    best = dict.fromkeys(METRICS, -np.inf)
    for _ in range(n_init):
        seed = int(rng.integers(2**31 - 1))
        centres, _ = kmeans_plusplus(embedding, n_clusters, n_local_trials=1, random_state=seed)
        pred = KMeans(n_clusters, init=centres, n_init=1, max_iter=250).fit_predict(embedding)
        for k, v in evaluate(y, pred).items():
            best[k] = max(best[k], v)
    return best

"""The baselines (Avg-KKM, the KNN mechanism, MKKM) on the shipped YALE and Handwritten data.

Real data, no mocks: Avg-KKM against a brute-force NumPy/scikit-learn reference, the
KNN mask's row sums, MKKM's objective, the same results in this process and on a Dask
LocalCluster, and MKKM against the peer implementation ``mkkm-mr`` where installed.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.cluster import contingency_matrix

from lswmkc_dask import prepare
from lswmkc_dask.grid.baselines import (
    DEFAULT_TAUS,
    avg_kkm,
    knn_kkm,
    knn_mask,
    localise,
    mkkm,
    neighbour_count,
    neighbour_ranks,
)
from lswmkc_dask.datasets import load_dataset

pytestmark = pytest.mark.timeout(600)


class _Stores(dict):
    """YALE's store, and Handwritten's prepared on first use (only the integration tier uses it)."""

    def __missing__(self, name):
        assert name == "handwritten", name
        source, labels = load_dataset("handwritten")
        self[name] = prepare(source, None, labels=labels)
        return self[name]


@pytest.fixture(scope="module")
def stores(yale_store):
    """The preprocessed stores of the two shipped data sets (Handwritten: Gaussian kernels of its 6 views)."""
    return _Stores(yale=yale_store)


def _dense(store):
    return store.read_rows(0, store.n_samples)


# ------------------------------------------------------------------ brute-force reference
def _bf_embedding(kernel, k):
    """Centre (C K C), normalise, NumPy's full eigh, top k, rows to unit length."""
    n = kernel.shape[0]
    c = np.eye(n) - np.ones((n, n)) / n
    kc = c @ kernel @ c
    kc = (kc + kc.T) / 2
    d = np.sqrt(np.diag(kc))
    kn = kc / np.outer(d, d)
    _, vecs = np.linalg.eigh(kn)
    h = vecs[:, -k:]
    return h / np.linalg.norm(h, axis=1, keepdims=True)


def _bf_metrics(y, p):
    c = contingency_matrix(y, p)
    r, cc = linear_sum_assignment(-c)
    return {
        "ACC": c[r, cc].sum() / len(y),
        "NMI": normalized_mutual_info_score(y, p, average_method="max"),
        "Purity": c.max(axis=0).sum() / len(y),
        "ARI": adjusted_rand_score(y, p),
    }


def _bf_paper(h, y, k, runs=50, seed=0):
    """The paper protocol written out: 50 single-start k-means (plain k-means++), max of each metric."""
    rng = np.random.default_rng(seed)
    best = dict.fromkeys(("ACC", "NMI", "Purity", "ARI"), -1.0)
    for _ in range(runs):
        centres, _ = kmeans_plusplus(h, k, n_local_trials=1, random_state=int(rng.integers(2**31 - 1)))
        pred = KMeans(k, init=centres, n_init=1, max_iter=250).fit_predict(h)
        for key, v in _bf_metrics(y, pred).items():
            best[key] = max(best[key], v)
    return best


@pytest.mark.parametrize("name", ["yale", "handwritten"])
def test_avg_kkm_equals_brute_force(stores, name):
    store = stores[name]
    y = store.labels
    k = int(np.unique(y).size)
    result = avg_kkm(store)

    kavg = _dense(store).mean(axis=0)
    h = _bf_embedding(kavg, k)
    km = KMeans(k, n_init=50, max_iter=250, random_state=0).fit(h)

    # the same embedding (up to each eigenvector's sign; ours is rounded to 2^-26)
    signs = np.sign(np.sum(h * result.embedding, axis=0))
    np.testing.assert_allclose(result.embedding, h * signs, atol=1e-7)
    # the same partition (clusters numbered differently) and the same metrics
    assert adjusted_rand_score(km.labels_, result.labels) == 1.0
    honest = _bf_metrics(y, km.labels_)
    for key, v in honest.items():
        assert result.metrics["honest"][key] == pytest.approx(v, abs=1e-12), key
    paper = _bf_paper(h, y, k)
    for key, v in paper.items():
        assert result.metrics["paper"][key] == pytest.approx(v, abs=1e-12), key
    np.testing.assert_allclose(result.kernel_weights, 1.0 / store.n_kernels)
    print(f"{name}: Avg-KKM honest {result.metrics['honest']}, paper {result.metrics['paper']}")


# ---------------------------------------------------------------------------- the KNN mask
def test_neighbour_count_is_matlab_round():
    assert neighbour_count(0.1, 165) == 17  # 16.5 rounds away from zero (Python's round gives 16)
    assert neighbour_count(0.5, 165) == 83  # 82.5
    assert neighbour_count(0.3, 2000) == 600
    assert neighbour_count(1.0, 165) == 165  # tau = 1: fully connected
    for bad in (0, 1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="tau"):
            neighbour_count(bad, 10)


@pytest.mark.parametrize("name", ["yale", "handwritten"])
def test_knn_mask_row_sums(stores, name):
    kavg = _dense(stores[name]).mean(axis=0)
    n = kavg.shape[0]
    ranks = neighbour_ranks(kavg)
    for tau in DEFAULT_TAUS:
        expected = int((Decimal(repr(tau)) * n).quantize(Decimal(1), rounding=ROUND_HALF_UP))  # round(tau n)
        mask = knn_mask(kavg, tau, ranks)
        np.testing.assert_array_equal(mask.sum(axis=1), expected)
        np.testing.assert_array_equal(mask, knn_mask(kavg, tau))  # ranks computed here or shared
        assert mask.diagonal().all()  # the sample itself is its nearest neighbour
        # the kept entries of each row are its largest
        kept_min = np.where(mask, kavg, np.inf).min(axis=1)
        dropped_max = np.where(mask, -np.inf, kavg).max(axis=1)
        assert np.all(kept_min >= dropped_max)
        local = localise(kavg, mask)
        np.testing.assert_array_equal(local, local.T)
        np.testing.assert_allclose(local, (mask.astype(float) + mask.T) / 2 * kavg, rtol=0, atol=1e-15)


def test_knn_runs_report_their_masks(stores):
    store = stores["yale"]
    results = knn_kkm(store, taus=(0.1, 0.5, 0.9))
    for r, tau in zip(results, (0.1, 0.5, 0.9)):
        count = neighbour_count(tau, store.n_samples)
        assert r.param == {"tau": tau} and r.name == f"knn_tau={tau:g}"
        assert r.extra["neighbours_per_row"] == count
        assert r.extra["mask_row_sums"] == {"min": count, "max": count}
        assert 0 < r.metrics["honest"]["ACC"] <= 1


# -------------------------------------------------------------------------------- MKKM
@pytest.mark.parametrize("name", ["yale", "handwritten"])
def test_mkkm_objective_non_increasing(stores, name):
    store = stores[name]
    r = mkkm(store)
    obj = np.asarray(r.objective)
    print(f"{name}: MKKM {r.n_iter} iterations, objective {obj}, weights {r.kernel_weights}, ACC {r.metrics}")
    assert r.n_iter == obj.size >= 2
    assert np.all(np.diff(obj) <= 1e-12 * np.abs(obj[1:])), np.diff(obj)
    # the stop rule: relative change below 1e-6, or the cap
    assert r.converged == (abs(obj[-2] - obj[-1]) <= 1e-6 * abs(obj[-1]))
    assert r.converged or r.n_iter == 100
    w = r.kernel_weights
    assert np.all(w > 0) and w.sum() == pytest.approx(1.0)
    # J_1 from dense NumPy: H = top-k eigenvectors of sum_p (1/m)^2 K_p, J = sum_p w_p^2 Tr(K_p (I - H H^T))
    kernels = _dense(store)
    m, k = kernels.shape[0], int(np.unique(store.labels).size)
    kw = kernels.sum(axis=0) / m**2
    h = np.linalg.eigh(kw)[1][:, -k:]
    q = [np.trace(kp) - np.trace(h.T @ kp @ h) for kp in kernels]
    assert obj[0] == pytest.approx(np.sum(np.full(m, 1 / m) ** 2 * q), rel=1e-10)
    # the first update is the closed form w_p ~ 1/Q_p
    np.testing.assert_allclose(r.extra["weights_history"][1], (1 / np.array(q)) / np.sum(1 / np.array(q)), rtol=1e-8)


# ---------------------------------------------------------------------- same on Dask
def test_same_results_on_a_dask_client(stores, client):
    store = stores["yale"]
    local = [avg_kkm(store), mkkm(store), *knn_kkm(store, taus=(0.2, 0.7))]
    remote = [avg_kkm(store, client=client), mkkm(store, client=client),
              *knn_kkm(store, taus=(0.2, 0.7), client=client)]
    for a, b in zip(local, remote):
        assert a.execution == "in-process" and b.execution.startswith("Dask: 2 workers")
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.metrics == b.metrics
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
        np.testing.assert_allclose(a.kernel_weights, b.kernel_weights, rtol=1e-12)


# ------------------------------------------------------------- peer implementation: mkkm-mr
def test_mkkm_against_mkkm_mr(stores):
    """Cross-check with ``mkkm-mr`` (PyPI; an unofficial Python port of MKKM-MR, Liu et al. AAAI 2016).

    mkkm-mr 0.2.5 pins numpy<2: a plain ``pip install mkkm-mr`` downgrades NumPy and breaks
    zarr 3, which this package needs. It runs with NumPy 2 when installed as
    ``pip install --no-deps mkkm-mr cvxopt``; without it this test is skipped. It is not a
    test dependency of the project for that reason.

    With ``lambda_ = 0`` MKKM-MR is MKKM. Two findings:

    * Huang et al.'s MKKM assembled from mkkm-mr's own building blocks (its kernel
      k-means step ``kernel_kmeans_iter``, its QP weight update ``update_kernel_weights``
      and its objective ``calc_objective``) on ``sum_p w_p^2 K_p`` gives our objective
      history to 1e-10 and our weights to 1e-6 (its QP solver's tolerance).
    * ``mkkm_mr.mkkm_mr`` as shipped combines the kernels as ``sum_p w_p K_p`` (weights
      not squared; the MATLAB original squares them), while its objective squares
      them: its first weight update equals ours (the first combination is uniform
      either way), later iterations drift apart (YALE: weights differ by about 5e-3,
      honest ACC 0.552 against our 0.588).
    """
    mr = pytest.importorskip("mkkm_mr", reason="pip install --no-deps mkkm-mr cvxopt (see the docstring)")
    cvxopt = pytest.importorskip("cvxopt")
    from mkkm_mr import lib

    cvxopt.solvers.options["show_progress"] = False
    store = stores["yale"]
    kernels = _dense(store)
    m, k = kernels.shape[0], int(np.unique(store.labels).size)
    ours = mkkm(store)
    big_m = lib.calM(kernels)

    w = np.full(m, 1.0 / m)
    objective, weights = [], []
    for t in range(100):
        h = lib.kernel_kmeans_iter(lib.combine_kernels(kernels, w**2), k)
        objective.append(float(np.ravel(lib.calc_objective(h, kernels, big_m, w, 0.0))[0]))
        weights.append(w)
        if t and abs(objective[-2] - objective[-1]) < 1e-6 * abs(objective[-1]):
            break
        w = lib.update_kernel_weights(h, kernels, big_m, 0.0).ravel()
    assert len(objective) == ours.n_iter
    np.testing.assert_allclose(objective, ours.objective, rtol=1e-10)
    np.testing.assert_allclose(weights[-1], ours.kernel_weights, atol=1e-6)

    # mkkm_mr() as shipped: first update as ours, then its unsquared combination drifts
    h0 = lib.kernel_kmeans_iter(lib.combine_kernels(kernels, np.full(m, 1.0 / m)), k)
    first = lib.update_kernel_weights(h0, kernels, big_m, 0.0).ravel()
    np.testing.assert_allclose(first, ours.extra["weights_history"][1], atol=1e-6)
    _, gamma, _ = mr.mkkm_mr(kernels, big_m, k, 0.0)
    drift = float(np.max(np.abs(np.ravel(gamma) - ours.kernel_weights)))
    print(f"mkkm_mr as shipped: weights {np.ravel(gamma)}, ours {ours.kernel_weights}, max difference {drift:.2e}")
    assert math.isfinite(drift)

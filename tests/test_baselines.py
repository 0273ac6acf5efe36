"""The baselines (Avg-KKM, the KNN mechanism) and the compared methods' grid runs on the shipped data.

Real data, no mocks: Avg-KKM against a brute-force NumPy/scikit-learn reference, the
KNN mask's row sums, and the same results in this process and on a Dask LocalCluster
(the baselines, and the compared methods run as one task per grid point).
"""

from __future__ import annotations

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
    neighbour_count,
    neighbour_ranks,
)
from lswmkc_dask.datasets import load_dataset
from lswmkc_dask.grid.competitors import competitor_grid, run_competitors
from lswmkc_dask.methods import get_method

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


# ------------------------------------------------------------------ compared methods
def test_competitor_runs_are_the_estimators(stores):
    """A grid run of a compared method is its estimator on the store's kernels, ended as LSWMKC ends."""
    store = stores["yale"]
    kernels = _dense(store)
    k = int(np.unique(store.labels).size)
    params = {"n_clusters": k, "n_init": 10, "random_state": 0}
    out = []
    todo = [("mkkm", {}), ("mkkm-mr", {"lambda_": 0.5})]
    run_competitors(store, None, todo, params, store.labels, out.append)
    for (name, param), r in zip(todo, out):
        model = get_method(name)(n_clusters=k, preprocess=False, n_init=10, random_state=0, **param).fit(kernels)
        np.testing.assert_array_equal(r.labels, model.labels_)
        np.testing.assert_array_equal(r.kernel_weights, model.kernel_weights_)
        assert r.objective == model.objective_ and r.n_iter == model.n_iter_
        assert r.metrics["honest"]["ACC"] == pytest.approx(_bf_metrics(store.labels, model.labels_)["ACC"])
        assert r.kernel_weights.sum() == pytest.approx(1.0) and np.all(r.kernel_weights >= 0)


def test_competitor_grid():
    grid = competitor_grid("onkc", {"rho": [1, 2]})
    assert len(grid) == 2 * len(get_method("onkc").param_grid["lambda_"])
    assert grid[0] == {"rho": 1, "lambda_": get_method("onkc").param_grid["lambda_"][0]}
    assert competitor_grid("mkkm") == [{}]
    with pytest.raises(ValueError, match="has no hyper-parameter 'rh'"):
        competitor_grid("onkc", {"rh": [1]})


# ---------------------------------------------------------------------- same on Dask
def test_same_results_on_a_dask_client(stores, client):
    store = stores["yale"]
    params = {"n_clusters": int(np.unique(store.labels).size), "n_init": 10, "random_state": 0}
    todo = [("mkkm", {}), ("lkam", {"tau": 0.3, "lambda_": 1.0}), ("smkkm", {})]
    local_runs, remote_runs = [], []
    run_competitors(store, None, todo, params, store.labels, local_runs.append)
    run_competitors(store, client, todo, params, store.labels, remote_runs.append)
    remote_runs.sort(key=lambda r: todo.index((r.method, r.param)))  # in the order they finished
    local = [avg_kkm(store), *knn_kkm(store, taus=(0.2, 0.7)), *local_runs]
    remote = [avg_kkm(store, client=client), *knn_kkm(store, taus=(0.2, 0.7), client=client), *remote_runs]
    for a, b in zip(local, remote):
        assert a.execution == "in-process" and b.execution.startswith("Dask: 2 workers")
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.metrics == b.metrics
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
        np.testing.assert_allclose(a.kernel_weights, b.kernel_weights, rtol=1e-12)

"""SwMC, SPMKC and CAGL (lswmkc_dask.methods._swmc, .spmkc, .cagl): the graph-based compared methods.

SPMKC ships only an encrypted P-file and CAGL has no public code, so each block step is checked
against a brute-force solver (scipy.optimize or an enumeration), then the invariants of the fits,
perfect labels on separated synthetic kernels, an accuracy floor on YALE and the estimator API.
SwMC is also checked against its authors' code in tests/test_methods_swmc_reference.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.base import clone

from lswmkc_dask import preprocess_kernels
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._cagl import CAGL, row_simplex_qp, self_expressive_graph, self_expressive_objective, \
    top_k_support
from lswmkc_dask.methods._spmkc import SPMKC, consensus_kernel, spectral_affinity_embedding
from lswmkc_dask.methods._swmc import SwMC, adaptive_neighbour_graph, graph_components, kernel_distances, \
    laplacian, project_rows_simplex, self_weights
from lswmkc_dask.report.metrics import evaluate


def _simplex_min(fun, n, support=None, x0=None):
    """scipy's SLSQP minimum of ``fun`` over the simplex (zero off ``support``), tightly converged."""
    bounds = [(0.0, 1.0 if support is None or support[j] else 0.0) for j in range(n)]
    x0 = np.full(n, 1.0 / n) if x0 is None else x0
    if support is not None:
        x0 = np.where(support, 1.0 / support.sum(), 0.0)
    res = minimize(fun, x0, method="SLSQP", bounds=bounds,
                   constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0}],
                   options={"ftol": 1e-15, "maxiter": 1000})
    return res.x


def _blobs(seed=0, n_per=20, views=3):
    """Three well-separated clusters seen in ``views`` RBF kernels (n = 3 * n_per)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n_per)
    kernels = []
    for _ in range(views):
        centres = rng.normal(size=(3, 5)) * 6.0
        x = centres[y] + rng.normal(size=(y.size, 5)) * 0.5
        sq = ((x[:, None] - x[None]) ** 2).sum(-1)
        kernels.append(np.exp(-sq / np.median(sq)))
    return np.stack(kernels), y


@pytest.fixture(scope="module")
def blobs():
    return _blobs()


# --- shared graph steps ---------------------------------------------------------------------------


def test_project_rows_simplex_is_the_euclidean_projection():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(4, 7))
    support = rng.random((4, 7)) < 0.6
    support[:, 0] = True
    p = project_rows_simplex(v, support)
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-14) and (p >= 0).all() and (p[~support] == 0).all()
    for i in range(4):
        ref = _simplex_min(lambda x, i=i: 0.5 * np.sum((x - v[i]) ** 2), 7, support[i])
        assert np.abs(p[i] - ref).max() < 1e-7
    with pytest.raises(ValueError, match="support"):
        project_rows_simplex(v, np.zeros_like(support))


def test_adaptive_neighbour_graph(blobs):
    kernels, _ = blobs
    a = adaptive_neighbour_graph(kernels[0], 5)
    assert np.allclose(a.sum(axis=1), 1.0) and (a >= 0).all() and (np.diag(a) == 0).all()
    assert ((a > 0).sum(axis=1) <= 5).all()
    d = kernel_distances(kernels[0])
    np.fill_diagonal(d, np.inf)
    nearest = np.argsort(d, axis=1)[:, :4]
    assert all((a[i, nearest[i]] > 0).all() for i in range(a.shape[0]))
    # the closed form minimises sum_j d_ij s_ij + gamma_i ||s_i||^2 with gamma_i = (k d_i,k+1 - sum d)/2
    i, k = 3, 5
    di = np.sort(d[i])[: k + 1]
    gamma = (k * di[k] - di[:k].sum()) / 2.0
    dd = np.where(np.isfinite(d[i]), d[i], 0.0)
    ref = _simplex_min(lambda s: dd @ s + gamma * s @ s, a.shape[0], np.isfinite(d[i]))
    assert np.abs(ref - a[i]).max() < 1e-6
    with pytest.raises(ValueError, match="n_neighbors"):
        adaptive_neighbour_graph(kernels[0], 0)


def test_swmc_row_step_solves_its_weighted_problem():
    """s_i = proj((sum_v alpha_v a_v - lam/2 d) / sum alpha) minimises sum_v alpha_v ||s - a_v||^2 + lam d^T s."""
    rng = np.random.default_rng(2)
    a = rng.random((3, 8))
    alpha, lam, d = np.array([0.2, 0.5, 0.9]), 0.7, rng.random(8)
    support = (alpha @ a) > 0.4
    s = project_rows_simplex(((alpha @ a - 0.5 * lam * d) / alpha.sum())[None], support[None])[0]
    ref = _simplex_min(lambda x: sum(al * np.sum((x - av) ** 2) for al, av in zip(alpha, a)) + lam * d @ x, 8,
                       support)
    assert np.abs(s - ref).max() < 1e-7


def test_graph_components_and_laplacian():
    s = np.zeros((5, 5))
    s[0, 1] = s[2, 3] = s[3, 4] = 1.0
    count, labels = graph_components(s)
    assert count == 2 and labels.tolist() == [0, 0, 1, 1, 1]
    lap = laplacian(s + np.eye(5))
    assert np.allclose(lap.sum(axis=1), 0.0) and np.allclose(lap, lap.T)


def test_row_simplex_qp_matches_scipy():
    rng = np.random.default_rng(3)
    g = rng.normal(size=(8, 8))
    a = g @ g.T / 8 + 0.1 * np.eye(8)
    b = rng.normal(size=(3, 8))
    support = ~np.eye(3, 8, dtype=bool)
    z = row_simplex_qp(a, b, support)
    for i in range(3):
        ref = _simplex_min(lambda x, i=i: x @ a @ x - 2 * b[i] @ x, 8, support[i])
        assert np.abs(z[i] - ref).max() < 1e-6


def test_self_expressive_graph_meets_the_kkt_conditions(blobs):
    """Exact to ~1e-9: on each row the gradient is equal on the support and not smaller off it."""
    kernel = preprocess_kernels(blobs[0])[0]
    alpha, beta = 0.1, 1.0
    z = self_expressive_graph(kernel, alpha, beta)
    assert np.allclose(z.sum(axis=1), 1.0, atol=1e-12) and (z >= 0).all() and (np.diag(z) == 0).all()
    grad = 2 * z @ (kernel + beta * np.eye(len(z))) - 2 * kernel + alpha * kernel_distances(kernel)
    for i in range(len(z)):
        on, off = z[i] > 1e-12, (z[i] <= 1e-12) & (np.arange(len(z)) != i)
        mu = grad[i, on].mean()
        assert np.abs(grad[i, on] - mu).max() < 1e-8 and (grad[i, off] >= mu - 1e-8).all()
    # and the objective is the one that rows minimise
    noise = project_rows_simplex(z + 0.01 * np.random.default_rng(0).random(z.shape), ~np.eye(len(z), dtype=bool))
    assert self_expressive_objective(kernel, z, alpha, beta) < self_expressive_objective(kernel, noise, alpha, beta)


def test_top_k_projection_is_the_best_k_sparse_row():
    rng = np.random.default_rng(4)
    v = rng.normal(size=(6, 6))
    k = 2
    s = project_rows_simplex(v, top_k_support(v, k))
    for i in range(6):
        best = np.inf
        others = [j for j in range(6) if j != i]
        for sub in itertools.combinations(others, k):
            mask = np.zeros(6, bool)
            mask[list(sub)] = True
            p = project_rows_simplex(v[i][None], mask[None])[0]
            best = min(best, np.sum((p - v[i]) ** 2))
        assert np.isclose(np.sum((s[i] - v[i]) ** 2), best, rtol=0, atol=1e-12)
        assert (s[i] > 0).sum() <= k and s[i, i] == 0


def test_consensus_kernel_is_the_exact_k_step():
    """tr(K C) + gamma sum_p w_p ||K - K_p||^2 = gamma sum(w) ||K - T||^2 + const for every K, and K = T_+."""
    rng = np.random.default_rng(5)
    n, m = 6, 3
    kernels = np.stack([(lambda g: g @ g.T)(rng.normal(size=(n, n))) for _ in range(m)])
    z = project_rows_simplex(rng.random((n, n)), ~np.eye(n, dtype=bool))
    w, alpha, gamma = np.array([0.3, 1.0, 0.6]), 0.4, 0.05
    k = consensus_kernel(kernels, w, z, alpha, gamma)
    eig = np.linalg.eigvalsh(k)
    assert eig.min() > -1e-10

    def obj(kk):
        return (self_expressive_objective(kk, z, alpha, 0.0) - self_expressive_objective(kk, np.zeros_like(z), 0, 0)
                + np.trace(kk) + gamma * sum(wp * np.sum((kk - kp) ** 2) for wp, kp in zip(w, kernels)))

    # K beats PSD perturbations of itself, and a random PSD matrix
    for _ in range(5):
        g = rng.normal(size=(n, n))
        cand = k + 1e-3 * g @ g.T
        assert obj(k) <= obj(cand) + 1e-12
    vec = np.linalg.eigh(k)[1]
    for j in range(n):  # moving along any eigenvector direction (kept PSD) does not decrease the objective
        for step in (1e-4, -1e-4):
            cand = k + step * np.outer(vec[:, j], vec[:, j])
            if np.linalg.eigvalsh(cand).min() >= -1e-12:
                assert obj(k) <= obj(cand) + 1e-12


def test_spectral_affinity_embedding_is_orthonormal(blobs):
    z = self_expressive_graph(preprocess_kernels(blobs[0])[0], 0.1, 1.0)
    h = spectral_affinity_embedding(z, 3)
    assert h.shape == (60, 3) and np.allclose(h.T @ h, np.eye(3), atol=1e-10)


# --- the three estimators ----------------------------------------------------------------------------

FAST = {"swmc": {"n_neighbors": 10}, "cagl": {"alpha": 0.1, "beta": 10.0}, "spmkc": {"alpha": 0.1, "beta": 10.0,
                                                                                     "gamma": 1.0}}


@pytest.mark.parametrize("name", ["swmc", "spmkc", "cagl"])
def test_perfect_on_separated_blobs(name, blobs):
    kernels, y = blobs
    est = get_method(name)(3, random_state=0, **FAST[name])
    labels = est.fit_predict(kernels)
    assert labels.shape == (60,) and len(np.unique(labels)) == 3
    assert evaluate(y, labels)["ARI"] == 1.0
    assert est.n_iter_ == len(est.objective_) and est.kernel_weights_.shape == (3,)
    assert (est.kernel_weights_ > 0).all()


def test_swmc_fit_invariants(blobs):
    kernels, _ = blobs
    est = SwMC(3, n_neighbors=10, init=[1, 1, 1]).fit(kernels)
    s = est.extra_["graph"]
    assert np.allclose(s.sum(axis=1), 1.0) and (s >= 0).all() and (np.diag(s) == 0).all()
    assert est.extra_["n_components"] == 3 and est.converged_
    graphs = [adaptive_neighbour_graph(k, 10) for k in preprocess_kernels(kernels)]
    dist = np.array([np.linalg.norm(s - a) for a in graphs])
    assert np.allclose(est.kernel_weights_, 0.5 / dist, rtol=1e-12)
    assert np.isclose(est.objective_[-1], dist.sum(), rtol=1e-12)
    assert abs(est.objective_[-1] - est.objective_[-2]) < 1e-8
    assert np.allclose(est.extra_["init"], 1 / 3)
    with pytest.raises(ValueError, match="init"):
        SwMC(3, init=[1, -1, 1]).fit(kernels)


def test_swmc_random_start_follows_random_state(blobs):
    kernels, _ = blobs
    a = SwMC(3, random_state=7).fit(kernels).extra_["init"]
    b = SwMC(3, random_state=7).fit(kernels).extra_["init"]
    c = SwMC(3, random_state=8).fit(kernels).extra_["init"]
    assert np.array_equal(a, b) and not np.array_equal(a, c) and np.isclose(a.sum(), 1.0)


def test_cagl_fit_invariants(blobs):
    kernels, _ = blobs
    est = CAGL(3, alpha=0.1, beta=10.0, n_neighbors=10).fit(kernels)
    s, graphs = est.extra_["graph"], est.extra_["candidate_graphs"]
    assert np.allclose(s.sum(axis=1), 1.0) and (s >= 0).all() and ((s > 0).sum(axis=1) <= 10).all()
    assert np.allclose(graphs.sum(axis=2), 1.0) and (graphs >= 0).all()
    dist = np.sqrt(((s[None] - graphs) ** 2).sum(axis=(1, 2)))
    assert np.allclose(est.kernel_weights_, 0.5 / dist, rtol=1e-12)
    _assert_monotone_while_lam_fixed(est)


def _assert_monotone_while_lam_fixed(est):
    obj, lam = np.array(est.objective_), est.extra_["lam_history"]
    same = lam[1:] == lam[:-1]
    assert np.all(np.diff(obj)[same] <= 1e-9 * np.abs(obj[1:][same]))


def test_spmkc_fit_invariants(blobs):
    kernels, _ = blobs
    est = SPMKC(3, alpha=0.1, beta=10.0, gamma=1.0).fit(kernels)
    z, k = est.extra_["graph"], est.extra_["kernel"]
    assert np.allclose(z.sum(axis=1), 1.0) and (z >= 0).all() and (np.diag(z) == 0).all()
    assert np.linalg.eigvalsh(k).min() > -1e-10
    obj = np.array(est.objective_)
    assert np.all(np.diff(obj) <= 1e-9 * np.abs(obj[1:])) and est.converged_
    assert np.allclose(est.kernel_weights_, self_weights(preprocess_kernels(kernels), k))


@pytest.mark.parametrize("name, params, floor", [
    ("swmc", {"n_neighbors": 10, "init": [1, 1, 1, 1, 1]}, 0.55),
    ("cagl", {"alpha": 0.1, "beta": 10.0}, 0.62),
    ("spmkc", {"alpha": 0.1, "beta": 10.0, "gamma": 1.0}, 0.53),
])
def test_yale_accuracy_floor(name, params, floor, yale):
    kernels, labels = yale
    est = get_method(name)(15, random_state=0, **params).fit(kernels)
    assert evaluate(labels, est.labels_)["ACC"] >= floor


@pytest.mark.parametrize("cls", [SwMC, SPMKC, CAGL])
def test_estimator_api(cls):
    est = cls(4)
    params = est.get_params()
    assert set(cls.param_grid) <= set(params) and params["n_clusters"] == 4
    twin = clone(est)
    assert twin.get_params() == params and twin is not est
    assert get_method(cls.name) is cls


@pytest.mark.parametrize("cls, bad", [(CAGL, {"beta": 0.0}), (SPMKC, {"gamma": 0.0}), (SPMKC, {"alpha": -1.0})])
def test_bad_hyper_parameters(cls, bad, blobs):
    with pytest.raises(ValueError):
        cls(3, **bad).fit(blobs[0])

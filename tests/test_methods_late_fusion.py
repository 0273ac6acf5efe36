"""LF-MVC and OPLFMVC (lswmkc_dask.methods._late_fusion) against their authors' code under Octave on YALE.

The fixtures in tests/data/competitors/ hold the outputs of the authors' MATLAB code
(wangsiwei2010/latefusionalignment, xinwangliu/onePassLateFusionMVC) run under GNU Octave
7.3 on YALE, and the start matrices that run used (base partitions HP and H0 or C0 from
ARPACK, whose signs and bases are arbitrary): from them both methods are deterministic.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from scipy.linalg import eigh, svd
from sklearn.base import clone

from lswmkc_dask.errors import ParameterError
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._late_fusion import (
    LFMVC,
    OPLFMVC,
    base_partitions,
    fused_partition,
    orthonormal_centroids,
    polar_factor,
)

K = 15
kernels, pre = helpers.kernels, helpers.pre
_rel = helpers.relative_error


@pytest.fixture(scope="module")
def lf_ref():
    init = helpers.init_matrices("lfmvc")
    return helpers.reference("lfmvc"), init["HP"].transpose(2, 0, 1), init["H0"]


@pytest.fixture(scope="module")
def op_ref():
    init = helpers.init_matrices("oplfmvc")
    return helpers.reference("oplfmvc"), init["HP"].transpose(2, 0, 1), init["C0"]


# --- helpers -------------------------------------------------------------------------------------


def test_polar_factor_is_procrustes_solution(rng):
    a = rng.standard_normal((9, 4))
    u = polar_factor(a)
    np.testing.assert_allclose(u.T @ u, np.eye(4), atol=1e-13)
    best = np.trace(u.T @ a)
    assert np.isclose(best, svd(a, compute_uv=False).sum())  # the maximum of tr(X^T a) over X^T X = I
    for _ in range(20):
        q = polar_factor(rng.standard_normal((9, 4)))
        assert np.trace(q.T @ a) <= best + 1e-12


def test_base_partitions_descending(pre):
    h = base_partitions(pre[:1], K)[0]
    lam = np.diag(h.T @ pre[0] @ h)
    assert np.all(np.diff(lam) < 0)
    np.testing.assert_allclose(lam, eigh(pre[0], eigvals_only=True)[::-1][:K], rtol=1e-12)
    hp = base_partitions(pre, K)
    assert hp.shape == (5, 165, K)
    np.testing.assert_allclose(hp[0], h)


def test_preprocessed_spectra_match_reference(pre, lf_ref):
    ref = lf_ref[0]
    ours = np.stack([eigh(k, eigvals_only=True)[::-1][:30] for k in pre])
    assert _rel(ours, ref["top_eigenvalues_each_kernel"]) < 1e-12
    avg = eigh(pre.mean(axis=0), eigvals_only=True)[::-1][:30]
    assert _rel(avg, ref["top_eigenvalues_average_kernel"]) < 1e-12


def test_default_partitions_span_the_reference_ones(pre, lf_ref):
    """Our eigh partitions and the authors' eigs ones differ only by a rotation: same projectors."""
    _, hp, h0 = lf_ref
    ours = base_partitions(pre, K)
    for p in range(5):
        np.testing.assert_allclose(ours[p] @ ours[p].T, hp[p] @ hp[p].T, atol=1e-10)
    mine = base_partitions(pre.mean(axis=0)[None], K)[0]
    np.testing.assert_allclose(mine @ mine.T, h0 @ h0.T, atol=1e-10)


def test_fused_partition(rng):
    hp = rng.standard_normal((3, 6, 2))
    wp = np.stack([polar_factor(rng.standard_normal((2, 2))) for _ in range(3)])
    w = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(fused_partition(hp, wp, w), sum(w[p] * hp[p] @ wp[p] for p in range(3)))


def test_orthonormal_centroids(rng):
    x = rng.standard_normal((30, 3))
    labels = np.arange(30) % 3
    c = orthonormal_centroids(x, labels, 3)
    np.testing.assert_allclose(c.T @ c, np.eye(3), atol=1e-13)
    centroids = np.stack([x[labels == j].mean(axis=0) for j in range(3)])
    np.testing.assert_allclose(c @ c.T @ centroids, centroids, atol=1e-12)  # c spans the centroids


# --- LF-MVC --------------------------------------------------------------------------------------


def test_lfmvc_matches_authors_code_on_every_lambda(yale, lf_ref):
    ref, hp, h0 = lf_ref
    assert [r["lambda"] for r in ref["runs"]] == list(LFMVC.param_grid["lambda_"])
    for run in ref["runs"]:
        est = LFMVC(K, lambda_=run["lambda"], init_partitions=hp, init_consensus=h0, n_init=1, random_state=0)
        est.fit(yale[0])
        assert est.n_iter_ == run["n_iter"], run["lambda"]
        assert _rel(est.objective_, run["objective"]) < 1e-12, run["lambda"]
        assert _rel(est.kernel_weights_, run["gamma_final"]) < 1e-10, run["lambda"]
        hstar = est.extra_["consensus"]
        sv = svd(hstar.T @ h0, compute_uv=False)
        assert _rel(sv, run["singular_values_Hstar_t_H0"]) < 1e-10, run["lambda"]
        assert abs(np.trace(hstar.T @ h0) - run["Hstar_alignment_with_H0"]) < 1e-10 * K
        assert est.converged_ == (run["n_iter"] <= 100)


def _lfmvc_by_hand(hp, h0, lam, iterations, accumulate):
    """The paper's three steps from gamma = 1/m, W_p = I; the H* step sees the running sum of the
    fused partitions (the authors' loop) or only the current one."""
    m, k = hp.shape[0], hp.shape[2]
    gamma, wp, running, obj = np.full(m, 1 / m), np.repeat(np.eye(k)[None], m, axis=0), 0.0, []
    for _ in range(iterations):
        current = sum(gamma[p] * hp[p] @ wp[p] for p in range(m))
        running = running + current if accumulate else current
        hstar = polar_factor(running + lam * h0)
        wp = np.stack([polar_factor(gamma[p] * hp[p].T @ hstar) for p in range(m)])
        coef = np.array([np.trace(hstar.T @ hp[p] @ wp[p]) for p in range(m)])
        gamma = coef / np.linalg.norm(coef)
        obj.append(np.trace(hstar.T @ (sum(gamma[p] * hp[p] @ wp[p] for p in range(m)) + lam * h0)))
    return np.array(obj)


def test_lfmvc_accumulates_the_fused_partition(yale, lf_ref):
    """The authors' loop never resets sum_p gamma_p H_p W_p: the reference follows the running
    sum, and a loop that resets it departs from the reference at the second iteration."""
    ref, hp, h0 = lf_ref
    run = next(r for r in ref["runs"] if r["lambda"] == 1.0)
    est = LFMVC(K, lambda_=1.0, init_partitions=hp, init_consensus=h0, max_iter=2, tol=0.0, n_init=1, random_state=0)
    est.fit(yale[0])
    assert est.n_iter_ == 3 and not est.converged_
    np.testing.assert_allclose(est.objective_, run["objective"][:3], rtol=1e-12)
    running = _lfmvc_by_hand(hp, h0, 1.0, 3, accumulate=True)
    reset = _lfmvc_by_hand(hp, h0, 1.0, 3, accumulate=False)
    np.testing.assert_allclose(running, run["objective"][:3], rtol=1e-12)
    assert abs(reset[0] - running[0]) < 1e-12 * running[0]
    assert np.all(np.abs(reset[1:] - running[1:]) > 1e-6)


def test_lfmvc_invariants(yale, lf_ref):
    _, hp, h0 = lf_ref
    est = LFMVC(K, lambda_=1.0, init_partitions=hp, init_consensus=h0, n_init=3, random_state=0).fit(yale[0])
    g = est.kernel_weights_
    assert np.all(g >= 0) and abs(np.linalg.norm(g) - 1) < 1e-12
    hist = est.extra_["weights_history"]
    assert hist.shape == (est.n_iter_, 5)
    np.testing.assert_allclose(hist[-1], g)
    np.testing.assert_allclose(np.linalg.norm(hist, axis=1), 1.0, atol=1e-12)
    hstar = est.extra_["consensus"]
    np.testing.assert_allclose(hstar.T @ hstar, np.eye(K), atol=1e-12)
    for w in est.extra_["rotations"]:
        np.testing.assert_allclose(w.T @ w, np.eye(K), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(est.embedding_, axis=1), 1.0, atol=1e-12)


def test_lfmvc_default_start_and_api(yale):
    kernels, labels = yale
    est = get_method("lf-mvc")(K, lambda_=1.0, n_init=5, random_state=0)
    assert isinstance(est, LFMVC) and est.name == "lf-mvc"
    pred = est.fit_predict(kernels)
    assert pred.shape == (165,) and len(np.unique(pred)) == K
    assert 1 < est.n_iter_ <= 101 and est.kernel_weights_.shape == (5,)
    again = clone(est).fit_predict(kernels)
    np.testing.assert_array_equal(pred, again)
    params = est.get_params()
    for name in ("n_clusters", "lambda_", "max_iter", "tol", "preprocess", "n_init", "random_state", "init_partitions",
                 "init_consensus"):
        assert name in params
    assert clone(LFMVC(3, lambda_=8.0)).get_params()["lambda_"] == 8.0


def test_lfmvc_bad_input(yale):
    kernels = yale[0]
    with pytest.raises(ValueError, match="init_partitions"):
        LFMVC(K, init_partitions=np.zeros((5, 165, 3))).fit(kernels)
    with pytest.raises(ValueError, match="init_consensus"):
        LFMVC(K, init_consensus=np.zeros((165, K + 1))).fit(kernels)
    with pytest.raises(ParameterError, match="n_clusters=200"):
        LFMVC(200).fit(kernels)
    with pytest.raises(ParameterError, match="max_iter=0"):
        LFMVC(K, max_iter=0).fit(kernels)


# --- OPLFMVC -------------------------------------------------------------------------------------


def test_oplfmvc_matches_authors_code(yale, op_ref):
    ref, hp, c0 = op_ref
    est = OPLFMVC(K, init_partitions=hp, init_centroids=c0).fit(yale[0])
    assert est.n_iter_ == ref["n_iter"] == 15
    assert est.converged_
    assert _rel(est.objective_, ref["objective"]) < 1e-12
    assert _rel(est.extra_["weights_history"], ref["beta_after_each_iteration"]) < 1e-10
    assert _rel(est.kernel_weights_, ref["beta_final"]) < 1e-10
    np.testing.assert_array_equal(est.labels_, np.asarray(ref["labels_raw"]) - 1)
    np.testing.assert_array_equal(np.bincount(est.labels_, minlength=K), ref["cluster_sizes"])
    np.testing.assert_array_equal(est.labels_, np.argmax(est.extra_["fused"], axis=1))
    np.testing.assert_array_equal(est.extra_["init_centroids"], c0)


def test_oplfmvc_invariants(yale, op_ref):
    _, hp, c0 = op_ref
    est = OPLFMVC(K, init_partitions=hp, init_centroids=c0, tol=0.0, max_iter=30).fit(yale[0])
    assert est.n_iter_ == 31 and not est.converged_
    obj = np.asarray(est.objective_)
    assert np.all(np.diff(obj) >= -1e-10 * obj[-1])  # every step maximises: never decreases
    hist = est.extra_["weights_history"]
    np.testing.assert_allclose(np.linalg.norm(hist, axis=1), 1.0, atol=1e-12)
    assert np.all(hist >= 0)
    c = est.extra_["centroids"]
    np.testing.assert_allclose(c.T @ c, np.eye(K), atol=1e-12)
    assert est.embedding_ is None


def test_oplfmvc_default_start_and_api(yale):
    kernels, labels = yale
    est = get_method("oplfmvc")(K, random_state=0)
    assert isinstance(est, OPLFMVC) and est.name == "oplfmvc" and OPLFMVC.param_grid == {}
    pred = est.fit_predict(kernels)
    assert pred.shape == (165,) and len(np.unique(pred)) == K
    c0 = est.extra_["init_centroids"]
    np.testing.assert_allclose(c0.T @ c0, np.eye(K), atol=1e-12)
    np.testing.assert_array_equal(clone(est).fit_predict(kernels), pred)
    params = est.get_params()
    for name in ("n_clusters", "max_iter", "tol", "preprocess", "n_init", "random_state", "init_partitions",
                 "init_centroids"):
        assert name in params


def test_oplfmvc_bad_input(yale):
    with pytest.raises(ValueError, match="init_centroids"):
        OPLFMVC(K, init_centroids=np.eye(K - 1)).fit(yale[0])
    with pytest.raises(ValueError, match="init_partitions"):
        OPLFMVC(K, init_partitions=np.full((5, 165, K), np.nan)).fit(yale[0])

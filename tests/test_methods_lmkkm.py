"""LMKKM (lswmkc_dask.methods._lmkkm) against its authors' code under Octave on YALE, and its QP solver.

tests/data/competitors/lmkkm_yale.json holds the outputs of
mehmetgonen/lmkkmeans (lmkkmeans_train.m, 10 iterations) run under GNU Octave 7.3 on YALE,
with MOSEK's QP replaced by an exact solver (Octave's qp). From the uniform start the
method is deterministic up to the QP's accuracy.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from scipy.linalg import eigh
from scipy.optimize import minimize
from sklearn.base import clone

from lswmkc_dask import preprocess_kernels
from lswmkc_dask.errors import ParameterError
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._lmkkm import LMKKM, localized_kernel, simplex_rows_qp

K = 15
_rel = helpers.relative_error


@pytest.fixture(scope="module")
def ref():
    data = helpers.reference("lmkkm")
    return data, np.asarray(data["Theta_final"])


@pytest.fixture(scope="module")
def fitted(yale):
    return LMKKM(K, n_init=5, random_state=0).fit(yale[0])


def _qp_problem(rng, n=12, m=4):
    """PSD blocks of different scales, so that bounds are active at the minimiser."""
    a = rng.standard_normal((m, n, n))
    q = a @ a.transpose(0, 2, 1) / n + 0.05 * np.eye(n)
    v = rng.random(n)
    q[1] += 2 * np.outer(v, v)
    return q * np.array([20.0, 0.3, 3.0, 0.1])[:, None, None]


def _kkt_residuals(q, theta):
    """(stationarity on the free entries, most negative bound multiplier, row-sum error, min entry)."""
    grad = np.einsum("pij,jp->ip", q, theta)
    free = theta > 0
    nu = np.array([grad[i, free[i]].mean() for i in range(theta.shape[0])])
    stat = np.abs(grad - nu[:, None])[free].max()
    mult = (grad - nu[:, None])[~free]
    return stat, (mult.min() if mult.size else 0.0), np.abs(theta.sum(axis=1) - 1).max(), theta.min()


# --- the QP ----------------------------------------------------------------------------------------


def test_qp_kkt_point_with_active_bounds(rng):
    q = _qp_problem(rng)
    theta, n_iter = simplex_rows_qp(q)
    assert (theta == 0).sum() > 5 and n_iter > 1
    stat, mult, rows, low = _kkt_residuals(q, theta)
    assert stat < 1e-12 and mult > -1e-12 and rows < 1e-14 and low >= 0


def test_qp_matches_scipy_and_is_not_worse(rng):
    q = _qp_problem(rng)
    n, m = q.shape[1], q.shape[0]
    theta, _ = simplex_rows_qp(q)

    def f(x):
        t = x.reshape(n, m)
        return 0.5 * sum(t[:, p] @ q[p] @ t[:, p] for p in range(m))

    cons = {"type": "eq", "fun": lambda x: x.reshape(n, m).sum(axis=1) - 1}
    res = minimize(f, np.full(n * m, 1 / m), method="SLSQP", bounds=[(0, 1)] * (n * m), constraints=[cons],
                   options={"ftol": 1e-15, "maxiter": 1000})
    assert res.success
    np.testing.assert_allclose(theta, res.x.reshape(n, m), atol=1e-6)
    assert f(theta.ravel()) <= res.fun + 1e-14


def test_qp_start_does_not_change_the_minimiser(rng):
    q = _qp_problem(rng)
    a, _ = simplex_rows_qp(q)
    start = rng.random(a.shape)
    start[:, 0] = 0.0
    b, _ = simplex_rows_qp(q, start=start / start.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_qp_bad_start_and_cap(rng):
    q = _qp_problem(rng)
    with pytest.raises(ValueError, match="simplex"):
        simplex_rows_qp(q, start=np.full((12, 4), 0.5))
    with pytest.raises(RuntimeError, match="KKT"):
        simplex_rows_qp(q, max_iter=1)


def test_localized_kernel(rng):
    kernels = rng.standard_normal((3, 5, 5))
    theta = rng.random((5, 3))
    want = sum(np.outer(theta[:, p], theta[:, p]) * kernels[p] for p in range(3))
    np.testing.assert_allclose(localized_kernel(kernels, theta), want, atol=1e-14)


# --- LMKKM on YALE ---------------------------------------------------------------------------------


def test_lmkkm_matches_authors_code(yale, ref, fitted):
    data, theta_ref = ref
    assert fitted.n_iter_ == data["n_iter"] == 10
    assert _rel(fitted.objective_, data["objective"]) < 1e-9
    np.testing.assert_allclose(fitted.sample_weights_, theta_ref, atol=1e-9)
    np.testing.assert_allclose(fitted.kernel_weights_, data["Theta_final_column_means"], atol=1e-9)
    combined = localized_kernel(preprocess_kernels(yale[0]), fitted.sample_weights_)
    top = eigh(combined, eigvals_only=True)[::-1][:30]
    assert _rel(top, data["top_eigenvalues_final_kernel"]) < 1e-9


def test_lmkkm_invariants(fitted):
    theta = fitted.sample_weights_
    assert theta.shape == (165, 5) and theta.min() >= 0
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, atol=1e-13)
    obj = np.asarray(fitted.objective_)
    assert np.all(np.diff(obj) >= -1e-12 * abs(obj[0]))  # both steps are exact minimisations
    hist = fitted.extra_["weights_history"]
    assert hist.shape == (10, 5)
    np.testing.assert_allclose(hist[-1], fitted.kernel_weights_)
    np.testing.assert_allclose(hist.sum(axis=1), 1.0, atol=1e-13)
    assert fitted.converged_ and len(fitted.extra_["qp_iterations"]) == 10
    np.testing.assert_allclose(np.linalg.norm(fitted.embedding_, axis=1), 1.0, atol=1e-12)


def test_lmkkm_first_iteration_is_kernel_kmeans_of_the_average(yale):
    """From Theta = 1/m the first H is the top-k eigenvectors of sum_m K_m / m^2."""
    est = LMKKM(K, max_iter=1, n_init=1, random_state=0).fit(yale[0])
    kernels = preprocess_kernels(yale[0])
    lam, h = eigh(kernels.sum(axis=0) / 25, subset_by_index=(165 - K, 164))
    combined = localized_kernel(kernels, est.sample_weights_)
    want = np.sum(h * (combined @ h)) - np.trace(combined)
    assert est.n_iter_ == 1 and abs(est.objective_[0] - want) < 1e-12 * abs(want)


def test_lmkkm_tol_stops_early(yale):
    est = LMKKM(K, max_iter=10, tol=1e-6, n_init=1, random_state=0).fit(yale[0])
    assert est.converged_ and est.n_iter_ < 10


def test_lmkkm_api(yale):
    kernels = yale[0]
    est = get_method("lmkkm")(K, max_iter=3, n_init=3, random_state=0)
    assert isinstance(est, LMKKM) and est.name == "lmkkm" and LMKKM.param_grid == {}
    pred = est.fit_predict(kernels)
    assert pred.shape == (165,) and len(np.unique(pred)) == K
    np.testing.assert_array_equal(clone(est).fit_predict(kernels), pred)
    params = est.get_params()
    for name in ("n_clusters", "max_iter", "tol", "preprocess", "n_init", "random_state"):
        assert name in params
    with pytest.raises(ParameterError, match="n_clusters=0"):
        LMKKM(0).fit(kernels)
    with pytest.raises(ParameterError, match="max_iter=0"):
        LMKKM(K, max_iter=0).fit(kernels)

"""MKKM (Huang et al., IEEE TFS 2012, closed-form weights) against its authors' code on YALE.

The reference (tests/data/competitors/mkkm_yale.json) is ``mkkmeans_train`` of GitHub
xinwangliu/SimpleMKKMcodes run under GNU Octave after ``kcenter``/``knorm``; MKKM is
deterministic from ``theta = 1/m``, so weights, objective and eigenvalues match to rounding.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask.core.equations import combine_kernels as combine
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._base import top_eigenpairs
from lswmkc_dask.methods._mkkm import MKKM, mkkm_weights

REF = helpers.reference("mkkm")
TOL = 1e-10
kernels, pre = helpers.kernels, helpers.pre


@pytest.fixture(scope="module")
def fitted(kernels):
    return MKKM(REF["k"], n_init=2, random_state=0).fit(kernels)


def test_weights_per_iteration_match_authors(fitted):
    assert fitted.n_iter_ == REF["n_iter"] == 3
    assert fitted.converged_
    history = fitted.extra_["theta_history"]
    assert history.shape == (REF["n_iter"], REF["m"])
    np.testing.assert_allclose(history, REF["theta_after_each_iteration"], rtol=0, atol=TOL)
    np.testing.assert_allclose(fitted.kernel_weights_, REF["theta_final"], rtol=0, atol=TOL)


def test_objective_matches_authors(fitted):
    np.testing.assert_allclose(fitted.objective_, REF["objective"], rtol=TOL, atol=0)


def test_eigenvalues_match_authors(fitted, pre):
    k = REF["k"]
    # the kernel of the returned H (the weights before the last update), and the final kernel
    np.testing.assert_allclose(fitted.extra_["eigenvalues"][::-1], REF["top_eigenvalues_kernel_of_returned_H"][:k],
                               rtol=TOL, atol=0)
    last = combine(pre, fitted.extra_["theta_history"][-2] ** 2)
    h = fitted.extra_["h"]
    np.testing.assert_allclose(np.trace(h.T @ last @ h), REF["trace_HtKH_returned"], rtol=TOL)
    final = np.linalg.eigvalsh(combine(pre, fitted.kernel_weights_**2))[::-1][: 2 * k]
    np.testing.assert_allclose(final, REF["top_eigenvalues_final_kernel"], rtol=TOL, atol=0)


def test_weights_on_simplex_and_objective_monotone(fitted):
    history = fitted.extra_["theta_history"]
    assert np.all(history >= 0)
    np.testing.assert_allclose(history.sum(axis=1), 1.0, atol=1e-14)
    assert np.all(np.diff(fitted.objective_) <= 1e-12)


def test_weight_step_is_the_simplex_minimiser(pre, rng):
    """theta_p a_p is one constant (Lagrange), and no simplex point has a lower sum_p theta_p^2 a_p."""
    _, h = top_eigenpairs(combine(pre, np.full(5, 0.04)), 15)
    theta, a = mkkm_weights(pre, h)
    assert np.ptp(theta * a) < 1e-12 * np.max(theta * a)
    others = rng.dirichlet(np.ones(5), size=2000)
    assert np.all(others**2 @ a >= theta**2 @ a)


def test_weight_step_gives_a_rank_k_kernel_all_the_weight():
    """a_p = 0 (the kernel's range inside span H): its weight is the limit 1, not NaN."""
    v = np.linalg.qr(np.random.default_rng(0).normal(size=(20, 2)))[0]
    low = v @ v.T
    kernels = np.stack([low, np.eye(20)])
    theta, a = mkkm_weights(kernels, v)
    assert abs(a[0]) < 1e-12
    np.testing.assert_array_equal(theta, [1.0, 0.0])


def test_stop_rule(kernels):
    capped = MKKM(15, max_iter=2, n_init=1, random_state=0).fit(kernels)
    assert capped.n_iter_ == 2 and not capped.converged_
    no_tol = MKKM(15, tol=0.0, max_iter=6, n_init=1, random_state=0).fit(kernels)
    assert no_tol.n_iter_ == 6 and not no_tol.converged_
    with pytest.raises(ValueError, match="max_iter"):
        MKKM(15, max_iter=0).fit(kernels)


def test_estimator_api(fitted, kernels):
    assert get_method("mkkm") is MKKM and MKKM.name == "mkkm" and MKKM.param_grid == {}
    labels = MKKM(15, n_init=5, random_state=0).fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == 15
    assert fitted.embedding_.shape == (165, 15)
    params = MKKM(7, max_iter=9).get_params()
    assert params == {"n_clusters": 7, "max_iter": 9, "tol": 1e-4, "preprocess": True, "n_init": 50,
                      "random_state": None}
    twin = clone(MKKM(7, tol=1e-3))
    assert twin.get_params()["tol"] == 1e-3 and not hasattr(twin, "labels_")

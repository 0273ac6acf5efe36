"""MKKM-MR (Liu et al., AAAI 2016) against its authors' code on YALE.

The reference (tests/data/competitors/mkkm_mr_yale.json) is ``myregmultikernelclustering`` of
GitHub wangsiwei2010/Multiple-Kernel-k-Means-Clustering-with-Matrix-Induced-Regularization
run under GNU Octave after ``kcenter``/``knorm``, for every lambda of the demo grid
2.^[-15:10]. The method is deterministic from ``gamma = 1/m``; the weight QP is exact here
and in Octave's active-set quadprog, so weights, objective and eigenvalues match to rounding.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask.core.equations import combine_kernels as combine
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._base import top_eigenpairs
from lswmkc_dask.methods._qp import simplex_qp
from lswmkc_dask.methods._mkkm import residual_traces
from lswmkc_dask.methods._mkkm_mr import MKKMMR, kernel_products

REF = helpers.reference("mkkm_mr")
#: QP-based weights: the brief allows 1e-4; both solvers are exact, measured 1.5e-15
TOL = 1e-10
kernels, pre = helpers.kernels, helpers.pre


@pytest.fixture(scope="module")
def fits(kernels):
    """One fit per lambda of the demo grid (26 fits, about a second)."""
    return [MKKMMR(REF["k"], lambda_=run["lambda"], n_init=1, random_state=0).fit(kernels) for run in REF["runs"]]


def test_M_matches_authors(pre):
    np.testing.assert_allclose(kernel_products(pre), REF["M"], rtol=1e-12)


def test_weights_per_iteration_match_authors(fits):
    assert [f.n_iter_ for f in fits] == [run["n_iter"] for run in REF["runs"]]
    for fit, run in zip(fits, REF["runs"]):
        assert fit.converged_
        np.testing.assert_allclose(fit.extra_["gamma_history"], run["gamma_after_each_iteration"], rtol=0, atol=TOL)
        np.testing.assert_allclose(fit.kernel_weights_, run["gamma_final"], rtol=0, atol=TOL)


def test_objective_matches_authors(fits):
    for fit, run in zip(fits, REF["runs"]):
        np.testing.assert_allclose(fit.objective_, run["objective"], rtol=TOL, atol=0)


def test_eigenvalues_match_authors(fits, pre):
    k = REF["k"]
    for fit, run in zip(fits, REF["runs"]):
        np.testing.assert_allclose(fit.extra_["eigenvalues"][::-1], run["top_eigenvalues_kernel_of_returned_H"],
                                   rtol=TOL, atol=0)
        final = np.linalg.eigvalsh(combine(pre, fit.kernel_weights_))[::-1][:k]
        np.testing.assert_allclose(final, run["top_eigenvalues_final_kernel"], rtol=TOL, atol=0)


def test_weights_on_simplex_and_objective_decreases(fits):
    """On the simplex with the authors' 1e-6 cut-off; the objective is not guaranteed monotone
    (H comes from the linear combination, J from the squared one) but decreases on YALE."""
    for fit in fits:
        history = fit.extra_["gamma_history"]
        assert np.all((history == 0) | (history >= 1e-6))
        np.testing.assert_allclose(history.sum(axis=1), 1.0, atol=1e-14)
        assert np.all(np.diff(fit.objective_) <= 1e-12 * np.abs(fit.objective_[:-1]))


def test_large_lambda_spreads_the_weights(fits):
    """The regulariser pushes towards min gamma^T M gamma: the weights approach its minimiser."""
    m_min = simplex_qp(np.array(REF["M"]), np.zeros(5))
    gaps = [np.abs(f.kernel_weights_ - m_min).max() for f in fits]
    assert gaps[-1] < 1e-2 < gaps[0]


def test_weight_step_is_the_qp_minimiser(pre, rng):
    """The gamma step: no simplex point has a lower 0.5 gamma^T (lambda M + 2 diag(a)) gamma."""
    _, h = top_eigenpairs(combine(pre, np.full(5, 0.2)), 15, symmetrise=True)
    hessian = 0.5 * kernel_products(pre) + 2 * np.diag(residual_traces(pre, h))
    gamma = simplex_qp(hessian, np.zeros(5))
    others = rng.dirichlet(np.ones(5), size=2000)
    assert np.all(np.einsum("ij,jk,ik->i", others, hessian, others) >= gamma @ hessian @ gamma)


def test_stop_rule_and_bad_parameters(kernels):
    capped = MKKMMR(15, lambda_=1.0, max_iter=2, n_init=1, random_state=0).fit(kernels)
    assert capped.n_iter_ == 2 and not capped.converged_
    no_tol = MKKMMR(15, lambda_=1.0, tol=0.0, max_iter=7, n_init=1, random_state=0).fit(kernels)
    assert no_tol.n_iter_ == 7 and not no_tol.converged_
    with pytest.raises(ValueError, match="max_iter"):
        MKKMMR(15, max_iter=0).fit(kernels)
    with pytest.raises(ValueError, match="lambda_"):
        MKKMMR(15, lambda_=-1.0).fit(kernels)


def test_estimator_api(fits, kernels):
    assert get_method("mkkm-mr") is MKKMMR and MKKMMR.name == "mkkm-mr"
    assert MKKMMR.param_grid["lambda_"] == tuple(2.0**e for e in range(-15, 11))
    labels = MKKMMR(15, lambda_=2.0**-6, n_init=5, random_state=0).fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == 15
    assert fits[0].embedding_.shape == (165, 15)
    params = MKKMMR(7, lambda_=0.5).get_params()
    assert params == {"n_clusters": 7, "lambda_": 0.5, "max_iter": 200, "tol": 1e-6, "preprocess": True,
                      "n_init": 50, "random_state": None}
    twin = clone(MKKMMR(7, lambda_=4.0))
    assert twin.get_params()["lambda_"] == 4.0 and not hasattr(twin, "labels_")

"""ONKC (Liu et al., AAAI 2017) against its authors' code on YALE.

The reference (tests/data/competitors/onkc_yale.json) is ``myoptimalNeighborhoodkernelclustering``
of GitHub Tracesource/ONKC run under GNU Octave after ``kcenter``/``knorm`` (its ``rhon`` typo
read as ``rho``), at 6 of the 20 points of the grid rho 2.^[-7:4:9] x lambda 2.^[-6:4:6]. The
method is deterministic from ``gamma = 1/m``.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask.core.equations import combine_kernels as combine
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._base import top_eigenpairs
from lswmkc_dask.methods._mkkm_mr import kernel_products
from lswmkc_dask.methods._onkc import ONKC, neighbourhood_kernel, onkc_objective

REF = helpers.reference("onkc")
RUNS = REF["runs"]
#: QP-based weights (the brief: 1e-4). Measured: 3.5e-9 at rho = 2^9, where the QP's
#: Hessian (rho + lambda) M is large and Octave's quadprog stops at its own tolerance; 1e-14 elsewhere.
TOL_WEIGHTS = 1e-7
TOL = 1e-10
kernels, pre = helpers.kernels, helpers.pre


@pytest.fixture(scope="module")
def fits(kernels):
    return [ONKC(REF["k"], rho=2.0 ** run["log2_rho"], lambda_=2.0 ** run["log2_lambda"], n_init=1,
                 random_state=0).fit(kernels) for run in RUNS]


def test_M_matches_authors(pre):
    np.testing.assert_allclose(kernel_products(pre), REF["M"], rtol=1e-12)


def test_weights_per_iteration_match_authors(fits):
    assert [f.n_iter_ for f in fits] == [run["n_iter"] for run in RUNS]
    for fit, run in zip(fits, RUNS):
        assert fit.converged_
        np.testing.assert_allclose(fit.extra_["gamma_history"], run["gamma_after_each_iteration"], rtol=0,
                                   atol=TOL_WEIGHTS)
        np.testing.assert_allclose(fit.kernel_weights_, run["gamma_final"], rtol=0, atol=TOL_WEIGHTS)


def test_objective_and_final_G_match_authors(fits):
    for fit, run in zip(fits, RUNS):
        np.testing.assert_allclose(fit.objective_, run["objective"], rtol=TOL, atol=0)
        top = np.linalg.eigvalsh(fit.extra_["G"])[::-1][: len(run["top_eigenvalues_final_G"])]
        np.testing.assert_allclose(top, run["top_eigenvalues_final_G"], rtol=TOL, atol=1e-9)


def test_weights_on_simplex_G_psd_objective_decreases(fits):
    """All three steps are exact block minimisers (up to the 1e-8 cut-off): J does not increase."""
    for fit in fits:
        history = fit.extra_["gamma_history"]
        assert np.all((history == 0) | (history >= 1e-8))
        np.testing.assert_allclose(history.sum(axis=1), 1.0, atol=1e-14)
        assert np.all(np.diff(fit.objective_) <= 1e-12 * np.abs(fit.objective_[:-1]))
        assert np.linalg.eigvalsh(fit.extra_["G"])[0] >= -1e-12


def test_G_step_is_the_psd_minimiser(pre, rng):
    """No PSD matrix near G has a lower Tr(G (I - H H^T)) + (rho/2) ||G - K||^2."""
    kernel = combine(pre, np.full(5, 0.2))
    _, h = top_eigenpairs(kernel, 15, symmetrise=True)
    rho = 2.0
    g = neighbourhood_kernel(kernel, rho, h)

    def cost(x):
        return onkc_objective(x, h, kernel, np.zeros(5), np.zeros((5, 5)), rho, 0.0)

    best = cost(g)
    for _ in range(20):
        b = rng.standard_normal((165, 3)) * 0.05
        assert cost(g + b @ b.T) >= best
    w, v = np.linalg.eigh(g)
    assert cost((v * np.where(w > 1e-3, w * 0.99, w)) @ v.T) >= best


def test_duplicated_kernels_give_finite_weights(pre):
    """M singular (each kernel twice, as heart's triples): the PSD QP still gives simplex weights."""
    doubled = np.concatenate([pre[:2], pre[:2]])
    fit = ONKC(15, rho=2.0, lambda_=1.0, preprocess=False, n_init=1, random_state=0).fit(doubled)
    gamma = fit.kernel_weights_
    assert np.all(np.isfinite(gamma)) and abs(gamma.sum() - 1) < 1e-14 and np.all(gamma >= 0)
    single = ONKC(15, rho=2.0, lambda_=1.0, preprocess=False, n_init=1, random_state=0).fit(pre[:2])
    np.testing.assert_allclose(gamma[:2] + gamma[2:], single.kernel_weights_, atol=1e-6)


def test_stop_rule_and_bad_parameters(kernels):
    capped = ONKC(15, rho=2.0**-7, lambda_=2.0**-6, max_iter=4, n_init=1, random_state=0).fit(kernels)
    assert capped.n_iter_ == 4 and not capped.converged_
    for kwargs, match in (({"rho": 0.0}, "rho"), ({"lambda_": -1.0}, "lambda_"), ({"max_iter": 0}, "max_iter")):
        with pytest.raises(ValueError, match=match):
            ONKC(15, **kwargs).fit(kernels)


def test_estimator_api(fits, kernels):
    assert get_method("onkc") is ONKC and ONKC.name == "onkc"
    assert len(ONKC.param_grid["rho"]) == 17 and len(ONKC.param_grid["lambda_"]) == 14
    labels = ONKC(15, rho=2.0**-7, lambda_=2.0**-2, n_init=5, random_state=0).fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == 15
    assert fits[0].embedding_.shape == (165, 15)
    params = ONKC(7, rho=4.0).get_params()
    assert params == {"n_clusters": 7, "rho": 4.0, "lambda_": 1.0, "max_iter": 51, "tol": 1e-3, "preprocess": True,
                      "n_init": 50, "random_state": None}
    twin = clone(ONKC(7, lambda_=0.25))
    assert twin.get_params()["lambda_"] == 0.25 and not hasattr(twin, "labels_")

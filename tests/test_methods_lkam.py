"""LKAM (Li et al., IJCAI 2016) against its authors' code on YALE.

The reference (tests/data/competitors/lkam_yale.json) is ``mylocalizedregmultikernelclustering``
of GitHub wangsiwei2010/latefusionalignment run under GNU Octave after ``kcenter``/``knorm``,
with neighbourhoods of ``numSel`` samples in the average kernel: 6 of the 64 points of the
tau 0.1:0.1:0.8 x lambda 2.^[-5:2:9] grid and 4 of the 3 x 3 grid. ``numSel`` is passed as
``n_neighbors`` (Octave's 0.1:0.1:0.8 holds 0.7000000000000001, whose round(tau n) is 116).
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask.core.equations import combine_kernels
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._lkam import LKAM, local_kernel_products, neighbour_count, neighbourhood_counts

REF = helpers.reference("lkam")
RUNS = REF["runs"]
#: QP-based weights: the brief allows 1e-4; both solvers are exact, measured 2e-15
TOL = 1e-10
kernels, pre = helpers.kernels, helpers.pre


@pytest.fixture(scope="module")
def fits(kernels):
    return [LKAM(REF["k"], lambda_=run["lambda"], n_neighbors=run["numSel"], n_init=1, random_state=0).fit(kernels)
            for run in RUNS]


def test_local_hessian_matches_authors(fits):
    for fit, run in zip(fits, RUNS):
        assert fit.extra_["n_neighbors"] == run["numSel"]
        np.testing.assert_allclose(fit.extra_["M_loc"], run["HE"], rtol=1e-12)


def test_weights_per_iteration_match_authors(fits):
    assert [f.n_iter_ for f in fits] == [run["n_iter"] for run in RUNS]
    for fit, run in zip(fits, RUNS):
        assert fit.converged_
        np.testing.assert_allclose(fit.extra_["gamma_history"], run["gamma_after_each_iteration"], rtol=0, atol=TOL)
        np.testing.assert_allclose(fit.kernel_weights_, run["gamma_final"], rtol=0, atol=TOL)


def test_objective_and_eigenvalues_match_authors(fits):
    for fit, run in zip(fits, RUNS):
        np.testing.assert_allclose(fit.objective_, run["objective"], rtol=TOL, atol=0)
        np.testing.assert_allclose(fit.extra_["eigenvalues"][::-1], run["top_eigenvalues_local_kernel_of_returned_H"],
                                   rtol=TOL, atol=0)


def test_weights_on_simplex_and_objective_decreases(fits):
    """H and gamma steps are exact minimisers (up to the 1e-6 cut-off): J does not increase."""
    for fit in fits:
        history = fit.extra_["gamma_history"]
        assert np.all((history == 0) | (history >= 1e-6))
        np.testing.assert_allclose(history.sum(axis=1), 1.0, atol=1e-14)
        assert np.all(np.diff(fit.objective_) <= 1e-12 * np.abs(fit.objective_[:-1]))


def test_neighbourhoods_and_counts(pre):
    avg = combine_kernels(pre, np.full(5, 0.2))
    ns = np.argsort(-(avg - 1e8 * np.eye(165)), axis=0, kind="stable")[:10]  # column i: N_i, the authors' sort
    assert not np.any(ns == np.arange(165)[None, :])  # a sample is not its own neighbour
    for i in (0, 77, 164):  # the 10 largest off-diagonal similarities of column i, decreasing
        col = np.delete(avg[:, i], i)
        np.testing.assert_allclose(avg[ns[:, i], i], np.sort(col)[::-1][:10], rtol=0, atol=0)
    counts = neighbourhood_counts(avg, 10)
    assert counts.sum() == 165 * 10 * 10 and np.array_equal(counts, counts.T)
    brute = np.zeros((165, 165))
    for i in range(165):
        brute[np.ix_(ns[:, i], ns[:, i])] += 1
    np.testing.assert_array_equal(counts, brute)
    direct = sum(np.einsum("pab,qba->pq", pre[:, ns[:, i]][:, :, ns[:, i]], pre[:, ns[:, i]][:, :, ns[:, i]])
                 for i in range(165)) / 165
    np.testing.assert_allclose(local_kernel_products(pre, counts), direct, rtol=1e-12)


def test_neighbour_count_rounds_as_matlab():
    assert neighbour_count(0.7, None, 165) == 115  # 0.7 * 165 = 115.49999999999999
    assert neighbour_count(0.7000000000000001, None, 165) == 116
    assert neighbour_count(0.5, None, 165) == 83  # 82.5 rounds away from zero
    assert neighbour_count(0.5, 40, 165) == 40
    with pytest.raises(ValueError, match="tau"):
        neighbour_count(1.5, None, 165)


def test_tau_gives_the_same_fit_as_its_count(kernels, fits):
    run = RUNS[[r["numSel"] for r in RUNS].index(83)]
    fit = fits[RUNS.index(run)]
    by_tau = LKAM(15, tau=0.5, lambda_=run["lambda"], n_init=1, random_state=0).fit(kernels)
    np.testing.assert_array_equal(by_tau.kernel_weights_, fit.kernel_weights_)


def test_stop_rule_and_bad_parameters(kernels):
    capped = LKAM(15, n_neighbors=50, lambda_=0.5, tol=0.0, n_init=1, random_state=0).fit(kernels)
    assert capped.n_iter_ == 11 and not capped.converged_  # the authors' t > 10
    with pytest.raises(ValueError, match="n_neighbors"):
        LKAM(15, n_neighbors=165).fit(kernels)
    with pytest.raises(ValueError, match="lambda_"):
        LKAM(15, lambda_=-1.0).fit(kernels)
    with pytest.raises(ValueError, match="max_iter"):
        LKAM(15, max_iter=0).fit(kernels)


def test_estimator_api(fits, kernels):
    assert get_method("lkam") is LKAM and LKAM.name == "lkam"
    assert set(LKAM.param_grid) == {"tau", "lambda_"} and len(LKAM.param_grid["lambda_"]) == 8
    labels = LKAM(15, n_neighbors=115, lambda_=2.0**-5, n_init=5, random_state=0).fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == 15
    assert fits[0].embedding_.shape == (165, 15)
    params = LKAM(7, tau=0.3).get_params()
    assert params == {"n_clusters": 7, "tau": 0.3, "lambda_": 1.0, "n_neighbors": None, "max_iter": 11,
                      "tol": 1e-6, "preprocess": True, "n_init": 50, "random_state": None}
    twin = clone(LKAM(7, n_neighbors=20))
    assert twin.get_params()["n_neighbors"] == 20 and not hasattr(twin, "labels_")

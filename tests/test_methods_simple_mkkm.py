"""SimpleMKKM and LSMKKM (UWL-SMKKM) against their authors' code on YALE.

References (tests/data/competitors): ``simpleMKKM`` of GitHub xinwangliu/SimpleMKKMcodes and
``localizedSimpleMKKM`` of xinwangliu/LocalizedSMKKM, run under GNU Octave after
``kcenter``/``knorm`` with the options of the authors' demos. Both are deterministic from
``1/m`` (the first largest weight as base variable), so the weights at every gradient, the
objective and the final eigenvalues match to rounding.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask.core.equations import combine_kernels as combine
from lswmkc_dask.errors import ParameterError
from lswmkc_dask.methods import get_method
from lswmkc_dask.methods._lkam import neighbourhood_counts
from lswmkc_dask.methods._simple_mkkm import LineSearch, LocalizedSimpleMKKM, SimpleMKKM, reduced_gradient_step

SMKKM = helpers.reference("smkkm")
LSMKKM = helpers.reference("lsmkkm")
TOL = 1e-10
kernels, pre = helpers.kernels, helpers.pre


@pytest.fixture(scope="module")
def smkkm(kernels):
    return SimpleMKKM(SMKKM["k"], n_init=2, random_state=0).fit(kernels)


def _on_simplex(history):
    assert np.all(history >= 0)
    np.testing.assert_allclose(history.sum(axis=1), 1.0, atol=1e-12)


# ------------------------------------------------------------------------- SimpleMKKM
def test_smkkm_weights_per_gradient_match_authors(smkkm):
    assert smkkm.n_iter_ == SMKKM["n_iter"] == 10
    assert smkkm.converged_
    np.testing.assert_allclose(smkkm.extra_["sigma_history"], SMKKM["sigma_history"], rtol=0, atol=TOL)
    np.testing.assert_allclose(smkkm.kernel_weights_, SMKKM["sigma_final"], rtol=0, atol=TOL)


def test_smkkm_objective_and_eigenvalues_match_authors(smkkm, pre):
    np.testing.assert_allclose(smkkm.objective_, SMKKM["objective"], rtol=TOL, atol=0)
    final = combine(pre, smkkm.kernel_weights_**2)
    top = np.linalg.eigvalsh(final)[::-1][: 2 * SMKKM["k"]]
    np.testing.assert_allclose(top, SMKKM["top_eigenvalues_final_kernel"], rtol=TOL, atol=0)
    h = smkkm.extra_["h"]
    np.testing.assert_allclose(np.trace(h.T @ final @ h), SMKKM["trace_HtKH_final"], rtol=TOL)


def test_smkkm_invariants(smkkm):
    _on_simplex(smkkm.extra_["sigma_history"])
    assert np.all(np.diff(smkkm.objective_) <= 1e-12)  # a step is taken only when the cost decreases


def test_reduced_gradient_finds_the_simplex_minimum():
    """On J(s) = sum_p c_p s_p^2 (minimum at s ~ 1/c) the steps converge to the minimiser."""
    c = np.array([1.0, 2.0, 4.0, 8.0])
    h = np.zeros((1, 1))

    def cost(s):
        return float(c @ (s * s)), h

    sigma = np.full(4, 0.25)
    value = cost(sigma)[0]
    opts = LineSearch(golden_tol=1e-6, precision=1e-16)
    for _ in range(200):
        new, _, value = reduced_gradient_step(cost, sigma, 2 * c * sigma, value, opts)
        if np.max(np.abs(new - sigma)) < 1e-12:
            break
        sigma = new
    np.testing.assert_allclose(sigma, (1 / c) / np.sum(1 / c), atol=1e-5)


def test_reduced_gradient_step_without_a_decreasing_weight():
    """All weight on one kernel that is also the best: nothing to move, the weights come back as they were."""
    sigma = np.array([1.0, 0.0, 0.0])
    new, h, value = reduced_gradient_step(lambda s: (0.0, np.zeros((1, 1))), sigma, np.array([-1.0, 1.0, 1.0]),
                                          3.0, LineSearch(1e-3, 1e-16))
    assert h is None and value == 3.0
    np.testing.assert_array_equal(new, sigma)
    flat = np.full(3, 1 / 3)  # a zero gradient: no direction, no cost evaluated
    new, h, value = reduced_gradient_step(lambda s: pytest.fail("cost evaluated"), flat, np.zeros(3), 2.0,
                                          LineSearch(1e-3, 1e-16))
    assert h is None and value == 2.0 and new is flat


# ------------------------------------------------------------------------------ LSMKKM
@pytest.mark.parametrize("run", LSMKKM["runs"], ids=lambda r: f"numSel={r['numSel']}")
def test_lsmkkm_matches_authors(run, kernels, pre):
    est = LocalizedSimpleMKKM(LSMKKM["k"], n_neighbors=run["numSel"], n_init=1, random_state=0).fit(kernels)
    assert est.extra_["n_neighbors"] == run["numSel"]
    a = neighbourhood_counts(combine(pre, np.full(5, 0.2)), run["numSel"])
    assert (a.sum(), np.trace(a), a.max()) == (run["A_sum"], run["A_trace"], run["A_max"])
    assert est.n_iter_ == run["n_iter"]
    assert est.converged_
    np.testing.assert_allclose(est.extra_["sigma_history"], run["sigma_history"], rtol=0, atol=TOL)
    np.testing.assert_allclose(est.kernel_weights_, run["sigma_final"], rtol=0, atol=TOL)
    np.testing.assert_allclose(est.objective_, run["objective"], rtol=TOL, atol=0)
    local = a * combine(pre, est.kernel_weights_**2)
    top = np.linalg.eigvalsh(local)[::-1][: 2 * LSMKKM["k"]]
    np.testing.assert_allclose(top, run["top_eigenvalues_final_local_kernel"], rtol=TOL, atol=0)
    h = est.extra_["h"]
    np.testing.assert_allclose(np.trace(h.T @ local @ h), run["trace_HtAKH_final"], rtol=TOL)
    _on_simplex(est.extra_["sigma_history"])
    assert np.all(np.diff(est.objective_) <= 1e-9)


@pytest.mark.parametrize(("tau", "expected"), [(0.4, 66), (0.5, 83), (0.7, 115), (0.1 * 7, 116), (1.0, 165)])
def test_tau_rounds_half_up_as_matlab(tau, expected, kernels):
    """round(tau n): 0.5 * 165 = 82.5 -> 83 (MATLAB rounds halves away from zero), and
    0.7 * 165 = 115.4999... -> 115 but 0.1 * 7 * 165 = 115.5000...1 -> 116 (the reference's numSel)."""
    est = LocalizedSimpleMKKM(15, tau=tau, max_iter=1, n_init=1, random_state=0).fit(kernels)
    assert est.extra_["n_neighbors"] == expected
    if tau in (0.4, 0.5, 0.1 * 7):
        assert any(r["numSel"] == expected for r in LSMKKM["runs"])


def test_lsmkkm_with_every_sample_a_neighbour_is_simplemkkm(kernels, smkkm):
    """Theorem 1 of the journal version: with A all n (every neighbourhood all samples)
    UWL-SMKKM is SimpleMKKM, its objective n times as large."""
    est = LocalizedSimpleMKKM(15, n_neighbors=165, tol=1e-5, golden_tol=1e-3, golden_tol_min=1e-8,
                              numerical_precision=1e-16, n_init=1, random_state=0).fit(kernels)
    np.testing.assert_allclose(est.extra_["sigma_history"], smkkm.extra_["sigma_history"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.array(est.objective_) / 165, smkkm.objective_, rtol=1e-9)


def test_neighbourhood_counts_exclude_self_and_break_ties_in_order():
    kernel = np.array([[1.0, 0.5, 0.5, 0.1],
                       [0.5, 1.0, 0.2, 0.3],
                       [0.5, 0.2, 1.0, 0.3],
                       [0.1, 0.3, 0.3, 1.0]])
    # neighbourhoods of size 1: 0 -> {1} (tie with 2, first wins), 1 -> {0}, 2 -> {0}, 3 -> {1} (tie with 2)
    a = neighbourhood_counts(kernel, 1)
    np.testing.assert_array_equal(np.diag(a), [2, 2, 0, 0])
    assert a.sum() == 4 and np.array_equal(a, a.T)
    assert neighbourhood_counts(kernel, 4).sum() == 4 * 16
    with pytest.raises(ParameterError, match="n_neighbors"):
        neighbourhood_counts(kernel, 5)


# ------------------------------------------------------------------------ estimator API
@pytest.mark.parametrize("cls", [SimpleMKKM, LocalizedSimpleMKKM])
def test_estimator_api(cls, kernels):
    assert get_method(cls.name) is cls
    labels = cls(15, n_init=3, random_state=0).fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == 15
    params = cls(7, tol=1e-3).get_params()
    expected = {"n_clusters", "tol", "golden_tol", "golden_tol_min", "numerical_precision", "max_iter",
                "preprocess", "n_init", "random_state"}
    assert set(params) == expected | ({"tau", "n_neighbors"} if cls is LocalizedSimpleMKKM else set())
    assert params["tol"] == 1e-3 and params["n_clusters"] == 7
    twin = clone(cls(7, golden_tol=0.5))
    assert twin.get_params()["golden_tol"] == 0.5 and not hasattr(twin, "labels_")


def test_param_grids():
    assert SimpleMKKM.param_grid == {}
    taus = LocalizedSimpleMKKM.param_grid["tau"]
    assert len(taus) == 19 and taus[0] == 0.05 and taus[-1] == 0.95 and 0.4 in taus


@pytest.mark.parametrize("params", [{"tau": 0.0}, {"tau": 1.5}, {"n_neighbors": 0}, {"n_neighbors": 166},
                                    {"tol": 0.0}, {"golden_tol": -1.0}, {"numerical_precision": -1.0},
                                    {"max_iter": 0}])
def test_bad_parameters(params, kernels):
    name = next(iter(params))
    with pytest.raises(ParameterError, match=name):
        LocalizedSimpleMKKM(15, **params).fit(kernels)


def test_max_iter_caps_the_loop(kernels):
    est = SimpleMKKM(15, max_iter=3, n_init=1, random_state=0).fit(kernels)
    assert est.n_iter_ == 3 and not est.converged_
    np.testing.assert_allclose(est.extra_["sigma_history"], SMKKM["sigma_history"][:3], rtol=0, atol=TOL)

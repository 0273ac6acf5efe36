"""SwMC (lswmkc_dask.methods._swmc) against its authors' code run under GNU Octave on YALE.

The reference (tests/data/competitors/swmc_yale.json, its ``made_by`` says how it was made) is the
authors' ``SwMC`` (kylejingli/SwMC-IJCAI17, Nie, Li, Li, "Self-weighted Multiview Clustering with
Multiple Graphs", IJCAI 2017) run unchanged on the view graphs our SwMC builds from YALE's
preprocessed kernels, from the authors' own random start (saved). Four runs: n_neighbors 5, 10 (the
default) and 15 from one start, and 10 from a second start. From the same start everything is
deterministic: the weights and objective of every iteration, the lambda each S-step kept and the
number of S-steps, the final S, its Laplacian's smallest eigenvalues and its components.
"""

from __future__ import annotations

import _methods_helpers as helpers
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score

from lswmkc_dask import preprocess_kernels
from lswmkc_dask.methods._swmc import SwMC, adaptive_neighbour_graph
from lswmkc_dask.report.metrics import evaluate

REF = helpers.reference("swmc")
RUNS = REF["runs"]
IDS = [f"k{r['n_neighbors']}-seed{r['octave_seed']}" for r in RUNS]
C = 15
#: measured differences are below 1e-12 (k = 5, the longest run: 5e-14 in S, 1e-14 in the weights)
TOL = 1e-9


@pytest.fixture(scope="module")
def fits(yale):
    kernels, _ = yale
    out = {}
    for rid, run in zip(IDS, RUNS):
        # the default n_neighbors (10) is left to the default
        params = {} if run["n_neighbors"] == 10 else {"n_neighbors": run["n_neighbors"]}
        out[rid] = SwMC(C, init=run["init"], random_state=0, **params).fit(kernels)
    return out


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_view_graphs_are_the_exported_ones(run, yale):
    graphs = [adaptive_neighbour_graph(k, run["n_neighbors"]) for k in preprocess_kernels(yale[0])]
    assert [int(np.count_nonzero(a)) for a in graphs] == run["graph_nnz"]
    np.testing.assert_allclose([np.linalg.norm(a) for a in graphs], run["graph_fro_norms"], rtol=1e-13)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_weights_and_objective_per_iteration(run, fits):
    est = fits[IDS[RUNS.index(run)]]
    assert est.n_iter_ == run["n_iter"] and est.converged_
    np.testing.assert_allclose(est.extra_["init"], run["init"], rtol=1e-15, atol=0)
    np.testing.assert_allclose(est.objective_, run["objective"], rtol=TOL, atol=0)
    np.testing.assert_allclose(est.extra_["weights_history"], run["weights_after_each_iteration"], rtol=TOL, atol=0)
    np.testing.assert_allclose(est.kernel_weights_, run["weights_after_each_iteration"][-1], rtol=TOL, atol=0)
    # the S-step of iteration t + 1 uses the weights of iteration t, not renormalised
    np.testing.assert_allclose(run["weights_input_to_each_S_step"][1:], run["weights_after_each_iteration"][:-1],
                               rtol=1e-14)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_lambda_search_per_iteration(run, fits):
    est = fits[IDS[RUNS.index(run)]]
    assert est.extra_["lambda_history"].tolist() == run["lambda_kept_each_iteration"]
    assert est.extra_["inner_iterations"].tolist() == run["inner_iterations_each_iteration"]


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_final_graph_eigenvalues_and_components(run, fits):
    est = fits[IDS[RUNS.index(run)]]
    s = est.extra_["graph"]
    np.testing.assert_allclose(s[:3], run["S_final_first_3_rows"], rtol=0, atol=TOL * 1e-3)
    np.testing.assert_allclose(s.sum(axis=0)[:10], run["S_final_column_sums_first_10"], rtol=TOL, atol=0)
    np.testing.assert_allclose(np.linalg.norm(s), run["S_fro_norm_each_iteration"][-1], rtol=TOL)
    assert int(np.count_nonzero(s)) == run["S_nnz_each_iteration"][-1]
    lam = est.extra_["eigenvalues"]
    ref = np.array(run["smallest_eigenvalues_final"])
    # the c zero eigenvalues are round-off on both sides (|.| ~ 1e-15); only their being zero matches
    assert np.abs(lam[:C]).max() < 1e-12 and np.abs(ref[:C]).max() < 1e-12
    np.testing.assert_allclose(lam[C], ref[C], rtol=TOL)
    assert est.extra_["n_components"] == run["n_components"] == C
    # components are a partition: the same one, whatever the numbering
    assert adjusted_rand_score(run["labels"], est.labels_) == 1.0
    assert len(np.unique(est.labels_)) == C


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_metrics_match_the_authors_clustering_measure(run, fits, yale):
    """ACC, NMI (sqrt-normalised) and Purity of our labels equal the authors' ClusteringMeasure's."""
    scores = evaluate(yale[1], fits[IDS[RUNS.index(run)]].labels_)
    np.testing.assert_allclose([scores["ACC"], scores["NMI"], scores["Purity"]],
                               run["ClusteringMeasure_ACC_NMI_Purity"], rtol=1e-12)


def test_lambda_and_c_plus_1_eigenvalue_of_every_iteration_match_the_log(yale):
    """Stopped after 3 iterations, the fit ends on the reference's third S (its lambda and eigenvalue)."""
    run = RUNS[1]
    est = SwMC(C, init=run["init"], max_iter=3).fit(yale[0])
    assert est.n_iter_ == 3 and not est.converged_
    assert est.extra_["lambda_history"].tolist() == run["lambda_kept_each_iteration"][:3]
    np.testing.assert_allclose(est.objective_, run["objective"][:3], rtol=TOL)
    np.testing.assert_allclose(est.extra_["eigenvalues"][C], run["eigenvalue_c_plus_1_each_iteration"][2], rtol=TOL)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_invariants(run, fits, yale):
    est = fits[IDS[RUNS.index(run)]]
    s = est.extra_["graph"]
    assert np.allclose(s.sum(axis=1), 1.0, atol=1e-12) and (s >= 0).all() and (np.diag(s) == 0).all()
    graphs = [adaptive_neighbour_graph(k, run["n_neighbors"]) for k in preprocess_kernels(yale[0])]
    dist = np.array([np.linalg.norm(s - a) for a in graphs])
    np.testing.assert_allclose(est.kernel_weights_, 0.5 / dist, rtol=1e-14)
    np.testing.assert_allclose(est.objective_[-1], dist.sum(), rtol=1e-14)
    obj = np.array(est.objective_)
    assert abs(obj[-1] - obj[-2]) < 1e-8 and (np.abs(np.diff(obj[:-1])) >= 1e-8).all()
    lam = est.extra_["lambda_history"]
    assert (np.log2(lam) == np.round(np.log2(lam))).all()  # lambda starts at 1 and only doubles or halves
    assert (est.extra_["inner_iterations"] <= 50).all()


def test_reference_objective_is_not_monotone():
    """SwMC's objective sum_v ||S - A_v||_F is not monotone here, in the authors' code as in ours.

    (The S-step restarts its lambda search at 1 and solves a weighted squared problem.)"""
    obj = np.array(RUNS[0]["objective"])
    assert (np.diff(obj) > 0).any() and (np.diff(obj) < 0).any()


def test_estimator_api(yale, fits):
    kernels, _ = yale
    est = SwMC(C, init=RUNS[1]["init"])
    assert SwMC().n_neighbors == 10
    params = est.get_params()
    for name in ("n_clusters", "n_neighbors", "max_iter", "tol", "preprocess", "n_init", "random_state", "init"):
        assert name in params
    twin = clone(est)
    assert twin.get_params()["init"] == RUNS[1]["init"] and twin is not est
    labels = twin.fit_predict(kernels)
    assert labels.shape == (165,) and len(np.unique(labels)) == C
    assert np.array_equal(labels, fits[IDS[1]].labels_)

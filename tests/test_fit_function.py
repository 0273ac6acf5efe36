"""The one fit function: lswmkc(), fit_store() and fit_blocks() against the reference and the estimator."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, FitOptions, LSWMKCResult, fit_blocks, fit_store, lswmkc
from lswmkc_dask.engine.runners import LocalRunner, row_views
from lswmkc_dask.engine.solver import initialise

ALPHA_INDEX = 3  # alpha = 8 in the reference grid 2^0..2^10


def test_lswmkc_function_reproduces_the_reference(yale_store, reference):
    alpha = reference["alphas"][ALPHA_INDEX]
    result = lswmkc(yale_store, 15, alpha=alpha, random_state=0)
    assert isinstance(result, LSWMKCResult)
    assert result.n_iter == reference["iterations"][ALPHA_INDEX]
    np.testing.assert_allclose(result.kernel_weights, reference["omega"][ALPHA_INDEX], atol=1e-6)
    np.testing.assert_allclose(result.objective, reference["objective"][ALPHA_INDEX], rtol=1e-6)
    z = result.affinity
    np.testing.assert_allclose(np.asarray(z.sum(axis=1)).ravel(), 1.0, atol=1e-12)  # rows on the simplex
    assert result.labels.shape == (165,) and len(np.unique(result.labels)) == 15
    assert result.execution.startswith("in-process") and len(result.kernel_names) == yale_store.n_kernels


def test_estimator_attributes_are_the_result(yale_store):
    model = LSWMKC(15, alpha=8.0, random_state=0, max_iter=5, min_iter=5).fit(yale_store)
    result = lswmkc(yale_store, 15, alpha=8.0, random_state=0, max_iter=5, min_iter=5)
    assert model.result_.n_iter == model.n_iter_ == result.n_iter == 5
    np.testing.assert_array_equal(model.labels_, result.labels)
    np.testing.assert_array_equal(model.kernel_weights_, result.kernel_weights)
    np.testing.assert_array_equal(model.kstar_factor_, result.kstar_factor)
    assert (model.affinity_ != result.affinity).nnz == 0


def test_fit_blocks_from_a_shared_initialisation_equals_fit_store(yale_store):
    """The sweep's route (one initialisation, many alphas) gives the fit_store numbers."""
    kernels = yale_store.read_rows(0, yale_store.n_samples)
    blocks, starts = row_views(kernels, block_rows=50)  # several row blocks
    init = initialise(LocalRunner(), blocks, starts, yale_store.n_kernels, 5)
    for alpha in (2.0, 32.0):
        options = FitOptions(n_clusters=15, alpha=alpha, max_iter=6, min_iter=6)
        shared = fit_blocks(LocalRunner(), blocks, init, options)
        whole = fit_store(yale_store, options)
        assert shared.n_iter == whole.n_iter == 6
        np.testing.assert_allclose(shared.kernel_weights, whole.kernel_weights, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(shared.labels, whole.labels)
        assert shared.execution == "" and whole.execution.startswith("in-process")


def test_fit_options_are_frozen():
    options = FitOptions(n_clusters=3, alpha=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.alpha = 2.0  # type: ignore[misc]


def test_stage_seconds_cover_the_fit(yale_store):
    result = lswmkc(yale_store, 15, alpha=8.0, max_iter=3, min_iter=3)
    assert list(result.stage_seconds) == ["start", "initialise", "iterations", "cluster", "gather"]
    assert all(v >= 0 for v in result.stage_seconds.values())
    assert result.stage_seconds["iterations"] == result.fit_seconds

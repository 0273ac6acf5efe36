"""A scalar gamma (the paper's ablation "tuning gamma by grid search") against the
learned per-sample gamma_i of Eqs. (25)-(27)."""

from __future__ import annotations

import numpy as np
import pytest

from lswmkc_dask import LSWMKC
from lswmkc_dask.solver import check_gamma

pytestmark = pytest.mark.timeout(300)


def _circulant_kernels(n=60, widths=(0.05, 0.3)):
    """Gaussian kernels of points evenly spaced on a circle: every row is a shift of the
    first, so the learned gamma_i (set by each row's c nearest neighbours) is one value."""
    theta = 2 * np.pi * np.arange(n) / n
    d2 = 2.0 - 2.0 * np.cos(theta[:, None] - theta[None, :])  # squared Euclidean distances
    return np.stack([np.exp(-d2 / w) for w in widths])


def test_a_scalar_gamma_equal_to_every_learned_gamma_is_the_learned_fit():
    kernels = _circulant_kernels()
    auto = LSWMKC(n_clusters=3, alpha=4.0, max_iter=8, min_iter=8).fit(kernels)
    g = auto.gamma_
    assert np.ptp(g) <= 1e-12 * abs(g[0]), "the constructed case must have one learned gamma"
    scalar = LSWMKC(n_clusters=3, alpha=4.0, max_iter=8, min_iter=8, gamma=float(g[0])).fit(kernels)
    assert np.all(scalar.gamma_ == float(g[0]))
    assert scalar.n_iter_ == auto.n_iter_
    np.testing.assert_allclose(scalar.kernel_weights_, auto.kernel_weights_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(scalar.objective_, auto.objective_, rtol=1e-10)
    np.testing.assert_allclose((scalar.affinity_ - auto.affinity_).toarray(), 0, atol=1e-10)


def test_a_scalar_gamma_changes_the_fit(yale):
    kernels, _ = yale
    auto = LSWMKC(n_clusters=15, alpha=8.0, max_iter=10).fit(kernels)
    assert np.ptp(auto.gamma_) > 0  # YALE's learned gamma_i differ
    scalar = LSWMKC(n_clusters=15, alpha=8.0, max_iter=10, gamma=float(np.median(auto.gamma_))).fit(kernels)
    assert np.all(scalar.gamma_ == np.median(auto.gamma_))
    assert np.max(np.abs(scalar.kernel_weights_ - auto.kernel_weights_)) > 1e-6
    assert abs(scalar.objective_[-1] - auto.objective_[-1]) > 1e-6 * abs(auto.objective_[-1])


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "learned", True, None])
def test_bad_gamma_is_refused(bad, yale):
    with pytest.raises(ValueError, match="gamma must be 'auto' or a number > 0"):
        check_gamma(bad)
    kernels, _ = yale
    with pytest.raises(ValueError, match="gamma must be 'auto' or a number > 0"):
        LSWMKC(n_clusters=15, gamma=bad).fit(kernels)

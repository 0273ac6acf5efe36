"""A scalar gamma (the paper's ablation "tuning gamma by grid search") against the
learned per-sample gamma_i of Eqs. (25)-(27)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lswmkc_dask import LSWMKC
from lswmkc_dask.core.equations import check_gamma

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


def test_a_gamma_grid_in_a_sweep_and_its_ablation_figure(yale, tmp_path, capsys):
    from lswmkc_dask import cli
    from lswmkc_dask.plots import gamma_ablation_data
    from lswmkc_dask.grid.sweep import load_sweep, sweep

    kernels, labels = yale
    fast = {"max_iter": 5, "min_iter": 2, "n_init": 5, "progress": False}
    out = tmp_path / "sw"
    result = sweep(kernels, out, labels=labels, alphas=[1.0, 8.0], gammas=["auto", 0.25, 1.0, 0.25], **fast)
    names = sorted(p.name for p in (out / "runs").iterdir())
    assert names == ["alpha=1_c=5", "alpha=1_c=5_gamma=0.25", "alpha=1_c=5_gamma=1", "alpha=8_c=5",
                     "alpha=8_c=5_gamma=0.25", "alpha=8_c=5_gamma=1"]
    assert sorted(str(r["gamma"]) for r in result["rows"]) == ["0.25", "0.25", "1.0", "1.0", "auto", "auto"]
    # each scalar-gamma run equals a fit with that gamma
    one = LSWMKC(n_clusters=15, alpha=8.0, gamma=0.25, max_iter=5, min_iter=2, n_init=5).fit(kernels)
    report = json.loads((out / "runs" / "alpha=8_c=5_gamma=0.25" / "report.json").read_text())
    np.testing.assert_allclose(report["kernel_weights"], one.kernel_weights_, atol=1e-12)
    assert report["params"]["gamma"] == 0.25
    _, runs = load_sweep(out)
    assert {p.gamma for p in runs} == {"auto", 0.25, 1.0}
    gammas, curves, learned = gamma_ablation_data(runs)
    assert gammas == [0.25, 1.0]
    for g, acc in zip(gammas, curves["ACC"], strict=True):
        assert acc == max(r["ACC_honest"] for r in result["rows"] if r["gamma"] == g)
    assert learned["ACC"] == max(r["ACC_honest"] for r in result["rows"] if r["gamma"] == "auto")
    # resumed: nothing to run; the CLI grid names the same points
    assert cli.main(["sweep", "--dataset", "yale", "--alphas", "1", "8", "--gammas", "auto", "0.25", "1",
                     "--max-iter", "5", "--min-iter", "2", "--n-init", "5", "--output", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == names
    pytest.importorskip("matplotlib")
    assert cli.main(["plot", str(out)]) == 0
    assert "gamma_ablation.png" in capsys.readouterr().out
    assert (out / "plots" / "gamma_ablation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

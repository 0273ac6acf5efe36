"""Snapshots of chosen iterations (the paper's evolution figures): Z_t, the factor of
K*_t and omega_t equal those of a fit stopped at max_iter = t."""

from __future__ import annotations

import numpy as np
import pytest

from lswmkc_dask import LSWMKC

pytestmark = pytest.mark.timeout(300)


def test_snapshots_equal_fits_stopped_there(yale):
    kernels, _ = yale
    model = LSWMKC(n_clusters=15, alpha=8.0, max_iter=6, min_iter=6, snapshot_iterations=[0, 1, 3, 5, 50]).fit(kernels)
    assert sorted(model.snapshots_) == [0, 1, 3, 5]  # 50 was never reached
    z0, w0, omega0 = model.snapshots_[0]
    assert w0 is None and np.allclose(omega0, np.sqrt(1 / kernels.shape[0]))
    assert np.allclose(np.asarray(z0.sum(axis=1)).ravel(), 1.0)  # rows on the simplex
    for t in (1, 3, 5):
        z, w, omega = model.snapshots_[t]
        stopped = LSWMKC(n_clusters=15, alpha=8.0, max_iter=t, min_iter=t).fit(kernels)
        assert stopped.n_iter_ == t
        np.testing.assert_allclose(omega, stopped.kernel_weights_, atol=1e-12)
        np.testing.assert_allclose((z - stopped.affinity_).toarray(), 0.0, atol=1e-12)
        kstar, ref = w @ w.T, stopped.kstar_factor_ @ stopped.kstar_factor_.T
        np.testing.assert_allclose(kstar, ref, atol=1e-9 * np.abs(ref).max())
    # the last snapshot of a fit is its final state
    np.testing.assert_allclose((model.snapshots_[5][0] - LSWMKC(n_clusters=15, alpha=8.0, max_iter=5, min_iter=5)
                                .fit(kernels).affinity_).toarray(), 0.0, atol=1e-12)
    assert not hasattr(LSWMKC(n_clusters=15, alpha=8.0, max_iter=3, min_iter=3).fit(kernels), "snapshots_")


def test_snapshots_on_a_cluster_equal_in_process(yale, client):
    kernels, _ = yale
    here = LSWMKC(n_clusters=15, alpha=8.0, max_iter=4, min_iter=4, snapshot_iterations=[0, 2, 4]).fit(kernels)
    there = LSWMKC(n_clusters=15, alpha=8.0, max_iter=4, min_iter=4, snapshot_iterations=[0, 2, 4],
                   client=client).fit(kernels)
    assert sorted(there.snapshots_) == [0, 2, 4]
    for t in (0, 2, 4):
        np.testing.assert_allclose((here.snapshots_[t][0] - there.snapshots_[t][0]).toarray(), 0.0, atol=1e-12)
        np.testing.assert_allclose(here.snapshots_[t][2], there.snapshots_[t][2], atol=1e-12)
        if t:
            a, b = here.snapshots_[t][1], there.snapshots_[t][1]
            np.testing.assert_allclose(a @ a.T, b @ b.T, atol=1e-9)


def test_snapshots_written_with_the_run_and_plotted(yale, tmp_path, capsys):
    from lswmkc_dask import cli
    from lswmkc_dask.io.run_arrays import read_snapshots

    kernels, _ = yale
    fit_dir = tmp_path / "fit"
    assert cli.main(["fit", "--dataset", "yale", "--alpha", "8", "--max-iter", "6", "--min-iter", "6",
                     "--snapshots", "0", "1", "5", "--output", str(fit_dir), "--quiet"]) == 0
    saved = read_snapshots(fit_dir)
    model = LSWMKC(n_clusters=15, alpha=8.0, max_iter=6, min_iter=6, snapshot_iterations=[0, 1, 5]).fit(kernels)
    assert sorted(saved) == [0, 1, 5]
    for t in (0, 1, 5):
        np.testing.assert_allclose((saved[t][0] - model.snapshots_[t][0]).toarray(), 0.0, atol=1e-12)
        np.testing.assert_allclose(saved[t][2], model.snapshots_[t][2], atol=1e-12)
    assert saved[0][1] is None and saved[5][1].shape[0] == 165
    sweep_dir = tmp_path / "sw"
    assert cli.main(["sweep", "--dataset", "yale", "--alphas", "1", "8", "--max-iter", "5", "--min-iter", "2",
                     "--n-init", "5", "--snapshots", "0", "2", "--output", str(sweep_dir), "--quiet"]) == 0
    assert sorted(read_snapshots(sweep_dir / "runs" / "alpha=8_c=5")) == [0, 2]
    pytest.importorskip("matplotlib")
    capsys.readouterr()
    for directory in (fit_dir, sweep_dir):
        assert cli.main(["plot", str(directory)]) == 0
        out = capsys.readouterr().out
        for name in ("evolution_heatmaps.png", "evolution_tsne.png"):
            assert f"{directory / 'plots' / name}" in out
            assert (directory / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_handwritten_sweep_with_snapshots_and_gammas_is_plotted(tmp_path, capsys):
    """Handwritten (n = 2000) as a user runs it: a sweep with snapshots and a gamma grid,
    then `lswmkc plot`: the evolution heatmaps, the t-SNE panels and the gamma ablation
    are written from it, and the snapshots equal the run's final Z at the last iteration."""
    from lswmkc_dask import cli
    from lswmkc_dask.io.run_arrays import read_snapshots, run_arrays

    pytest.importorskip("matplotlib")
    sweep_dir = tmp_path / "hw"
    assert cli.main(["sweep", "--dataset", "handwritten", "--alphas", "64", "--gammas", "auto", "1",
                     "--max-iter", "3", "--min-iter", "3", "--n-init", "3", "--snapshots", "0", "1", "3",
                     "--output", str(sweep_dir), "--quiet"]) == 0
    run = sweep_dir / "runs" / "alpha=64_c=5"
    saved = read_snapshots(run)
    assert sorted(saved) == [0, 1, 3] and saved[0][0].shape == (2000, 2000)
    final = run_arrays(run)[0]
    assert abs(saved[3][0] - final).max() < 1e-12  # the snapshot at the last iteration is the final Z
    capsys.readouterr()
    assert cli.main(["plot", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    for name in ("evolution_heatmaps.png", "evolution_tsne.png", "gamma_ablation.png"):
        assert f"{sweep_dir / 'plots' / name}" in out, out
        assert (sweep_dir / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""Sweeps: same results as single fits, resumable, both modes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lswmkc_dask import LSWMKC
from lswmkc_dask.grid.sweep import GridPoint, load_sweep, sweep
from lswmkc_dask.io.run_arrays import run_arrays


def _check_against_reference(runs, reference):
    for i, a in enumerate(reference["alphas"]):
        rep = runs[GridPoint(a, 5)]
        assert rep["n_iter"] == reference["iterations"][i], f"alpha={a}"
        np.testing.assert_allclose(rep["kernel_weights"], reference["omega"][i], atol=1e-6, err_msg=f"alpha={a}")
        np.testing.assert_allclose(rep["objective"], reference["objective"][i], rtol=1e-6, err_msg=f"alpha={a}")


def test_task_sweep_equals_single_fits_and_resumes(yale, yale_store, reference, client, tmp_path, capsys):
    kernels, labels = yale
    out = tmp_path / "sweep"
    summary = sweep(kernels, out, labels=labels, client=client)
    config, runs = load_sweep(out)
    assert len(runs) == 11 and config["n_clusters"] == 15
    _check_against_reference(runs, reference)
    # A sweep point is the same fit as LSWMKC.fit for that alpha.
    single = LSWMKC(15, alpha=8.0, client=client, random_state=0).fit(yale_store)
    rep = runs[GridPoint(8.0, 5)]
    np.testing.assert_allclose(rep["kernel_weights"], single.kernel_weights_, atol=1e-12)
    assert rep["metrics"]["honest"] == pytest.approx(single.evaluate(labels))
    assert summary["best_by_paper_ACC"]["alpha"] == 8.0
    assert summary["best_by_paper_ACC"]["ACC_paper"] >= 0.66
    csv_lines = (out / "summary.csv").read_text().splitlines()
    assert len(csv_lines) == 12 and csv_lines[0].startswith("alpha,n_neighbors,n_iter,seconds,ACC_honest")
    pred = np.loadtxt(out / "runs" / "alpha=8_c=5" / "labels.csv", delimiter=",", skiprows=1, dtype=int)[:, 1]
    np.testing.assert_array_equal(pred, single.labels_)

    # Resume: remove two finished points; the rerun computes exactly those two.
    import shutil

    kept = (out / "runs" / "alpha=1_c=5" / "report.json").stat().st_mtime_ns
    for name in ("alpha=4_c=5", "alpha=512_c=5"):
        shutil.rmtree(out / "runs" / name)
    capsys.readouterr()
    sweep(kernels, out, labels=labels, client=client)
    err = capsys.readouterr().err
    assert "2 of 11 grid points to run (9 done)" in err
    assert (out / "runs" / "alpha=1_c=5" / "report.json").stat().st_mtime_ns == kept
    _, runs2 = load_sweep(out)
    _check_against_reference(runs2, reference)
    # Other settings in the same directory are refused.
    with pytest.raises(ValueError, match="other settings"):
        sweep(kernels, out, labels=labels, client=client, max_iter=50)


def test_blockwise_equals_task_mode(yale, client, tmp_path):
    kernels, labels = yale
    kw = dict(labels=labels, alphas=[2.0, 256.0], n_neighbors=[4, 5], client=client, progress=False, block_rows=40)
    sweep(kernels, tmp_path / "t", mode="task", **kw)
    sweep(kernels, tmp_path / "b", mode="blockwise", concurrency=2, **kw)
    _, t = load_sweep(tmp_path / "t")
    _, b = load_sweep(tmp_path / "b")
    assert set(t) == set(b) and len(t) == 4
    for p in t:
        assert t[p]["n_iter"] == b[p]["n_iter"]
        np.testing.assert_allclose(t[p]["kernel_weights"], b[p]["kernel_weights"], atol=1e-10)
        np.testing.assert_allclose(t[p]["objective"], b[p]["objective"], rtol=1e-10)
    assert t[GridPoint(256.0, 5)]["n_iter"] == 25


def test_sweep_files_are_complete(yale, client, tmp_path):

    kernels, labels = yale
    out = tmp_path / "s"
    sweep(kernels, out, labels=labels, alphas=[16.0], client=client, progress=False)
    run = out / "runs" / "alpha=16_c=5"
    z, w = run_arrays(run)
    np.testing.assert_allclose(np.asarray(z.sum(axis=1)).ravel(), 1.0, atol=1e-12)
    report = json.loads((run / "report.json").read_text())
    assert report["kstar_rank"] == w.shape[1] and report["affinity_nnz"] == z.nnz
    assert np.linalg.eigvalsh(w @ w.T).min() > -1e-10  # K* is PSD
    assert (out / "labels_true.csv").read_text().splitlines()[1] == "0,1"


def test_eig_threads_shared_between_concurrent_fits():
    from lswmkc_dask.grid._routes import eig_threads_per_fit as _eig_threads_per_fit

    local = {f"tcp://127.0.0.1:{p}": {"host": "127.0.0.1", "nthreads": 1} for p in (1, 2)}
    assert _eig_threads_per_fit(local, 1) is None  # one fit: all cores of the machine
    assert _eig_threads_per_fit(local, 2) == 1  # 2 fits on a 2-core machine: 1 thread each
    big = {f"tcp://10.0.0.{h}:{p}": {"host": f"10.0.0.{h}", "nthreads": 1} for h in (1, 2) for p in range(8)}
    assert _eig_threads_per_fit(big, 2) == 4  # two 8-core machines, 2 fits may meet on one


@pytest.mark.timeout(60)
def test_output_checked_before_kernels_are_read(tmp_path):
    # An output that cannot be used is reported before any kernel is read or checked: the
    # kernels here are bad too (a NaN in kernel 0), and the output's error comes first.
    from lswmkc_dask.errors import KernelInputError
    from lswmkc_dask.errors import ForeignOutputError

    bad = np.stack([np.eye(20), np.eye(20)])
    bad[0, 3, 4] = np.nan
    with pytest.raises(KernelInputError):
        sweep(bad, tmp_path / "fresh", n_clusters=2, alphas=[1.0])
    assert not (tmp_path / "fresh").exists()
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    with pytest.raises(ForeignOutputError, match="is a file"):
        sweep(bad, taken, n_clusters=2, alphas=[1.0])
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.csv").write_text("1,2\n")
    with pytest.raises(ForeignOutputError):
        sweep(bad, theirs, n_clusters=2, alphas=[1.0])
    assert taken.read_text() == "mine" and [p.name for p in theirs.iterdir()] == ["data.csv"]


@pytest.mark.timeout(120)
def test_repeated_grid_values_count_once(yale, client, tmp_path):
    # --alphas 1 1 8 --n-neighbors 5 5: two grid points; it used to stop after the first
    # fit, its run directory "already existing" for the repeated alpha.
    kernels, labels = yale
    out = tmp_path / "s"
    sweep(kernels, out, labels=labels, alphas=[1.0, 1.0, 8.0], n_neighbors=[5, 5], client=client, max_iter=3,
          n_init=2, progress=False)
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["alpha=1_c=5", "alpha=8_c=5"]
    config, runs = load_sweep(out)
    assert sorted(p.alpha for p in runs) == [1.0, 8.0]


@pytest.mark.timeout(120)
def test_summary_covers_every_grid_point_in_the_directory(yale, client, tmp_path):
    # A second call with another grid in the same directory: the summary lists every
    # finished point (as `lswmkc plot` shows them), not only the second grid's.
    kernels, labels = yale
    out = tmp_path / "s"
    quick = dict(labels=labels, client=client, max_iter=3, n_init=2, progress=False)
    sweep(kernels, out, alphas=[1.0, 8.0], **quick)
    summary = sweep(kernels, out, alphas=[8.0, 3.0], **quick)
    assert [r["alpha"] for r in summary["rows"]] == [1.0, 3.0, 8.0]
    on_disk = json.loads((out / "summary.json").read_text())
    assert [r["alpha"] for r in on_disk["rows"]] == [1.0, 3.0, 8.0]
    best = max(summary["rows"], key=lambda r: r["ACC_honest"])
    assert summary["best_by_honest_ACC"]["alpha"] == best["alpha"]

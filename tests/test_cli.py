"""The `lswmkc` command: run as a user runs it (a real subprocess) where it starts a
cluster or is the one run of its kind; its refusals and in-process fits through
``cli.main`` in this process (:func:`_helpers.lswmkc_main`: the same exit status and
output, without a Python start-up each)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from _helpers import lswmkc, lswmkc_main

from lswmkc_dask import open_store


def test_fit_dataset_yale_writes_report(tmp_path, reference):
    out = tmp_path / "out"
    proc = lswmkc("fit", "--dataset", "yale", "--alpha", "8", "--output", str(out), "--n-workers", "2")
    assert "iterations       20 (converged)" in proc.stdout
    assert "metrics, paper   ACC" in proc.stdout
    assert "iter  20" in proc.stderr  # progress: one line per iteration
    report = json.loads((out / "report.json").read_text())
    assert report["n_iter"] == 20
    np.testing.assert_allclose(report["kernel_weights"], reference["omega"][3], atol=1e-6)
    np.testing.assert_allclose(report["objective"], reference["objective"][3], rtol=1e-6)
    assert report["metrics"]["paper"]["ACC"] >= 0.66
    assert (out / "labels.csv").read_text().startswith("sample,predicted_label\n")
    labels = np.loadtxt(out / "labels.csv", delimiter=",", skiprows=1, dtype=int)
    assert labels.shape == (165, 2) and len(np.unique(labels[:, 1])) == 15
    # The output exists now: a second run refuses and leaves it as it was.
    again = lswmkc_main("fit", "--dataset", "yale", "--alpha", "8", "--output", str(out))
    assert again.returncode == 2
    assert "already exists" in again.stderr and "--overwrite" in again.stderr
    assert json.loads((out / "report.json").read_text()) == report


def test_prepare_then_fit_from_store(tmp_path, yale):
    kernels, labels = yale
    np.savez(tmp_path / "k.npz", kernels=kernels, labels=labels)
    store = tmp_path / "k.zarr"
    proc = lswmkc("prepare", str(tmp_path / "k.npz"), str(store), "--block-rows", "50")
    assert "5 kernels x 165 samples, chunks of 50 rows" in proc.stdout
    assert open_store(store).block_rows == 50
    proc = lswmkc("fit", str(store), "--alpha", "512", "--n-workers", "1", "--quiet", "--output", str(tmp_path / "r"))
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["n_iter"] == 28 and report["params"]["n_clusters"] == 15


def test_prepare_features(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 5)) * 6
    y = np.repeat(np.arange(3), 20)
    for v in range(2):
        x = centres[y] + rng.normal(size=(60, 5))
        np.savetxt(tmp_path / f"v{v}.csv", np.column_stack([x, y]), delimiter=",")
    proc = lswmkc_main("prepare", "--features", str(tmp_path / "v0.csv"), str(tmp_path / "v1.csv"), "--label-column",
                       "-1", str(tmp_path / "f.zarr"), check=True)
    assert "2 kernels x 60 samples" in proc.stdout
    proc = lswmkc("fit", str(tmp_path / "f.zarr"), "--alpha", "1", "--n-workers", "1", "--quiet")
    assert "metrics, honest  ACC 1.0000" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["fit", "missing.mat"], "input file not found: missing.mat"),
        (["fit", "--dataset", "yale", "--n-clusters", "1"], "--n-clusters"),
        (["fit", "--dataset", "yale", "--alpha", "-2"], "--alpha"),
        (["fit", "--dataset", "yale", "--n-neighbors", "164"], "--n-neighbors must be an integer in [1, n_samples - 2 = 163]"),
        (["prepare", "only-one-arg.mat"], "usage: lswmkc prepare INPUT OUTPUT.zarr"),
        # checked before the input is read (no "LSWMKC on ..." line first)
        (["fit", "missing.mat", "--alpha", "-1"], "argument --alpha: must be a finite number >= 0, got -1"),
        (["sweep", "missing.mat", "--alphas", "1", "nan", "--output", "o"],
         "argument --alphas: must be a finite number >= 0, got nan"),
        (["fit", "missing.mat", "--max-iter", "0"], "argument --max-iter: must be an integer >= 1, got 0"),
        (["sweep", "missing.mat", "--n-neighbors", "5", "x", "--output", "o"],
         "argument --n-neighbors: expected an integer, got 'x'"),
        (["fit", "missing.mat", "--scheduler", "tcp://127.0.0.1:9", "--n-workers", "2"],
         "--n-workers starts a private LocalCluster; it cannot be used with --scheduler"),
    ],
)
def test_errors_exit_2_with_message(args, message):
    proc = lswmkc_main(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and "LSWMKC on" not in proc.stderr
    # Errors name the flags, not the Python keywords (n_clusters, n_neighbors, alpha=).
    assert "n_clusters" not in proc.stderr and "n_neighbors" not in proc.stderr


def test_fit_eig_driver_flag(tmp_path, reference):
    """--eig-driver forces the eigen route of every iteration (report.json says which),
    with the reference's weights."""
    out = tmp_path / "evd"
    lswmkc_main("fit", "--dataset", "yale", "--alpha", "8", "--eig-driver", "evd", "--quiet", "--output", str(out),
                check=True)
    report = json.loads((out / "report.json").read_text())
    assert set(report["eig_drivers"]) == {"evd"} and len(report["eig_drivers"]) == report["n_iter"]
    np.testing.assert_allclose(report["kernel_weights"], reference["omega"][3], atol=1e-6)
    proc = lswmkc_main("fit", "--dataset", "yale", "--eig-driver", "stein")
    assert proc.returncode != 0 and "--eig-driver" in proc.stderr


def test_min_iter_flag_matches_the_python_api(tmp_path, yale):
    from lswmkc_dask import LSWMKC

    kernels, labels = yale
    model = LSWMKC(15, alpha=8.0, min_iter=5, tol=1e-2, n_init=2, random_state=0).fit(kernels)
    assert model.n_iter_ < 20  # the stop rule fired before the default min_iter
    lswmkc_main("fit", "--dataset", "yale", "--alpha", "8", "--min-iter", "5", "--tol", "1e-2", "--n-init", "2",
                "--random-state", "0", "--quiet", "--output", tmp_path / "f", check=True)
    report = json.loads((tmp_path / "f" / "report.json").read_text())
    assert report["n_iter"] == model.n_iter_ and report["params"]["min_iter"] == 5
    np.testing.assert_allclose(report["kernel_weights"], model.kernel_weights_, atol=1e-12)

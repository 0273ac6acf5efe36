"""Unlabelled feature views swept from the command line, and the parser's one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_wine

from _helpers import lswmkc, lswmkc_main
from lswmkc_dask import KernelInputError, LSWMKC


@pytest.fixture
def wine_views(tmp_path):
    x, _ = load_wine(return_X_y=True)
    paths = [tmp_path / "v0.csv", tmp_path / "v1.csv"]
    np.savetxt(paths[0], x[:, :6], delimiter=",")
    np.savetxt(paths[1], x[:, 6:], delimiter=",")
    return paths


@pytest.mark.parametrize("ks", [["3"], ["2", "3"]])
def test_sweep_of_feature_views_with_n_clusters(wine_views, tmp_path, ks):
    out = tmp_path / "sw"
    proc = lswmkc("sweep", "--features", *wine_views, "--n-clusters", *ks, "--alphas", "1", "4",
                  "--output", out, timeout=600)
    assert f"wrote {out}/summary.csv" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["rows"] if isinstance(summary, dict) and "rows" in summary else summary
    text = json.dumps(rows)
    for k in ks:
        assert f'"n_clusters": {k}' in text
    # every grid point ran: two alphas at each k
    assert len(list((out / "runs").iterdir())) == 2


def test_abbreviated_flag_is_not_taken_for_the_full_one():
    proc = lswmkc_main("fit", "--dataset", "yale", "--n-cluster", "15")
    assert proc.returncode == 2
    assert proc.stderr == "lswmkc fit: error: unrecognized argument --n-cluster; did you mean --n-clusters?\n"


def test_a_bad_value_is_one_line_without_the_usage():
    proc = lswmkc_main("fit", "--dataset", "yale", "--alpha", "-1")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "usage:" not in proc.stderr, proc.stderr
    assert "argument --alpha: must be a finite number >= 0, got -1" in proc.stderr


def test_complex_and_text_feature_values_name_the_view():
    rng = np.random.default_rng(0)
    good = rng.random((30, 4))
    with pytest.raises(KernelInputError, match=r"^view 1 has complex values"):
        LSWMKC(n_clusters=2, kernel="rbf").fit([good, rng.random((30, 3)) + 1j])
    text = np.array([["1", "2", "3"]] * 30)
    text[4, 2] = "x"
    with pytest.raises(KernelInputError, match=r"^view 1: sample 4, feature 2: 'x' is not a number"):
        LSWMKC(n_clusters=2, kernel="rbf").fit([good, text])

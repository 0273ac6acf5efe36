"""NMI is named by its normalisation: ``NMI`` is the authors' (the larger entropy,
scikit-learn's ``average_method="max"``), and ``NMI_arithmetic`` (scikit-learn's default)
stands beside it in ``evaluate`` and report.json."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from lswmkc_dask.cli import main
from lswmkc_dask.report.metrics import NMI_NORMALIZATION, evaluate


def _labels():
    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(4), 30)
    p = np.where(rng.random(y.size) < 0.35, rng.integers(0, 5, y.size), y)  # 5 clusters, some noise
    return y, p


def test_evaluate_nmi_keys_equal_scikit_learn_with_the_named_normalization():
    y, p = _labels()
    got = evaluate(y, p)
    assert NMI_NORMALIZATION == {"NMI": "max", "NMI_arithmetic": "arithmetic"}
    for key, method in NMI_NORMALIZATION.items():
        assert got[key] == pytest.approx(normalized_mutual_info_score(y, p, average_method=method), abs=1e-12), key
    # NMI_arithmetic is what a user of scikit-learn gets by default; here they differ.
    assert got["NMI_arithmetic"] == pytest.approx(normalized_mutual_info_score(y, p), abs=1e-12)
    assert got["NMI_arithmetic"] > got["NMI"] + 0.01
    # Trivial cases follow scikit-learn for both: one cluster (no information), identical.
    for pred in (np.zeros_like(y), y):
        got = evaluate(y, pred)
        for key, method in NMI_NORMALIZATION.items():
            assert got[key] == pytest.approx(normalized_mutual_info_score(y, pred, average_method=method), abs=1e-12)


def test_report_json_names_the_normalization_and_carries_both(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", "--dataset", "yale", "--alpha", "8", "--quiet", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "NMI_arithmetic" not in printed  # the printed line keeps the four metrics
    report = json.loads((out / "report.json").read_text())
    assert report["nmi_normalization"] == {"NMI": "max", "NMI_arithmetic": "arithmetic"}
    from lswmkc_dask.datasets import load_yale

    _, labels = load_yale()
    pred = np.loadtxt(out / "labels.csv", delimiter=",", skiprows=1, usecols=1)
    honest = report["metrics"]["honest"]
    for key, method in report["nmi_normalization"].items():
        assert honest[key] == pytest.approx(normalized_mutual_info_score(labels, pred, average_method=method),
                                            abs=1e-12), key
    assert honest["NMI_arithmetic"] > honest["NMI"]
    paper = report["metrics"]["paper"]  # each the maximum over the runs, both normalisations
    assert set(paper) == {"ACC", "NMI", "Purity", "ARI", "NMI_arithmetic"} and paper["NMI_arithmetic"] > paper["NMI"]

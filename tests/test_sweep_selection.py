"""A sweep selects its grid point (alpha and n_neighbors) without labels.

The score (the silhouette of each grid point's partition on the average preprocessed
base kernel) is checked against scikit-learn's silhouette on the dense kernel; the
choice must not depend on the labels given, nor on where the sweep ran.
"""

from __future__ import annotations

import json
import signal

import numpy as np
import pytest

from lswmkc_dask import cli, prepare, preprocess_kernels, selected_model
from lswmkc_dask.grid.selection import silhouette_kernel, silhouette_sums_block
from lswmkc_dask.grid.sweep import SELECTION_CRITERION, sweep
from lswmkc_dask.grid.scoring import label_free_scores

ALPHAS = [1.0, 8.0, 128.0]
FAST = dict(max_iter=5, min_iter=2, n_init=5, progress=False)


def _labels_of(directory, row):
    name = f"alpha={row['alpha']:g}_c={row['n_neighbors']}"
    body = (directory / "runs" / name / "labels.csv").read_text().splitlines()[1:]
    return np.asarray([int(line.split(",")[1]) for line in body])


@pytest.fixture(scope="module")
def swept(yale, tmp_path_factory):
    """YALE swept with its labels, without labels and with permuted labels."""
    kernels, labels = yale
    root = tmp_path_factory.mktemp("selection")
    perm = np.random.default_rng(0).permutation(labels)
    results = {
        "labels": sweep(kernels, root / "with", labels=labels, alphas=ALPHAS, **FAST),
        "none": sweep(kernels, root / "without", n_clusters=15, alphas=ALPHAS, **FAST),
        "permuted": sweep(kernels, root / "permuted", labels=perm, alphas=ALPHAS, **FAST),
    }
    return root, results


@pytest.mark.timeout(600)
def test_score_is_the_silhouette_on_the_average_kernel(yale, swept):
    kernels, _ = yale
    root, results = swept
    average = preprocess_kernels(kernels).mean(axis=0)
    for row in results["labels"]["rows"]:
        expected = silhouette_kernel(average, _labels_of(root / "with", row))
        assert row[SELECTION_CRITERION] == pytest.approx(expected, abs=1e-12)
        report = json.loads((root / "with" / "runs" / f"alpha={row['alpha']:g}_c=5" / "report.json").read_text())
        assert report["label_free"][SELECTION_CRITERION] == row[SELECTION_CRITERION]


@pytest.mark.timeout(600)
def test_selection_never_reads_labels(swept):
    _, results = swept
    chosen = {k: r["selected"] for k, r in results.items()}
    keys = ("alpha", "n_neighbors", "n_clusters", "criterion", "score", "scores")
    assert {k: chosen["labels"][k] for k in keys} == {k: chosen["none"][k] for k in keys} \
        == {k: chosen["permuted"][k] for k in keys}
    assert chosen["labels"]["criterion"] == SELECTION_CRITERION and chosen["labels"]["n_clusters"] == 15
    best = max(r[SELECTION_CRITERION] for r in results["none"]["rows"])
    assert chosen["none"]["default"]["criterion_pick"]["score"] == best  # the largest score: weighed (issue 52)
    at_choice = next(r for r in results["none"]["rows"] if r["alpha"] == chosen["none"]["alpha"])
    assert chosen["none"]["score"] == at_choice[SELECTION_CRITERION]
    assert {k: chosen["labels"]["default"][k] for k in ("kept", "win", "spread", "candidate")} == {
        k: chosen["none"]["default"][k] for k in ("kept", "win", "spread", "candidate")}
    # with labels the regret against the best honest ACC is reported; without, not
    rows = results["labels"]["rows"]
    at = next(r for r in rows if r["alpha"] == chosen["labels"]["alpha"])
    regret = 100 * (max(r["ACC_honest"] for r in rows) - at["ACC_honest"])
    assert chosen["labels"]["regret_honest_ACC_points"] == pytest.approx(regret, abs=1e-3)
    assert "regret_honest_ACC_points" not in chosen["none"]


@pytest.mark.timeout(600)
def test_selected_model_fits_the_chosen_point(swept, yale):
    root, results = swept
    model = selected_model(root / "without")
    chosen = results["none"]["selected"]
    assert (model.alpha, model.n_neighbors, model.n_clusters) == (chosen["alpha"], chosen["n_neighbors"], 15)
    assert selected_model(results["none"], max_iter=3).max_iter == 3
    with pytest.raises(FileNotFoundError, match="no summary.json"):
        selected_model(root)


def test_blockwise_sums_equal_scikit_learn(rng):
    # the block form against silhouette_score on the dense kernel, blocks of every size
    x = rng.normal(size=(70, 3))
    kernels = np.stack([x @ x.T, np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 3), (x @ x.T + 1) ** 2])
    pre = preprocess_kernels(kernels)
    parts = np.stack([rng.integers(0, 4, 70), (x[:, 0] > 0).astype(int), np.r_[np.zeros(69, int), 1],
                      np.zeros(70, int)])
    expected = [silhouette_kernel(pre.mean(axis=0), y) for y in parts[:3]] + [0.0]
    for b in (1, 13, 70):
        total = sum(silhouette_sums_block(pre[:, s:s + b], s, parts) for s in range(0, 70, b)) / 70
        assert np.allclose(total, expected, atol=1e-12), b


@pytest.mark.timeout(600)
def test_scores_on_the_workers_equal_those_in_process(yale, tmp_path, client):
    # a store on disk: one task per row block on the workers, the same numbers
    kernels, labels = yale
    store = prepare(kernels, tmp_path / "y.zarr", labels=labels, block_rows=40)
    parts = np.stack([labels, np.roll(labels, 7), labels % 3])
    here = label_free_scores(store, parts)
    there = label_free_scores(store, parts, client=client)
    assert np.allclose(here, there, atol=1e-13)
    assert here[0] > here[1]  # the true classes are better clusters than shifted ones


@pytest.mark.timeout(600)
def test_cli_marks_and_names_the_selection(swept, capsys):
    root, results = swept
    saved = signal.getsignal(signal.SIGTERM)
    try:  # resuming the finished sweep: nothing to fit, the table and the choice printed
        assert cli.main(["sweep", "--dataset", "yale", "--alphas", "1", "8", "128", "--max-iter", "5", "--min-iter",
                         "2", "--n-init", "5", "--output", str(root / "with"), "--quiet"]) == 0
    finally:
        signal.signal(signal.SIGTERM, saved)
    out = capsys.readouterr().out
    chosen = results["labels"]["selected"]
    marked = [line for line in out.splitlines() if line.startswith("* ") and line.split()[1] != "selected"]
    assert len(marked) == 1 and float(marked[0].split()[1]) == chosen["alpha"]
    assert f"selected without labels: alpha={chosen['alpha']:g} c=5 k=15 ({SELECTION_CRITERION}" in out
    assert "points below the grid's best" in out

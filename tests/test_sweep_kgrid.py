"""k as a sweep's grid axis: one fit per alpha, one clustering per k.

The iterations of LSWMKC do not depend on k, so a k grid must not repeat them: the
fits are counted, the labels at each k must equal those of a sweep run at that k
alone, and the label-free choice (which now covers k) must not depend on the labels.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lswmkc_dask import cli
from lswmkc_dask.engine import fit as fit_module
from lswmkc_dask.grid.sweep import (
    DEFAULT_N_CLUSTERS,
    SELECTION_CRITERION,
    n_clusters_grid,
    sweep,
)

ALPHAS = [1.0, 8.0]
KS = [3, 15]
FAST = dict(max_iter=5, min_iter=2, n_init=5, progress=False)


def _labels(path):
    body = path.read_text().splitlines()[1:]
    return np.asarray([int(line.split(",")[1]) for line in body])


@pytest.fixture
def count_fits(monkeypatch):
    """Counts the LSWMKC iteration loops run in this process."""
    calls = []
    real = fit_module.iterate

    def counted(*args, **kwargs):
        calls.append(args[3])  # alpha
        return real(*args, **kwargs)

    monkeypatch.setattr(fit_module, "iterate", counted)
    return calls


@pytest.mark.timeout(600)
def test_a_k_grid_costs_one_fit_per_alpha(yale, tmp_path, count_fits):
    kernels, labels = yale
    result = sweep(kernels, tmp_path / "grid", n_clusters=KS, alphas=ALPHAS, labels=labels, **FAST)
    assert sorted(count_fits) == ALPHAS  # one fit per alpha, not one per (alpha, k)
    runs = sorted(p.name for p in (tmp_path / "grid" / "runs").iterdir())
    assert runs == ["alpha=1_c=5", "alpha=8_c=5"]
    assert sorted((r["alpha"], r["n_clusters"]) for r in result["rows"]) == [(a, k) for a in ALPHAS for k in KS]
    for run in runs:
        files = {p.name for p in (tmp_path / "grid" / "runs" / run).iterdir()}
        assert {"labels_k=3.csv", "labels_k=15.csv", "labels.csv"} <= files
        report = json.loads((tmp_path / "grid" / "runs" / run / "report.json").read_text())
        assert sorted(report["by_n_clusters"]) == ["15", "3"]
    # resuming the same grid runs nothing
    count_fits.clear()
    again = sweep(kernels, tmp_path / "grid", n_clusters=KS, alphas=ALPHAS, labels=labels, **FAST)
    assert count_fits == [] and again["rows"] == result["rows"]
    # another k grid is other settings, refused
    with pytest.raises(ValueError, match="other settings"):
        sweep(kernels, tmp_path / "grid", n_clusters=[3, 4], alphas=ALPHAS, labels=labels, **FAST)


@pytest.mark.timeout(600)
def test_labels_at_each_k_equal_a_sweep_at_that_k(yale, tmp_path):
    kernels, labels = yale
    grid = sweep(kernels, tmp_path / "grid", n_clusters=KS, alphas=[8.0], labels=labels, **FAST)
    for k in KS:
        single = sweep(kernels, tmp_path / f"k{k}", n_clusters=k, alphas=[8.0], labels=labels, **FAST)
        np.testing.assert_array_equal(
            _labels(tmp_path / "grid" / "runs" / "alpha=8_c=5" / f"labels_k={k}.csv"),
            _labels(tmp_path / f"k{k}" / "runs" / "alpha=8_c=5" / "labels.csv"),
        )
        (row,) = [r for r in grid["rows"] if r["n_clusters"] == k]
        (alone,) = single["rows"]
        for key in ("ACC_honest", "NMI_honest", "ACC_paper", "ARI_paper", SELECTION_CRITERION):
            assert row[key] == pytest.approx(alone[key], abs=1e-12), (k, key)


@pytest.mark.timeout(600)
def test_the_choice_of_alpha_and_k_never_reads_labels(yale, tmp_path):
    kernels, labels = yale
    perm = np.random.default_rng(1).permutation(labels)
    chosen = {
        "labels": sweep(kernels, tmp_path / "a", n_clusters=KS, alphas=ALPHAS, labels=labels, **FAST)["selected"],
        "none": sweep(kernels, tmp_path / "b", n_clusters=KS, alphas=ALPHAS, **FAST)["selected"],
        "permuted": sweep(kernels, tmp_path / "c", n_clusters=KS, alphas=ALPHAS, labels=perm, **FAST)["selected"],
    }
    keys = ("alpha", "n_neighbors", "n_clusters", "criterion", "score", "scores", "n_clusters_scores")
    assert {k: chosen["labels"][k] for k in keys} == {k: chosen["none"][k] for k in keys} \
        == {k: chosen["permuted"][k] for k in keys}
    best = max(s["score"] for s in chosen["none"]["scores"])
    assert chosen["none"]["default"]["criterion_pick"]["score"] == best  # the criterion's own pick, then weighed
    assert chosen["none"]["n_clusters_scores"] == {
        str(k): max(s["score"] for s in chosen["none"]["scores"] if s["n_clusters"] == k) for k in KS
    }
    assert chosen["labels"]["n_clusters_true"] == 15 and "n_clusters_true" not in chosen["none"]
    assert "regret_honest_ACC_points_all_k" in chosen["labels"]


def test_the_default_k_grid():
    assert n_clusters_grid(None, n_labels=7) == [7]
    assert n_clusters_grid(None, None, 100) == list(DEFAULT_N_CLUSTERS) == list(range(2, 13))
    assert n_clusters_grid(None, None, 6) == [2, 3, 4, 5]
    assert n_clusters_grid([5, 3, 5]) == [3, 5]
    assert n_clusters_grid(4) == [4]
    with pytest.raises(ValueError, match=r"n_clusters must be an integer in \[2, n_samples - 1 = 9\], got 2.5"):
        n_clusters_grid([2, 2.5], None, 10)


@pytest.mark.timeout(600)
def test_without_labels_or_k_the_cli_sweeps_the_default_grid(yale, tmp_path, capsys):
    kernels, _ = yale
    np.savez(tmp_path / "k.npz", kernels=kernels)  # no labels in the file
    rc = cli.main([
        "sweep", str(tmp_path / "k.npz"), "--alphas", "8", "--output", str(tmp_path / "sw"),
        "--max-iter", "5", "--min-iter", "2", "--n-init", "5", "--quiet",
    ])
    assert rc == 0
    summary = json.loads((tmp_path / "sw" / "summary.json").read_text())
    assert sorted(r["n_clusters"] for r in summary["rows"]) == list(DEFAULT_N_CLUSTERS)
    chosen = summary["selected"]
    out = capsys.readouterr().out
    # 15 classes, k grid 2..12: the silhouette's k and prediction strength's disagree, so no k is reported
    assert chosen["k_determined"] is False
    assert (f"selected without labels: k not determined (the largest {SELECTION_CRITERION} {chosen['score']:.4f} is "
            f"at alpha=8 c=5 k={chosen['n_clusters']};") in out
    # no labels: one line per alpha with the score at each k (not one row of "-" per grid point), the choice starred
    (row,) = [line.split() for line in out.splitlines() if line.split()[:2] == ["8", "5"]]  # alpha, c, iter, seconds
    assert [k for k, cell in zip(DEFAULT_N_CLUSTERS, row[4:]) if cell.endswith("*")] == [chosen["n_clusters"]]
    assert len(row) == 4 + len(DEFAULT_N_CLUSTERS) and "-" not in row


@pytest.mark.timeout(600)
def test_a_k_grid_on_workers_equals_in_process(yale, tmp_path, client):
    kernels, labels = yale
    here = sweep(kernels, tmp_path / "here", n_clusters=KS, alphas=ALPHAS, labels=labels, **FAST)
    there = sweep(kernels, tmp_path / "there", n_clusters=KS, alphas=ALPHAS, labels=labels, client=client,
                  mode="task", **FAST)
    assert there["selected"] == here["selected"]
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in here["rows"]]
    assert [{k: v for k, v in r.items() if k != "seconds"} for r in there["rows"]] == strip


def blobs(n_per=12, seed=0):
    """Two views of 4 well-separated blobs (n = 4 n_per): k = 4 is the clear choice of a k grid 2..4."""
    from lswmkc_dask.kernels.features import kernels_from_features

    rng = np.random.default_rng(seed)
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], float)
    y = np.repeat(np.arange(4), n_per)
    views = [centres[y] + rng.normal(scale=1.0, size=(y.size, 2)),
             np.hstack([centres[y][:, ::-1], np.zeros((y.size, 1))]) + rng.normal(scale=1.5, size=(y.size, 3))]
    return kernels_from_features(views), y


def _check_runs_hold_their_k(out, selected):
    """Every run's labels.csv and report.json top level are of the k chosen for it, the selected run's of the
    selected k."""
    for run in sorted((out / "runs").iterdir()):
        report = json.loads((run / "report.json").read_text())
        scores = {int(k): e["label_free"][SELECTION_CRITERION] for k, e in report["by_n_clusters"].items()}
        k = max(sorted(scores), key=scores.__getitem__)
        assert (run / "labels.csv").read_text() == (run / f"labels_k={k}.csv").read_text(), run.name
        assert report["params"]["n_clusters"] == k
        assert report["label_free"] == report["by_n_clusters"][str(k)]["label_free"]
        if "metrics" in report["by_n_clusters"][str(k)]:
            assert report["metrics"] == report["by_n_clusters"][str(k)]["metrics"]
        from lswmkc_dask.grid.scoring import RUN_K_KEY, run_n_clusters

        assert run_n_clusters(report) == (k, scores[k])
        assert report[RUN_K_KEY]["n_clusters"] == k and report[RUN_K_KEY]["criterion"] == SELECTION_CRITERION
        assert f"labels.csv is labels_k={k}.csv" in report[RUN_K_KEY]["how"]
        if run.name == f"alpha={selected['alpha']:g}_c={selected['n_neighbors']}":
            assert k == selected["n_clusters"]


@pytest.mark.timeout(300)
def test_each_run_holds_the_k_chosen_for_it(tmp_path):
    """Each run's labels.csv and report.json's metrics are those of the k chosen for it, not of the smallest k."""
    kernels, y = blobs()
    result = sweep(kernels, tmp_path / "sw", n_clusters=[2, 3, 4], alphas=[1.0, 8.0], labels=y, **FAST)
    selected = result["selected"]
    assert selected["n_clusters"] == 4  # not the smallest k: what the old files held
    _check_runs_hold_their_k(tmp_path / "sw", selected)
    run = tmp_path / "sw" / "runs" / f"alpha={selected['alpha']:g}_c=5"
    np.testing.assert_array_equal(_labels(run / "labels.csv"), _labels(run / "labels_k=4.csv"))
    assert json.loads((run / "report.json").read_text())["metrics"]["honest"]["ACC"] == 1.0  # 4 blobs found

    # a run as it is written before the sweep scores it (a sweep killed then): its k is not chosen yet, and
    # its files say so; resuming scores it and gives it its k
    from lswmkc_dask.grid.scoring import RUN_K_KEY

    rep_path = run / "report.json"
    report = json.loads(rep_path.read_text())
    for entry in report["by_n_clusters"].values():
        entry.pop("label_free")
    report.pop("label_free")
    report["params"]["n_clusters"] = 2
    report["metrics"] = report["by_n_clusters"]["2"]["metrics"]
    report[RUN_K_KEY] = {"n_clusters": None}
    rep_path.write_text(json.dumps(report))
    (run / "labels.csv").write_text((run / "labels_k=2.csv").read_text())
    again = sweep(kernels, tmp_path / "sw", n_clusters=[2, 3, 4], alphas=[1.0, 8.0], labels=y, **FAST)
    assert again["selected"] == selected
    _check_runs_hold_their_k(tmp_path / "sw", selected)

"""How sure the label-free choice is (lswmkc_dask.grid.selection): the one-pass scores against
their dense definitions, the paired one-standard-error rule against a bootstrap, the medoid
partition, prediction strength on data with and without clusters, and a sweep's summary."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from _helpers import ROOT, lswmkc_main
from lswmkc_dask import selected_model
from lswmkc_dask.grid import selection
from lswmkc_dask.errors import ParameterError, render_message
from lswmkc_dask.kernels.features import kernels_from_features, preprocess_kernels
from lswmkc_dask.grid.sweep import SELECTION_CRITERION, summary_table, sweep
from lswmkc_dask.grid.results import SILHOUETTES, selection_line
from lswmkc_dask.io.run_arrays import read_silhouettes
from lswmkc_dask.io.model_file import member_names
from _helpers import rewrite_model

sys.path.insert(0, str(ROOT / "benchmarks"))
import selection_criteria  # noqa: E402

FAST = dict(max_iter=5, min_iter=2, n_init=5, progress=False)


def _blobs(n_per=40, k=4, seed=0, spread=0.6, centres=((0, 0), (10, 0), (0, 10), (10, 10), (20, 20))):
    """Two views of k well-separated blobs in the plane (the first k of ``centres``)."""
    rng = np.random.default_rng(seed)
    centres = np.array(centres, float)[:k]
    y = np.repeat(np.arange(k), n_per)
    views = [centres[y] + rng.normal(scale=spread, size=(y.size, 2)),
             np.hstack([centres[y][:, ::-1], np.zeros((y.size, 1))]) + rng.normal(scale=1.5 * spread, size=(y.size, 3))]
    return kernels_from_features(views), y


def test_one_pass_scores_equal_their_dense_definitions(rng):
    x = rng.normal(size=(70, 3))
    kernels = np.stack([x @ x.T, np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 3), (x @ x.T + 1) ** 2])
    pre = preprocess_kernels(kernels)
    kbar = pre.mean(axis=0)
    parts = np.stack([rng.integers(0, 4, 70), (x[:, 0] > 0).astype(int), np.r_[np.zeros(69, int), 1],
                      np.zeros(70, int)])
    for b in (1, 13, 70):
        blocks = [selection.partition_scores_block(pre[:, s:s + b], s, parts) for s in range(0, 70, b)]
        got = selection.finish_partition_scores(blocks, parts)
        assert got["samples"].shape == (4, 70)
        for i, y in enumerate(parts[:3]):
            assert got[selection.SHIPPED][i] == pytest.approx(selection.silhouette_kernel(kbar, y), abs=1e-12)
            assert got["kkm_objective_avg_kernel"][i] == pytest.approx(
                selection_criteria.kernel_kmeans_objective(kbar, y), abs=1e-10)
            assert got["alignment_avg_kernel"][i] == pytest.approx(selection_criteria.kernel_alignment(kbar, y), abs=1e-10)
        assert got[selection.SHIPPED][3] == 0.0 and got["alignment_avg_kernel"][3] == 0.0  # one cluster


def test_near_ties_standard_error_is_the_bootstrap_one(rng):
    n = 400
    base = rng.normal(0.3, 0.2, n)
    samples = np.stack([base, base - 0.001 + rng.normal(0, 0.05, n), base - 0.2 + rng.normal(0, 0.05, n)])
    got = selection.near_ties(samples, 0)
    assert got["tied"].tolist() == [True, True, False]
    assert got["difference"][0] == 0.0 and got["difference"][2] == pytest.approx(0.2, abs=0.02)
    # the standard error of the paired mean difference is the bootstrap's over resampled rows
    draws = rng.integers(0, n, size=(4000, n))
    boot = (samples[0][draws] - samples[1][draws]).mean(axis=1)
    assert got["standard_error"][1] == pytest.approx(boot.std(), rel=0.1)
    with pytest.raises(ValueError, match="is not a row"):
        selection.near_ties(samples, 3)


def test_medoid_partition():
    a = np.repeat([0, 1, 2], 10)
    b, d = a.copy(), a.copy()
    b[:3], d[10:13] = 1, 2  # each close to a, farther from each other
    c = np.tile([0, 1, 2], 10)  # unrelated
    index, agreement = selection.medoid_partition([b, d, a, c])
    assert index == 2 and np.argmin(agreement) == 3
    assert agreement[0] == pytest.approx(np.mean(selection.consensus([b, d, a, c])[0]))
    assert selection.medoid_partition([b, a])[0] == 0  # two: the first (the best-scored)
    assert selection.medoid_partition([c]) == (0, pytest.approx(np.ones(1)))
    with pytest.raises(ValueError, match="at least 1"):
        selection.medoid_partition([])


def test_prediction_strength_finds_k_and_not_noise(rng):
    centres = np.array([[0, 0], [6, 0], [0, 6]], float)
    y = np.repeat([0, 1, 2], 40)
    blobs = centres[y] + rng.normal(size=(120, 2))
    strengths = {k: selection.prediction_strength(blobs, k, random_state=3) for k in range(2, 7)}
    assert strengths[3] > 0.95 and selection.choose_n_clusters(strengths) == 3
    noise = rng.normal(size=(200, 5))
    assert selection.choose_n_clusters({k: selection.prediction_strength(noise, k) for k in range(2, 7)}) is None
    assert selection.prediction_strength(noise, 4, random_state=7) == selection.prediction_strength(noise, 4, random_state=7)
    assert selection.prediction_strength(noise, 1) == 1.0
    with pytest.raises(ValueError, match="needs at least 8 rows"):
        selection.prediction_strength(noise[:5], 4)


LABEL_KEYS = ("ACC_honest", "regret_honest_ACC_points", "regret_honest_ACC_points_all_k", "n_clusters_true")


def _label_free(chosen):
    out = {k: v for k, v in chosen.items() if k not in LABEL_KEYS}
    out["consensus"] = {k: v for k, v in (out.get("consensus") or {}).items() if k not in LABEL_KEYS}
    out["default"] = {k: v for k, v in (out.get("default") or {}).items() if k not in LABEL_KEYS}  # issue 52
    return out


@pytest.fixture(scope="module")
def blob_sweeps(tmp_path_factory):
    """Four blobs swept over alpha and k = 2..5 with labels, without, with permuted labels."""
    kernels, y = _blobs()
    root = tmp_path_factory.mktemp("confidence")
    kw = dict(n_clusters=[2, 3, 4, 5], alphas=[1.0, 8.0, 64.0], random_state=3, **FAST)
    perm = np.random.default_rng(0).permutation(y)
    return root, {name: sweep(kernels, root / name, labels=labels, **kw)
                  for name, labels in (("labels", y), ("none", None), ("permuted", perm))}


def test_summary_says_how_sure_and_never_reads_labels(blob_sweeps):
    root, results = blob_sweeps
    chosen = results["labels"]["selected"]
    assert _label_free(chosen) == _label_free(results["none"]["selected"]) == _label_free(results["permuted"]["selected"])
    assert chosen["confidence"] in ("clear", "near-tie")
    assert chosen["confidence"] == ("clear" if len(chosen["near_ties"]) == 1 else "near-tie")
    first = chosen["near_ties"][0]
    assert (first["alpha"], first["n_clusters"]) == (chosen["alpha"], chosen["n_clusters"])
    # each near-tie is within one standard error of the best, recomputed from the written samples
    rows = [r for r in results["none"]["rows"]]
    samples = {}
    for run in (root / "none" / "runs").iterdir():
        alpha = float(run.name.split("_")[0].split("=")[1])
        for k, values in zip([2, 3, 4, 5], read_silhouettes(run)):
            samples[alpha, k] = values
    for r in rows:
        assert samples[r["alpha"], r["n_clusters"]].mean() == pytest.approx(r[SELECTION_CRITERION], abs=1e-12)
    best = samples[chosen["alpha"], chosen["n_clusters"]]
    tied = {(t["alpha"], t["n_clusters"]) for t in chosen["near_ties"]}
    for (alpha, k), values in samples.items():
        d = best - values
        assert ((alpha, k) in tied) == (d.mean() <= d.std(ddof=1) / np.sqrt(d.size) or (alpha, k) == (
            chosen["alpha"], chosen["n_clusters"]))
    # the votes, the consensus among the near-ties, the k of prediction strength
    assert set(chosen["votes"]) == set(selection.VOTES)
    for name, vote in chosen["votes"].items():
        assert vote["score"] == max(r[name] for r in rows)
    assert (chosen["consensus"]["alpha"], chosen["consensus"]["n_clusters"]) in tied
    assert chosen["k_choice"]["n_clusters"] == 4  # four blobs
    assert set(chosen["k_choice"]["strengths"]) == {"2", "3", "4", "5"}
    on_disk = json.loads((root / "none" / "summary.json").read_text())["selected"]
    assert on_disk["k_choice"] == chosen["k_choice"] and on_disk["near_ties"] == chosen["near_ties"]


def test_old_runs_without_samples_are_scored_again(blob_sweeps, tmp_path):
    import shutil

    root, results = blob_sweeps
    shutil.copytree(root / "none", tmp_path / "sw")
    for run in (tmp_path / "sw" / "runs").iterdir():  # as a sweep of an older version left them
        rewrite_model(run, **{SILHOUETTES: None})
        assert SILHOUETTES not in member_names(run)
    kernels, _ = _blobs()
    again = sweep(kernels, tmp_path / "sw", n_clusters=[2, 3, 4, 5], alphas=[1.0, 8.0, 64.0], random_state=3, **FAST)
    assert again["selected"] == results["none"]["selected"]
    assert all(SILHOUETTES in member_names(run) for run in (tmp_path / "sw" / "runs").iterdir())


def test_the_line_and_the_table_say_clear_or_near_tie():
    rows = [{"alpha": a, "n_neighbors": 5, "n_clusters": 3, "gamma": "auto", SELECTION_CRITERION: s}
            for a, s in ((1.0, 0.2), (8.0, 0.5), (64.0, 0.49))]
    point = {"n_neighbors": 5, "n_clusters": 3, "gamma": "auto"}
    chosen = {**point, "alpha": 8.0, "criterion": SELECTION_CRITERION, "score": 0.5,
              "near_ties": [{**point, "alpha": 8.0, "score": 0.5}, {**point, "alpha": 64.0, "score": 0.49}],
              "consensus": {**point, "alpha": 64.0, "score": 0.49},
              "votes": {"alignment_avg_kernel": {**point, "alpha": 1.0, "agrees": False},
                        "kkm_objective_avg_kernel": {**point, "alpha": 8.0, "agrees": True}}}
    line = selection_line(chosen)
    assert "near-tie among alpha=8 k=3, alpha=64 k=3 (consensus alpha=64 k=3)" in line
    assert "disagreeing: alignment_avg_kernel votes alpha=1 k=3" in line and "kkm" not in line
    marks = [t[0] for t in summary_table(rows, chosen).splitlines()[1:4]]
    assert marks == [" ", "*", "c"]
    clear = {**chosen, "near_ties": chosen["near_ties"][:1], "consensus": None, "votes": {},
             "k_choice": {"n_clusters": None, "threshold": 0.8}}
    line = selection_line(clear)
    assert "; clear" in line and "k not determined" in line and "near-tie" not in line
    assert [t[0] for t in summary_table(rows, clear).splitlines()[1:4]] == [" ", "*", " "]
    assert "; prediction strength says k=4" in selection_line({**clear, "k_choice": {"n_clusters": 4, "threshold": 0.8}})
    assert "; prediction strength agrees on k=3" in selection_line({**clear, "k_choice": {"n_clusters": 3}})


@pytest.mark.timeout(600)
def test_the_same_choice_on_any_number_of_workers(blob_sweeps, tmp_path, client, client1):
    root, results = blob_sweeps
    kernels, _ = _blobs()
    kw = dict(n_clusters=[2, 3, 4, 5], alphas=[1.0, 8.0, 64.0], random_state=3, **FAST)
    for name, c in (("two", client), ("one", client1)):
        there = sweep(kernels, tmp_path / name, client=c, mode="task", **kw)
        assert there["selected"] == results["none"]["selected"], name
        for run in (root / "none" / "runs").iterdir():
            np.testing.assert_allclose(read_silhouettes(tmp_path / name / "runs" / run.name),
                                       read_silhouettes(run), rtol=0, atol=1e-13)
    # a store on disk: the per-sample silhouettes and the votes computed on the workers, one task per row block
    from lswmkc_dask import prepare
    from lswmkc_dask.grid.scoring import label_free_evidence

    store = prepare(kernels, tmp_path / "b.zarr", block_rows=48)
    parts = np.stack([np.repeat(np.arange(4), 40), np.tile(np.arange(3), 54)[:160]])
    here, there = label_free_evidence(store, parts), label_free_evidence(store, parts, client=client)
    for key in ("samples", SELECTION_CRITERION, *selection.VOTES):
        np.testing.assert_allclose(there[key], here[key], rtol=0, atol=1e-13, err_msg=key)


def test_factor_embeddings_equal_one_embedding_per_k(rng):
    from lswmkc_dask.engine.postprocess import factor_embedding, factor_embeddings

    w = rng.normal(size=(120, 7))
    got = factor_embeddings(w, [2, 5, 9])
    for k in (2, 5, 9):  # k beyond the rank of W included: its columns zero, as factor_embedding's
        np.testing.assert_array_equal(got[k], factor_embedding(w, k, method="svd"))


def test_k_is_reported_only_where_the_two_signals_agree():
    assert selection.agreed_n_clusters(4, 4) == 4
    assert selection.agreed_n_clusters(4, 5) == 4 and selection.agreed_n_clusters(5, 4) == 5  # the silhouette's
    assert selection.agreed_n_clusters(2, 5) is None and selection.agreed_n_clusters(3, None) is None
    assert selection.agreed_n_clusters(4, 5, tolerance=0) is None
    with pytest.raises(ValueError, match="tolerance must be >= 0"):
        selection.agreed_n_clusters(4, 4, tolerance=-1)


def test_blobs_k_is_determined(blob_sweeps):
    root, results = blob_sweeps
    chosen = results["none"]["selected"]
    assert chosen["k_determined"] is True and chosen["n_clusters"] == 4
    assert chosen["k_candidates"] == {"silhouette": 4, "prediction_strength": chosen["k_choice"]["n_clusters"]}
    assert selected_model(root / "none").n_clusters == 4
    assert "k not determined" not in selection_line(chosen)


@pytest.fixture(scope="module")
def noise_sweeps(tmp_path_factory):
    """Two views of Gaussian noise (no clusters) swept over alpha and k = 2..5: with random labels, without
    (through the command line), with the labels permuted."""
    rng = np.random.default_rng(0)
    kernels = kernels_from_features([rng.normal(size=(80, 3)), rng.normal(size=(80, 4))])
    y = rng.integers(0, 3, 80)
    root = tmp_path_factory.mktemp("noise")
    np.savez(root / "k.npz", kernels=kernels)
    kw = dict(n_clusters=[2, 3, 4, 5], alphas=[1.0, 8.0], random_state=3, **FAST)
    out = {name: sweep(kernels, root / name, labels=labels, **kw)
           for name, labels in (("labels", y), ("permuted", np.random.default_rng(1).permutation(y)))}
    return root, out


def test_without_agreement_k_is_not_determined(noise_sweeps, capsys):
    from lswmkc_dask import cli

    root, results = noise_sweeps
    assert cli.main(["sweep", str(root / "k.npz"), "--n-clusters", "2", "3", "4", "5", "--alphas", "1", "8",
                     "--random-state", "3", "--max-iter", "5", "--min-iter", "2", "--n-init", "5",
                     "--output", str(root / "none"), "--quiet"]) == 0
    out = capsys.readouterr().out
    chosen = json.loads((root / "none" / "summary.json").read_text())["selected"]
    # the k rule reads no label either
    assert _label_free(chosen) == _label_free(results["labels"]["selected"]) == _label_free(
        results["permuted"]["selected"])
    assert chosen["k_choice"]["n_clusters"] is None  # no stable k in noise: never an agreement
    assert chosen["k_determined"] is False
    assert chosen["k_candidates"] == {"silhouette": chosen["n_clusters"], "prediction_strength": None}
    line = selection_line(chosen)
    assert line.startswith("selected without labels: k not determined (the largest silhouette_avg_kernel")
    assert f"k={chosen['n_clusters']}; no k >= 2 reaches prediction strength 0.8): give k (--n-clusters K" in line
    assert line in out and f"  k not determined: * is at k={chosen['n_clusters']}" in out
    with pytest.raises(ParameterError, match=r"did not determine k: the largest silhouette_avg_kernel is at k=\d "
                       r"\(alpha=\d\) and prediction strength finds no stable k; give k: selected_model\(result, "
                       r"n_clusters=K\) .* grid: 2, 3, 4, 5") as err:
        selected_model(root / "none")
    assert render_message(err.value, {"n_clusters": "--n-clusters"}).count("--n-clusters K") == 1
    for k in (2, 5):  # a k given: the point chosen at that k
        at_k = max((r for r in results["labels"]["rows"] if r["n_clusters"] == k), key=lambda r: r[SELECTION_CRITERION])
        assert (selected_model(root / "none", n_clusters=k).alpha, k) == (at_k["alpha"], k)


def test_the_line_names_both_candidates_where_they_disagree():
    point = {"alpha": 8.0, "n_neighbors": 5, "n_clusters": 2, "gamma": "auto"}
    chosen = {**point, "criterion": SELECTION_CRITERION, "score": 0.5, "near_ties": [{**point, "score": 0.5}],
              "k_choice": {"n_clusters": 5, "threshold": 0.8}, "k_determined": False,
              "k_candidates": {"silhouette": 2, "prediction_strength": 5}, "n_clusters_scores": {"2": 0.5, "5": 0.4}}
    line = selection_line(chosen)
    assert line.startswith("selected without labels: k not determined (the largest silhouette_avg_kernel 0.5000 is "
                           "at alpha=8 c=5 k=2; prediction strength says k=5): give k (--n-clusters K, or "
                           "selected_model(result, n_clusters=K)); clear")
    assert "agrees on" not in line and "says k=5" in line
    table = summary_table([{**point, SELECTION_CRITERION: 0.5}, {**point, "n_clusters": 5, SELECTION_CRITERION: 0.4}],
                          chosen)
    assert "  k not determined: * is at k=2, prediction strength says k=5; give k" in table
    with pytest.raises(ParameterError, match="at k=2 .* prediction strength says k=5; give k"):
        selected_model({"selected": chosen, "rows": []})
    agreed = {**chosen, "k_determined": True, "k_choice": {"n_clusters": 3, "threshold": 0.8}}
    assert "k not determined" not in selection_line(agreed) + summary_table([{**point, SELECTION_CRITERION: 0.5}],
                                                                             agreed)
    assert selected_model({"selected": agreed}).n_clusters == 2


def test_selected_model_of_the_consensus(blob_sweeps):
    root, results = blob_sweeps
    chosen = results["none"]["selected"]
    model = selected_model(root / "none", consensus=True, max_iter=3)
    found = chosen["consensus"]
    assert (model.alpha, model.n_neighbors, model.n_clusters, model.max_iter) == (
        found["alpha"], found["n_neighbors"], found["n_clusters"], 3)
    assert (root / "none" / "runs" / found["run"] / found["labels"]).is_file()
    with pytest.raises(ParameterError, match="no consensus of near-ties .* resume the sweep"):
        selected_model({"selected": {**chosen, "consensus": None}}, consensus=True)
    with pytest.raises(ParameterError, match="consensus=True and n_clusters=4 together"):
        selected_model(root / "none", n_clusters=4, consensus=True)


def _figure_marks(directory):
    """The labelled marks (gid -> labels of the lines) of a sweep directory's selection figure."""
    pytest.importorskip("matplotlib")
    from lswmkc_dask.plots._base import import_matplotlib
    from lswmkc_dask.plots._sensitivity import _selection_figure
    from lswmkc_dask.grid.sweep import load_sweep

    fig = _selection_figure(directory, load_sweep(directory)[1], import_matplotlib()[2])
    marks: dict[str, list] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_gid():
                marks.setdefault(line.get_gid(), []).append(line)
    return marks


def test_the_selection_figure_marks_near_ties_and_the_consensus(blob_sweeps, tmp_path):
    root, results = blob_sweeps
    chosen = results["none"]["selected"]
    assert chosen["confidence"] == "near-tie"
    marks = _figure_marks(root / "none")
    (ties,) = marks["near_ties"]
    assert sorted(zip(*ties.get_data())) == sorted((t["alpha"], t["score"]) for t in chosen["near_ties"][1:])
    (found,) = marks["consensus"]
    assert [list(v) for v in found.get_data()] == [[chosen["consensus"]["alpha"]], [chosen["consensus"]["score"]]]
    assert {tuple(np.ravel(line.get_data())) for line in marks["selected"]} == {
        (chosen["alpha"], chosen["score"]), (chosen["n_clusters"], chosen["score"])}  # alpha panel, k panel
    # a clear choice: the star alone
    kernels, _ = _blobs()
    clear = sweep(kernels, tmp_path / "clear", n_clusters=[3, 4, 5], alphas=[8.0], random_state=3, **FAST)
    assert clear["selected"]["confidence"] == "clear"
    assert set(_figure_marks(tmp_path / "clear")) == {"selected"}


def test_the_selection_figure_says_k_not_determined(noise_sweeps, blob_sweeps):
    root, results = noise_sweeps
    chosen = results["labels"]["selected"]
    assert chosen["k_determined"] is False
    star = _figure_marks(root / "labels")["selected"][-1]  # the k panel's
    assert star.get_label() == f"largest score: k={chosen['n_clusters']}, k not determined"
    blobs_star = _figure_marks(blob_sweeps[0] / "none")["selected"][-1]
    assert blobs_star.get_label() == "selected: k=4"
    from lswmkc_dask.plots import sweep_point  # the heatmaps' point: the starred one, saying k is not determined

    assert "\"selected\"; k not determined: give --n-clusters K)" in sweep_point(root / "labels").reason
    assert "not determined" not in sweep_point(blob_sweeps[0] / "none").reason
    from lswmkc_dask.grid.tables import sweep_columns  # lswmkc table's column of the starred point says so too

    assert sweep_columns(root / "labels")[0][0].startswith("selected (no labels; k not determined)|alpha=")
    assert sweep_columns(blob_sweeps[0] / "labels")[0][0].startswith("selected (no labels)|alpha=")


#: 8 blobs on a 3 x 3 lattice less one corner
EIGHT = [(x, y) for x in (0, 10, 20) for y in (0, 10, 20)][:8]


@pytest.fixture(scope="module")
def edge_sweeps(tmp_path_factory):
    """8 blobs swept without labels over k = 2..7 (the command line: the true k beyond the grid) and over
    k = 2..10 (in Python: the true k inside)."""
    kernels, _ = _blobs(k=8, centres=EIGHT)
    root = tmp_path_factory.mktemp("edge")
    np.savez(root / "k.npz", kernels=kernels)
    run = lswmkc_main("sweep", root / "k.npz", "--n-clusters", *range(2, 8), "--alphas", "1", "8", "--random-state",
                      "3", "--max-iter", "5", "--min-iter", "2", "--n-init", "5", "--output", root / "narrow",
                      "--quiet", check=True)
    wide = sweep(kernels, root / "wide", n_clusters=list(range(2, 11)), alphas=[1.0, 8.0], random_state=3, **FAST)
    return root, run.stdout, wide


def test_the_edges_of_a_k_grid():
    assert selection.k_grid_edge(7, range(2, 8)) == "largest" and selection.k_grid_edge(4, [2, 3, 4]) == "largest"
    assert selection.k_grid_edge(3, [3, 4, 5]) == "smallest" and selection.k_grid_edge(3, [3, 9]) == "smallest"
    assert selection.k_grid_edge(2, range(2, 8)) is None  # no k below 2
    assert selection.k_grid_edge(4, range(2, 8)) is None and selection.k_grid_edge(5, [5]) is None


def test_a_k_at_the_edge_of_the_k_grid_is_not_determined(edge_sweeps):
    root, out, _ = edge_sweeps
    chosen = json.loads((root / "narrow" / "summary.json").read_text())["selected"]
    edge = ("k=7 is at the edge of the k grid 2..7 (a larger k may score higher): widen it (e.g. --n-clusters "
            "2 3 4 5 6 7 8 9 10, or sweep(..., n_clusters=range(2, 11)))")
    # both signals say 7, but 7 is the grid's largest k: it cannot be told from a larger one
    assert chosen["k_candidates"] == {"silhouette": 7, "prediction_strength": 7} and chosen["n_clusters"] == 7
    assert chosen["k_determined"] is False and chosen["k_edge"] == edge and chosen["k_how"].startswith(
        f"k not determined: {edge}; the largest {SELECTION_CRITERION} is at k=7 and prediction strength says k=7")
    line = selection_line(chosen)
    assert line.startswith("selected without labels: k at the edge of the grid, not determined (the largest "
                           f"{SELECTION_CRITERION} {chosen['score']:.4f} is at alpha=")
    assert f"k=7; prediction strength says k=7): give k (--n-clusters K, or selected_model(result, n_clusters=K)); " \
           f"{edge}" in line and "agrees on" not in line
    assert line in out and f"  k at the edge of the grid: {edge}" in out and "  k not determined: * is at k=7" in out
    with pytest.raises(ParameterError, match=r"did not determine k: .* says k=7; give k: .* grid: 2, 3, 4, 5, 6, 7\); "
                                             r"k=7 is at the edge of the k grid 2\.\.7 .* widen it"):
        selected_model(root / "narrow")
    assert selected_model(root / "narrow", n_clusters=7).n_clusters == 7  # a k given is built


def test_a_k_inside_the_grid_is_determined_and_a_smallest_k_above_2_is_an_edge(edge_sweeps, tmp_path):
    _, _, wide = edge_sweeps
    chosen = wide["selected"]
    assert chosen["k_candidates"] == {"silhouette": 8, "prediction_strength": 8}
    assert chosen["k_determined"] is True and chosen["k_edge"] is None
    assert "edge" not in selection_line(chosen) + summary_table(wide["rows"], chosen) + chosen["k_how"]
    kernels, _ = _blobs()  # 4 blobs, k = 4..6: 4 is the grid's smallest, and a smaller k is not looked at
    low = sweep(kernels, tmp_path / "low", n_clusters=[4, 5, 6], alphas=[8.0], random_state=3, **FAST)["selected"]
    assert low["n_clusters"] == 4 and low["k_determined"] is False
    assert low["k_edge"].startswith("k=4 is at the edge of the k grid 4..6 (a smaller k may score higher): widen it "
                                    "(e.g. --n-clusters 2 3 4 5 6, or sweep(..., n_clusters=range(2, 7)))")


def test_a_k_grid_without_labels_shows_the_score_per_alpha_and_k(edge_sweeps, blob_sweeps):
    root, out, wide = edge_sweeps
    table = summary_table(wide["rows"], wide["selected"]).splitlines()
    assert table[1].split() == ["alpha", "c", "iter", "seconds", *(f"k={k}" for k in range(2, 11))]
    assert [line.split()[0] for line in table[2:4]] == ["1", "8"]  # one line per alpha, a score per k
    for line in table[2:4]:
        alpha = float(line.split()[0])
        scores = [float(cell.rstrip("*~c")) for cell in line.split()[4:]]
        assert scores == [pytest.approx(r[SELECTION_CRITERION], abs=1e-4) for r in wide["rows"] if r["alpha"] == alpha]
    (starred,) = [(line.split()[0], i) for line in table[2:4] for i, cell in enumerate(line.split()[4:])
                  if cell.endswith("*")]
    assert starred == (f"{wide['selected']['alpha']:g}", wide["selected"]["n_clusters"] - 2)
    assert table[4].startswith("* selected without labels (alpha and k)")
    # the command line shows the same table (no row of "-" per grid point)
    summary = json.loads((root / "narrow" / "summary.json").read_text())
    assert summary_table(summary["rows"], summary["selected"]) in out
    assert ["alpha", "c", "iter", "seconds", *(f"k={k}" for k in range(2, 8))] in [line.split() for line in
                                                                                  out.splitlines()]
    assert not any(line.split().count("-") > 1 for line in out.splitlines())
    # with labels, one row per grid point and its metrics, as before
    labelled = summary_table(blob_sweeps[1]["labels"]["rows"], blob_sweeps[1]["labels"]["selected"]).splitlines()
    assert "ACC/h" in labelled[0] and len(labelled) > 12

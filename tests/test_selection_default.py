"""Issue 52: the label-free choice leaves the default alpha only where its win is larger than its spread.

The rule (:func:`lswmkc_dask.grid.selection.default_decision`) on constructed per-sample score
tables; the sweep's summary rewritten by it (:func:`lswmkc_dask.grid.sweep.weigh_default`) on
constructed samples; AutoSC's relative eigen-gap against a brute-force eigendecomposition of
the normalised Laplacian; a real YALE sweep whose summary and ``lswmkc sweep`` output name
the default beside the pick.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from lswmkc_dask.grid import selection
from lswmkc_dask.grid.selection import default_decision, relative_eigengap
from lswmkc_dask.grid.sweep import SELECTION_CRITERION, default_line, sweep, sweep_table, weigh_default
from lswmkc_dask.grid.results import SILHOUETTES
from lswmkc_dask.io.run_arrays import read_silhouettes, run_arrays
from _helpers import rewrite_model

FAST = dict(max_iter=5, min_iter=2, n_init=5, progress=False)
KEPT = "kept the default: no alpha scores clearly better"


# --------------------------------------------------------------------------- the rule on constructed tables


def _table(win, noise, n=200, seed=0):
    """Per-sample scores of (default, pick): the pick better by ``win`` on average, paired noise ``noise``."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.1, 0.05, n)
    d = rng.normal(0.0, noise, n)
    d += win - d.mean()  # the mean win exactly ``win``
    return np.stack([base, base + d])


def test_a_win_smaller_than_its_spread_keeps_the_default():
    s = _table(win=0.002, noise=0.05)  # standard error 0.05 / sqrt(200) = 0.0035 > 0.002
    dec = default_decision(s, best=1, default=0)
    assert dec["win"] == pytest.approx(0.002)
    assert dec["spread"] == pytest.approx(np.std(s[1] - s[0], ddof=1) / np.sqrt(200))
    assert dec["spread"] > dec["win"] and not dec["moved"]


def test_a_win_larger_than_its_spread_moves():
    s = _table(win=0.01, noise=0.05)  # 0.01 > 0.0035
    dec = default_decision(s, best=1, default=0)
    assert dec["win"] > dec["spread"] and dec["moved"]


def test_the_default_as_the_best_is_kept():
    s = _table(win=0.05, noise=0.001)
    assert not default_decision(s, best=0, default=0)["moved"]


def test_the_rule_is_the_near_tie_rule():
    """The default is kept exactly where it is a near-tie of the best (the sweep's own one-SE statement)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        s = rng.normal(0.1, 0.05, (4, 60)) + rng.normal(0, 0.01, (4, 1))
        best = int(np.argmax(s.mean(axis=1)))
        tied = selection.near_ties(s, best)["tied"]
        for default in range(4):
            assert default_decision(s, best, default)["moved"] == (not tied[default])


@pytest.mark.parametrize("bad, what", [(np.zeros(5), "shape"), (np.zeros((2, 1)), "shape")])
def test_bad_tables_are_refused(bad, what):
    with pytest.raises(ValueError, match=what):
        default_decision(bad, 0, 0)
    with pytest.raises(ValueError, match="default = 3 is not a row of 2"):
        default_decision(np.zeros((2, 5)), 0, 3)


# --------------------------------------------------------------------------- AutoSC's relative eigen-gap


def _brute_gap(w, k):
    w = (w + w.T) / 2
    deg = w.sum(axis=1)
    inv = np.where(deg > 0, 1 / np.sqrt(np.where(deg > 0, deg, 1)), 0.0)
    lap = np.eye(len(w)) - inv[:, None] * w * inv[None, :]
    lam = np.sort(np.linalg.eigh(lap)[0])
    low = lam[:k].mean()
    return (lam[k] - low) / (1e-6 + low)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_relative_eigengap_against_brute_force(k, monkeypatch):
    rng = np.random.default_rng(k)
    w = rng.random((40, 40)) * (rng.random((40, 40)) < 0.3)  # sparse, not symmetric
    w[:20, 20:] *= 0.05
    expected = _brute_gap(w, k)
    assert relative_eigengap(w, k) == pytest.approx(expected, rel=1e-8, abs=1e-8)
    assert relative_eigengap(sp.csr_matrix(w), k) == pytest.approx(expected, rel=1e-8, abs=1e-8)
    monkeypatch.setattr(selection, "EIGENGAP_DENSE_MAX", 10)  # the sparse (ARPACK) route, the same gap
    assert relative_eigengap(sp.csr_matrix(w), k) == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_relative_eigengap_is_large_for_separate_components():
    block = np.ones((10, 10))
    w = np.kron(np.eye(3), block)  # 3 components: l_1..l_3 = 0
    assert relative_eigengap(w, 3) > 1e5
    assert relative_eigengap(w, 2) < relative_eigengap(w, 3)


@pytest.mark.parametrize("graph, k, what", [
    (np.ones((3, 4)), 1, "square"), (-np.ones((3, 3)), 1, "negative"), (np.full((3, 3), np.nan), 1, "NaN"),
    (np.ones((3, 3)), 3, r"n_clusters = 3 must be in \[1, n - 1 = 2\]")])
def test_relative_eigengap_refuses_bad_graphs(graph, k, what):
    with pytest.raises(ValueError, match=what):
        relative_eigengap(graph, k)


# --------------------------------------------------------------------------- the sweep's summary


def _blobs(n_per=30, k=3, seed=0):
    from lswmkc_dask.kernels.features import kernels_from_features

    rng = np.random.default_rng(seed)
    centres = np.array([(0, 0), (6, 0), (0, 6)], float)[:k]
    y = np.repeat(np.arange(k), n_per)
    views = [centres[y] + rng.normal(scale=1.0, size=(y.size, 2)), centres[y] + rng.normal(scale=2.0, size=(y.size, 2))]
    return kernels_from_features(views), y


@pytest.fixture(scope="module")
def blob_sweep(tmp_path_factory):
    kernels, y = _blobs()
    out = tmp_path_factory.mktemp("default") / "sw"
    return out, sweep(kernels, out, labels=y, n_clusters=3, alphas=[1.0, 16.0], **FAST)


def _rewrite_samples(out, summary, pick_alpha, table):
    """Give the default (alpha = 1) and the pick the per-sample scores ``table`` (default first), and the
    pick a Z of three separate blocks (the largest AutoSC eigen-gap: the candidate) and the default a noisy Z
    (each with rows on the simplex and a zero diagonal, as the model file's Z is checked)."""
    n = table.shape[1]
    rng = np.random.default_rng(1)
    blocks = np.kron(np.eye(3), np.ones((n // 3, n // 3)))
    for alpha, values, z in ((1.0, table[0], rng.random((n, n))), (pick_alpha, table[1], blocks)):
        run = out / "runs" / f"alpha={alpha:g}_c=5"
        np.fill_diagonal(z, 0.0)
        z = sp.csr_matrix(z / z.sum(axis=1, keepdims=True))
        rewrite_model(run, affinity_data=z.data, affinity_indices=z.indices, affinity_indptr=z.indptr,
                      **{SILHOUETTES: values[None, :]})
        row = next(r for r in summary["rows"] if r["alpha"] == alpha)
        row[SELECTION_CRITERION] = float(values.mean())


@pytest.mark.parametrize("win, noise, kept", [(0.002, 0.05, True), (0.02, 0.05, False)])
def test_the_summary_keeps_or_leaves_the_default(blob_sweep, win, noise, kept):
    out, result = blob_sweep
    summary = json.loads(json.dumps(result))  # a copy: the rule rewrites it in place
    n = len(read_silhouettes(out / "runs" / "alpha=1_c=5")[0])
    table = _table(win, noise, n=n)
    _rewrite_samples(out, summary, 16.0, table)
    summary["selected"].update(alpha=16.0, score=float(table[1].mean()))  # the silhouette's pick: alpha = 16
    summary["selected"].pop("default", None)
    chosen = weigh_default(out, summary)["selected"]
    entry = chosen["default"]
    assert entry["in_grid"] and entry["kept"] is kept
    assert entry["candidate"]["alpha"] == 16.0 and entry["autosc_gaps"]["16"] > entry["autosc_gaps"]["1"]
    assert entry["win"] == pytest.approx(win) and entry["criterion_pick"]["alpha"] == 16.0
    row1 = next(r for r in summary["rows"] if r["alpha"] == 1.0)
    if kept:
        assert chosen["alpha"] == 1.0 and chosen["score"] == row1[SELECTION_CRITERION]
        assert chosen["ACC_honest"] == row1["ACC_honest"]
        assert entry["message"].startswith(KEPT) and "alpha=16, of the largest AutoSC eigen-gap, by 0.0020" in \
            entry["message"]
        table_text = sweep_table(summary["rows"], chosen)
        assert "* selected without labels: alpha=1, the default, kept" in table_text and "is marked ~" in table_text
    else:
        assert chosen["alpha"] == 16.0
        assert entry["message"] == f"alpha = 16: better than the default by 0.0200, spread {entry['spread']:.4f}"
    on_disk = json.loads((out / "summary.json").read_text())["selected"]
    assert on_disk["alpha"] == chosen["alpha"] and on_disk["default"]["kept"] is kept
    assert default_line(chosen).startswith("default alpha=1 (silhouette_avg_kernel ")
    assert "beside the candidate alpha=16" in default_line(chosen)


def test_a_default_outside_the_grid_is_said(blob_sweep):
    out, result = blob_sweep
    summary = json.loads(json.dumps(result))
    chosen = weigh_default(out, summary, default_alpha=2.0)["selected"]
    assert chosen["alpha"] == result["selected"]["alpha"]  # not weighed: as it stood
    assert chosen["default"]["in_grid"] is False
    assert "the default alpha=2 is not in the grid" in chosen["default"]["message"]
    weigh_default(out, json.loads(json.dumps(result)))  # summary.json back as the sweep wrote it


# --------------------------------------------------------------------------- a real YALE sweep


@pytest.mark.timeout(600)
def test_yale_sweep_names_the_default(yale, tmp_path):
    kernels, labels = yale
    result = sweep(kernels, tmp_path / "y", labels=labels, alphas=[1.0, 2.0, 8.0], n_clusters=15, n_init=10,
                   progress=False)
    chosen = result["selected"]
    entry = chosen["default"]
    assert entry["alpha"] == 1.0 and entry["in_grid"] and entry["rule"]
    rows = {r["alpha"]: r for r in result["rows"]}
    pick = max(rows.values(), key=lambda r: (r[SELECTION_CRITERION], -r["alpha"]))
    assert entry["criterion_pick"]["alpha"] == pick["alpha"]
    assert entry["score"] == rows[1.0][SELECTION_CRITERION]
    # the candidate: the largest AutoSC gap of the runs' Z, recomputed here from their model files
    gaps = {a: relative_eigengap(run_arrays(tmp_path / "y" / "runs" / f"alpha={a:g}_c=5")[0], 15)
            for a in rows}
    assert {float(a): g for a, g in entry["autosc_gaps"].items()} == pytest.approx(gaps)
    candidate = max(sorted(gaps), key=gaps.__getitem__)
    assert entry["candidate"]["alpha"] == candidate
    if entry["kept"]:
        assert chosen["alpha"] == 1.0 and entry["message"].startswith(KEPT)
    else:
        assert chosen["alpha"] == candidate and entry["win"] > entry["spread"]
        assert entry["message"].startswith(f"alpha = {candidate:g}: better than the default by ")
    # lswmkc sweep, as a user runs it: the default's line beside the pick, resumed (nothing refitted)
    proc = subprocess.run([sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--alphas", "1",
                           "2", "8", "--n-clusters", "15", "--n-init", "10", "--output", str(tmp_path / "y"),
                           "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("default alpha=1 (silhouette_avg_kernel "))
    assert entry["message"] in line

"""The research criteria of benchmarks/selection_criteria.py (with the package's select and
consensus that it re-exports): small problems with an obvious answer."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp

from _helpers import ROOT
from lswmkc_dask.kernels.features import kernels_from_features
from lswmkc_dask.io.run_arrays import run_arrays

sys.path.insert(0, str(ROOT / "benchmarks"))
import selection_criteria as selection  # noqa: E402


def _blobs(n_per=20, k=3, d=4, sep=6.0, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per)
    centres = rng.normal(size=(k, d)) * sep
    return centres[y] + rng.normal(size=(y.size, d)), y


def _rbf(x):
    return kernels_from_features([x], "gaussian")[0]


@pytest.fixture(scope="module")
def problem():
    x, y = _blobs()
    kernel = _rbf(x)
    kbar = selection.average_kernel(kernel[None])
    # a factor of the kernel: W W^T = K
    lam, v = np.linalg.eigh(kernel)
    keep = lam > 1e-10 * lam[-1]
    w = v[:, keep] * np.sqrt(lam[keep])
    rng = np.random.default_rng(1)
    wrong = rng.permutation(y)  # same cluster sizes, no structure
    return {"x": x, "y": y, "kbar": kbar, "w": w, "wrong": wrong}


def test_partition_criteria_prefer_the_true_partition(problem):
    y, wrong, w, kbar = problem["y"], problem["wrong"], problem["w"], problem["kbar"]
    graph = selection.knn_graph(kbar, 5)
    for name, fn in {
        "silhouette_kstar": lambda lab: selection.silhouette_kstar(w, lab),
        "silhouette_embedding": lambda lab: selection.silhouette_embedding(w, lab, 3),
        "calinski_harabasz_embedding": lambda lab: selection.calinski_harabasz_embedding(w, lab, 3),
        "silhouette_kernel": lambda lab: selection.silhouette_kernel(kbar, lab),
        "kernel_kmeans_objective": lambda lab: selection.kernel_kmeans_objective(kbar, lab),
        "kernel_alignment": lambda lab: selection.kernel_alignment(kbar, lab),
        "normalized_cut": lambda lab: selection.normalized_cut(graph, lab),
    }.items():
        assert fn(y) > fn(wrong) + 0.1 * abs(fn(y)), name


def test_known_values():
    # two clusters far apart on a line: ideal kernel alignment of the linear kernel
    x = np.array([[0.0], [0.0], [1.0], [1.0]])
    k = x @ x.T
    y = np.array([0, 0, 1, 1])
    assert selection.kernel_alignment(k, y) == pytest.approx(1.0)
    assert selection.kernel_kmeans_objective(k, y) == pytest.approx(0.0)
    assert selection.silhouette_kernel(k, y) == pytest.approx(1.0)
    # a graph of two components cut along them: normalised cut 0; across them: worse
    g = sp.block_diag([np.ones((2, 2)) - np.eye(2)] * 2)
    assert selection.normalized_cut(g, y) == pytest.approx(0.0)
    assert selection.normalized_cut(g, [0, 1, 0, 1]) == pytest.approx(-2.0)


def test_eigengaps_peak_at_the_number_of_blocks():
    rng = np.random.default_rng(0)
    k_true = 4
    y = np.repeat(np.arange(k_true), 15)
    # K* of k orthogonal blocks plus a little noise, through its factor
    w = np.hstack([np.eye(k_true)[y], 0.05 * rng.normal(size=(y.size, y.size))])  # full rank
    gaps = {k: selection.eigengap_kstar(w, k) for k in range(2, 8)}
    # centring K* (as the package's embedding does) removes the direction 1 that the k
    # indicator blocks share: k - 1 large eigenvalues, the gap at k - 1
    assert max(gaps, key=gaps.get) == k_true - 1 and gaps[k_true - 1] > 0.9
    # a factor of rank exactly k has the largest possible gap there (lambda_{k+1} = 0)
    assert selection.eigengap_kstar(w[:, :k_true], k_true - 1) == pytest.approx(1.0)
    # on the graph Laplacian (no centring) it is exactly k
    z = sp.csr_matrix((y[:, None] == y[None, :]).astype(float) - np.eye(y.size))
    lap = {k: selection.eigengap_laplacian(z, k) for k in range(2, 8)}
    assert max(lap, key=lap.get) == k_true
    assert lap[k_true] == pytest.approx(1.0 + 1.0 / 14, rel=1e-6)  # 1 - (-1/14)


def test_eigengap_kstar_rank_below_k_is_zero():
    w = np.eye(5)[np.repeat(np.arange(3), 4)][:, :3]
    assert selection.eigengap_kstar(w, 5) == 0.0


def test_stability_high_on_clear_structure_low_on_noise(problem):
    w = problem["w"]
    rng = np.random.default_rng(3)
    noise = rng.normal(size=(60, 10))
    s_clear = selection.seed_stability(w, 3)
    s_noise = selection.seed_stability(noise, 6)
    assert s_clear > 0.95 and s_noise < s_clear - 0.2
    b_clear = selection.bootstrap_stability(w, 3, n_pairs=3)
    b_noise = selection.bootstrap_stability(noise, 6, n_pairs=3)
    assert b_clear > 0.95 and b_noise < b_clear - 0.2


def test_deterministic_given_random_state(problem):
    rng = np.random.default_rng(5)
    noise = rng.normal(size=(60, 10))
    a = selection.seed_stability(noise, 5, random_state=7)
    assert a == selection.seed_stability(noise, 5, random_state=7)
    b = selection.bootstrap_stability(noise, 5, n_pairs=3, random_state=7)
    assert b == selection.bootstrap_stability(noise, 5, n_pairs=3, random_state=7)
    s1 = selection.score_point(problem["w"], problem["y"], 3, kernel=problem["kbar"])
    s2 = selection.score_point(problem["w"], problem["y"], 3, kernel=problem["kbar"])
    assert s1 == s2


def test_scores_do_not_depend_on_cluster_numbering(problem):
    y = problem["y"]
    renumbered = (y + 1) % 3 * 10  # other ids, same partition
    kw = dict(kernel=problem["kbar"], graph=selection.knn_graph(problem["kbar"], 5),
              only=[c for c in selection.CRITERIA if c not in ("seed_stability", "bootstrap_stability")])
    a = selection.score_point(problem["w"], y, 3, **kw)
    b = selection.score_point(problem["w"], renumbered, 3, **kw)
    assert a.keys() == b.keys() and len(a) >= 8
    for name in a:
        assert a[name] == pytest.approx(b[name], rel=1e-12, abs=1e-12), name


def test_consensus_and_neighbour_agreement():
    a = np.repeat([0, 1, 2], 10)
    b = a.copy()
    b[:3] = 1  # close to a
    c = np.tile([0, 1, 2], 10)  # unrelated
    cons = selection.consensus([a, b, c, a])
    assert cons[0] == cons[3] and np.argmax(cons) == 0 and np.argmin(cons) == 2
    nb = selection.neighbour_agreement([c, a, a, b])
    assert np.argmax(nb) == 2 and nb[0] == pytest.approx(selection.consensus([c, a])[0])
    with pytest.raises(ValueError):
        selection.consensus([a])
    with pytest.raises(ValueError):
        selection.consensus([a, a[:5]])
    with pytest.raises(ValueError):
        selection.consensus([a, b], score="acc")


def test_select():
    scores = {1.0: {"x": 0.2}, 2.0: {"x": 0.5}, 4.0: {"x": 0.5}}
    out = selection.select(scores, "x")
    assert out["point"] == 2.0 and out["criterion"] == "x" and out["score"] == 0.5  # tie: first
    assert selection.select([{"x": 3.0}, {"x": 1.0}], "x")["point"] == 0
    assert selection.select({a: {selection.SHIPPED: a} for a in (1, 2)})["criterion"] == selection.SHIPPED
    assert selection.SHIPPED in selection.CRITERIA or selection.SHIPPED in selection.GRID_CRITERIA
    with pytest.raises(ValueError, match="no grid points"):
        selection.select({}, "x")
    with pytest.raises(ValueError, match="has no score"):
        selection.select({1.0: {"y": 1.0}}, "x")
    with pytest.raises(ValueError, match="non-finite"):
        selection.select({1.0: {"x": np.nan}}, "x")


def test_bad_inputs():
    with pytest.raises(ValueError, match="2-D"):
        selection.silhouette_kstar(np.ones(5), np.zeros(5))
    with pytest.raises(ValueError, match="square"):
        selection.silhouette_kernel(np.ones((3, 4)), np.zeros(3))
    with pytest.raises(ValueError, match="entries"):
        selection.kernel_alignment(np.eye(4), np.zeros(3))
    with pytest.raises(ValueError, match="unknown criteria"):
        selection.score_point(np.eye(4), np.zeros(4), 2, only=["acc"])
    with pytest.raises(ValueError, match="n_runs"):
        selection.seed_stability(np.eye(4), 2, n_runs=1)


def test_selection_never_reads_ground_truth(tmp_path):
    """A sweep run with the true labels and one with shuffled labels selects the same alpha."""
    from lswmkc_dask.grid.sweep import sweep

    x1, y = _blobs(n_per=15, k=3, d=3, sep=1.5, seed=2)
    x2, _ = _blobs(n_per=15, k=3, d=5, sep=1.0, seed=3)
    kernels = kernels_from_features([x1, x2], "gaussian")
    kbar = selection.average_kernel(kernels)
    picks = []
    for name, labels in (("true", y), ("shuffled", np.random.default_rng(0).permutation(y))):
        out = tmp_path / name
        sweep(kernels, out, labels=labels, alphas=[1.0, 16.0, 256.0], n_clusters=3, n_init=5, progress=False)
        scores, parts = {}, []
        for a in (1.0, 16.0, 256.0):
            d = out / "runs" / f"alpha={a:g}_c=5"
            lab = np.loadtxt(d / "labels.csv", delimiter=",", skiprows=1, dtype=int)[:, 1]
            z, w = run_arrays(d)
            scores[a] = selection.score_point(w, lab, 3, affinity=z, kernel=kbar,
                                              only=["silhouette_avg_kernel", "eigengap_laplacian_Z", "seed_stability"])
            parts.append(lab)
        for a, c in zip(scores, selection.consensus(parts)):
            scores[a]["consensus_ari"] = c
        picks.append({c: selection.select(scores, c)["point"] for c in scores[1.0]} | {"all": scores})
    assert picks[0] == picks[1]

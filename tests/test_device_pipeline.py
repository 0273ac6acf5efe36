"""Device pipeline pieces on the array API: feature kernels built in device memory, the
polynomial positive part of S (lswmkc_dask.core.polar) and eig_precision="mixed" of the
resident fit. Checked on NumPy and on array-api-strict's non-default ``Device("device1")``,
which refuses host round trips."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from lswmkc_dask import prepare
from lswmkc_dask.engine import device_fit as df
from lswmkc_dask.core import polar
from lswmkc_dask.kernels.features import FeatureKernels, feature_kernels_on, preprocess_kernels
from lswmkc_dask.engine.postprocess import cluster_factor

NAMESPACES = ["numpy", "array-api-strict"]


def _link(name):
    xp, device = df.resident_namespace(name)
    return df.Link(xp, device)


def _exact_positive_part(s):
    lam, u = np.linalg.eigh(s)
    return (u * np.maximum(lam, 0.0)) @ u.T, lam


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_feature_kernels_on_device_equal_host_preprocessing(name, kernel, rng):
    """Kernels from features built on the device, block by block, equal the host route's
    (FeatureKernels then symmetrise, centre, normalise) to 1e-12; only features cross."""
    views = [rng.normal(size=(37, 5)), 10.0 * rng.normal(size=(37, 3)) + 4.0]
    fk = FeatureKernels(views, kernel)
    want = preprocess_kernels(fk.rows(0, 37))
    link = _link(name)
    got, col_means, diag = feature_kernels_on(fk, link, block_rows=8)
    assert {what for _, _, what, _ in link.transfers.log} == {"features", "statistics"}
    assert link.transfers.largest() <= 37 * 5 * 8
    np.testing.assert_allclose(link.to_host(got, "kernels"), want, rtol=0, atol=1e-12)
    stats = prepare(fk, None).preprocessing_statistics()  # the host route's training statistics
    np.testing.assert_allclose(col_means, stats.col_means, rtol=0, atol=1e-14)
    np.testing.assert_allclose(diag, stats.diag, rtol=0, atol=1e-14)


def test_sign_coefficients_reach_the_target():
    """The composite cubic maps [l, 1] into [1 - E, 1 + E] and keeps signs below l."""
    x = np.concatenate([np.geomspace(1e-6, 1.0, 2000), [0.0]])
    for lower, target in [(1e-3, 6e-8), (1e-2, 1e-15), (1e-6, 1e-10)]:
        y = x.copy()
        for a, b in polar.sign_coefficients(lower, target):
            y = a * y + b * y**3
        big = x >= lower
        assert np.max(np.abs(1.0 - y[big])) <= 2 * target + 1e-15
        assert np.all(y[~big] >= 0) and np.all(y[~big] <= 1.0)
    with pytest.raises(ValueError, match="lower must be in"):
        polar.sign_coefficients(0.0, 1e-8)


def _bound(s, lam, dtype, lower=polar.DEFAULT_LOWER):
    """The stated bound: (||S||_inf / 2) max(E, l) plus (2 steps + 1) sqrt(n) eps ||S||_inf."""
    norm = np.abs(s).sum(axis=1).max()
    eps = float(np.finfo(dtype).eps)
    steps = len(polar.sign_coefficients(lower, eps))
    return norm / 2 * max(eps, lower) + (2 * steps + 1) * np.sqrt(s.shape[0]) * eps * norm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_positive_part_random_symmetric_within_bound(dtype, rng):
    for n in (50, 200):
        a = rng.normal(size=(n, n))
        s = (a + a.T) / (2 * n)
        want, lam = _exact_positive_part(s)
        got, rank = polar.positive_part(s, dtype=dtype)
        assert got.dtype == np.float64 and np.array_equal(got, got.T)
        assert np.linalg.norm(got - want, 2) <= _bound(s, lam, dtype)
        assert abs(float(rank) - np.sum(lam > 0)) <= np.sum(np.abs(lam) < polar.DEFAULT_LOWER * np.abs(s).sum(1).max())


@pytest.fixture(scope="module")
def yale_pre(yale):
    return preprocess_kernels(yale[0])


def _yale_s(kernels):
    """S = (Z + Z^T)/2 of the first iteration of a resident fit on YALE (alpha = 1)."""
    res, _, z = df.fit_resident(kernels, 1.0, max_iter=1, min_iter=1)
    z = z.toarray()
    return (z + z.T) / 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_positive_part_yale_s_within_bound(dtype, yale_pre):
    s = _yale_s(yale_pre)
    want, lam = _exact_positive_part(s)
    got, _ = polar.positive_part(s, dtype=dtype)
    err = np.linalg.norm(got - want, 2)
    assert err <= _bound(s, lam, dtype)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < (1e-4 if dtype == np.float32 else 1e-5)


@pytest.mark.parametrize("name", NAMESPACES)
def test_positive_part_on_device(name, rng):
    a = rng.normal(size=(40, 40))
    s = (a + a.T) / 80
    link = _link(name)
    got, rank = polar.positive_part(link.to_device(s, "S"), dtype=link.xp.float32)
    np.testing.assert_array_equal(link.to_host(got, "K*"), polar.positive_part(s, dtype=np.float32)[0])


@pytest.mark.parametrize("name", NAMESPACES)
def test_positive_part_in_place_by_tiles(name, rng):
    """S symmetrised in its own buffer by tiles gives (A + A^T)/2 exactly; the positive part
    written into S's buffer, its element-wise steps by tiles of 7 (one of 3 rows at the
    edge), gives the one-tile result exactly (float32 and float64) and the same rank."""
    link = _link(name)
    a = rng.normal(size=(45, 45)) / 90
    sym = polar.symmetrise_in_place(link.to_device(a, "A"), 7)
    np.testing.assert_array_equal(link.to_host(sym, "S"), (a + a.T) * 0.5)
    s = (a + a.T) * 0.5
    for dtype in (link.xp.float32, link.xp.float64):
        want, want_rank = polar.positive_part(link.to_device(s, "S"), dtype=dtype)
        buffer = link.to_device(s, "S")
        got, rank = polar.positive_part(buffer, dtype=dtype, overwrite=True, tile=7)
        assert got is buffer
        np.testing.assert_array_equal(link.to_host(got, "K*"), link.to_host(want, "K*"))
        assert float(link.to_host(rank, "rank")) == float(link.to_host(want_rank, "rank"))


@pytest.mark.parametrize("name", NAMESPACES)
def test_mixed_fit_on_yale(name, yale, yale_pre):
    """eig_precision="mixed": labels as float64's (ARI >= 0.99), float32 iterations first and
    float64 ones last (the stop rule decided between float64 K*s), the sampled projection
    error small, and nothing of size n x n crossing during the iterations."""
    link = _link(name)
    kernels = link.to_device(yale_pre, "kernels")
    n = yale_pre.shape[1]
    labels, runs = {}, {}
    for precision in ("float64", "mixed"):
        transfers, log = df.Transfers(), []
        res, _, _ = df.fit_resident(kernels, 1.0, transfers=transfers, precision=precision, precision_log=log,
                                    check_every=4)
        labels[precision] = cluster_factor(res.factor, 15, 10, 0)[0]
        runs[precision] = (res, log)
        assert transfers.largest(range(1, res.n_iter + 1)) < 8 * n
    res, log = runs["mixed"]
    precisions = [entry["precision"] for entry in log]
    assert [e["t"] for e in log] == list(range(1, res.n_iter + 1))
    assert precisions[0] == "float32" and precisions[-3:] == ["float64"] * 3
    assert precisions == sorted(precisions, key=lambda p: p == "float64")  # float32 first, then float64 only
    assert [h.eig_driver for h in res.history][-1] == "resident"
    assert res.history[0].eig_driver == "resident float32 polynomial"
    errors = [e["projection_error"] for e in log if e["projection_error"] is not None]
    assert errors and max(errors) < 1e-4
    assert all(e["precision"] == "float32" for e in log if e["projection_error"] is not None)
    assert {e["precision"] for e in runs["float64"][1]} == {"float64"}
    assert adjusted_rand_score(labels["float64"], labels["mixed"]) >= 0.99


def test_mixed_fit_ends_in_float64_at_max_iter(yale_pre):
    log = []
    res, _, _ = df.fit_resident(yale_pre, 1.0, max_iter=5, min_iter=5, precision="mixed", precision_log=log)
    assert res.n_iter == 5
    assert [e["precision"] for e in log] == ["float32"] * 3 + ["float64"] * 2


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("min_iter", [4, 20])
def test_mixed_float64_phase_starts_at_min_iter(name, min_iter, yale_pre):
    """Issue 51's decision: the float64 phase of "mixed" starts at t = min_iter, whatever the
    changes of K* were before; the stop rule decides between float64 K*s only (at the earliest
    at min_iter + 2); the fit records its iteration count and the K*s its stop rule compared."""
    link = _link(name)
    kernels = link.to_device(yale_pre, "kernels")
    log, record = [], {}
    res, _, _ = df.fit_resident(kernels, 1.0, min_iter=min_iter, precision="mixed", precision_log=log,
                                record=record)
    t = res.n_iter
    assert [e["precision"] for e in log] == ["float32"] * (min_iter - 1) + ["float64"] * (t - min_iter + 1)
    assert [h.eig_driver for h in res.history] == (["resident float32 polynomial"] * (min_iter - 1)
                                                   + ["resident"] * (t - min_iter + 1))
    assert res.converged and min_iter + 2 <= t < 100
    assert [e["change_of"] for e in log] == [None] + [[i - 1, i] for i in range(2, t + 1)]
    assert record["n_iter"] == t and record["first_float64"] == min_iter
    assert record["stop_pairs"] == [[t - 2, t - 1], [t - 1, t]]
    assert record["stop_precisions"] == [["float64", "float64"]] * 2
    ref_record = {}
    ref, _, _ = df.fit_resident(kernels, 1.0, min_iter=min_iter, record=ref_record)
    assert ref_record["first_float64"] == 1 and ref_record["n_iter"] == ref.n_iter
    assert t <= max(ref.n_iter, min_iter + 2) + 1  # about one iteration more than float64, at most


def test_mixed_first_float64_bounds(yale_pre):
    assert df.first_float64(20, 100) == 20 and df.first_float64(5, 5) == 4 and df.first_float64(1, 100) == 1
    log = []
    df.fit_resident(yale_pre, 1.0, min_iter=1, max_iter=4, precision="mixed", precision_log=log)
    assert {e["precision"] for e in log} == {"float64"}


@pytest.mark.parametrize("name", NAMESPACES)
def test_kmeans_on_device_matches_host_and_is_deterministic(name):
    """Well-separated clusters: the device k-means gives the host k-means' labels (both
    numbered by first appearance), the same labels again for the same random_state, and
    only the points, a few numbers and the n labels cross."""
    from sklearn.datasets import make_blobs

    from lswmkc_dask.engine.postprocess import kmeans_best_of, kmeans_on

    x, _ = make_blobs(240, centers=6, n_features=4, cluster_std=0.4, random_state=3)
    want, want_inertia = kmeans_best_of(x, 6, 8, 0)
    link = _link(name)
    xd = link.to_device(x, "embedding")
    runs = [kmeans_on(xd, 6, 8, seed, to_host=lambda a: link.to_host(a, "k-means")) for seed in (0, 0, 5)]
    np.testing.assert_array_equal(runs[0][0], want)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]
    assert runs[0][1] == pytest.approx(want_inertia, rel=1e-12)
    assert adjusted_rand_score(runs[2][0], want) == 1.0
    assert max(b for _, d, what, b in link.transfers.log if what == "k-means") <= 8 * 240


@pytest.mark.parametrize("alpha", [1.0, 64.0, 1024.0])
def test_kmeans_on_device_is_scikit_learns_protocol_on_yale(alpha, yale_store):
    """The device k-means draws scikit-learn's numbers and runs its Lloyd steps: on the
    embeddings of YALE's K* (15 clusters that are not well separated, rank below k at
    alpha 1024) the labels and inertia of kmeans_best_of, on NumPy and on device1."""
    from lswmkc_dask import LSWMKC
    from lswmkc_dask.engine.postprocess import kmeans_best_of, kmeans_on

    h = LSWMKC(15, alpha=alpha, n_init=2).fit(yale_store).embedding_
    want, inertia = kmeans_best_of(h, 15, 12, 7)
    for name in NAMESPACES:
        link = _link(name)
        got, got_inertia = kmeans_on(link.to_device(h, "embedding"), 15, 12, 7,
                                     to_host=lambda a, link=link: link.to_host(a, "k-means"))
        np.testing.assert_array_equal(got, want)
        assert got_inertia == pytest.approx(inertia, rel=1e-12)


@pytest.mark.parametrize("alpha", [1.0, 64.0])
def test_resident_fit_clusters_on_the_device(alpha, yale, yale_store):
    """A resident fit on device1 forms the embedding and runs the k-means there (only the
    n x k embedding, a few numbers and the labels cross after the iterations), and gives
    the CPU route's labels and embedding (to the embedding's rounding grid)."""
    from lswmkc_dask import LSWMKC
    from lswmkc_dask.engine.device_route import fit_on_device

    ref = LSWMKC(15, alpha=alpha, n_init=10).fit(yale_store)
    options = dataclasses.replace(ref._fit_options(), resident="array-api-strict")
    res = fit_on_device(yale_store, options)
    np.testing.assert_array_equal(res.labels, ref.labels_)
    np.testing.assert_allclose(res.embedding, ref.embedding_, rtol=0, atol=2**-25)
    n = yale_store.n_samples
    assert res.device_transfers["largest_per_iteration"] < n * n * 8


def test_mixed_fit_with_the_float16_polynomial(monkeypatch):
    """The float16 polynomial (what a CUDA device runs; NumPy's float16 stands in): a mixed fit
    of well-separated multi-view data ends in float64 with the float64 fit's labels, and its
    float16 iterations are recorded as such."""
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(90, centers=3, n_features=6, cluster_std=1.5, random_state=2)  # (NumPy float16: no BLAS)
    views = [x[:, :3], x[:, 3:]]
    kernels = preprocess_kernels(FeatureKernels(views).rows(0, 90))
    monkeypatch.setattr(df, "low_dtype", lambda xp, n: xp.float16)
    ref, _, _ = df.fit_resident(kernels, 8.0)
    log = []
    res, _, _ = df.fit_resident(kernels, 8.0, precision="mixed", precision_log=log)
    assert log[0]["precision"] == "float16" and log[-1]["precision"] == "float64"
    assert res.history[0].eig_driver == "resident float16 polynomial"
    np.testing.assert_allclose(res.weights, ref.weights, rtol=0, atol=1e-4)
    labels = [cluster_factor(np.asarray(r.factor), 3, 10, 0)[0] for r in (ref, res)]
    assert adjusted_rand_score(*labels) >= 0.99

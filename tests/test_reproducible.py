"""The same data and random_state give the same labels_ whatever the execution layout:
1 or 2 worker processes, kernels in memory or in a store on disk with other row blocks,
or no cluster at all, and BLAS thread counts. The factor W of K* differs between
layouts by about 1e-15, so the clustering must be insensitive to that.

The cause found on YALE: at alpha >= 128, K* has rank below k = 15 (8 at alpha = 1024),
so the old top-15 eigenvectors included 7 of an arbitrary null-space basis picked by
rounding noise; labels between layouts had ARI 0.47-0.82."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from lswmkc_dask import LSWMKC, prepare
from lswmkc_dask.engine.postprocess import (
    EMBEDDING_GRID,
    canonical_labels,
    centre_normalise,
    cluster_factor,
    kmeans_best_of,
    spectral_embedding,
)

pytestmark = pytest.mark.timeout(600)

ALPHAS = (1024.0, 8.0)
K = 15


@pytest.fixture(scope="module")
def disk_store(yale, tmp_path_factory):
    kernels, labels = yale
    return prepare(kernels, tmp_path_factory.mktemp("store") / "yale.zarr", labels=labels, block_rows=40)


@pytest.fixture(scope="module")
def fits(yale_store, disk_store, client, client1):
    """One fit per (layout, alpha)."""
    layouts = {
        "2 workers, array": {"store": yale_store, "client": client},
        "1 worker, array": {"store": yale_store, "client": client1},
        "2 workers, disk (40-row blocks)": {"store": disk_store, "client": client},
        "1 worker, disk (40-row blocks)": {"store": disk_store, "client": client1},
        "in-process, array": {"store": yale_store},
        "in-process, disk": {"store": disk_store},
        "in-process, array, 2 eig threads": {"store": yale_store, "eig_threads": 2},
    }
    out = {}
    for name, spec in layouts.items():
        spec = dict(spec)
        store = spec.pop("store")
        for a in ALPHAS:
            model = LSWMKC(K, alpha=a, random_state=0, **spec).fit(store)
            if "in-process" in name:
                assert model.execution_.startswith("in-process"), model.execution_
            else:
                assert model.execution_.startswith(f"Dask: {1 if '1 worker' in name else 2} workers")
            out[name, a] = model
    return out


@pytest.mark.parametrize("alpha", ALPHAS)
def test_same_labels_in_every_layout(fits, alpha):
    names = sorted({name for name, a in fits if a == alpha})
    base = fits[names[0], alpha]
    for name in names[1:]:
        model = fits[name, alpha]
        np.testing.assert_allclose(model.kernel_weights_, base.kernel_weights_, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(model.labels_, base.labels_, err_msg=f"{name} vs {names[0]}")
        # The embedding is rounded to a grid: equal, or one grid step apart.
        np.testing.assert_allclose(model.embedding_, base.embedding_, rtol=0, atol=1.01 * EMBEDDING_GRID,
                                   err_msg=name)
    assert len(np.unique(base.labels_)) == K


def test_low_rank_kstar_has_no_noise_columns(fits):
    """At alpha = 1024 K* has rank 8 < 15: the embedding keeps the 8 determined
    eigenvectors and zeros the 7 of the null space (they were rounding noise)."""
    model = fits["2 workers, array", 1024.0]
    lam = np.linalg.eigvalsh(centre_normalise(model.neighborhood_kernel_))[::-1][:K]
    rank = int(np.sum(lam > 1e-10 * lam[0]))
    assert rank == model.kstar_factor_.shape[1] == 8
    assert lam[rank - 1] > 1e-6 * lam[0] and abs(lam[rank]) < 1e-13 * lam[0]
    h = model.embedding_
    assert int(np.sum(np.any(h != 0, axis=0))) == rank
    np.testing.assert_allclose(np.linalg.norm(h, axis=1), 1.0, atol=1e-7)
    # At alpha = 8 (rank 35) all 15 columns are used.
    assert np.all(np.any(fits["2 workers, array", 8.0].embedding_ != 0, axis=0))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_perturbed_factor_same_embedding_and_labels(fits, alpha):
    """W with 1e-13 relative noise (100x the layout differences) and other BLAS thread
    counts: the same labels and (up to one grid step) the same embedding."""
    model = fits["2 workers, array", alpha]
    w = model.kstar_factor_
    labels, h = cluster_factor(w, K, 50, 0, n_threads=1)
    np.testing.assert_array_equal(labels, model.labels_)
    rng = np.random.default_rng(7)
    for trial in range(10):
        noisy = w * (1.0 + 1e-13 * rng.standard_normal(w.shape))
        threads = 1 + trial % 2
        with threadpool_limits(threads):
            got_labels, got_h = cluster_factor(noisy, K, 50, 0, n_threads=threads)
        np.testing.assert_array_equal(got_labels, labels, err_msg=f"trial {trial}")
        np.testing.assert_allclose(got_h, h, rtol=0, atol=1.01 * EMBEDDING_GRID, err_msg=f"trial {trial}")
        # Rounding makes the k-means input bitwise equal but for the rare entry near a
        # rounding boundary (one grid step apart; none to a few of the 2475 per trial).
        assert np.sum(got_h != h) <= 0.01 * h.size, f"trial {trial}"


def test_embedding_sign_convention(fits):
    """Each column's entry of largest magnitude is positive (eigh fixes no sign)."""
    model = fits["2 workers, array", 8.0]
    h = spectral_embedding(model.neighborhood_kernel_, K, grid=None)
    top = h[np.argmax(np.abs(h), axis=0), np.arange(K)]
    assert np.all(top > 0)
    # Flipping the sign of W (and so nothing in K*) changes nothing: the embedding of K* formed here
    # (a GEMM and eigh with this process's BLAS threads) is the model's (made in a worker) up to one
    # grid step, at the rare entry near a rounding boundary.
    flipped = spectral_embedding((-model.kstar_factor_) @ (-model.kstar_factor_).T, K)
    np.testing.assert_allclose(flipped, model.embedding_, rtol=0, atol=1.01 * EMBEDDING_GRID)
    assert np.sum(flipped != model.embedding_) <= 0.01 * flipped.size


def test_kmeans_best_of_is_sklearns_lowest_inertia(fits):
    """The same n_init starts as KMeans(n_init, random_state) and its lowest inertia,
    independent of the thread count; clusters numbered by first appearance."""
    from sklearn.cluster import KMeans

    h = fits["2 workers, array", 8.0].embedding_
    with threadpool_limits(1):
        ref = KMeans(K, n_init=20, max_iter=250, random_state=3).fit(h)
    labels, inertia = kmeans_best_of(h, K, n_init=20, random_state=3)
    assert inertia == pytest.approx(ref.inertia_, rel=1e-9)
    np.testing.assert_array_equal(labels, canonical_labels(ref.labels_))
    with threadpool_limits(2):
        labels2, inertia2 = kmeans_best_of(h, K, n_init=20, random_state=3)
    np.testing.assert_array_equal(labels2, labels)
    assert inertia2 == inertia
    _, first = np.unique(labels, return_index=True)
    assert list(labels[np.sort(first)]) == list(range(K))


def test_canonical_labels():
    np.testing.assert_array_equal(canonical_labels([5, 5, 2, 9, 2, 0]), [0, 0, 1, 2, 1, 3])
    np.testing.assert_array_equal(canonical_labels(np.array(["b", "a", "b"])), [0, 1, 0])

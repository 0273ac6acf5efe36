"""Inputs, the zarr kernel store, and one code path for memory and disk."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
import zarr

from lswmkc_dask import LSWMKC, FeatureKernels, HeaderWarning, load_kernels, open_store, prepare, preprocess_kernels
from lswmkc_dask.datasets import load_handwritten
from lswmkc_dask.io import load_features


def _reference_preprocess(k):
    """docs/algorithm.md section 0 on one dense kernel, written out plainly."""
    k = (k + k.T) / 2
    d = k.mean(axis=0)
    k = k - np.outer(np.ones(len(k)), d) - np.outer(d, np.ones(len(k))) + d.mean()
    k = (k + k.T) / 2 + 1e-12 * np.eye(len(k))
    s = np.sqrt(np.diag(k))
    return k / np.outer(s, s)


@pytest.mark.parametrize("tol", [-1e-6, float("nan")])
def test_symmetry_tol_must_be_non_negative(yale, tol):
    # negative: every kernel was refused as asymmetric, or TypeError (cannot unpack None) for an
    # exactly symmetric one; NaN: no asymmetry was refused
    from lswmkc_dask.errors import ParameterError

    with pytest.raises(ParameterError, match="symmetry_tol must be >= 0"):
        prepare(yale[0], None, symmetry_tol=tol)


def test_store_layout_and_preprocessing(yale, tmp_path):
    kernels, labels = yale
    store = prepare(kernels, tmp_path / "yale.zarr", labels=labels, block_rows=40)
    group = zarr.open_group(str(tmp_path / "yale.zarr"), mode="r")
    arr = group["kernels"]
    assert arr.shape == (5, 165, 165) and arr.chunks == (5, 40, 165)
    assert group.attrs["labels"] == labels.tolist()
    reopened = open_store(tmp_path / "yale.zarr")
    assert reopened.block_rows == 40 and reopened.n_kernels == 5
    np.testing.assert_array_equal(reopened.labels, labels)
    got = reopened.read_rows(0, 165)
    for p in range(5):
        np.testing.assert_allclose(got[p], _reference_preprocess(kernels[p]), atol=1e-13)
        np.testing.assert_allclose(np.diag(got[p]), 1.0, atol=1e-14)
        np.testing.assert_array_equal(got[p], got[p].T)  # blockwise writing stays exactly symmetric
    np.testing.assert_allclose(preprocess_kernels(kernels), got, atol=1e-14)
    assert store.attrs["n_samples"] == 165
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary left behind


def test_mat_v5_v73_npz_agree(yale, tmp_path):
    kernels, labels = yale
    scipy.io.savemat(tmp_path / "k5.mat", {"KH": np.moveaxis(kernels, 0, 2), "Y": labels[:, None]})
    np.savez(tmp_path / "k.npz", kernels=kernels, labels=labels)
    for name in ("k5.mat", "k.npz"):
        k, y = load_kernels(tmp_path / name)
        np.testing.assert_array_equal(k, kernels)
        np.testing.assert_array_equal(y, labels)


@pytest.mark.parametrize("workers", [1, 2])
def test_memory_and_disk_store_same_fit(yale, yale_store, tmp_path, client, client1, workers):
    kernels, labels = yale
    disk = prepare(kernels, tmp_path / "y.zarr", labels=labels, block_rows=30)  # 6 row blocks
    c = client if workers == 2 else client1
    a = LSWMKC(15, alpha=256.0, client=c, random_state=0).fit(yale_store)
    b = LSWMKC(15, alpha=256.0, client=c, random_state=0).fit(str(disk.location))
    r = LSWMKC(15, alpha=256.0, client=c, random_state=0, cache_kernels=False).fit(disk)
    assert a.n_iter_ == b.n_iter_ == r.n_iter_ == 25
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=1e-10)
    np.testing.assert_allclose(r.kernel_weights_, b.kernel_weights_, atol=1e-10)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-10)
    assert abs(a.affinity_ - b.affinity_).max() < 1e-10


def test_feature_kernels_blockwise(tmp_path):
    views, labels = load_handwritten(("mor", "zer"))
    views = [v[:300] for v in views]
    fk = FeatureKernels(views, "gaussian")
    dense = fk.rows(0, 300)
    x = (views[1] - views[1].mean(0)) / views[1].std(0)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(dense[1], np.exp(-d2 / d2.mean()), atol=1e-12)
    store = prepare(fk, tmp_path / "f.zarr", labels=labels[:300], block_rows=64)
    np.testing.assert_allclose(store.read_rows(0, 300), preprocess_kernels(dense), atol=1e-12)
    lin = FeatureKernels(views, "linear").rows(0, 300)
    np.testing.assert_allclose(lin[1], x @ x.T, atol=1e-9)
    poly = FeatureKernels(views, "polynomial", degree=3).rows(0, 300)
    np.testing.assert_allclose(poly[1], (x @ x.T / x.shape[1] + 1) ** 3, rtol=1e-9)


def test_load_features_csv(tmp_path):
    x = np.arange(12.0).reshape(4, 3)
    path = tmp_path / "v.csv"
    path.write_text("0,1,2\n" + "\n".join(",".join(str(v) for v in row) for row in x) + "\n")
    # A header of column numbers (pandas' to_csv) is skipped, as read_csv does ...
    feats, y = load_features(path, label_column=-1, header=True)
    np.testing.assert_array_equal(feats, x[:, :2])
    np.testing.assert_array_equal(y, [2, 5, 8, 11])
    with pytest.warns(HeaderWarning, match="read as a header"):
        feats, y = load_features(path, label_column=-1)
    np.testing.assert_array_equal(feats, x[:, :2])
    # ... unless said to be a sample.
    feats, y = load_features(path, label_column=-1, header=False)
    assert feats.shape == (5, 2) and y.tolist() == [2, 2, 5, 8, 11]


def test_prepare_to_fsspec_url(yale):
    """An fsspec URL is written as a store (not as a local directory named 's3:')."""
    import os

    kernels, labels = yale
    url = "memory://lswmkc-test/yale.zarr"
    store = prepare(kernels, url, labels=labels, block_rows=64)
    assert store.location == url and not os.path.exists("memory:")
    reopened = open_store(url)
    np.testing.assert_allclose(reopened.read_rows(0, 165), preprocess_kernels(kernels), atol=1e-14)
    with pytest.raises(FileExistsError, match="already exists"):
        prepare(kernels, url)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_kernels_in_memory_are_the_stores_bit_for_bit(yale, tmp_path, dtype):
    """prepare() with no output holds in memory (an ArrayStack, no zarr store written and read back)
    exactly what a store of the same input holds: the kernels bit for bit, the attributes, the
    training statistics and the fingerprint a resumed sweep compares."""
    from lswmkc_dask.grid.points import input_fingerprint
    from lswmkc_dask.io import ArrayStack

    kernels, labels = yale
    held = prepare(kernels, labels=labels, block_rows=40, dtype=dtype)
    disk = open_store(prepare(kernels, tmp_path / "y.zarr", labels=labels, block_rows=40, dtype=dtype).location)
    assert isinstance(held, ArrayStack) and held.in_memory and held.location is None
    assert repr(held).startswith("ArrayStack(in memory: 5 kernels x 165 samples")
    assert (held.n_kernels, held.n_samples, held.block_rows, held.itemsize, held.nbytes, held.kernel_names) == (
        disk.n_kernels, disk.n_samples, disk.block_rows, disk.itemsize, disk.nbytes, disk.kernel_names)
    assert held.blocks() == disk.blocks()
    got, want = held.read_rows(0, 165), disk.read_rows(0, 165)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert held.read_rows(40, 80).tobytes() == disk.read_rows(40, 80).tobytes()
    with pytest.raises(ValueError, match="read-only"):
        held.read_rows(0, 1)[0, 0, 0] = 1.0  # every read shares the kernels
    a, b = held.preprocessing_statistics(), disk.preprocessing_statistics()
    assert a.col_means.tobytes() == b.col_means.tobytes() and a.diag.tobytes() == b.diag.tobytes()
    assert a.kernel_index.tolist() == b.kernel_index.tolist() and a.n_kernels_in == b.n_kernels_in
    assert input_fingerprint(held, labels) == input_fingerprint(disk, labels)
    assert np.array_equal(held.labels, disk.labels) and held.feature_views() is None and not held.has_feature_views


def test_feature_views_in_memory_are_the_stores(tmp_path):
    """An ArrayStack of feature views keeps what predict needs of them, as a store of them does."""
    rng = np.random.default_rng(3)
    fk = FeatureKernels([rng.normal(size=(40, 3)), rng.normal(size=(40, 5))], "poly", degree=3, names=["a", "b"])
    held = prepare(fk)
    disk = open_store(prepare(fk, tmp_path / "f.zarr").location)
    assert held.read_rows(0, 40).tobytes() == disk.read_rows(0, 40).tobytes()
    got, want = held.feature_views(), disk.feature_views()
    assert held.has_feature_views and disk.has_feature_views
    assert (got.kernel, got.degree, got.coef0, got.bandwidths, got.names, got.columns) == (
        want.kernel, want.degree, want.coef0, want.bandwidths, want.names, want.columns)
    for x, y in zip(got.views + got.means + got.scales, want.views + want.means + want.scales):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_open_kernels_is_the_one_input_step(yale, tmp_path):
    """open_kernels: a stack as it is, a store's path opened, anything else preprocessed in memory;
    a store of views with its own kernel taken, with another kernel refused."""
    from lswmkc_dask.engine.route import open_kernels
    from lswmkc_dask.errors import KernelInputError
    from lswmkc_dask.io import ArrayStack, KernelStore

    kernels, labels = yale
    held = prepare(kernels, labels=labels)
    assert open_kernels(held) is held
    disk = prepare(kernels, tmp_path / "y.zarr", labels=labels)
    opened = open_kernels(str(disk.location))
    assert isinstance(opened, KernelStore) and opened.location == disk.location
    again = open_kernels(kernels)
    assert isinstance(again, ArrayStack) and again.read_rows(0, 165).tobytes() == held.read_rows(0, 165).tobytes()
    with pytest.raises(ValueError, match="kernel_params .* kernel='precomputed'"):
        open_kernels(kernels, kernel_params={"degree": 3})
    rng = np.random.default_rng(0)
    views = [rng.normal(size=(30, 2)), rng.normal(size=(30, 4))]
    store = prepare(FeatureKernels(views, "rbf"), tmp_path / "v.zarr")
    assert open_kernels(store.location, kernel="rbf").location == store.location
    with pytest.raises(KernelInputError, match="builds kernels from feature views"):
        open_kernels(store.location, kernel="linear")
    built = open_kernels(views, kernel="rbf")
    assert built.read_rows(0, 30).tobytes() == store.read_rows(0, 30).tobytes()

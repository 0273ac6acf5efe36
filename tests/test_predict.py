"""LSWMKC.predict / transform: new samples against a brute-force reference, the training
samples against ``labels_``, and the refusals (docs/algorithm.md section 8)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from lswmkc_dask import LSWMKC, open_store, prepare
from lswmkc_dask.errors import KernelInputError
from lswmkc_dask.kernels.features import preprocess_kernels
from lswmkc_dask.report.metrics import evaluate
from lswmkc_dask import predict as predict_module
from lswmkc_dask.kernels.features import ArrayKernelSource, scan_kernels
from lswmkc_dask.predict import PREDICT_STATE, predict_labels, resident_of, transform_samples
from lswmkc_dask.predict_math import preprocess_cross_rows

FAST = dict(max_iter=6, min_iter=3, n_init=5)


def blobs(n, seed, dims=(4, 7, 3), k=3):
    """Views of k Gaussian clusters, each view its own noise level; the labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    views = []
    for p, d in enumerate(dims):
        centres = np.random.default_rng(100 + p).normal(scale=3.0, size=(k, d))
        views.append(centres[labels] + rng.normal(scale=1.0 + p, size=(n, d)))
    return views, labels


def raw_kernels(train, new, kernel, degree=2, coef0=1.0):
    """k_p(new, train), k_p(train, train) and k_p(new, new)'s diagonal, from the definitions."""
    out = []
    for t, x in zip(train, new):
        mu, sd = t.mean(0), t.std(0)
        sd[sd == 0] = 1.0
        zt, zx = (t - mu) / sd, (x - mu) / sd
        if kernel == "rbf":
            d2 = lambda a, b: ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)  # noqa: E731
            bw = d2(zt, zt).mean()
            out.append((np.exp(-d2(zx, zt) / bw), np.exp(-d2(zt, zt) / bw), np.ones(len(x))))
        elif kernel == "linear":
            out.append((zx @ zt.T, zt @ zt.T, (zx * zx).sum(1)))
        else:
            d = t.shape[1]
            out.append(((zx @ zt.T / d + coef0) ** degree, (zt @ zt.T / d + coef0) ** degree,
                        ((zx * zx).sum(1) / d + coef0) ** degree))
    return [np.stack(a) for a in zip(*out)]


def simplex(v):
    """Euclidean projection of one vector onto the probability simplex (sort-based)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    rho = np.nonzero(u - css / np.arange(1, v.size + 1) > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def reference(est, cross, k_train, new_diag, label_rule="vote"):
    """The four steps of the extension in plain NumPy: (embedding, labels); the labels by
    the affinity-weighted vote of ``labels_`` (or the nearest centroid of the embedding)."""
    m = k_train.shape[0]
    n = k_train.shape[1]
    rows = []
    for p in range(m):
        kt = k_train[p]
        d, e = kt.mean(0), kt.mean()
        diag_t = np.diag(kt) - 2 * d + e + 1e-12
        d_x = cross[p].mean(1)
        diag_x = new_diag[p] - 2 * d_x + e + 1e-12
        rows.append((cross[p] - d[None, :] - d_x[:, None] + e) / np.sqrt(diag_x[:, None] * diag_t[None, :]))
    rows = np.stack(rows)
    combined = np.tensordot(est.kernel_weights_, rows, axes=1)
    combined0 = rows.sum(0) / np.sqrt(m)
    c = est.n_neighbors
    h, votes = [], []
    for i in range(combined.shape[0]):
        dd = np.sort(-combined0[i])[: c + 1]
        gamma = c / 2 * dd[c] - dd[:c].sum() / 2
        z = simplex(combined[i] / (2 * gamma))
        assert z.shape == (n,)
        hi = z @ est.embedding_
        h.append(hi / np.linalg.norm(hi))
        votes.append(np.argmax([z[est.labels_ == j].sum() for j in range(est.n_clusters_)]))
    h = np.array(h)
    if label_rule == "vote":
        return h, np.array(votes)
    centres = np.array([est.embedding_[est.labels_ == j].mean(0) for j in range(est.n_clusters_)])
    return h, np.argmin(((h[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "gaussian", "polynomial"])
def test_features_against_brute_force(kernel):
    views, _ = blobs(60, 0)
    train, new = [v[:45] for v in views], [v[45:] for v in views]
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel=kernel, **FAST).fit(train)
    cross, k_train, new_diag = raw_kernels(train, new, {"gaussian": "rbf", "polynomial": "poly"}.get(kernel, kernel))
    h_ref, labels_ref = reference(est, cross, k_train, new_diag)
    np.testing.assert_allclose(est.transform(new), h_ref, atol=1e-9)
    np.testing.assert_array_equal(est.predict(new), labels_ref)
    _, centroid_ref = reference(est, cross, k_train, new_diag, "centroid")
    np.testing.assert_array_equal(predict_labels(est, new, label_rule="centroid"), centroid_ref)
    assert all(hasattr(est, name) for name in PREDICT_STATE)


def test_precomputed_against_brute_force():
    views, _ = blobs(50, 1)
    cross_all, k_all, _ = raw_kernels(views, views, "rbf")
    train = k_all[:, :38, :38]
    cross, new_diag = k_all[:, 38:, :38], np.ones((3, 12))
    est = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(train)
    h_ref, labels_ref = reference(est, cross, train, new_diag)
    np.testing.assert_allclose(est.transform(cross, new_diag), h_ref, atol=1e-9)
    np.testing.assert_array_equal(est.predict(list(cross), new_diag), labels_ref)


def test_training_rows_come_back_exactly(yale):
    """The training kernels as cross-kernels, preprocessed with the training statistics,
    are the preprocessed training kernels."""
    kernels, _ = yale
    stats = scan_kernels(ArrayKernelSource(kernels))
    means, diag = stats.col_means, stats.diag
    rows, _ = preprocess_cross_rows(kernels.astype(float), np.stack([np.diag(k) for k in kernels]), means, diag)
    np.testing.assert_allclose(rows, preprocess_kernels(kernels), atol=1e-12)


@pytest.mark.parametrize("alpha", [1, 8, 64])
def test_yale_training_samples_reproduce_labels(yale, alpha):
    """The training kernels as cross-kernels: labels_ back (the vote; the nearest centroid
    misses 3 of 165 at alpha 1 and 64, docs/algorithm.md section 8)."""
    kernels, _ = yale
    est = LSWMKC(15, alpha=alpha).fit(kernels)
    diagonals = np.stack([np.diag(k) for k in kernels])
    assert evaluate(est.labels_, est.predict(kernels, diagonals))["ACC"] >= 0.99
    h = est.transform(kernels, diagonals)
    assert h.shape == est.embedding_.shape
    assert np.median(np.einsum("ij,ij->i", h, est.embedding_)) > 0.99


def test_blocks_give_the_same_labels(monkeypatch):
    views, _ = blobs(60, 2)
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", **FAST).fit([v[:40] for v in views])
    new = [v[40:] for v in views]
    whole, labels = est.transform(new), est.predict(new)
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 1)  # one new sample per block
    np.testing.assert_allclose(est.transform(new), whole, atol=1e-13)  # BLAS rounds a row alone differently
    np.testing.assert_array_equal(est.predict(new), labels)


STRICT = "array-api-strict"  # its Device("device1") refuses any host round trip


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_resident_namespace_against_brute_force(kernel, monkeypatch):
    """The same array-API code on a device (array-api-strict's device1), two blocks: the
    brute-force reference, and the host route's labels for every alpha term and rule."""
    pytest.importorskip("array_api_strict")
    views, _ = blobs(60, 0)
    train, new = [v[:45] for v in views], [v[45:] for v in views]
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel=kernel, **FAST).fit(train)
    cross, k_train, new_diag = raw_kernels(train, new, kernel)
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 8 * 45 * 10 * 8)  # blocks of 8 samples
    h_ref, labels_ref = reference(est, cross, k_train, new_diag)
    np.testing.assert_allclose(transform_samples(est, new, resident=STRICT), h_ref, atol=1e-9)
    np.testing.assert_array_equal(predict_labels(est, new, resident=STRICT), labels_ref)
    kest = LSWMKC(3, alpha=4, n_neighbors=4, **FAST).fit(k_train)
    for term in ("zero", "kstar"):
        for rule in ("vote", "centroid"):
            np.testing.assert_array_equal(predict_labels(kest, cross, new_diag, term, rule, resident=STRICT),
                                          predict_labels(kest, cross, new_diag, term, rule))
    fixed = LSWMKC(3, alpha=4, n_neighbors=4, gamma=0.5, **FAST).fit(k_train)
    np.testing.assert_array_equal(predict_labels(fixed, cross, new_diag, resident=STRICT),
                                  predict_labels(fixed, cross, new_diag))
    with pytest.raises(KernelInputError, match="new sample 9: its centred diagonal in kernel 1"):
        bad = new_diag.copy()
        bad[1, 9] = -50.0
        predict_labels(kest, cross, bad, resident=STRICT)


def test_model_of_a_resident_fit_predicts_there():
    """A fit resident in a namespace (``execution_`` "resident on NAME") predicts in it."""
    pytest.importorskip("array_api_strict")
    from lswmkc_dask.engine.fit import fit_store
    from lswmkc_dask.predict import prediction_state
    from lswmkc_dask.records import FitOptions

    views, _ = blobs(50, 1)
    _, k_all, _ = raw_kernels(views, views, "rbf")
    train, cross = k_all[:, :38, :38], k_all[:, 38:, :38]
    store = prepare(train)
    params = dict(n_clusters=3, alpha=2.0, n_neighbors=3, max_iter=6, min_iter=3, n_init=5)
    est = LSWMKC.from_result(fit_store(store, FitOptions(**params, resident=STRICT)), **params)
    for name, value in prediction_state(est, train, store.preprocessing_statistics()).items():
        setattr(est, name, value)
    assert resident_of(est) == STRICT and resident_of(LSWMKC(3, **FAST).fit(train)) is None
    h_ref, labels_ref = reference(est, cross, train, np.ones((3, 12)))
    np.testing.assert_allclose(est.transform(cross, np.ones((3, 12))), h_ref, atol=1e-9)
    np.testing.assert_array_equal(est.predict(cross, np.ones((3, 12))), labels_ref)


def test_dask_workers_predict_the_blocks(client, monkeypatch):
    """A model fitted on Dask workers predicts there: one task per block of new samples
    (the fitted state scattered once beside them), the brute-force reference's results."""
    from distributed import get_task_stream

    views, _ = blobs(60, 0)
    train, new = [v[:45] for v in views], [v[45:] for v in views]
    cross, k_train, new_diag = raw_kernels(train, new, "rbf")
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 4 * 45 * 10 * 8)  # blocks of 4 samples: 4 blocks
    for est, args in ((LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", client=client, **FAST).fit(train), (new,)),
                      (LSWMKC(3, alpha=4, n_neighbors=4, client=client, **FAST).fit(k_train), (cross, new_diag))):
        assert est.execution_.startswith("Dask")
        h_ref, labels_ref = reference(est, cross, k_train, new_diag)
        with get_task_stream(client) as stream:
            np.testing.assert_allclose(est.transform(*args), h_ref, atol=1e-9)
            np.testing.assert_array_equal(est.predict(*args), labels_ref)
        tasks = [t for t in stream.data if str(t["key"]).startswith(("predict_block", "('predict_block"))]
        assert len(tasks) == 2 * 4 and {t["worker"] for t in tasks} <= set(client.scheduler_info()["workers"])


def test_refusals(tmp_path):
    views, _ = blobs(40, 3)
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", **FAST).fit(views)
    with pytest.raises(ValueError, match="2 feature views but the model was fitted on 3"):
        est.predict(views[:2])
    with pytest.raises(ValueError, match="view 1 has 6 features but the model was fitted on 7"):
        est.predict([views[0], views[1][:, :6], views[2]])
    bad = [v.copy() for v in views]
    bad[2][5, 1] = np.nan
    with pytest.raises(ValueError, match=r"view 2 hold 1 NaN/Inf values \(the first at index \(5, 1\)\)"):
        est.predict(bad)
    with pytest.raises(ValueError, match="the batch is empty"):
        est.predict([v[:0] for v in views])
    with pytest.raises(ValueError, match="diagonals are for precomputed kernels"):
        est.predict(views, np.ones((3, 40)))
    with pytest.raises(NotFittedError):
        LSWMKC(3).predict(views)

    _, k_all, _ = raw_kernels(views, views, "rbf")
    kest = LSWMKC(3, alpha=4, n_neighbors=4, **FAST).fit(k_all)
    with pytest.raises(ValueError, match="fitted on precomputed kernels, not features"):
        kest.predict(views)
    with pytest.raises(ValueError, match=r"shape \(m, n_new, n_train\) = \(3, n_new, 40\).*got \(2, 40, 40\)"):
        kest.predict(k_all[:2], np.ones((2, 40)))
    with pytest.raises(ValueError, match=r"diagonals must have shape \(m, n_new\) = \(3, 40\)"):
        kest.predict(k_all, np.ones((3, 39)))
    with pytest.raises(KernelInputError, match="new sample 0: its centred diagonal in kernel 0"):
        kest.predict(k_all, np.zeros((3, 40)) - 5)
    store = prepare(k_all, tmp_path / "k.zarr")
    shutil.rmtree(tmp_path / "k.zarr" / "statistics")  # as a store prepared by an earlier version (none in its manifest)
    del store.attrs["manifest"]["statistics_sha256"]
    __import__("zarr").open_group(tmp_path / "k.zarr", mode="r+").attrs["manifest"] = store.attrs["manifest"]
    sest = LSWMKC(3, alpha=4, n_neighbors=4, **FAST).fit(open_store(tmp_path / "k.zarr"))
    assert store.preprocessing_statistics() is None
    with pytest.raises(ValueError, match="fitted on a kernel store prepared by an earlier version.*prepare the store "
                                         "again"):
        sest.predict(k_all, np.ones((3, 40)))


def test_model_of_a_store_predicts_as_the_in_memory_fit(tmp_path):
    """prepare keeps the training statistics of its first pass in the store: a model fitted
    on the store (in memory or a directory, one kernel dropped) predicts as one fitted on
    the kernels, with the very same statistics."""
    views, _ = blobs(50, 7)
    _, k_all, _ = raw_kernels(views, views, "rbf")
    with_constant = np.concatenate([k_all[:, :, :38], np.ones((1, 50, 38))])
    train, cross = with_constant[:, :38], with_constant[:, 38:]
    with pytest.warns(UserWarning, match="kernel 3"):
        plain = LSWMKC(3, alpha=2, n_neighbors=3, degenerate_kernels="drop", **FAST).fit(train)
    for output in (None, tmp_path / "k.zarr"):
        with pytest.warns(UserWarning, match="kernel 3"):
            store = prepare(train, output, degenerate_kernels="drop")
        est = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(store if output is None else open_store(output))
        for name in ("kernel_col_means_", "kernel_diag_", "kernel_index_", "n_kernels_in_"):
            np.testing.assert_array_equal(getattr(est, name), getattr(plain, name))
        np.testing.assert_array_equal(est.predict(cross, np.ones((4, 12))), plain.predict(cross, np.ones((4, 12))))
    stats = scan_kernels(ArrayKernelSource(train))  # the first pass of prepare, bit for bit
    np.testing.assert_array_equal(plain.kernel_col_means_, stats.col_means[:3])
    np.testing.assert_array_equal(plain.kernel_diag_, stats.diag[:3])


def test_one_kernel_needs_no_diagonal():
    """scikit-learn's precomputed convention, X of shape (n_new, n_train): with one kernel and
    the learned gamma the new row's scale, and so k(x, x), does not change the result."""
    views, _ = blobs(50, 4)
    _, k_all, _ = raw_kernels(views, views, "linear")
    kernel = k_all[0] + 0.5 * k_all[1]
    est = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(kernel[:35, :35])
    cross, new_diag = kernel[35:, :35], np.diag(kernel)[35:]
    h_ref, labels_ref = reference(est, cross[None], kernel[None, :35, :35], new_diag[None])
    np.testing.assert_allclose(est.transform(cross), h_ref, atol=1e-9)
    np.testing.assert_array_equal(est.predict(cross), labels_ref)
    np.testing.assert_array_equal(est.predict(cross, new_diag), labels_ref)
    with pytest.raises(ValueError, match="X has 34 features, but LSWMKC is expecting 35 features"):
        est.predict(cross[:, :34])
    fixed = LSWMKC(3, alpha=2, n_neighbors=3, gamma=0.5, **FAST).fit(kernel[:35, :35])
    with pytest.raises(ValueError, match=r"pass the cross-kernels .* and the diagonals"):
        fixed.predict(cross)


def test_dropped_kernel_is_left_out_of_the_cross_kernels():
    """degenerate_kernels="drop": the cross-kernels of every input kernel are given, the
    dropped one is not used (the same labels as a model fitted without it)."""
    views, _ = blobs(50, 5)
    _, k_all, _ = raw_kernels(views, views, "rbf")
    with_constant = np.concatenate([k_all[:, :, :38], np.ones((1, 50, 38))])
    train = with_constant[:, :38]
    with pytest.warns(UserWarning, match="kernel 3"):
        est = LSWMKC(3, alpha=2, n_neighbors=3, degenerate_kernels="drop", **FAST).fit(train)
    plain = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(k_all[:, :38, :38])
    assert est.n_kernels_in_ == 4 and est.kernel_index_.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(est.predict(with_constant[:, 38:], np.ones((4, 12))),
                                  plain.predict(k_all[:, 38:, :38], np.ones((3, 12))))


def test_kernel_file_keeps_the_statistics(tmp_path):
    views, _ = blobs(40, 6)
    _, k_all, _ = raw_kernels(views, views, "rbf")
    np.savez(tmp_path / "k.npz", kernels=k_all[:, :30, :30])
    from_file = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(str(tmp_path / "k.npz"))
    from_arrays = LSWMKC(3, alpha=2, n_neighbors=3, **FAST).fit(k_all[:, :30, :30])
    np.testing.assert_array_equal(from_file.kernel_col_means_, from_arrays.kernel_col_means_)
    np.testing.assert_array_equal(from_file.predict(k_all[:, 30:, :30], np.ones((3, 10))),
                                  from_arrays.predict(k_all[:, 30:, :30], np.ones((3, 10))))


def test_saved_model_predicts_as_the_fitted_one(tmp_path):
    """The prediction state travels in the model file: a reloaded model (feature views, and
    precomputed kernels) predicts and embeds new samples exactly as the fitted one."""
    views, _ = blobs(60, 4)
    train, new = [v[:45] for v in views], [v[45:] for v in views]
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", **FAST).fit(train)
    back = LSWMKC.load(est.save(tmp_path / "features.safetensors"))
    np.testing.assert_array_equal(back.transform(new), est.transform(new))
    np.testing.assert_array_equal(back.predict(new), est.predict(new))
    cross, k_train, new_diag = raw_kernels(train, new, "rbf")
    kest = LSWMKC(3, alpha=4, n_neighbors=4, **FAST).fit(k_train)
    kback = LSWMKC.load(kest.save(tmp_path / "kernels.safetensors"))
    assert kback.train_features_ is None
    np.testing.assert_array_equal(kback.predict(cross, new_diag), kest.predict(cross, new_diag))


def test_model_of_a_yale_sweep_predicts_its_training_samples(yale, tmp_path):
    """A sweep writes no model file: the estimator of its choice (selected_model), fitted
    on the swept kernels, predicts, its own kernels as cross-kernels giving labels_ back; a
    grid point's model as the sweep builds it (LSWMKC.from_result) says how to get one."""
    from lswmkc_dask import selected_model, sweep
    from lswmkc_dask.engine.fit import fit_store
    from lswmkc_dask.records import FitOptions

    kernels, labels = yale
    result = sweep(kernels, tmp_path / "sweep", labels=labels, alphas=[2, 8], n_neighbors=[5], progress=False)
    model = selected_model(result).fit(kernels)
    diagonals = np.stack([np.diag(k) for k in kernels])
    assert np.mean(model.predict(kernels, diagonals) == model.labels_) >= 0.99
    params = dict(n_clusters=15, alpha=8.0, n_neighbors=5)
    built = LSWMKC.from_result(fit_store(prepare(kernels), FitOptions(**params)), **params)
    with pytest.raises(NotFittedError, match=r"holds no prediction state .*selected_model\(result\)\.fit\(X\)"):
        built.predict(kernels, diagonals)


def test_model_file_without_the_prediction_state_says_so(tmp_path):
    """A model file written without the state (as by a sweep's model) loads, and predict says
    why it cannot; a state member at odds with the fit is refused naming the member."""
    import safetensors.numpy

    from lswmkc_dask.io.model_file import ModelFileError

    views, _ = blobs(40, 5)
    est = LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", **FAST).fit(views)
    path = est.save(tmp_path / "m.safetensors")
    metadata = safetensors.safe_open(str(path), "np").metadata()
    tensors = safetensors.numpy.load_file(path)
    kept = {k: v for k, v in tensors.items() if k not in PREDICT_STATE and not k[-1].isdigit()}
    bare = tmp_path / "bare.safetensors"
    safetensors.numpy.save_file(kept, bare, {k: v for k, v in metadata.items() if k != "n_kernels_in_"})
    with pytest.raises(NotFittedError, match="holds no prediction state"):
        LSWMKC.load(bare).predict(views)
    bad = dict(tensors, kernel_diag_=-tensors["kernel_diag_"])
    safetensors.numpy.save_file(bad, tmp_path / "bad.safetensors", metadata)
    with pytest.raises(ModelFileError, match="member 'kernel_diag_' has .* not above 0"):
        LSWMKC.load(tmp_path / "bad.safetensors")
    short = dict(tensors, feature_scales_1=tensors["feature_scales_1"][:-1])
    safetensors.numpy.save_file(short, tmp_path / "short.safetensors", metadata)
    with pytest.raises(ModelFileError, match="member 'feature_scales_1'"):
        LSWMKC.load(tmp_path / "short.safetensors")


def _rewrite_statistics(path, stack, kernel_index=None, manifest=True):
    """Replace a store's training statistics as a hostile writer would (the manifest's sha256
    made to match unless ``manifest=False``)."""
    import hashlib

    import zarr

    group = zarr.open_group(path, mode="r+")
    attrs = dict(group["statistics"].attrs)
    if kernel_index is not None:
        attrs["kernel_index"] = kernel_index
    arr = group.create_array("statistics", shape=stack.shape, chunks=stack.shape, dtype="<f8", overwrite=True,
                             attributes=attrs, compressors=zarr.codecs.Crc32cCodec())  # prepare's codecs
    arr[...] = stack
    if manifest:
        top = dict(group.attrs)
        top["manifest"] = dict(top["manifest"], statistics_sha256=hashlib.sha256(stack.astype("<f8").tobytes())
                               .hexdigest())
        group.attrs.update(top)


@pytest.mark.parametrize("damage, message", [
    ("nan", r"hold 1 NaN/Inf values \(the first: the column mean of kernel 1 at sample 3\)"),
    ("inf", r"hold 1 NaN/Inf values \(the first: the diagonal of kernel 0 at sample 0\)"),
    ("diagonal", r"have a centred diagonal of -0.5 in kernel 2 at sample 7, not above 0"),
    ("index", r"have kernel_index \[0, 2, 1\], not increasing positions among the 3 input kernels"),
    ("shape", r"have shape \(2, 3, 39\), not \(2, 3, 40\)"),
    ("sha256", r"are not what `lswmkc prepare` wrote \(their sha256 is not the manifest's\)"),
])
def test_damaged_statistics_of_a_store_are_refused(tmp_path, damage, message):
    """The training statistics a store keeps for predict: `lswmkc verify` checks them
    (shape, finite, diagonal > 0, kernel_index, sha256), and a fit refuses them before any work."""
    from _helpers import lswmkc_main

    views, _ = blobs(40, 8)
    _, k_all, _ = raw_kernels(views, views, "rbf")
    path = tmp_path / "k.zarr"
    stack = np.stack([(s := prepare(k_all, path).preprocessing_statistics()).col_means, s.diag])
    assert lswmkc_main("verify", path).returncode == 0
    if damage == "nan":
        stack[0, 1, 3] = np.nan
    elif damage == "inf":
        stack[1, 0, 0] = np.inf
    elif damage == "diagonal":
        stack[1, 2, 7] = -0.5
    elif damage == "shape":
        stack = stack[:, :, :39]
    elif damage == "sha256":
        stack[0, 0, 0] += 1e-9
    _rewrite_statistics(path, stack, [0, 2, 1] if damage == "index" else None, manifest=damage != "sha256")
    proc = lswmkc_main("verify", path)
    assert proc.returncode == 2 and "DAMAGED, 1 problem" in proc.stdout, proc.stdout
    assert re.search("its training statistics \\('statistics'\\) " + message, proc.stdout), proc.stdout
    est = LSWMKC(3, **FAST)
    with pytest.raises(KernelInputError, match=message):
        est.fit(open_store(path))
    assert not hasattr(est, "labels_")


# --- lswmkc predict ------------------------------------------------------------------


def _write_views(directory, views, stem):
    paths = []
    for p, v in enumerate(views):
        paths.append(directory / f"{stem}{p}.csv")
        np.savetxt(paths[-1], v, delimiter=",")
    return paths


def _csv_labels(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "sample,predicted_label"
    return np.asarray([int(line.split(",")[1]) for line in lines[1:]])


def test_cli_predict_features_of_a_cli_fit(tmp_path):
    """`lswmkc fit --features ... --output DIR`, then `lswmkc predict DIR --features ...`:
    the labels LSWMKC.load(DIR).predict gives, written as fit writes labels.csv."""
    from _helpers import lswmkc_main

    views, _ = blobs(75, 3)
    train = _write_views(tmp_path, [v[:60] for v in views], "train")
    new = _write_views(tmp_path, [v[60:] for v in views], "new")
    lswmkc_main("fit", "--features", *train, "--n-clusters", 3, "--max-iter", 6, "--n-init", 5, "--quiet",
                "--output", tmp_path / "fit", check=True)
    proc = lswmkc_main("predict", tmp_path / "fit", "--features", *new, "--output", tmp_path / "new.csv", check=True)
    assert "wrote" in proc.stdout
    expected = LSWMKC.load(tmp_path / "fit").predict([v[60:] for v in views])
    np.testing.assert_array_equal(_csv_labels(tmp_path / "new.csv"), expected)
    from lswmkc_dask.report.record import labels_csv

    assert (tmp_path / "new.csv").read_text() == labels_csv(expected)
    # the training samples come back with labels_
    lswmkc_main("predict", tmp_path / "fit", "--features", *train, "--output", tmp_path / "train.csv", check=True)
    np.testing.assert_array_equal(_csv_labels(tmp_path / "train.csv"), LSWMKC.load(tmp_path / "fit").labels_)


def test_cli_predict_cross_kernels(tmp_path):
    """KERNELS: an .npz of the cross-kernels and diagonals, for a model fitted on kernels."""
    from _helpers import lswmkc_main

    views, _ = blobs(70, 4)
    train, new = [v[:56] for v in views], [v[56:] for v in views]
    cross, k_train, new_diag = raw_kernels(train, new, "rbf")
    model = LSWMKC(3, **FAST).fit(k_train)
    model.save(tmp_path / "model.safetensors")
    np.savez(tmp_path / "new.npz", kernels=cross, diagonals=new_diag)
    lswmkc_main("predict", tmp_path / "model.safetensors", tmp_path / "new.npz", "--output", tmp_path / "new.csv",
                check=True)
    np.testing.assert_array_equal(_csv_labels(tmp_path / "new.csv"), model.predict(cross, new_diag))
    # a kernels file without the cross-kernels, or one of the wrong shape: one line naming it, nothing written
    np.savez(tmp_path / "bad.npz", K=cross)
    proc = lswmkc_main("predict", tmp_path / "model.safetensors", tmp_path / "bad.npz", "--output", tmp_path / "b.csv")
    assert proc.returncode == 2 and "bad.npz has no array 'kernels'" in proc.stderr, proc.stderr
    np.savez(tmp_path / "short.npz", kernels=cross[:, :, :10], diagonals=new_diag)
    proc = lswmkc_main("predict", tmp_path / "model.safetensors", tmp_path / "short.npz", "--output", tmp_path / "b.csv")
    assert proc.returncode == 2 and proc.stderr.startswith("lswmkc: error:") and "56" in proc.stderr, proc.stderr
    assert not (tmp_path / "b.csv").exists()


def test_cli_fit_of_a_prepared_store_predicts(tmp_path):
    """`lswmkc prepare`, `lswmkc fit STORE --output DIR`, `lswmkc predict DIR KERNELS`: the
    labels of a model fitted on the kernels in memory."""
    from _helpers import lswmkc_main

    views, _ = blobs(70, 4)
    train, new = [v[:56] for v in views], [v[56:] for v in views]
    cross, k_train, new_diag = raw_kernels(train, new, "rbf")
    np.savez(tmp_path / "train.npz", kernels=k_train)
    np.savez(tmp_path / "new.npz", kernels=cross, diagonals=new_diag)
    lswmkc_main("prepare", tmp_path / "train.npz", tmp_path / "k.zarr", check=True)
    lswmkc_main("fit", tmp_path / "k.zarr", "--n-clusters", 3, "--max-iter", 6, "--n-init", 5, "--quiet",
                "--output", tmp_path / "fit", check=True)
    lswmkc_main("predict", tmp_path / "fit", tmp_path / "new.npz", "--output", tmp_path / "new.csv", check=True)
    model = LSWMKC(3, **FAST).fit(k_train)
    np.testing.assert_array_equal(_csv_labels(tmp_path / "new.csv"), model.predict(cross, new_diag))


def test_cli_predict_refusals(tmp_path):
    """Features to a model fitted on kernels, an existing --output without --overwrite, a
    missing model, a FIFO as KERNELS: one `lswmkc: error:` line naming it, exit 2."""
    import os

    from _helpers import lswmkc_main

    views, _ = blobs(70, 5)
    train, new = [v[:56] for v in views], [v[56:] for v in views]
    cross, k_train, new_diag = raw_kernels(train, new, "rbf")
    LSWMKC(3, **FAST).fit(k_train).save(tmp_path / "kernels.safetensors")
    paths = _write_views(tmp_path, new, "new")
    out = tmp_path / "labels.csv"

    proc = lswmkc_main("predict", tmp_path / "kernels.safetensors", "--features", *paths, "--output", out)
    assert proc.returncode == 2 and proc.stderr.startswith("lswmkc: error: --features:"), proc.stderr
    assert "precomputed kernels" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not out.exists()

    proc = lswmkc_main("predict", tmp_path / "absent", "--features", *paths, "--output", out)
    assert proc.returncode == 2 and proc.stderr.startswith("lswmkc: error:") and "absent" in proc.stderr, proc.stderr

    out.write_text("sample,predicted_label\n0,1\n")
    np.savez(tmp_path / "new.npz", kernels=cross, diagonals=new_diag)
    proc = lswmkc_main("predict", tmp_path / "kernels.safetensors", tmp_path / "new.npz", "--output", out)
    assert proc.returncode == 2 and "already exists (pass --overwrite" in proc.stderr, proc.stderr
    assert out.read_text() == "sample,predicted_label\n0,1\n"
    lswmkc_main("predict", tmp_path / "kernels.safetensors", tmp_path / "new.npz", "--output", out, "--overwrite",
                check=True)
    assert len(_csv_labels(out)) == 14

    mine = tmp_path / "mine.csv"  # any regular file: replaced with --overwrite (no content recogniser); an input never
    mine.write_text("a,b\n1,2\n")
    proc = lswmkc_main("predict", tmp_path / "kernels.safetensors", tmp_path / "new.npz", "--output", mine,
                       "--overwrite")
    assert proc.returncode == 0 and len(_csv_labels(mine)) == 14, proc.stderr
    proc = lswmkc_main("predict", tmp_path / "kernels.safetensors", tmp_path / "new.npz", "--output",
                       tmp_path / "new.npz", "--overwrite")
    assert proc.returncode == 2 and "it is the input" in proc.stderr, proc.stderr
    assert np.load(tmp_path / "new.npz")["kernels"].shape == cross.shape

    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.npz")
        proc = lswmkc_main("predict", tmp_path / "kernels.safetensors", tmp_path / "fifo.npz", "--output",
                           tmp_path / "f.csv")
        assert proc.returncode == 2 and "FIFO" in proc.stderr and not (tmp_path / "f.csv").exists(), proc.stderr


def test_cli_predict_on_an_existing_scheduler(tmp_path, client, monkeypatch):
    """`lswmkc predict ... --scheduler ADDRESS` sends the blocks of new samples to that
    cluster's workers and writes the labels the model gives in this process; TLS files
    without a scheduler are refused as for fit."""
    from distributed import get_task_stream

    from _helpers import lswmkc_main

    views, _ = blobs(60, 1)
    model = LSWMKC(3, alpha=4, n_neighbors=4, kernel="rbf", **FAST).fit([v[:45] for v in views])
    model.save(tmp_path / "model.safetensors")
    new = _write_views(tmp_path, [v[45:] for v in views], "new")
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 4 * 45 * 10 * 8)  # blocks of 4 samples: 4 blocks
    with get_task_stream(client) as stream:
        lswmkc_main("predict", tmp_path / "model.safetensors", "--features", *new, "--scheduler",
                    client.scheduler.address, "--output", tmp_path / "new.csv", check=True)
    np.testing.assert_array_equal(_csv_labels(tmp_path / "new.csv"), model.predict([v[45:] for v in views]))
    tasks = [t for t in stream.data if str(t["key"]).startswith(("predict_block", "('predict_block"))]
    assert len(tasks) == 4 and {t["worker"] for t in tasks} <= set(client.scheduler_info()["workers"])
    proc = lswmkc_main("predict", tmp_path / "model.safetensors", "--features", *new, "--tls-cert", tmp_path / "c.pem",
                       "--output", tmp_path / "tls.csv")
    assert proc.returncode == 2 and "need --scheduler or --scheduler-file" in proc.stderr
    assert not (tmp_path / "tls.csv").exists()

"""A float32 kernel store: half the bytes, float64 accumulation, the reference's
iterations on YALE and weights within the documented bound
(docs/performance.md#a-float32-kernel-store-bench_float32py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, open_store, prepare

from _helpers import lswmkc_main

pytestmark = pytest.mark.timeout(600)


def test_float32_store_matches_reference_iterations(yale, reference, tmp_path):
    kernels, labels = yale
    s64 = prepare(kernels, tmp_path / "k64.zarr", labels=labels)
    s32 = prepare(kernels, tmp_path / "k32.zarr", labels=labels, dtype="float32")
    assert s32.read_rows(0, 3).dtype == np.float32
    assert s32.itemsize == 4 and s64.itemsize == 8
    size = {p: sum(f.stat().st_size for f in (tmp_path / p).rglob("*") if f.is_file()) for p in ("k64.zarr", "k32.zarr")}
    assert size["k32.zarr"] < 0.55 * size["k64.zarr"]
    for i, a in enumerate(reference["alphas"]):
        model = LSWMKC(n_clusters=15, alpha=a).fit(s32)
        assert model.n_iter_ == reference["iterations"][i], a
        # documented bound: 8.9e-10 measured between float32 and float64 stores
        np.testing.assert_allclose(model.kernel_weights_, reference["omega"][i], atol=1e-6 + 1e-8)


def test_cli_prepare_dtype(tmp_path):
    out = tmp_path / "y32.zarr"
    assert lswmkc_main("prepare", "--dataset", "yale", "--dtype", "float32", out).returncode == 0
    store = open_store(out)
    assert store.attrs["dtype"] == "float32" and store.read_rows(0, 2).dtype == np.float32
    proc = lswmkc_main("prepare", "--dataset", "yale", "--dtype", "float16", tmp_path / "x.zarr")
    assert proc.returncode == 2 and "float32" in proc.stderr


# ------------------------------------------------------------------ a float32 stack on the device
NAMESPACES = ["numpy", "array-api-strict"]


def _handwritten_views(step=5):
    """Handwritten's six views (real features), every ``step``-th sample: n = 400."""
    from lswmkc_dask.datasets import load_handwritten

    views, labels = load_handwritten()
    return [v[::step] for v in views], labels[::step]


@pytest.mark.parametrize("name", NAMESPACES)
def test_float32_stack_built_from_features_is_the_float64_one_rounded(name):
    """feature_kernels_on(dtype="float32"): each entry computed in float64 and rounded once
    (as prepare(dtype="float32") writes its chunks); the training statistics in float64;
    only the views and the statistics cross."""
    from lswmkc_dask.engine import device_fit as df
    from lswmkc_dask.kernels.features import FeatureKernels, feature_kernels_on

    if name == "array-api-strict":
        pytest.importorskip("array_api_strict")
    views, _ = _handwritten_views(10)
    fk = FeatureKernels(views, "rbf")
    xp, device = df.resident_namespace(name)
    link = df.Link(xp, device)
    got, col_means, diag = feature_kernels_on(fk, link, block_rows=64, dtype="float32")
    assert got.dtype == xp.float32 and {what for _, _, what, _ in link.transfers.log} == {"features", "statistics"}
    host = prepare(fk, None, dtype="float32")
    want = host.read_rows(0, host.n_samples)
    got = link.to_host(got, "kernels")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1.2e-7)  # one float32 rounding of equal float64 values
    assert np.mean(got == want) > 0.999
    stats = host.preprocessing_statistics()
    np.testing.assert_allclose(col_means, stats.col_means, rtol=0, atol=1e-14)
    np.testing.assert_allclose(diag, stats.diag, rtol=0, atol=1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stack_built_from_features_holds_one_row_block_beside_the_stack(dtype):
    """Building the stack keeps one row block of raw kernels alive at a time beside it: the
    peak of the arrays NumPy allocates (tracemalloc) stays under the stack plus six row
    blocks of float64 (a diagonal kept as a view of its block would hold every block: at
    n = 50,000 on a GPU, 120 GB beside a 60 GB float32 stack)."""
    import tracemalloc

    from lswmkc_dask.engine import device_fit as df
    from lswmkc_dask.kernels.features import FeatureKernels, feature_kernels_on

    views, _ = _handwritten_views(4)
    fk = FeatureKernels(views, "rbf")
    m, n, b = len(views), len(views[0]), 25
    xp, device = df.resident_namespace("numpy")
    feature_kernels_on(FeatureKernels([v[:50] for v in views], "rbf"), df.Link(xp, device), block_rows=b, dtype=dtype)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        got = feature_kernels_on(fk, df.Link(xp, device), block_rows=b, dtype=dtype)[0]
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    block = 8 * m * b * n
    assert n // b >= 16 and peak <= got.nbytes + 6 * block, (peak - got.nbytes) / block


@pytest.mark.parametrize("name", NAMESPACES)
def test_float32_stack_fit_agrees_with_float64(name):
    """A resident fit from Handwritten's features with the stack in float32 (stack_dtype):
    labels as float64's (ARI >= 0.99), kernel weights within 1e-5; and the products are
    accumulated in float64: the same float32 stack widened to float64 gives the same fit to
    1e-12 (a float32 accumulation would differ by about 1e-6)."""
    from sklearn.metrics import adjusted_rand_score

    from lswmkc_dask.engine import device_fit as df
    from lswmkc_dask.engine.device_route import features_stack, fit_on_device
    from lswmkc_dask.kernels.features import FeatureKernels
    from lswmkc_dask.records import FitOptions

    if name == "array-api-strict":
        pytest.importorskip("array_api_strict")
    views, _ = _handwritten_views()
    fk = FeatureKernels(views, "rbf")
    options = FitOptions(10, alpha=8.0, n_init=10, resident=name)
    s64, s32 = features_stack(fk, name).statistics, features_stack(fk, name, "float32")
    r64 = fit_on_device(fk, options)  # the views in: their kernels built on the device
    r32, s32 = fit_on_device(s32, options), s32.statistics
    assert adjusted_rand_score(r64.labels, r32.labels) >= 0.99
    np.testing.assert_allclose(r32.kernel_weights, r64.kernel_weights, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(s32.col_means, s64.col_means)
    assert r32.device_transfers["largest_per_iteration"] < 8 * 400
    stack = features_stack(fk, name, "float32")
    xp = stack.link.xp
    wide = xp.astype(stack.kernels, xp.float64)
    a, _, _ = df.fit_resident(stack.kernels, 8.0, max_iter=25)
    b, _, _ = df.fit_resident(wide, 8.0, max_iter=25)
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(a.weights, b.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.factor @ a.factor.T, b.factor @ b.factor.T, rtol=0, atol=1e-10)


def test_estimator_and_sweep_take_stack_dtype(tmp_path, monkeypatch):
    """stack_dtype reaches a fit and a sweep from feature views on the GPU (NumPy standing
    in for CuPy); a bad value is refused before any work; the CPU route does not use it."""
    from lswmkc_dask import sweep
    from lswmkc_dask.engine import gpu

    views, _ = _handwritten_views(10)
    with pytest.raises(ValueError, match="stack_dtype"):
        LSWMKC(10, kernel="rbf", stack_dtype="float16").fit(views)
    cpu = LSWMKC(10, alpha=8.0, kernel="rbf", n_init=5, stack_dtype="float32").fit(views)
    ref = LSWMKC(10, alpha=8.0, kernel="rbf", n_init=5).fit(views)
    np.testing.assert_array_equal(cpu.kernel_weights_, ref.kernel_weights_)
    monkeypatch.setattr(gpu, "_TEST_NAMESPACE", "numpy")
    dev = LSWMKC(10, alpha=8.0, kernel="rbf", n_init=5, eig_device="cuda", stack_dtype="float32").fit(views)
    assert dev.get_params()["stack_dtype"] == "float32" and "kernels" in dev.stage_seconds_
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-5)
    sweep(views, tmp_path / "s", kernel="rbf", alphas=[8.0], n_clusters=10, n_init=5, progress=False,
          eig_device="cuda", stack_dtype="float32")
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["input"]["dtype"] == "float32"

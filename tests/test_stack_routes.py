"""The kernel stack of a resident fit off the device (issue 51): ``stack="host"`` (precomputed
kernels in host memory, a row block copied to the device per block each pass) and
``stack="features"`` (the row blocks rebuilt from the feature views on the device each
pass). The same numbers as the resident stack to 1e-12 in float64, on NumPy and on
array-api-strict's ``Device("device1")`` (which refuses host round trips), the copies
counted per iteration; the plan chosen by the memory count, refused before any work."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from lswmkc_dask._threads import limit_blas
from lswmkc_dask.engine import device_fit as df
from lswmkc_dask.engine import device_route as dr
from lswmkc_dask.engine import gpu
from lswmkc_dask.engine._memory import device_plans, stack_bytes
from lswmkc_dask.kernels.features import FeatureKernels, feature_kernels_on
from lswmkc_dask.records import FitOptions

pytestmark = pytest.mark.timeout(600)
NAMESPACES = ["numpy", "array-api-strict"]


def _link(name, transfers=None):
    xp, device = df.resident_namespace(name)
    return df.Link(xp, device, transfers)


@pytest.fixture(scope="module")
def views():
    x, y = make_blobs(n_samples=150, centers=4, n_features=6, cluster_std=2.0, random_state=5)
    return FeatureKernels([x[:, :3], x[:, 3:], x]), y


def _fit(kernels, link, **kw):
    with limit_blas(1):
        record = {}
        res, _, z = df.fit_resident(kernels, 8.0, block_rows=40, transfers=link.transfers, record=record, **kw)
    return res, z, record


def _same(a, b):
    assert a.n_iter == b.n_iter and a.converged == b.converged
    np.testing.assert_allclose(a.weights, b.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
    np.testing.assert_allclose(a.factor @ a.factor.T, b.factor @ b.factor.T, rtol=0, atol=1e-12)
    assert a.rank == b.rank


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("precision", ["float64", "mixed"])
def test_host_stack_equals_resident_stack(name, precision, yale_store):
    """Streamed from host memory: the resident stack's numbers; per iteration the m n^2 entries of
    the kernel rows go to the device (block by block) and, beside them, only what the resident
    route copies (m weights there, m + 5 numbers back)."""
    n, m = yale_store.n_samples, yale_store.n_kernels
    host = yale_store.read_rows(0, n)
    ref_link = _link(name, df.Transfers())
    ref, ref_z, _ = _fit(ref_link.to_device(host, "kernels"), ref_link, precision=precision)
    link = _link(name, df.Transfers())
    got, z, record = _fit(dr.HostRows.of(host, link), link, precision=precision)
    _same(got, ref)
    assert abs(z - ref_z).max() < 1e-12
    assert record["stack"] == "host" and record["stack_bytes_per_pass"] == 8 * m * n * n
    for it in range(1, got.n_iter + 1):
        moved = [(d, w, b) for t, d, w, b in link.transfers.log if t == it]
        rows = [b for d, w, b in moved if w == "kernel rows"]
        assert all(d == "to_device" for d, w, _ in moved if w == "kernel rows")
        assert len(rows) == -(-n // 40) and max(rows) == 8 * m * 40 * n
        if precision == "float64":
            assert sum(b for _, w, b in moved if w != "kernel rows") == 8 * (m + (m + 4) + 1), moved


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("stack_dtype", ["float64", "float32"])
def test_feature_stack_equals_resident_stack(name, stack_dtype, views):
    """Rebuilt from the views each pass: the resident stack's fit (kernels and statistics to
    rounding, the fit to 1e-12); nothing of size n x n crosses, not even once."""
    fk, _ = views
    n = fk.shape[1]
    ref_link = _link(name, df.Transfers())
    kernels, col_means, diag = feature_kernels_on(fk, ref_link, dtype=stack_dtype)
    ref, ref_z, _ = _fit(kernels, ref_link)
    link = _link(name, df.Transfers())
    rows = dr.FeatureRows(fk, link, stack_dtype)
    np.testing.assert_allclose(rows.statistics[0], col_means, rtol=0, atol=1e-14)
    np.testing.assert_allclose(rows.statistics[1], diag, rtol=0, atol=1e-14)
    for start, stop in [(0, 40), (40, n)]:
        np.testing.assert_allclose(link.to_host(rows.rows(start, stop), "test"),
                                   ref_link.to_host(kernels[:, start:stop, :], "test"), rtol=0,
                                   atol=1e-14 if stack_dtype == "float64" else 2**-24)
    link.transfers.log.clear()
    got, z, record = _fit(rows, link)
    if stack_dtype == "float64":
        _same(got, ref)
        assert abs(z - ref_z).max() < 1e-12
    else:  # a float32 entry may round the other way: the fit within float32's rounding
        assert got.n_iter == ref.n_iter
        np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=1e-6)
    assert record["stack"] == "features" and record["stack_bytes_per_pass"] == 0
    assert link.transfers.largest() < 8 * n * n // 4
    assert link.transfers.largest(range(1, got.n_iter + 1)) < 8 * n


@pytest.mark.parametrize("name", NAMESPACES)
def test_fits_through_the_entry_points_record_the_plan(name, yale_store, views):
    """fit_on_device of a store, of a host array and of features_stack with a stack asked for: the
    labels of the resident stack, and the record says which stack and eigen route ran and
    how many bytes of kernel rows one pass moved."""
    options = FitOptions(n_clusters=15, alpha=8.0, n_init=10, resident=name)
    ref = dr.fit_on_device(yale_store, options)
    n, m = yale_store.n_samples, yale_store.n_kernels
    assert ref.device_transfers["stack"] == "device" and ref.device_transfers["eigen"] == "syevd"
    assert ref.execution == f"resident on {name} ({df.resident_namespace(name)[1]})"
    for got in (dr.fit_on_device(yale_store, options, stack="host"),
                dr.fit_on_device(yale_store.read_rows(0, n), options, stack="host")):
        np.testing.assert_array_equal(got.labels, ref.labels)
        np.testing.assert_allclose(got.kernel_weights, ref.kernel_weights, rtol=0, atol=1e-12)
        moved = got.device_transfers
        assert moved["stack"] == "host" and moved["stack_bytes_per_pass"] == 8 * m * n * n
        assert moved["stop_rule"]["n_iter"] == got.n_iter and got.execution.endswith(", stack host, eigen syevd")
    fk, y = views
    fit = {}
    for stack in ("device", "features"):
        store = dr.features_stack(fk, name, stack=stack)
        fit[stack] = dr.fit_on_device(store, dataclasses.replace(options, n_clusters=4))
        assert fit[stack].device_transfers["stack"] == stack
    np.testing.assert_array_equal(fit["features"].labels, fit["device"].labels)
    np.testing.assert_allclose(fit["features"].kernel_weights, fit["device"].kernel_weights, rtol=0, atol=1e-12)


def test_plan_by_the_memory_count_and_refusal_before_any_work(monkeypatch, views):
    """The first plan that fits: the stack on the device, else off it, with syevd, then the
    split route; nothing fits: ResidentRefusal with every plan's figures, before anything is
    copied or built."""
    fk, _ = views
    m, n = fk.shape[0], fk.shape[1]
    plans = device_plans(m, 10_000, 500, 8, off_device="features", feature_columns=12)
    assert [(p.stack, p.eigen) for p in plans] == [("device", "syevd"), ("features", "syevd"),
                                                  ("device", "split"), ("features", "split")]
    assert plans[1].need < plans[0].need and plans[3].need < plans[1].need
    assert stack_bytes(m, n, 10, 8, "host") == 2 * 8 * m * 10 * n
    assert stack_bytes(m, n, 10, 8, "features", 12) == 8 * n * 12 + 8 * (m + 2) * 10 * n
    with pytest.raises(ValueError, match="stack must be one of"):
        stack_bytes(m, n, 10, 8, "disk")
    free = 1000
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
    transfers = df.Transfers()
    with pytest.raises(dr.ResidentRefusal, match=r"needs .* of GPU memory, 0.98 kiB of 0.98 kiB are free \(the stack on "
                                                  r"the device with syevd: .*; the stack rebuilt from the features"):
        dr.features_stack(fk, "numpy", transfers=transfers)
    assert transfers.log == []

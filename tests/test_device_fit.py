"""The resident fit (lswmkc_dask.engine.device_fit): the whole iteration on one array-API device.

Checked against the CPU route (the in-process fit: LAPACK, scipy.sparse) on NumPy and on
array-api-strict's non-default ``Device("device1")``, which refuses ``np.asarray`` and
any mixing with host arrays: a host round trip left in the device code fails here. The
copies between host and device are counted per iteration.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import polynomial_kernel, rbf_kernel

from lswmkc_dask.engine import device_fit as df
from lswmkc_dask.core import equations as core
from lswmkc_dask.kernels.features import preprocess_kernels as core_preprocess
from lswmkc_dask import prepare
from lswmkc_dask._threads import limit_blas
from lswmkc_dask.engine.fit import fit_store
from lswmkc_dask.records import FitOptions

NAMESPACES = ["numpy", "array-api-strict"]


def _on_device(name, a):
    xp, device = df.resident_namespace(name)
    return xp, df.Link(xp, device).to_device(a, "test")


def _rows_with_ties(rng):
    """Random rows, rows of few distinct values (ties at and around theta), and rows
    whose support is larger than the CPU route's first partial sort (128 entries)."""
    rows = [rng.normal(size=(6, 40)), rng.integers(0, 3, size=(6, 40)).astype(float),
            np.round(rng.normal(size=(4, 40)), 1), np.full((2, 40), 0.25)]
    wide = 1.0 + 1e-4 * rng.normal(size=(3, 300))  # support about 300 entries
    return [np.vstack(rows), wide]


@pytest.mark.parametrize("name", NAMESPACES)
def test_vectorised_projection_equals_row_wise(name, rng):
    """The vectorised projection gives the CPU route's rows exactly, ties included."""
    for v in _rows_with_ties(rng):
        exclude = rng.integers(0, v.shape[1], size=v.shape[0])
        xp, dv = _on_device(name, v)
        link = df.Link(xp, dv.device)
        got = link.to_host(core.project_rows_simplex(dv, link.to_device(exclude, "exclude"), xp=xp, full_sort=True), "z")
        want = core.project_rows_simplex(v, exclude=exclude)
        np.testing.assert_array_equal(got, want)
        assert np.all(got[np.arange(v.shape[0]), exclude] == 0)


def test_vectorised_projection_solves_the_qp(rng):
    """Brute force: scipy's SLSQP on min 1/2 ||z - v||^2, z >= 0, sum z = 1, z_i = 0."""
    v = np.vstack(_rows_with_ties(rng)[0][:, :12])
    exclude = rng.integers(0, 12, size=v.shape[0])
    xp, dv = _on_device("numpy", v)
    got = np.asarray(core.project_rows_simplex(dv, xp.asarray(exclude), xp=xp, full_sort=True))
    for i, row in enumerate(v):
        keep = np.arange(12) != exclude[i]
        res = minimize(lambda z, r=row[keep]: 0.5 * np.sum((z - r) ** 2), np.full(11, 1 / 11),
                       jac=lambda z, r=row[keep]: z - r, bounds=[(0, None)] * 11,
                       constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1, "jac": lambda z: np.ones(11)}],
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert res.success
        np.testing.assert_allclose(got[i, keep], res.x, atol=1e-6)
        assert got[i, exclude[i]] == 0 and abs(got[i].sum() - 1) < 1e-12


@pytest.fixture(scope="module")
def synthetic_store():
    """200 samples in 4 blobs, three kernels (two RBF widths, one polynomial)."""
    x, y = make_blobs(n_samples=200, centers=4, n_features=5, cluster_std=2.5, random_state=3)
    kernels = np.stack([rbf_kernel(x, gamma=0.05), rbf_kernel(x, gamma=0.5), polynomial_kernel(x, degree=2)])
    return prepare(kernels, None, labels=y)


def _compare(store, alpha, name, n_clusters, **extra):
    cpu = fit_store(store, FitOptions(n_clusters=n_clusters, alpha=alpha, n_init=10, **extra))
    dev = fit_store(store, FitOptions(n_clusters=n_clusters, alpha=alpha, n_init=10, resident=name, **extra))
    assert dev.n_iter == cpu.n_iter
    assert dev.converged == cpu.converged
    np.testing.assert_allclose(dev.kernel_weights, cpu.kernel_weights, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(dev.labels, cpu.labels)
    # the same numbers on the host's BLAS; cuBLAS sums in another order (3e-15 apart on an H200)
    np.testing.assert_allclose(dev.gamma, cpu.gamma, rtol=1e-13 if name == "cuda" else 0, atol=0)
    np.testing.assert_allclose(dev.objective, cpu.objective, rtol=1e-9)
    np.testing.assert_array_equal(dev.kstar_rank, cpu.kstar_rank)
    assert abs(dev.affinity - cpu.affinity).max() < 1e-10
    kd, kc = dev.kstar_factor, cpu.kstar_factor
    np.testing.assert_allclose(kd @ kd.T, kc @ kc.T, atol=1e-9)
    # (vars(): the attribute's name would mark the test as one that starts a cluster, tests/conftest.py)
    assert set(dev.eig_drivers) == {"resident"} and vars(dev)["execution"].startswith(f"resident on {name}")


@pytest.mark.parametrize("name", NAMESPACES)
@pytest.mark.parametrize("alpha", [1.0, 64.0])
def test_resident_fit_equals_cpu_route_on_yale(yale_store, alpha, name):
    _compare(yale_store, alpha, name, 15)


@pytest.mark.parametrize("name", NAMESPACES)
def test_resident_fit_equals_cpu_route_on_synthetic(synthetic_store, name):
    _compare(synthetic_store, 8.0, name, 4)


def test_resident_fit_scalar_gamma_equals_cpu_route(yale_store):
    _compare(yale_store, 8.0, "array-api-strict", 15, gamma=0.5)


def test_nothing_n_by_n_crosses_per_iteration(synthetic_store):
    """Per iteration only m weights go and m + 5 numbers come back; at the end W and Z's non-zeros."""
    n, m = synthetic_store.n_samples, synthetic_store.n_kernels
    transfers = df.Transfers()
    xp, device = df.resident_namespace("array-api-strict")
    kernels = df.Link(xp, device, transfers).to_device(synthetic_store.read_rows(0, n), "kernels")
    with limit_blas(1):  # (as fit_store does: no oversubscribed BLAS threads)
        result, _, z = df.fit_resident(kernels, 8.0, block_rows=64, transfers=transfers)
    t = result.n_iter
    per = transfers.per_iteration()
    assert set(per) == set(range(t + 2))
    for it in range(1, t + 1):
        assert per[it] == 8 * (m + (m + 4) + 1), (it, [e for e in transfers.log if e[0] == it])
    assert transfers.largest(range(1, t + 1)) < 8 * n
    # Set-up: the stack once (m n^2), omega0, delta0, gamma (n).
    assert per[0] == 8 * (m * n * n + m + m + n)
    # Results: W (n x r) and Z's non-zeros (flat index and value), not n x n.
    r = result.rank[-1]
    assert per[t + 1] == 8 * n * r + 16 * z.nnz
    assert z.nnz < n * n / 4


def _blobs_stack(n, itemsize):
    x, _ = make_blobs(n_samples=n, centers=5, n_features=6, cluster_std=2.0, random_state=0)
    kernels = core_preprocess(np.stack([rbf_kernel(x, gamma=g) for g in (0.01, 0.05, 0.2, 1.0)]))
    return np.ascontiguousarray(kernels.astype(np.float32 if itemsize == 4 else np.float64))


@pytest.mark.parametrize("itemsize", [8, 4])
@pytest.mark.parametrize("precision", ["float64", "mixed"])
def test_resident_fit_peak_memory_within_its_count(precision, itemsize):
    """The largest bytes of arrays alive at once during a resident fit on NumPy (every
    array NumPy allocates is traced by tracemalloc; LAPACK's own copy and workspace
    inside eigh are not: workspace=0) stay within device_route.resident_bytes' count
    beside the stack: float64, W_{t-1} (n x r), S in Z's buffer and eigh's eigenvectors;
    mixed, K*_{t-1}, S and three float32 n x n of the polynomial; a row block's
    temporaries. Z is not kept beside S, nor a second copy of S."""
    import tracemalloc

    from lswmkc_dask.engine.device_route import resident_bytes

    n, b = 400, 20
    kernels = _blobs_stack(n, itemsize)
    m = kernels.shape[0]
    with limit_blas(1):  # first uses (imports, caches) outside the measure
        df.fit_resident(_blobs_stack(40, itemsize), 8.0, precision=precision, max_iter=3)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with limit_blas(1):
            result, _, _ = df.fit_resident(kernels, 8.0, precision=precision, block_rows=b, max_iter=22)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    count = resident_bytes(m, n, b, itemsize, workspace=0, low_itemsize=4, s_copies=1) - itemsize * m * n * n
    assert peak <= count, (peak / (8 * n * n), count / (8 * n * n))
    r, block = max(result.rank), 8 * (m + 6) * b * n
    if precision == "float64":  # W_{t-1} (n x r), S and the eigenvectors: the count less n x (n - r)
        assert 8 * 2 * n * n < peak <= 8 * (2 * n * n + n * r) + block
    else:  # K*_{t-1}, S and three float32 n x n
        assert 8 * 3 * n * n < peak <= 8 * 2 * n * n + 3 * 4 * n * n + block


def test_resident_refuses_snapshots_and_unknown_namespace(yale_store):
    with pytest.raises(ValueError, match="snapshot_iterations"):
        fit_store(yale_store, FitOptions(n_clusters=15, alpha=1.0, resident="numpy", snapshot_iterations=(1,)))
    with pytest.raises(ValueError, match="resident"):
        fit_store(yale_store, FitOptions(n_clusters=15, alpha=1.0, resident="tpu"))


@pytest.mark.parametrize("name", NAMESPACES)
def test_initial_graph_ties_as_cpu_route(name, rng):
    """Eqs. (25)-(28) on the device: gamma and delta(Z0) as core.init_graph_rows, ties broken by column."""
    n, c = 30, 4
    k = rng.integers(0, 4, size=(2, n, n)).astype(float)  # many ties among the c + 2 nearest
    k = k + np.transpose(k, (0, 2, 1))
    w0 = np.full(2, np.sqrt(0.5))
    xp, kd = _on_device(name, k)
    link = df.Link(xp, kd.device)
    for start, stop in [(0, 13), (13, n)]:
        gamma, delta = df._init_block(kd[:, start:stop, :], link.to_device(w0, "w0"), start, c, xp)
        z, want_gamma = core.init_graph_rows(core.combine_kernels(k[:, start:stop], w0), start, c)
        np.testing.assert_array_equal(link.to_host(gamma, "gamma"), want_gamma)
        np.testing.assert_allclose(link.to_host(delta, "delta"), core.kernel_alignment(k[:, start:stop], z),
                                   rtol=1e-14)


@pytest.mark.slow
@pytest.mark.integration
def test_resident_fit_equals_cpu_route_at_gpu_min_n():
    """At n = GPU_MIN_N (1000), the smallest n at which ``eig_device="auto"`` takes the GPU
    and so the resident route, over 4 iterations: one row block on the device, the CPU
    route's "mrrr" eigh of the dense S and NumPy's full eigh (n^3: n = 3000 cost 27 times
    as much and took the same routes)."""
    from lswmkc_dask.engine.gpu import GPU_MIN_N

    x, y = make_blobs(n_samples=GPU_MIN_N, centers=6, n_features=8, cluster_std=3.0, random_state=7)
    kernels = np.stack([rbf_kernel(x, gamma=0.02), rbf_kernel(x, gamma=0.2), polynomial_kernel(x, degree=2)])
    _compare(prepare(kernels, None, labels=y), 8.0, "numpy", 6, min_iter=3, max_iter=4)


@pytest.mark.gpu
@pytest.mark.parametrize("alpha", [1.0, 256.0])
def test_resident_fit_on_the_gpu_equals_cpu_route(yale_store, synthetic_store, alpha):
    from lswmkc_dask.engine import gpu

    if not gpu.cuda_device()[0]:
        pytest.skip("no CUDA device (or CuPy) here")
    _compare(yale_store, alpha, "cuda", 15)
    _compare(synthetic_store, alpha, "cuda", 4)


@pytest.mark.parametrize("name", NAMESPACES)
def test_preprocessing_same_on_every_namespace(name, rng):
    """Section 0 (core.centre_normalise_rows) on the device gives the host's row blocks bit for bit."""
    from lswmkc_dask.kernels.features import ArrayKernelSource, scan_kernels

    n = 30
    x = rng.normal(size=(n, 4))
    raw = np.stack([rbf_kernel(x, gamma=0.3), polynomial_kernel(x, degree=2)])
    raw = raw + 1e-9 * rng.normal(size=raw.shape)  # slightly asymmetric: transposed rows differ
    stats = scan_kernels(ArrayKernelSource(raw))
    xp, kd = _on_device(name, raw)
    link = df.Link(xp, kd.device)
    col_means, diag = link.to_device(stats.col_means, "d"), link.to_device(stats.diag, "diag")
    for start, stop in [(0, 13), (13, n)]:
        trows = np.ascontiguousarray(np.transpose(raw[:, :, start:stop], (0, 2, 1)))
        want = core.centre_normalise_rows(raw[:, start:stop], start, stats.col_means, stats.diag, trows)
        got = core.centre_normalise_rows(kd[:, start:stop, :], start, col_means, diag, link.to_device(trows, "t"))
        np.testing.assert_array_equal(link.to_host(got, "rows"), want)
        np.testing.assert_array_equal(want[:, np.arange(stop - start), start + np.arange(stop - start)], 1.0)


@pytest.mark.parametrize("name", NAMESPACES)
def test_graph_block_same_on_every_namespace(name, yale_store):
    """Eqs. (13)-(16) on a row block (core.graph_block): the device's dense rows are the
    host's sparse rows exactly; delta and the norms agree to rounding (other sums)."""
    n, m = yale_store.n_samples, yale_store.n_kernels
    k = yale_store.read_rows(0, n)
    w, w0 = np.linspace(0.2, 0.6, m), np.full(m, np.sqrt(1 / m))
    w /= np.linalg.norm(w)
    factor = np.linalg.qr(np.random.default_rng(0).normal(size=(n, 7)))[0] * 0.5
    gamma = np.linspace(0.1, 0.3, n)
    xp, kd = _on_device(name, k)
    link = df.Link(xp, kd.device)
    for fac in (None, factor):
        fd = None if fac is None else link.to_device(fac, "W")
        for start, stop in [(0, 50), (50, n)]:
            rows = k[:, start:stop]
            want = core.graph_block(rows, start, gamma[start:stop], w, core.kstar_rows(rows, start, fac, w0), 8.0,
                                    sparse=True)
            rd = kd[:, start:stop, :]
            kstar = core.kstar_rows(rd, start, fd, link.to_device(w0, "w0"), xp=xp)
            got = core.graph_block(rd, start, link.to_device(gamma[start:stop], "g"), link.to_device(w, "w"), kstar,
                                   8.0, xp=xp, full_sort=True)
            np.testing.assert_array_equal(link.to_host(got[0], "z"), want[0].toarray())
            np.testing.assert_allclose(link.to_host(got[1], "delta"), want[1], rtol=1e-13)
            np.testing.assert_allclose([float(link.to_host(v, "s")) for v in got[2:]], want[2:], rtol=1e-13)


def test_mixed_precision_resident_fit_through_run_fit(yale_store):
    """eig_precision="mixed" on the resident route a user takes with FitOptions.resident
    (run_fit, so choose_route): float32 iterations first, labels as float64's."""
    from sklearn.metrics import adjusted_rand_score

    from lswmkc_dask.engine.route import run_fit

    fits = {p: run_fit(yale_store, FitOptions(n_clusters=15, alpha=1.0, n_init=10, resident="numpy", eig_precision=p))
            for p in ("float64", "mixed")}
    drivers = list(fits["mixed"].eig_drivers)
    assert drivers[0] == "resident float32 polynomial" and drivers[-1] == "resident"
    assert set(fits["float64"].eig_drivers) == {"resident"}
    assert adjusted_rand_score(fits["float64"].labels, fits["mixed"].labels) >= 0.99

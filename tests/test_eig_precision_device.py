"""eig_precision="float32" (float32 eigendecomposition + float64 Rayleigh-Ritz) and
eig_device (the array-API gathered step, GPU resources on a Dask cluster)."""

from __future__ import annotations

from lswmkc_dask.errors import DeviceFallbackWarning
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score

from lswmkc_dask import LSWMKC
from lswmkc_dask.engine import gpu
from lswmkc_dask.core import eigen as _eigen
from lswmkc_dask.engine._gathered import FLOAT32_MAX_FRACTION

pytestmark = pytest.mark.timeout(600)


def _random_z(n, seed, density=0.05):
    rng = np.random.default_rng(seed)
    z = sp.random(n, n, density=density, random_state=rng, format="csr")
    return [z[:n // 2], z[n // 2:]]


def _kstar(w):
    return w @ w.T


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_rayleigh_ritz_matches_float64(seed):
    z = _random_z(300, seed)
    w64, lam64 = _eigen.psd_factor(z, driver="evd")
    used = {}
    w32, lam32 = _eigen.psd_factor(z, driver="mrrr", precision="float32", used=used)
    assert used["driver"] == "float32-rr"
    assert lam32.size == lam64.size and np.all(np.diff(lam32) >= 0)
    # Ritz values are accurate to the square of the subspace's float32 error
    np.testing.assert_allclose(lam32, lam64, rtol=0, atol=1e-10 * lam64.max())
    k64 = _kstar(w64)
    assert np.abs(_kstar(w32) - k64).max() <= 1e-5 * np.abs(k64).max()
    w_dense, lam_dense = _eigen.psd_factor(sp.vstack(z).toarray(), driver="mrrr", precision="float32")
    np.testing.assert_allclose(lam_dense, lam32, rtol=0, atol=1e-10 * lam64.max())


def test_float32_s_is_the_float64_s_rounded():
    z = _random_z(200, 5)
    s64 = _eigen.dense_lower_s(z)
    s32 = _eigen.dense_lower_s(z, dtype=np.float32)
    assert s32.dtype == np.float32 and s32.flags.f_contiguous
    assert np.all(np.triu(s32, 1) == 0) and np.all(np.tril(s64) == s64)
    np.testing.assert_allclose(s32, s64, rtol=2 * np.finfo(np.float32).eps, atol=0)  # one unit in the last place


def test_float32_route_checks_memory_and_small_cases():
    z = _random_z(200, 4)
    with pytest.raises(_eigen.EigenvectorMemoryError, match="float32 reflectors of S"):
        _eigen.psd_factor(z, driver="mrrr", precision="float32", memory_left=100_000)
    w, lam = _eigen.psd_factor(sp.csr_matrix([[2.0]]), driver="mrrr", precision="float32")
    assert lam.tolist() == [2.0] and w.tolist() == [[np.sqrt(2.0)]]
    w, lam = _eigen.psd_factor(sp.csr_matrix([[-2.0]]), driver="mrrr", precision="float32")
    assert lam.size == 0 and w.shape == (1, 0)
    w, lam = _eigen.psd_factor(-sp.identity(30, format="csr"), driver="mrrr", precision="float32")
    assert lam.size == 0 and w.shape == (30, 0)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="precision must be one of"):
        _eigen.psd_factor(_random_z(20, 0), precision="float16")


def test_float32_yale_weights_iterations_labels(yale_store):
    """Documented bound (docs/performance.md#float32-eigendecomposition-weights-iterations-labels-bench_eig_precisionpy):
    |omega32 - omega64| <= 8.4e-9 over the 11 alphas on YALE, same iterations, labels
    ARI 1; checked here at 1e-7."""
    for alpha in (1.0, 128.0, 1024.0):
        m64 = LSWMKC(15, alpha=alpha, n_init=10).fit(yale_store)
        m32 = LSWMKC(15, alpha=alpha, n_init=10, eig_precision="float32").fit(yale_store)
        # float32 where the previous rank is <= 30% of n; float64 above, and at the first step (as at n / 2)
        previous = np.concatenate([[165 // 2], m32.result_.kstar_rank[:-1]])
        expected = np.where(previous <= FLOAT32_MAX_FRACTION * 165, "float32-rr", m64.eig_drivers_)
        assert m32.eig_drivers_.tolist() == expected.tolist(), alpha
        assert m32.n_iter_ == m64.n_iter_, alpha
        np.testing.assert_allclose(m32.kernel_weights_, m64.kernel_weights_, rtol=0, atol=1e-7)
        assert adjusted_rand_score(m64.labels_, m32.labels_) == pytest.approx(1.0)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("as_blocks", [True, False])
def test_projected_s_is_v_s_v(threads, as_blocks):
    """V^T S V from Z's row blocks in threads equals the dense product (brute force)."""
    blocks = _random_z(201, 4)
    z = blocks if as_blocks else sp.vstack(blocks, format="csr")
    v = np.random.default_rng(5).standard_normal((201, 17))
    s = sp.vstack(blocks).toarray()
    s = (s + s.T) / 2
    h = _eigen._projected_s(z, np.asfortranarray(v), threads)
    np.testing.assert_allclose(h, v.T @ s @ v, rtol=0, atol=1e-11)
    np.testing.assert_array_equal(h, h.T)


def test_eig_parts_recorded_per_iteration(yale_store):
    """eig_parts_: one dict per iteration; the dense routes compute exactly rank-many
    eigenvectors in float64 (inertia) and at least as many in float32 (the margin), and
    their parts add up to no more than the eigendecomposition's seconds."""
    for precision in ("float64", "float32"):
        m = LSWMKC(15, alpha=16.0, n_init=2, eig_driver="mrrr", eig_precision=precision).fit(yale_store)
        assert len(m.eig_parts_) == m.n_iter_
        for parts, rank, driver, seconds in zip(m.eig_parts_, m.kstar_rank_, m.eig_drivers_, m.eig_seconds_):
            if driver == "mrrr":
                assert parts["columns"] == rank
                assert {"dense S", "reduction", "tridiagonal eigenvectors", "back-transformation"} <= set(parts)
            else:
                assert driver == "float32-rr" and parts["columns"] >= rank
                assert {"Gram", "projected S", "Ritz pairs", "Ritz vectors"} <= set(parts)
            spent = sum(v for k, v in parts.items() if k != "columns")
            assert 0 < spent <= seconds
        assert ("float32-rr" in m.eig_drivers_) == (precision == "float32")


# ------------------------------------------------------------------ array-API route
@pytest.mark.parametrize("name", ["numpy", "array_api_strict"])
def test_array_api_factor_matches_lapack(name):
    pytest.importorskip("array_api_compat")
    if name == "numpy":
        xp = gpu.namespace("numpy")
    else:
        xp = pytest.importorskip("array_api_strict")
    z = _random_z(250, 3)
    w_ref, lam_ref = _eigen.psd_factor(z, driver="mrrr")
    w, lam = gpu.positive_factor(_eigen.dense_lower_s(z), xp)
    assert w.shape == w_ref.shape and w.flags.f_contiguous
    np.testing.assert_allclose(lam, lam_ref, rtol=0, atol=1e-12 * lam_ref.max())
    np.testing.assert_allclose(_kstar(w), _kstar(w_ref), rtol=0, atol=1e-10)


@pytest.fixture
def numpy_as_cuda(monkeypatch):
    """eig_device="cuda" runs the array-API route on NumPy (private test hook)."""
    pytest.importorskip("array_api_compat")
    monkeypatch.setattr(gpu, "_TEST_NAMESPACE", "numpy")


@pytest.fixture
def stack_too_big(monkeypatch):
    """The device holds S at YALE's n = 165, not the kernel stack: the blockwise route,
    its eigen step on the device (the whole iteration on it: tests/test_device_fit.py)."""
    free = 2 * gpu.device_bytes(165)
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
    warnings.filterwarnings("ignore", "the whole iteration cannot stay on the GPU", DeviceFallbackWarning)


def test_array_api_route_same_fit_as_lapack_yale(yale_store, numpy_as_cuda, stack_too_big):
    for alpha in (1.0, 256.0):
        ref = LSWMKC(15, alpha=alpha, n_init=10).fit(yale_store)
        dev = LSWMKC(15, alpha=alpha, n_init=10, eig_device="cuda").fit(yale_store)
        assert set(dev.eig_drivers_) == {"cuda"}
        assert dev.n_iter_ == ref.n_iter_
        np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(dev.labels_, ref.labels_)


def test_device_size_limit_falls_back_to_cpu_with_message(yale_store, numpy_as_cuda, monkeypatch):
    monkeypatch.setattr(gpu, "CUSOLVER_MAX_N", 100)  # YALE has n = 165
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (12080, None, None))  # a CUDA 12.8 runtime: the limit holds
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(yale_store)
    with pytest.warns(DeviceFallbackWarning, match=r"runs on the CPU: n = 165 is above 100, .*CUDA 12.8 runtime"):
        dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda").fit(yale_store)
    assert "cuda" not in set(dev.eig_drivers_)
    np.testing.assert_array_equal(dev.kernel_weights_, ref.kernel_weights_)


def test_cuda_without_device_is_refused(yale_store):
    ok, _ = gpu.cuda_device()
    if ok:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(gpu.DeviceUnavailableError, match="eig_device='cuda' cannot run: CuPy"):
        LSWMKC(15, alpha=8.0, eig_device="cuda").fit(yale_store)
    auto = LSWMKC(15, alpha=8.0, n_init=5, eig_device="auto").fit(yale_store)
    assert "cuda" not in set(auto.eig_drivers_)
    assert gpu.resolve_device("auto", 10**6) == "cpu"


def test_cli_eig_device_cuda_without_device(capsys):
    from lswmkc_dask import cli

    if gpu.cuda_device()[0]:
        pytest.skip("this machine has a CUDA device")
    status = cli.main(["fit", "--dataset", "yale", "--alpha", "8", "--eig-device", "cuda", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "lswmkc: error: --eig-device cuda cannot run: CuPy is not installed" in err and "Traceback" not in err


# ---------------------------------------------------------------- Dask routing
def _cluster_with_gpu_worker():
    from distributed import LocalCluster, Worker

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None)
    cluster.worker_spec["gpu"] = {"cls": Worker, "options": {"nthreads": 1, "resources": {"GPU": 1}}}
    cluster.sync(cluster._correct_state)
    return cluster


def test_gathered_step_runs_on_the_gpu_worker(yale_store, numpy_as_cuda):
    from distributed import Client, get_task_stream

    with _cluster_with_gpu_worker() as cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2)
        gpu_workers = gpu.cluster_gpu_workers(client)
        assert len(gpu_workers) == 1
        with get_task_stream(client) as stream:
            model = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda", client=client).fit(yale_store)
        where = {t["key"]: t["worker"] for t in stream.data}
    steps_ran = [w for k, w in where.items() if str(k).startswith("kstar_step")]
    assert steps_ran and set(steps_ran) == set(gpu_workers), where
    others = [w for k, w in where.items() if str(k).startswith("_graph_block")]
    assert others  # the row blocks run anywhere; only the gathered step is pinned
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(yale_store)
    assert model.n_iter_ == ref.n_iter_ and set(model.eig_drivers_) == {"cuda"}
    np.testing.assert_allclose(model.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)


def test_cuda_on_cluster_without_gpu_worker_is_refused(yale_store, numpy_as_cuda):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(1)
        with pytest.raises(gpu.DeviceUnavailableError, match=r"--resources GPU=1"):
            LSWMKC(15, alpha=8.0, eig_device="cuda", client=client).fit(yale_store)
        assert gpu.resolve_device("auto", 10**6, client) == "cpu"


# ---------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_gpu_parity_yale(yale_store):
    if not gpu.cuda_device()[0]:
        pytest.skip("no CUDA device (or CuPy) here")
    for alpha in (1.0, 256.0):
        ref = LSWMKC(15, alpha=alpha).fit(yale_store)
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeviceFallbackWarning)
            dev = LSWMKC(15, alpha=alpha, eig_device="cuda").fit(yale_store)
            # snapshots keep the fit on the blockwise route: row blocks on the CPU, the eigen step on the GPU
            hybrid = LSWMKC(15, alpha=alpha, eig_device="cuda", snapshot_iterations=[1]).fit(yale_store)
        assert set(dev.eig_drivers_) == {"resident"} and set(hybrid.eig_drivers_) == {"cuda"}
        for fit in (dev, hybrid):
            assert fit.n_iter_ == ref.n_iter_
            np.testing.assert_allclose(fit.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
            np.testing.assert_array_equal(fit.labels_, ref.labels_)


MIXED_REFUSAL = ("eig_precision='mixed' needs the resident route (a GPU, eig_device='cuda'): the CPU routes use "
                 "LAPACK in float64 or float32")


def test_mixed_precision_without_gpu_is_refused_before_any_work(yale_store, tmp_path):
    from lswmkc_dask import sweep
    from lswmkc_dask.errors import ParameterError

    with pytest.raises(ParameterError) as caught:  # before the input is read: the path does not exist
        LSWMKC(15, eig_precision="mixed").fit(tmp_path / "missing.zarr")
    assert str(caught.value) == MIXED_REFUSAL
    with pytest.raises(ParameterError, match="needs the resident route"):
        sweep(yale_store, tmp_path / "sweep", alphas=[1.0], eig_precision="mixed")
    assert not (tmp_path / "sweep").exists()
    with pytest.raises(ValueError, match="precision must be one of"):  # the LAPACK entry keeps refusing it
        _eigen.psd_factor(_random_z(20, 0), precision="mixed")
    if not gpu.cuda_device()[0]:
        with pytest.raises(ParameterError, match="needs the resident route"):
            LSWMKC(15, eig_precision="mixed", eig_device="auto").fit(yale_store)


def test_cli_mixed_precision_without_gpu_is_refused():
    from _helpers import lswmkc_main

    proc = lswmkc_main("fit", "--dataset", "yale", "--eig-precision", "mixed", "--quiet")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["lswmkc: error: --eig-precision mixed needs the resident route (a GPU, --eig-device cuda): "
                     "the CPU routes use LAPACK in float64 or float32"], proc.stderr

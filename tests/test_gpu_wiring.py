"""The GPU wherever the fit runs: the package's own cluster declares
the GPUs of this process, eig_device reaches sweeps, comparisons and the CLI, report.json
records where each step ran, and the device's limits come from the device.

Without a GPU, through the test hooks of :mod:`lswmkc_dask.engine.gpu`: ``_TEST_NAMESPACE =
"numpy"`` stands for CuPy (a device is there), ``_TEST_DEVICE_INFO`` for the device's
CUDA runtime and free memory.
"""

from __future__ import annotations

from lswmkc_dask.errors import DeviceFallbackWarning
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from lswmkc_dask import LSWMKC
from lswmkc_dask.engine import cluster, gpu

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def numpy_as_cuda(monkeypatch):
    """eig_device="cuda" runs the array-API route on NumPy; this process "sees" one GPU."""
    pytest.importorskip("array_api_compat")
    monkeypatch.setattr(gpu, "_TEST_NAMESPACE", "numpy")


@pytest.fixture
def stack_too_big(monkeypatch):
    """The device holds S and its eigenvectors at YALE's n = 165, not the kernel stack:
    the row blocks stay on the CPU, the eigen step goes to the device (the blockwise route)."""
    free = 2 * gpu.device_bytes(165)
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
    warnings.filterwarnings("ignore", "the whole iteration cannot stay on the GPU", DeviceFallbackWarning)


@pytest.fixture
def own_cluster(monkeypatch):
    """Every fit without a client runs on the threaded LocalCluster the package starts
    for itself (as a kernel stack above 1 GiB does)."""
    monkeypatch.setattr(cluster, "IN_PROCESS_MAX_BYTES", 0)


def _reports(directory):
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(Path(directory).glob("runs/*/report.json"))}


# ------------------------------------------------------------------ limits (pure)
def test_solver_limit_only_before_cuda_13():
    assert gpu.solver_max_n(12080) == gpu.CUSOLVER_MAX_N == 25000
    assert gpu.solver_max_n(12090) == 25000
    assert gpu.solver_max_n(13000) is None and gpu.solver_max_n(13020) is None
    assert gpu.solver_max_n(None) is None


def test_memory_refusal_gives_needed_against_free():
    need = gpu.device_bytes(20000)
    assert need == (1 + 4) * 8 * 20000**2 + 8 * 64 * 20000  # S (taking its eigenvectors), syevd's 4 n^2
    assert gpu.device_bytes(20000, np.float32) * 2 == need
    assert gpu.memory_refusal(20000, need) == ""
    assert gpu.memory_refusal(20000, None) == ""
    why = gpu.memory_refusal(20000, need - 1, 80 * 2**30)
    assert why.startswith("the eigendecomposition of S at n = 20000 needs 14.91 GiB of GPU memory")
    assert "14.91 GiB of 80.00 GiB are free" in why
    assert gpu.memory_refusal(20000, need // 2, dtype=np.float32) == ""


def test_device_refusal_reads_runtime_and_free_memory(monkeypatch):
    xp = pytest.importorskip("array_api_compat.numpy")
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (12080, 2**50, 2**50))
    assert "n = 30000 is above 25000" in gpu.device_refusal(30000, xp)
    assert gpu.device_refusal(25000, xp) == ""
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, 2**50, 2**50))
    assert gpu.device_refusal(30000, xp) == ""  # CUDA 13: the 64-bit API has no such limit
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, 10**9, 2 * 10**9))
    assert "needs 33.54 GiB of GPU memory, 0.93 GiB of 1.86 GiB are free" in gpu.device_refusal(30000, xp)


def test_fit_falls_back_on_free_memory_with_figures(yale_store, numpy_as_cuda, monkeypatch):
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, 1000, 2000))
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(yale_store)
    figures = r"at n = 165 needs 1.12 MiB of GPU memory, 0.98 kiB of 1.95 kiB are free"
    with pytest.warns(DeviceFallbackWarning, match=r"runs on the CPU: the eigendecomposition of S " + figures):
        dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda").fit(yale_store)
    assert "cuda" not in set(dev.eig_drivers_)
    np.testing.assert_array_equal(dev.kernel_weights_, ref.kernel_weights_)


def test_no_size_limit_on_cuda_13(yale_store, numpy_as_cuda, monkeypatch):
    monkeypatch.setattr(gpu, "CUSOLVER_MAX_N", 100)  # below YALE's n = 165
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, 2**40, 2**40))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeviceFallbackWarning)
        dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda").fit(yale_store)
    assert set(dev.eig_drivers_) == {"resident"}  # the whole iteration on the device


def test_one_route_choice_for_fits_and_grids(yale_store, numpy_as_cuda, monkeypatch):
    """A fit (``grid_mode=None``) and a sweep's grid ask one function where they run: the
    same route, the device resolved once and written into each fit's options; the
    warning of a stack too big for the device names the caller's line."""
    from lswmkc_dask.engine.route import Route, choose_route
    from lswmkc_dask.records import FitOptions

    asked = FitOptions(n_clusters=15, eig_device="cuda")
    for grid_mode in (None, "auto"):
        with choose_route(yale_store, eig_device="cuda", grid_mode=grid_mode) as route:
            assert route == Route("resident", "cuda")
            assert route.options(asked) == FitOptions(n_clusters=15, eig_device="cuda", resident="cuda")
        with choose_route(yale_store, eig_device="cuda", snapshots=(1,), grid_mode=grid_mode) as route:
            assert route == Route("in-process", "cuda")  # snapshots: the blockwise solver, here
            assert route.options(asked).resident is None
        with choose_route(yale_store, eig_device="cpu", grid_mode=grid_mode) as route:
            assert route == Route("in-process", "cpu") and route.options(asked).gathered_device == "cpu"
    free = 2 * gpu.device_bytes(165)
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
    with pytest.warns(DeviceFallbackWarning, match="whole iteration cannot stay on the GPU") as caught:
        with choose_route(yale_store, eig_device="cuda", grid_mode="auto") as route:
            assert route == Route("in-process", "cuda")
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


def test_stack_too_big_for_the_device_keeps_the_eigen_step_there(yale_store, numpy_as_cuda, monkeypatch):
    """The stack does not fit, S does: a warning with the figures, the row blocks on the
    CPU and the eigen step on the device, the same fit as the CPU route."""
    free = 2 * gpu.device_bytes(165)
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(yale_store)
    with pytest.warns(DeviceFallbackWarning, match=r"whole iteration cannot stay on the GPU: the kernel stack "
                      r"\(5 kernels at n = 165\) with S, its eigenvectors and K\*'s factor needs 4.57 MiB of GPU memory, "
                      r"2.24 MiB of 2.24 MiB are free \(the stack on the device with syevd: 4.57 MiB; the stack streamed from "
                      r"host memory with syevd: 5.61 MiB; .*with split: 5.63 MiB\); the row blocks run on the CPU"):
        dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda").fit(yale_store)
    assert set(dev.eig_drivers_) == {"cuda"}
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)


# ------------------------------------------------------------------ the package's cluster
def test_gpu_worker_options():
    from lswmkc_dask.engine.cluster import gpu_worker_options

    assert gpu_worker_options(3, 0, True) == [{}, {}, {}]
    assert gpu_worker_options(2, 1, False) == [{"resources": {"GPU": 1}}, {}]
    assert gpu_worker_options(1, 1, True) == [{"resources": {"GPU": 1}}]  # one GPU: its own visibility
    two = gpu_worker_options(3, 2, True, visible=None)
    assert two[:2] == [{"resources": {"GPU": 1}, "env": {"CUDA_VISIBLE_DEVICES": d}} for d in ("0", "1")]
    assert two[2] == {}
    assert [o["env"]["CUDA_VISIBLE_DEVICES"] for o in gpu_worker_options(2, 2, True, visible="3,5")] == ["3", "5"]
    assert gpu_worker_options(1, 4, True) == [{"resources": {"GPU": 1}, "env": {"CUDA_VISIBLE_DEVICES": "0"}}]
    assert gpu_worker_options(4, 2, False) == [{"resources": {"GPU": 1}}, {}, {}, {}]  # threads share one device


@pytest.mark.integration
def test_own_cluster_declares_the_gpu_only_where_there_is_one(numpy_as_cuda, monkeypatch):
    with cluster.execution(None, n_bytes=2 * 2**30) as c:  # above 1 GiB: the threaded LocalCluster
        assert c is not None
        assert len(gpu.cluster_gpu_workers(c)) == 1
        assert gpu.resolve_device("cuda", 5000, c) == "cuda"
        assert gpu.resolve_device("auto", gpu.GPU_MIN_N, c) == "cuda"
        assert gpu.resolve_device("auto", gpu.GPU_MIN_N - 1, c) == "cpu"
    monkeypatch.setattr(gpu, "_TEST_NAMESPACE", None)
    if gpu.cuda_device()[0]:
        pytest.skip("this machine has a CUDA device")
    with cluster.execution(None, n_bytes=2 * 2**30) as c:
        assert gpu.cluster_gpu_workers(c) == []


@pytest.mark.integration
def test_own_cluster_process_workers_one_gpu_each(monkeypatch):
    """Two GPUs, worker processes (no dask-cuda here): one worker per GPU, each its device."""
    import os

    try:
        import dask_cuda  # noqa: F401
        pytest.skip("dask-cuda is installed: LocalCUDACluster is used")
    except ImportError:
        pass
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with cluster.local_cluster(n_workers=2, processes=True, gpus=2) as c:
        seen = c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["0", "1"]
        assert sorted(gpu.cluster_gpu_workers(c)) == sorted(seen)


@pytest.mark.integration
def test_cuda_above_one_gib_runs_on_the_own_cluster(yale_store, numpy_as_cuda, own_cluster, stack_too_big,
                                                   monkeypatch):
    """Was DeviceUnavailableError: the threaded LocalCluster declared no GPU."""
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(yale_store)
    dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda").fit(yale_store)
    assert set(dev.eig_drivers_) == {"cuda"} and dev.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)
    monkeypatch.setattr(gpu, "GPU_MIN_N", 100)  # "auto" takes the declared GPU from n = 100 (YALE: 165)
    auto = LSWMKC(15, alpha=8.0, n_init=5, eig_device="auto").fit(yale_store)
    assert set(auto.eig_drivers_) == {"cuda"}
    np.testing.assert_allclose(auto.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)


@pytest.mark.integration
def test_fit_on_a_gpu_cluster_runs_wholly_on_a_gpu_worker(yale, numpy_as_cuda, tmp_path, monkeypatch):
    """A cluster given, a store on disk: the whole fit is one task on the GPU worker (it
    reads the store onto its device); where that device cannot hold the stack, a warning
    with the figures and the blockwise route (the eigen step on the GPU worker)."""
    from lswmkc_dask import prepare

    kernels, labels = yale
    store = prepare(kernels, tmp_path / "yale.zarr", labels=labels)
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(store)
    with cluster.local_cluster(n_workers=2, processes=False, gpus=1) as c:
        dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda", client=c).fit(tmp_path / "yale.zarr")
        free = 2 * gpu.device_bytes(165)
        monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", (13000, free, free))
        with pytest.warns(DeviceFallbackWarning, match=r"whole iteration cannot stay on the GPU: the kernel stack"):
            blockwise = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda", client=c).fit(tmp_path / "yale.zarr")
    assert set(dev.eig_drivers_) == {"resident"} and dev.execution_.startswith("resident on cuda")
    assert set(blockwise.eig_drivers_) == {"cuda"}
    for fit in (dev, blockwise):
        assert fit.n_iter_ == ref.n_iter_
        np.testing.assert_allclose(fit.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(fit.labels_, ref.labels_)


# ------------------------------------------------------------------ sweeps, compare, CLI
ALPHAS = (1.0, 64.0)


def _sweep(store, out, **kw):
    from lswmkc_dask import sweep

    return sweep(store, out, alphas=ALPHAS, n_init=5, progress=False, **kw)


def _assert_same_runs(dev_dir, ref_dir, device):
    dev, ref = _reports(dev_dir), _reports(ref_dir)
    assert set(dev) == set(ref) and len(dev) == len(ALPHAS)
    for name, report in dev.items():
        record = report["eig_device"]
        assert record["resolved"] == device, name
        assert record["per_iteration"] == [device] * report["n_iter"], name
        assert report["n_iter"] == ref[name]["n_iter"], name
        np.testing.assert_allclose(report["kernel_weights"], ref[name]["kernel_weights"], rtol=0, atol=1e-10)
        assert ref[name]["eig_device"] == {"requested": "cpu", "resolved": "cpu", "route": "blockwise",
                                           "per_iteration": ["cpu"] * ref[name]["n_iter"]}
    dev_labels = sorted(Path(dev_dir).glob("runs/*/labels.csv"))
    assert [p.read_text() for p in dev_labels] == [p.read_text() for p in sorted(Path(ref_dir).glob("runs/*/labels.csv"))]


@pytest.fixture(scope="module")
def cpu_sweep(yale_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("cpu") / "sweep"
    _sweep(yale_store, out)
    return out


def test_sweep_in_process_takes_eig_device(yale_store, numpy_as_cuda, cpu_sweep, tmp_path):
    _sweep(yale_store, tmp_path / "dev", eig_device="cuda")
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")
    assert {r["eig_device"]["requested"] for r in _reports(tmp_path / "dev").values()} == {"cuda"}


def test_sweep_copies_the_stack_to_the_device_once(yale_store, numpy_as_cuda, cpu_sweep, tmp_path):
    """Every grid point on the resident route; none copies the stack (m n^2 numbers) again,
    and no copy during the iterations is more than a few numbers."""
    gpu.GPU_MIN_N, old = 100, gpu.GPU_MIN_N  # "auto" takes the device from n = 100 (YALE: 165)
    try:
        _sweep(yale_store, tmp_path / "dev", eig_device="auto")
    finally:
        gpu.GPU_MIN_N = old
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")
    stack = 8 * 5 * 165 * 165
    for name, report in _reports(tmp_path / "dev").items():
        record = report["eig_device"]
        assert record["route"] == "resident" and record["requested"] == "auto", name
        assert record["transfers"]["to_device"] < stack / 50, (name, record)
        assert record["transfers"]["largest_per_iteration"] <= 8 * 16, (name, record)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["task", "blockwise"])
def test_sweep_on_own_cluster_takes_eig_device(yale_store, numpy_as_cuda, own_cluster, stack_too_big, cpu_sweep,
                                               tmp_path, mode):
    _sweep(yale_store, tmp_path / "dev", eig_device="cuda", mode=mode)
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")
    assert {r["eig_device"]["route"] for r in _reports(tmp_path / "dev").values()} == {"blockwise"}


@pytest.mark.integration
def test_sweep_on_a_gpu_cluster_runs_each_point_on_a_gpu_worker(yale_store, numpy_as_cuda, cpu_sweep, tmp_path):
    """A cluster given whose worker declares GPU=1: each grid point is one task there, its
    whole iteration on that worker's device (task mode), the same fits as the CPU route."""
    with cluster.local_cluster(n_workers=2, processes=False, gpus=1) as c:
        assert len(gpu.cluster_gpu_workers(c)) == 1
        _sweep(yale_store, tmp_path / "dev", eig_device="cuda", mode="task", client=c)
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")
    assert {r["eig_device"]["route"] for r in _reports(tmp_path / "dev").values()} == {"resident"}


def test_sweep_eig_precision_reaches_the_fits(yale_store, tmp_path):
    _sweep(yale_store, tmp_path / "f32", eig_precision="float32")
    drivers = [d for r in _reports(tmp_path / "f32").values() for d in r["eig_drivers"]]
    assert "float32-rr" in drivers
    assert {r["params"]["eig_precision"] for r in _reports(tmp_path / "f32").values()} == {"float32"}


def test_sweep_cuda_without_device_refused_before_writing(yale_store, tmp_path):
    if gpu.cuda_device()[0]:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(gpu.DeviceUnavailableError, match="eig_device='cuda' cannot run: CuPy"):
        _sweep(yale_store, tmp_path / "out", eig_device="cuda")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="eig_precision"):
        _sweep(yale_store, tmp_path / "out", eig_precision="float16")
    assert not (tmp_path / "out").exists()


def test_compare_takes_eig_device(yale_store, numpy_as_cuda, cpu_sweep, tmp_path):
    from lswmkc_dask.grid.compare import compare

    compare(yale_store, tmp_path / "cmp", methods=["lswmkc"], alphas=ALPHAS, n_init=5, progress=False,
            eig_device="cuda")
    _assert_same_runs(tmp_path / "cmp" / "lswmkc", cpu_sweep, "cuda")


def test_cli_sweep_and_compare_take_eig_device(numpy_as_cuda, tmp_path, capsys):
    from lswmkc_dask import cli

    args = ["--dataset", "yale", "--alphas", "8", "--n-init", "5", "--quiet"]
    assert cli.main(["sweep", *args, "--output", str(tmp_path / "s"), "--eig-device", "cuda"]) == 0
    assert cli.main(["sweep", *args, "--output", str(tmp_path / "r")]) == 0
    assert cli.main(["compare", *args, "--methods", "lswmkc", "--output", str(tmp_path / "c"),
                     "--eig-device", "cuda", "--eig-precision", "float64"]) == 0
    capsys.readouterr()
    (ref,) = _reports(tmp_path / "r").values()
    for out in (tmp_path / "s", tmp_path / "c" / "lswmkc"):
        (rep,) = _reports(out).values()
        record = dict(rep["eig_device"])
        assert record.pop("transfers")["largest_per_iteration"] <= 8 * 16
        assert record == {"requested": "cuda", "resolved": "cuda", "route": "resident",
                          "per_iteration": ["cuda"] * rep["n_iter"]}
        np.testing.assert_allclose(rep["kernel_weights"], ref["kernel_weights"], rtol=0, atol=1e-10)


def test_cli_sweep_cuda_without_device(tmp_path, capsys):
    from lswmkc_dask import cli

    if gpu.cuda_device()[0]:
        pytest.skip("this machine has a CUDA device")
    status = cli.main(["sweep", "--dataset", "yale", "--alphas", "8", "--quiet", "--output", str(tmp_path / "s"),
                       "--eig-device", "cuda"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "lswmkc: error: --eig-device cuda cannot run: CuPy is not installed" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_gpu_extras_for_cuda_12_and_13():
    """pip install '.[gpu-cuda12]' / '.[gpu-cuda13]' from the checkout, and '.[gpu]' an alias of one."""
    import tomllib

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("cupy-cuda12x") for r in extras["gpu-cuda12"])
    assert any(r.startswith("cupy-cuda13x") for r in extras["gpu-cuda13"])
    for name in ("gpu-cuda12", "gpu-cuda13"):
        assert any(r.startswith("array-api-compat") for r in extras[name])
    assert extras["gpu"] in (["lswmkc-dask[gpu-cuda12]"], ["lswmkc-dask[gpu-cuda13]"])


# ------------------------------------------------------------------ on a GPU
def _need_gpu():
    if not gpu.cuda_device()[0]:
        pytest.skip("no CUDA device (or CuPy) here")


@pytest.mark.gpu
def test_gpu_device_info_is_read_from_cupy():
    _need_gpu()
    runtime, free, total = gpu.device_info(gpu.namespace("cuda"))
    assert runtime is not None and runtime >= 11000 and 0 < free <= total
    assert gpu.solver_max_n(runtime) == (None if runtime >= 13000 else gpu.CUSOLVER_MAX_N)


@pytest.mark.gpu
def test_gpu_mixed_works_in_float16_from_gpu_min_n():
    """On a real GPU: "mixed"'s polynomial runs on the tensor cores (float16) from GPU_MIN_N
    samples, in float32 below (launch-bound there; float16's rounding is the stop rule's tol)."""
    _need_gpu()
    from lswmkc_dask.engine import device_fit

    xp = gpu.namespace("cuda")
    assert device_fit.low_dtype(xp, gpu.GPU_MIN_N) == xp.float16
    assert device_fit.low_dtype(xp, gpu.GPU_MIN_N - 1) == xp.float32
    assert device_fit.low_dtype(pytest.importorskip("array_api_compat.numpy"), 10**5) == np.float32


@pytest.mark.gpu
def test_gpu_eigh_in_place_same_numbers_one_copy_less():
    """On a real GPU: positive_factor(eigh=gpu.eigh_in_place) lets cuSOLVER's syevd write the
    eigenvectors into S's buffer: the factor and eigenvalues of CuPy's eigh, bit for bit,
    with one n x n float64 array less at its peak (the memory pool's reserve)."""
    _need_gpu()
    import cupy

    from lswmkc_dask.core import equations as core

    xp, n = gpu.namespace("cuda"), 3000
    a = cupy.random.default_rng(0).standard_normal((n, n))
    s = (a + a.T) * 0.5
    del a
    pool = cupy.get_default_memory_pool()
    peaks, out = [], []
    for eigh in (None, gpu.eigh_in_place):
        work = cupy.array(s, copy=True)
        pool.free_all_blocks()
        base = pool.total_bytes()
        w, lam = core.positive_factor(work, xp, eigh=eigh)
        cupy.cuda.Device().synchronize()
        del work
        peaks.append(pool.total_bytes() - base)
        out.append((cupy.asnumpy(w), cupy.asnumpy(lam)))
    for ref, got in zip(*out):
        np.testing.assert_array_equal(got, ref)
    assert peaks[0] - peaks[1] >= 0.9 * 8 * n * n, [p / (8 * n * n) for p in peaks]


@pytest.mark.gpu
@pytest.mark.integration
def test_gpu_sweep_on_own_cluster(yale_store, own_cluster, cpu_sweep, tmp_path):
    _need_gpu()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeviceFallbackWarning)
        _sweep(yale_store, tmp_path / "dev", eig_device="cuda")
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")


@pytest.mark.gpu
@pytest.mark.integration
def test_gpu_fit_and_task_sweep_on_a_gpu_worker(yale, cpu_sweep, tmp_path):
    """On a real GPU: a cluster whose worker declares GPU=1 runs the whole fit of a store on
    disk as one task there, and a task-mode sweep's grid points wholly there."""
    _need_gpu()
    from lswmkc_dask import prepare

    kernels, labels = yale
    store = prepare(kernels, tmp_path / "yale.zarr", labels=labels)
    ref = LSWMKC(15, alpha=8.0, n_init=5).fit(store)
    with cluster.local_cluster(n_workers=1, processes=False, gpus=1) as c:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeviceFallbackWarning)
            dev = LSWMKC(15, alpha=8.0, n_init=5, eig_device="cuda", client=c).fit(tmp_path / "yale.zarr")
            _sweep(store, tmp_path / "dev", eig_device="cuda", mode="task", client=c)
    assert set(dev.eig_drivers_) == {"resident"} and dev.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)
    _assert_same_runs(tmp_path / "dev", cpu_sweep, "cuda")
    assert {r["eig_device"]["route"] for r in _reports(tmp_path / "dev").values()} == {"resident"}


# ------------------------------------------------------------------ kernels built on the device
def _views(n=120, seed=4):
    from sklearn.datasets import make_blobs

    x, y = make_blobs(n, centers=4, n_features=6, cluster_std=2.0, random_state=seed)
    rng = np.random.default_rng(seed)
    return [x[:, :3], x[:, 3:] + 0.3 * rng.normal(size=(n, 3)), x @ rng.normal(size=(6, 5))], y


def test_fit_from_features_builds_kernels_on_the_device(numpy_as_cuda):
    """Feature views with eig_device="cuda": the base kernels are built on the device (no
    store), and the fit equals the host route's (a store prepared from the same views):
    iterations, kernel weights to 1e-12, labels; predict's training statistics alike."""
    views, _ = _views()
    ref = LSWMKC(4, alpha=8.0, kernel="rbf", n_init=10).fit(views)
    dev = LSWMKC(4, alpha=8.0, kernel="rbf", n_init=10, eig_device="cuda").fit(views)
    assert "kernels" in dev.stage_seconds_ and "kernels" not in ref.stage_seconds_
    assert dev.execution_.startswith("resident") and not ref.execution_.startswith("resident")
    assert dev.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)
    assert list(dev.kernel_names_) == list(ref.kernel_names_)
    for name in ("kernel_col_means_", "kernel_diag_"):
        np.testing.assert_allclose(getattr(dev, name), getattr(ref, name), rtol=0, atol=1e-14)
    np.testing.assert_array_equal(dev.predict(views), ref.predict(views))


def test_constant_view_takes_the_host_route(numpy_as_cuda):
    """A constant view gives a degenerate kernel: the host route's checks name it."""
    from lswmkc_dask.engine.route import features_resident
    from lswmkc_dask.kernels.features import FeatureKernels

    views, _ = _views()
    options = LSWMKC(4, eig_device="cuda")._fit_options(4)
    assert features_resident(FeatureKernels(views), options)
    assert not features_resident(FeatureKernels(views + [np.ones((120, 2))]), options)


def test_features_on_device1_cross_only_features_and_small_arrays():
    """On array-api-strict's device1 (no host round trip allowed): the kernels built there;
    what crosses is the views, the m x n statistics, and per iteration a few numbers."""
    import dataclasses

    from lswmkc_dask.engine.device_route import features_stack, fit_on_device
    from lswmkc_dask.kernels.features import FeatureKernels

    pytest.importorskip("array_api_strict")
    views, _ = _views()
    n = 120
    ref = LSWMKC(4, alpha=8.0, kernel="rbf", n_init=10).fit(views)
    options = dataclasses.replace(ref._fit_options(), resident="array-api-strict")
    stack = features_stack(FeatureKernels(views), options.resident)
    result, stats = fit_on_device(stack, options), stack.statistics
    np.testing.assert_array_equal(result.labels, ref.labels_)
    np.testing.assert_allclose(result.kernel_weights, ref.kernel_weights_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stats.col_means, ref.kernel_col_means_, rtol=0, atol=1e-14)
    assert result.device_transfers["largest_per_iteration"] < n * n * 8


def test_sweep_from_features_builds_kernels_on_the_device_once(numpy_as_cuda, tmp_path):
    """A sweep of feature views with eig_device="cuda": the base kernels built once in device
    memory (no store prepared: the kernels are fingerprinted by their values, where every
    prepared store has a manifest), every grid point resident on them, no copy of the stack
    per point; the runs, the label-free scores and the choice are the CPU sweep's."""
    from lswmkc_dask import sweep

    views, y = _views()
    kw = dict(kernel="rbf", alphas=ALPHAS, n_clusters=4, n_init=10, labels=y, progress=False)
    ref = sweep(views, tmp_path / "cpu", **kw)
    dev = sweep(views, tmp_path / "dev", eig_device="cuda", **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu", "dev"]  # nothing else written
    inputs = {d: json.loads((tmp_path / d / "sweep.json").read_text())["input"] for d in ("cpu", "dev")}
    assert inputs["cpu"]["digest_of"] == "manifest" and inputs["dev"]["digest_of"] == "values"
    assert inputs["dev"]["shape"] == [3, 120, 120] and inputs["dev"]["dtype"] == "float64"
    got, want = _reports(tmp_path / "dev"), _reports(tmp_path / "cpu")
    assert set(got) == set(want) and len(got) == len(ALPHAS)
    for name, report in got.items():
        assert report["eig_device"]["route"] == "resident", name
        assert report["eig_device"]["transfers"]["to_device"] < 8 * 3 * 120 * 120 / 50, name
        assert report["n_iter"] == want[name]["n_iter"], name
        assert report["kernel_names"] == want[name]["kernel_names"], name
        np.testing.assert_allclose(report["kernel_weights"], want[name]["kernel_weights"], rtol=0, atol=1e-12)
        for score, value in want[name]["label_free"].items():
            assert report["label_free"][score] == pytest.approx(value, rel=0, abs=1e-12), (name, score)
    for d in ("runs/*/labels.csv", "runs/*/labels_k=*.csv"):
        assert ([p.read_text() for p in sorted((tmp_path / "dev").glob(d))]
                == [p.read_text() for p in sorted((tmp_path / "cpu").glob(d))])
    assert dev["selected"]["alpha"] == ref["selected"]["alpha"]
    assert sweep(views, tmp_path / "dev", eig_device="cuda", **kw)["rows"] == dev["rows"]  # resumed: nothing to run


def test_float32_stack_memory_figures(monkeypatch):
    """The stack's bytes are its dtype's: at n = 50,000, m = 6 a float32 stack is 60 GB
    (float64: 120 GB) beside the fit's peak, the eigen step's (2 + 4) n^2 float64 (W_{t-1},
    S in Z's buffer taking the eigenvectors, and cuSOLVER syevd's measured workspace of
    4 n^2) and a row block's temporaries. One H200 (141 GiB free) cannot hold n = 50,000 with
    the stack on the device (169.64 GiB float32, 225.52 GiB float64): the plan keeps it off
    the device (issue 51: rebuilt from the features, 115.33 GiB; streamed from host memory,
    114.76 GiB) with syevd; it takes n = 45,000 with a float32 stack on the device (137.79 GiB);
    n = 60,000 is refused with every plan's figures (the split route stops at n = 46,340)."""
    from lswmkc_dask.engine.device_route import (EIGH_WORKSPACE, default_block_rows, plan_for, resident_bytes,
                                                 shape_refusal)
    from lswmkc_dask.engine.route import features_resident
    from lswmkc_dask.kernels.features import FeatureKernels

    xp = pytest.importorskip("array_api_compat.numpy")
    m, n = 6, 50_000
    b = default_block_rows(m, n)
    assert b == 447 and EIGH_WORKSPACE == 4.0
    work = resident_bytes(m, n, b, itemsize=0)
    assert work == 8 * (6 * n * n + 12 * b * n)  # the eigen step (above the polynomial's) and a row block
    assert resident_bytes(m, n, b, itemsize=0, workspace=0, s_copies=1) == 8 * (3 * n * n + 12 * b * n)
    assert resident_bytes(m, n, b, itemsize=4) - work == 60 * 10**9
    assert resident_bytes(m, n, b) - work == 120 * 10**9
    h200 = 141 * 2**30
    info = (13000, h200, h200)
    for itemsize, need in ((4, "169.64"), (8, "225.52")):
        why = shape_refusal(m, n, itemsize, xp, info, stack="device")
        assert why == (f"the kernel stack ({m} kernels at n = {n}) with S, its eigenvectors and K*'s factor needs "
                       f"{need} GiB of GPU memory, 141.00 GiB of 141.00 GiB are free (the stack on the device with "
                       f"syevd: {need} GiB; the split eigen route stops at n = 46340 (cuSOLVER's 32-bit "
                       "sytrd/ormtr))"), why
    for off, need in (("features", "115.33"), ("host", "114.76")):
        plan, why = plan_for(m, n, 4, xp, info, off_device=off, feature_columns=650)
        assert (plan.stack, plan.eigen, f"{plan.need / 2**30:.2f}", why) == (off, "syevd", need, ""), why
    n45 = 45_000
    need45 = resident_bytes(m, n45, default_block_rows(m, n45), itemsize=4)
    assert plan_for(m, n45, 4, xp, info)[0].stack == "device" and f"{need45 / 2**30:.2f}" == "137.79"
    why = shape_refusal(m, n45, 4, xp, (13000, need45 - 1, h200), stack="device", eigen="syevd")
    assert why.startswith(f"the kernel stack ({m} kernels at n = {n45}) with S, its eigenvectors and K*'s factor "
                          "needs 137.79 GiB of GPU memory"), why
    assert shape_refusal(m, n45, 4, xp, (13000, need45, need45)) == ""
    split = plan_for(m, n45, 4, xp, (13000, need45 - 1, h200), stack="device")[0]  # syevd does not fit: split
    assert (split.stack, split.eigen) == ("device", "split") and split.need < need45 - 1
    n60 = 60_000
    why = shape_refusal(m, n60, 4, xp, info, off_device="features", feature_columns=650)
    assert why == (f"the kernel stack ({m} kernels at n = {n60}) with S, its eigenvectors and K*'s factor needs "
                   "164.55 GiB of GPU memory, 141.00 GiB of 141.00 GiB are free (the stack on the device with syevd: "
                   "243.39 GiB; the stack rebuilt from the features with syevd: 164.55 GiB; the split eigen route "
                   "stops at n = 46340 (cuSOLVER's 32-bit sytrd/ormtr))"), why
    monkeypatch.setattr(gpu, "_TEST_NAMESPACE", "numpy")
    monkeypatch.setattr(gpu, "_TEST_DEVICE_INFO", info)
    for size in (n45, n):  # nothing built
        fk = FeatureKernels([np.random.default_rng(p).normal(size=(size, 1)) for p in range(m)])
        for precision in ("mixed", "float64"):
            options = LSWMKC(4, eig_device="cuda", eig_precision=precision)._fit_options(4)
            assert features_resident(fk, options, stack_dtype="float32")
    fk = FeatureKernels([np.random.default_rng(p).normal(size=(n60, 1)) for p in range(m)])
    with pytest.warns(DeviceFallbackWarning, match=r"needs 164.26 GiB of GPU memory, 141.00 GiB"):
        assert not features_resident(fk, options, stack_dtype="float32")  # float64 iterations: blockwise
    mixed = LSWMKC(4, eig_device="cuda", eig_precision="mixed")._fit_options(4)
    with pytest.raises(ValueError, match=r"needs the resident route .*needs 164.26 GiB of GPU memory, 141.00 GiB"):
        features_resident(fk, mixed, stack_dtype="float32")  # "mixed" has no blockwise route: refused, with the figures


@pytest.mark.gpu
def test_gpu_fit_from_features_and_kmeans_on_the_gpu():
    """On a real GPU: the kernels built in device memory, the iterations, the embedding and
    the k-means there give the host route's fit (labels, kernel weights, predict's training
    statistics), and the device k-means gives scikit-learn's labels on the fit's embedding."""
    _need_gpu()
    from lswmkc_dask.engine import device_fit as df
    from lswmkc_dask.engine.postprocess import kmeans_best_of, kmeans_on

    views, _ = _views(600)
    ref = LSWMKC(4, alpha=8.0, kernel="rbf", n_init=10).fit(views)
    dev = LSWMKC(4, alpha=8.0, kernel="rbf", n_init=10, eig_device="cuda").fit(views)
    assert "kernels" in dev.stage_seconds_ and dev.execution_.startswith("resident on cuda")
    assert dev.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(dev.kernel_weights_, ref.kernel_weights_, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(dev.labels_, ref.labels_)
    np.testing.assert_allclose(dev.kernel_diag_, ref.kernel_diag_, rtol=0, atol=1e-12)
    xp, device = df.resident_namespace("cuda")
    link = df.Link(xp, device)
    got, _ = kmeans_on(link.to_device(ref.embedding_, "h"), 4, 10, 3, to_host=lambda a: link.to_host(a, "k"))
    np.testing.assert_array_equal(got, kmeans_best_of(ref.embedding_, 4, 10, 3)[0])


def test_cli_fit_and_sweep_of_features_build_kernels_on_the_device(numpy_as_cuda, tmp_path):
    """``lswmkc fit --features ... --eig-device cuda`` and ``lswmkc sweep`` alike build the base
    kernels on the device (no store prepared on the host): the fit equals the CPU route's
    (same labels, kernel weights within 1e-12), its model predicts, and the sweep's runs
    are all resident."""
    from _helpers import lswmkc_main

    from lswmkc_dask.io.store import prepare as host_prepare

    views, y = _views()
    paths = []
    for p, v in enumerate(views):
        path = tmp_path / f"v{p}.csv"
        np.savetxt(path, np.column_stack([v, y]), delimiter=",")
        paths.append(str(path))
    common = ["--features", *paths, "--label-column", "-1", "--kernel", "rbf", "--alpha", "8", "--n-init", "10"]
    prepared = []
    monkey = pytest.MonkeyPatch()
    for where in ("lswmkc_dask.io.store.prepare", "lswmkc_dask.io.prepare", "lswmkc_dask.engine.route.prepare"):
        monkey.setattr(where, lambda *a, w=where, **k: prepared.append(w) or host_prepare(*a, **k))
    try:
        dev = lswmkc_main("fit", *common, "--eig-device", "cuda", "--output", str(tmp_path / "dev"), check=True)
        lswmkc_main("sweep", *common[:-4], "--alphas", "1", "8", "--eig-device", "cuda", "--output",
                    str(tmp_path / "sweep"), check=True)
        assert not prepared
    finally:
        monkey.undo()
    lswmkc_main("fit", *common, "--output", str(tmp_path / "cpu"), check=True)
    rep_dev = json.loads((tmp_path / "dev" / "report.json").read_text())
    rep_cpu = json.loads((tmp_path / "cpu" / "report.json").read_text())
    assert rep_dev["eig_device"]["route"] == "resident" and rep_cpu["eig_device"]["route"] != "resident"
    assert "resident on cuda" in dev.stdout
    np.testing.assert_allclose(rep_dev["kernel_weights"], rep_cpu["kernel_weights"], rtol=0, atol=1e-12)
    assert (tmp_path / "dev" / "labels.csv").read_text() == (tmp_path / "cpu" / "labels.csv").read_text()
    out = tmp_path / "new.csv"
    lswmkc_main("predict", str(tmp_path / "dev"), "--features", *paths, "--label-column", "-1", "--output", str(out),
                check=True)
    routes = {r["eig_device"]["route"] for r in _reports(tmp_path / "sweep").values()}
    assert routes == {"resident"}

"""Where a fit runs, as a user runs it: plain scripts (file, stdin, -c) without a
``__main__`` guard, an active Dask client, the scikit-learn contract (clone, pickle,
check_estimator), feature views, parameter validation before any work, BLAS threads."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import numpy as np
import pytest

from lswmkc_dask import LSWMKC
from lswmkc_dask._threads import free_cores
from lswmkc_dask.engine.cluster import CPU_COUNT
from lswmkc_dask._validate import InvalidParameter

from _helpers import ROOT, env
from lswmkc_dask import _threads

pytestmark = pytest.mark.timeout(600)


def _readme_snippet(name):
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- snippet: {name}[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, f"README has no snippet {name!r}"
    return m.group(1)


def _weights_from_output(out):
    m = re.search(r"^(\d+) \[([^\]]+)\]", out, re.M)
    assert m, out
    return int(m.group(1)), np.array(m.group(2).split(), dtype=float)


@pytest.mark.parametrize("how", ["file", "stdin", "-c"])
def test_readme_snippet_as_a_plain_script(how, tmp_path, reference):
    """No __main__ guard: the README's snippet runs from a file, from stdin and with -c."""
    code = _readme_snippet("plain-script")
    assert "__main__" not in code
    script = tmp_path / "script.py"
    script.write_text(code)
    cmd = {"file": [sys.executable, str(script)], "stdin": [sys.executable, "-"], "-c": [sys.executable, "-c", code]}[how]
    proc = subprocess.run(
        cmd, input=code if how == "stdin" else None, capture_output=True, text=True, timeout=240, cwd=tmp_path,
        env=env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nanny" not in proc.stderr
    n_iter, weights = _weights_from_output(proc.stdout)
    i = reference["alphas"].index(8.0)
    assert n_iter == reference["iterations"][i]
    # numpy prints 8 decimals
    np.testing.assert_allclose(weights, reference["omega"][i], atol=1e-8)
    assert "'ACC'" in proc.stdout


def test_in_process_fit_starts_no_process(yale, reference):
    """Without a client the fit runs in this process: no child process appears."""
    import psutil

    kernels, _ = yale
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    model = LSWMKC(n_clusters=15, alpha=8).fit(kernels)
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before
    assert model.execution_.startswith("in-process")
    i = reference["alphas"].index(8.0)
    assert model.n_iter_ == reference["iterations"][i]
    np.testing.assert_allclose(model.kernel_weights_, reference["omega"][i], atol=1e-6)


def test_feature_views_equal_prebuilt_kernels(yale):
    """kernel='linear' on views equals kernel='precomputed' on the X X^T of z-scored views."""
    rng = np.random.default_rng(0)
    views = [rng.normal(size=(60, d)) + np.repeat(np.eye(3, d) * 4, 20, axis=0) for d in (5, 8)]
    z = [(v - v.mean(0)) / v.std(0) for v in views]
    a = LSWMKC(n_clusters=3, alpha=4, kernel="linear").fit(views)
    b = LSWMKC(n_clusters=3, alpha=4).fit([x @ x.T for x in z])
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, atol=1e-10)
    np.testing.assert_array_equal(a.labels_, b.labels_)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"eig_driver": "fast"}, r"'eig_driver' parameter of LSWMKC must be a str among \{.*'auto'.*\}"),
        ({"n_init": 0}, r"'n_init' parameter of LSWMKC must be an int in the range \[1, 10000\]"),
        ({"max_iter": 2.5}, r"'max_iter' parameter of LSWMKC must be an int"),
        ({"kernel": "sigmoid"}, r"'kernel' parameter of LSWMKC must be a str among .*'rbf'"),
        ({"degenerate_kernels": "ignore"}, r"'degenerate_kernels' parameter of LSWMKC must be a str among .*'drop'"),
        ({"client": 3}, r"'client' parameter of LSWMKC"),
    ],
)
def test_parameters_checked_before_any_work(params, message, tmp_path):
    """A bad parameter is reported before the input is even opened (a missing file)."""
    with pytest.raises(InvalidParameter, match=message):
        LSWMKC(n_clusters=3, **params).fit(str(tmp_path / "missing.zarr"))


def test_kernel_params_checked():
    with pytest.raises(ValueError, match=r"kernel_params \['gamma'\] are not parameters of kernel='poly' \(allowed: degree, coef0\)"):
        LSWMKC(3, kernel="poly", kernel_params={"gamma": 1}).fit([np.eye(5)])


def test_matlab_order_hint():
    k = np.stack([np.eye(10)] * 3, axis=2)  # (n, n, m)
    with pytest.raises(ValueError, match=r"MATLAB's \(n, n, m\) order .* np\.moveaxis\(K, 2, 0\)"):
        LSWMKC(3).fit(k)


def test_views_with_precomputed_get_a_hint():
    with pytest.raises(ValueError, match=r"kernel 0 is not square: shape \(20, 4\) .* kernel='rbf'"):
        LSWMKC(3).fit([np.ones((20, 4)), np.ones((20, 3))])


def test_check_estimator():
    """scikit-learn's estimator checks with the pairwise (precomputed kernel) tag."""
    from sklearn.utils.estimator_checks import check_estimator

    n_clusters_1 = "sets n_clusters=1, which LSWMKC refuses (a clustering needs 2 <= n_clusters)"
    features = "passes a feature matrix (n, d); kernel='precomputed' takes (n, n) kernels and says so"
    expected = {
        "check_dont_overwrite_parameters": n_clusters_1,
        "check_methods_subset_invariance": n_clusters_1,
        "check_fit2d_1sample": n_clusters_1,
        "check_fit2d_1feature": n_clusters_1,
        "check_fit2d_predict1d": n_clusters_1,
        "check_clustering": features,
        "check_estimators_empty_data_messages": features,
        "check_estimators_nan_inf": features + " (NaN/Inf in kernels: tests/test_bad_input.py)",
        "check_dtype_object": "object arrays are refused ('kernels must be numeric') rather than converted",
        "check_estimators_dtypes": "its integer inputs are a float kernel truncated to integers, which is not "
                                   "positive semidefinite: refused as such (tests/test_memory_and_input.py)",
    }
    no_fit_transform = ("no fit_transform: the training samples' embedding is embedding_, transform embeds new "
                        "samples (tests/test_predict.py)")
    expected.update(dict.fromkeys(("check_transformer_data_not_an_array", "check_transformer_general",
                                   "check_transformer_preserve_dtypes"), no_fit_transform))
    results = check_estimator(
        LSWMKC(n_clusters=3, max_iter=3, min_iter=3, n_init=2), expected_failed_checks=expected, on_fail=None
    )
    failed = [r for r in results if r["status"] == "failed"]
    assert not failed, [(r["check_name"], str(r["exception"])[:300]) for r in failed]


def test_free_cores_sees_other_programs():
    """With as many busy programs as cores, free_cores() leaves 1 thread, not CPU_COUNT."""
    assert 1 <= free_cores() <= CPU_COUNT
    busy = [
        subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()+60\nwhile time.time()<t: pass"])
        for _ in range(CPU_COUNT)
    ]
    try:
        deadline = time.time() + 30
        seen = CPU_COUNT
        while time.time() < deadline:  # awaits the busy programs' being scheduled
            seen = min(seen, free_cores())
            if seen == 1:
                break
            time.sleep(0.05)
        assert seen == 1
        assert free_cores(limit=1) == 1
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_free_cores_does_not_count_this_process(monkeypatch):
    """Threads of this process that keep running (here hashing without the GIL; in a fit,
    OpenBLAS threads spinning after a 2-thread call) are not other programs: they do
    not lower the count (before, an in-process fit ran its eigensolver on 1 thread)."""
    import hashlib
    import threading


    stop = threading.Event()

    def spin():
        data = b"x" * 20_000_000
        while not stop.is_set():
            hashlib.sha256(data).digest()  # releases the GIL: runnable, like a BLAS thread

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(CPU_COUNT)]
    for th in threads:
        th.start()
    try:
        deadline = time.time() + 30
        own = 0
        while time.time() < deadline and own < 1 + CPU_COUNT:  # awaits their being scheduled
            own = max(own, _threads._own_runnable_threads())
            time.sleep(0.01)
        assert own >= 1 + CPU_COUNT  # they are seen, as this process's own (runnable whatever the load)
        # The decision, given readings (not the machine's load at this moment): all the
        # runnable threads are this process's own -> every core is free; other programs'
        # threads are subtracted, one core each, at least 1 left.
        monkeypatch.setattr(_threads, "_runnable_threads", lambda: own)
        monkeypatch.setattr(_threads, "_own_runnable_threads", lambda: own)
        assert free_cores() == CPU_COUNT
        monkeypatch.setattr(_threads, "_runnable_threads", lambda: own + 1)
        assert free_cores() == max(1, CPU_COUNT - 1)
        # without the correction they would count as busy cores
        monkeypatch.setattr(_threads, "_runnable_threads", lambda: own)
        monkeypatch.setattr(_threads, "_own_runnable_threads", lambda: 1)
        assert free_cores() == max(1, CPU_COUNT - (own - 1))
        assert free_cores() < CPU_COUNT or CPU_COUNT == 1
    finally:
        stop.set()
        for th in threads:
            th.join()


def test_eig_threads_set_by_the_user(yale):
    kernels, _ = yale
    model = LSWMKC(n_clusters=15, alpha=8, eig_threads=1, max_iter=2, min_iter=2).fit(kernels)
    assert model.execution_ == "in-process (1 BLAS thread)"
    assert model.eig_threads_.tolist() == [1, 1]


def test_degenerate_kernel_default_equals_reference():
    """A near-constant kernel: the default keeps it as the authors' code does (Octave
    reference: same iterations, weights to 1e-12) and warns naming it."""
    import json
    from pathlib import Path

    from _degenerate import degenerate_yale
    from lswmkc_dask import DegenerateKernelWarning, KernelInputError  # both exported at the top level

    ref = json.loads((Path(__file__).parent / "data" / "degenerate_octave_reference.json").read_text())
    kernels, labels = degenerate_yale()
    for alpha, n_iter, omega in zip(ref["alphas"], ref["iterations"], ref["omega"]):
        with pytest.warns(DegenerateKernelWarning, match=r"kernel 5 is numerically constant.*Kept as the reference"):
            model = LSWMKC(n_clusters=15, alpha=alpha).fit(kernels)
        assert model.n_iter_ == n_iter, alpha
        np.testing.assert_allclose(model.kernel_weights_, omega, atol=1e-12, err_msg=f"alpha={alpha}")
        np.testing.assert_allclose(model.gamma_, ref["gamma"], atol=1e-12)
    with pytest.warns(DegenerateKernelWarning, match="dropped") as caught:
        dropped = LSWMKC(n_clusters=15, alpha=8, degenerate_kernels="drop").fit(kernels)
    assert caught[0].filename == __file__  # attributed to the caller's line, not the package's
    plain = LSWMKC(n_clusters=15, alpha=8).fit(kernels[:5])
    np.testing.assert_allclose(dropped.kernel_weights_, plain.kernel_weights_, atol=1e-12)
    assert list(dropped.kernel_names_) == [f"kernel {p}" for p in range(5)]  # which weight is whose
    assert list(model.kernel_names_) == [f"kernel {p}" for p in range(6)]
    with pytest.raises(KernelInputError, match="kernel 5 is numerically constant"):
        LSWMKC(n_clusters=15, alpha=8, degenerate_kernels="error").fit(kernels)


def test_mat_file_in_the_wrong_order_names_file_and_variable(tmp_path):
    import scipy.io

    path = tmp_path / "stack.mat"
    scipy.io.savemat(path, {"KH": np.stack([np.eye(10)] * 3), "Y": np.arange(10)})  # m x n x n
    with pytest.raises(ValueError, match=rf"variable KH in {re.escape(str(path))} \(MATLAB size \(3, 10, 10\)\).*permute"):
        LSWMKC(3).fit(str(path))


_MALLOC_PROBE = r"""
import json, resource, numpy as np
from lswmkc_dask.engine.allocator import array_malloc

def faults(n=40):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        a = np.ones(500_000)  # 4 MB: above glibc's fixed 128 KiB mmap threshold
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()

outside = faults()
with array_malloc() as raised:
    faults(2)
    inside = faults()
    start = rss()
    held = [np.ones(125_000) for _ in range(24)]  # 24 MB on the heap, under the thresholds
    del held
    kept = rss() - start
dropped = rss() - start
print(json.dumps(dict(raised=raised, outside=outside, inside=inside, kept=kept, dropped=dropped)))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds")
def test_array_malloc_recycles_temporaries_under_dask_malloc_settings():
    """Under Dask's worker setting MALLOC_TRIM_THRESHOLD_=65536 every 4 MB temporary
    faults its pages in again; inside array_malloc() they are recycled, and the memory
    kept meanwhile is given back when the block ends. Without the variable: no change."""
    import json

    run = subprocess.run([sys.executable, "-c", _MALLOC_PROBE], capture_output=True, text=True, timeout=120,
                         env=env(MALLOC_TRIM_THRESHOLD_="65536"))
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["raised"] is True
    assert got["outside"] > 40 * 900  # ~1000 page faults per 4 MB array
    assert got["inside"] < got["outside"] / 10
    assert got["kept"] > 16 * 2**20  # freed, but kept for reuse inside the block
    assert got["dropped"] < 4 * 2**20  # returned at its end

    plain = {k: v for k, v in env().items() if not k.startswith("MALLOC_")}
    run = subprocess.run([sys.executable, "-c", _MALLOC_PROBE], capture_output=True, text=True, timeout=120, env=plain)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["raised"] is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc thresholds")
def test_worker_tasks_recycle_temporaries():
    """On a real Dask worker process (the nanny sets MALLOC_TRIM_THRESHOLD_), our task
    functions run with the raised thresholds: a decorated function faults far less, and
    so does a step of the blockwise runner when it is told to recycle memory (kernels
    cached), under a key that keeps the step's name."""
    from lswmkc_dask.engine.allocator import with_array_malloc
    from lswmkc_dask.engine.cluster import local_cluster
    from lswmkc_dask.engine.runners import DaskRunner

    def faults(n=40):
        import resource

        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(n):
            a = np.ones(500_000)
            del a
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    with local_cluster(n_workers=1, threads_per_worker=1) as client:
        assert client.run(lambda: __import__("os").environ.get("MALLOC_TRIM_THRESHOLD_")).popitem()[1]
        outside = client.submit(faults, pure=False).result()
        inside = client.submit(with_array_malloc(faults), pure=False).result()
        recycled = DaskRunner(client, kernels_in_memory=True).submit(faults)
        mapped = DaskRunner(client, kernels_in_memory=True).map(faults, [(30,)])
        plain = DaskRunner(client, kernels_in_memory=False).submit(faults)
        assert recycled.key.startswith("faults-") and mapped[0].key.startswith("faults-")
        recycled, (mapped,), plain = client.gather([recycled, mapped, plain])
    assert outside > 40 * 900 and plain > 40 * 900
    assert inside < outside / 10
    assert recycled < outside / 10 and mapped < outside / 10

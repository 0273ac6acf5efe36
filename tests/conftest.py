"""Shared fixtures: real LocalClusters (loopback), the YALE data and its reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lswmkc_dask import prepare
from lswmkc_dask.engine.cluster import local_cluster
from lswmkc_dask.datasets import load_yale

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def reference():
    """Outputs of the authors' MATLAB code under Octave on YALE (tests/data)."""
    return json.loads((DATA / "yale_octave_reference.json").read_text())


@pytest.fixture(scope="session")
def yale():
    return load_yale()


@pytest.fixture(scope="session")
def yale_store(yale):
    kernels, labels = yale
    return prepare(kernels, None, labels=labels)


@pytest.fixture(scope="session")
def client():
    """A real LocalCluster with 2 single-threaded worker processes on 127.0.0.1."""
    with local_cluster(n_workers=2) as c:
        yield c


@pytest.fixture(scope="session")
def client1():
    """A real LocalCluster with 1 worker process."""
    with local_cluster(n_workers=1) as c:
        yield c


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# --- test tiers -------------------------------------------------------------------------
# The fast tier (`pytest -m "not integration"`) holds pure functions and in-process fits.
# Every test that starts a subprocess (the `lswmkc` command, `dask scheduler`/`dask
# worker`) or a Dask cluster gets the `integration` marker here, found three ways: the
# cluster fixtures it uses, a module listed below as a whole, or a name it reaches
# (directly or through the module's own helper functions and fixtures) that starts one.

#: fixtures that start a LocalCluster
CLUSTER_FIXTURES = {"client", "client1"}

#: modules whose tests are integration tests as a whole (clusters, faults, TLS, benchmarks)
INTEGRATION_MODULES = {
    "test_bench_scale",  # runs a benchmark script
    "test_certs",  # TLS certificates for real schedulers
    "test_cluster",  # LocalCluster start-up, worker waits, core probing
    "test_faults",  # killed workers and schedulers
    "test_tls",  # real TLS schedulers and workers
    "test_worker_loss",  # workers lost mid-fit
}

#: names whose use starts a process or a cluster
HEAVY_NAMES = {
    "subprocess", "Popen", "check_output", "lswmkc",  # _helpers.lswmkc runs the command
    "local_cluster", "LocalCluster", "Client", "connect", "execution",
    "ProcessPoolExecutor", "multiprocessing",
}

# slow in-process tests moved to the integration tier (measured: `python -m pytest -m "not
# integration" --durations=25`, 2026-11-25: 32, 8.8, 6.8, 6.5, 6.0 and 4.8 s), by node id
# (a parametrised test as a whole, or one of its parameters)
SLOW_TESTS: set[str] = {
    "tests/test_snapshots.py::test_handwritten_sweep_with_snapshots_and_gammas_is_plotted",
    "tests/test_snapshots.py::test_snapshots_written_with_the_run_and_plotted",
    "tests/test_compare.py::test_compare_python_resumes_what_is_missing",
    "tests/test_baselines.py::test_knn_mask_row_sums[handwritten]",
    "tests/test_baselines.py::test_avg_kkm_equals_brute_force[handwritten]",
    # a YALE compare and its figure, the command in process since 2026-11-26 (18 s under load)
    "tests/test_compare.py::test_cli_errors_and_plot",
}

_MODULE_SCAN: dict[str, tuple[dict, set]] = {}


def _module_scan(path):
    """Map each module-level function/method name of ``path`` to the names it references."""
    import ast

    key = str(path)
    if key not in _MODULE_SCAN:
        tree = ast.parse(Path(path).read_text())
        refs = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = set()
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Name):
                        names.add(sub.id)
                    elif isinstance(sub, ast.Attribute):
                        names.add(sub.attr)
                refs.setdefault(node.name, set()).update(names)
        # module-level statements (e.g. `CMD = [sys.executable, ...]`) count for the names they bind
        heavy_globals = set()
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                if names & HEAVY_NAMES:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    heavy_globals |= {t.id for t in targets if isinstance(t, ast.Name)}
        _MODULE_SCAN[key] = (refs, heavy_globals)
    return _MODULE_SCAN[key]


def _is_heavy(item):
    """Whether ``item`` starts a subprocess or a cluster (see the comment above)."""
    module = Path(str(item.fspath)).stem
    if module in INTEGRATION_MODULES or item.nodeid in SLOW_TESTS or item.nodeid.split("[")[0] in SLOW_TESTS:
        return True
    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & CLUSTER_FIXTURES:
        return True
    refs, heavy_globals = _module_scan(item.fspath)
    heavy = HEAVY_NAMES | heavy_globals
    todo = [item.originalname if hasattr(item, "originalname") else item.name, *fixtures]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in refs:
            continue
        seen.add(name)
        if refs[name] & heavy or refs[name] & CLUSTER_FIXTURES:
            return True
        todo.extend(refs[name])
    return False


def pytest_collection_modifyitems(config, items):
    """Mark the tests that start subprocesses or clusters as ``integration``."""
    for item in items:
        if _is_heavy(item):
            item.add_marker(pytest.mark.integration)

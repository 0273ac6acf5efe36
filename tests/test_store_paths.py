"""Store paths on an external cluster whose workers run in another working directory.

A real ``dask scheduler`` and two ``dask worker`` processes (cluster/start-local.sh)
are started with their working directory in one temporary directory; the client (this
process, or a script run in a subprocess) works in another, where the store lies. A
relative store path must reach the workers as an absolute one; a path the workers
cannot read (``/proc/self/cwd/k.zarr`` names the client's directory in the client and
the worker's own directory in a worker: deterministic, and absolute already) must end
the run with one message saying so. The guide's "with a Dask client" script must run
twice in a row.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
from _helpers import CLUSTER, ROOT, alive, env, process_tree

from lswmkc_dask import LSWMKC, prepare
from lswmkc_dask.cli import main
from lswmkc_dask.datasets import load_yale
from lswmkc_dask.io import StoreUnreadableError

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not os.path.isdir("/proc/self/cwd"), reason="needs Linux /proc/self/cwd"),
]

YALE_MAT = ROOT / "lswmkc_dask" / "datasets" / "data" / "YALE_Kmatrix.mat"
#: The path that the workers cannot read: the client's store, named through /proc/self/cwd.
UNREADABLE = "/proc/self/cwd/k.zarr"


def _environ():
    """env() with PYTHONPATH entries made absolute (the workers run in another directory)."""
    out = env()
    if out.get("PYTHONPATH"):
        out["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in out["PYTHONPATH"].split(os.pathsep) if p)
    return out


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A scheduler and 2 workers started in their own directory; the client's directory with k.zarr."""
    workers_dir = tmp_path_factory.mktemp("workers-cwd")
    cluster_dir = tmp_path_factory.mktemp("dask-local")
    client_dir = tmp_path_factory.mktemp("client-cwd")
    kernels, labels = load_yale()
    prepare(kernels, client_dir / "k.zarr", labels=labels)
    procs = []
    try:
        start = subprocess.run(
            ["bash", str(CLUSTER / "start-local.sh"), "-n", "2", "-d", str(cluster_dir), "--timeout", "90",
             "--memory-limit", "2GiB"],
            capture_output=True, text=True, check=False, timeout=150, env=_environ(), cwd=workers_dir,
        )
        pids_file = cluster_dir / "pids"
        pids = [int(x) for x in pids_file.read_text().split()] if pids_file.exists() else []
        procs = process_tree(pids)
        assert start.returncode == 0, f"start-local.sh failed:\n{start.stdout}\n{start.stderr}"
        for p in procs:  # the premise: the workers do not run where the client does
            assert Path(p.cwd()) == workers_dir
        assert not (workers_dir / "k.zarr").exists()
        yield SimpleNamespace(address=start.stdout.strip().splitlines()[-1], client_dir=client_dir,
                              workers_dir=workers_dir)
    finally:
        stop = subprocess.run(["bash", str(CLUSTER / "stop-local.sh"), "-d", str(cluster_dir), "--timeout", "30"],
                              capture_output=True, text=True, check=False, timeout=90, env=_environ())
        left = alive(procs)
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        assert stop.returncode == 0, f"stop-local.sh failed:\n{stop.stdout}\n{stop.stderr}"
        assert not left, f"processes left running: {left}"


def _yale_alpha8(reference):
    i = reference["alphas"].index(8.0)
    return reference["iterations"][i], np.asarray(reference["omega"][i])


def test_relative_store_path_reaches_workers_elsewhere(elsewhere, monkeypatch, reference):
    """`fit k.zarr` from the client's directory: the workers (elsewhere) read the same store."""
    monkeypatch.chdir(elsewhere.client_dir)
    n_iter, omega = _yale_alpha8(reference)
    for given in ("k.zarr", Path("k.zarr")):
        model = LSWMKC(15, alpha=8, client=elsewhere.address, random_state=0).fit(given)
        assert model.n_iter_ == n_iter
        np.testing.assert_allclose(model.kernel_weights_, omega, atol=1e-6)


def test_relative_store_path_cli_fit_and_sweep(elsewhere, monkeypatch, capsys, reference):
    monkeypatch.chdir(elsewhere.client_dir)
    n_iter, omega = _yale_alpha8(reference)
    assert main(["fit", "k.zarr", "--alpha", "8", "--quiet", "--scheduler", elsewhere.address]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^iterations\s+{n_iter} ", out, re.M), out
    weights = np.array(re.search(r"^kernel weights\s+(.*)$", out, re.M).group(1).split(), dtype=float)
    np.testing.assert_allclose(weights, omega, atol=1e-4)
    assert main(["sweep", "k.zarr", "--alphas", "8", "--quiet", "--output", "sw",
                 "--scheduler", elsewhere.address]) == 0
    capsys.readouterr()
    report = (elsewhere.client_dir / "sw" / "runs" / "alpha=8_c=5" / "report.json").read_text()
    assert f'"n_iter": {n_iter}' in report or f'"n_iter":{n_iter}' in report


def test_store_the_workers_cannot_read_is_named(elsewhere, monkeypatch, capsys):
    """The client reads /proc/self/cwd/k.zarr (its own directory); the workers cannot."""
    monkeypatch.chdir(elsewhere.client_dir)
    expected = (f"the workers cannot read {UNREADABLE}; give a path every worker can read "
                "(a shared filesystem or a URL)")
    with pytest.raises(StoreUnreadableError, match=re.escape(expected)):
        LSWMKC(15, alpha=8, client=elsewhere.address).fit(UNREADABLE)
    capsys.readouterr()
    assert main(["fit", UNREADABLE, "--alpha", "8", "--quiet", "--scheduler", elsewhere.address]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"lswmkc: error: {expected}"), err


#: The user guide's page with the "with a Dask client" script (moved there from the README).
CLUSTER_PAGE = ROOT / "docs" / "user-guide" / "dask-cluster.md"


def _readme_client_snippet():
    text = CLUSTER_PAGE.read_text()
    m = re.search(r"<!-- snippet: client-script[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, f"{CLUSTER_PAGE.name} has no client-script snippet"
    return m.group(1)


def test_readme_client_example_runs_twice(elsewhere, tmp_path, reference):
    """The guide's client example (docs/user-guide/dask-cluster.md), as a plain script
    against the real scheduler, twice."""
    code = _readme_client_snippet()
    assert 'Client("tcp://10.0.0.5:8786")' in code
    script = tmp_path / "script.py"
    script.write_text(code.replace("tcp://10.0.0.5:8786", elsewhere.address))
    shutil.copy(YALE_MAT, tmp_path / "my_kernels.mat")
    for attempt in (1, 2):
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240,
                              cwd=tmp_path, env=_environ())
        assert proc.returncode == 0, f"run {attempt}:\n{proc.stderr[-3000:]}"
        assert "'ACC'" in proc.stdout and "Dask" in proc.stdout, proc.stdout
    assert (tmp_path / "my_kernels.zarr").is_dir()

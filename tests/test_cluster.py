"""`lswmkc` against a real external Dask cluster: separate scheduler and worker processes.

The cluster is started by ``cluster/start-local.sh`` (a ``dask scheduler`` and two
``dask worker`` processes on 127.0.0.1) and stopped by ``cluster/stop-local.sh``. The
same alpha sweep run through ``--scheduler ADDRESS``, through ``--scheduler-file`` and
on the command's private LocalCluster must give identical results, equal to the
authors' reference values.
"""

from __future__ import annotations

import json
import py_compile
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
from _helpers import CLUSTER, alive, env, lswmkc, lswmkc_main, process_tree

ALPHAS = (1.0, 8.0, 128.0)
EXPECTED_ITER = {1.0: 20, 8.0: 20, 128.0: 23}  # the authors' code on YALE


def _stop(directory):
    return subprocess.run(
        ["bash", str(CLUSTER / "stop-local.sh"), "-d", str(directory), "--timeout", "30"],
        capture_output=True, text=True, check=False, timeout=90, env=env(),
    )


def _scheduler_state(address):
    """(transition counter, task prefixes, number of workers) of the external scheduler."""
    from distributed import Client

    with Client(address, timeout="20s") as c:
        counter, prefixes = c.run_on_scheduler(
            lambda dask_scheduler: (dask_scheduler.transition_counter, sorted(dask_scheduler.task_prefixes))
        )
        return counter, set(prefixes), len(c.scheduler_info()["workers"])


@pytest.fixture(scope="module")
def script_cluster(tmp_path_factory):
    """A scheduler and 2 workers started by cluster/start-local.sh; stopped at the end."""
    directory = tmp_path_factory.mktemp("dask-local")
    procs = []
    try:
        start = subprocess.run(
            ["bash", str(CLUSTER / "start-local.sh"), "-n", "2", "-d", str(directory), "--timeout", "240",
             "--memory-limit", "2GiB"],
            capture_output=True, text=True, check=False, timeout=300, env=env(),
        )
        pids = [int(x) for x in (directory / "pids").read_text().split()] if (directory / "pids").exists() else []
        procs = process_tree(pids)
        assert start.returncode == 0, f"start-local.sh failed:\n{start.stdout}\n{start.stderr}"
        address = start.stdout.strip().splitlines()[-1]
        yield SimpleNamespace(
            address=address, scheduler_file=directory / "scheduler.json", dir=directory, pids=pids, processes=procs
        )
    finally:
        stop = _stop(directory)
        left = alive(procs)
        for p in left:  # never leave a process behind, even when the script failed
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        assert stop.returncode == 0, f"stop-local.sh failed:\n{stop.stdout}\n{stop.stderr}"
        assert not left, f"processes left running after stop-local.sh: {left}"


@pytest.fixture(scope="module")
def sweeps(script_cluster, tmp_path_factory):
    """The same 3-alpha sweep through --scheduler (in this process), --scheduler-file and a
    LocalCluster (both real `lswmkc` processes)."""
    out = tmp_path_factory.mktemp("sweeps")
    common = ["sweep", "--dataset", "yale", "--alphas", *[f"{a:g}" for a in ALPHAS], "--quiet"]
    before = _scheduler_state(script_cluster.address)
    lswmkc_main(*common, "--output", out / "D1", "--scheduler", script_cluster.address, check=True)
    after_d1 = _scheduler_state(script_cluster.address)
    lswmkc(*common, "--output", out / "D2", "--scheduler-file", script_cluster.scheduler_file)
    after_d2 = _scheduler_state(script_cluster.address)
    lswmkc(*common, "--output", out / "D0", "--n-workers", "2")
    return SimpleNamespace(out=out, states=(before, after_d1, after_d2))


def _report(directory, alpha, c=5):
    return json.loads((Path(directory) / "runs" / f"alpha={alpha:g}_c={c}" / "report.json").read_text())


def test_start_local_cluster_is_loopback_only(script_cluster):
    assert script_cluster.address.startswith("tcp://127.0.0.1:")
    info = json.loads(script_cluster.scheduler_file.read_text())
    assert info["address"] == script_cluster.address
    assert len(script_cluster.pids) == 3  # scheduler + 2 workers (each with its process)
    assert (script_cluster.dir / "address").read_text().strip() == script_cluster.address
    listening = []
    for p in alive(script_cluster.processes):
        for conn in p.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.append(conn.laddr.ip)
    assert listening and set(listening) == {"127.0.0.1"}, listening
    # A second start in the same directory refuses while the cluster runs.
    again = subprocess.run(
        ["bash", str(CLUSTER / "start-local.sh"), "-n", "1", "-d", str(script_cluster.dir)],
        capture_output=True, text=True, check=False, timeout=60, env=env(),
    )
    assert again.returncode == 1 and "still running" in again.stderr


def test_sweep_external_scheduler_equals_local_cluster_and_reference(sweeps, reference):
    (c0, p0, n0), (c1, p1, n1), (c2, _, n2) = sweeps.states
    assert n0 == n1 == n2 == 2
    # The sweeps really ran on the external scheduler (one task per grid point).
    assert "point_task" not in p0 and "point_task" in p1
    assert c0 < c1 < c2
    for alpha in ALPHAS:
        runs = [_report(sweeps.out / d, alpha) for d in ("D0", "D1", "D2")]
        i = reference["alphas"].index(alpha)
        for r in runs:
            assert r["n_iter"] == EXPECTED_ITER[alpha] == reference["iterations"][i]
            assert r["params"]["alpha"] == alpha
            np.testing.assert_allclose(r["kernel_weights"], reference["omega"][i], atol=1e-6)
        w0 = np.asarray(runs[0]["kernel_weights"])
        for r in runs[1:]:
            np.testing.assert_allclose(r["kernel_weights"], w0, rtol=0, atol=1e-10)
            np.testing.assert_allclose(r["objective"], runs[0]["objective"], rtol=1e-10)
    for d in ("D0", "D1", "D2"):
        summary = json.loads((sweeps.out / d / "summary.json").read_text())
        assert [row["alpha"] for row in summary["rows"]] == list(ALPHAS)
        assert (sweeps.out / d / "summary.csv").exists()


def test_blockwise_sweep_through_scheduler(script_cluster, sweeps, reference):
    _, before, _ = _scheduler_state(script_cluster.address)
    out = sweeps.out / "D3"
    lswmkc_main("sweep", "--dataset", "yale", "--alphas", "8", "--mode", "blockwise", "--quiet",
                "--output", out, "--scheduler-file", script_cluster.scheduler_file, check=True)
    _, after, _ = _scheduler_state(script_cluster.address)
    assert "kstar_step" not in before and "kstar_step" in after  # blockwise tasks ran there
    r = _report(out, 8.0)
    task = _report(sweeps.out / "D0", 8.0)
    assert r["n_iter"] == task["n_iter"] == 20
    np.testing.assert_allclose(r["kernel_weights"], task["kernel_weights"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(r["kernel_weights"], reference["omega"][reference["alphas"].index(8.0)], atol=1e-6)
    np.testing.assert_allclose(r["objective"], task["objective"], rtol=1e-9)


def test_quiet_fit_through_scheduler_keeps_stderr_empty(script_cluster, tmp_path, reference):
    # --quiet: nothing on stderr but warnings and errors, on an external cluster too (it
    # printed "Dask: 2 workers at ..."); the report still says where it ran.
    proc = lswmkc("fit", "--dataset", "yale", "--alpha", "8", "--quiet", "--output", tmp_path / "f",
                  "--scheduler", script_cluster.address)
    assert proc.stderr == "", proc.stderr
    report = json.loads((tmp_path / "f" / "report.json").read_text())
    assert report["execution"].startswith("Dask: 2 workers at " + script_cluster.address)
    np.testing.assert_allclose(report["kernel_weights"], reference["omega"][reference["alphas"].index(8.0)], atol=1e-6)


def test_recipes_are_valid(tmp_path):
    for name in ("jobqueue_slurm.py", "make_certs.py"):
        py_compile.compile(str(CLUSTER / name), cfile=str(tmp_path / (name + "c")), doraise=True)
    for name in ("start-local.sh", "stop-local.sh"):
        proc = subprocess.run(["bash", "-n", str(CLUSTER / name)], capture_output=True, text=True, check=False, timeout=30)
        assert proc.returncode == 0, proc.stderr
    text = (CLUSTER / "kubernetes" / "daskcluster.yaml").read_text()
    assert "kind: DaskCluster" in text and "apiVersion: kubernetes.dask.org/v1" in text
    try:
        import yaml
    except ImportError:  # PyYAML is not a dependency; the text checks above must do
        return
    (doc,) = list(yaml.safe_load_all(text))
    spec = doc["spec"]
    sched = spec["scheduler"]
    assert sched["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    assert {p["port"] for p in sched["service"]["ports"]} == {8786, 8787}
    worker = spec["worker"]
    assert worker["replicas"] >= 1
    (container,) = worker["spec"]["containers"]
    args = container["args"]
    assert args[:2] == ["dask", "worker"] and args[args.index("--nthreads") + 1] == "1"
    assert container["resources"]["limits"] and container["volumeMounts"]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in worker["spec"]["volumes"] if "persistentVolumeClaim" in v}
    (pvc,) = list(yaml.safe_load_all((CLUSTER / "kubernetes" / "store-pvc.yaml").read_text()))
    assert pvc["metadata"]["name"] in claims
    (job,) = list(yaml.safe_load_all((CLUSTER / "kubernetes" / "sweep-job.yaml").read_text()))
    assert "tcp://lswmkc-scheduler:8786" in job["spec"]["template"]["spec"]["containers"][0]["args"][-1]


def test_stop_local_leaves_nothing(script_cluster):
    """Runs last in this module: stop-local.sh stops every process start-local.sh made."""
    procs = alive(script_cluster.processes)
    assert len(procs) >= 5  # scheduler, 2 nannies, 2 worker processes
    stop = _stop(script_cluster.dir)
    assert stop.returncode == 0, stop.stderr
    psutil.wait_procs(procs, timeout=10)
    assert not alive(procs)
    assert not (script_cluster.dir / "pids").exists()
    assert not (script_cluster.dir / "scheduler.json").exists()
    # Idempotent: nothing left to stop.
    assert _stop(script_cluster.dir).returncode == 0


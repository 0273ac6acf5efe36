"""Faults: a worker killed mid-sweep or inside the gathered eigendecomposition, and an
interrupted client. Each uses its own real LocalCluster or subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from _helpers import lswmkc_main, terminal_sigint

from lswmkc_dask import LSWMKC, FeatureKernels, prepare
from lswmkc_dask.engine.cluster import local_cluster
from lswmkc_dask.datasets import load_handwritten
from lswmkc_dask.grid.sweep import GridPoint, load_sweep, sweep
from lswmkc_dask.io.run_arrays import run_arrays


#: The grid of the interrupted sweeps: 5 of the reference's 11 alphas (20, 20, 23, 28 and
#: 25 iterations), enough to interrupt after 2 and resume the rest.
RESUME_ALPHAS = (1.0, 8.0, 128.0, 512.0, 1024.0)


def _check_reference(runs, reference, alphas=None):
    """The c = 5 runs of ``alphas`` (default: all the reference's) match the authors' code."""
    for i, a in enumerate(reference["alphas"]):
        if alphas is None or a in alphas:
            assert runs[GridPoint(a, 5)]["n_iter"] == reference["iterations"][i]
            np.testing.assert_allclose(runs[GridPoint(a, 5)]["kernel_weights"], reference["omega"][i], atol=1e-6)


def _kill_worker(client, address):
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)


def test_worker_killed_mid_sweep(yale, reference, tmp_path):
    kernels, labels = yale
    out = tmp_path / "sweep"
    killed = []
    with local_cluster(n_workers=2) as client:

        def killer():
            deadline = time.time() + 120
            while time.time() < deadline:
                done = list((out / "runs").glob("alpha=*")) if (out / "runs").exists() else []
                busy = [a for a, keys in client.processing().items() if keys]
                if len(done) >= 2 and busy:
                    _kill_worker(client, busy[0])
                    killed.append(busy[0])
                    return
                time.sleep(0.02)

        th = threading.Thread(target=killer, daemon=True)
        th.start()
        sweep(kernels, out, labels=labels, n_neighbors=[5], client=client, progress=False)
        th.join(5)
    assert killed, "the worker was never killed"
    _, runs = load_sweep(out)
    assert len(runs) == 11
    _check_reference(runs, reference)


@pytest.fixture(scope="module")
def medium_store(tmp_path_factory):
    views, labels = load_handwritten(("fou", "kar", "zer"))
    n = 1200
    path = tmp_path_factory.mktemp("medium") / "k.zarr"
    return prepare(FeatureKernels([v[:n] for v in views]), path, labels=labels[:n], block_rows=200)


def test_worker_killed_inside_eigendecomposition(medium_store):
    """A worker that dies in the gathered step is replaced; the fit's result is unchanged."""
    params = dict(alpha=16.0, max_iter=6, min_iter=6, random_state=0)
    with local_cluster(n_workers=2) as client:
        calm = LSWMKC(10, client=client, **params).fit(medium_store)
        killed = []

        def killer():
            seen = 0
            deadline = time.time() + 120
            while time.time() < deadline:
                for address, keys in client.processing().items():
                    if any(str(k).startswith("kstar_step") for k in keys):
                        seen += 1
                        if seen == 3:  # the third gathered step: iterations 1-2 are done
                            _kill_worker(client, address)
                            killed.append(address)
                            return
                        while any(str(k).startswith("kstar_step") for k in client.processing().get(address, [])):
                            time.sleep(0.005)
                time.sleep(0.005)

        th = threading.Thread(target=killer, daemon=True)
        th.start()
        hit = LSWMKC(10, client=client, **params).fit(medium_store)
        th.join(5)
    assert killed, "no gathered step was caught running"
    assert hit.n_iter_ == calm.n_iter_ == 6
    np.testing.assert_allclose(hit.kernel_weights_, calm.kernel_weights_, atol=1e-10)
    np.testing.assert_allclose(hit.objective_, calm.objective_, rtol=1e-10)
    np.testing.assert_array_equal(hit.labels_, calm.labels_)


def _check_run_dirs(out, n):
    runs = out / "runs"
    assert not [p for p in runs.iterdir() if p.name.startswith(".")], list(runs.iterdir())
    for d in runs.iterdir():
        report = json.loads((d / "report.json").read_text())
        assert report["n_iter"] >= 20
        assert len((d / "labels.csv").read_text().splitlines()) == n + 1
        z, w = run_arrays(d)
        assert z.shape == (n, n)
        assert w.shape[0] == n
    return sorted(d.name for d in runs.iterdir())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_fit_interrupted_leaves_no_process_or_output(sig, medium_store, tmp_path):
    # `lswmkc fit` of a kernel store on its own cluster of 2 worker processes, signalled once
    # iterations run (the gathered eigendecomposition takes most of each at n = 1200;
    # SIGINT and SIGTERM take different ways out): SIGINT to the whole
    # process group, as Ctrl-C in a terminal sends it (workers included), SIGTERM to the
    # command alone, as `kill` does. It exits 128 + signal with one line and no traceback
    # (none from a worker either), every worker process it started is gone, nothing is
    # written.
    import psutil

    out = tmp_path / "fit"
    cmd = [sys.executable, "-m", "lswmkc_dask.cli", "fit", str(medium_store.location), "--alpha", "1",
           "--n-workers", "2", "--output", str(out)]
    with terminal_sigint():  # (pytest started with `&` ignores SIGINT, and the command would inherit that)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                start_new_session=True)
    try:
        seen = []
        for line in proc.stderr:  # the progress lines come from the client as results arrive
            seen.append(line)
            if line.startswith("iter   2"):
                break
        else:
            pytest.fail(f"the fit ended before its second iteration: {''.join(seen)} {proc.communicate()}")
        children = psutil.Process(proc.pid).children(recursive=True)
        workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
        assert len(workers) == 2, [c.cmdline() for c in children]
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=90)  # what the command printed after the signal
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == "lswmkc: interrupted; nothing was written", err
    assert "Traceback" not in err and "never retrieved" not in err, err
    _, alive = psutil.wait_procs(children, timeout=30)
    for p in alive:
        p.kill()
    assert not alive, [p.cmdline() for p in alive]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_client_interrupted_then_resumed(sig, reference, tmp_path, client):
    out = tmp_path / "sweep"
    grid = len(RESUME_ALPHAS)
    cmd = [sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--output", str(out),
           "--alphas", *[f"{a:g}" for a in RESUME_ALPHAS], "--n-workers", "2", "--mode", "blockwise", "--quiet"]
    with terminal_sigint():  # (pytest started with `&` ignores SIGINT, and the command would inherit that)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if (out / "runs").exists() and len([p for p in (out / "runs").iterdir() if not p.name.startswith(".")]) >= 2:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == (
        "lswmkc: interrupted; finished results are kept, rerun the same command to go on"), err
    assert "Traceback" not in err and "never retrieved" not in err, err
    first = _check_run_dirs(out, 165)
    assert 2 <= len(first) < grid
    # The rerun (the interrupted process is gone) in this process, on the session's
    # LocalCluster of 2 workers rather than a new one: what it reads is the directory.
    args = cmd[3:-1]  # without --quiet: the line saying what is left to run
    at = args.index("--n-workers")
    rerun = lswmkc_main(*args[:at], *args[at + 2:], "--scheduler", client.scheduler.address)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{grid - len(first)} of {grid} grid points to run ({len(first)} done)" in rerun.stderr
    assert len(_check_run_dirs(out, 165)) == grid
    _, runs = load_sweep(out)
    assert len(runs) == grid
    _check_reference(runs, reference, RESUME_ALPHAS)


@pytest.mark.timeout(420)
def test_sweep_survives_losing_a_whole_worker(yale, reference, tmp_path, capsys):
    # A real `dask scheduler` and 2 `dask worker` processes (cluster/start-local.sh). While
    # a blockwise sweep of in-memory kernels runs (their row blocks are scattered: no
    # lineage), one worker's whole process group (nanny and worker, as when its machine
    # dies) is SIGKILLed. The sweep sends the kernels again and reruns its unfinished grid
    # points on the worker left; it used to end in FutureCancelledError ("already
    # forgotten").
    from pathlib import Path

    from _helpers import env
    from distributed import Client

    kernels, labels = yale
    scripts = Path(__file__).resolve().parents[1] / "cluster"
    d = tmp_path / "dl"
    started = subprocess.run(["bash", str(scripts / "start-local.sh"), "-n", "2", "-d", str(d)], capture_output=True,
                             text=True, timeout=180, env=env())
    try:
        assert started.returncode == 0, started.stderr
        out = tmp_path / "sweep"
        killed = []

        def killer():
            deadline = time.time() + 300
            while time.time() < deadline:
                done = list((out / "runs").glob("alpha=*")) if (out / "runs").exists() else []
                if len(done) >= 2:
                    # the worker holding a scattered kernel block that no other worker has
                    held = client.has_what()
                    copies = {}
                    for keys in held.values():
                        for k in keys:
                            copies[k] = copies.get(k, 0) + 1
                    only = [a for a, keys in sorted(held.items())
                            if any("ndarray" in str(k) and copies[k] == 1 for k in keys)]
                    if only:
                        group = os.getpgid(pids[only[0]])  # its nanny's group (start-local.sh)
                        os.killpg(group, signal.SIGKILL)
                        killed.append(group)
                        return
                time.sleep(0.02)

        with Client(scheduler_file=str(d / "scheduler.json"), set_as_default=False) as client:
            pids = client.run(os.getpid)
            th = threading.Thread(target=killer, daemon=True)
            th.start()
            sweep(kernels, out, labels=labels, n_neighbors=[5], client=client, mode="blockwise")
            th.join(5)
            assert len(client.scheduler_info()["workers"]) == 1
    finally:
        subprocess.run(["bash", str(scripts / "stop-local.sh"), "-d", str(d)], capture_output=True, timeout=120,
                       env=env())
    assert killed, "the worker was never killed"
    assert "sweep: a worker was lost" in capsys.readouterr().err
    _, runs = load_sweep(out)
    assert len(runs) == 11
    _check_reference(runs, reference)


_ORPHAN = r"""
import os, signal, time
from lswmkc_dask.engine.cluster import local_cluster


async def stuck():
    time.sleep(300)  # blocks the worker's event loop for 5 minutes


if __name__ == "__main__":
    with local_cluster(n_workers=1) as client:
        (pid,) = client.run(os.getpid).values()
        client.run(stuck, wait=False)
        child = os.fork()
        if child == 0:  # a forked child (a user's fork-based pool, say) holds the fds open, the
            for fd in (1, 2):  # worker's parent-alive pipe included, after the parent is gone
                os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
            time.sleep(60)
            os._exit(0)
        print(pid, child, flush=True)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)  # this process dies before its cluster is closed
"""


@pytest.mark.timeout(120)
def test_worker_does_not_outlive_a_killed_parent(tmp_path):
    # A worker of a LocalCluster that lswmkc started, whose event loop is busy, while the
    # process that started it is SIGKILLed and a fork of it keeps the worker's parent-alive
    # pipe open (Dask's own check): it exits within seconds instead of staying orphaned
    # (as one stayed for over an hour after a test run, re-parented to init).
    import psutil

    script = tmp_path / "orphan.py"
    script.write_text(_ORPHAN)
    # (not subprocess.run: the fork and multiprocessing's resource tracker keep its pipes open)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    worker, child = (int(x) for x in proc.stdout.readline().split())
    assert proc.wait(timeout=60) == -signal.SIGKILL
    try:
        deadline = time.time() + 20
        while psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE:
            if time.time() > deadline:
                os.kill(worker, signal.SIGKILL)
                pytest.fail("the worker process outlived its parent by 20 s")
            time.sleep(0.1)
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


_LOST_HEARTBEAT = r"""
import logging, socket, threading
from lswmkc_dask.engine.cluster import local_cluster


async def lost_heartbeat(dask_worker):
    # The scheduler going away while a heartbeat is under way (as when the process that
    # started the cluster closes it after SIGTERM): a server that accepts and hangs up.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def hang_up():  # every connection Dask's retries make (a bounded loop left later ones waiting in the backlog)
        while True:
            conn, _ = server.accept()
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    from distributed.core import rpc

    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    real = dask_worker.scheduler
    dask_worker.scheduler = rpc(address)
    try:
        await dask_worker.heartbeat()  # Dask's own heartbeat, which logs the failure
    finally:
        dask_worker.scheduler = real
    # Another worker closing while this one sends it data (Dask's own get_data, which
    # logs "failed during get data with ..." and re-raises).
    from distributed.comm import connect, listen

    async def close_at_once(comm):
        await comm.close()

    listener = listen("tcp://127.0.0.1:0", close_at_once)
    await listener.start()
    comm = await connect(listener.contact_address)
    try:
        await dask_worker.get_data(comm, keys=[], who="tcp://127.0.0.1:1")
    except OSError:
        pass
    else:
        raise AssertionError("get_data did not fail against a peer that hung up")
    finally:
        listener.stop()
    logging.getLogger("distributed.worker").error("another worker error, which still shows")
    return "done"


if __name__ == "__main__":
    with local_cluster(n_workers=1) as client:
        print(*client.run(lost_heartbeat).values())
"""


@pytest.mark.timeout(120)
def test_lost_heartbeat_leaves_no_traceback(tmp_path):
    # The CI failure of test_client_interrupted_then_resumed[15]: a worker of an
    # interrupted sweep printed "Failed to communicate with scheduler during heartbeat."
    # and a traceback after the command's last line. Workers of lswmkc's LocalClusters
    # drop that record (the scheduler lives in the process that is closing), and only it.
    script = tmp_path / "heartbeat.py"
    script.write_text(_LOST_HEARTBEAT)
    # A connection attempt gives up within 10 s (Dask's default 30 s, retried, outlasted the limit on a loaded runner).
    environ = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="10s")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done", proc.stdout
    assert "another worker error, which still shows" in proc.stderr, proc.stderr
    assert "heartbeat" not in proc.stderr and "get data" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr

"""Small workers, a lost scheduler and input that used to be accepted.

* Memory: the gathered step on a worker without room for S ends in a MemoryError with
  the figures (no KeyError from reaching into Dask's spill buffer); the message of a
  task that killed its workers names no limit it does not know.
* Scheduler: SIGKILLed mid-sweep or mid-fit (real `dask scheduler`/`dask worker`
  processes), the command ends with one ``lswmkc: error:`` line and exit 1, and an error
  that reaches ``connect`` while the client reconnects ends in one SchedulerLostError,
  without Dask's traceback of a cancelled reconnection; an address
  nobody listens on is refused at once; the advice names only what exists.
* Input: a kernel with a large negative eigenvalue (positive diagonal), a kernel whose
  centring overflows, NaN or huge feature values, ``n_clusters = n``, a stack of zero
  kernels: each refused naming the file, kernel or line and column.

The refusals run `lswmkc` in this process through ``cli.main`` (what the script calls: the
same status and output, without a Python and Dask start-up each); the runs against a real
scheduler run it as a subprocess.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import scipy.io

from _helpers import CLUSTER, env, lswmkc_main, stderr_lines
from lswmkc_dask import LSWMKC, FeatureKernels, HeaderWarning, prepare
from lswmkc_dask.cli import cli_message
from lswmkc_dask.datasets import load_handwritten
from lswmkc_dask.errors import KernelInputError
from lswmkc_dask.io import load_features
from lswmkc_dask.engine import _memory

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


# ----------------------------------------------------------------------------- memory
def _room_beyond_what_is_left(extra):
    """On a worker: ask for ``extra`` bytes more than are left; what happened."""

    try:
        _memory.make_room(_memory.memory_left() + extra)
    except MemoryError as exc:
        return type(exc).__name__, str(exc), exc.limit, exc.resident
    except Exception as exc:  # the original: KeyError('evict(): dictionary is empty')
        return type(exc).__name__, repr(exc), None, None
    return "no error", "", None, None


def test_short_room_on_a_worker_is_a_memory_error_with_figures():
    """A worker (a real process, 1 GB limit) holding data is asked for more room than it
    has: a MemoryError with the need, the limit and what the process holds; the data it
    holds is neither spilled away nor lost (the old code spilled everything, then failed
    with KeyError('evict(): dictionary is empty'))."""
    from lswmkc_dask.engine.cluster import local_cluster

    with local_cluster(n_workers=1, memory_limit="1GB") as client:
        held = client.submit(np.full, 2**20, 3.0, pure=False)
        held.result()
        kind, message, limit, resident = client.submit(_room_beyond_what_is_left, 2**30, pure=False).result()
        assert kind == "WorkerMemoryError", message
        assert limit == 10**9 and resident > 0
        assert re.search(r"this step needs [\d.]+ [GM]iB on one worker, headroom included, but only .* are left under "
                         r"this worker's memory limit of 0\.93 GiB .*; the process holds [\d.]+ MiB now: give the "
                         r"workers more memory", message), message
        assert np.all(held.result() == 3.0)


def test_fit_on_a_worker_too_small_for_s_ends_in_a_memory_error(yale_store):
    """A real worker process whose memory limit (100 MB) is below what it already holds:
    the fit's first gathered step stops with a MemoryError naming the limit and what the
    process holds, not a KeyError from Dask's spill buffer nor a killed worker. (Dask's
    pause and terminate thresholds are off so that the worker runs its tasks at all.)"""
    import dask

    from lswmkc_dask.engine.cluster import local_cluster

    quiet = {"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}
    with dask.config.set(quiet), local_cluster(n_workers=1, memory_limit="100MB") as client:
        with pytest.raises(MemoryError) as info:
            LSWMKC(15, alpha=8.0, client=client, max_iter=3, min_iter=3).fit(yale_store)
    text = str(info.value)
    assert "the gathered step of the fit (the dense S = (Z + Z^T)/2 at n = 165" in text, text
    assert "memory limit of 95.37 MiB" in text and "the process holds" in text, text
    assert "give the workers more memory" in text and "KeyError" not in text


class _NoWorkerLeft:
    """A client whose cluster has no worker left (all were killed): its scheduler says so."""

    class scheduler:  # noqa: N801 - the client's attribute
        @staticmethod
        def identity(n_workers=-1):
            return {"workers": {}}

    @staticmethod
    def sync(func, *args, **kwargs):
        return func(*args, **kwargs)


class KilledWorker(Exception):  # named as distributed's: raise_if_out_of_memory looks at the name
    pass


def test_killed_worker_message_names_no_unknown_limit(yale_store):
    """After every worker died the limit is unknown: it is not printed as 0 MiB; the advice
    maps to the command line (--block-rows) and names cache_kernels only for Python, and
    only where the blocks were cached."""
    from lswmkc_dask.engine.cluster import raise_if_out_of_memory

    exc = KilledWorker("_graph_block-123 died")
    for cached in (False, True):
        with pytest.raises(MemoryError) as info:
            raise_if_out_of_memory(exc, _NoWorkerLeft(), yale_store, 50, cached=cached)
        text = str(info.value)
        assert "0 MiB" not in text and "(unknown now: no worker is left to tell it)" in text, text
        assert ("cache_kernels=False" in text) == cached, text
        line = cli_message(info.value)
        assert "--block-rows 25" in line and "block_rows=" not in line, line
    with pytest.raises(MemoryError) as info:
        raise_if_out_of_memory(KilledWorker("kstar_step-1"), _NoWorkerLeft(), yale_store, 50)
    text = str(info.value)
    assert "limit of 0" not in text and "0.00 GiB" not in text and "unknown now" in text, text
    assert "--eig-driver auto" in cli_message(info.value)


def test_no_worker_advice_names_only_what_exists(monkeypatch, capsys):
    """No worker within LSWMKC_WORKER_TIMEOUT: the advice names that variable, not a
    worker_timeout= keyword or --worker-timeout flag that do not exist."""
    from distributed import Client, LocalCluster

    from lswmkc_dask.cli import build_parser
    from lswmkc_dask.engine.scheduler import wait_for_workers

    monkeypatch.setenv("LSWMKC_WORKER_TIMEOUT", "1")
    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(TimeoutError) as info:
            wait_for_workers(client)
    text = str(info.value)
    assert "LSWMKC_WORKER_TIMEOUT=SECONDS" in text, text
    assert "worker_timeout" not in text and "--worker-timeout" not in text, text
    assert "--worker-timeout" not in build_parser().format_help()


# -------------------------------------------------------------------------- scheduler
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduler_address_nobody_listens_on_is_refused_at_once(tmp_path):
    """Nothing listens at the address: one error line at once ("nothing listens there"),
    not Dask's 30 s connect timeout and its TimeoutError text."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    proc = lswmkc_main("fit", "--dataset", "yale", "--alpha", "8", "--scheduler", address)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("lswmkc: error:")]
    assert proc.returncode == 2, proc.stderr
    assert errors == [f"lswmkc: error: cannot connect to the Dask scheduler at {address}: nothing listens there "
                      f"(connection refused); start the scheduler (`dask scheduler`) or give its address"], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def store_600(tmp_path_factory):
    views, labels = load_handwritten(("fou", "kar"))
    path = tmp_path_factory.mktemp("s600") / "k.zarr"
    prepare(FeatureKernels([v[:600] for v in views]), path, labels=labels[:600], block_rows=100)
    return path


@pytest.mark.timeout(400)
@pytest.mark.parametrize("command", ["sweep", "fit"])
def test_scheduler_killed_mid_run_ends_with_one_error_line(command, store_600, tmp_path):
    """A real `dask scheduler` and `dask worker` (cluster/start-local.sh); the scheduler is
    SIGKILLed once the run has started (its first progress line on stderr): the command
    ends with exit 1 and one `lswmkc: error:` line naming the scheduler's address and
    what to do, no traceback (it used to end in a TimeoutError or KeyError traceback),
    and after the kill no record of Dask's loggers ("Failed to reconnect to scheduler
    ...") beside our lines."""
    d = tmp_path / "dask"
    started = subprocess.run(["bash", str(CLUSTER / "start-local.sh"), "-n", "1", "-d", str(d)],
                             capture_output=True, text=True, timeout=180, env=env())
    try:
        assert started.returncode == 0, started.stderr
        address = started.stdout.strip().splitlines()[-1]
        scheduler_pid = int((d / "pids").read_text().split()[0])
        args = (["sweep", str(store_600), "--alphas", "1", "2", "4", "8", "16", "32", "--max-iter", "30",
                 "--output", str(tmp_path / "sweep")] if command == "sweep" else
                ["fit", str(store_600), "--n-clusters", "10", "--alpha", "16", "--min-iter", "60", "--max-iter", "60"])
        started_line = "sweep: " if command == "sweep" else "iter   1"
        # Dask's client tries to reconnect for its connect timeout (30 s by default): 5 s here.
        proc = subprocess.Popen([sys.executable, "-m", "lswmkc_dask.cli", *args, "--scheduler", address],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s"))
        lines, seen = stderr_lines(proc), []
        try:
            while True:
                line = lines.get(timeout=240)
                assert line is not None, "the run ended before it started: " + "".join(seen)
                seen.append(line)
                if line.startswith(started_line):
                    break
            os.kill(scheduler_pid, signal.SIGKILL)
            rc = proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        after = []
        while (line := lines.get(timeout=30)) is not None:
            after.append(line)
        seen += after
    finally:
        subprocess.run(["bash", str(CLUSTER / "stop-local.sh"), "-d", str(d)], capture_output=True, timeout=120,
                       env=env())
    err = "".join(seen)
    errors = [line for line in seen if line.startswith("lswmkc: error:")]
    assert rc == 1, err
    foreign = [x for x in after if x.strip() and not x.startswith(("lswmkc: ", "iter ", started_line))]
    assert not foreign and "Failed to reconnect" not in err, err
    assert len(errors) == 1, err
    assert f"lost the connection to the Dask scheduler at {address}" in errors[0], err
    assert "restart it and its workers" in errors[0], err
    assert "Traceback" not in err, err


@pytest.mark.timeout(300)
def test_error_while_the_client_reconnects_ends_in_one_scheduler_lost_error(tmp_path, capfd):
    """A real `dask scheduler` and `dask worker`; the scheduler is SIGKILLed and the
    run's error (the CommClosedError of a scatter to it, as a sweep met) reaches
    ``connect`` while the client reconnects: the reconnection is let end, then one
    SchedulerLostError. Closing the client meanwhile made Dask log the cancelled
    reconnection (``distributed.client - ERROR``, CommClosedError and CancelledError in
    some 30 lines) before the sweep's one error line; the fit and the sweep both end
    through ``connect``."""
    import dask
    from distributed.comm import CommClosedError

    from lswmkc_dask.cli._entry import QuietReconnectFailure
    from lswmkc_dask.engine.cluster import connect
    from lswmkc_dask.engine.scheduler import SchedulerLostError
    from lswmkc_dask.errors import ClusterWarning

    d = tmp_path / "dask"
    started = subprocess.run(["bash", str(CLUSTER / "start-local.sh"), "-n", "1", "-d", str(d)],
                             capture_output=True, text=True, timeout=180, env=env())
    quiet = QuietReconnectFailure()  # as the command drops it: its own line says so
    logging.getLogger("distributed.client").addFilter(quiet)
    try:
        assert started.returncode == 0, started.stderr
        address = started.stdout.strip().splitlines()[-1]
        scheduler_pid = int((d / "pids").read_text().split()[0])
        capfd.readouterr()
        with dask.config.set({"distributed.comm.timeouts.connect": "5s"}), \
                warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with pytest.raises(SchedulerLostError, match="did not come back within the client's reconnection time"):
                with connect(scheduler=address) as client:
                    assert client.submit(sum, [1, 2]).result() == 3
                    os.kill(scheduler_pid, signal.SIGKILL)
                    deadline = time.monotonic() + 60
                    while client.status == "running" and time.monotonic() < deadline:  # until it notices
                        time.sleep(0.01)
                    assert client.status == "connecting", client.status
                    raise CommClosedError("in <TCP (closed) ConnectionPool.scatter>: Stream is closed")
    finally:
        logging.getLogger("distributed.client").removeFilter(quiet)
        subprocess.run(["bash", str(CLUSTER / "stop-local.sh"), "-d", str(d)], capture_output=True, timeout=120,
                       env=env())
    err = capfd.readouterr().err
    assert "Traceback" not in err and "distributed.client - ERROR" not in err and "CancelledError" not in err, err
    waits = [str(w.message) for w in said if issubclass(w.category, ClusterWarning)]
    assert any(f"lost the connection to the Dask scheduler at {address}; waiting up to 5 s" in w for w in waits), waits


# ------------------------------------------------------------------------------ input
def _not_psd(n=60, seed=0):
    """A symmetric matrix with unit diagonal and eigenvalues down to about -0.9 x 2 sqrt(n)."""
    rng = np.random.default_rng(seed)
    s = np.triu(rng.choice([-1.0, 1.0], size=(n, n)), 1)
    return np.eye(n) + 0.9 * (s + s.T)


def _gaussian(n=60, seed=1):
    x = np.random.default_rng(seed).normal(size=(n, 4))
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    return np.exp(-d2 / d2.mean())


def test_kernel_with_negative_eigenvalues_is_refused(tmp_path):
    """A positive diagonal (also after centring) but eigenvalues far below zero: refused at
    prepare, naming the file, the kernel and the eigenvalues."""
    bad = _not_psd()
    path = tmp_path / "k.npz"
    np.savez(path, kernels=np.stack([_gaussian(), bad]))
    with pytest.raises(KernelInputError,
                       match=rf"kernel 1 of {re.escape(str(path))} is not positive semidefinite: after centring and "
                             r"normalisation its smallest eigenvalue is -[\d.]+, against [\d.]+ for the largest"):
        prepare(str(path), None)
    proc = lswmkc_main("prepare", path, tmp_path / "k.zarr")
    assert proc.returncode == 2 and "kernel 1 of" in proc.stderr and "not positive semidefinite" in proc.stderr
    assert not (tmp_path / "k.zarr").exists()


def test_shipped_kernels_pass_the_eigenvalue_check(yale):
    """YALE and politicsuk (when the shared data is there) are positive semidefinite to
    rounding: accepted, without a warning."""
    kernels, labels = yale
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare(kernels, None, labels=labels)
        politics = os.path.join(SHARED, "politicsuk_3view_Kmatrix.mat")
        if os.path.exists(politics):
            prepare(politics, None)


def test_eigenvalue_check_skipped_above_its_n_warns(monkeypatch):
    import lswmkc_dask.kernels.features as kernels_module

    monkeypatch.setattr(kernels_module, "PSD_CHECK_MAX_N", 50)
    with pytest.warns(kernels_module.UncheckedKernelWarning, match=r"not checked for positive semidefiniteness \(n = 60"):
        prepare(np.stack([_gaussian(), _not_psd()]), None)


def test_kernel_whose_centring_overflows_is_an_input_error(tmp_path):
    """KH scaled up to 1e301: refused at prepare as an input problem naming the file and
    kernel (it was written, then called a damaged store); no numpy overflow warning."""
    path = tmp_path / "huge.mat"
    k = np.stack([_gaussian(), _gaussian(seed=2) * 1e301])
    scipy.io.savemat(path, {"KH": np.moveaxis(k, 0, 2)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(KernelInputError, match=rf"kernel 1 of {re.escape(str(path))} has entries up to 1e\+301 "
                                                   r"in magnitude.*rescale the kernel"):
            prepare(str(path), None)
    proc = lswmkc_main("fit", path, "--n-clusters", "3")
    assert proc.returncode == 2, proc.stderr
    assert "damaged" not in proc.stderr and "huge.mat has entries up to" in proc.stderr, proc.stderr


def test_nan_feature_is_named_by_file_line_and_column(tmp_path):
    x = np.random.default_rng(0).normal(size=(12, 3)).round(4)
    rows = [",".join(map(str, r)) for r in x]
    rows[4] = rows[4].split(",")[0] + ",nan," + rows[4].split(",")[2]
    path = tmp_path / "v.csv"
    path.write_text("a,b,c\n" + "\n".join(rows) + "\n")
    with pytest.raises(KernelInputError, match=rf"features in {re.escape(str(path))}: line 6, column 2 is nan"):
        load_features(path)
    ok = tmp_path / "w.csv"
    np.savetxt(ok, x, delimiter=",")
    proc = lswmkc_main("prepare", "--features", path, ok, tmp_path / "o.zarr")
    assert proc.returncode == 2 and "v.csv: line 6, column 2 is nan" in proc.stderr, proc.stderr


def test_huge_feature_values_are_refused_naming_file_and_column(tmp_path):
    """Values near 1e308 overflowed numpy's square (a warning) and the fit went on: now
    refused naming the file, line and column, with the advice to rescale."""
    x = np.random.default_rng(0).normal(size=(30, 3))
    x[:, 1] *= 1e307
    path = tmp_path / "big.csv"
    np.savetxt(path, np.column_stack([x, np.arange(30) % 3]), delimiter=",")
    with pytest.raises(KernelInputError, match=rf"features in {re.escape(str(path))}: line 1, column 2 holds "
                                               r".*beyond \+-1e\+150.*divide that feature"):
        load_features(path, label_column=-1)
    with pytest.raises(KernelInputError, match=r"view 0, sample 0, feature 1: .* beyond \+-1e\+150"):
        FeatureKernels([x])
    proc = lswmkc_main("fit", "--features", path, "--label-column", "-1")
    assert proc.returncode == 2 and "big.csv: line 1, column 2 holds" in proc.stderr, proc.stderr
    assert "overflow" not in proc.stderr.replace("overflows float64", ""), proc.stderr


def test_one_cluster_per_sample_is_refused(yale):
    kernels, labels = yale
    n = kernels.shape[1]
    with pytest.raises(ValueError, match=rf"n_clusters must be an integer in \[2, n_samples - 1 = {n - 1}\], got {n} "
                                         r"\(one cluster per sample"):
        LSWMKC(n).fit(kernels)
    proc = lswmkc_main("fit", "--dataset", "yale", "--n-clusters", n)
    assert proc.returncode == 2 and f"--n-clusters must be an integer in [2, n_samples - 1 = {n - 1}]" in proc.stderr


def test_zero_kernels_are_refused(tmp_path):
    path = tmp_path / "zero.npz"
    np.savez(path, kernels=np.zeros((0, 10, 10)))
    with pytest.raises(KernelInputError, match=rf"array 'kernels' in {re.escape(str(path))}: no kernels: the stack "
                                               r"has shape \(0, 10, 10\)"):
        prepare(str(path), None)
    with pytest.raises(KernelInputError, match=r"no kernels"):
        prepare(np.zeros((0, 10, 10)), None)
    proc = lswmkc_main("prepare", path, tmp_path / "z.zarr")
    assert proc.returncode == 2 and "no kernels" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_feature_value_is_named_as_missing(tmp_path):
    """pandas writes NaN as an empty cell (``to_csv``'s ``na_rep=''``): numpy's "could not
    convert string ''" became a missing value named by file, line and column."""
    x = np.random.default_rng(0).normal(size=(12, 3)).round(4)
    rows = [",".join(map(str, r)) for r in x]
    rows[4] = rows[4].split(",")[0] + ",," + rows[4].split(",")[2]  # line 6 under the header
    rows[7] = rows[7].rsplit(",", 1)[0] + ",NA"
    path = tmp_path / "v.csv"
    path.write_text("0,1,2\n" + "\n".join(rows) + "\n")
    with pytest.warns(HeaderWarning), pytest.raises(KernelInputError) as got:
        load_features(path)
    assert str(got.value) == (f"features in {path}: line 6, column 2 (from 1) is empty, a missing value (2 missing "
                              "values in all): every feature value must be a finite number; fill in or leave out "
                              "the samples with missing values")
    # With a label column (cells read as text), and through the command.
    labelled = tmp_path / "l.csv"
    labelled.write_text("a,b,c,label\n" + "\n".join(f"{r},{i % 2}" for i, r in enumerate(rows)) + "\n")
    with pytest.raises(KernelInputError, match=r"l\.csv: line 6, column 2 \(from 1\) is empty, a missing value"):
        load_features(labelled, label_column=-1)
    proc = lswmkc_main("prepare", "--features", labelled, "--label-column", "-1", tmp_path / "o.zarr")
    assert proc.returncode == 2 and "l.csv: line 6, column 2 (from 1) is empty, a missing value" in proc.stderr
    assert "could not convert" not in proc.stderr and not (tmp_path / "o.zarr").exists()
    rows[4] = rows[4].replace(",,", ",NA,")
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(KernelInputError, match=r"line 5, column 2 \(from 1\) is 'NA', a missing value \(2 missing"):
        load_features(path)
    # Rows of different lengths keep numpy's account of them.
    path.write_text("1,2,3\n4,5\n")
    with pytest.raises(KernelInputError, match="the number of columns changed from 3 to 2"):
        load_features(path)

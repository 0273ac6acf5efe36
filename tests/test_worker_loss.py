"""Worker loss is never fatal: in-memory input (scattered blocks, no lineage) with a worker
SIGKILLed mid-fit, every worker of a store-backed fit SIGKILLed and restarted by its
nanny, and a cluster with no worker at all. Real LocalClusters, real SIGKILL; the
killer waits for the fit's own progress events, not for fixed times."""

from __future__ import annotations

import os
import re
import signal
import threading

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, ClusterWarning, FeatureKernels, prepare
from lswmkc_dask.engine.cluster import local_cluster
from lswmkc_dask.datasets import load_handwritten

pytestmark = pytest.mark.timeout(600)


class _Watched(LSWMKC):
    """LSWMKC that sets ``reached`` once iteration ``at`` is done (a test hook only)."""

    at = 5

    def _progress(self, t, obj, change, seconds, restarted=None):
        super()._progress(t, obj, change, seconds, restarted=restarted)
        if restarted is None and t >= self.at:
            self.reached.set()


def _watched(at, **params):
    model = _Watched(**params)
    model.at = at
    model.reached = threading.Event()
    return model


def _worker_pids(client):
    return client.run(os.getpid)


@pytest.fixture(scope="module")
def medium():
    views, labels = load_handwritten(("fou", "kar", "zer"))
    n = 900
    return FeatureKernels([v[:n] for v in views]).rows(0, n), labels[:n]


PARAMS = dict(n_clusters=10, alpha=16.0, max_iter=12, min_iter=12, random_state=0, n_init=5)


def _assert_same(hit, calm):
    assert hit.n_iter_ == calm.n_iter_
    np.testing.assert_allclose(hit.kernel_weights_, calm.kernel_weights_, atol=1e-10)
    np.testing.assert_allclose(hit.objective_, calm.objective_, rtol=1e-10)
    np.testing.assert_array_equal(hit.labels_, calm.labels_)
    assert (abs(hit.affinity_ - calm.affinity_) > 1e-10).nnz == 0


def test_in_memory_fit_survives_a_killed_worker(medium):
    """Array input: its row blocks are scattered (no lineage); one worker is SIGKILLed at
    iteration 5; the fit resumes from its checkpoint and ends with the undisturbed result."""
    kernels, _ = medium
    with local_cluster(n_workers=2) as client:
        calm = LSWMKC(client=client, **PARAMS).fit(kernels)
        model = _watched(5, client=client, **PARAMS)
        pids = _worker_pids(client)
        killed = []

        def killer():
            if model.reached.wait(300):
                # the worker holding a scattered kernel block (data nothing can recompute)
                held = client.has_what()
                victim = next(a for a, keys in sorted(held.items()) if any("ndarray" in str(k) for k in keys))
                os.kill(pids[victim], signal.SIGKILL)
                killed.append(victim)

        th = threading.Thread(target=killer, daemon=True)
        th.start()
        hit = model.fit(kernels)
        th.join(10)
    assert killed
    assert calm.n_restarts_ == 0
    assert hit.n_restarts_ >= 1, "the kill did not reach the fit"
    _assert_same(hit, calm)


def test_store_fit_survives_all_workers_restarted(medium, tmp_path):
    """From a store: both worker processes SIGKILLed at iteration 3 (their nannies start
    new ones); no task stays pinned to a dead worker, the fit completes unchanged."""
    kernels, labels = medium
    store = prepare(kernels, tmp_path / "k.zarr", labels=labels, block_rows=150)
    with local_cluster(n_workers=2) as client:
        calm = LSWMKC(client=client, **PARAMS).fit(store)
        model = _watched(3, client=client, **PARAMS)
        pids = _worker_pids(client)

        def killer():
            if model.reached.wait(300):
                for pid in pids.values():
                    os.kill(pid, signal.SIGKILL)

        th = threading.Thread(target=killer, daemon=True)
        th.start()
        hit = model.fit(store)
        th.join(10)
        assert set(_worker_pids(client).values()).isdisjoint(pids.values())
    # Dask's lineage (store reads) or a restart from the checkpoint: either way the same result.
    _assert_same(hit, calm)


def test_no_worker_ends_with_a_message(yale, tmp_path, monkeypatch):
    """A scheduler without workers: fit and sweep wait the configured time, say what they
    wait for, then raise a clear error (no ZeroDivisionError, no silent hang)."""
    from distributed import Client, LocalCluster

    from lswmkc_dask.grid.sweep import sweep

    kernels, labels = yale
    monkeypatch.setenv("LSWMKC_WORKER_TIMEOUT", "3")
    with LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        with Client(cluster, set_as_default=False) as client:
            for run in (
                lambda: LSWMKC(n_clusters=15, alpha=8, client=client).fit(kernels),
                lambda: sweep(kernels, tmp_path / "sw", labels=labels, alphas=[8], client=client, progress=False),
            ):
                # (a hang is caught by the test's timeout; speed is not asserted here)
                with pytest.warns(ClusterWarning, match="waiting up to 3 s"):  # shown with no logging set up
                    with pytest.raises(TimeoutError, match=r"no Dask worker connected to the scheduler at .* within 3 s"):
                        run()


def test_memory_planned_before_the_fit(tmp_path):
    """The kernels are cached only while the stack is at most half the workers' memory;
    the gathered step's need (n^2 x 8 bytes: S, then half of it and eigenvectors of rank n/2) is checked against the largest worker
    before any work, and a worker too small for it is refused with the figures."""
    import dataclasses

    from lswmkc_dask.engine.runners import plan_memory

    views, labels = load_handwritten(("fou", "kar"))
    small = prepare(FeatureKernels([v[:1500] for v in views]), tmp_path / "s.zarr", labels=labels[:1500])
    with local_cluster(n_workers=2, memory_limit="400MB") as client:
        assert plan_memory(client, small) is True  # 36 MB of kernels
        big = dataclasses.replace(small, n_samples=4000, n_kernels=6)  # 768 MB: the sizes only
        assert plan_memory(client, big) is False
        assert plan_memory(client, big, True) is True
        # Out of core for real: blocks read from the store in every iteration.
        model = LSWMKC(n_clusters=10, alpha=64, client=client, cache_kernels=False, max_iter=3, min_iter=3)
        cached = LSWMKC(n_clusters=10, alpha=64, client=client, max_iter=3, min_iter=3)
        np.testing.assert_allclose(model.fit(small).kernel_weights_, cached.fit(small).kernel_weights_, atol=1e-12)
    with local_cluster(n_workers=1, memory_limit="20MB") as client:
        with pytest.raises(MemoryError, match=r"needs at least 0\.02 GiB on one worker at n = 1500.*--memory-limit"):
            LSWMKC(n_clusters=10, client=client).fit(small)


def test_worker_killed_by_its_memory_limit_is_named(tmp_path):
    """Row blocks too large for the workers' memory limit: the tasks kill their workers;
    the error names the limit and the block size and suggests --block-rows."""
    import dask

    views, labels = load_handwritten()
    store = prepare(FeatureKernels(views), tmp_path / "hw.zarr", labels=labels)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with local_cluster(n_workers=1, memory_limit="230MB") as client:
            with pytest.raises(MemoryError, match=r"memory limit \(\d+ MiB\) against row blocks of \d+ rows .*--block-rows"):
                LSWMKC(n_clusters=10, client=client, cache_kernels=True, block_rows=2000).fit(store)


# --- predict on Dask workers: the scattered fitted state is sent again ------------------


@pytest.fixture(scope="module")
def predict_split():
    """A model fitted in this process on 300 Handwritten samples, 1,200 others to predict
    (in blocks of 8: 150 tasks) and their labels predicted in this process."""
    views, _ = load_handwritten(("fou", "kar", "zer"))
    est = LSWMKC(10, alpha=16, kernel="rbf", max_iter=6, min_iter=3, n_init=5, random_state=0)
    est.fit([v[:300] for v in views])
    new = [v[300:1500] for v in views]
    return est, new, est.predict(new)


def _predict_blocks_killer(client, kills, after):
    """SIGKILL the worker running a predict_block task once ``after`` distinct such tasks
    were seen running, ``kills`` times (each on the worker its nanny started anew); the
    addresses killed go to the returned list, the thread stops with ``stop``."""
    killed, stop = [], threading.Event()

    def killer():
        seen = set()
        while not stop.is_set() and len(killed) < kills:
            for address, keys in client.processing().items():
                seen.update(k for k in keys if str(k).startswith("predict_block"))
                if len(seen) >= after and any(str(k).startswith("predict_block") for k in keys):
                    try:
                        os.kill(client.run(os.getpid, workers=[address])[address], signal.SIGKILL)
                    except (KeyError, OSError):  # gone already: try the next one seen
                        break
                    killed.append(address)
                    seen.clear()
                    break
            stop.wait(0.005)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return killed, stop, thread


def test_predict_survives_a_killed_worker(predict_split, monkeypatch):
    """The fitted state is scattered to the workers (no lineage): the only worker is
    SIGKILLed while blocks run (its nanny starts a new one); the state is sent again, the
    blocks whose results were lost run again, and the labels are those of this process."""
    from lswmkc_dask import predict as predict_module

    est, new, expected = predict_split
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 8 * 300 * 10 * 8)  # 8 samples a block
    with local_cluster(n_workers=1) as client:
        est.client = client
        try:
            killed, stop, thread = _predict_blocks_killer(client, kills=1, after=12)
            with pytest.warns(ClusterWarning, match=r"predict: a Dask worker was lost .*the fitted state was sent "
                                                    r"again and \d+ blocks of new samples run again \(\d+ done\)"):
                labels = est.predict(new)
            stop.set()
            thread.join(10)
        finally:
            est.client = None
    assert killed, "the worker was never killed"
    np.testing.assert_array_equal(labels, expected)


def test_predict_ends_with_one_line_when_workers_keep_dying(predict_split, monkeypatch):
    """Every worker that runs a block is SIGKILLed: after MAX_RESENDS resends the predict
    ends with WorkersLostError, one line that says what happened and what to look at."""
    from lswmkc_dask import predict as predict_module
    from lswmkc_dask.predict import MAX_RESENDS, WorkersLostError

    est, new, _ = predict_split
    monkeypatch.setattr(predict_module, "BLOCK_BYTES", 8 * 300 * 10 * 8)
    with local_cluster(n_workers=1) as client:
        est.client = client
        try:
            killed, stop, thread = _predict_blocks_killer(client, kills=MAX_RESENDS + 1, after=1)
            with pytest.warns(ClusterWarning), pytest.raises(WorkersLostError) as raised:
                est.predict(new)
            stop.set()
            thread.join(10)
        finally:
            est.client = None
    message = str(raised.value)
    assert len(killed) == MAX_RESENDS + 1
    assert "\n" not in message
    assert re.match(rf"predict: Dask workers died {MAX_RESENDS + 1} times while the new samples were predicted "
                    r"\(the last: (FutureCancelledError|KilledWorker).*\); nothing is returned: look at the workers' logs", message)

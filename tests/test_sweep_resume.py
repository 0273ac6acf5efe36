"""Resuming sweep and compare directories safely: only on the same data, with one run
directory per distinct alpha, through a symbolic link, and after a process was killed
outright (``kill -9``) while it replaced a directory.

Small synthetic stores (30 samples, 3 kernels) and YALE with a few iterations keep the
tests quick; the sweeps run in this process unless the test is about the command.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from _helpers import env, lswmkc_main

from lswmkc_dask import prepare
from lswmkc_dask.grid.compare import compare, load_compare
from lswmkc_dask.io.atomic import ForeignOutputError, write_marker
from lswmkc_dask.io.locks import DirectoryLock
from lswmkc_dask.io.ownership import LOCK_NAME
from lswmkc_dask.grid.sweep import GridPoint, load_sweep, sweep

QUICK = {"max_iter": 3, "n_init": 2, "progress": False}


def _kernels(seed, n_per=10):
    """Three RBF kernels of three Gaussian blobs (n = 3 * n_per) and their labels."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(c, 1.0, (n_per, 4)) for c in (0.0, 3.0, 6.0)])
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    return np.stack([np.exp(-d2 / g) for g in (1.0, 4.0, 16.0)]), np.repeat([0, 1, 2], n_per)


def _hidden(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _runs(directory):
    return sorted(p.name for p in (directory / "runs").iterdir())


# -- 1. resume only on the same data -------------------------------------------------
@pytest.mark.timeout(120)
def test_resume_refused_on_other_kernels_at_the_same_path_and_allowed_on_a_moved_store(tmp_path, capsys):
    k1, y = _kernels(1)
    k2, _ = _kernels(2)
    store, out = tmp_path / "s.zarr", tmp_path / "sw"
    sweep(prepare(k1, store, labels=y), out, alphas=[1, 2], **QUICK)  # the store as returned, then by path
    before = (out / "summary.json").read_text()
    prepare(k2, store, labels=y, overwrite=True)  # other kernels, the same path
    with pytest.raises(ValueError, match="was swept on other data") as err:
        sweep(str(store), out, alphas=[1, 2, 4], **QUICK)
    msg = str(err.value)
    assert str(out) in msg and "s.zarr then" in msg and "s.zarr now" in msg and "overwrite=True" in msg
    assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5"] and (out / "summary.json").read_text() == before
    # The first kernels again, at another path: the same data, so the sweep resumes.
    prepare(k1, tmp_path / "moved.zarr", labels=y)
    capsys.readouterr()
    sweep(str(tmp_path / "moved.zarr"), out, alphas=[1, 2, 4], **dict(QUICK, progress=True))
    assert "1 of 3 grid points to run (2 done)" in capsys.readouterr().err
    assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5", "alpha=4_c=5"]


@pytest.mark.timeout(120)
def test_resume_refused_on_other_labels_of_an_array(tmp_path):
    kernels, y = _kernels(1)
    out = tmp_path / "sw"
    sweep(kernels, out, labels=y, alphas=[1], **QUICK)
    with pytest.raises(ValueError, match="other data .*label fingerprint"):
        sweep(kernels, out, labels=y[::-1].copy(), alphas=[1, 2], **QUICK)
    assert _runs(out) == ["alpha=1_c=5"]
    sweep(kernels.copy(), out, labels=y, alphas=[1, 2], **QUICK)  # the same content: resumed
    assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5"]


@pytest.mark.timeout(180)
def test_cli_sweep_on_other_kernels_prepared_at_the_same_path(tmp_path):
    k1, y = _kernels(1)
    k2, _ = _kernels(2)
    np.savez(tmp_path / "k1.npz", kernels=k1, labels=y)
    np.savez(tmp_path / "k2.npz", kernels=k2, labels=y)
    store, out = tmp_path / "s.zarr", tmp_path / "sw"
    quick = ["--max-iter", "3", "--n-init", "2", "--quiet", "--output", out]
    # (all through cli.main in this process: a store this small is swept in the command's own process)
    assert lswmkc_main("prepare", tmp_path / "k1.npz", store).returncode == 0
    assert lswmkc_main("sweep", store, "--alphas", "1", "2", *quick).returncode == 0
    assert lswmkc_main("prepare", tmp_path / "k2.npz", store, "--overwrite").returncode == 0
    proc = lswmkc_main("sweep", store, "--alphas", "1", "2", "4", *quick)
    assert proc.returncode == 2, proc.stderr
    assert f"lswmkc: error: {out} was swept on other data (kernel fingerprint" in proc.stderr
    assert "or --overwrite to replace it" in proc.stderr and "Traceback" not in proc.stderr
    assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5"]
    assert lswmkc_main("sweep", store, "--alphas", "1", "2", "4", *quick, "--overwrite").returncode == 0
    assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5", "alpha=4_c=5"]


@pytest.mark.timeout(120)
def test_compare_refused_on_other_kernels(tmp_path):
    k1, y = _kernels(1)
    k2, _ = _kernels(2)
    store, out = tmp_path / "s.zarr", tmp_path / "cmp"
    prepare(k1, store, labels=y)
    compare(str(store), out, methods=["avg-kkm"], n_init=2, progress=False)
    prepare(k2, store, labels=y, overwrite=True)
    with pytest.raises(ValueError, match="was compared on other data"):
        compare(str(store), out, methods=["avg-kkm", "knn"], taus=[0.5], n_init=2, progress=False)
    assert _runs(out) == ["avg-kkm"]
    prepare(k1, tmp_path / "moved.zarr", labels=y)  # the same data elsewhere: resumed
    compare(str(tmp_path / "moved.zarr"), out, methods=["avg-kkm", "knn"], taus=[0.5], n_init=2, progress=False)
    assert _runs(out) == ["avg-kkm", "knn_tau=0.5"]


# -- 2. alphas equal to 6 significant digits -----------------------------------------
@pytest.mark.timeout(120)
def test_alphas_equal_to_six_digits_get_their_own_run_directories(yale, tmp_path):
    kernels, labels = yale
    out = tmp_path / "sw"
    summary = sweep(kernels, out, labels=labels, alphas=[8.0, 8.000001], **QUICK)
    assert _runs(out) == ["alpha=8.000001_c=5", "alpha=8_c=5"]
    assert sorted(r["alpha"] for r in summary["rows"]) == [8.0, 8.000001]
    config, runs = load_sweep(out)
    assert sorted(p.alpha for p in runs) == [8.0, 8.000001]
    assert all((out / "runs" / p.name / "report.json").is_file() for p in runs)
    summary = sweep(kernels, out, labels=labels, alphas=[8.0, 8.000001], overwrite=True, **QUICK)
    assert len(summary["rows"]) == 2 and _runs(out) == ["alpha=8.000001_c=5", "alpha=8_c=5"]
    if pytest.importorskip("matplotlib"):
        from lswmkc_dask.plots import plot_sweep

        written = plot_sweep(out, alpha=8.000001)
        assert written and all(p.is_file() for p in written)


@pytest.mark.timeout(120)
def test_compare_taus_equal_to_six_digits_and_repeated(tmp_path):
    kernels, y = _kernels(1)
    out = tmp_path / "cmp"
    rows = compare(kernels, out, labels=y, methods=["knn"], taus=[0.5, 0.5000001, 0.5], n_init=2, progress=False)
    assert _runs(out) == ["knn_tau=0.5", "knn_tau=0.5000001"] and rows[0]["runs"] == 2
    _, runs, _ = load_compare(out)
    assert sorted(runs) == ["knn_tau=0.5", "knn_tau=0.5000001"]


def test_run_directory_of_an_older_rounded_name_is_still_read(tmp_path):
    # An older version named alpha=1/3 "alpha=0.333333_c=5": load_sweep keeps the name it has.
    run = tmp_path / "sw" / "runs" / "alpha=0.333333_c=5"
    run.mkdir(parents=True)
    (tmp_path / "sw" / "sweep.json").write_text("{}")
    (run / "report.json").write_text(json.dumps({"params": {"alpha": 1 / 3, "n_neighbors": 5}}))
    _, runs = load_sweep(tmp_path / "sw")
    (point,) = runs
    assert point == GridPoint(1 / 3, 5) and point.name == "alpha=0.333333_c=5"
    assert GridPoint(1 / 3, 5).name == "alpha=0.3333333333333333_c=5" and GridPoint(8.0, 5).name == "alpha=8_c=5"


# -- 3. what a process killed outright left behind ----------------------------------
def _stale_sibling(path, tag, *, marker=True, held=False):
    """A hidden sibling made as RunDirectory.commit makes one; its lock free (the process died) unless held."""
    d = path.with_name(f".{path.name}.lswmkc-{tag}")
    d.mkdir()
    lock = DirectoryLock(d).acquire() if held else None
    if not held:  # what a process that died leaves: its record (this live PID, even), no flock held
        (d / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "x"}))
    if marker:
        write_marker(d, "sweep")
        (d / "runs").mkdir()
    else:
        (d / "thesis.txt").write_text("not lswmkc's")
    return d, lock


@pytest.mark.timeout(120)
def test_stale_siblings_and_temporaries_are_removed_by_the_next_run(tmp_path):
    kernels, y = _kernels(1)
    out = tmp_path / "sw"
    sweep(kernels, out, labels=y, alphas=[1], **QUICK)
    new, _ = _stale_sibling(out, "new-0123abcd")
    old, _ = _stale_sibling(out, "old-89abcdef")
    busy, lock = _stale_sibling(out, "new-feedbeef", held=True)  # a live process holds it
    foreign, _ = _stale_sibling(out, "new-00000000", marker=False)
    (foreign / LOCK_NAME).unlink()
    (foreign / "data.csv").write_text("1,2\n")  # not written by lswmkc: never removed
    (out / "runs" / ".alpha=2_c=5.tmp-0123abcd").mkdir()
    (out / "runs" / ".alpha=2_c=5.tmp-0123abcd" / "report.json").write_text("{")
    (out / ".summary.json.old-0123abcd").write_text("{}")
    (out / ".summary.csv.tmp-4567cdef").write_text("alpha")
    try:
        sweep(kernels, out, labels=y, alphas=[1, 2], **QUICK)
        assert not new.exists() and not old.exists()
        assert busy.is_dir() and foreign.is_dir() and (foreign / "data.csv").is_file()
        assert _runs(out) == ["alpha=1_c=5", "alpha=2_c=5"]
        assert _hidden(out) == [".lswmkc-output"]
    finally:
        lock.release()


@pytest.mark.timeout(300)
def test_sweep_overwrite_killed_outright_leaves_nothing_after_the_next_run(tmp_path):
    # kill -9 while `sweep --overwrite` replaces a directory: its hidden sibling (the new
    # directory being built, or the old one swapped out) is removed by the next run.
    out = tmp_path / "sw"
    assert lswmkc_main("sweep", "--dataset", "yale", "--alphas", "1", "--max-iter", "2", "--n-init", "2", "--quiet",
                       "--output", out).returncode == 0
    cmd = [sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--alphas",
           *[str(2.0**k) for k in range(1, 11)], "--n-init", "2", "--output", str(out), "--overwrite", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        deadline = time.monotonic() + 180
        while not [n for n in _hidden(tmp_path) if n.startswith(".sw.lswmkc-")]:  # the replacement has begun
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sweep never began to replace its directory"
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert [n for n in _hidden(tmp_path) if n.startswith(".sw.lswmkc-")]  # left behind by the kill
    assert lswmkc_main("sweep", "--dataset", "yale", "--alphas", "4", "--max-iter", "2", "--n-init", "2", "--quiet",
                       "--output", out, "--overwrite").returncode == 0  # (in this process: the killed one is the command)
    assert _hidden(tmp_path) == [] and _runs(out) == ["alpha=4_c=5"]
    assert _hidden(out) == [".lswmkc-output"]


# -- 4. an output that is a symbolic link -------------------------------------------
@pytest.mark.timeout(120)
def test_sweep_through_a_symbolic_link_replaces_and_resumes_its_target(tmp_path):
    kernels, y = _kernels(1)
    real, link = tmp_path / "real", tmp_path / "link"
    sweep(kernels, real, labels=y, alphas=[1], **QUICK)
    link.symlink_to(real)
    sweep(kernels, link, labels=y, alphas=[2], overwrite=True, **QUICK)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert _runs(real) == ["alpha=2_c=5"]
    assert _hidden(tmp_path) == [] and _hidden(real) == [".lswmkc-output"]
    sweep(kernels, link, labels=y, alphas=[2, 4], **QUICK)  # resumed through the link
    assert link.is_symlink() and _runs(real) == ["alpha=2_c=5", "alpha=4_c=5"]
    assert _hidden(tmp_path) == []
    nowhere = tmp_path / "nowhere"
    nowhere.symlink_to(tmp_path / "missing")
    with pytest.raises(ForeignOutputError, match="is a symbolic link to .*missing, which does not exist"):
        sweep(kernels, nowhere, labels=y, alphas=[1], **QUICK)
    assert nowhere.is_symlink() and not (tmp_path / "missing").exists()


@pytest.mark.timeout(120)
def test_compare_through_a_symbolic_link_replaces_its_target(tmp_path):
    kernels, y = _kernels(1)
    real, link = tmp_path / "real", tmp_path / "link"
    compare(kernels, real, labels=y, methods=["avg-kkm"], n_init=2, progress=False)
    link.symlink_to(real)
    compare(kernels, link, labels=y, methods=["knn"], taus=[0.5], n_init=2, progress=False, overwrite=True)
    assert link.is_symlink() and _runs(real) == ["knn_tau=0.5"]
    assert _hidden(tmp_path) == []


# -- 5. the output before the input; kernel names in the run reports -----------------
@pytest.mark.timeout(60)
def test_compare_checks_its_output_before_reading_the_kernels(tmp_path, monkeypatch):
    import lswmkc_dask.grid.compare as compare_module

    def read(*args, **kwargs):
        raise AssertionError("the kernels were read before the output was checked")

    monkeypatch.setattr(compare_module, "open_kernels", read)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.csv").write_text("1,2\n")
    with pytest.raises(ForeignOutputError, match="was not written by lswmkc"):
        compare(tmp_path / "kernels.npz", theirs, n_clusters=2, methods=["avg-kkm"], progress=False)


@pytest.mark.timeout(60)
def test_sweep_run_reports_name_the_kernels(tmp_path):
    kernels, y = _kernels(1)
    store = prepare(kernels, tmp_path / "s.zarr", labels=y, kernel_names=["narrow", "medium", "wide"])
    sweep(store, tmp_path / "sw", alphas=[1, 2], **QUICK)
    for name in ("alpha=1_c=5", "alpha=2_c=5"):
        report = json.loads((tmp_path / "sw" / "runs" / name / "report.json").read_text())
        assert report["kernel_names"] == ["narrow", "medium", "wide"]
    assert json.loads((tmp_path / "sw" / "sweep.json").read_text())["kernel_names"] == ["narrow", "medium", "wide"]

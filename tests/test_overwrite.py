"""--overwrite cannot destroy: only lswmkc's own outputs, only once the new run has a result;
a sweep directory is locked while a sweep runs in it.

The runs that are watched, signalled or killed (the replacing sweep, the lock's holder)
and the one against an unreachable scheduler run the `lswmkc` command as a user does (a
subprocess); the others, on YALE (which the command runs in its own process, no
cluster), run the same command in this process through ``cli.main`` (what the
``lswmkc`` script calls: the same exit status and output, without a Python and Dask
start-up each).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from _helpers import env, lswmkc, lswmkc_main

QUICK = ["--max-iter", "2", "--n-init", "2"]
#: An address where no scheduler listens; a short connect timeout keeps the test quick.
NOWHERE = "tcp://127.0.0.1:9"
FAST_FAIL = env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="3s")


def _snapshot(root):
    """{relative path: bytes or None for directories} of everything under ``root``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def _old_sweep(path, alphas=("1", "512")):
    assert lswmkc_main("sweep", "--dataset", "yale", "--alphas", *alphas, *QUICK, "--quiet", "--output", path).returncode == 0
    assert json.loads((path / ".lswmkc-output").read_text())["kind"] == "sweep"


def _no_hidden_siblings(parent):
    left = [p.name for p in parent.iterdir() if p.name.startswith(".")]
    assert not left, left


@pytest.mark.timeout(300)
def test_unreachable_scheduler_deletes_nothing(tmp_path):
    # A sweep directory of lswmkc with the user's thesis.txt put into it: --overwrite with a
    # scheduler that cannot be reached fails before the first result, so nothing is deleted.
    sw = tmp_path / "sw"
    _old_sweep(sw)
    (sw / "thesis.txt").write_text("three years of work")
    before = _snapshot(tmp_path)
    proc = lswmkc("sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", sw, "--overwrite",
                  "--scheduler", NOWHERE, check=False, environ=FAST_FAIL)
    assert proc.returncode == 2, proc.stderr
    assert "cannot connect" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(tmp_path) == before
    # A directory that is not lswmkc's, holding thesis.txt: refused at once, with or without a scheduler.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("three years of work")
    before = _snapshot(tmp_path)
    proc = lswmkc_main("sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", mine, "--overwrite",
                       "--scheduler", NOWHERE)
    assert proc.returncode == 2
    assert f"{mine} was not written by lswmkc (no .lswmkc-output marker)" in proc.stderr
    assert "cannot connect" not in proc.stderr  # refused before connecting
    assert _snapshot(tmp_path) == before


@pytest.mark.timeout(300)
def test_working_directory_is_never_replaced(tmp_path, monkeypatch):
    work = tmp_path / "work"
    _old_sweep(work)  # even a directory lswmkc wrote
    (work / "notes.txt").write_text("keep me")
    (work / "sub").mkdir()
    before = _snapshot(tmp_path)
    monkeypatch.chdir(work)
    for args in (
        ["sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", ".", "--overwrite"],
        ["fit", "--dataset", "yale", *QUICK, "--output", ".", "--overwrite"],
        ["prepare", "--dataset", "yale", ".", "--overwrite"],
    ):
        proc = lswmkc_main(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "refusing to replace output .: it is the working directory" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    # An ancestor of the working directory, and the home directory, are refused as well.
    monkeypatch.chdir(work / "sub")
    proc = lswmkc_main("sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", "..", "--overwrite")
    assert proc.returncode == 2 and "it holds the working directory" in proc.stderr, proc.stderr
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(work))
    proc = lswmkc_main("fit", "--dataset", "yale", *QUICK, "--output", work, "--overwrite")
    assert proc.returncode == 2 and "it is the home directory" in proc.stderr, proc.stderr
    assert _snapshot(tmp_path) == before


@pytest.mark.timeout(300)
def test_foreign_directory_refused_even_with_overwrite(tmp_path):
    foreign = tmp_path / "results"
    foreign.mkdir()
    (foreign / "thesis.txt").write_text("three years of work")
    a_file = tmp_path / "thesis.txt"
    a_file.write_text("the only copy")
    before = _snapshot(tmp_path)
    runs = [
        ["sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", foreign],
        ["sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", foreign, "--overwrite"],
        ["fit", "--dataset", "yale", *QUICK, "--output", foreign, "--overwrite"],
        ["prepare", "--dataset", "yale", foreign, "--overwrite"],
    ]
    for args in runs:
        proc = lswmkc_main(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert f"{foreign} was not written by lswmkc (no .lswmkc-output marker); remove it yourself" in proc.stderr
        assert "Traceback" not in proc.stderr
    for args in (["fit", "--dataset", "yale", *QUICK, "--output", a_file, "--overwrite"],
                 ["prepare", "--dataset", "yale", a_file, "--overwrite"],
                 ["sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", a_file, "--overwrite"]):
        proc = lswmkc_main(*args)
        assert proc.returncode == 2 and f"output {a_file} is a file" in proc.stderr, (args, proc.stderr)
    assert _snapshot(tmp_path) == before


@pytest.mark.timeout(300)
def test_own_outputs_replaced_with_overwrite(tmp_path):
    # fit and prepare replace their own outputs (marker / kernel store) once the new one is complete.
    fit_dir, store = tmp_path / "fit", tmp_path / "k.zarr"
    assert lswmkc_main("fit", "--dataset", "yale", *QUICK, "--alpha", "1", "--quiet", "--output", fit_dir).returncode == 0
    assert json.loads((fit_dir / ".lswmkc-output").read_text())["kind"] == "fit"
    assert lswmkc_main("fit", "--dataset", "yale", *QUICK, "--alpha", "4", "--quiet", "--output", fit_dir,
                       "--overwrite").returncode == 0
    assert json.loads((fit_dir / "report.json").read_text())["params"]["alpha"] == 4.0
    assert lswmkc_main("prepare", "--dataset", "yale", store).returncode == 0
    assert json.loads((store / ".lswmkc-output").read_text())["kind"] == "kernel-store"
    (store / ".lswmkc-output").unlink()  # a store of an older lswmkc: its zarr.json says what it is
    assert lswmkc_main("prepare", "--dataset", "yale", store, "--block-rows", "50", "--overwrite").returncode == 0
    assert (store / ".lswmkc-output").is_file()
    _no_hidden_siblings(tmp_path)


@pytest.mark.timeout(300)
def test_own_sweep_replaced_only_after_first_result(tmp_path):
    sw = tmp_path / "sw"
    _old_sweep(sw)
    (sw / "thesis.txt").write_text("inside lswmkc's directory: replaced with it")
    old_runs = {"alpha=1_c=5", "alpha=512_c=5"}
    new_runs = {"alpha=2_c=5", "alpha=4_c=5", "alpha=8_c=5"}
    cmd = [sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--alphas", "2", "4", "8",
           "--output", str(sw), "--overwrite", "--quiet"]
    seen = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        while proc.poll() is None:  # watch the directory for the whole run
            try:
                names = {n for n in os.listdir(sw / "runs") if not n.startswith(".")}
            except FileNotFoundError:  # never: the path always names the old or the new directory
                names = "missing"
            seen.append(frozenset(names) if names != "missing" else names)
            time.sleep(0.002)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    # Every observation: the old results whole, or at least one new result - never nothing, never a mix.
    bad = [s for s in seen if not (s == old_runs or (s and s <= new_runs))]
    assert not bad, bad[:5]
    assert seen[0] == old_runs and any(s != old_runs for s in seen)  # both states were watched
    assert {n for n in os.listdir(sw / "runs")} == new_runs
    assert not (sw / "thesis.txt").exists()
    assert json.loads((sw / "sweep.json").read_text())["max_iter"] == 100
    assert not (sw / ".lswmkc.lock").exists()
    _no_hidden_siblings(tmp_path)


def _wait_for_lock(lock, proc, timeout=120):
    """Poll until ``lock`` holds the PID of ``proc`` (the sweep has taken the directory)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            info = json.loads(lock.read_text() or "null")
        except (FileNotFoundError, ValueError):
            info = None
        if info and info.get("pid") == proc.pid:
            return info
        time.sleep(0.005)
    raise AssertionError(f"no lock {lock} after {timeout} s")


@pytest.mark.timeout(300)
def test_concurrent_sweep_is_told_the_directory_is_in_use(tmp_path):
    sw = tmp_path / "sw"
    # 3 alphas x 2 neighbourhoods (seconds of fits after the lock is taken; SIGSTOP comes within 5 ms)
    cmd = [sys.executable, "-m", "lswmkc_dask.cli", "sweep", "--dataset", "yale", "--alphas", "1", "8", "64",
           "--n-neighbors", "4", "5", "--output", str(sw), "--quiet"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        info = _wait_for_lock(sw / ".lswmkc.lock", first)
        first.send_signal(signal.SIGSTOP)  # it certainly still runs while the others try
        assert info["host"] == socket.gethostname()
        want = f"{sw} is in use by PID {first.pid} on {info['host']} (started {info['started']})"
        before = _snapshot(sw)
        for args in (cmd[3:], [*cmd[3:], "--overwrite"], ["fit", "--dataset", "yale", *QUICK, "--output", sw,
                                                           "--overwrite"]):
            proc = lswmkc_main(*args)
            assert proc.returncode == 2, (args, proc.stderr)
            assert want in proc.stderr, proc.stderr
            assert "overwrite" not in proc.stderr and "Traceback" not in proc.stderr
        assert _snapshot(sw) == before
        # The first sweep dies without releasing its lock: the lock of a dead process is taken
        # over, and the rerun resumes what it had finished.
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        rerun = lswmkc_main(*cmd[3:])
        assert rerun.returncode == 0, rerun.stderr
        assert "wrote" in rerun.stdout
        runs = [p for p in (sw / "runs").iterdir() if not p.name.startswith(".")]
        assert len(runs) == 6 and not (sw / ".lswmkc.lock").exists()
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            first.kill()
            first.communicate(timeout=60)


def test_sweep_killed_while_setting_up_its_directory_is_started_again(tmp_path):
    """A sweep killed after it marked its directory but before sweep.json was renamed into
    place left no result: the rerun starts it (no --overwrite needed) and removes the
    half-written file."""
    from lswmkc_dask.io.output import write_marker

    sw = tmp_path / "sw"
    sw.mkdir()
    write_marker(sw, "sweep")
    (sw / "runs").mkdir()
    (sw / ".sweep.json.tmp-0dead").write_text('{"n_clu')
    proc = lswmkc_main("sweep", "--dataset", "yale", "--alphas", "1", "--n-neighbors", "5", "--max-iter", "3",
                       "--output", str(sw), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout
    assert json.loads((sw / "sweep.json").read_text())["n_samples"] == 165
    assert not list(sw.glob(".*.tmp-*"))
    assert len([p for p in (sw / "runs").iterdir() if not p.name.startswith(".")]) == 1
    # A directory of ours with a finished run but no sweep.json is still refused.
    (sw / "sweep.json").unlink()
    proc = lswmkc_main("sweep", "--dataset", "yale", "--alphas", "1", "--n-neighbors", "5", "--output", str(sw))
    assert proc.returncode == 2 and "is not a sweep directory" in proc.stderr

"""Nothing outside a command's own outputs is written or deleted.

* A ``.lswmkc.lock`` (or marker) planted as a symbolic link is refused, naming it; the
  link and what it points to are left as they were.
* No command writes inside a kernel store or inside its input (``lswmkc sweep st.zarr
  --output st.zarr/sw`` was accepted, and a later ``prepare ... st.zarr --overwrite``
  deleted it); ``prepare --overwrite`` refuses a store holding foreign entries and names
  them.
* A ``fit --output``, ``prepare`` or ``save`` killed outright leaves a hidden temporary;
  the next writer of the same output removes it, but never the temporary of a live
  writer, never another output's, never a link or a name lswmkc does not write.

The killed writers run in a subprocess that kills (or stops) itself the moment its
temporary exists: a profile hook watches for a call made while the temporary is on disk
(the event, not a sleep), so the point of the kill is the same on every run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lswmkc_dask import LSWMKC, cli, prepare
from lswmkc_dask.grid.compare import compare
from lswmkc_dask.grid.sweep import sweep
from lswmkc_dask.io import open_store
from lswmkc_dask.io.atomic import ForeignOutputError
from lswmkc_dask.io.guards import ProtectedOutputError

from _helpers import env, lswmkc_main, tree_snapshot

QUICK = ["--max-iter", "2", "--n-init", "1", "--quiet"]


@pytest.fixture(autouse=True)
def _keep_sigterm():
    """cli.main installs its SIGTERM handler; give the test process its own back."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)



def _kernels(n=30, seed=3):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 1, (n // 2, 3)), rng.normal(4, 1, (n - n // 2, 3))])
    kernels = np.stack([x @ x.T, np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 8.0)])
    return kernels, np.repeat([0, 1], [n // 2, n - n // 2])


def _make_store(root):
    kernels, labels = _kernels()
    np.savez(root / "k.npz", kernels=kernels, labels=labels)
    prepare(str(root / "k.npz"), root / "st.zarr")
    return root / "st.zarr"


@pytest.fixture
def store(tmp_path):
    """A tiny kernel store ``st.zarr`` (2 kernels x 30 samples, labelled) next to ``k.npz``, its source."""
    return _make_store(tmp_path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """(store, sweep directory) in one directory, for tests that must leave them unchanged."""
    root = tmp_path_factory.mktemp("shared")
    st = _make_store(root)
    saved = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["sweep", str(st), "--alphas", "1", *QUICK, "--output", str(root / "sw")]) == 0
    finally:
        signal.signal(signal.SIGTERM, saved)
    return st, root / "sw"


# -- item 2: a lock (or marker) planted as a symbolic link -------------------------------------

@pytest.mark.parametrize("planted", ["lock", "dangling-lock", "dangling-marker"])
def test_a_planted_link_in_a_sweep_directory_is_refused_and_left_alone(planted, store, tmp_path):
    out, victim = tmp_path / "D", tmp_path / "V"
    out.mkdir()
    name = ".lswmkc-output" if planted.endswith("marker") else ".lswmkc.lock"
    if not planted.startswith("dangling"):
        victim.write_bytes(b"the user's file\n")
    (out / name).symlink_to(victim)
    proc = lswmkc_main("sweep", store, "--alphas", "1", "--n-neighbors", "5", *QUICK, "--output", out)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{out / name} is " in proc.stderr and "symbolic link" in proc.stderr, proc.stderr
    assert (out / name).is_symlink() and os.readlink(out / name) == str(victim)  # the link stays
    if planted.startswith("dangling"):
        assert not os.path.lexists(victim)  # nothing created through it
    else:
        assert victim.read_bytes() == b"the user's file\n"  # nothing written through it
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_a_planted_plots_link_in_a_sweep_directory_is_refused(store, tmp_path, capsys):
    sw, elsewhere = tmp_path / "sw", tmp_path / "elsewhere"
    assert cli.main(["sweep", str(store), "--alphas", "1", *QUICK, "--output", str(sw)]) == 0
    elsewhere.mkdir()
    (sw / "plots").symlink_to(elsewhere)
    assert cli.main(["plot", str(sw)]) == 2
    assert f"{sw / 'plots'} is a symbolic link" in capsys.readouterr().err
    assert not list(elsewhere.iterdir()) and (sw / "plots").is_symlink()


# -- item 3: outputs inside a kernel store, or inside an input ------------------------------------

def _argv(command, store, sweep_dir, output):
    return {
        "fit": ["fit", store, "--alpha", "1", *QUICK, "--output", output],
        "sweep": ["sweep", store, "--alphas", "1", *QUICK, "--output", output],
        "compare": ["compare", store, "--alphas", "1", *QUICK, "--output", output],
        "prepare": ["prepare", store.parent / "k.npz", output],
        "prepare --output": ["prepare", store.parent / "k.npz", "--output", output],
        "plot": ["plot", sweep_dir, "--output", output],
        "table": ["table", sweep_dir, "--output", output],
        "verify": ["verify", store, "--output", output],
    }[command]


@pytest.mark.parametrize("where", ["inside", "deeper", "through a link", "relative"])
@pytest.mark.parametrize("command", ["fit", "sweep", "compare", "prepare", "prepare --output", "plot", "table",
                                     "verify"])
def test_no_command_writes_inside_a_kernel_store(command, where, shared, monkeypatch, capsys):
    store, sweep_dir = shared
    root = store.parent
    monkeypatch.chdir(root)
    if not os.path.lexists(root / "link"):
        (root / "link").symlink_to(store)
    name = {"table": "t.tex", "verify": "v.json"}.get(command, "out")
    output = {"inside": str(store / name), "deeper": str(store / "kernels" / "c" / name),
              "through a link": str(root / "link" / name), "relative": f"sw/../st.zarr/{name}"}[where]
    before = tree_snapshot(root)
    assert cli.main([str(a) for a in _argv(command, store, sweep_dir, output)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"refusing to write output {output}" in err and "inside" in err, err
    assert tree_snapshot(root) == before


def test_the_python_api_writes_nothing_inside_a_kernel_store(shared):
    from lswmkc_dask.plots import plot_sweep

    store, sweep_dir = shared
    before = tree_snapshot(store.parent)
    kernels, labels = _kernels()
    opened = open_store(store)
    grid = dict(alphas=[1.0], max_iter=2, min_iter=1, n_init=1, progress=False)
    calls = {
        "sweep": lambda: sweep(opened, store / "sw", **grid),
        "sweep(path)": lambda: sweep(str(store), store / "sw", **grid),
        "compare": lambda: compare(opened, store / "cmp", **grid),
        "prepare": lambda: prepare(kernels, store / "p.zarr", labels=labels),
        "plot_sweep": lambda: plot_sweep(sweep_dir, store / "plots"),
        "save": lambda: LSWMKC(2, alpha=1.0, max_iter=2, min_iter=1, n_init=1).fit(kernels).save(store / "m.npz"),
    }
    for what, call in calls.items():
        with pytest.raises(ProtectedOutputError, match="inside"):
            call()
        assert tree_snapshot(store.parent) == before, what


def test_a_sweep_directory_holding_its_input_store_is_refused(store, capsys):
    # resuming a sweep directory with a store kept inside it: a later --overwrite would delete the store
    sweep_dir = store.parent / "sw"
    assert cli.main(["sweep", str(store), "--alphas", "1", *QUICK, "--output", str(sweep_dir)]) == 0
    inner = sweep_dir / "st.zarr"
    kernels, labels = _kernels()
    prepare(kernels, inner, labels=labels)
    before = tree_snapshot(sweep_dir)
    assert cli.main(["sweep", str(inner), "--alphas", "1", *QUICK, "--output", str(sweep_dir)]) == 2
    assert f"it holds the input {inner}" in capsys.readouterr().err
    assert tree_snapshot(sweep_dir) == before


def test_prepare_overwrite_refuses_a_store_with_foreign_entries(store, capsys):
    (store / "notes.txt").write_text("mine")
    (store / "kernels" / "c" / "sw").mkdir()
    before = tree_snapshot(store)
    assert cli.main(["prepare", str(store.parent / "k.npz"), str(store), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert f"refusing to replace the kernel store {store}: it holds kernels/c/sw, notes.txt" in err, err
    assert tree_snapshot(store) == before
    kernels, labels = _kernels()
    with pytest.raises(ForeignOutputError, match="notes.txt"):
        prepare(kernels, store, labels=labels, overwrite=True)
    assert tree_snapshot(store) == before
    # without them the store is replaced as before
    (store / "notes.txt").unlink()
    (store / "kernels" / "c" / "sw").rmdir()
    assert cli.main(["prepare", str(store.parent / "k.npz"), str(store), "--overwrite"]) == 0
    assert open_store(store).n_samples == 30



def test_sweep_overwrite_refuses_a_store_with_foreign_entries(store, tmp_path, capsys):
    # a sweep replacing a kernel store (not its input) would delete what the user keeps inside it
    kernels, labels = _kernels()
    other = tmp_path / "other.zarr"
    prepare(kernels, other, labels=labels)
    (other / "notes.txt").write_text("mine")
    before = tree_snapshot(other)
    assert cli.main(["sweep", str(store), "--alphas", "1", *QUICK, "--output", str(other), "--overwrite"]) == 2
    assert f"refusing to replace the kernel store {other}: it holds notes.txt" in capsys.readouterr().err
    assert tree_snapshot(other) == before


def test_a_foreign_directory_named_as_a_fit_output_is_called_foreign(tmp_path):
    from lswmkc_dask.report.record import write_fit_output

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.csv").write_text("1,2\n")
    with pytest.raises(ForeignOutputError, match="already exists and was not written by lswmkc"):
        write_fit_output(theirs, {}, np.zeros(3, dtype=int))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"] and (theirs / "data.csv").read_text() == "1,2\n"


def test_a_planted_marker_link_names_its_target_and_is_left_alone(tmp_path):
    from lswmkc_dask.io.atomic import write_marker

    (tmp_path / "victim").write_text("mine")
    (tmp_path / ".lswmkc-output").symlink_to(tmp_path / "victim")
    with pytest.raises(ForeignOutputError, match=f"is a symbolic link \\(to {tmp_path / 'victim'}\\)"):
        write_marker(tmp_path, "sweep")
    assert (tmp_path / "victim").read_text() == "mine" and (tmp_path / ".lswmkc-output").is_symlink()

# -- item 9: temporaries of killed writers -------------------------------------------------------

#: Run Python code (the rest of argv) that kills or stops itself, with signal SIG, at the first
#: call of a function named NAME made while a file matching PATTERN exists.
_HOOK = r"""
import glob, os, signal, sys
name, pattern, sig = sys.argv[1:4]
del sys.argv[1:4]
def hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name == name and glob.glob(pattern):
        sys.setprofile(None)
        os.kill(os.getpid(), getattr(signal, sig))
sys.setprofile(hook)
"""
_CLI = _HOOK + "from lswmkc_dask.cli import main\nsys.exit(main(sys.argv[1:]))\n"
_SAVE = _HOOK + r"""
import numpy as np
from lswmkc_dask import LSWMKC
d = np.load(sys.argv[1])
LSWMKC(2, alpha=1.0, max_iter=2, min_iter=1, n_init=1).fit(d["kernels"]).save(sys.argv[2], overwrite=True)
"""


def _start(code, name, pattern, sig, *args):
    return subprocess.Popen([sys.executable, "-c", code, name, str(pattern), sig, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())


def _killed(code, name, pattern, *args):
    """Run the writer until it kills itself with its temporary on disk; the temporaries."""
    proc = _start(code, name, pattern, "SIGKILL", *args)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, out, err)
    left = sorted(Path(pattern).parent.glob(Path(pattern).name))
    assert left, "the writer died before its temporary existed"
    return left


def _plant_others(parent, name):
    """Entries the cleaning must leave: another output's temporary, a link, names lswmkc does not write."""
    (parent / "elsewhere").mkdir()
    planted = {
        f".other.{name}.tmp-0123abcd": "file",
        f".{name}.tmp-notours": "file",
        f".{name}.tmp-0123abc": "file",  # 7 hex digits
        f".{name}.tmp-4567cdef": "link",
        f".{name}.backup": "file",
    }
    for entry, kind in planted.items():
        if kind == "link":
            (parent / entry).symlink_to(parent / "elsewhere")
        else:
            (parent / entry).write_text("not a temporary of this output")
    return sorted(planted)


@pytest.mark.timeout(600)
def test_fit_output_killed_mid_write_is_cleaned_by_the_next_fit(store, tmp_path):
    out = tmp_path / "FK"
    argv = ["fit", store, "--alpha", "1", *QUICK, "--output", out]
    left = _killed(_CLI, "write_model", tmp_path / ".FK.tmp-*", *argv)  # report.json written, the model file next
    assert not out.exists() and (left[0] / "report.json").is_file()
    others = _plant_others(tmp_path, "FK")
    assert lswmkc_main(*argv).returncode == 0  # (a store this small: fitted in this process by the command too)
    assert sorted(p.name for p in tmp_path.glob(".FK.tmp-*")) == [n for n in others if n.startswith(".FK.tmp-")]
    assert all(os.path.lexists(tmp_path / n) for n in others) and (tmp_path / "elsewhere").is_dir()
    assert not any(p.exists() for p in left)
    assert LSWMKC.load(out).n_clusters_ == 2 and (out / "labels.csv").is_file()


@pytest.mark.timeout(600)
def test_prepare_killed_mid_write_is_cleaned_by_the_next_prepare(store, tmp_path):
    out = tmp_path / "PK.zarr"
    argv = ["prepare", tmp_path / "k.npz", out, "--block-rows", "8"]
    left = _killed(_CLI, "chunk_crc32c", tmp_path / ".PK.zarr.tmp-*", *argv)  # a chunk written, more to come
    assert not out.exists()
    assert lswmkc_main(*argv).returncode == 0
    assert not any(p.exists() for p in left) and not list(tmp_path.glob(".PK.zarr.*"))
    assert cli.main(["verify", str(out)]) == 0 and open_store(out).n_samples == 30


@pytest.mark.timeout(600)
def test_save_killed_mid_write_is_cleaned_but_a_live_writers_temporary_is_kept(store, tmp_path):
    out = tmp_path / "MK.npz"
    pattern = tmp_path / ".MK.npz.tmp-*"
    kernels, _ = _kernels()
    model = LSWMKC(2, alpha=1.0, max_iter=2, min_iter=1, n_init=1).fit(kernels)
    # the temporary opened, not yet written: safetensors.numpy's _flatten runs inside the model file's write,
    # once the temporary is open (as numpy's savez did in the earlier format)
    left = _killed(_SAVE, "_flatten", pattern, tmp_path / "k.npz", out)
    # a second writer of the same file, stopped while its temporary exists: alive, so kept
    live = _start(_SAVE, "_flatten", pattern, "SIGSTOP", tmp_path / "k.npz", out)
    try:
        _, status = os.waitpid(live.pid, os.WUNTRACED)  # returns once it has stopped itself
        assert os.WIFSTOPPED(status), status
        held = set(tmp_path.glob(".MK.npz.tmp-*")) - set(left)
        assert len(held) == 1
        model.save(out)
        assert held <= set(tmp_path.glob(".MK.npz.tmp-*")), "a live writer's temporary was removed"
        assert LSWMKC.load(out).n_clusters_ == 2
    finally:
        live.kill()
        live.communicate(timeout=60)
    # the writer is dead now: the next save removes every temporary of this file
    model.save(out, overwrite=True)
    assert not list(tmp_path.glob(".MK.npz.*"))
    assert LSWMKC.load(out).n_clusters_ == 2

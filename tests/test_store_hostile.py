"""Kernel stores edited to hang, exhaust or crash their reader: `open_store`, `verify_store` and
`lswmkc verify` / `lswmkc fit` refuse them at once, in bounded memory, with one line naming the file.

Every store is a real YALE store written by :func:`lswmkc_dask.prepare` in ``tmp_path`` (3 chunks of
64 rows), then edited as a hostile or careless hand would: a FIFO or a link to ``/dev/zero`` at a
metadata file or a chunk; a few bytes of ``zarr.json`` declaring a vast array, a vast chunk grid or
a compressed chunk that inflates far beyond its declared size; a chunk file larger than its chunk;
statistics deleted; metadata that is not JSON or is JSON nested too deeply.

What used to hang (a FIFO is waited on for ever) or take gigabytes runs in subprocesses: in Python,
all cases in one interpreter (:data:`DRIVER`), each given its own deadline and the whole under an
address-space limit (``RLIMIT_AS``), so that the old behaviour fails the case rather than pytest;
through the command line, a few representative cases, each its own ``lswmkc`` process.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import zlib

import google_crc32c
import pytest
from _helpers import env

from lswmkc_dask import prepare
from lswmkc_dask.datasets import load_yale

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform != "linux",
                                reason="FIFOs, /dev/zero and RLIMIT_AS are Linux's")

KCHUNK = "kernels/c/0/1/0"  # rows 64-127
SCHUNK = "statistics/c/0/0/0"
#: The address space each subprocess may use: its imports take about 1 GiB of it (virtual).
AS_LIMIT = 3 << 30
#: Seconds each Python case may take (the refusals take well under one; all cases, at most
#: 2 x 22 x 15 s where every one blocks, stay within pytest's timeout).
CASE_SECONDS = 15


# ------------------------------------------------------------------------ the edits
def _replace(store, key, make):
    path = store / key
    if os.path.lexists(path):
        os.remove(path)
    make(path)


def fifo(key):
    return lambda store: _replace(store, key, os.mkfifo)


def dev_zero(key):
    return lambda store: _replace(store, key, lambda p: p.symlink_to("/dev/zero"))


def sparse(key, size):
    """The file at ``key`` replaced by ``size`` bytes of zeros (a sparse file: no disk used)."""
    def edit(store):
        with open(store / key, "r+b") as fh:
            fh.truncate(size)
    return edit


def text(key, content):
    return lambda store: (store / key).write_text(content)


def declare(key, **changes):
    """``key``'s zarr.json declaring other values (``shape``, ``chunks``, ``codecs``)."""
    def edit(store):
        meta = json.loads((store / key).read_text())
        if "shape" in changes:
            meta["shape"] = changes["shape"]
        if "chunks" in changes:
            meta["chunk_grid"]["configuration"]["chunk_shape"] = changes["chunks"]
        if "codecs" in changes:
            meta["codecs"] = changes["codecs"]
        (store / key).write_text(json.dumps(meta))
    return edit


def gzip_bomb(store):
    """Statistics declared gzip-compressed, their chunk 400 KiB inflating to 400 MB (crc32c valid)."""
    declare("statistics/zarr.json", codecs=[{"name": "bytes", "configuration": {"endian": "little"}},
                                            {"name": "gzip", "configuration": {"level": 9}},
                                            {"name": "crc32c"}])(store)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # the gzip container
    zeros = bytes(1 << 20)
    body = b"".join(packer.compress(zeros) for _ in range(400)) + packer.flush()
    assert len(body) < 1 << 20
    (store / SCHUNK).write_bytes(body + int(google_crc32c.value(body)).to_bytes(4, "little"))


def deleted(key):
    return lambda store: shutil.rmtree(store / key)


DEEP = "[" * 100_000 + "]" * 100_000

#: name -> (edit, the file named, what the refusal says). Python's open_store (and the statistics
#: a fit reads) and verify_store must both refuse each, within CASE_SECONDS. (The FIFOs and devices
#: last: where one blocks, as it used to, every later case in the same interpreter waits too.)
CASES = {
    "zarr.json of 3 GiB": (sparse("zarr.json", 3 << 30), "zarr.json", "holds 3221225472 bytes, more than"),
    "kernel chunk of 3 GiB": (sparse(KCHUNK, 3 << 30), KCHUNK, "holds 3221225472 bytes, more than the 422404"),
    "statistics chunk of 3 GiB": (sparse(SCHUNK, 3 << 30), SCHUNK, "holds 3221225472 bytes, more than the 13204"),
    "statistics declared (2, 5, 2e7)": (declare("statistics/zarr.json", shape=[2, 5, 20_000_000],
                                                chunks=[2, 5, 20_000_000]),
                                        None, "have shape (2, 5, 20000000), not (2, 5, 165)"),
    "statistics declared in 1e7 chunks": (declare("statistics/zarr.json", shape=[2, 5, 20_000_000],
                                                  chunks=[2, 5, 2]),
                                          None, "have shape (2, 5, 20000000), not (2, 5, 165)"),
    "statistics chunked (1, 1, 1)": (declare("statistics/zarr.json", chunks=[1, 1, 1]),
                                     None, "are chunked (1, 1, 1), not in the one chunk (2, 5, 165)"),
    "statistics gzip bomb": (gzip_bomb, None, "have the codecs ['BytesCodec', 'GzipCodec', 'Crc32cCodec'], not"),
    "kernels declared (5, 5e6, 5e6)": (declare("kernels/zarr.json", shape=[5, 5_000_000, 5_000_000],
                                               chunks=[5, 1, 5_000_000]),
                                       None, "its attributes say 5 kernels x 165 samples but the array holds "
                                             "5 x 5000000"),
    "kernels declared in 6 GiB chunks": (declare("kernels/zarr.json", shape=[5, 20_000, 20_000],
                                                 chunks=[5, 8192, 20_000]),
                                         None, "its attributes say 5 kernels x 165 samples but the array holds "
                                               "5 x 20000"),
    "statistics deleted": (deleted("statistics"), None, "its training statistics ('statistics') are missing"),
    "statistics zarr.json not JSON": (text("statistics/zarr.json", '{"shape": [2, 5,'), "statistics/zarr.json",
                                      "is not valid JSON"),
    "statistics zarr.json deep": (text("statistics/zarr.json", DEEP), "statistics/zarr.json",
                                  "is JSON nested too deeply"),
    "zarr.json deep": (text("zarr.json", DEEP), "zarr.json", "is JSON nested too deeply"),
    "fifo zarr.json": (fifo("zarr.json"), "zarr.json", "is a FIFO (named pipe), not a regular file"),
    "fifo kernels/zarr.json": (fifo("kernels/zarr.json"), "kernels/zarr.json",
                               "is a FIFO (named pipe), not a regular file"),
    "fifo statistics/zarr.json": (fifo("statistics/zarr.json"), "statistics/zarr.json",
                                  "is a FIFO (named pipe), not a regular file"),
    "fifo statistics chunk": (fifo(SCHUNK), SCHUNK, "is a FIFO (named pipe), not a regular file"),
    "fifo kernel chunk": (fifo(KCHUNK), KCHUNK, "is a FIFO (named pipe), not a regular file"),
    "/dev/zero zarr.json": (dev_zero("zarr.json"), "zarr.json", "is a device, not a regular file"),
    "/dev/zero kernels/zarr.json": (dev_zero("kernels/zarr.json"), "kernels/zarr.json",
                                    "is a device, not a regular file"),
    "/dev/zero statistics chunk": (dev_zero(SCHUNK), SCHUNK, "is a device, not a regular file"),
}

#: Runs each case of argv[1] (a JSON list of [name, store]) in a thread of its own with a deadline:
#: open_store and the statistics (what a fit reads first), then verify_store. One JSON line per case.
DRIVER = """
import json, sys, threading, time, os
from lswmkc_dask import open_store
from lswmkc_dask.io.integrity import inspect_store

def opened(store):
    open_store(store).preprocessing_statistics()
    return "opened"

def verified(store):
    report = inspect_store(store)
    return {"problems": report.problems, "checks": report.checks}

for name, store in json.loads(sys.argv[1]):
    for op, call in (("open", opened), ("verify", verified)):
        box = {}
        def run():
            t0 = time.monotonic()
            try:
                box["outcome"] = call(store)
            except BaseException as exc:
                box["outcome"] = {"error": type(exc).__name__, "message": str(exc)}
            box["seconds"] = time.monotonic() - t0
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(float(sys.argv[2]))
        print(json.dumps({"case": name, "op": op, "outcome": box.get("outcome", "timed out"),
                          "seconds": box.get("seconds")}), flush=True)
os._exit(0)  # (threads blocked for ever, if any, are not waited for)
"""


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _bounded_env():
    return env(MALLOC_ARENA_MAX="2", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")


@pytest.fixture(scope="module")
def yale_zarr(tmp_path_factory):
    """A real store: YALE, 5 kernels x 165 samples, 3 chunks of 64 rows."""
    kernels, labels = load_yale()
    return prepare(kernels, tmp_path_factory.mktemp("yale") / "yale.zarr", labels=labels, block_rows=64).location


def _edited(yale_zarr, directory, edit):
    store = directory / "s.zarr"
    shutil.copytree(yale_zarr, store)
    edit(store)
    return store


@pytest.fixture(scope="module")
def outcomes(yale_zarr, tmp_path_factory):
    """{(case, op): outcome} of every case of :data:`CASES` (and an intact store), in one bounded subprocess."""
    stores = [("intact", str(_edited(yale_zarr, tmp_path_factory.mktemp("intact"), lambda s: None)))]
    for name, (edit, _, _) in CASES.items():
        stores.append((name, str(_edited(yale_zarr, tmp_path_factory.mktemp("case"), edit))))
    run = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(stores), str(CASE_SECONDS)], capture_output=True,
                         text=True, env=_bounded_env(), preexec_fn=_limited, check=False,
                         timeout=2 * CASE_SECONDS * len(stores) + 120)
    out = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            got = json.loads(line)
            out[got["case"], got["op"]] = got
    return {"stores": dict(stores), "exit": (run.returncode, run.stderr[-2000:]), **out}


def test_every_case_ran(outcomes):
    """The driver ran to its end (not killed for memory: a case that grew past RLIMIT_AS)."""
    assert outcomes["exit"][0] == 0, outcomes["exit"]


def test_an_intact_store_opens_and_verifies(outcomes):
    """No valid store is refused: the checks before zarr pass a store as `prepare` wrote it."""
    assert outcomes.get(("intact", "open"), {}).get("outcome") == "opened", outcomes["exit"]
    verify = outcomes["intact", "verify"]["outcome"]
    assert verify["problems"] == [] and "training statistics (shape, finite, diagonal > 0, sha256)" in verify["checks"]


def _says(outcome, store, file, says):
    """The refusal's text, checked: one line, naming ``file`` (of ``store``) and saying ``says``."""
    assert isinstance(outcome, dict), outcome  # ("opened", or "timed out": blocked)
    if "error" in outcome:
        assert outcome["error"] in ("KernelInputError", "StoreFileError"), outcome
        line = outcome["message"]
    else:
        line = next((p for p in outcome["problems"] if says in p), "; ".join(outcome["problems"]))
    assert "\n" not in line and says in line, line
    assert "RecursionError" not in line and "is missing" not in line, line
    if file is not None:
        assert os.path.join(store, file) in line, line
    return line


@pytest.mark.parametrize("case", CASES)
def test_open_store_refuses_at_once(outcomes, case):
    _, file, says = CASES[case]
    got = outcomes.get((case, "open"), {"outcome": f"not run: {outcomes['exit']}"})
    _says(got["outcome"], outcomes["stores"][case], file, says)
    assert got["seconds"] < CASE_SECONDS


@pytest.mark.parametrize("case", CASES)
def test_verify_store_reports_it_at_once(outcomes, case):
    _, file, says = CASES[case]
    got = outcomes.get((case, "verify"), {"outcome": f"not run: {outcomes['exit']}"})
    assert "problems" in got["outcome"], got  # a report, not an exception
    _says(got["outcome"], outcomes["stores"][case], file, says)
    assert got["seconds"] < CASE_SECONDS


def test_verify_lists_no_statistics_as_checked_when_they_are_gone(outcomes):
    report = outcomes["statistics deleted", "verify"]["outcome"]
    assert not any("training statistics" in c for c in report["checks"]), report


# ------------------------------------------------------------------------ the command line
def _lswmkc(cwd, *args):
    return subprocess.run([sys.executable, "-m", "lswmkc_dask.cli", *map(str, args)], capture_output=True, text=True,
                          env=_bounded_env(), preexec_fn=_limited, cwd=cwd, check=False, timeout=120)


#: (command, case): a few of CASES as a user meets them.
CLI_CASES = [("verify", "fifo zarr.json"), ("fit", "fifo statistics chunk"), ("fit", "fifo kernel chunk"),
             ("verify", "/dev/zero kernels/zarr.json"), ("verify", "kernels declared in 6 GiB chunks"),
             ("verify", "statistics deleted")]


@pytest.mark.parametrize(("command", "case"), CLI_CASES)
def test_the_command_line_refuses_at_once(yale_zarr, tmp_path, command, case):
    edit, file, says = CASES[case]
    store = _edited(yale_zarr, tmp_path, edit)
    extra = ["--n-clusters", 15, "--alpha", 8, "--max-iter", 3] if command == "fit" else []
    run = _lswmkc(tmp_path, command, store, *extra)
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    if command == "fit":
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lswmkc: error: kernel store"), run.stderr
        line = lines[0]
    else:
        assert run.stdout.startswith(f"{store}: DAMAGED"), run.stdout + run.stderr
        line = next((x for x in run.stdout.splitlines() if says in x), run.stdout)
    assert says in line and "is missing" not in line and "Traceback" not in run.stderr, run.stdout + run.stderr
    if file is not None:
        assert str(store / file) in line, line

"""Helpers shared by the tests that run the `lswmkc` command and real Dask processes."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"


def env(**extra):
    """This interpreter's environment with its `bin` (and so its `dask`) first on PATH."""
    out = dict(os.environ)
    bindir = Path(sys.executable).parent
    out["PATH"] = str(bindir) + os.pathsep + out.get("PATH", "")
    if (bindir / "dask").exists():
        out["DASK"] = str(bindir / "dask")
    out.update(extra)
    return out


def lswmkc(*args, timeout=600, check=True, environ=None):
    """Run `python -m lswmkc_dask.cli ARGS` as a user would; raise on failure if check."""
    proc = subprocess.run(
        [sys.executable, "-m", "lswmkc_dask.cli", *map(str, args)],
        capture_output=True, text=True, check=False, timeout=timeout, env=environ or env(),
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def lswmkc_main(*args, check=False):
    """``lswmkc ARGS`` in this process through ``cli.main`` (what the script calls), for the
    runs that start no cluster of their own and need no fresh process (refusals, plots,
    in-process fits of small data): the same exit status and output as :func:`lswmkc`,
    without a Python and Dask start-up per call. Returns an object with ``returncode``,
    ``stdout`` and ``stderr`` (raises on a non-zero status if ``check``); the signal
    handlers of this process are restored."""
    import contextlib
    import io
    import signal
    from types import SimpleNamespace

    from lswmkc_dask import cli

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if check and status != 0:
        raise AssertionError(f"exit {status}\nstdout:\n{out.getvalue()}\nstderr:\n{err.getvalue()}")
    return SimpleNamespace(returncode=status, stdout=out.getvalue(), stderr=err.getvalue())


@contextlib.contextmanager
def terminal_sigint():
    """Processes started inside the block get SIGINT at its default, as in a terminal.

    A shell script that starts pytest in the background (``pytest ... &``) starts it with
    SIGINT ignored, the processes pytest starts inherit that, and ``lswmkc`` keeps an
    ignored SIGINT ignored (as a command run with ``&`` should): a test that sends it
    SIGINT, as Ctrl-C does, would see it run on to the end. A Python handler is reset to
    the default by exec, so it is set here while the block starts its processes.
    """
    saved = signal.getsignal(signal.SIGINT)
    if saved is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if saved is signal.SIG_IGN:
            signal.signal(signal.SIGINT, saved)


def alive(procs):
    """The psutil processes of ``procs`` still running (zombies excluded)."""
    left = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            pass
    return left


def process_tree(pids):
    """psutil.Process of every PID and all its descendants (still running)."""
    import psutil

    procs = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            procs += [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    return procs


def tree_snapshot(root):
    """{relative path: bytes, "dir" or "link -> target"} of everything under ``root``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = "link -> " + os.readlink(p)
            elif os.path.isdir(p):
                out[rel] = "dir"
            else:
                with open(p, "rb") as fh:
                    out[rel] = fh.read()
    return out


def stderr_lines(proc):
    """A queue receiving ``proc``'s stderr line by line (None at its end)."""
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def rewrite_model(run, **changes):
    """Rewrite the model file of ``run`` (a run directory) with ``changes``: an array a tensor, None a member
    left out (as a run of an older sweep, or made up by a test, would hold them)."""
    import safetensors.numpy
    from safetensors import safe_open

    path = run / "model.safetensors"
    with safe_open(str(path), "np") as f:
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    tensors.update({k: v for k, v in changes.items() if v is not None})
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items() if changes.get(k, 0) is not None}
    path.write_bytes(safetensors.numpy.save(tensors, metadata))


def png_by_lswmkc(path):
    """True if ``path`` is a PNG whose ``Software`` text chunk names lswmkc-dask (as its figures are saved)."""
    from PIL import Image

    try:
        with Image.open(path, formats=["PNG"]) as image:
            return str(image.info.get("Software", "")).startswith("lswmkc-dask")
    except (OSError, ValueError, SyntaxError):
        return False


def json_by_lswmkc(path):
    """True if ``path`` is a JSON object whose ``written_by`` names lswmkc-dask."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("written_by", "")).startswith("lswmkc-dask")

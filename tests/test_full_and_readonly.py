"""A full disk or a read-only file system ends a command with one line, never a traceback.

The file systems are real where this machine allows it: a small tmpfs mounted for the
test (root in a container or on CI), remounted read-only or to a larger size. Where
mounting is not allowed, the same failures are injected: ENOSPC from zarr's chunk
writer after a number of bytes (``zarr.storage._local._put``), and EROFS from the
``os.open`` of the package's writability probe; each test says which it used.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess

import numpy as np
import pytest

from lswmkc_dask import cli


def _mount(point, *options):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(point)],
                          capture_output=True, check=False).returncode == 0


class SmallDisk:
    """A directory on a small file system: a real tmpfs if mounting works, else injected faults."""

    def __init__(self, point, monkeypatch, size):
        self.point, self.monkeypatch = point, monkeypatch
        point.mkdir()
        self.real = os.geteuid() == 0 and _mount(point, f"size={size}")
        self.written = 0
        self.limit = size

    def fill_up(self):
        """Without a real tmpfs: zarr's chunk writes fail once ``limit`` bytes were written."""
        if self.real:
            return
        import zarr.storage._local as local

        real_put = local._put

        def put(path, value, *args, **kwargs):
            if path.is_relative_to(self.point):
                self.written += len(value)
                if self.written > self.limit:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_put(path, value, *args, **kwargs)

        self.monkeypatch.setattr(local, "_put", put)

    def grow(self, size):
        """More room: a remount to ``size``, or no more injected failures."""
        if self.real:
            assert subprocess.run(["mount", "-o", f"remount,size={size}", str(self.point)]).returncode == 0
        else:
            self.limit = float("inf")

    def read_only(self):
        """Remount read-only, or make the package's writability probe fail with EROFS."""
        if self.real:
            assert subprocess.run(["mount", "-o", "remount,ro", str(self.point)]).returncode == 0
            return
        from lswmkc_dask.io import output

        real_open = os.open

        def fake_open(path, flags, *args, **kwargs):
            if str(path).startswith(str(self.point)) and flags & (os.O_WRONLY | os.O_RDWR):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, flags, *args, **kwargs)

        self.monkeypatch.setattr(output.os, "open", fake_open)

    def close(self):
        if self.real:
            subprocess.run(["umount", "-l", str(self.point)], check=False)


@pytest.fixture
def disk(tmp_path, monkeypatch):
    d = SmallDisk(tmp_path / "mnt", monkeypatch, size=400 * 1024)
    yield d
    d.close()


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("kernels")
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(0, 1, (100, 5)), rng.normal(3, 1, (100, 5))])
    kernels = np.stack([x @ x.T, np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 10), (x @ x.T + 1) ** 2])
    np.savez(root / "k200.npz", kernels=kernels, labels=np.repeat([0, 1], 100))
    return root / "k200.npz"


def _main(argv, capsys):
    saved = signal.getsignal(signal.SIGTERM)
    try:
        status = cli.main([str(a) for a in argv])
    finally:
        signal.signal(signal.SIGTERM, saved)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err.strip().splitlines()


@pytest.mark.timeout(300)
def test_prepare_onto_a_disk_that_fills_up(disk, kernel_file, capsys):
    # 3 kernels x 200 x 200 x 8 bytes = 960 kB into a 400 kB file system
    disk.fill_up()
    status, lines = _main(["prepare", kernel_file, disk.point / "k.zarr", "--block-rows", "20"], capsys)
    assert status == 1, lines
    assert lines[-1] == (f"lswmkc: error: no space left on the device while writing {disk.point / 'k.zarr'}; free "
                         "space or choose another output (nothing partial was kept)"), (disk.real, lines)
    assert os.listdir(disk.point) == []  # no temporary store left behind


@pytest.mark.timeout(600)
def test_sweep_onto_a_disk_that_fills_up_resumes_once_there_is_room(disk, kernel_file, tmp_path, capsys):
    store = tmp_path / "k.zarr"
    assert _main(["prepare", kernel_file, store, "--block-rows", "50"], capsys)[0] == 0
    if not disk.real:  # the run files are written with numpy, not through zarr's writer
        pytest.skip("needs a real small file system (mount -t tmpfs is not allowed here)")
    sw = disk.point / "sw"  # 400 kB: room for a grid point or two (each writes its Z and K* factor)
    argv = ["sweep", store, "--n-clusters", "2", "--alphas", "1", "2", "4", "8", "16", "32", "--max-iter", "3",
            "--n-init", "2", "--output", sw]
    status, lines = _main(argv, capsys)
    assert status == 1, lines
    assert lines[-1].startswith(f"lswmkc: error: no space left on the device while writing {sw}"), lines
    assert lines[-1].endswith("(finished results are kept: rerun the same command to go on)")
    done = sorted(p.name for p in (sw / "runs").iterdir() if not p.name.startswith("."))
    assert 0 < len(done) < 6, done
    disk.grow("8m")
    status, lines = _main(argv, capsys)
    assert status == 0, lines
    runs = [p.name for p in (sw / "runs").iterdir()]
    assert len(runs) == 6 and not [n for n in runs if n.startswith(".")], runs


@pytest.mark.timeout(300)
def test_verify_and_plot_on_a_read_only_file_system(disk, kernel_file, capsys):
    pytest.importorskip("matplotlib")
    disk.grow("8m")
    store, sw = disk.point / "k.zarr", disk.point / "sw"
    assert _main(["prepare", kernel_file, store, "--block-rows", "50"], capsys)[0] == 0
    assert _main(["sweep", store, "--n-clusters", "2", "--alphas", "1", "8", "--max-iter", "3", "--n-init", "2",
                  "--output", sw, "--quiet"], capsys)[0] == 0
    disk.read_only()
    for argv, target in (
        (["verify", store, "--output", disk.point / "verify.json"], disk.point / "verify.json"),
        (["plot", sw, "--output", disk.point / "figs"], disk.point / "figs"),
        (["plot", sw], sw / "plots"),
    ):
        status, lines = _main(argv, capsys)
        assert status == 2, (argv, lines)
        assert len(lines) == 1 and lines[0].startswith(f"lswmkc: error: cannot write output {target}: read-only "
                                                       "file system"), (disk.real, argv, lines)
    assert not (disk.point / "verify.json").exists() and not (sw / "plots").exists()


@pytest.mark.timeout(300)
def test_plot_onto_a_disk_that_fills_up_keeps_nothing(disk, kernel_file, tmp_path, capsys, monkeypatch):
    # The fit directory elsewhere, its PNGs (some 270 kB) into a file system with 130 kB free: room for the
    # writability probe (64 kB) and a figure or two, not for all. Without a real small file system,
    # matplotlib's savefig writes half a PNG and raises ENOSPC at the third figure.
    pytest.importorskip("matplotlib")
    fit = tmp_path / "fit"
    assert _main(["fit", kernel_file, "--n-clusters", "2", "--max-iter", "3", "--n-init", "2", "--output", fit,
                  "--quiet"], capsys)[0] == 0
    if disk.real:
        free = os.statvfs(disk.point).f_bavail * os.statvfs(disk.point).f_frsize
        (disk.point / "filler").write_bytes(bytes(free - 130 * 1024))
    else:
        from matplotlib.figure import Figure

        real_savefig, calls = Figure.savefig, []

        def savefig(self, fname, *args, **kwargs):
            calls.append(fname)
            if len(calls) == 3:
                with open(fname, "wb") as fh:
                    fh.write(b"\x89PNG\r\n\x1a\n" + bytes(4096))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_savefig(self, fname, *args, **kwargs)

        monkeypatch.setattr(Figure, "savefig", savefig)
    figs = disk.point / "figs" / "fit"
    status, lines = _main(["plot", fit, "--output", figs], capsys)
    assert status == 1, (disk.real, lines)
    assert lines[-1].startswith("lswmkc: error: no space left on the device while writing "), lines
    assert lines[-1].endswith("(nothing partial was kept)"), lines
    assert sorted(os.listdir(disk.point)) == (["filler"] if disk.real else []), (disk.real, os.listdir(disk.point))

"""Bad input found before any work: a clear error naming the file (or flag), nothing written.

Each case runs the `lswmkc` command, and where it matters the Python API too, for the
exception type (KernelInputError, a ValueError). The commands on these small inputs
(the command fits them in its own process, no cluster) run in this process through
``cli.main``, what the script calls (the same exit status and output, without a Python
and Dask start-up each); the commands in a private mount namespace run as a
subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import scipy.io
from _helpers import env, lswmkc_main

from lswmkc_dask import (
    HeaderWarning,
    KernelInputError,
    load_features,
    load_kernels,
    open_store,
    prepare,
)
from lswmkc_dask.datasets import load_yale
from lswmkc_dask.io import read_labels

QUICK = ["--max-iter", "2", "--n-init", "2"]


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, dirs, files in os.walk(root) for f in files + dirs)


def _refused(args, message, tmp_path, before=None):
    """Run `lswmkc ARGS`: exit 2, one-line error containing ``message``, nothing written under tmp_path."""
    before = _files(tmp_path) if before is None else before
    proc = lswmkc_main(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("lswmkc: error: "), proc.stderr
    assert "LSWMKC on" not in proc.stderr  # refused before the fit started
    assert _files(tmp_path) == before, "something was written"
    return proc


def _yale_mat_v5(path):
    kernels, labels = load_yale()
    scipy.io.savemat(path, {"KH": np.moveaxis(kernels, 0, 2), "Y": labels})


def _yale_mat_v73(path, kh=None):
    kernels, labels = load_yale()
    with h5py.File(path, "w") as f:
        f["KH"] = kernels if kh is None else kh  # h5 (m, n, n) = MATLAB n x n x m
        f["Y"] = labels[None].astype(float)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# --- kernel files ----------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_truncated_mat_v5(tmp_path):
    mat = tmp_path / "k.mat"
    _yale_mat_v5(mat)
    _truncate(mat)
    with pytest.raises(KernelInputError, match=r"cannot read .*k\.mat as a MATLAB file \(truncated or damaged\?\)"):
        load_kernels(mat)
    want = f"cannot read {mat} as a MATLAB file (truncated or damaged?)"
    _refused(["prepare", mat, tmp_path / "k.zarr"], want, tmp_path)
    _refused(["fit", mat, *QUICK, "--output", tmp_path / "fit"], want, tmp_path)
    _refused(["sweep", mat, "--alphas", "8", *QUICK, "--output", tmp_path / "sw"], want, tmp_path)


@pytest.mark.timeout(300)
def test_truncated_mat_v73(tmp_path):
    mat = tmp_path / "k73.mat"
    _yale_mat_v73(mat)
    _truncate(mat)
    with pytest.raises(KernelInputError, match=r"k73\.mat as a MATLAB v7\.3 \(HDF5\) file \(truncated or damaged\?\)"):
        load_kernels(mat)
    want = f"cannot read {mat} as a MATLAB v7.3 (HDF5) file (truncated or damaged?)"
    _refused(["prepare", mat, tmp_path / "k.zarr"], want, tmp_path)
    _refused(["fit", mat, *QUICK, "--output", tmp_path / "fit"], want, tmp_path)


@pytest.mark.timeout(300)
def test_complex_kh(tmp_path):
    kernels, labels = load_yale()
    v5, v73 = tmp_path / "c5.mat", tmp_path / "c73.mat"
    scipy.io.savemat(v5, {"KH": np.moveaxis(kernels, 0, 2) * (1 + 1j), "Y": labels})
    _yale_mat_v73(v73, kh=kernels.astype(np.complex128))
    for mat in (v5, v73):
        with pytest.raises(KernelInputError, match=r"variable KH in .* is complex"):
            load_kernels(mat)
        proc = _refused(["prepare", mat, tmp_path / "k.zarr"], f"variable KH in {mat} is complex", tmp_path)
        assert "permute" not in proc.stderr  # not mistaken for MATLAB's order
    _refused(["fit", v5, *QUICK], f"variable KH in {v5} is complex", tmp_path)


@pytest.mark.timeout(300)
def test_kh_is_an_hdf5_group(tmp_path):
    mat = tmp_path / "g.mat"
    with h5py.File(mat, "w") as f:
        g = f.create_group("KH")  # what MATLAB writes for a cell array, struct or sparse matrix
        g["data"] = np.ones(3)
    with pytest.raises(KernelInputError, match=r"variable KH in .*g\.mat is an HDF5 group"):
        load_kernels(mat)
    _refused(["prepare", mat, tmp_path / "k.zarr"], f"variable KH in {mat} is an HDF5 group", tmp_path)


# --- features and labels ------------------------------------------------------------------


def _views(tmp_path, n=60, first_row=None, header=None):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 5)) * 6
    y = np.repeat(np.arange(3), n // 3)
    x = centres[y] + rng.normal(size=(n, 5))
    data = np.column_stack([x, y])
    if first_row is not None:
        data[0] = first_row
    path = tmp_path / "v.csv"
    text = "\n".join(",".join(f"{v:.17g}" for v in row) for row in data) + "\n"
    path.write_text((header + "\n" if header else "") + text)
    return path, data


@pytest.mark.timeout(300)
def test_label_column_out_of_range(tmp_path):
    path, _ = _views(tmp_path)
    with pytest.raises(KernelInputError, match=r"label_column 9 is out of range for .*v\.csv, which has 6 columns"):
        load_features(path, label_column=9)
    _refused(["prepare", "--features", path, "--label-column", "9", tmp_path / "f.zarr"],
             f"--label-column 9 is out of range for {path}, which has 6 columns (give -6 .. 5", tmp_path)
    _refused(["fit", "--features", path, "--label-column", "-7", *QUICK, "--output", tmp_path / "fit"],
             f"--label-column -7 is out of range for {path}", tmp_path)


@pytest.mark.timeout(300)
def test_numeric_first_row_is_data_header_flags(tmp_path):
    # A first row of column numbers 0..d-1 is pandas' header: skipped, as read_csv does, with
    # a word naming --no-header, which keeps it as a sample (a real first sample of 0,1,2,...).
    path, data = _views(tmp_path, first_row=[0, 1, 2, 3, 4, 5])
    with pytest.warns(HeaderWarning, match=r"read as a header.*header=False \(--no-header\)"):
        x, _ = load_features(path, label_column=-1)
    np.testing.assert_array_equal(x, data[1:, :5])
    got = lswmkc_main("prepare", "--features", path, "--label-column", "-1", "--no-header", tmp_path / "a.zarr")
    assert got.returncode == 0 and "warning" not in got.stderr, got.stderr
    store = open_store(tmp_path / "a.zarr")
    assert store.n_samples == 60 and store.labels[0] == 5
    # Another numeric header row (numbered from 1) is a header only when --header says so.
    hpath, data = _views(tmp_path, header="1,2,3,4,5,6")
    assert load_features(hpath, label_column=-1)[0].shape == (61, 5)
    np.testing.assert_array_equal(load_features(hpath, label_column=-1, header=True)[0], data[:, :5])
    assert lswmkc_main("prepare", "--features", hpath, "--label-column", "-1", "--header",
                       tmp_path / "h.zarr").returncode == 0
    assert open_store(tmp_path / "h.zarr").n_samples == 60
    # A text header is found without a flag; --no-header with a text first row is an error naming the file.
    tpath, _ = _views(tmp_path, header="a,b,c,d,e,label")
    assert load_features(tpath, label_column=-1)[0].shape == (60, 5)
    _refused(["prepare", "--features", tpath, "--label-column", "-1", "--no-header", tmp_path / "t.zarr"],
             f"features in {tpath}: line 1 is not numeric", tmp_path)
    help_text = lswmkc_main("prepare", "-h").stdout
    help_text = " ".join(help_text.split())
    assert "--header" in help_text and "--no-header" in help_text and "other numeric first row is a sample" in help_text


@pytest.mark.timeout(300)
def test_nan_labels_refused_up_front(tmp_path):
    _, y = load_yale()
    labels = tmp_path / "y.txt"
    text = [str(v) for v in y]
    text[3] = "nan"
    labels.write_text("\n".join(text) + "\n")
    with pytest.raises(KernelInputError, match=r"labels in .*y\.txt: line 4 \(sample 3\) has no label"):
        read_labels(labels)
    want = f"labels in {labels}: line 4 (sample 3) has no label ('nan')"
    _refused(["fit", "--dataset", "yale", "--labels", labels, *QUICK, "--output", tmp_path / "fit"], want, tmp_path)
    _refused(["sweep", "--dataset", "yale", "--labels", labels, "--alphas", "8", *QUICK, "--output", tmp_path / "sw"],
             want, tmp_path)
    _refused(["prepare", "--dataset", "yale", "--labels", labels, tmp_path / "k.zarr"], want, tmp_path)
    # NaN in a label column of a feature file, and in the Python API.
    path, _ = _views(tmp_path)
    text = path.read_text().splitlines()
    text[7] = ",".join(text[7].split(",")[:-1] + ["nan"])
    path.write_text("\n".join(text) + "\n")
    _refused(["prepare", "--features", path, "--label-column", "-1", tmp_path / "f.zarr"],
             f"labels in {path}: 1 sample has no label (NaN, infinite or empty): sample 7", tmp_path)
    bad = y.astype(float)
    bad[[5, 9]] = np.nan
    with pytest.raises(KernelInputError, match=r"2 samples have no label .*: samples 5, 9"):
        prepare(load_yale()[0], None, labels=bad)


@pytest.mark.timeout(300)
def test_string_labels_without_header_keep_the_first(tmp_path):
    _, y = load_yale()
    names = np.where(y % 2 == 0, "y", "n")  # first label "y": also a usual name of a label column
    path = tmp_path / "yn.txt"
    path.write_text("\n".join(names) + "\n")
    np.testing.assert_array_equal(read_labels(path), names)
    assert lswmkc_main("prepare", "--dataset", "yale", "--labels", path, tmp_path / "k.zarr").returncode == 0
    np.testing.assert_array_equal(open_store(tmp_path / "k.zarr").labels, names)
    # A header "y" above y/n labels cannot be told from a label: it is read as one, and the
    # count of labels against the samples says so (never a silent shift).
    (tmp_path / "h.txt").write_text("y\n" + "\n".join(names) + "\n")
    with pytest.raises(KernelInputError, match="have length 166 but the kernels have 165"):
        prepare(load_yale()[0], None, labels=read_labels(tmp_path / "h.txt"))
    (tmp_path / "l.txt").write_text("label\n" + "\n".join(names) + "\n")  # a header that is no label: skipped
    np.testing.assert_array_equal(read_labels(tmp_path / "l.txt"), names)


# --- duplicate samples ------------------------------------------------------------------------


def _duplicated_views(tmp_path, copies):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 5)) * 6
    base = centres[np.repeat(np.arange(3), 4)] + rng.normal(size=(12, 5))  # 12 distinct samples
    x = np.repeat(base, copies, axis=0)
    y = np.repeat(np.repeat(np.arange(3), 4), copies)
    path = tmp_path / f"dup{copies}.csv"
    np.savetxt(path, np.column_stack([x, y]), delimiter=",")
    return path


@pytest.mark.timeout(300)
def test_duplicate_samples(tmp_path):
    # Duplicates as such are fine: each sample 3 times, c = 5 nearest neighbours.
    ok = _duplicated_views(tmp_path, 3)
    proc = lswmkc_main("fit", "--features", ok, "--label-column", "-1", *QUICK, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "kernel weights" in proc.stdout
    # Every sample 7 times: its c + 1 = 6 nearest samples are copies and tie, Z0 = 0, the
    # kernel weights (Eq. 12) are undefined. It used to end in "FloatingPointError: kernel weights undefined".
    bad = _duplicated_views(tmp_path, 7)
    before = _files(tmp_path)
    for args in (["fit", "--features", bad, "--label-column", "-1", *QUICK, "--output", tmp_path / "fit"],
                 ["sweep", "--features", bad, "--label-column", "-1", "--alphas", "1", "8", *QUICK,
                  "--output", tmp_path / "new" / "sw"]):
        proc = lswmkc_main(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr and "FloatingPointError" not in proc.stderr
        assert "the initial affinity graph Z0 is empty" in proc.stderr
        assert "duplicate samples, identical in every kernel: samples 0, 1, 2, 3, 4, 5, 6 (7 copies)" in proc.stderr
        assert "--n-neighbors" in proc.stderr
        assert _files(tmp_path) == before, "something was written"
    from lswmkc_dask import LSWMKC

    x, _ = load_features(bad, label_column=-1)
    with pytest.raises(KernelInputError, match="samples 7, 8, 9, 10, 11, 12, 13 \\(7 copies\\)"):
        LSWMKC(3, kernel="rbf", max_iter=2).fit([x])
    # c at least the other copies of each sample: the graph is not empty.
    proc = lswmkc_main("fit", "--features", bad, "--label-column", "-1", "--n-neighbors", "6", *QUICK, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "kernel weights" in proc.stdout


# --- the output file system ---------------------------------------------------------------


def _in_own_mounts(script, mnt):
    """Run ``script`` (sh) in a private mount namespace; skip where that is not allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) for a private tmpfs")
    probe = subprocess.run([unshare, "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mnt}"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.strip()}")
    return subprocess.run([unshare, "-rm", "sh", "-c", script], capture_output=True, text=True, env=env(),
                          timeout=240, check=False)


def _cli(*args):
    return " ".join([sys.executable, "-m", "lswmkc_dask.cli", *map(str, args)])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["full", "read-only"])
def test_output_file_system_full_or_read_only(tmp_path, kind):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if kind == "full":
        setup = f"mount -t tmpfs -o size=128k tmpfs {mnt} && (dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null; true)"
        why = "no space left on device"
    else:
        setup = f"mount -t tmpfs -o ro tmpfs {mnt}"
        why = "read-only file system"
    runs = {
        "fit": _cli("fit", "--dataset", "yale", "--output", mnt / "fit"),
        "sweep": _cli("sweep", "--dataset", "yale", "--output", mnt / "sw"),
        "prepare": _cli("prepare", "--dataset", "yale", mnt / "k.zarr"),
    }
    script = setup + "".join(f"; {cmd}; echo {name}=$?" for name, cmd in runs.items()) + f"; echo; ls -A {mnt}"
    proc = _in_own_mounts(script, mnt)
    for name in runs:
        assert f"{name}=2" in proc.stdout, proc.stdout + proc.stderr
    for out in ("fit", "sw", "k.zarr"):
        assert f"lswmkc: error: cannot write output {mnt / out}: {why} at {mnt}" in proc.stderr, proc.stderr
    assert "LSWMKC on" not in proc.stderr and "Traceback" not in proc.stderr  # before any work
    listing = proc.stdout.split("\n\n")[-1].split()
    assert listing == (["fill"] if kind == "full" else []), proc.stdout  # nothing written


def test_mat_v5_cell_array_of_class_names(tmp_path):
    # Y saved from MATLAB as a cell array of strings ({'cat'; 'dog'; ...}): read as string
    # labels, counted for k like numeric ones; a cell holding several values is refused.
    kernels, labels = load_yale()
    names = np.array([f"person{v:02d}" for v in labels], dtype=object).reshape(-1, 1)
    path = tmp_path / "cell.mat"
    scipy.io.savemat(path, {"KH": np.moveaxis(kernels, 0, 2), "Y": names})
    _, y = load_kernels(path)
    assert y.dtype.kind == "U" and y[0] == f"person{labels[0]:02d}" and np.unique(y).size == 15
    bad = names.copy()
    bad[7, 0] = np.array([1.0, 2.0])
    scipy.io.savemat(tmp_path / "bad.mat", {"KH": np.moveaxis(kernels, 0, 2), "Y": bad})
    _refused(["fit", tmp_path / "bad.mat", *QUICK], "labels Y in", tmp_path)
    with pytest.raises(KernelInputError, match=r"the label of sample 7 \(0-based\) is an array of shape"):
        load_kernels(tmp_path / "bad.mat")


def test_object_arrays_in_npz_and_npy_name_the_file(tmp_path):
    kernels, labels = load_yale()
    names = np.array([f"p{v}" for v in labels], dtype=object)
    np.savez(tmp_path / "k.npz", kernels=kernels, labels=names)
    np.save(tmp_path / "y.npy", names)
    before = _files(tmp_path)
    _refused(["fit", tmp_path / "k.npz", *QUICK], f"array 'labels' in {tmp_path / 'k.npz'} holds Python objects",
             tmp_path, before)
    with pytest.raises(KernelInputError, match=r"labels in .*y\.npy are Python objects"):
        read_labels(tmp_path / "y.npy")
    np.savez(tmp_path / "ok.npz", kernels=kernels, labels=names.astype(str))  # the advice works
    assert np.array_equal(load_kernels(tmp_path / "ok.npz")[1], names.astype(str))


def test_label_column_with_class_names(tmp_path):
    # --label-column naming classes ("setosa"): read as string labels, like --labels; a
    # header is told by its feature cells or a label cell such as "class"; a bad feature
    # cell is named by its line and column in the file (both from 1).
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 3))
    names = np.array(["setosa", "versicolor", "virginica"])[np.arange(30) % 3]
    rows = [",".join(f"{v:.6f}" for v in r) + f",{c}" for r, c in zip(x, names)]
    plain, headed, numeric_head = tmp_path / "p.csv", tmp_path / "h.csv", tmp_path / "n.csv"
    plain.write_text("\n".join(rows) + "\n")
    headed.write_text("f1,f2,f3,species\n" + "\n".join(rows) + "\n")
    numeric_head.write_text("0,1,2,class\n" + "\n".join(rows) + "\n")
    for path in (plain, headed, numeric_head):
        feats, labels = load_features(path, label_column=-1)
        np.testing.assert_array_equal(labels, names)
        np.testing.assert_allclose(feats, x, atol=1e-6)
    bad = rows.copy()
    bad[4] = bad[4].replace(bad[4].split(",")[1], "oops", 1)
    (tmp_path / "b.csv").write_text("\n".join(bad) + "\n")
    with pytest.raises(KernelInputError, match=r"b\.csv: line 5, column 2: 'oops' is not a number"):
        load_features(tmp_path / "b.csv", label_column=-1)
    out = tmp_path / "fit"
    assert lswmkc_main("fit", "--features", plain, headed, "--label-column", "-1", *QUICK, "--output", out).returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert report["n_samples"] == 30 and set(report["metrics"]["honest"]) == {"ACC", "NMI", "Purity", "ARI",
                                                                                    "NMI_arithmetic"}
    assert report["params"]["n_clusters"] == 3  # counted from the three names

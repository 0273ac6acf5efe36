"""Every kind of bad input gives a clear error and writes nothing."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import scipy.io

from lswmkc_dask import LSWMKC, KernelInputError, load_features, load_kernels, prepare


def _kernels(n=12, m=2, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, 4))
    k = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 4)
    return np.stack([k] * m)


def _nothing_written(tmp_path):
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="input file not found: .*nope.mat"):
        prepare(tmp_path / "nope.mat", tmp_path / "o.zarr")
    _nothing_written(tmp_path)


def test_unreadable_file(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    with pytest.raises(KernelInputError, match="cannot read .*bad.npz as .npz"):
        load_kernels(bad)
    garbage = tmp_path / "garbage.mat"
    garbage.write_bytes(b"\x00" * 200)
    with pytest.raises(KernelInputError, match="garbage.mat"):
        load_kernels(garbage)


def test_damaged_or_pickled_arrays_are_refused_naming_the_file(tmp_path):
    """A member of an .npz kernel file that fails its CRC, an .npy feature file of Python objects: one
    KernelInputError naming the file, as for a file that is no archive at all."""
    good = tmp_path / "k.npz"
    np.savez(good, kernels=np.stack([np.eye(4)] * 2))
    raw = bytearray(good.read_bytes())
    raw[raw.index(b"\x93NUMPY") + 200] ^= 0xFF  # a byte of the kernels' data: the member's CRC fails
    bad = tmp_path / "crc.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(KernelInputError, match=r"cannot read .*crc\.npz as \.npz: .*CRC"):
        load_kernels(bad)
    np.save(tmp_path / "x.npy", np.array([[1.0, "a"]], dtype=object))
    with pytest.raises(KernelInputError, match=r"features in .*x\.npy are Python objects"):
        load_features(tmp_path / "x.npy")


def test_user_npz_files_are_read_bounded_naming_the_file_and_array(tmp_path):
    """Users' .npz kernel, feature and label files go through the one bounded reader
    (lswmkc_dask.io.npz.NpzArchive): a member that would expand beyond its bound, one whose header
    declares more bytes than it holds, and a FIFO are refused unread, each naming the file (and array)."""
    import os
    import zipfile

    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, kernels=np.zeros((8, 512, 512)))  # 16 MiB of zeros: a few KiB compressed
    with pytest.raises(KernelInputError, match=r"cannot read .*bomb\.npz as \.npz: array 'kernels' in .*bomb\.npz "
                                               r"would expand .*zip bomb"):
        load_kernels(bomb)
    short = tmp_path / "short.npz"
    np.savez(short, X=np.ones((6, 3)))
    with zipfile.ZipFile(short) as z:
        raw = z.read("X.npy")
    with zipfile.ZipFile(short, "w") as z:
        z.writestr("X.npy", raw[:-8])  # one value short of what its header declares
    with pytest.raises(KernelInputError, match=r"array 'X' in .*short\.npz declares shape \(6, 3\)"):
        load_features(short)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "labels.npz"
        os.mkfifo(fifo)
        with pytest.raises(KernelInputError, match=r"input is not a file: .*labels\.npz"):
            load_features(fifo)
    good = tmp_path / "v.npz"
    np.savez(good, X=np.arange(12.0).reshape(4, 3), labels=np.array(["a", "b", "a", "b"]))
    x, y = load_features(good)
    np.testing.assert_array_equal(x, np.arange(12.0).reshape(4, 3))
    assert y.tolist() == ["a", "b", "a", "b"]


def test_mat_without_kh_lists_variables(tmp_path):
    scipy.io.savemat(tmp_path / "v5.mat", {"K": np.eye(3), "labels": np.ones(3)})
    with pytest.raises(KernelInputError, match=r"has no variable 'KH' \(variables: K, labels\)"):
        load_kernels(tmp_path / "v5.mat")
    with h5py.File(tmp_path / "v73.mat", "w") as f:
        f["X"] = np.eye(3)
        f["Y"] = np.ones(3)
    with pytest.raises(KernelInputError, match=r"has no variable 'KH' \(variables: X, Y\)"):
        load_kernels(tmp_path / "v73.mat")


def test_non_square_and_mismatched_shapes(tmp_path):
    with pytest.raises(KernelInputError, match=r"not square: .*\(2, 5, 6\)"):
        prepare(np.zeros((2, 5, 6)), tmp_path / "o.zarr")
    with pytest.raises(KernelInputError, match=r"kernel 1 has shape \(4, 4\) but kernel 0 has shape \(5, 5\)"):
        prepare([np.eye(5), np.eye(4)], tmp_path / "o.zarr")
    with pytest.raises(KernelInputError, match=r"kernel 1 is not square: shape \(5, 4\)"):
        prepare([np.eye(5), np.ones((5, 4))], tmp_path / "o.zarr")
    _nothing_written(tmp_path)


def test_labels_of_another_length(tmp_path):
    with pytest.raises(KernelInputError, match="labels have length 11 but the kernels have 12 samples"):
        prepare(_kernels(), tmp_path / "o.zarr", labels=np.arange(11))
    np.savez(tmp_path / "k.npz", kernels=_kernels(), labels=np.arange(13))
    with pytest.raises(KernelInputError, match="labels in .*k.npz have length 13 but the kernels have 12"):
        load_kernels(tmp_path / "k.npz")


def test_nan_and_inf_say_which_kernel(tmp_path):
    k = _kernels(m=3)
    k[1, 2, 3] = np.nan
    k[1, 3, 2] = np.nan
    k[1, 5, 5] = np.inf
    with pytest.raises(KernelInputError, match=r"kernel 1 has 2 NaN and 1 infinite entries \(first at row 2, column 3\)"):
        prepare(k, tmp_path / "o.zarr", block_rows=4)
    _nothing_written(tmp_path)


def test_far_from_symmetric(tmp_path):
    k = _kernels()
    k[0, 2, 7] += 0.5
    with pytest.raises(KernelInputError, match=r"kernel 0 is far from symmetric: \|K\[2,7\] - K\[7,2\]\| = 0.5"):
        prepare(k, tmp_path / "o.zarr")
    _nothing_written(tmp_path)
    # Tiny asymmetry is symmetrised silently.
    k = _kernels()
    k[0, 2, 7] += 1e-9
    store = prepare(k, tmp_path / "ok.zarr")
    rows = store.read_rows(0, 12)
    np.testing.assert_array_equal(rows[0], rows[0].T)


def test_non_positive_diagonal_names_kernel_and_sample(tmp_path):
    k = _kernels(m=2)
    # Sample 4 identical to the mean in feature space of a linear kernel: zero after centring.
    x = np.random.default_rng(1).normal(size=(12, 3))
    others = np.arange(12) != 4
    x[others] -= x[others].mean(0)
    x[4] = 0.0  # = the mean of all samples
    k[1] = x @ x.T
    with pytest.raises(KernelInputError, match=r"kernel 1, sample 4: after centring its diagonal entry is .* not above 1e-10 x max\|K\|"):
        prepare(k, tmp_path / "o.zarr")
    _nothing_written(tmp_path)


@pytest.mark.parametrize("how", ["negated", "distances"])
def test_kernel_that_is_not_psd_is_named_not_called_constant(tmp_path, how):
    # A negated kernel or a distance matrix has negative diagonal entries after centring:
    # refused as not positive semidefinite (it used to be "numerically constant", and
    # degenerate_kernels="drop" dropped it under that name).
    k = _kernels(m=3)
    if how == "negated":
        k[2] = -k[2]
    else:
        x = np.random.default_rng(2).normal(size=(12, 4))
        k[2] = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    for policy in ("warn", "drop"):
        with pytest.raises(KernelInputError, match=r"kernel 2 is not positive semidefinite: after centring, sample \d+ "
                                                   r"has diagonal entry -[0-9.e+-]+ < 0"):
            prepare(k, tmp_path / "o.zarr", degenerate_kernels=policy)
    _nothing_written(tmp_path)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"n_clusters": 1}, r"The 'n_clusters' parameter of LSWMKC must be an int in the range \[2, inf\) or None\. Got 1"),
        ({}, r"n_clusters is required: kernels or features given as arrays carry no labels"),
        ({"n_clusters": 13}, r"n_clusters must be an integer in \[2, n_samples - 1 = 11\], got 13"),
        ({"n_clusters": 3, "n_neighbors": 0}, r"The 'n_neighbors' parameter of LSWMKC must be an int in the range \[1, inf\)\. Got 0"),
        ({"n_clusters": 3, "n_neighbors": 11}, r"n_neighbors must be an integer in \[1, n_samples - 2 = 10\], got 11"),
        ({"n_clusters": 3, "alpha": -1.0}, r"The 'alpha' parameter of LSWMKC must be a float in the range \[0(\.0)?, inf\)\. Got -1.0"),
        ({"n_clusters": 3, "alpha": float("inf")}, r"The 'alpha' parameter of LSWMKC must be a float in the range \[0(\.0)?, inf\)\. Got inf"),
        ({"n_clusters": 3, "alpha": float("nan")}, r"The 'alpha' parameter of LSWMKC must be a float in the range \[0(\.0)?, inf\)\. Got nan"),
    ],
)
def test_hyperparameters(params, message):
    # Raised before any cluster is started (client=None would start one).
    with pytest.raises(ValueError, match=message):
        LSWMKC(**params).fit(_kernels())


def test_existing_output_is_kept(tmp_path):
    out = tmp_path / "o.zarr"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already exists and was not written by lswmkc .*overwrite"):
        prepare(_kernels(), out)
    # A directory lswmkc did not write is never replaced, even with overwrite=True.
    with pytest.raises(FileExistsError, match="was not written by lswmkc"):
        prepare(_kernels(), out, overwrite=True)
    assert (out / "keep.txt").read_text() == "mine"
    # A store lswmkc wrote is replaced with overwrite=True (and only then).
    ours = tmp_path / "k.zarr"
    prepare(_kernels(), ours)
    with pytest.raises(FileExistsError, match="already exists .*overwrite"):
        prepare(_kernels(), ours)
    prepare(_kernels(seed=1), ours, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.zarr", "o.zarr"]


def test_failure_while_writing_leaves_nothing(tmp_path, monkeypatch):
    """An error in the middle of writing the store leaves neither store nor temporary."""
    import lswmkc_dask.io.store as lio

    real = lio.preprocessed_blocks

    def failing(*a, **k):
        for i, block in enumerate(real(*a, **k)):
            if i == 1:  # the second row block
                raise OSError("disk full")
            yield block

    monkeypatch.setattr(lio, "preprocessed_blocks", failing)
    with pytest.raises(OSError, match="disk full"):
        prepare(_kernels(), tmp_path / "o.zarr", block_rows=4)
    _nothing_written(tmp_path)


def test_n_clusters_from_the_labels_of_a_kernel_file(tmp_path):
    # n_clusters=None counts the labels stored with the kernels (YALE: Y with 15 classes),
    # as the command line does; a file without labels needs n_clusters.
    from lswmkc_dask.datasets import load_yale

    kernels, labels = load_yale()
    path = tmp_path / "k.npz"
    np.savez(path, kernels=kernels, labels=labels)
    counted = LSWMKC(alpha=8.0, max_iter=3, n_init=3, random_state=0).fit(str(path))
    given = LSWMKC(n_clusters=15, alpha=8.0, max_iter=3, n_init=3, random_state=0).fit(kernels)
    assert counted.n_clusters is None and counted.n_clusters_ == 15
    np.testing.assert_array_equal(counted.labels_, given.labels_)
    bare = tmp_path / "bare.npz"
    np.savez(bare, kernels=kernels)
    with pytest.raises(ValueError, match=r"n_clusters is required: .*bare\.npz holds no labels"):
        LSWMKC(alpha=8.0).fit(str(bare))
    # A refused refit leaves the fitted model as it was (it used to reset n_clusters_ only).
    with pytest.raises(ValueError, match="n_clusters is required"):
        counted.fit(str(bare))
    assert counted.n_clusters_ == 15
    assert counted.evaluate(labels, protocol="paper") == given.evaluate(labels, protocol="paper")


def test_evaluate_refuses_missing_true_labels(yale):
    # A NaN label used to count as one more class (ACC 0.9967 against 1.0 here).
    from lswmkc_dask.report.metrics import evaluate

    _, labels = yale
    y = labels.astype(float)
    assert evaluate(y, labels) == pytest.approx({"ACC": 1.0, "NMI": 1.0, "Purity": 1.0, "ARI": 1.0, "NMI_arithmetic": 1.0},
                                             abs=1e-15)
    y[[3, 9]] = np.nan
    with pytest.raises(KernelInputError, match=r"labels_true: 2 samples have no label .* samples 3, 9 \(0-based\)"):
        evaluate(y, labels)
    model = LSWMKC(15, alpha=8.0, max_iter=2, n_init=2).fit(yale[0])
    for protocol in ("honest", "paper"):
        with pytest.raises(KernelInputError, match="samples 3, 9"):
            model.evaluate(y, protocol=protocol)

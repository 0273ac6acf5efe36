"""Predict from feature views with a model fitted on a store that `lswmkc prepare --features`
wrote (issue 48, friction: "a store made from features should predict from features").

The README's route: ``prepare --features v0.csv v1.csv --label-column -1 --kernel rbf
views.zarr``, ``fit views.zarr --output m``, ``predict m --features new0.csv new1.csv``. Until
then the store kept only the kernels and their statistics, and predict asked for raw
cross-kernels. The store now also keeps the z-scored training features, their means and
scales, the kernel and its parameters and what identifies the views, each array checked
against the manifest's sha256 before use. scikit-learn's wine data in two headed CSV views,
held-out rows predicted; the command line as subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr
from _helpers import env, lswmkc
from sklearn.datasets import load_digits, load_wine

from lswmkc_dask import LSWMKC, FeatureKernels, open_store, prepare
from lswmkc_dask.errors import KernelInputError

FAST = ["--max-iter", "5", "--min-iter", "2", "--n-init", "3", "--quiet"]
PARAMS = dict(max_iter=5, min_iter=2, n_init=3)


def _wine_csvs(tmp_path):
    """Wine (shuffled) in two headed CSV views of 7 and 6 columns, the class last; 140 rows to
    fit, 38 new ones. Returns the training files, the new files and the new rows' views."""
    data = load_wine()
    x, y = data.data, data.target
    names = [n.replace(",", " ") for n in data.feature_names]
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:140], order[140:]
    (tmp_path / "new").mkdir()

    def write(path, rows, cols):
        lines = [",".join([*(names[c] for c in cols), "class"])]
        lines += [",".join([*(repr(float(x[r, c])) for c in cols), str(int(y[r]))]) for r in rows]
        path.write_text("\n".join(lines) + "\n")
        return path

    cols = [range(7), range(7, 13)]
    fitted = [write(tmp_path / f"v{p}.csv", train, c) for p, c in enumerate(cols)]
    new = [write(tmp_path / "new" / f"v{p}.csv", test, c) for p, c in enumerate(cols)]
    return fitted, new, [x[test][:, list(c)] for c in cols]


def _labels(path):
    return [int(line.split(",")[1]) for line in path.read_text().splitlines()[1:]]


@pytest.fixture(scope="module")
def wine_store(tmp_path_factory):
    """The README's route and `fit --features` on the same views: (tmp dir, new files, new views)."""
    tmp = tmp_path_factory.mktemp("wine")
    fitted, new, views = _wine_csvs(tmp)
    lswmkc("prepare", "--features", *fitted, "--label-column", "-1", "--kernel", "rbf", tmp / "views.zarr",
           timeout=240)
    lswmkc("fit", tmp / "views.zarr", *FAST, "--output", tmp / "m", timeout=240)
    lswmkc("fit", "--features", *fitted, "--label-column", "-1", *FAST, "--output", tmp / "direct", timeout=240)
    return tmp, new, views


def test_cli_predict_from_a_store_prepared_from_features(wine_store):
    """`lswmkc predict m --features new0.csv new1.csv` on a model fitted on the store: the labels of the
    model fitted with `fit --features` on the same views, its kernel weights to 1e-12 (was: refused,
    "pass the cross-kernels")."""
    tmp, new, views = wine_store
    store_fit, direct = LSWMKC.load(tmp / "m"), LSWMKC.load(tmp / "direct")
    np.testing.assert_array_equal(store_fit.labels_, direct.labels_)
    np.testing.assert_allclose(store_fit.kernel_weights_, direct.kernel_weights_, rtol=0, atol=1e-12)
    assert store_fit.kernel == direct.kernel == "rbf"
    assert store_fit.view_names_ == direct.view_names_ == ["v0", "v1"]
    assert store_fit.view_columns_ == direct.view_columns_ and len(store_fit.view_columns_[1]) == 6
    for p in range(2):
        np.testing.assert_array_equal(store_fit.train_features_[p], direct.train_features_[p])
        np.testing.assert_array_equal(store_fit.feature_scales_[p], direct.feature_scales_[p])
    lswmkc("predict", tmp / "m", "--features", *new, "--label-column", "-1", "--output", tmp / "p_store.csv",
           timeout=240)
    lswmkc("predict", tmp / "direct", "--features", *new, "--label-column", "-1", "--output", tmp / "p_direct.csv",
           timeout=240)
    got, expected = _labels(tmp / "p_store.csv"), _labels(tmp / "p_direct.csv")
    assert len(got) == 38 and got == expected
    np.testing.assert_array_equal(store_fit.predict(views), expected)  # LSWMKC.predict(views) too


def test_cli_verify_accepts_the_store_and_fit_refuses_its_edited_features(wine_store, tmp_path):
    """The new members pass `lswmkc verify`; training features rewritten with zarr (a valid chunk
    checksum, other values) make `lswmkc fit` stop at once in one line naming the member."""
    tmp, _, _ = wine_store
    assert "OK" in lswmkc("verify", tmp / "views.zarr", timeout=240).stdout
    store = tmp_path / "edited.zarr"
    subprocess.run(["cp", "-r", str(tmp / "views.zarr"), str(store)], check=True)
    arr = zarr.open_array(str(store / "train_features_1"), mode="r+")
    values = arr[...]
    values[3, 2] += 0.5
    arr[...] = values
    proc = lswmkc("fit", store, *FAST, "--output", tmp_path / "m", check=False, timeout=240)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "'train_features_1'" in proc.stderr and "sha256" in proc.stderr and "damaged" in proc.stderr
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("damage", ["bytes", "removed", "attribute", "fifo"])
def test_damaged_feature_members_are_refused_naming_them(tmp_path, damage):
    """A flipped byte (the chunk's crc32c), a removed member, an edited kernel parameter (the
    attribute's sha256) and a FIFO at a member's metadata: one KernelInputError naming the member."""
    x, y = load_wine(return_X_y=True)
    path = tmp_path / "s.zarr"
    prepare(FeatureKernels([x[:, :7], x[:, 7:]], "rbf"), path, labels=y)
    if damage == "bytes":
        chunk = path / "train_features_0" / "c" / "0" / "0"
        raw = bytearray(chunk.read_bytes())
        raw[17] ^= 0x40
        chunk.write_bytes(bytes(raw))
        words = ["'train_features_0'"]
    elif damage == "removed":
        subprocess.run(["rm", "-r", str(path / "feature_moments_1")], check=True)
        words = ["'feature_moments_1'", "missing"]
    elif damage == "attribute":
        meta = json.loads((path / "zarr.json").read_text())
        meta["attributes"]["features"]["kernel"] = "linear"
        (path / "zarr.json").write_text(json.dumps(meta))
        words = ["'features'", "sha256"]
    else:
        meta = path / "train_features_1" / "zarr.json"
        meta.unlink()
        os.mkfifo(meta)
        words = ["FIFO", "train_features_1"]
    code = ("import sys; from lswmkc_dask import LSWMKC\n"
            "try:\n    LSWMKC(3, **dict(max_iter=5, min_iter=2, n_init=3)).fit(sys.argv[1])\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc); sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=240,
                          env=env())
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith("KernelInputError") and proc.stdout.count("\n") == 1, proc.stdout
    for word in words:
        assert word in proc.stdout, proc.stdout


def test_python_route_poly_and_refit(tmp_path):
    """`prepare(FeatureKernels(views, "poly", degree=3), path)`, then `LSWMKC().fit(path)`: the
    store's kernel and degree become the model's; its labels on new rows are those of a model
    fitted on the views; saved and loaded it predicts the same; fitted again on the store it
    gives the same fit."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(1).permutation(len(y))[:300]
    views = np.array_split(x[order], 2, axis=1)
    train, new = [v[:240] for v in views], [v[240:] for v in views]
    path = tmp_path / "d.zarr"
    prepare(FeatureKernels(train, "poly", degree=3, names=["left", "right"]), path, labels=y[order][:240])
    model = LSWMKC(**PARAMS).fit(path)
    direct = LSWMKC(10, kernel="poly", kernel_params={"degree": 3}, **PARAMS).fit(train)
    assert model.kernel == "poly" and model.kernel_params == {"degree": 3, "coef0": 1.0}
    assert model.view_names_ == ["left", "right"]
    np.testing.assert_allclose(model.kernel_weights_, direct.kernel_weights_, rtol=0, atol=1e-12)
    expected = direct.predict(new)
    np.testing.assert_array_equal(model.predict(new), expected)
    model.save(tmp_path / "m.safetensors")
    np.testing.assert_array_equal(LSWMKC.load(tmp_path / "m.safetensors").predict(new), expected)
    again = model.fit(path)  # kernel="poly" now: the store is still taken, its kernel being the same
    np.testing.assert_array_equal(again.predict(new), expected)
    with pytest.raises(KernelInputError, match="kernel='rbf' builds kernels from feature views"):
        LSWMKC(kernel="rbf", **PARAMS).fit(path)  # another kernel than the store's


def test_kernel_stores_and_stores_of_an_earlier_version_are_unchanged(tmp_path):
    """A store of precomputed kernels holds no feature members; a feature store without them (as an
    earlier version wrote it) still opens and fits, and its model predicts from cross-kernels."""
    x, y = load_wine(return_X_y=True)
    fk = FeatureKernels([x[:, :7], x[:, 7:]], "rbf")
    kernels = fk.rows(0, fk.shape[1])
    prepare(kernels, tmp_path / "k.zarr", labels=y)
    assert "features" not in open_store(tmp_path / "k.zarr").attrs
    assert sorted(p.name for p in (tmp_path / "k.zarr").iterdir() if p.is_dir()) == ["kernels", "statistics"]
    old = tmp_path / "old.zarr"
    prepare(fk, old, labels=y)
    meta = json.loads((old / "zarr.json").read_text())
    del meta["attributes"]["features"], meta["attributes"]["manifest"]["features_sha256"]
    (old / "zarr.json").write_text(json.dumps(meta))
    for p in range(2):
        subprocess.run(["rm", "-r", str(old / f"train_features_{p}"), str(old / f"feature_moments_{p}")], check=True)
    model = LSWMKC(3, **PARAMS).fit(old)
    assert model.kernel == "precomputed" and model.train_features_ is None
    expected = LSWMKC(3, **PARAMS).fit(kernels)
    np.testing.assert_array_equal(model.labels_, expected.labels_)
    with pytest.raises(ValueError, match="cross-kernels"):
        model.predict([x[:5, :7], x[:5, 7:]])


def test_prepare_overwrite_replaces_a_store_of_feature_views(tmp_path):
    x, y = load_wine(return_X_y=True)
    fk = FeatureKernels([x[:, :7], x[:, 7:]], "rbf")
    prepare(fk, tmp_path / "s.zarr", labels=y)
    prepare(fk, tmp_path / "s.zarr", labels=y, overwrite=True)
    assert (tmp_path / "s.zarr" / "train_features_1").is_dir()


def test_cli_verify_names_edited_training_features(tmp_path):
    x, y = load_wine(return_X_y=True)
    store = tmp_path / "s.zarr"
    prepare(FeatureKernels([x[:, :7], x[:, 7:]], "rbf"), store, labels=y)
    arr = zarr.open_array(str(store / "train_features_0"), mode="r+")
    values = arr[...]
    values[0, 0] += 1.0
    arr[...] = values
    proc = lswmkc("verify", store, check=False, timeout=240)
    assert proc.returncode == 2 and "'train_features_0'" in proc.stdout, proc.stdout

"""LSWMKC.save / LSWMKC.load: a portable, pickle-free model file, reloaded in another
process; `lswmkc fit --output DIR` writes it (the one file of the run's arrays), `lswmkc plot DIR` draws them.

What the file stores is compared exactly; what is derived from it (K* = W W^T) within
rounding: a GEMM's summation order follows the BLAS thread count of the process, which
differs between processes (and with the tests run before)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import numpy as np
import pytest
import safetensors.numpy
import scipy.sparse as sp
from _helpers import env, png_by_lswmkc
from safetensors import safe_open
from sklearn.exceptions import NotFittedError
from threadpoolctl import threadpool_limits

from lswmkc_dask import LSWMKC
from lswmkc_dask.cli import main
from lswmkc_dask.datasets import load_handwritten
from lswmkc_dask.errors import ForeignOutputError
from lswmkc_dask.io.model_file import (
    FORMAT_VERSION,
    MODEL_FILE,
    ModelFileError,
    ModelVersionError,
)
from lswmkc_dask.io.run_arrays import run_arrays
from lswmkc_dask.plots._base import read_labels_csv

#: A separate interpreter loads the file and writes what it read as plain arrays (no pickle either way).
LOADER = """
import json, os, sys
import numpy as np
from threadpoolctl import threadpool_limits
from lswmkc_dask import LSWMKC
threadpool_limits(int(os.environ.get("LOADER_BLAS_THREADS", "0")) or None, user_api="blas")
m = LSWMKC.load(sys.argv[1])
y = np.load(sys.argv[3], allow_pickle=False) if len(sys.argv) > 3 else None
z = m.affinity_.tocsr()
np.savez(sys.argv[2], labels=m.labels_, weights=m.kernel_weights_, factor=m.kstar_factor_, kstar=m.neighborhood_kernel_,
         z_data=z.data, z_indices=z.indices, z_indptr=z.indptr, z_shape=np.asarray(z.shape),
         embedding=m.embedding_, gamma=m.gamma_, objective=m.objective_, kstar_change=m.kstar_change_,
         names=np.asarray(m.kernel_names_, dtype=str))
print(json.dumps({"params": {k: v for k, v in m.get_params().items()}, "n_iter": m.n_iter_,
                  "converged": m.converged_, "n_clusters": m.n_clusters_,
                  "metrics": None if y is None else {p: m.evaluate(y, protocol=p) for p in ("honest", "paper")}}))
"""


def load_elsewhere(path, tmp_path, labels=None, blas_threads=None):
    """Load ``path`` in a new interpreter (with ``blas_threads`` BLAS threads, if given); return its
    arrays and its JSON summary."""
    out = tmp_path / "loaded.npz"
    args = [sys.executable, "-c", LOADER, str(path), str(out)]
    if labels is not None:
        np.save(tmp_path / "y.npy", labels)
        args.append(str(tmp_path / "y.npy"))
    extra = {} if blas_threads is None else {"LOADER_BLAS_THREADS": str(blas_threads)}
    run = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env(**extra), cwd=tmp_path,
                         check=False)
    assert run.returncode == 0, run.stderr
    with np.load(out, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    return arrays, json.loads(run.stdout.strip().splitlines()[-1])


def assert_kstar_within_rounding(kstar, factor):
    """``kstar`` is ``factor @ factor.T`` to the rounding of a GEMM in any summation order (any BLAS
    thread count): each entry within 2 r eps of the largest diagonal entry (r, the inner dimension)."""
    expected = factor @ factor.T
    r = factor.shape[1]
    np.testing.assert_allclose(kstar, expected, rtol=0,
                               atol=2 * max(r, 1) * np.finfo(np.float64).eps * float(np.abs(expected).max()))


def assert_same_model(model, arrays, summary, labels=None):
    """The model read by the other process stores exactly what ``model`` holds (K*, derived from the
    stored factor by a GEMM in that process, within rounding)."""
    np.testing.assert_array_equal(arrays["labels"], model.labels_)
    np.testing.assert_array_equal(arrays["weights"], model.kernel_weights_)
    np.testing.assert_array_equal(arrays["factor"], model.kstar_factor_)
    assert_kstar_within_rounding(arrays["kstar"], model.kstar_factor_)
    z = sp.csr_matrix((arrays["z_data"], arrays["z_indices"], arrays["z_indptr"]), shape=tuple(arrays["z_shape"]))
    assert z.shape == model.affinity_.shape
    assert (z != model.affinity_).nnz == 0
    np.testing.assert_array_equal(z.toarray(), model.affinity_.toarray())
    for key, attr in (("embedding", "embedding_"), ("gamma", "gamma_"), ("objective", "objective_"),
                      ("kstar_change", "kstar_change_")):
        np.testing.assert_array_equal(arrays[key], getattr(model, attr))
    assert arrays["names"].tolist() == [str(x) for x in model.kernel_names_]
    params = {k: v for k, v in model.get_params().items() if k != "client"}
    assert summary["params"] == dict(params, client=None)
    assert summary["n_iter"] == model.n_iter_ and summary["converged"] == model.converged_
    assert summary["n_clusters"] == model.n_clusters_
    if labels is not None:  # evaluate, both protocols, on the loaded model (embedding_, n_init, random_state)
        for protocol in ("honest", "paper"):
            assert summary["metrics"][protocol] == pytest.approx(model.evaluate(labels, protocol=protocol), abs=0)


def members_of(path):
    """The tensors and the metadata entries of a model file, read by safetensors alone."""
    with safe_open(str(path), "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def rewritten(members, path, **metadata):
    """``members`` written to ``path`` with the metadata entries ``metadata`` changed (None: left out)."""
    tensors, meta = members
    meta = {k: v for k, v in dict(meta, **metadata).items() if v is not None}
    path.write_bytes(safetensors.numpy.save(tensors, meta))
    return path


def assert_no_pickle_needed(path):
    """A safetensors reader alone reads every member (numeric tensors, text metadata); none is an object array."""
    tensors, meta = members_of(path)
    assert all(a.dtype != object for a in tensors.values())
    assert meta["format"] == "lswmkc-model" and int(meta["format_version"]) == FORMAT_VERSION


@pytest.fixture(scope="module")
def yale_model(yale):
    kernels, labels = yale
    return LSWMKC(15, alpha=8, n_init=20).fit(kernels), labels


@pytest.fixture(scope="module")
def handwritten_model():
    """The one Handwritten fit of this module (n = 2000, 6 views, RBF kernels), 3 iterations:
    the file holds what any fit leaves (a converged one takes 22; paper ACC 0.973 at 3 and at 22)."""
    views, digits = load_handwritten()
    return LSWMKC(10, alpha=64, kernel="rbf", n_init=10, max_iter=3, min_iter=3).fit(views), digits


def test_yale_round_trip_across_processes(yale_model, tmp_path):
    model, labels = yale_model
    path = model.save(tmp_path / "yale.npz")
    assert path == tmp_path / "yale.npz" and sorted(p.name for p in tmp_path.iterdir()) == ["yale.npz"]
    assert_no_pickle_needed(path)
    # the other process with 1 BLAS thread, this one with 2 (K* = W W^T then differs in the last bits)
    arrays, summary = load_elsewhere(path, tmp_path, labels, blas_threads=1)
    with threadpool_limits(2, user_api="blas"):
        assert_same_model(model, arrays, summary, labels)
    # and in this process: the attributes a fit sets, of the same types
    loaded = LSWMKC.load(path)
    assert isinstance(loaded.affinity_, sp.csr_matrix) and isinstance(loaded.n_iter_, int)
    assert isinstance(loaded.converged_, bool) and loaded.kernel_names_.dtype == object
    assert loaded.eig_drivers_.tolist() == model.eig_drivers_.tolist()
    assert loaded.execution_ == model.execution_ and loaded.n_features_in_ == 165
    np.testing.assert_array_equal(loaded.kstar_factor_, model.kstar_factor_)
    assert_kstar_within_rounding(loaded.neighborhood_kernel_, model.kstar_factor_)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_handwritten_round_trip_across_processes(handwritten_model, tmp_path):
    model, digits = handwritten_model
    assert model.affinity_.shape == (2000, 2000) and model.kernel_weights_.shape == (6,)
    path = model.save(tmp_path / "hw.npz")
    assert_no_pickle_needed(path)
    arrays, summary = load_elsewhere(path, tmp_path, digits)
    assert_same_model(model, arrays, summary, digits)
    assert summary["params"]["kernel"] == "rbf" and summary["metrics"]["paper"]["ACC"] > 0.9


def test_newer_format_version_is_refused(yale_model, tmp_path):
    model, _ = yale_model
    path = model.save(tmp_path / "m.npz")
    newer = rewritten(members_of(path), tmp_path / "newer.npz", format_version=str(FORMAT_VERSION + 1),
                      lswmkc_dask_version="9.0.0")
    with pytest.raises(ModelVersionError) as err:
        LSWMKC.load(newer)
    msg = str(err.value)
    assert str(newer) in msg and f"format version {FORMAT_VERSION + 1}" in msg and "9.0.0" in msg
    assert f"up to {FORMAT_VERSION}" in msg and "upgrade" in msg


def test_foreign_files_are_refused(yale_model, tmp_path):
    model, _ = yale_model
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    np.save(tmp_path / "one.npy", np.arange(3))
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    (tmp_path / "t.csv").write_text("1,2\n3,4\n")
    for name, why in (("other.npz", "a NumPy .npz archive"), ("one.npy", "single NumPy array"),
                      ("m.pkl", "a pickle"), ("t.csv", "not a safetensors file")):
        with pytest.raises(ModelFileError, match="is not an lswmkc model file") as err:
            LSWMKC.load(tmp_path / name)
        assert str(tmp_path / name) in str(err.value) and why in str(err.value)
    with pytest.raises(FileNotFoundError, match="without a model file model.safetensors"):
        LSWMKC.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="model file not found"):
        LSWMKC.load(tmp_path / "missing.npz")
    # a model file with a member taken out: damaged, named
    good = model.save(tmp_path / "good.npz")
    tensors, meta = members_of(good)
    del tensors["kstar_factor_"]
    rewritten((tensors, meta), tmp_path / "cut.npz")
    with pytest.raises(ModelFileError, match=r"cut\.npz is an incomplete lswmkc model file: no kstar_factor_"):
        LSWMKC.load(tmp_path / "cut.npz")


def test_an_npz_archive_is_not_a_model_file(yale_model, tmp_path):
    """A NumPy .npz archive (whatever its members): refused in one line as not an lswmkc model file, as is
    a fit directory holding one as its model file; `save` replaces it only with overwrite (any regular file)."""
    model, _ = yale_model
    old = tmp_path / "fit" / MODEL_FILE
    old.parent.mkdir()
    with open(old, "wb") as fh:
        np.savez(fh, format=np.asarray("lswmkc-model"), format_version=np.asarray(1), labels_=model.labels_)
    for path in (old, old.parent):
        with pytest.raises(ModelFileError) as err:
            LSWMKC.load(path)
        assert str(err.value).startswith(f"{old} is not an lswmkc model file (a NumPy .npz archive)")
    with pytest.raises(FileExistsError, match="already exists"):
        model.save(old)
    model.save(old, overwrite=True)  # (no content recogniser: a regular file is replaced with overwrite)
    np.testing.assert_array_equal(LSWMKC.load(old).labels_, model.labels_)


def test_a_sweep_directory_says_it_holds_no_model(yale_store, tmp_path, capsys):
    """A sweep's directory given as a model (LSWMKC.load, `lswmkc predict`): one line that says a sweep
    keeps no model and how to get one (each run's, the chosen grid point's); every run loads, its model
    the fit's, unwarned."""
    import warnings

    from lswmkc_dask import selected_model, sweep

    sweep(yale_store, tmp_path / "sweep", alphas=[8.0], n_init=2, max_iter=3, min_iter=2, snapshot_iterations=[0, 2])
    capsys.readouterr()  # (the sweep's progress)
    with pytest.raises(FileNotFoundError, match="is a sweep directory, which holds no model") as err:
        LSWMKC.load(tmp_path / "sweep")
    assert f"selected_model({str(tmp_path / 'sweep')!r}).fit(X).save(FILE)" in str(err.value)
    assert f"{tmp_path / 'sweep'}/runs/NAME" in str(err.value)
    run = tmp_path / "sweep" / "runs" / "alpha=8_c=5"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = LSWMKC.load(run)
    report = json.loads((run / "report.json").read_text())
    np.testing.assert_array_equal(loaded.labels_, read_labels_csv(run / "labels.csv"))
    np.testing.assert_array_equal(loaded.kernel_weights_, report["kernel_weights"])
    assert (loaded.alpha, loaded.n_neighbors, loaded.n_iter_) == (8.0, 5, report["n_iter"])
    assert main(["predict", str(tmp_path / "sweep"), str(tmp_path / "new.npz"), "--output",
                 str(tmp_path / "new.csv")]) == 2
    err_line = capsys.readouterr().err.strip().splitlines()
    assert len(err_line) == 1 and "is a sweep directory, which holds no model" in err_line[0]
    chosen = selected_model(tmp_path / "sweep")
    assert (chosen.alpha, chosen.n_neighbors) == (8.0, 5)


def _split_file(path):
    """The parsed header (tensor entries and metadata) of the safetensors file ``path`` and its tensor bytes."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    return json.loads(raw[8:8 + size]), raw[8 + size:]


def test_a_run_model_file_from_the_record_is_the_one_save_writes(yale, tmp_path, monkeypatch):
    """A sweep writes each run's model file from its fit's record and parameters, building no estimator:
    the file LSWMKC.save writes of the estimator built from them (the same header, entries and
    metadata, and the same tensor bytes; snapshots included), and it loads as that estimator."""
    from lswmkc_dask import prepare
    from lswmkc_dask.engine.fit import fit_store
    from lswmkc_dask.grid._routes import _finish, _point_params
    from lswmkc_dask.grid.results import GridPoint
    from lswmkc_dask.io import model_file
    from lswmkc_dask.records import FitOptions

    kernels, _ = yale
    params = dict(n_clusters=15, max_iter=3, min_iter=2, n_init=2, snapshot_iterations=(0, 2))
    result = fit_store(prepare(kernels), FitOptions(alpha=8.0, n_neighbors=5, **params))
    monkeypatch.setattr(model_file, "utc_now", lambda: "2026-01-01T00:00:00Z")  # the one entry that differs
    _, fitted, _ = _finish(result, _point_params(GridPoint(alpha=8.0, n_neighbors=5), params), None)
    record = model_file.write_model(tmp_path / "record.safetensors", *fitted)
    estimator = LSWMKC.from_result(result, alpha=8.0, n_neighbors=5, gamma="auto", **params)
    saved = estimator.save(tmp_path / "saved.safetensors")
    (head, data), (saved_head, saved_data) = (_split_file(path) for path in (record, saved))
    assert head == saved_head and data == saved_data  # (safetensors orders the metadata anew in every file)
    tensors, meta = members_of(record)
    assert {"snapshot0_data", "snapshot2_factor", "kernel_weights_"} <= set(tensors)
    assert json.loads(meta["params"]) == {k: v for k, v in json.loads(json.dumps(estimator.get_params())).items()
                                          if k != "client"}
    loaded = LSWMKC.load(record)
    assert loaded.get_params() == {**estimator.get_params(), "snapshot_iterations": [0, 2]}
    np.testing.assert_array_equal(loaded.kstar_factor_, estimator.kstar_factor_)


def test_save_follows_the_output_rules(yale_model, tmp_path):
    model, _ = yale_model
    path = model.save(tmp_path / "m.npz")
    with pytest.raises(FileExistsError, match="already exists"):
        model.save(path)
    before = path.stat().st_ino
    model.save(path, overwrite=True)  # its own model file: replaced (a new file renamed into place)
    assert path.stat().st_ino != before
    np.testing.assert_array_equal(LSWMKC.load(path).labels_, model.labels_)
    foreign = tmp_path / "notes.npz"
    np.savez(foreign, x=np.ones(2))
    foreign_bytes = foreign.read_bytes()
    with pytest.raises(FileExistsError, match="already exists"):
        model.save(foreign)
    assert foreign.read_bytes() == foreign_bytes
    model.save(foreign, overwrite=True)  # any regular file is replaced with overwrite
    assert foreign.read_bytes() != foreign_bytes
    (tmp_path / "link.npz").symlink_to(path)
    with pytest.raises(ForeignOutputError, match="symbolic link"):
        model.save(tmp_path / "link.npz", overwrite=True)
    assert (tmp_path / "link.npz").is_symlink()
    (tmp_path / "link.npz").unlink()
    with pytest.raises(ForeignOutputError, match="is a directory"):
        model.save(tmp_path, overwrite=True)
    with pytest.raises(NotFittedError, match="call fit before saving"):
        LSWMKC(3).save(tmp_path / "unfitted.npz")
    unusual = LSWMKC(15, random_state=np.random.RandomState(0))
    for attr in ("labels_", "kernel_weights_", "kstar_factor_", "embedding_", "gamma_", "objective_",
                 "kstar_change_", "n_iter_", "converged_", "n_clusters_", "affinity_"):
        setattr(unusual, attr, getattr(model, attr))
    with pytest.raises(TypeError, match="random_state"):
        unusual.save(tmp_path / "rs.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz", "notes.npz"]  # no temporaries left


def test_cli_fit_output_then_plot(yale, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    _, labels = yale
    out = tmp_path / "fit"
    assert main(["fit", "--dataset", "yale", "--alpha", "8", "--n-init", "20", "--quiet", "--output", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {".lswmkc-output", "report.json", "labels.csv", MODEL_FILE}
    assert capsys.readouterr().out.strip().endswith(f"wrote {out}/report.json, labels.csv, model.safetensors")
    model = LSWMKC.load(out)  # the directory: its model.safetensors
    assert_no_pickle_needed(out / MODEL_FILE)
    # the run's arrays are the model's
    z, w = run_arrays(out, model.labels_.shape[0])
    assert (z != model.affinity_).nnz == 0
    np.testing.assert_array_equal(w, model.kstar_factor_)
    np.testing.assert_array_equal(read_labels_csv(out / "labels.csv"), model.labels_)
    report = json.loads((out / "report.json").read_text())
    np.testing.assert_allclose(report["kernel_weights"], model.kernel_weights_, rtol=1e-15)
    assert report["metrics"]["paper"] == pytest.approx(model.evaluate(labels, protocol="paper"), abs=0)
    assert model.alpha == 8 and model.n_init == 20 and model.n_clusters_ == 15
    capsys.readouterr()

    assert main(["plot", str(out)]) == 0
    names = ["convergence.png", "kernel_weights.png", "affinity_heatmap.png", "kstar_heatmap.png"]
    printed = capsys.readouterr().out
    for name in names:
        png = out / "plots" / name
        assert f"wrote {png}" in printed
        assert png_by_lswmkc(png)
        img = imread(png)
        assert img.shape[0] >= 300 and img.shape[1] >= 400 and float(img[..., :3].std()) > 0.05, name
    assert sorted(p.name for p in (out / "plots").iterdir()) == sorted(names)
    # the model still loads from the directory with its plots inside
    np.testing.assert_array_equal(LSWMKC.load(out).labels_, model.labels_)
    assert main(["plot", str(out), "--alpha", "64"]) == 2
    assert "is not the alpha of the fit" in capsys.readouterr().err


def test_plot_fit_directory_without_arrays(yale_model, tmp_path):
    """A fit directory of an older version (report and labels only): convergence and weights, the heatmaps
    left out with a warning naming the missing files."""
    pytest.importorskip("matplotlib")
    from lswmkc_dask.plots import plot_fit
    from lswmkc_dask.report.record import fit_report, write_fit_output

    model, labels = yale_model
    old = write_fit_output(tmp_path / "old", fit_report(model.result_, model.get_params(), labels), model.labels_)
    with pytest.warns(UserWarning, match=r"no model\.safetensors: the Z and K\* heatmaps are left out"):
        written = plot_fit(old)
    assert [p.name for p in written] == ["convergence.png", "kernel_weights.png"]
    with pytest.raises(FileNotFoundError, match="is not a fit directory"):
        plot_fit(tmp_path)

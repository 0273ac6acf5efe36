"""Model files, fit and sweep directories from elsewhere, damaged or made to harm: `LSWMKC.load` and
`lswmkc plot DIR` refuse them with an error naming the file (and the member), in bounded
memory and time; never a crash, a hang, a raw exception or a silently wrong model or figure.

Every hostile file is built here from a small real model (YALE, 3 iterations) saved with
`save` (a safetensors file), its tensors or metadata rewritten. What could crash the
interpreter (CSR indices out of range), hang it (a FIFO) or take gigabytes (a header
declaring them) runs in a subprocess, so that the old behaviour fails the test
rather than pytest; `lswmkc plot` on a truncated file runs in this process.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
import safetensors.numpy
from safetensors import safe_open
from _helpers import env, lswmkc, lswmkc_main

from lswmkc_dask import LSWMKC
from lswmkc_dask.io.model_file import ModelFileError
from lswmkc_dask.io.model_file import MODEL_FILE
from lswmkc_dask.io.npz import ArrayFileError, NpzArchive
from lswmkc_dask.io.run_arrays import read_snapshots, run_arrays
from lswmkc_dask.report.record import fit_report, write_fit_output


@pytest.fixture(scope="module")
def small(yale, tmp_path_factory):
    """A small fitted model, its file and its members."""
    kernels, labels = yale
    model = LSWMKC(15, alpha=8, n_init=2, min_iter=2, max_iter=3).fit(kernels)
    path = model.save(tmp_path_factory.mktemp("model") / "good.npz")
    with safe_open(str(path), "np") as f:
        members = {k: f.get_tensor(k) for k in f.keys()} | f.metadata()
    return model, labels, path, members


def tampered(members, path, **changes):
    """``members`` with ``changes`` (None: left out; text: a metadata entry; an array: a tensor) written
    to ``path`` as `save` writes them."""
    out = {k: v for k, v in members.items() if k not in changes}
    out.update({k: v for k, v in changes.items() if v is not None})
    tensors = {k: np.ascontiguousarray(v) for k, v in out.items() if isinstance(v, np.ndarray)}
    path.write_bytes(safetensors.numpy.save(tensors, {k: v for k, v in out.items() if isinstance(v, str)}))
    return path


def with_header(good, path, change=None, text=None):
    """``good``'s bytes with its JSON header changed by ``change(header)`` (or replaced by ``text``):
    declared, not checked."""
    raw = good.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    if text is None:
        header = json.loads(raw[8:8 + size])
        change(header)
        text = json.dumps(header)
    path.write_bytes(len(text.encode()).to_bytes(8, "little") + text.encode() + raw[8 + size:])
    return path


def _nested(depth):
    return "[" * depth + "]" * depth


def _no_positive(a):
    return np.where(a > 0, np.nan, a)


def _params(m, **changes):
    return json.dumps(dict(json.loads(m["params"]), **changes))


#: name -> (member named in the refusal, the members changed, from the good ones).
CASES = {
    "nan weights": ("kernel_weights_", lambda m: {"kernel_weights_": np.full_like(m["kernel_weights_"], np.nan)}),
    "weights not unit norm": ("kernel_weights_", lambda m: {"kernel_weights_": 2 * m["kernel_weights_"]}),
    "complex factor": ("kstar_factor_", lambda m: {"kstar_factor_": m["kstar_factor_"].astype(np.complex64)}),
    "1-D factor": ("kstar_factor_", lambda m: {"kstar_factor_": m["kstar_factor_"][:, 0].copy()}),
    "factor of other rows": ("kstar_factor_", lambda m: {"kstar_factor_": m["kstar_factor_"][:-1]}),
    "nan embedding": ("embedding_", lambda m: {"embedding_": _no_positive(m["embedding_"])}),
    "string labels": ("labels_", lambda m: {"labels_": json.dumps(m["labels_"].astype(str).tolist())}),
    "labels out of range": ("labels_", lambda m: {"labels_": m["labels_"] - 1}),
    "zero clusters": ("n_clusters_", lambda m: {"n_clusters_": "0"}),
    "converged as text": ("converged_", lambda m: {"converged_": '"False"'}),
    "negative format version": ("format_version", lambda m: {"format_version": "-7"}),
    "n_iter as text": ("n_iter_", lambda m: {"n_iter_": '"abc"'}),
    "nested params": ("params", lambda m: {"params": "[" * 100_000 + "]" * 100_000}),
    "nested n_iter": ("n_iter_", lambda m: {"n_iter_": "[" * 100_000 + "]" * 100_000}),
    "nested format_version": ("format_version", lambda m: {"format_version": "[" * 100_000 + "]" * 100_000}),
    "params not accepted": ("params", lambda m: {"params": _params(m, n_clusters="abc")}),
    "pickled member": ("gamma_", lambda m: {"gamma_": pickle.dumps([object()] * m["gamma_"].size).decode("latin1")}),
    "gamma_ as text": ("gamma_", lambda m: {"gamma_": json.dumps(m["gamma_"].astype(str).tolist())}),
    "inf objective": ("objective_", lambda m: {"objective_": np.full_like(m["objective_"], np.inf)}),
    "Z not on the simplex": ("affinity_data", lambda m: {"affinity_data": 2 * m["affinity_data"]}),
    "nan in Z": ("affinity_data", lambda m: {"affinity_data": _no_positive(m["affinity_data"])}),
    "Z of other size": ("affinity_shape", lambda m: {"affinity_shape": "[166, 166]"}),
    "indptr too short": ("affinity_indptr", lambda m: {"affinity_indptr": m["affinity_indptr"][:-1]}),
    "float indices": ("affinity_indices", lambda m: {"affinity_indices": m["affinity_indices"].astype(float)}),
    "names of other kernels": ("kernel_names_", lambda m: {"kernel_names_": json.dumps(json.loads(m["kernel_names_"])[:-1])}),
    "a kernel kept twice": ("kernel_index_", lambda m: {"kernel_index_": np.zeros_like(m["kernel_index_"])}),
    "no kernel_diag_": ("kernel_diag_", lambda m: {"kernel_diag_": None}),
    "no cluster_centers_": ("cluster_centers_", lambda m: {"cluster_centers_": None}),
    "no n_kernels_in_": ("n_kernels_in_", lambda m: {"n_kernels_in_": None}),
    "no kernel_col_means_": ("kernel_col_means_", lambda m: {"kernel_col_means_": None}),
}


@pytest.mark.parametrize("case", CASES)
def test_hostile_member_is_refused_naming_file_and_member(small, tmp_path, case):
    _, _, _, members = small
    member, change = CASES[case]
    path = tampered(members, tmp_path / "bad.npz", **change(members))
    with pytest.raises(ModelFileError) as err:
        LSWMKC.load(path)
    msg = str(err.value)
    assert str(path) in msg and repr(member) in msg, msg
    assert "\n" not in msg


def _shape(name, shape):
    def change(header):
        header[name]["shape"] = list(shape)
    return change


def test_declared_shape_checked_before_anything_is_allocated(small, tmp_path):
    """A header declaring 10**12 values (8 TB) over 1,320 bytes of data: refused unread, no MemoryError."""
    _, _, good, members = small
    path = with_header(good, tmp_path / "huge.npz", _shape("gamma_", (10**12,)))
    with pytest.raises(ModelFileError, match=r"huge\.npz: member 'gamma_' declares shape \(1000000000000,\) of F64"):
        LSWMKC.load(path)
    # the right shape, but fewer bytes than it declares
    path = tampered(members, tmp_path / "short.npz", gamma_=members["gamma_"][:1])
    path = with_header(path, tmp_path / "short.npz", _shape("gamma_", (165,)))
    with pytest.raises(ModelFileError, match=r"member 'gamma_' declares shape \(165,\) of F64 \(1320 bytes\) but "
                                             r"holds 8 bytes"):
        LSWMKC.load(path)
    # a shape that matches its bytes, but not the other members
    path = tampered(members, tmp_path / "other.npz", gamma_=members["gamma_"][:1])
    with pytest.raises(ModelFileError, match=r"member 'gamma_' has shape \(1,\), expected \(165,\)"):
        LSWMKC.load(path)


def test_truncated_model_file_is_damaged(small, tmp_path):
    _, _, good, _ = small
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ModelFileError, match=r"cut\.npz: member '\w+' declares bytes \d+ to \d+, beyond the \d+ "
                                             r"bytes of data \(truncated\?\)"):
        LSWMKC.load(cut)


def test_unknown_members_are_left_unread_with_a_warning(small, tmp_path):
    model, _, _, members = small
    path = tampered(members, tmp_path / "extra.npz", notes=np.arange(3))
    with pytest.warns(UserWarning, match=r"members this lswmkc-dask does not know, left out: notes"):
        loaded = LSWMKC.load(path)
    np.testing.assert_array_equal(loaded.labels_, model.labels_)
    assert (loaded.affinity_ != model.affinity_).nnz == 0


def _label_100(m):
    labels = m["labels_"].copy()
    labels[0] = 100
    return labels


#: name -> (member named in the refusal, what it says (a regex), the members changed): members each
#: valid alone that disagree with each other, or parameters that fit refuses.
DISAGREEMENTS = {
    "labels beyond n_clusters_": ("labels_", r"outside \[0, 14\] \(from 0 to 100\), but n_clusters_ is 15",
                                  lambda m: {"labels_": _label_100(m)}),
    "embedding of 3 columns": ("embedding_", r"has 3 columns, but n_clusters_ is 15",
                               lambda m: {"embedding_": m["embedding_"][:, :3].copy()}),
    "embedding of no column": ("embedding_", r"has 0 columns, but n_clusters_ is 15",
                               lambda m: {"embedding_": m["embedding_"][:, :0].copy()}),
    "factor 1e200 times": ("kstar_factor_", r"squared norm inf \(K\*_ii .* above sqrt\(n\) = 12.84",
                           lambda m: {"kstar_factor_": m["kstar_factor_"] * 1e200}),
    "negative gamma": ("gamma_", r"has 165 negative values .* gamma_i of Eq. \(27\) is >= 0",
                       lambda m: {"gamma_": -m["gamma_"]}),
    "alpha fit refuses": ("params", r"alpha.* 1e\+?308", lambda m: {"params": _params(m, alpha=1e308)}),
    "n_neighbors beyond n": ("params", r"n_neighbors .*n_samples - 2 = 163\], got 500",
                             lambda m: {"params": _params(m, n_neighbors=500)}),
    "min_iter above max_iter": ("params", r"min_iter", lambda m: {"params": _params(m, min_iter=5)}),
    "n_clusters other than n_clusters_": ("n_clusters_", r"is 15, but the parameters give n_clusters = 16",
                                          lambda m: {"params": _params(m, n_clusters=16)}),
    "gamma_ not the scalar gamma": ("gamma_", r"the parameters give one scalar gamma = 0.5",
                                    lambda m: {"params": _params(m, gamma=0.5)}),
    "n_features_in_ of another n": ("n_features_in_", r"is 164, but labels_ has n = 165 samples",
                                    lambda m: {"n_features_in_": "164"}),
}


@pytest.mark.parametrize("case", DISAGREEMENTS)
def test_members_that_disagree_are_refused(small, tmp_path, case):
    """Each member valid alone, but not with the others (or parameters fit refuses): refused in one line
    naming the member and the disagreement, rather than loaded to fail (or mislead) later."""
    _, _, _, members = small
    member, why, change = DISAGREEMENTS[case]
    path = tampered(members, tmp_path / "bad.npz", **change(members))
    with pytest.raises(ModelFileError) as err:
        LSWMKC.load(path)
    msg = str(err.value)
    assert str(path) in msg and f"member {member!r}" in msg and re.search(why, msg), msg
    assert "\n" not in msg


def test_a_member_twice_in_the_header_is_refused(small, tmp_path):
    """JSON readers differ on which of two entries of one name they take (safetensors: the last): refused,
    in the tensors' entries and in the metadata."""
    _, _, good, _ = small
    header = json.loads(good.read_bytes()[8:8 + int.from_bytes(good.read_bytes()[:8], "little")])
    meta = header.pop("__metadata__")
    twice = json.dumps(header)[:-1] + ', "labels_": ' + json.dumps(header["labels_"]) + ', "__metadata__": ' \
        + json.dumps(meta) + "}"
    path = with_header(good, tmp_path / "twice.npz", text=twice)
    with pytest.raises(ModelFileError, match=r"twice\.npz: member 'labels_' appears 2 times in the header"):
        LSWMKC.load(path)
    twice = json.dumps(dict(header, __metadata__=meta))[:-2] + ', "n_clusters_": "16"}}'
    path = with_header(good, tmp_path / "twice.npz", text=twice)
    with pytest.raises(ModelFileError, match=r"twice\.npz: member 'n_clusters_' appears 2 times in the header"):
        LSWMKC.load(path)


def test_many_unknown_members_and_parameters_warn_briefly(small, tmp_path):
    """2,000 unknown members and parameters: each warning names the first five and counts the rest."""
    _, _, _, members = small
    path = tampered(members, tmp_path / "extra.npz", params=_params(members, **{f"p{i:04d}": i for i in range(2000)}),
                    **{f"x{i:04d}": "" for i in range(2000)})
    with pytest.warns(UserWarning) as caught:
        LSWMKC.load(path)
    texts = sorted(str(w.message) for w in caught)
    assert len(texts) == 2 and all(len(t) < 200 + len(str(path)) for t in texts), texts
    assert texts[0].endswith("members this lswmkc-dask does not know, left out: x0000, x0001, x0002, "
                             "x0003, x0004 and 1995 more (2000 in all)"), texts
    assert texts[1].endswith("parameters this lswmkc-dask does not know, left out: p0000, p0001, p0002, p0003, "
                             "p0004 and 1995 more (2000 in all)"), texts


def _npy(header, data=b""):
    """A .npy file of ``header`` (text, padded as numpy pads it) and ``data``."""
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


def test_the_file_is_read_once_from_one_header(small, tmp_path, monkeypatch):
    """A file rewritten while `load` runs cannot make it allocate what no header it checked declared: the
    file is opened once and read once, its header parsed from those bytes and the tensors made from the
    same bytes. (Here every second opening of the file would see a header declaring 10**15 values.)"""
    _, _, good, _ = small
    path = tmp_path / "m.npz"
    path.write_bytes(good.read_bytes())
    swapped = with_header(good, tmp_path / "swapped.npz", _shape("gamma_", (10**15,)))
    opened = collections.Counter()
    real_open = os.open

    def open_counted(name, *args, **kwargs):
        if os.fspath(name) == str(path):
            opened[str(path)] += 1
            if opened[str(path)] > 1:
                name = swapped
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_counted)
    loaded = LSWMKC.load(path)
    monkeypatch.undo()
    assert loaded.labels_.shape == (165,) and opened == {str(path): 1}, opened


def _npy(header, data=b""):
    """A .npy file of ``header`` (text, padded as numpy pads it) and ``data``."""
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + data


def test_an_unreadable_header_is_refused_naming_the_file(small, tmp_path):
    """A header cut inside (as a rewrite caught half-way leaves it): refused as damaged, named; and a .npy
    header cut inside its shape in a user's .npz (numpy's tokenizer raises TokenError, the file's fault)."""
    _, _, good, _ = small
    text = good.read_bytes()[8:8 + int.from_bytes(good.read_bytes()[:8], "little")].decode()
    path = with_header(good, tmp_path / "cut.npz", text=text[:len(text) // 2])
    with pytest.raises(ModelFileError, match=r"cut\.npz is damaged: its header is not readable JSON"):
        LSWMKC.load(path)
    cut = b"{'descr': '<f8', 'fortran_order': False, 'shape': (165, "
    import zipfile

    with zipfile.ZipFile(tmp_path / "cut.npz", "w") as zf:
        zf.writestr("x.npy", _npy(cut, bytes(8 * 165)))
    with NpzArchive(tmp_path / "cut.npz") as archive, pytest.raises(
            ArrayFileError, match=r"cut\.npz: member 'x' has no readable \.npy header"):
        archive.read("x", "f", (165,))


def test_fit_directory_arrays_read_back_exactly_and_checked(small, tmp_path):
    """The checked readers of `lswmkc plot` give back what `fit --output` wrote (Z, W and the snapshots, all
    in model.safetensors), and refuse it against another n (naming the file and the member)."""
    model, labels, _, _ = small
    fit = write_fit_output(tmp_path / "fit", fit_report(model.result_, model.get_params(), labels), model.labels_,
                           model=(vars(model), model.get_params(deep=False)))
    assert sorted(p.name for p in fit.iterdir()) == [".lswmkc-output", "labels.csv", MODEL_FILE, "report.json"]
    n = model.labels_.shape[0]
    z, w = run_arrays(fit, n)
    assert z.shape == (n, n) and (z != model.affinity_).nnz == 0
    np.testing.assert_array_equal(w, model.kstar_factor_)
    assert read_snapshots(fit, n) == {}  # none asked for
    with pytest.raises(ModelFileError, match=r"model\.safetensors: member 'labels_' holds 165 samples, but the "
                                             r"run's labels are 164"):
        run_arrays(fit, n - 1)


# --- in a subprocess: what crashed, hung or took gigabytes ------------------------------

#: Load the file; exit 3 with the message on ModelFileError, else use Z (where bad indices crash).
LOAD = """
import sys
from lswmkc_dask import LSWMKC
from lswmkc_dask.io.model_file import ModelFileError
try:
    m = LSWMKC.load(sys.argv[1])
except ModelFileError as exc:
    print(exc)
    sys.exit(3)
z = m.affinity_
print("loaded", z.toarray().sum(), (z @ z.T).sum())
"""


def load_in_subprocess(path, timeout=120):
    return subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, env=env(),
                          timeout=timeout, check=False)


def _csr_cases(m):
    n = m["labels_"].shape[0]
    far = m["affinity_indices"].astype(np.int64)
    far[n] = 10**8
    neg = m["affinity_indices"].copy()
    neg[0] = -1
    ptr = m["affinity_indptr"].astype(np.int64)
    ptr[n // 2] = 10**8
    down = m["affinity_indptr"].copy()
    down[3], down[4] = down[4], down[3]
    return {"index 10**8": ("affinity_indices", {"affinity_indices": far}),
            "negative index": ("affinity_indices", {"affinity_indices": neg}),
            "indptr 10**8": ("affinity_indptr", {"affinity_indptr": ptr}),
            "decreasing indptr": ("affinity_indptr", {"affinity_indptr": down})}


CSR_CASES = ["index 10**8", "negative index", "indptr 10**8", "decreasing indptr"]


@pytest.mark.integration
@pytest.mark.parametrize("case", CSR_CASES)
def test_csr_parts_out_of_range_are_refused_not_crashing(small, tmp_path, case):
    _, _, _, members = small
    _, changes = _csr_cases(members)[case]
    path = tampered(members, tmp_path / "bad.npz", **changes)
    run = load_in_subprocess(path)
    assert run.returncode == 3, (run.returncode, run.stdout, run.stderr)  # -11: SIGSEGV
    assert str(path) in run.stdout and "'affinity_indices'" in run.stdout and "do not form" in run.stdout


@pytest.fixture
def fit_dir(small, tmp_path):
    """A fit directory as `lswmkc fit --output` writes it."""
    model, labels, _, _ = small
    return write_fit_output(tmp_path / "fit", fit_report(model.result_, model.get_params(), labels), model.labels_,
                            model=(vars(model), model.get_params(deep=False)))


@pytest.mark.integration
@pytest.mark.parametrize("case", CSR_CASES)
def test_plot_refuses_z_parts_out_of_range(small, fit_dir, case):
    pytest.importorskip("matplotlib")
    _, _, _, members = small
    _, changes = _csr_cases(members)[case]
    tampered(members, fit_dir / MODEL_FILE, **changes)
    run = lswmkc("plot", fit_dir, check=False)
    assert run.returncode == 2, (run.returncode, run.stderr)  # -11: SIGSEGV
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert str(fit_dir / MODEL_FILE) in run.stderr and "'affinity_indices'" in run.stderr


def test_plot_on_a_truncated_model_file_says_damaged(fit_dir):
    # (a short read cannot crash the interpreter: `lswmkc plot` runs in this process)
    pytest.importorskip("matplotlib")
    target = fit_dir / MODEL_FILE
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    run = lswmkc_main("plot", fit_dir)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert str(target) in run.stderr and "damaged" in run.stderr


@pytest.fixture(scope="module")
def sweep_template(tmp_path_factory):
    """A small sweep directory with labels and a k grid (k = 2, 3; alphas 1 and 8), in this process."""
    from lswmkc_dask.grid.sweep import sweep

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (30, 3)) + c for c in ([0, 0, 0], [5, 0, 0], [0, 5, 0])])
    kernels = np.stack([np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / s) for s in (2.0, 8.0)])
    out = tmp_path_factory.mktemp("sweep") / "sw"
    sweep(kernels, out, labels=np.repeat([0, 1, 2], 30), n_clusters=[2, 3], alphas=[1.0, 8.0], max_iter=3,
          min_iter=2, n_init=2, progress=False)
    return out


@pytest.fixture
def result_dirs(fit_dir, sweep_template, tmp_path):
    """``{"fit": a fit directory, "sweep": a copy of the sweep directory}``, each to be spoilt by a test."""
    import shutil

    return {"fit": fit_dir, "sweep": shutil.copytree(sweep_template, tmp_path / "sw")}


def _refused(directory, target):
    """`lswmkc plot directory` in this process: exit 2 and one line naming ``target``; the line."""
    pytest.importorskip("matplotlib")
    run = lswmkc_main("plot", directory)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(target) in lines[0], lines
    return lines[0]


#: (directory, file) of every file `lswmkc plot` reads there (model.safetensors: every array of a run).
RESULT_FILES = [("fit", "report.json"), ("fit", "labels.csv"), ("fit", MODEL_FILE), ("sweep", "sweep.json"),
                ("sweep", "summary.json"), ("sweep", "runs/alpha=1_c=5/" + MODEL_FILE),
                ("sweep", "labels_true.csv"), ("sweep", "runs/alpha=8_c=5/report.json")]


@pytest.mark.timeout(60)  # (a FIFO used to be waited on forever: the timeout fails the test instead)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("special", ["FIFO", "device"])
@pytest.mark.parametrize(("kind", "name"), RESULT_FILES)
def test_plot_refuses_a_fifo_or_device_in_a_result_directory(result_dirs, kind, name, special):
    target = result_dirs[kind] / name
    if os.path.lexists(target):
        target.unlink()
    if special == "FIFO":
        os.mkfifo(target)
    else:
        target.symlink_to(os.devnull)
    line = _refused(result_dirs[kind], target)
    assert ("is a FIFO (named pipe)" if special == "FIFO" else "is a device") in line, line


def _selected_without(key):
    def spoil(path):
        summary = json.loads(path.read_text())
        del summary["selected"][key]
        return json.dumps(summary)
    return spoil


#: (directory, file, its new content or how to make it from the old, what the refusal says).
DAMAGED = {
    "deep report": ("fit", "report.json", _nested(100_000), "is JSON nested too deeply"),
    "report an array": ("fit", "report.json", "[1,2,3]", "holds a JSON array, not an object"),
    "report not JSON": ("fit", "report.json", "{nope", "is not valid JSON (Expecting property name"),
    "params as text": ("fit", "report.json", '{"params": "alpha=8"}', "has 'params' = \"alpha=8\", not an object"),
    "2 labels": ("fit", "labels.csv", "sample,predicted_label\n0,1\n1,0\n", "holds 2 labels, but "),
    "sweep.json an array": ("sweep", "sweep.json", "[]", "holds a JSON array, not an object"),
    "deep summary": ("sweep", "summary.json", _nested(100_000), "is JSON nested too deeply"),
    "selected without score": ("sweep", "summary.json", _selected_without("score"), "has no selected 'score' entry"),
    "run report an array": ("sweep", "runs/alpha=1_c=5/report.json", "[1,2,3]", "holds a JSON array"),
    "true labels binary": ("sweep", "labels_true.csv", "\udcff", "is not UTF-8 text"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", DAMAGED)
def test_plot_refuses_damaged_json_or_labels_naming_the_file(result_dirs, case):
    kind, name, content, says = DAMAGED[case]
    target = result_dirs[kind] / name
    text = content(target) if callable(content) else content
    target.write_bytes(text.encode("utf-8", "surrogateescape"))
    line = _refused(result_dirs[kind], target)
    assert says in line and "damaged or was not written by lswmkc" in line, line
    if case == "2 labels":  # blamed on the labels, not on the array read against them
        assert str(result_dirs[kind] / "report.json") in line and MODEL_FILE not in line, line


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "content", "says"), [
    ("compare.json", "[1,2,3]", "holds a JSON array, not an object"),
    ("runs/mkkm/report.json", _nested(100_000), "is JSON nested too deeply"),
], ids=["compare.json an array", "deep run report"])
def test_a_compare_directory_is_read_through_the_same_guard(tmp_path, name, content, says):
    """``lswmkc plot``/``table`` of a compare directory: its JSON refused naming the file (was a
    RecursionError or an AttributeError)."""
    from lswmkc_dask.errors import ResultFileError
    from lswmkc_dask.grid.compare import load_compare
    (tmp_path / "runs" / "mkkm").mkdir(parents=True)
    (tmp_path / "compare.json").write_text("{}")
    (tmp_path / "runs" / "mkkm" / "report.json").write_text("{}")
    (tmp_path / name).write_text(content)
    with pytest.raises(ResultFileError) as info:
        load_compare(tmp_path)
    assert str(tmp_path / name) in str(info.value) and says in str(info.value), info.value


@pytest.mark.timeout(120)
@pytest.mark.parametrize("member", ["kstar_factor_", "snapshot1_factor"])
def test_plot_refuses_values_that_are_not_finite(small, fit_dir, member):
    """A NaN in K*'s factor, an infinite W_t in the snapshots: refused as `load` refuses them, not drawn."""
    model, _, _, members = small
    factor = model.kstar_factor_.copy()
    factor[3, 0] = np.nan if member == "kstar_factor_" else np.inf
    snapshots = {} if member == "kstar_factor_" else {
        "snapshot0_data": members["affinity_data"], "snapshot0_indices": members["affinity_indices"],
        "snapshot0_indptr": members["affinity_indptr"], "snapshot0_weights": members["kernel_weights_"],
        "snapshot1_data": members["affinity_data"], "snapshot1_indices": members["affinity_indices"],
        "snapshot1_indptr": members["affinity_indptr"], "snapshot1_weights": members["kernel_weights_"]}
    tampered(members, fit_dir / MODEL_FILE, **snapshots, **{member: factor})
    line = _refused(fit_dir, fit_dir / MODEL_FILE)
    assert f"member {member!r}" in line and "1 value that are not finite (NaN or infinite)" in line, line


def test_snapshot_members_are_checked(small, fit_dir):
    """Z_t's CSR parts checked in full (as Z's), omega_t of m entries: refused naming the member."""
    _, _, _, members = small
    z = {"snapshot0_data": members["affinity_data"], "snapshot0_indices": members["affinity_indices"],
         "snapshot0_indptr": members["affinity_indptr"][:-1], "snapshot0_weights": members["kernel_weights_"]}
    tampered(members, fit_dir / MODEL_FILE, **z)
    with pytest.raises(ModelFileError, match=r"members 'snapshot0_data', 'snapshot0_indices', 'snapshot0_indptr' "
                                             r"do not form a 165 x 165 CSR matrix"):
        read_snapshots(fit_dir, 165)
    z.update(snapshot0_indptr=members["affinity_indptr"], snapshot0_weights=members["kernel_weights_"][:2])
    tampered(members, fit_dir / MODEL_FILE, **z)
    with pytest.raises(ModelFileError, match=r"member 'snapshot0_weights' has shape \(2,\), expected \(5,\)"):
        read_snapshots(fit_dir, 165)


@pytest.mark.integration
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_refused_without_waiting(small, tmp_path):
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):  # the FIFO, and a fit directory whose model.safetensors is one
        run = load_in_subprocess(path)  # (timeout: it used to wait forever for a writer)
        assert run.returncode == 3, (run.returncode, run.stdout, run.stderr)
        assert f"{fifo} is a FIFO (named pipe), not a regular file" in run.stdout


#: Peak resident memory (MiB) of loading argv[1], after one load of argv[2] (imports and caches).
MEASURE = """
import json, resource, sys, warnings
from lswmkc_dask import LSWMKC
from lswmkc_dask.io.model_file import ModelFileError
LSWMKC.load(sys.argv[2])
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
before = peak()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        LSWMKC.load(sys.argv[1])
        outcome = "loaded"
    except ModelFileError as exc:
        outcome = str(exc)
print(json.dumps({"grew_mib": peak() - before, "outcome": outcome, "warnings": [str(w.message) for w in caught]}))
"""

#: What the hostile header declares: 1.5 GiB.
HUGE_BYTES = 96 << 24


def _huge(name, n):
    def change(header):
        if name in header:
            header[name]["shape"] = [n, HUGE_BYTES // (8 * n)]
        else:  # an unknown tensor, its bytes beyond the end of the file
            end = max(e["data_offsets"][1] for k, e in header.items() if k != "__metadata__")
            header[name] = {"dtype": "F64", "shape": [n, HUGE_BYTES // (8 * n)],
                            "data_offsets": [end, end + 8 * n * (HUGE_BYTES // (8 * n))]}
    return change


@pytest.mark.integration
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
@pytest.mark.parametrize("member", ["evil", "kstar_factor_"])
def test_a_header_declaring_gigabytes_allocates_nothing(small, tmp_path, member):
    """A header declaring a tensor of 1.5 GiB in a file of a few hundred KB (an unknown one, or one of the
    format): refused naming it, and the peak memory grows by far less than 200 MiB."""
    _, _, good, members = small
    path = with_header(good, tmp_path / "huge.npz", _huge(member, members["labels_"].shape[0]))
    assert path.stat().st_size < 16 << 20
    run = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(good)], capture_output=True, text=True,
                         env=env(), timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["grew_mib"] < 200, got
    assert f"member '{member}' declares" in got["outcome"], got

"""CLI consistency and reports: flags, help, prepare's OUTPUT, label files, messages,
the sweep table, plot without matplotlib, pass-through flags and report.json fields.

Each behaviour is checked by running ``lswmkc`` on YALE with few iterations where the
result does not matter: as a user does (a subprocess) for --version, one run of each
command and the environment without matplotlib; the refusals and the other runs through
``cli.main`` in this process (:func:`_helpers.lswmkc_main`: the same exit status and
output, without a Python start-up each).
"""

from __future__ import annotations

import gzip
import inspect
import json
import re
from datetime import datetime, timezone

import numpy as np
import pytest

from _helpers import env, lswmkc, lswmkc_main

import lswmkc_dask
from lswmkc_dask import KernelInputError, LSWMKC, open_store
from lswmkc_dask.cli import RANDOM_STATE, build_parser, cli_message
from lswmkc_dask.errors import Message, Param, ParameterError, with_message
from lswmkc_dask._validate import InvalidParameter
from lswmkc_dask.io import read_labels
from lswmkc_dask.report.record import labels_csv

pytestmark = pytest.mark.timeout(120)

QUICK = ["--max-iter", "2", "--n-init", "2", "--quiet"]
COMMANDS = ("prepare", "fit", "sweep", "plot")
TABLE_HEAD = re.compile(r"^\s*alpha\s+c\s+iter\s+seconds\s+ACC/h", re.M)


def _subparsers(parser):
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


# --- 1. --output everywhere, --version, help on every flag ---------------------------


def test_version_prints_package_version():
    proc = lswmkc("--version")
    assert proc.stdout.strip() == f"lswmkc {lswmkc_dask.__version__}"


def test_every_flag_has_help_in_parser():
    parser = build_parser()
    missing = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
    for name, sub in _subparsers(parser).items():
        for a in sub._actions:
            assert a.help != "==SUPPRESS==", f"{name}: no hidden option, not {a}"
            if not a.help or not a.help.strip():
                missing.append((name, a.option_strings or a.dest))
    assert not missing, f"flags without help: {missing}"


def _help_entries(text):
    """{option line: its help text} of an argparse help screen (options sections only)."""
    lines = text.splitlines()
    entries = {}
    for i, line in enumerate(lines):
        m = re.match(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$", line)
        if not m:
            continue
        helptext = m.group(2) or ""
        if not helptext and i + 1 < len(lines):
            nxt = lines[i + 1]
            if re.match(r"^\s{5,}\S", nxt) and not nxt.strip().startswith("-"):
                helptext = nxt.strip()
        entries[m.group(1)] = helptext
    return entries


@pytest.mark.parametrize("command", COMMANDS)
def test_every_flag_has_help_on_screen(command):
    proc = lswmkc_main(command, "-h", check=True)  # argparse's screen; `lswmkc plot -h` runs as a process below
    entries = _help_entries(proc.stdout)
    sub = _subparsers(build_parser())[command]
    flags = [o for a in sub._actions for o in a.option_strings if a.help != "==SUPPRESS=="]
    shown = " ".join(entries)
    for flag in flags:
        assert re.search(rf"(^|[ ,]){re.escape(flag)}\b", shown), f"{command} -h does not list {flag}"
    empty = [k for k, v in entries.items() if not v]
    assert not empty, f"`lswmkc {command} -h`: no help for {empty}\n{proc.stdout}"
    for flag in ("--max-iter", "--tol", "--random-state", "--quiet", "--alphas", "--eig-threads"):
        if flag in flags:
            assert any(k.startswith(flag) and v for k, v in entries.items()), flag


def test_output_is_the_flag_of_every_command():
    for name, sub in _subparsers(build_parser()).items():
        shown = [o for a in sub._actions for o in a.option_strings if a.help != "==SUPPRESS=="]
        assert "--output" in shown, name
        assert "--out" not in shown, name


# --- 2. prepare --features a b OUT ---------------------------------------------------


@pytest.fixture
def feature_views(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 5)) * 6
    y = np.repeat(np.arange(3), 20)
    paths = []
    for v in range(2):
        x = centres[y] + rng.normal(size=(60, 5))
        paths.append(tmp_path / f"v{v}.csv")
        np.savetxt(paths[-1], x, delimiter=",")
    return paths, y


def test_prepare_features_then_output_last(tmp_path, feature_views):
    (a, b), _ = feature_views
    out = tmp_path / "views.zarr"
    proc = lswmkc("prepare", "--features", a, b, out)
    assert "wrote" in proc.stdout and "2 kernels x 60 samples" in proc.stdout
    assert open_store(out).n_kernels == 2
    # The same with --output, and with the flags in another order.
    lswmkc_main("prepare", "--output", tmp_path / "o2.zarr", "--features", a, b, check=True)
    lswmkc_main("prepare", "--features", a, b, "--kernel", "linear", tmp_path / "o3.zarr", check=True)
    assert open_store(tmp_path / "o2.zarr").n_kernels == 2 and open_store(tmp_path / "o3.zarr").n_kernels == 2


def test_prepare_features_without_output_is_refused(tmp_path, feature_views):
    (a, b), _ = feature_views
    before = sorted(p.name for p in tmp_path.iterdir())
    content = b.read_bytes()
    proc = lswmkc_main("prepare", "--features", a, b, "--overwrite")
    assert proc.returncode == 2
    assert "no OUTPUT store" in proc.stderr and "--output" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before and b.read_bytes() == content
    proc = lswmkc_main("prepare", "--dataset", "yale", "x.zarr", "y.zarr")
    assert proc.returncode == 2 and "give only OUTPUT" in proc.stderr


# --- 3. --labels files ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, text",
    [
        ("y.txt", "1\n2\n2\n3\n"),
        ("y.csv", "0,1\n1,2\n2,2\n3,3\n"),  # numeric first row: a sample, not a header
        ("y.csv", "sample,label\n0,1\n1,2\n2,2\n3,3\n"),
        ("y.csv", "sample,true_label\n0,1\n1,2\n2,2\n3,3\n\n\n"),
        ("y.txt", "label\n1\n2\n2\n3\n"),
        ("y.tsv", "id\tclass\n0\t1\n1\t2\n2\t2\n3\t3\n"),
        ("y.csv", "1e0\n2.0\n2\n3\n"),
    ],
)
def test_read_labels_text_formats(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    np.testing.assert_array_equal(read_labels(path), [1, 2, 2, 3])


def test_read_labels_binary_and_strings(tmp_path):
    np.save(tmp_path / "y.npy", np.array([[1], [2], [3]]))
    np.testing.assert_array_equal(read_labels(tmp_path / "y.npy"), [1, 2, 3])
    np.savez(tmp_path / "y.npz", labels=np.array([4, 5]))
    np.testing.assert_array_equal(read_labels(tmp_path / "y.npz"), [4, 5])
    with gzip.open(tmp_path / "y.csv.gz", "wt") as fh:
        fh.write("sample,label\n0,7\n1,8\n")
    np.testing.assert_array_equal(read_labels(tmp_path / "y.csv.gz"), [7, 8])
    # String labels: the first is a label, not a header (no sample dropped).
    (tmp_path / "s.txt").write_text("cat\ndog\ncat\n")
    assert read_labels(tmp_path / "s.txt").tolist() == ["cat", "dog", "cat"]
    (tmp_path / "s.csv").write_text("sample,label\n0,cat\n1,dog\n")
    assert read_labels(tmp_path / "s.csv").tolist() == ["cat", "dog"]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("gap.txt", b"1\n\n2\n", "line 2 is empty"),
        ("empty_cell.csv", b"0,1\n1,\n", "line 2 has no label"),
        ("nothing.txt", b"\n\n", "holds no labels"),
        ("bin.txt", b"\xff\xfe\x00\x81" * 10, "cannot read labels from"),
        ("bad.npy", b"not an npy file", "cannot read labels from"),
        ("m.npy", None, "must be a vector"),
    ],
)
def test_read_labels_errors_name_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        np.save(path, np.zeros((3, 2)))
    else:
        path.write_bytes(content)
    with pytest.raises(KernelInputError, match=re.escape(message)) as info:
        read_labels(path)
    assert name in str(info.value)


def test_labels_of_another_length_name_the_file(tmp_path, yale):
    _, y = yale
    short = tmp_path / "short.txt"
    np.savetxt(short, y[:10], fmt="%d")
    want = f"labels in {short} have length 10 but the kernels have 165 samples"
    for args in (["prepare", "--dataset", "yale", "--labels", short, tmp_path / "o.zarr"],
                 ["fit", "--dataset", "yale", "--labels", short, *QUICK]):
        proc = lswmkc_main(*args)
        assert proc.returncode == 2, proc.stderr
        assert want in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o.zarr").exists()


def test_labels_file_formats_through_prepare(tmp_path, yale):
    _, y = yale
    perm = np.random.default_rng(1).permutation(y)  # not the store's own labels
    files = {
        "y.txt": "\n".join(map(str, perm)) + "\n",
        "y.csv": "".join(f"{i},{v}\n" for i, v in enumerate(perm)),  # no header: first row kept
        "h.csv": labels_csv(perm, header="true_label"),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    np.save(tmp_path / "y.npy", perm)
    for name in [*files, "y.npy"]:
        out = tmp_path / f"{name}.zarr"
        lswmkc_main("prepare", "--dataset", "yale", "--labels", tmp_path / name, out, check=True)
        np.testing.assert_array_equal(open_store(out).labels, perm, err_msg=name)


# --- 4. the same random_state default ------------------------------------------------


def test_random_state_default_is_the_python_apis():
    from lswmkc_dask.grid.sweep import sweep

    subs = _subparsers(build_parser())
    for name in ("fit", "sweep"):
        action = next(a for a in subs[name]._actions if a.dest == "random_state")
        assert action.default == RANDOM_STATE == 0
        assert "default 0" in action.help
    assert inspect.signature(sweep).parameters["random_state"].default == RANDOM_STATE
    assert inspect.signature(LSWMKC).parameters["random_state"].default == RANDOM_STATE


# --- 5. the sweep table once; 7. plot --output/--out ---------------------------------


@pytest.fixture(scope="module")
def yale_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_sweep") / "sw"
    proc = lswmkc("sweep", "--dataset", "yale", "--alphas", "8", "--max-iter", "2", "--n-init", "2",
                  "--output", out)
    return out, proc


def test_sweep_prints_the_table_once(yale_sweep, tmp_path):
    out, proc = yale_sweep
    # The table is the result: on stdout with or without --quiet (`> results.txt` keeps it).
    assert len(TABLE_HEAD.findall(proc.stdout)) == 1 and not TABLE_HEAD.search(proc.stderr), proc.stdout + proc.stderr
    assert "best_by_honest_ACC: alpha=8" in proc.stdout
    assert f"wrote {out}/summary.csv" in proc.stdout
    quiet = lswmkc_main("sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", tmp_path / "q",
                        check=True)
    assert len(TABLE_HEAD.findall(quiet.stdout)) == 1 and not TABLE_HEAD.search(quiet.stderr)
    assert (out / "labels_true.csv").read_text().splitlines()[1:3] == ["0,1", "1,1"]


def test_plot_output(yale_sweep, tmp_path):
    pytest.importorskip("matplotlib")
    out, _ = yale_sweep
    proc = lswmkc("plot", out, "--output", tmp_path / "a")
    assert "wrote" in proc.stdout and (tmp_path / "a" / "kstar_heatmap.png").is_file()
    assert "--out " not in lswmkc("plot", "-h").stdout  # the pre-release spelling is gone


def test_plot_without_matplotlib_one_line(tmp_path, yale_sweep):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text('raise ImportError("matplotlib is broken here (test)")\n')
    environ = env(PYTHONPATH=str(fake))
    out, _ = yale_sweep
    for args in (["plot", out], ["plot", tmp_path / "no-such-sweep"]):
        proc = lswmkc(*args, check=False, environ=environ)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert "pip install matplotlib" in lines[0] and "lswmkc-dask[plot]" not in lines[0]
        assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not (out / "plots").exists()


# --- 6. messages name flags ----------------------------------------------------------


def test_existing_outputs_name_the_overwrite_flag(tmp_path):
    (tmp_path / "store.zarr").mkdir()
    (tmp_path / "notasweep").mkdir()
    (tmp_path / "notasweep" / "x").write_text("x")
    (tmp_path / "fit").mkdir()
    runs = [
        ["prepare", "--dataset", "yale", tmp_path / "store.zarr"],
        ["sweep", "--dataset", "yale", "--alphas", "8", *QUICK, "--output", tmp_path / "notasweep"],
        ["fit", "--dataset", "yale", *QUICK, "--output", tmp_path / "fit"],
    ]
    for args in runs:
        proc = lswmkc_main(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "--overwrite" in proc.stderr and "overwrite=True" not in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert (tmp_path / "notasweep" / "x").read_text() == "x"


def test_parameter_errors_name_flags():
    proc = lswmkc_main("fit", "--dataset", "yale", "--n-clusters", "1")
    assert proc.returncode == 2
    assert "--n-clusters" in proc.stderr and "n_clusters" not in proc.stderr and "Traceback" not in proc.stderr
    proc = lswmkc_main("prepare", "--dataset", "yale", "--block-rows", "0", "o.zarr")
    assert proc.returncode == 2 and "--block-rows" in proc.stderr and "block_rows" not in proc.stderr


_OVERWRITE = Param("overwrite", True, hint="or")
_DROP = Param("degenerate_kernels", "drop", hint="paren")


@pytest.mark.parametrize(
    "text, python, want",
    [
        (with_message(FileExistsError, "output {} already exists (pass {} to replace it)", "o", _OVERWRITE),
         "output o already exists (pass overwrite=True or --overwrite to replace it)",
         "output o already exists (pass --overwrite to replace it)"),
        (Message("exists and is not a sweep directory (pass {} to replace it)", Param("overwrite", True)),
         "exists and is not a sweep directory (pass overwrite=True to replace it)",
         "exists and is not a sweep directory (pass --overwrite to replace it)"),
        (ParameterError("{} must be an integer in [2, n_samples={}], got {!r}", Param("n_clusters"), 165, 1),
         "n_clusters must be an integer in [2, n_samples=165], got 1",
         "--n-clusters must be an integer in [2, n_samples=165], got 1"),
        (ParameterError("{} must be an integer >= 1, got {!r}", Param("block_rows"), 0),
         "block_rows must be an integer >= 1, got 0", "--block-rows must be an integer >= 1, got 0"),
        (with_message(KernelInputError, "kernel 5 is constant. Remove it, or pass {}", _DROP),
         "kernel 5 is constant. Remove it, or pass degenerate_kernels='drop' (--degenerate-kernels drop)",
         "kernel 5 is constant. Remove it, or pass --degenerate-kernels drop"),
        (with_message(UserWarning, "dropped it ({})", Param("degenerate_kernels", "drop")),
         "dropped it (degenerate_kernels='drop')", "dropped it (--degenerate-kernels drop)"),
        (ParameterError("{} must be a finite number >= 0, got {!r}", Param("alpha"), -2.0),
         "alpha must be a finite number >= 0, got -2.0", "--alpha must be a finite number >= 0, got -2.0"),
        (pytest.param("sklearn", "The 'alpha' parameter of LSWMKC must be a float in the range [0.0, inf). Got -2.0 "
                      "instead.", "--alpha must be a float in the range [0.0, inf). Got -2.0 instead.", id="sklearn")),
        (Message("{} must be an int", Param("n_clusters", python="The 'n_clusters' parameter of LSWMKC")),
         "The 'n_clusters' parameter of LSWMKC must be an int", "--n-clusters must be an int"),
        (Message("{} must be an int", Param("verbose", python="The 'verbose' parameter of LSWMKC")),
         "The 'verbose' parameter of LSWMKC must be an int", "The 'verbose' parameter of LSWMKC must be an int"),
        (with_message(FileNotFoundError, "input file not found: {}", "/data/n_clusters/block_rows.mat"),
         "input file not found: /data/n_clusters/block_rows.mat", "input file not found: /data/n_clusters/block_rows.mat"),
        ("alpha=8 is not in the sweep d; alphas available: 1, 2", "alpha=8 is not in the sweep d; alphas available: 1, 2",
         "alpha=8 is not in the sweep d; alphas available: 1, 2"),
        (FileExistsError("output /x/n_clusters=2/overwrite=True exists (pass overwrite=True)"),
         "output /x/n_clusters=2/overwrite=True exists (pass overwrite=True)",
         "output /x/n_clusters=2/overwrite=True exists (pass overwrite=True)"),
    ],
)
def test_cli_message(text, python, want):
    """A message names its parameters as Python in str() and as flags on the command
    line; plain text (no Param) and paths are never rewritten."""
    if text == "sklearn":  # scikit-learn's own error, mapped by its parameter
        with pytest.raises(InvalidParameter) as info:
            LSWMKC(alpha=-2.0).fit("missing.zarr")
        assert info.value.parameter == "alpha"
        text = info.value
    assert str(text) == python
    assert cli_message(text) == want


# --- 8. pass-through flags; where fit ran --------------------------------------------


def _with_constant_kernel(tmp_path, yale):
    kernels, y = yale
    path = tmp_path / "deg.npz"
    np.savez(path, kernels=np.concatenate([kernels, np.ones((1, 165, 165))]), labels=y)
    return path


def test_prepare_degenerate_kernels_flag(tmp_path, yale):
    path = _with_constant_kernel(tmp_path, yale)
    proc = lswmkc_main("prepare", path, tmp_path / "drop.zarr", "--degenerate-kernels", "drop", check=True)
    assert open_store(tmp_path / "drop.zarr").n_kernels == 5
    assert "lswmkc: warning:" in proc.stderr and "degenerate_kernels=" not in proc.stderr
    proc = lswmkc_main("prepare", path, tmp_path / "err.zarr", "--degenerate-kernels", "error")
    assert proc.returncode == 2 and "--degenerate-kernels drop" in proc.stderr
    assert "degenerate_kernels=" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "err.zarr").exists()
    proc = lswmkc_main("prepare", path, tmp_path / "x.zarr", "--degenerate-kernels", "sometimes")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


@pytest.fixture(scope="module")
def quick_fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_fit") / "fit"
    proc = lswmkc("fit", "--dataset", "yale", "--alpha", "8", *QUICK, "--output", out)
    return out, proc, json.loads((out / "report.json").read_text())


def test_fit_passes_eig_threads_and_degenerate_kernels(tmp_path, yale):
    path = _with_constant_kernel(tmp_path, yale)
    out = tmp_path / "fit"
    lswmkc_main("fit", path, "--alpha", "8", *QUICK, "--eig-threads", "1", "--degenerate-kernels", "drop", "--output", out,
                check=True)
    report = json.loads((out / "report.json").read_text())
    assert report["n_kernels"] == 5
    assert report["params"]["eig_threads"] == 1
    assert report["params"]["degenerate_kernels"] == "drop"


def test_sweep_passes_eig_threads_and_degenerate_kernels(tmp_path, yale):
    path = _with_constant_kernel(tmp_path, yale)
    out = tmp_path / "sw"
    lswmkc_main("sweep", path, "--alphas", "8", *QUICK, "--eig-threads", "1",
                "--degenerate-kernels", "drop", "--output", out, check=True)
    (run,) = (out / "runs").iterdir()
    report = json.loads((run / "report.json").read_text())
    assert report["n_kernels"] == 5


def test_fit_says_where_it_ran(quick_fit):
    _, proc, report = quick_fit
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ran on"))
    assert report["execution"] and line.split(None, 2)[2] == report["execution"]


# --- 9. report.json ------------------------------------------------------------------


def test_report_fields(quick_fit):
    out, _, report = quick_fit
    assert report["lswmkc_dask_version"] == lswmkc_dask.__version__
    created = datetime.strptime(report["created_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - created).total_seconds()) < 600
    assert set(report["protocols"]) == {"honest", "paper"}
    assert "lowest inertia" in report["protocols"]["honest"] and "maximum" in report["protocols"]["paper"]
    g = report["gamma"]
    assert set(g) == {"min", "median", "max", "mean"} and 0 < g["min"] <= g["median"] <= g["max"]
    assert g["min"] <= g["mean"] <= g["max"]
    assert report["iteration_seconds_total"] > 0 and "seconds" not in report  # no pre-release alias
    assert report["seconds_per_iteration"] == pytest.approx(report["iteration_seconds_total"] / report["n_iter"])
    assert report["wall_seconds_total"] >= report["iteration_seconds_total"]
    assert "wall_seconds" not in report
    assert "aliases" not in report
    assert report["params"]["random_state"] == 0
    lines = (out / "labels.csv").read_text().splitlines()
    assert lines[0] == "sample,predicted_label" and len(lines) == 166


def test_labels_csv_headers_and_plot_reader(tmp_path):
    from lswmkc_dask.plots._base import read_labels_csv

    y = np.array([3, 1, 2])
    assert labels_csv(y).splitlines() == ["sample,predicted_label", "0,3", "1,1", "2,2"]
    assert labels_csv(y, header="true_label").splitlines()[0] == "sample,true_label"
    for header in ("predicted_label", "true_label", "label"):
        (tmp_path / "l.csv").write_text(labels_csv(y, header=header))
        np.testing.assert_array_equal(read_labels_csv(tmp_path / "l.csv"), y)
        np.testing.assert_array_equal(read_labels(tmp_path / "l.csv"), y)


# --- the kernel vocabulary: one set of names (and aliases) for every command and the Python API


def test_kernel_vocabulary_is_one_for_cli_and_python():
    from lswmkc_dask import kernels_from_features, sweep
    from lswmkc_dask.grid.compare import compare
    from lswmkc_dask.kernels.features import KERNEL_ALIASES, KERNEL_KINDS

    names = {*KERNEL_KINDS, *KERNEL_ALIASES}
    assert set(KERNEL_KINDS) == {"rbf", "linear", "poly"} and set(KERNEL_ALIASES.values()) <= set(KERNEL_KINDS)
    with_kernel = []
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if "--kernel" in action.option_strings:
                with_kernel.append(name)
                assert set(action.choices) == names and action.default == "rbf", name
                assert "alias gaussian" in action.help and "alias polynomial" in action.help
    assert set(with_kernel) == {"prepare", "fit", "sweep", "compare"}
    x = np.random.default_rng(0).normal(size=(12, 3))
    for kernel in names:  # every name the command line takes, the Python API takes too
        LSWMKC(kernel=kernel)._validate_params()
        assert kernels_from_features([x], kernel).shape == (1, 12, 12)
    for function in (sweep, compare):
        parameters = inspect.signature(function).parameters
        assert parameters["kernel"].default == inspect.signature(LSWMKC).parameters["kernel"].default == "precomputed"
        assert parameters["kernel_params"].default is None

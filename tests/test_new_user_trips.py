"""What a new user trips on: one kernel vocabulary for Python
and the command line, ``sweep``/``compare`` on feature views, ``selected_model`` at a
k of a k grid, ``LSWMKC(client=Where(...))``, ``lswmkc table`` on an unlabelled sweep,
``fit`` given a k grid, a mistyped flag, alpha and gamma beyond the range where the
arithmetic stays finite, snapshots past the last iteration, ``--min-iter`` above
``--max-iter``, Dask's own log lines after a lost scheduler, a dangling symbolic link
as ``--output``, and ``--ignore-labels`` (the label-free path on a labelled file).
"""

from __future__ import annotations

import json
import os
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from lswmkc_dask import LSWMKC, Where, kernels_from_features, selected_model, sweep
from lswmkc_dask.cli import _subcommands, build_parser, cli_message, main
from lswmkc_dask.grid.compare import compare
from lswmkc_dask.errors import ParameterError, SnapshotWarning
from lswmkc_dask.kernels.features import KERNEL_ALIASES, KERNEL_KINDS
from lswmkc_dask.core.equations import ALPHA_MAX, GAMMA_MIN

QUICK = {"max_iter": 3, "min_iter": 2, "n_init": 2, "progress": False}
QUICK_CLI = ["--max-iter", "3", "--min-iter", "2", "--n-init", "2", "--quiet"]


def _views(n=45, seed=0):
    """Two feature views of n samples in 3 classes, and the labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    centres = rng.normal(scale=4.0, size=(3, 5))
    return [centres[y] + rng.normal(size=(n, 5)), np.abs(centres[y, :4]) * 10 + rng.normal(size=(n, 4))], y


def _csv(path, x):
    np.savetxt(path, x, delimiter=",")
    return str(path)


# ------------------------------------------------------------- item 7: one kernel vocabulary
def test_kernel_names_and_aliases_everywhere_in_python():
    views, y = _views()
    for name, alias in (("rbf", "gaussian"), ("poly", "polynomial")):
        np.testing.assert_array_equal(kernels_from_features(views, name), kernels_from_features(views, alias))
    a = LSWMKC(3, alpha=4, kernel="rbf", max_iter=3, min_iter=2, n_init=2).fit(views)
    b = LSWMKC(3, alpha=4, kernel="gaussian", max_iter=3, min_iter=2, n_init=2).fit(views)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(a.kernel_weights_, b.kernel_weights_, rtol=0, atol=0)
    with pytest.raises(ParameterError, match=r"kernel must be one of 'rbf', 'linear', 'poly' \(aliases: 'gaussian' "
                                             r"for 'rbf', 'polynomial' for 'poly'\), got 'sigmoid'"):
        kernels_from_features(views, "sigmoid")


def test_sweep_and_compare_take_feature_views_with_a_kernel(tmp_path):
    views, y = _views()
    with pytest.raises(ValueError, match=r"needs kernel='rbf', 'linear' or 'poly'"):
        sweep(views, tmp_path / "plain", n_clusters=3, alphas=[1.0], labels=y, **QUICK)
    result = sweep(views, tmp_path / "sw", kernel="rbf", n_clusters=3, alphas=[1.0, 8.0], labels=y, **QUICK)
    assert len(result["rows"]) == 2 and result["selected"]
    again = sweep(views, tmp_path / "sw2", kernel="gaussian", n_clusters=3, alphas=[1.0, 8.0], labels=y, **QUICK)
    assert [r["ACC_honest"] for r in again["rows"]] == [r["ACC_honest"] for r in result["rows"]]
    # The same kernels as LSWMKC(kernel="rbf") fitted at the same point.
    model = LSWMKC(3, alpha=8.0, kernel="rbf", max_iter=3, min_iter=2, n_init=2).fit(views)
    run = json.loads((tmp_path / "sw" / "runs" / "alpha=8_c=5" / "report.json").read_text())
    np.testing.assert_allclose(run["kernel_weights"], model.kernel_weights_, rtol=1e-12)
    rows = compare(views, tmp_path / "cmp", kernel="polynomial", kernel_params={"degree": 2}, labels=y,
                   methods=["avg-kkm"], **{k: v for k, v in QUICK.items() if k != "min_iter"})
    assert [r["method"] for r in rows] == ["Avg-KKM"]


def test_cli_kernel_vocabulary_is_the_python_one(tmp_path, capsys):
    for name, sub in _subcommands(build_parser()).items():
        for action in sub._actions:
            if "--kernel" in action.option_strings:
                assert set(action.choices) == {*KERNEL_KINDS, *KERNEL_ALIASES} and action.default == "rbf", name
    views, y = _views()
    files = [_csv(tmp_path / f"v{i}.csv", v) for i, v in enumerate(views)]
    labels = tmp_path / "y.txt"
    labels.write_text("\n".join(map(str, y)) + "\n")
    out = {}
    for kernel in ("rbf", "gaussian", "poly", "polynomial"):
        assert main(["fit", "--features", *files, "--labels", str(labels), "--kernel", kernel, "--alpha", "4",
                     *QUICK_CLI, "--output", str(tmp_path / kernel)]) == 0
        out[kernel] = json.loads((tmp_path / kernel / "report.json").read_text())["kernel_weights"]
    assert out["rbf"] == out["gaussian"] and out["poly"] == out["polynomial"] and out["rbf"] != out["poly"]
    capsys.readouterr()


# -------------------------------------------------------- item 7: selected_model at a k
def test_selected_model_at_a_k_of_the_grid(yale_store, tmp_path):
    result = sweep(yale_store, tmp_path / "sw", n_clusters=[10, 15], alphas=[1.0, 8.0], **QUICK)
    rows10 = [r for r in result["rows"] if r["n_clusters"] == 10]
    best10 = max(rows10, key=lambda r: (r["silhouette_avg_kernel"], -r["alpha"]))
    model = selected_model(result, n_clusters=10, max_iter=3)
    assert (model.n_clusters, model.alpha, model.max_iter) == (10, best10["alpha"], 3)
    assert selected_model(tmp_path / "sw", n_clusters=15).n_clusters == 15  # from the directory too
    with pytest.raises(ParameterError, match=r"n_clusters = 7 is not a k of this sweep: it selected among k = 10, "
                                             r"15"):
        selected_model(result, n_clusters=7)
    with pytest.raises(ParameterError, match=r"takes alpha, n_neighbors and gamma from the sweep's choice.*\(got "
                                             r"alpha\)"):
        selected_model(result, alpha=2.0)


# ------------------------------------------------------------- item 7: client=Where(...)
def test_lswmkc_takes_a_where(yale):
    kernels, labels = yale
    plain = LSWMKC(15, alpha=8, max_iter=2, min_iter=2, n_init=2).fit(kernels)
    model = LSWMKC(15, alpha=8, max_iter=2, min_iter=2, n_init=2, client=Where()).fit(kernels)
    np.testing.assert_array_equal(model.labels_, plain.labels_)
    assert isinstance(clone(model).client, Where)
    assert pickle.loads(pickle.dumps(model)).client == Where()


@pytest.mark.integration
def test_lswmkc_on_a_where_local_cluster(yale):
    kernels, _ = yale
    model = LSWMKC(15, alpha=8, max_iter=2, min_iter=2, n_init=2,
                   client=Where(n_workers=1, processes=False)).fit(kernels)
    assert model.execution_.startswith("Dask"), model.execution_


# ----------------------------------------------------- item 7: table on an unlabelled sweep
def test_table_of_an_unlabelled_sweep_says_how_to_get_metrics(tmp_path, capsys):
    views, _ = _views()
    sweep(kernels_from_features(views), tmp_path / "sw", n_clusters=3, alphas=[1.0], **QUICK)
    assert main(["table", str(tmp_path / "sw")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lswmkc: error: {tmp_path / 'sw'} has no metrics to tabulate: the sweep ran without "
                          "labels"), err
    assert "ACC, NMI, Purity or ARI" in err and "--labels FILE" in err and "--output DIR" in err, err
    assert "--overwrite" in err and "labels=" not in err, err
    # A comparison without labels: the same, not a table of dashes.
    compare(kernels_from_features(views), tmp_path / "cmp", n_clusters=3, methods=["avg-kkm"], max_iter=3, n_init=2,
            progress=False)
    assert main(["table", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lswmkc: error: {tmp_path / 'cmp'} has no metrics to tabulate: the comparison ran "
                          "without labels"), err
    assert "--labels FILE" in err and "--output DIR" in err, err


# --------------------------------------------- item 7: fit with a k grid, a mistyped flag
def test_fit_given_a_k_grid_points_to_sweep(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["fit", "--dataset", "yale", "--n-clusters", "3", "4"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "lswmkc fit: error: fit takes one --n-clusters K, got 3 4; a k grid is swept: lswmkc sweep INPUT " \
           "--n-clusters 3 4 --output DIR" in err, err
    assert "give exactly one input" not in err


@pytest.mark.parametrize("argv, typo, meant", [
    (["fit", "--dataset", "yale", "--alpah", "8"], "--alpah", "--alpha"),
    (["sweep", "--dataset", "yale", "--ouptut", "d"], "--ouptut", "--output"),
    (["prepare", "--dataset", "yale", "--overwirte", "o.zarr"], "--overwirte", "--overwrite"),
    (["compare", "--dataset", "yale", "--methods", "mkkm", "--output", "d", "--n-inti", "2"], "--n-inti", "--n-init"),
    (["plot", "d", "--alpah=8"], "--alpah", "--alpha"),
    (["table", "d", "--fromat", "markdown"], "--fromat", "--format"),
    (["verify", "s.zarr", "--ouput", "v.json"], "--ouput", "--output"),
])
def test_mistyped_flag_gets_a_suggestion(argv, typo, meant, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    # one line, without the command's usage above it
    assert err == f"lswmkc {argv[0]}: error: unrecognized argument {typo}; did you mean {meant}?\n", err


def test_unknown_flag_without_a_close_one(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--dataset", "yale", "--zzzzzz"])
    err = capsys.readouterr().err
    assert "unrecognized argument --zzzzzz: `lswmkc fit -h` lists the flags" in err
    assert err.count("\n") == 1 and "usage:" not in err, err


# ---------------------------------------------------- item 8: alpha and gamma in range
def test_alpha_beyond_the_finite_range_is_refused_in_python(yale):
    kernels, _ = yale
    for alpha in (9e307, 1.7e308, 1e301):
        with pytest.raises(ParameterError, match=r"alpha must be a number in \[0, 1e\+300\], got .*2 alpha overflows "
                                                 r"float64 in the update of Z"):
            LSWMKC(15, alpha=alpha, max_iter=2).fit(kernels)
    for gamma in (1e-20, 1e301):
        with pytest.raises(ParameterError, match=r"gamma must be 'auto' or a number > 0 in \[1e-12, 1e\+300\]"):
            LSWMKC(15, alpha=1, gamma=gamma, max_iter=2).fit(kernels)
    with pytest.raises(ParameterError, match=r"alpha must be a number in \[0, 1e\+300\]"):
        sweep(kernels, "unused", n_clusters=15, alphas=[1.0, 9e307], **QUICK)
    # The bounds themselves run to the end, every number finite.
    model = LSWMKC(15, alpha=ALPHA_MAX, max_iter=2, min_iter=2, n_init=2).fit(kernels)
    assert np.isfinite(model.objective_).all() and np.isfinite(model.kernel_weights_).all()
    model = LSWMKC(15, alpha=0.0, gamma=GAMMA_MIN, max_iter=2, min_iter=2, n_init=2).fit(kernels)
    assert np.isfinite(model.objective_).all() and np.isfinite(model.affinity_.data).all()


@pytest.mark.parametrize("argv", [
    ["fit", "--dataset", "yale", "--alpha", "9e307"],
    ["sweep", "--dataset", "yale", "--alphas", "1", "9e307", "--output", "unused"],
    ["compare", "--dataset", "yale", "--alphas", "9e307", "--output", "unused"],
])
def test_alpha_beyond_the_finite_range_is_refused_on_the_command_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert "must be a number in [0, 1e+300]" in err or "must be a finite number >= 0" in err, err
    assert "Traceback" not in err and "FloatingPointError" not in err


# --------------------------------------------------------------- item 8: min_iter > max_iter
def test_min_iter_above_max_iter_is_refused(yale, capsys):
    kernels, _ = yale
    with pytest.raises(ParameterError, match=r"min_iter=30 is above max_iter=5"):
        LSWMKC(15, alpha=1, min_iter=30, max_iter=5).fit(kernels)
    with pytest.raises(ParameterError, match=r"min_iter=30 is above max_iter=5"):
        sweep(kernels, "unused", n_clusters=15, alphas=[1.0], max_iter=5, min_iter=30, progress=False)
    for command in (["fit"], ["sweep", "--output", "unused"], ["compare", "--output", "unused"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--dataset", "yale", "--min-iter", "30", "--max-iter", "5"])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "error: --min-iter 30 is above --max-iter 5" in err, err
    # The default min_iter (20) with a smaller max_iter is no error: the fit stops at max_iter.
    assert LSWMKC(15, alpha=1, max_iter=2, n_init=2).fit(kernels).n_iter_ == 2
    assert main(["fit", "--dataset", "yale", "--max-iter", "2", "--n-init", "2", "--quiet"]) == 0


# ------------------------------------------------------------ item 8: snapshots not reached
def test_snapshots_past_the_last_iteration_are_warned_and_recorded(yale, tmp_path, capsys):
    kernels, labels = yale
    with pytest.warns(SnapshotWarning, match=r"snapshot_iterations 50, 1000 not reached: the fit stopped after 3 "
                                             r"iterations \(at max_iter\).*raise max_iter") as got:
        model = LSWMKC(15, alpha=8, max_iter=3, min_iter=2, n_init=2, snapshot_iterations=[0, 2, 50, 1000]).fit(kernels)
    assert got[0].filename == __file__
    assert sorted(model.snapshots_) == [0, 2]
    with warnings.catch_warnings():  # every one reached: no warning
        warnings.simplefilter("error")
        LSWMKC(15, alpha=8, max_iter=3, min_iter=2, n_init=2, snapshot_iterations=[0, 3]).fit(kernels)
    # The command line: the warning with the flag, and the report.
    assert main(["fit", "--dataset", "yale", "--alpha", "8", "--snapshots", "1", "1000", *QUICK_CLI,
                 "--output", str(tmp_path / "fit")]) == 0
    err = capsys.readouterr().err
    assert "lswmkc: warning: --snapshots 1000 not reached: the fit stopped after 3 iterations (at --max-iter)" in err
    report = json.loads((tmp_path / "fit" / "report.json").read_text())
    assert report["snapshots"] == {"requested": [1, 1000], "kept": [1], "not_reached": [1000]}
    # A sweep: one warning for the grid, each run's report.
    assert main(["sweep", "--dataset", "yale", "--alphas", "1", "8", "--snapshots", "0", "1000", *QUICK_CLI,
                 "--output", str(tmp_path / "sw")]) == 0
    err = capsys.readouterr().err
    assert err.count("lswmkc: warning: --snapshots 1000 not reached: 2 of 2 runs stopped after 3 iterations") == 1, err
    run = json.loads((tmp_path / "sw" / "runs" / "alpha=8_c=5" / "report.json").read_text())
    assert run["snapshots"]["not_reached"] == [1000]


def test_snapshot_warning_names_the_flag():
    with pytest.warns(SnapshotWarning) as got:
        from lswmkc_dask.report.record import warn_snapshots_not_reached

        warn_snapshots_not_reached([9], "the fit", "4", capped=False)
    text = cli_message(got[0].message)
    assert text.startswith("--snapshots 9 not reached: the fit stopped after 4 iterations (converged)"), text
    assert "raise --min-iter" in text


# item 8, a lost scheduler (our line only): tests/test_memory_and_input.py::test_scheduler_killed_mid_run_ends_with_one_error_line


# ------------------------------------------------------ a dangling symbolic link as --output
@pytest.mark.parametrize("argv", [
    ["fit", "--dataset", "yale", "--alpha", "8", "--output"],
    ["fit", "--dataset", "yale", "--alpha", "8", "--overwrite", "--output"],
    ["prepare", "--dataset", "yale"],
    ["prepare", "--dataset", "yale", "--overwrite"],
])
def test_dangling_link_output_is_called_a_dangling_link(argv, tmp_path):
    """It was "already exists and is a file" (or, with --overwrite, "is a file")."""
    from _helpers import lswmkc_main

    link, target = tmp_path / "out", tmp_path / "gone"
    link.symlink_to(target)
    proc = lswmkc_main(*argv, link)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"lswmkc: error: output {link} is a dangling symbolic link (to {target}, which does not "
                           "exist); lswmkc does not replace links: remove it or choose another output\n"), proc.stderr
    assert link.is_symlink() and not os.path.lexists(target)


# --------------------------------------------------- --ignore-labels: the label-free path on a labelled file
def _labelled_and_plain_npz(tmp_path):
    """The same kernels in a .npz file with labels and in one without."""
    views, y = _views()
    kernels = np.stack([v @ v.T for v in views])
    np.savez(tmp_path / "labelled.npz", kernels=kernels, labels=y)
    np.savez(tmp_path / "plain.npz", kernels=kernels)
    return tmp_path / "labelled.npz", tmp_path / "plain.npz"


def _without_seconds(value):
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items() if k != "seconds"}
    return [_without_seconds(v) for v in value] if isinstance(value, list) else value


def test_ignore_labels_runs_a_sweep_as_on_the_file_without_labels(tmp_path):
    """No switch left the labels of a kernel file out: the label-free path (the k grid,
    no metrics) could not be tried on a labelled file."""
    from _helpers import lswmkc_main

    labelled, plain = _labelled_and_plain_npz(tmp_path)
    grid = ["--alphas", "1", "8", *QUICK_CLI]
    ignored = lswmkc_main("sweep", labelled, "--ignore-labels", "--output", tmp_path / "ignored", *grid)
    without = lswmkc_main("sweep", plain, "--output", tmp_path / "without", *grid)
    assert ignored.returncode == 0 and without.returncode == 0, ignored.stderr + without.stderr
    got, want = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("ignored", "without"))
    assert _without_seconds(got) == _without_seconds(want)
    assert {row["n_clusters"] for row in got["rows"]} == set(range(2, 13))  # the k grid of data without labels
    assert all(row["ACC_honest"] is None for row in got["rows"])
    assert not (tmp_path / "ignored" / "labels_true.csv").exists()
    with_labels = lswmkc_main("sweep", labelled, "--output", tmp_path / "labelled", *grid)
    assert with_labels.returncode == 0 and (tmp_path / "labelled" / "labels_true.csv").exists()


def test_ignore_labels_fit_and_compare(tmp_path):
    from _helpers import lswmkc_main

    labelled, plain = _labelled_and_plain_npz(tmp_path)
    for path in (labelled, plain):  # no k to take from the labels
        proc = lswmkc_main("fit", path, "--alpha", "8", *(["--ignore-labels"] if path == labelled else []))
        assert proc.returncode == 2 and proc.stderr == ("lswmkc: error: --n-clusters is required when the input "
                                                        "has no labels\n"), proc.stderr
    fit = ["--alpha", "8", "--n-clusters", "3", *QUICK_CLI]
    ignored = lswmkc_main("fit", labelled, "--ignore-labels", "--output", tmp_path / "f1", *fit)
    without = lswmkc_main("fit", plain, "--output", tmp_path / "f2", *fit)
    assert ignored.returncode == 0 and without.returncode == 0, ignored.stderr + without.stderr
    assert (tmp_path / "f1" / "labels.csv").read_text() == (tmp_path / "f2" / "labels.csv").read_text()
    report = json.loads((tmp_path / "f1" / "report.json").read_text())
    assert "metrics" not in report, sorted(report)
    proc = lswmkc_main("compare", labelled, "--ignore-labels", "--output", tmp_path / "c", "--methods", "avg-kkm",
                       "--n-clusters", "3", *QUICK_CLI)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "c" / "comparison.csv").exists() and not (tmp_path / "c" / "labels_true.csv").exists()
    proc = lswmkc_main("fit", "--dataset", "yale", "--ignore-labels", "--labels", labelled, "--alpha", "8")
    assert proc.stderr == ("lswmkc: error: --ignore-labels leaves out the input's labels; it cannot be given "
                           "with --labels\n"), proc.stderr

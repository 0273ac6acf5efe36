"""What a new user trips on with real files: pandas-written headers, semicolons, a CSV
given as a kernel file, kernel names from feature files, duplicated kernels, the sweep
ETA with fits in parallel, and the legend of compare.png."""

from __future__ import annotations

import gzip
import io
import itertools
import re
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from _helpers import lswmkc_main

from lswmkc_dask import DuplicateKernelWarning, HeaderWarning, LSWMKC, load_features, open_store, prepare
from lswmkc_dask.cli import _view_names, main
from lswmkc_dask.datasets import load_yale
from lswmkc_dask.errors import KernelInputError

MFEAT = Path(__file__).resolve().parents[1] / "lswmkc_dask" / "datasets" / "data"


def _views(n=60, seed=0):
    """Two feature views of n samples in 3 classes, and the labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    centres = rng.normal(scale=4.0, size=(3, 5))
    a = centres[y] + rng.normal(size=(n, 5))
    b = np.abs(centres[y, :4]) * 10 + rng.normal(size=(n, 4))
    return a, b, y


def _pandas_csv(path, x, y, start=0):
    """What ``pd.DataFrame(np.column_stack([x, y])).to_csv(path, index=False)`` writes:
    the column numbers 0..d as the first line (pandas is not a dependency: by hand);
    ``start=1``: a frame whose columns were numbered from 1."""
    table = np.column_stack([x, y])
    lines = [",".join(str(j + start) for j in range(table.shape[1]))]
    lines += [",".join(repr(float(v)) for v in row[:-1]) + f",{int(row[-1])}" for row in table]
    Path(path).write_text("\n".join(lines) + "\n")


def _named_csv(path, x, y):
    table = np.column_stack([x, y])
    lines = [",".join([*(f"f{j}" for j in range(x.shape[1])), "label"])]
    lines += [",".join(repr(float(v)) for v in row[:-1]) + f",{int(row[-1])}" for row in table]
    Path(path).write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------ item 2: headers
def test_pandas_header_is_skipped_and_said(tmp_path):
    a, _, y = _views()
    _pandas_csv(tmp_path / "a.csv", a, y)
    with pytest.warns(HeaderWarning, match=r"line 1 \(0,1,2,3,4,5\) read as a header, the column numbers 0\.\.5 "
                                           r"that pandas' DataFrame\.to_csv writes \(if it is a sample, pass "
                                           r"header=False \(--no-header\)\)") as got:
        x, labels = load_features(tmp_path / "a.csv", label_column=-1)
    assert len(got) == 1 and got[0].filename == __file__  # one line, attributed to the caller
    np.testing.assert_allclose(x, a)
    np.testing.assert_array_equal(labels, y)
    for header in (True, False):  # said explicitly: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            x, labels = load_features(tmp_path / "a.csv", label_column=-1, header=header)
        assert x.shape[0] == (60 if header else 61)
    np.testing.assert_allclose(load_features(tmp_path / "a.csv", label_column=-1, header=True)[0], a)
    # Without a label column the whole line is the column numbers 0..5 (d = 6).
    with pytest.warns(HeaderWarning, match=r"column numbers 0\.\.5"):
        assert load_features(tmp_path / "a.csv")[0].shape == (60, 6)
    # A first sample that only starts like 0,1,2 is a sample, and not warned about.
    (tmp_path / "c.csv").write_text("0,1,2,4\n1.5,2,3,0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_features(tmp_path / "c.csv")[0].shape == (2, 4)
    # Another numeric first line (columns numbered from 1) is a sample, as before.
    _pandas_csv(tmp_path / "one.csv", a, y, start=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_features(tmp_path / "one.csv", label_column=-1)[0].shape == (61, 5)


def test_pandas_float_frames_without_index_through_prepare(tmp_path):
    """``pd.DataFrame(x).to_csv(path, index=False)`` of float views, the fix the index
    refusal recommends: header ``0,1,2``, rows as pandas formats floats (``0.5,1.25,3.0``).
    Three views gave "3 kernels x 61 samples" with the header read as a sample."""
    a, b, y = _views()
    c = np.round(a * 4) / 4  # values such as 3.0, 0.5, 1.25
    paths = []
    for name, x in (("a", a), ("b", b), ("c", c)):
        lines = [",".join(map(str, range(x.shape[1])))] + [",".join(repr(float(v)) for v in row) for row in x]
        paths.append(tmp_path / f"{name}.csv")
        paths[-1].write_text("\n".join(lines) + "\n")
    assert paths[2].read_text().startswith("0,1,2,3,4\n") and ".0," in paths[2].read_text()
    with pytest.warns(HeaderWarning, match=r"c\.csv: line 1 \(0,1,2,3,4\) read as a header"):
        np.testing.assert_array_equal(load_features(paths[2])[0], c)
    got = lswmkc_main("prepare", "--features", *paths, tmp_path / "k.zarr")
    assert got.returncode == 0, got.stderr
    notes = [ln for ln in got.stderr.splitlines() if "warning" in ln]
    assert len(notes) == 3 and all("read as a header" in ln and "pass --no-header)" in ln for ln in notes), notes
    assert "3 kernels x 60 samples" in got.stdout + got.stderr
    assert open_store(tmp_path / "k.zarr").n_samples == 60


def test_shipped_mfeat_files_header_skipped():
    """The UCI mfeat CSVs (as pandas wrote them: 0,1,...,d-2,0) are read with their header
    skipped, saying so; with header=True silently."""
    path = MFEAT / "mfeat-mor.csv.gz"
    with pytest.warns(HeaderWarning, match=r"mfeat-mor\.csv\.gz: line 1 .*read as a header, the column numbers 0\.\.5 "):
        x, labels = load_features(path, label_column=-1)
    assert x.shape == (2000, 6) and np.bincount(labels.astype(int)).tolist() == [200] * 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, labels = load_features(path, label_column=-1, header=True)
    assert x.shape == (2000, 6) and np.bincount(labels.astype(int)).tolist() == [200] * 10


def test_cli_pandas_header_warning_and_mixed_views_hint(tmp_path, capsys):
    a, b, y = _views()
    _pandas_csv(tmp_path / "a.csv", a, y)
    _pandas_csv(tmp_path / "b.csv", b, y)
    _named_csv(tmp_path / "named.csv", b, y)
    assert main(["prepare", "--features", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--label-column", "-1",
                 str(tmp_path / "auto.zarr")]) == 0
    err = capsys.readouterr().err
    assert err.count("lswmkc: warning: features in") == 2 and "pass --no-header)" in err, err
    assert "header=False" not in err
    store = open_store(tmp_path / "auto.zarr")
    assert store.n_samples == 60
    np.testing.assert_array_equal(store.labels, y)

    assert main(["prepare", "--features", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--label-column", "-1",
                 "--header", str(tmp_path / "header.zarr")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert open_store(tmp_path / "header.zarr").n_samples == 60

    # One view with a text header (skipped), one with another numeric header (a sample): the hint.
    _pandas_csv(tmp_path / "one.csv", a, y, start=1)
    assert main(["prepare", "--features", str(tmp_path / "named.csv"), str(tmp_path / "one.csv"), "--label-column",
                 "-1", str(tmp_path / "mixed.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("lswmkc: error: view 1 (one) has 61 samples but view 0 (named) has 60; one sample "
                              "more in view 1 (one)"), err
    assert "--header" in err[-1]
    assert not (tmp_path / "mixed.zarr").exists()


# --------------------------------------------------------------- item 4: names, copies
def test_kernels_from_feature_files_are_named_after_them(tmp_path, capsys):
    a, b, y = _views()
    _named_csv(tmp_path / "mfeat-fac.csv", a, y)
    with gzip.open(tmp_path / "mfeat-kar.csv.gz", "wt") as fh:
        _named_csv(tmp_path / "tmp.csv", b, y)
        fh.write((tmp_path / "tmp.csv").read_text())
    assert main(["prepare", "--features", str(tmp_path / "mfeat-fac.csv"), str(tmp_path / "mfeat-kar.csv.gz"),
                 "--label-column", "-1", str(tmp_path / "k.zarr")]) == 0
    capsys.readouterr()
    store = open_store(tmp_path / "k.zarr")
    assert store.attrs["kernel_names"] == ["mfeat-fac", "mfeat-kar"]
    model = LSWMKC(3, alpha=8).fit(store)
    assert list(model.kernel_names_) == ["mfeat-fac", "mfeat-kar"]
    # The same names straight from `fit --features`, in report.json.
    assert main(["fit", "--features", str(tmp_path / "mfeat-fac.csv"), str(tmp_path / "mfeat-kar.csv.gz"),
                 "--label-column", "-1", "--alpha", "8", "--quiet", "--output", str(tmp_path / "fit")]) == 0
    assert '"mfeat-fac"' in (tmp_path / "fit" / "report.json").read_text()
    # Two files of one name in different directories: told apart by the directory.
    assert _view_names(["x/v.csv", "y/v.csv.gz", "w.npy"]) == ["x/v", "y/v", "w"]
    assert _view_names(["v.csv", "v.csv"]) == ["v (0)", "v (1)"]


def _duplicate_pairs(message):
    return {(int(p), int(q)) for p, q in re.findall(r"kernel (\d+)\S*(?: \([^)]*\))? and kernel (\d+)", message)}


def test_duplicated_kernels_are_named_in_a_warning(tmp_path, capsys):
    kernels, labels = load_yale()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare(kernels, None, labels=labels)  # five distinct kernels: no word
    # As a public file may store them: each of 3 kernels 3 times.
    stored = np.concatenate([kernels[:3]] * 3)
    with pytest.warns(DuplicateKernelWarning, match="identical base kernels") as got:
        store = prepare(stored, None, labels=labels)
    assert got[0].filename == __file__
    expected = {(p, q) for p, q in itertools.combinations(range(9), 2) if p % 3 == q % 3}
    assert _duplicate_pairs(str(got[0].message)) == expected
    assert store.n_kernels == 9  # kept as given
    # Equal in all but one entry pair: not identical.
    other = kernels[1].copy()
    other[3, 7] = other[7, 3] = other[3, 7] * (1 + 1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateKernelWarning)
        prepare(np.stack([kernels[0], kernels[1], other]), None)
    # From the command line: named by file and index.
    a, b, y = _views()
    for name in ("one.csv", "two.csv"):
        _named_csv(tmp_path / name, a, y)
    _named_csv(tmp_path / "three.csv", b, y)
    assert main(["prepare", "--features", *(str(tmp_path / f) for f in ("one.csv", "three.csv", "two.csv")),
                 "--label-column", "-1", str(tmp_path / "d.zarr")]) == 0
    err = capsys.readouterr().err
    assert "lswmkc: warning: identical base kernels: kernel 0 (one) and kernel 2 (two)." in err, err


# ----------------------------------------------------------------- item 5: small things
def test_fit_on_a_csv_suggests_features(tmp_path, capsys):
    a, _, y = _views()
    _named_csv(tmp_path / "some.csv", a, y)
    assert main(["fit", str(tmp_path / "some.csv"), "--alpha", "8", "--n-clusters", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--features {tmp_path / 'some.csv'}" in err[0], err
    with pytest.raises(KernelInputError, match=r"looks like a feature file.*load_features"):
        LSWMKC(3, alpha=8).fit(str(tmp_path / "some.csv"))


def test_semicolon_separated_csv(tmp_path):
    a, _, y = _views()
    _named_csv(tmp_path / "comma.csv", a, y)
    (tmp_path / "semi.csv").write_text((tmp_path / "comma.csv").read_text().replace(",", ";"))
    want = load_features(tmp_path / "comma.csv", label_column=-1)
    got = load_features(tmp_path / "semi.csv", label_column=-1)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    # Headerless too, and without a label column.
    (tmp_path / "plain.csv").write_text("1;2;3\n4;5;6.5\n7;8;9\n")
    np.testing.assert_array_equal(load_features(tmp_path / "plain.csv")[0], [[1, 2, 3], [4, 5, 6.5], [7, 8, 9]])
    # Decimal commas: named as the cause.
    (tmp_path / "decimal.csv").write_text("1,5;2,25;3\n4,0;5,5;6\n")
    for kw in ({}, {"label_column": -1}):
        with pytest.raises(KernelInputError, match=r"decimal.csv: its lines hold semicolons and commas.*decimal commas"):
            load_features(tmp_path / "decimal.csv", **kw)


def test_sweep_eta_counts_fits_running_at_once():
    """11 points, 2 at a time: after the first (one fit time t), 5 t are left, not 10 t."""
    from types import SimpleNamespace

    from lswmkc_dask.engine.progress import Progress

    def eta(done, total, elapsed, **kw):
        out = io.StringIO()
        Progress(err=out).grid_point(done, total, SimpleNamespace(name="alpha=1_c=5"),
                                     {"n_iter": 20, "iteration_seconds_total": 1.0}, time.perf_counter() - elapsed,
                                     **kw)
        line = out.getvalue()
        shown = float(re.search(r"elapsed (\d+) s", line).group(1))
        return float(re.search(r"ETA (\d+) s", line).group(1)), shown

    value, shown = eta(1, 11, 200.0, concurrency=2)
    assert abs(value - 5 * shown) <= 5, value
    value, shown = eta(1, 11, 200.0)  # one at a time: 10 more
    assert abs(value - 10 * shown) <= 10, value
    value, shown = eta(6, 11, 600.0, concurrency=2)  # past the first wave: the observed rate
    assert abs(value - 5 / 6 * shown) <= 5, value
    # Resumed with 5 done before: the 1 finished now took the elapsed time, 2 at a time.
    value, shown = eta(6, 11, 100.0, concurrency=2, resumed=5)
    assert abs(value - 2.5 * shown) <= 5, value


def test_compare_legend_clear_of_the_bars(yale_store, tmp_path):
    pytest.importorskip("matplotlib")
    from lswmkc_dask.grid.compare import compare
    from lswmkc_dask.plots._compare_figures import _compare_figure

    out = tmp_path / "cmp"
    compare(yale_store, out, alphas=(8,), taus=(0.1,), progress=False)
    fig = _compare_figure(out)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        box = legend.get_window_extent(renderer)
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)  # not cut off
        covered = [p for p in ax.patches if p.get_height() > 0 and box.overlaps(p.get_window_extent(renderer))]
        covered += [t for t in ax.texts if box.overlaps(t.get_window_extent(renderer))]
        assert not covered, f"the legend covers {len(covered)} bars or values"

"""knn_mechanism.png of a compare directory (the paper's Figure 1 and its comparison with the
KNN mechanism): the arrays of `plots.knn_mechanism_data` and the figure `lswmkc plot` writes."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from lswmkc_dask import prepare
from lswmkc_dask import plots
from lswmkc_dask.grid.baselines import knn_mask, neighbour_count
from lswmkc_dask.grid.compare import compare, comparison_table
from lswmkc_dask.plots import FigureUnavailableError, knn_mechanism_data
from lswmkc_dask.io.run_arrays import run_arrays

from _helpers import lswmkc_main

pytestmark = pytest.mark.timeout(600)
FAST = {"max_iter": 5, "min_iter": 2, "n_init": 5, "progress": False}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def store(yale, tmp_path_factory):
    kernels, labels = yale
    return prepare(kernels, tmp_path_factory.mktemp("knnfig") / "yale.zarr", labels=labels)


@pytest.fixture(scope="module")
def compared(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("knnfig") / "cmp"
    compare(store.location, out, methods=["knn", "lswmkc"], alphas=[1.0, 8.0], taus=[0.1, 0.3, 0.6], **FAST)
    return out


def test_mask_and_localised_kernel(compared, store):
    d = knn_mechanism_data(compared)
    n = store.n_samples
    kernels = store.read_rows(0, n)
    assert d.average == pytest.approx(kernels.mean(axis=0), abs=1e-12)
    # the tau of the best honest ACC, as the table chooses it
    best = next(r for r in comparison_table(compared) if r["method"] == "KNN")["best_honest"]
    assert best == f"tau={d.tau:g}"
    count = neighbour_count(d.tau, n)
    assert count == int(np.floor(d.tau * n + 0.5))  # MATLAB's round(tau n)
    assert d.mask.dtype == bool and d.mask.shape == (n, n)
    assert (d.mask.sum(axis=1) == count).all()  # exactly round(tau n) ones per row
    assert np.array_equal(d.mask, knn_mask(d.average, d.tau))  # the baseline's own mask
    assert np.diag(d.mask).all()  # each sample is among its own neighbours
    assert np.array_equal(d.localised, d.mask * d.average)
    # LSWMKC's arrays of the best run, ordered by the ground truth
    run = compared / "lswmkc" / "runs" / d.point.name
    z, w = run_arrays(run)
    assert (d.affinity != z).nnz == 0
    assert np.array_equal(d.kstar_factor, w)
    assert d.by == "true label" and np.array_equal(d.labels, store.labels)
    assert d.data == "yale.zarr"


def test_figure_written_by_lswmkc_plot(compared):
    pytest.importorskip("matplotlib")
    written = plots.plot_sweep(compared)
    assert [p.name for p in written][-1] == "knn_mechanism.png"
    assert (compared / "plots" / "knn_mechanism.png").read_bytes().startswith(PNG_MAGIC)


def test_refused_above_the_size_limit_and_skipped_by_plot(compared, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plots._knn, "KNN_FIGURE_MAX_SAMPLES", 100)  # YALE has 165 samples
    with pytest.raises(FigureUnavailableError, match="above 100"):
        knn_mechanism_data(compared)
    pytest.importorskip("matplotlib")
    logger, seen = logging.getLogger("lswmkc_dask"), _Kept()
    logger.addHandler(seen)
    logger.setLevel(logging.INFO)
    try:  # a Python caller sees the note once it sets up logging (an INFO record, the package's NullHandler)
        written = plots.plot_sweep(compared, tmp_path / "png")
    finally:
        logger.removeHandler(seen)
        logger.setLevel(logging.NOTSET)
    assert "knn_mechanism.png" not in [p.name for p in written]
    assert not (tmp_path / "png" / "knn_mechanism.png").exists()
    assert len(seen.records) == 1 and seen.records[0].levelno == logging.INFO
    assert seen.records[0].getMessage().startswith("knn_mechanism.png not drawn: n = 165 samples is above 100")
    assert capsys.readouterr().err == ""  # nothing printed without logging set up
    res = lswmkc_main("plot", compared, "--output", tmp_path / "cli")  # the command line shows it
    assert res.returncode == 0 and "lswmkc: knn_mechanism.png not drawn: n = 165 samples is above 100" in res.stderr


class _Kept(logging.Handler):
    """Keeps the records it is handed, of every level."""

    def __init__(self):
        super().__init__(logging.NOTSET)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_kernels_of_an_array_must_be_given_and_must_match(yale, tmp_path):
    kernels, labels = yale
    out = tmp_path / "cmp"
    compare(kernels, out, labels=labels, methods=["knn", "lswmkc"], alphas=[8.0], taus=[0.2], **FAST)
    with pytest.raises(FigureUnavailableError, match="cannot be found"):
        knn_mechanism_data(out)
    d = knn_mechanism_data(out, X=kernels)
    assert d.tau == 0.2 and (d.mask.sum(axis=1) == neighbour_count(0.2, labels.size)).all()
    with pytest.raises(FigureUnavailableError, match="not those it was compared on"):
        knn_mechanism_data(out, X=kernels[::-1] * np.linspace(1, 2, kernels.shape[0])[:, None, None])


def test_without_labels_the_choice_is_said(store, tmp_path):
    out = tmp_path / "nolabels"
    kernels = store.read_rows(0, store.n_samples)
    compare(kernels, out, n_clusters=15, methods=["knn", "lswmkc"], alphas=[1.0, 8.0], taus=[0.3, 0.6], **FAST)
    d = knn_mechanism_data(out, X=kernels)
    assert d.tau == 0.3 and d.tau_reason == "no labels: the smallest tau of the grid"
    assert d.point_reason.startswith("no labels") and d.by == "predicted cluster"
    assert (d.mask.sum(axis=1) == neighbour_count(0.3, store.n_samples)).all()


def test_cli_compare_repeats_plot_and_table(tmp_path):
    """The commands as a user types them: --repeats, the figure from `--dataset yale`, the table
    (none starts a cluster: all through cli.main in this process; test_compare runs `lswmkc
    compare` as a real process)."""
    from _helpers import lswmkc_main

    pytest.importorskip("matplotlib")
    out = tmp_path / "cmp"
    lswmkc_main("compare", "--dataset", "yale", "--alphas", "8", "--taus", "0.3", "0.6", "--max-iter", "5",
                "--min-iter", "2", "--n-init", "5", "--repeats", "2", "--output", out, "--quiet", check=True)
    plotted = lswmkc_main("plot", out)
    assert plotted.returncode == 0, plotted.stderr
    assert f"wrote {out / 'plots' / 'knn_mechanism.png'}" in plotted.stdout
    assert (out / "plots" / "knn_mechanism.png").read_bytes().startswith(PNG_MAGIC)
    table = lswmkc_main("table", out, "--format", "markdown").stdout
    assert table.count(" ± ") == 8 * 4  # every cell of 4 methods x 8 rows
    refused = lswmkc_main("compare", "--dataset", "yale", "--alphas", "8", "--taus", "0.3", "0.6", "--max-iter", "5",
                          "--min-iter", "2", "--n-init", "5", "--output", out, "--quiet")
    assert refused.returncode != 0 and "'repeats': (2, 1)" in refused.stderr

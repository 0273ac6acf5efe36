"""Figures of a sweep directory: a real YALE sweep on a LocalCluster, then the PNGs."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from _helpers import lswmkc_main, png_by_lswmkc
from matplotlib.image import imread

from lswmkc_dask.plots import MatplotlibMissingError, block_order, plot_sweep, sweep_point
from lswmkc_dask.plots._base import read_labels_csv
from lswmkc_dask.grid.sweep import SELECTION_CRITERION, GridPoint, load_sweep, sweep
from lswmkc_dask.io.run_arrays import run_arrays

FIGURES = [
    "metrics_vs_alpha.png",
    "convergence.png",
    "kernel_weights.png",
    "affinity_heatmap.png",
    "kstar_heatmap.png",
    "selection.png",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pick_point(directory, runs, alpha):
    """The grid point of the heatmaps (sweep_point's, without its k)."""
    return sweep_point(directory, alpha, runs=runs).point


@pytest.fixture(scope="module")
def yale_sweep(tmp_path_factory, yale, client):
    kernels, labels = yale
    out = tmp_path_factory.mktemp("plots") / "sw"
    sweep(kernels, out, labels=labels, alphas=[1, 8, 64], client=client, progress=False)
    return out


def check_png(path, min_w=400, min_h=300):
    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_MAGIC, path
    img = imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h, (path, img.shape)
    assert w <= 3000 and h <= 3000, (path, img.shape)
    rgb = img[..., :3]
    assert float(rgb.std()) > 0.05, f"{path} looks blank (pixel std {rgb.std():.4f})"
    # more than a few distinct colours: something was drawn, not a flat frame
    assert len(np.unique(rgb.reshape(-1, 3)[::7], axis=0)) > 20, path
    return img


def test_block_order_sorts_stably():
    y = np.array([3, 1, 2, 1, 3, 2, 1])
    order, bounds = block_order(y)
    assert sorted(order.tolist()) == list(range(y.size))
    assert np.all(np.diff(y[order]) >= 0)
    assert order.tolist() == [
        1,
        3,
        6,
        2,
        5,
        0,
        4,
    ]  # stable: original order within a class
    assert bounds.tolist() == [3, 5]
    order, bounds = block_order(np.array(["b", "a", "b"]))
    assert order.tolist() == [1, 0, 2] and bounds.tolist() == [1]
    with pytest.raises(ValueError):
        block_order(np.zeros((2, 2)))


def test_block_order_subsamples_evenly_within_classes():
    rng = np.random.default_rng(0)
    y = rng.permutation(np.repeat([0, 1, 2, 3], [4000, 2000, 1000, 10]))
    order, bounds = block_order(y, max_samples=3000)
    assert order.size <= 3000 and order.size > 2900
    assert np.unique(order).size == order.size
    ys = y[order]
    assert np.all(np.diff(ys) >= 0)
    counts = np.bincount(ys)
    assert counts.tolist()[3] >= 1  # a small class is kept
    # about the same fraction of every (large) class
    frac = counts[:3] / np.array([4000, 2000, 1000])
    assert frac.max() - frac.min() < 0.01
    # evenly spread within a class: ranks of the kept class-0 samples, equally spaced
    rank = np.empty(y.size, dtype=int)
    for k in range(4):
        members = np.flatnonzero(y == k)
        rank[members] = np.arange(members.size)
    r0 = rank[order[ys == 0]]
    assert r0[0] == 0 and r0[-1] == 3999
    gaps = np.diff(r0)
    assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1
    assert bounds.tolist() == (np.flatnonzero(np.diff(ys) != 0) + 1).tolist()
    # more classes than samples to keep: still sorted and bounded
    order, _ = block_order(np.arange(50) % 25, max_samples=10)
    assert order.size <= 10 and np.all(np.diff((np.arange(50) % 25)[order]) >= 0)


def test_plot_sweep_writes_six_pngs(yale_sweep):
    paths = plot_sweep(yale_sweep)
    assert [p.name for p in paths] == FIGURES
    assert all(p.parent == yale_sweep / "plots" for p in paths)
    for p in paths:
        check_png(p)
    # atomic writes leave no temporary files behind
    assert sorted(x.name for x in (yale_sweep / "plots").iterdir()) == sorted(FIGURES)
    # heatmaps are square-ish images, the metrics figure is landscape
    img = imread(yale_sweep / "plots" / "kstar_heatmap.png")
    assert 0.6 < img.shape[0] / img.shape[1] < 1.3
    # a second call replaces the files
    again = plot_sweep(yale_sweep, alpha=64)
    assert again == paths


def test_heatmaps_subsampled_and_pooled(yale_sweep, tmp_path, monkeypatch):
    """Large-n path on YALE with the limits lowered: subsample within classes, pool."""
    from lswmkc_dask.plots import _base, _directory as directory, _heatmaps as heatmaps

    monkeypatch.setattr(heatmaps, "MAX_HEATMAP_SAMPLES", 100)
    monkeypatch.setattr(heatmaps, "MAX_HEATMAP_PIXELS", 40)
    P, f = heatmaps.pooling(100)
    assert f == 3 and P.shape == (100, 34)
    assert np.allclose(
        np.asarray(P.sum(axis=0)).ravel(), 1.0
    )  # column = mean of its group
    paths = directory._plot_heatmaps(
        yale_sweep, GridPoint(8.0, 5), tmp_path, _base.import_matplotlib()[2]
    )
    assert [p.name for p in paths] == FIGURES[3:5]
    for p in paths:
        check_png(p)


def test_kstar_block_diagonal_on_yale(yale_sweep):
    _, runs = load_sweep(yale_sweep)
    point = _pick_point(yale_sweep, runs, None)
    chosen = json.loads((yale_sweep / "summary.json").read_text())["selected"]  # without labels, never by ACC
    assert point == GridPoint(chosen["alpha"], chosen["n_neighbors"])
    labels = read_labels_csv(yale_sweep / "labels_true.csv")
    assert labels.shape == (165,)
    order, bounds = block_order(labels)
    Z, W = run_arrays(yale_sweep / "runs" / point.name)
    K = (W @ W.T)[np.ix_(order, order)]
    Z = Z.toarray()[np.ix_(order, order)]
    ys = labels[order]
    same = ys[:, None] == ys[None, :]
    off = ~np.eye(ys.size, dtype=bool)
    for M in (K, Z):
        within, between = M[same & off].mean(), M[~same].mean()
        assert within > 3 * between, (within, between)
    assert len(bounds) == 14


def test_cli_plot(yale_sweep, tmp_path):
    out = tmp_path / "figs"
    # in this process (test_cli_consistency runs `lswmkc plot` as a real process)
    res = lswmkc_main("plot", yale_sweep, "--output", out, "--alpha", "8")
    assert res.returncode == 0, res.stderr
    first, *lines = res.stdout.strip().splitlines()
    assert first.startswith("figures of alpha=8 c=5 k=15: alpha=8 as asked"), first
    assert [line.split("/")[-1] for line in lines] == FIGURES
    for name in FIGURES:
        check_png(out / name)
    bad = lswmkc_main("plot", yale_sweep, "--output", out, "--alpha", "3")
    assert bad.returncode == 2
    assert "alphas available: 1, 8, 64" in bad.stderr


def test_errors(yale_sweep, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError):
        plot_sweep(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="sweep.json"):
        plot_sweep(tmp_path)
    empty = tmp_path / "empty"
    (empty / "runs").mkdir(parents=True)
    shutil.copy(yale_sweep / "sweep.json", empty / "sweep.json")
    with pytest.raises(ValueError, match="no finished grid points"):
        plot_sweep(empty)
    assert not (empty / "plots").exists()
    with pytest.raises(
        ValueError, match=r"alpha=3 is not in the sweep.*alphas available: 1, 8, 64"
    ):
        plot_sweep(yale_sweep, tmp_path / "x", alpha=3)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MatplotlibMissingError, match=r"pip install matplotlib$"):
        plot_sweep(yale_sweep, tmp_path / "y")
    with pytest.raises(ImportError, match="pip install matplotlib"):  # before looking at the directory
        plot_sweep(tmp_path / "missing")
    assert not (tmp_path / "y").exists()


def test_without_labels_two_neighbourhoods(yale, client, tmp_path):
    """No ground truth: no metrics figure, heatmaps ordered by predicted cluster."""
    kernels, _ = yale
    out = tmp_path / "sw"
    sweep(
        kernels,
        out,
        n_clusters=15,
        alphas=[2, 16],
        n_neighbors=[5, 8],
        client=client,
        progress=False,
        n_init=5,
    )
    assert not (out / "labels_true.csv").exists()
    paths = plot_sweep(out, alpha=16)
    assert [p.name for p in paths] == FIGURES[1:]
    for p in paths:
        check_png(p)
    _, runs = load_sweep(out)
    chosen = json.loads((out / "summary.json").read_text())["selected"]
    assert _pick_point(out, runs, None) == GridPoint(chosen["alpha"], chosen["n_neighbors"])  # chosen without labels
    assert _pick_point(out, runs, 16).alpha == 16


def test_existing_pngs_are_replaced_only_with_overwrite(yale_sweep, tmp_path):
    # A user's directory holding a convergence.png: refused without --overwrite (it used to be
    # replaced silently), replaced with it (no content recogniser: any regular file of that name,
    # never a directory or a link); DIR/plots is replotted freely; a file as --output is a one-line error.
    from lswmkc_dask.io.output import marker_info

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "convergence.png").write_bytes(b"my figure")
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"mine/convergence\.png already exists \(pass overwrite=True or --overwrite"):
        plot_sweep(yale_sweep, mine, alpha=8)
    res = lswmkc_main("plot", yale_sweep, "--output", mine, "--alpha", "8")
    assert res.returncode == 2 and "already exists (pass --overwrite" in res.stderr and "Traceback" not in res.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["convergence.png", "notes.txt"]
    assert (mine / "convergence.png").read_bytes() == b"my figure"
    assert not png_by_lswmkc(mine / "convergence.png")
    (mine / "kernel_weights.png").mkdir()  # a directory of a PNG's name: refused, even with --overwrite
    res = lswmkc_main("plot", yale_sweep, "--output", mine, "--alpha", "8", "--overwrite")
    assert res.returncode == 2 and "is a directory" in res.stderr and "Traceback" not in res.stderr
    assert (mine / "convergence.png").read_bytes() == b"my figure"
    (mine / "kernel_weights.png").rmdir()

    inode = (mine / "convergence.png").stat().st_ino
    res = lswmkc_main("plot", yale_sweep, "--output", mine, "--alpha", "64", "--overwrite")
    assert res.returncode == 0, res.stderr
    check_png(mine / "convergence.png")
    assert png_by_lswmkc(mine / "convergence.png")
    assert (mine / "convergence.png").stat().st_ino != inode  # replaced (atomically: a new file)
    assert (mine / "notes.txt").read_text() == "mine"
    assert marker_info(mine) is None  # no marker added to the user's directory

    fresh = tmp_path / "figs"
    plot_sweep(yale_sweep, fresh, alpha=8)
    assert png_by_lswmkc(fresh / "convergence.png")
    assert marker_info(fresh) is None
    first = (fresh / "convergence.png").stat().st_mtime_ns
    plot_sweep(yale_sweep, fresh, alpha=64, overwrite=True)
    assert (fresh / "convergence.png").stat().st_mtime_ns >= first
    assert sorted(plot_sweep(yale_sweep, alpha=8)) == sorted(yale_sweep / "plots" / n for n in FIGURES)
    assert sorted(plot_sweep(yale_sweep, alpha=64)) == sorted(yale_sweep / "plots" / n for n in FIGURES)  # derived

    afile = tmp_path / "afile"
    afile.write_text("x")
    res = lswmkc_main("plot", yale_sweep, "--output", afile)
    assert res.returncode == 2 and res.stderr.strip() == f"lswmkc: error: output {afile} is a file; give a directory " \
                                                         "for the PNG files", res.stderr


@pytest.fixture(scope="module")
def kgrid_sweeps(tmp_path_factory):
    """Two k-grid sweeps (k = 2..4, alphas 1 and 8) of 4 blobs, with and without labels, in this process."""
    from test_sweep_kgrid import blobs

    kernels, y = blobs()
    base = tmp_path_factory.mktemp("kgrid")
    fast = dict(n_clusters=[2, 3, 4], alphas=[1.0, 8.0], max_iter=5, min_iter=2, n_init=5, progress=False)
    return {"labels": (base / "with", sweep(kernels, base / "with", labels=y, **fast)),
            "none": (base / "without", sweep(kernels, base / "without", **fast))}


def _plot_line(capsys, *args):
    """`lswmkc plot ARGS` in this process: its exit status and the line saying which (alpha, k) it drew."""
    from lswmkc_dask import cli

    capsys.readouterr()
    rc = cli.main(["plot", *map(str, args)])
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if not line.startswith("wrote ")]
    return rc, lines, captured.err


@pytest.mark.parametrize("which", ["labels", "none"])
def test_plot_of_a_k_grid_draws_the_selected_alpha_and_k(kgrid_sweeps, which, tmp_path, capsys):
    """The default figures are of the selected alpha and k (not of the smallest k), with or without labels
    (no "best honest ACC" fallback); --alpha draws the k chosen at that alpha."""
    out, summary = kgrid_sweeps[which]
    chosen = summary["selected"]
    assert chosen["n_clusters"] == 4  # the selected k is not the smallest
    where = f"alpha={chosen['alpha']:g} c=5 k=4"
    rc, lines, _ = _plot_line(capsys, out, "--output", tmp_path / "default")
    assert rc == 0 and len(lines) == 1, lines
    assert lines[0].startswith(f"figures of {where}: the grid point selected without labels"), lines
    assert ("labels play no part" in lines[0]) == (which == "labels")
    assert "ACC" not in lines[0]
    from lswmkc_dask.plots import sweep_point

    point = sweep_point(out)
    assert (point.point.alpha, point.n_clusters, point.labels_file) == (chosen["alpha"], 4, "labels_k=4.csv")
    assert (tmp_path / "default" / "kstar_heatmap.png").is_file()
    if which == "labels":  # the rest does not depend on the labels (one sweep is enough)
        return
    # --alpha: the k chosen at that alpha (k = 4 at alpha 8 too), not the smallest k
    other = 8.0 if chosen["alpha"] == 1.0 else 1.0
    rc, lines, _ = _plot_line(capsys, out, "--alpha", f"{other:g}", "--output", tmp_path / "alpha")
    assert rc == 0 and lines[0].startswith(f"figures of alpha={other:g} c=5 k=4: alpha={other:g} as asked; k of the "
                                           f"largest {SELECTION_CRITERION} at this alpha"), lines
    assert sweep_point(out, alpha=other).labels_file == "labels_k=4.csv"
    # --n-clusters: another k of the grid; one outside it is refused, naming the k available
    rc, lines, _ = _plot_line(capsys, out, "--alpha", f"{other:g}", "--n-clusters", "3", "--output",
                              tmp_path / "k3")
    assert rc == 0 and lines[0].startswith(f"figures of alpha={other:g} c=5 k=3: ") and "k=3 as asked" in lines[0]
    assert sweep_point(out, n_clusters=2).labels_file == "labels_k=2.csv"
    rc, lines, err = _plot_line(capsys, out, "--n-clusters", "7", "--output", tmp_path / "k7")
    assert rc == 2 and "k=7 is not among the k of the sweep's run" in err and "(2, 3, 4)" in err
    assert "--n-clusters" in err and not (tmp_path / "k7").exists()


@pytest.fixture(scope="module")
def small_compare(tmp_path_factory):
    """A compare directory of 3 blobs, its kernel file given by a path with directories, in this process."""
    root = tmp_path_factory.mktemp("cmp")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 1, (30, 3)) + c for c in ([0, 0, 0], [5, 0, 0], [0, 5, 0])])
    (root / "data").mkdir()
    np.savez(root / "data" / "blobs3.npz", kernels=np.stack([np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / s)
                                                            for s in (2.0, 8.0, 32.0)]), labels=np.repeat([0, 1, 2], 30))
    lswmkc_main("compare", root / "data" / ".." / "data" / "blobs3.npz", "--n-clusters", "3", "--alphas", "1", "8",
                "--max-iter", "3", "--n-init", "2", "--output", root / "cmp", "--quiet", check=True)
    return root / "cmp"


def _inside_figure(fig, artist):
    box = artist.get_window_extent(fig.canvas.get_renderer())
    return fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1


def test_compare_titles_name_the_data_and_fit_in_the_figure(small_compare):
    """compare.png names the data by its file's name, not the path as typed; running_time.png's title, of
    a long name too, is not cut off."""
    from lswmkc_dask.grid.compare import running_times
    from lswmkc_dask.plots._compare_figures import _compare_figure

    fig = _compare_figure(small_compare)
    fig.canvas.draw()
    assert fig.get_suptitle() == "LSWMKC and baselines on blobs3.npz"
    assert _inside_figure(fig, fig._suptitle)
    from lswmkc_dask.plots._compare_figures import _running_time_figure

    for data in ("blobs3.npz", "a_rather_long_multiview_kernel_collection_of_handwritten_digits_2024.npz"):
        fig = _running_time_figure(running_times(small_compare), data)
        fig.canvas.draw()
        title = fig.axes[0].title
        assert data in "".join(title.get_text().split()) and _inside_figure(fig, title), title.get_text()


def test_selection_legends_cover_no_curve(kgrid_sweeps):
    """The legends of selection.png (k grid 2..4) leave every curve and mark uncovered (inside the axes,
    "best" put one over the k = 2 line)."""
    from lswmkc_dask.plots._base import import_matplotlib
    from lswmkc_dask.plots._sensitivity import _selection_figure

    out, _ = kgrid_sweeps["none"]
    fig = _selection_figure(out, load_sweep(out)[1], import_matplotlib()[2])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        assert _inside_figure(fig, legend)
        for line in ax.get_lines():
            xy = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
            t = np.linspace(0, 1, 50)[:, None]  # along every segment, not only at the points
            along = np.concatenate([a + t * (b - a) for a, b in zip(xy[:-1], xy[1:])] or [xy])
            assert not any(box.contains(px, py) for px, py in along), (line.get_label(), box)

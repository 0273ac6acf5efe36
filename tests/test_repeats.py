"""`compare(..., repeats=N)` / `sweep(..., repeats=N)`: the final k-means repeated over seeds
derived from random_state; mean/std in report.json, summary and comparison tables; the
LaTeX/Markdown table prints mean +- std; repeats=1 writes exactly what it wrote before."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from lswmkc_dask import cli, prepare
from lswmkc_dask.grid.compare import compare, comparison_table
from lswmkc_dask.report.metrics import METRICS, PROTOCOLS, repeat_seeds
from lswmkc_dask.grid.sweep import sweep
from lswmkc_dask.grid.tables import compare_columns, format_table

pytestmark = pytest.mark.timeout(600)
FAST = {"max_iter": 5, "min_iter": 2, "n_init": 5, "progress": False}
GRID = {"alphas": [8.0], "taus": [0.3]}
#: the columns of comparison.csv before repeats existed (repeats = 1 must keep them)
LEGACY_COLUMNS = (["method", "best_honest"] + [f"{k}_honest" for k in METRICS] + ["best_paper"]
                  + [f"{k}_paper" for k in METRICS] + ["seconds", "grid_seconds", "runs"])
TIMES = ("seconds", "cluster_seconds", "created_utc", "iteration_seconds_total", "seconds_per_iteration",
         "shared_pass_seconds", "pass_seconds")


@pytest.fixture(scope="module")
def store(yale, tmp_path_factory):
    kernels, labels = yale
    return prepare(kernels, tmp_path_factory.mktemp("rep") / "yale.zarr", labels=labels)


@pytest.fixture(scope="module")
def repeated(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "cmp3"
    compare(store.location, out, repeats=3, **GRID, **FAST)
    return out


@pytest.fixture(scope="module")
def singles(store, tmp_path_factory):
    """One compare per derived seed, each with repeats = 1 (computed independently)."""
    outs = []
    for seed in repeat_seeds(0, 3):
        out = tmp_path_factory.mktemp("rep") / f"cmp_seed{seed}"
        compare(store.location, out, random_state=seed, **GRID, **FAST)
        outs.append(out)
    return outs


def _reports(directory):
    runs = {d.name: json.loads((d / "report.json").read_text()) for d in (directory / "runs").iterdir()}
    runs |= {f"lswmkc/{d.name}": json.loads((d / "report.json").read_text())
             for d in (directory / "lswmkc" / "runs").iterdir()}
    return runs


def _strip(report):
    out = {k: v for k, v in report.items() if k not in TIMES and k not in ("repeats", "label_free")}
    out.get("params", {}).pop("random_state", None)
    return out


def test_seeds_are_derived_and_checked():
    seeds = repeat_seeds(7, 4)
    assert seeds[0] == 7 and len(set(seeds)) == 4 and seeds == repeat_seeds(7, 4)
    assert repeat_seeds(7, 1) == [7] and repeat_seeds(None, 1) == [None]
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        repeat_seeds(0, 0)
    with pytest.raises(ValueError, match="needs an integer random_state"):
        repeat_seeds(None, 3)


def test_mean_and_std_equal_those_of_single_runs_with_the_derived_seeds(repeated, singles):
    rep = _reports(repeated)
    single = [_reports(d) for d in singles]
    assert set(rep) == set(single[0]) and len(rep) == 4  # avg-kkm, mkkm, knn_tau=0.3, lswmkc alpha=8
    for name, report in rep.items():
        r = report["repeats"]
        assert r["n"] == 3 and r["seeds"] == repeat_seeds(0, 3)
        for p in PROTOCOLS:
            for m in METRICS:
                values = [s[name]["metrics"][p][m] for s in single]
                assert r["values"][p][m] == pytest.approx(values, abs=1e-12), (name, p, m)
                assert r["mean"][p][m] == pytest.approx(np.mean(values), abs=1e-12)
                assert r["std"][p][m] == pytest.approx(np.std(values, ddof=1), abs=1e-12)
                assert r["std"][p][m] >= 0
        # the run itself (its labels, metrics, kernel) is the run of random_state, untouched
        assert _strip(report) == _strip(single[0][name])
    # the seeds make a difference somewhere (else the test could not fail)
    assert any(r["repeats"]["std"]["honest"]["ACC"] > 0 for r in rep.values())


def test_summary_and_comparison_columns(repeated):
    rows = json.loads((repeated / "comparison.json").read_text())["rows"]
    with open(repeated / "comparison.csv", newline="") as fh:
        header = next(csv.reader(fh))
    extra = [f"{m}_{p}_{s}" for p in PROTOCOLS for m in METRICS for s in ("mean", "std")]
    assert header == LEGACY_COLUMNS + extra  # appended: the old columns keep their places
    by = {r["method"]: r for r in rows}
    knn = json.loads((repeated / "runs" / "knn_tau=0.3" / "report.json").read_text())["repeats"]
    assert by["KNN"]["ACC_honest_mean"] == knn["mean"]["honest"]["ACC"]
    assert by["KNN"]["NMI_paper_std"] == knn["std"]["paper"]["NMI"]
    summary = json.loads((repeated / "lswmkc" / "summary.json").read_text())
    lsw = json.loads((repeated / "lswmkc" / "runs" / "alpha=8_c=5" / "report.json").read_text())["repeats"]
    row = summary["rows"][0]
    assert list(row)[-len(extra):] == extra
    assert row["ARI_paper_mean"] == lsw["mean"]["paper"]["ARI"] == by["LSWMKC"]["ARI_paper_mean"]
    with open(repeated / "lswmkc" / "summary.csv", newline="") as fh:
        assert next(csv.reader(fh))[-len(extra):] == extra


def test_repeats_one_writes_what_it_wrote_before(singles):
    out = singles[0]  # random_state = 0, repeats left at its default
    assert "repeats" not in json.loads((out / "compare.json").read_text())
    assert "repeats" not in json.loads((out / "lswmkc" / "sweep.json").read_text())
    with open(out / "comparison.csv", newline="") as fh:
        assert next(csv.reader(fh)) == LEGACY_COLUMNS
    for report in _reports(out).values():
        assert "repeats" not in report
    rows = json.loads((out / "lswmkc" / "summary.json").read_text())["rows"]
    assert not any(k.endswith(("_mean", "_std")) for r in rows for k in r)
    table = json.loads((out / "comparison.json").read_text())
    assert set(table["legend"]) == {"honest", "paper", "best", "seconds", "grid_seconds"}


def test_resume_with_other_repeats_is_refused(store, repeated, singles):
    with pytest.raises(ValueError, match=r"other settings \{'repeats': \(3, 1\)\}"):
        compare(store.location, repeated, **GRID, **FAST)
    with pytest.raises(ValueError, match=r"other settings \{'repeats': \(1, 2\)\}"):
        compare(store.location, singles[0], repeats=2, **GRID, **FAST)
    with pytest.raises(ValueError, match=r"other settings \{'repeats': \(3, 1\)\}"):
        sweep(store.location, repeated / "lswmkc", alphas=[8.0], **FAST)
    # the same repeats resumes: nothing to run, the same table
    before = comparison_table(repeated)
    compare(store.location, repeated, repeats=3, **GRID, **FAST)
    after = comparison_table(repeated)
    assert [{k: v for k, v in r.items() if "seconds" not in k} for r in after] == \
        [{k: v for k, v in r.items() if "seconds" not in k} for r in before]


def test_latex_table_with_repeats_parses(repeated, capsys):
    assert cli.main(["table", str(repeated), "--format", "latex"]) == 0
    text = capsys.readouterr().out
    spec = re.search(r"\\begin\{tabular\}\{([^}]*)\}", text).group(1)
    body = text[text.index(r"\begin{tabular}"):text.index(r"\end{tabular}")]
    lines = [x.strip() for x in body.splitlines()[1:] if x.strip() and x.strip() != r"\hline"]
    table = comparison_table(repeated)
    assert spec == "l" + "c" * len(table)
    protocol, seen = None, 0
    for line in lines[1:]:
        m = re.match(r"\\multicolumn\{\d+\}\{l\}\{\\emph\{(\w+) protocol\}\}", line)
        if m:
            protocol = m.group(1)
            continue
        cells = [c.strip() for c in line.removesuffix(r"\\").split("&")]
        assert len(cells) == len(spec), line  # the label and one cell per column, no stray &
        metric = cells[0].split(" ")[0]
        means, bolds = [], []
        for cell, row in zip(cells[1:], table, strict=True):
            bold = cell.startswith(r"\textbf{")
            mean, std = (float(x) for x in cell.removeprefix(r"\textbf{").removesuffix("}").split(r" $\pm$ "))
            assert mean == round(100 * row[f"{metric}_{protocol}_mean"], 2)
            assert std == round(100 * row[f"{metric}_{protocol}_std"], 2)
            means.append(mean)
            bolds.append(bold)
        assert bolds == [x == max(means) for x in means]  # bold on the best mean
        seen += 1
    assert seen == len(PROTOCOLS) * len(METRICS)
    md = format_table(compare_columns(repeated), "markdown")
    assert md.count(" ± ") == len(PROTOCOLS) * len(METRICS) * len(table) and "$\\pm$" not in md


def test_sweep_with_a_k_grid_repeats_every_k(store, tmp_path):
    out = tmp_path / "sw"
    summary = sweep(store.location, out, n_clusters=[14, 15], alphas=[8.0], repeats=2, **FAST)
    assert json.loads((out / "sweep.json").read_text())["repeats"] == 2
    report = json.loads((out / "runs" / "alpha=8_c=5" / "report.json").read_text())
    assert report["repeats"]["n"] == 2
    for row in summary["rows"]:
        entry = report["by_n_clusters"][str(row["n_clusters"])]
        for p in PROTOCOLS:
            for m in METRICS:
                values = entry["repeats"]["values"][p][m]
                assert values[0] == row[f"{m}_{p}"] == entry["metrics"][p][m]  # the first seed is the run's
                assert row[f"{m}_{p}_mean"] == pytest.approx(np.mean(values), abs=1e-12)
                assert row[f"{m}_{p}_std"] == pytest.approx(np.std(values, ddof=1), abs=1e-12)

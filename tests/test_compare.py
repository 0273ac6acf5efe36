"""`lswmkc compare` and `lswmkc_dask.grid.compare.compare` on the shipped YALE data: the table, resume, the plot."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
from _helpers import lswmkc, lswmkc_main

from lswmkc_dask.grid.baselines import avg_kkm, knn_kkm
from lswmkc_dask.grid.compare import compare, comparison_table, load_compare

pytestmark = pytest.mark.timeout(600)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METHODS = ["Avg-KKM", "MKKM", "KNN", "LSWMKC"]


def test_cli_compare_yale_resumes(tmp_path):
    # (its time is measured by benchmarks/bench_compare.py, not asserted here)
    out = tmp_path / "cmp"
    first = lswmkc("compare", "--dataset", "yale", "--output", out, timeout=600)
    assert "compare: 0 of 22 runs done" in first.stderr

    # every run on disk, the table in CSV and JSON
    names = {d.name for d in (out / "runs").iterdir()}
    assert names == {"avg-kkm", "mkkm"} | {f"knn_tau={t / 10:g}" for t in range(1, 10)}
    assert len(list((out / "lswmkc" / "runs").glob("alpha=*_c=5"))) == 11
    with open(out / "comparison.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["method"] for r in rows] == METHODS
    table = json.loads((out / "comparison.json").read_text())
    assert [r["method"] for r in table["rows"]] == METHODS and set(table["legend"]) >= {"honest", "paper"}
    by = {r["method"]: r for r in table["rows"]}
    assert by["LSWMKC"]["best_paper"] == "alpha=8" and by["LSWMKC"]["ACC_paper"] == pytest.approx(0.6848, abs=1e-4)
    assert by["Avg-KKM"]["best_honest"] == "-" and by["KNN"]["best_honest"].startswith("tau=")
    assert by["LSWMKC"]["runs"] == 11 and by["KNN"]["runs"] == 9
    for line in ("Avg-KKM", "MKKM", "KNN", "LSWMKC"):  # the table on stdout, the progress on stderr
        assert any(row.startswith(line) for row in first.stdout.splitlines())
        assert not any(row.startswith(line) for row in first.stderr.splitlines())

    # rerun (in this process: it starts no cluster): nothing computed again, results untouched
    stamp = (out / "runs" / "mkkm" / "report.json").stat().st_mtime_ns
    again = lswmkc_main("compare", "--dataset", "yale", "--output", out)
    assert again.returncode == 0, again.stderr
    assert "compare: 22 of 22 runs done" in again.stderr and "nothing to run" in again.stderr
    assert "sweep:" not in again.stderr
    assert (out / "runs" / "mkkm" / "report.json").stat().st_mtime_ns == stamp
    assert json.loads((out / "comparison.json").read_text())["rows"] == table["rows"]


def test_compare_python_resumes_what_is_missing(yale_store, tmp_path):
    out = tmp_path / "cmp"
    kw = {"alphas": (1, 8), "taus": (0.1, 0.5), "progress": False}
    rows = compare(yale_store, out, **kw)
    assert [r["method"] for r in rows] == METHODS
    _, runs, lsw = load_compare(out)
    assert set(runs) == {"avg-kkm", "mkkm", "knn_tau=0.1", "knn_tau=0.5"} and len(lsw) == 2

    # the table holds each method's best run, as the baselines compute it directly
    avg = avg_kkm(yale_store)
    by = {r["method"]: r for r in rows}
    assert by["Avg-KKM"]["ACC_honest"] == avg.metrics["honest"]["ACC"]
    assert by["Avg-KKM"]["ARI_paper"] == avg.metrics["paper"]["ARI"]
    knn = knn_kkm(yale_store, taus=(0.1, 0.5))
    best = max(knn, key=lambda r: r.metrics["paper"]["ACC"])
    assert by["KNN"]["best_paper"] == f"tau={best.param['tau']:g}"
    assert by["KNN"]["ACC_paper"] == best.metrics["paper"]["ACC"]
    np.testing.assert_array_equal(
        np.loadtxt(out / "runs" / "avg-kkm" / "labels.csv", delimiter=",", skiprows=1, dtype=int)[:, 1], avg.labels
    )

    # remove one baseline run and one alpha: only those run again, the table is the same
    shutil.rmtree(out / "runs" / "knn_tau=0.5")
    shutil.rmtree(out / "lswmkc" / "runs" / "alpha=8_c=5")
    stamp = (out / "runs" / "mkkm" / "report.json").stat().st_mtime_ns
    again = compare(yale_store, out, **kw)
    assert (out / "runs" / "mkkm" / "report.json").stat().st_mtime_ns == stamp
    assert (out / "runs" / "knn_tau=0.5" / "report.json").is_file()
    strip = lambda rs: [{k: v for k, v in r.items() if "seconds" not in k} for r in rs]
    assert strip(again) == strip(rows)
    assert strip(comparison_table(out)) == strip(rows)

    # other settings in the same directory: refused
    with pytest.raises(ValueError, match="other settings"):
        compare(yale_store, out, n_init=10, **kw)


def test_compare_messages_and_subset_of_methods(yale_store, tmp_path, capsys):
    out = tmp_path / "base"
    rows = compare(yale_store, out, methods=("knn", "avg-kkm"), taus=(0.3,))
    err = capsys.readouterr().err
    assert "compare: 0 of 2 runs done (Avg-KKM 0/1, KNN 0/1); 2 to run" in err
    assert [r["method"] for r in rows] == ["Avg-KKM", "KNN"]
    assert not (out / "lswmkc").exists()
    compare(yale_store, out, methods=("knn", "avg-kkm"), taus=(0.3,))
    assert "compare: 2 of 2 runs done (Avg-KKM 1/1, KNN 1/1); nothing to run" in capsys.readouterr().err
    # --overwrite: other settings accepted, the old runs replaced
    rows10 = compare(yale_store, out, methods=("avg-kkm",), n_init=10, overwrite=True)
    assert [r["method"] for r in rows10] == ["Avg-KKM"]
    assert json.loads((out / "compare.json").read_text())["n_init"] == 10
    assert not (out / "runs" / "knn_tau=0.3").exists()
    with pytest.raises(ValueError, match="tau"):
        compare(yale_store, tmp_path / "bad", taus=(1.5,))
    with pytest.raises(ValueError, match="methods"):
        compare(yale_store, tmp_path / "bad", methods=("lmkm",))
    with pytest.raises(ValueError, match="onkc has no hyper-parameter 'rh'"):
        compare(yale_store, tmp_path / "bad", methods=("onkc",), grids={"onkc": {"rh": [1]}})
    with pytest.raises(ValueError, match="takes METHOD:PARAM=V1,V2"):
        compare(yale_store, tmp_path / "bad", methods=("onkc",), grids=["onkc:rho"])


def test_cli_errors_and_plot(yale_store, tmp_path):
    bad = lswmkc_main("compare", "--dataset", "yale", "--taus", "1.5", "--output", tmp_path / "x")
    assert bad.returncode == 2 and "tau must be a number in (0, 1]" in bad.stderr
    pytest.importorskip("matplotlib")
    out = tmp_path / "cmp"
    compare(yale_store, out, alphas=(8,), taus=(0.1,), progress=False)
    plotted = lswmkc_main("plot", out)
    assert plotted.returncode == 0, plotted.stderr
    png = out / "plots" / "compare.png"
    assert f"wrote {png}" in plotted.stdout
    assert png.read_bytes()[:8] == PNG_MAGIC

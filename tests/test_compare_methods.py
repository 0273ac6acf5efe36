"""`lswmkc compare` with the paper's compared methods: the authors' numbers through the command
line, the grid spread over a real cluster, resume after a kill, the LaTeX table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _helpers import env, lswmkc

from lswmkc_dask.grid.compare import compare, load_compare

pytestmark = pytest.mark.timeout(900)

FIXTURES = Path(__file__).parent / "data" / "competitors"


def _fixture(name):
    return json.loads((FIXTURES / f"{name}_yale.json").read_text())


def test_cli_compare_runs_the_authors_methods(tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", "--dataset", "yale", "--methods", "mkkm", "smkkm", "mkkm-mr", "oplfmvc",
            "--grid", "mkkm-mr:lambda_=0.0009765625,1", "--n-init", "5", "--output", out]
    first = lswmkc(*args, timeout=600)
    assert "compare: 0 of 5 runs done" in first.stderr
    runs = {d.name for d in (out / "runs").iterdir()}
    assert runs == {"mkkm", "smkkm", "mkkm-mr_lambda_=0.0009765625", "mkkm-mr_lambda_=1", "oplfmvc"}
    mkkm = json.loads((out / "runs" / "mkkm" / "report.json").read_text())
    ref = _fixture("mkkm")
    assert mkkm["method_key"] == "mkkm" and mkkm["n_iter"] == ref["n_iter"]
    np.testing.assert_allclose(mkkm["kernel_weights"], ref["theta_final"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(mkkm["objective"], ref["objective"], rtol=1e-12)
    smkkm = json.loads((out / "runs" / "smkkm" / "report.json").read_text())
    np.testing.assert_allclose(smkkm["kernel_weights"], _fixture("smkkm")["sigma_final"], rtol=0, atol=1e-12)
    for name in runs:
        rep = json.loads((out / "runs" / name / "report.json").read_text())
        assert set(rep["metrics"]) == {"honest", "paper"} and 0 < rep["metrics"]["honest"]["ACC"] <= 1
        w = np.asarray(rep["kernel_weights"])
        # on the simplex, or of unit 2-norm (OPLFMVC's beta)
        norm = np.linalg.norm(w) if name == "oplfmvc" else w.sum()
        assert w.shape == (5,) and np.all(w >= 0) and norm == pytest.approx(1.0)
        assert rep["params"]["n_init"] == 5
    assert json.loads((out / "runs" / "mkkm-mr_lambda_=1" / "report.json").read_text())["params"]["lambda_"] == 1
    table = json.loads((out / "comparison.json").read_text())["rows"]
    assert [r["method"] for r in table] == ["MKKM", "MKKM-MR", "SMKKM", "OPLFMVC"]
    # the table's best over the grid is the best run's
    accs = [json.loads((out / "runs" / n / "report.json").read_text())["metrics"]["paper"]["ACC"]
            for n in ("mkkm-mr_lambda_=0.0009765625", "mkkm-mr_lambda_=1")]
    assert table[1]["ACC_paper"] == max(accs)

    again = lswmkc(*args, timeout=600)
    assert "compare: 5 of 5 runs done" in again.stderr and "nothing to run" in again.stderr
    latex = lswmkc("table", out, "--format", "latex").stdout
    assert "& MKKM & MKKM-MR & SMKKM & OPLFMVC \\\\" in latex


def test_compare_methods_on_a_dask_cluster_equal_in_process(yale_store, client, tmp_path):
    kw = {"methods": ("lkam", "onkc"), "grids": {"lkam": {"tau": [0.3], "lambda_": [1, 4]},
                                                "onkc": {"rho": [1], "lambda_": [1]}},
          "n_init": 5, "progress": False}
    local = compare(yale_store, tmp_path / "local", **kw)
    remote = compare(yale_store, tmp_path / "remote", client=client, **kw)
    assert [r["method"] for r in local] == ["LKAM", "ONKC"]
    _, lruns, _ = load_compare(tmp_path / "local")
    _, rruns, _ = load_compare(tmp_path / "remote")
    assert set(lruns) == set(rruns) == {"lkam_tau=0.3_lambda_=1", "lkam_tau=0.3_lambda_=4", "onkc_rho=1_lambda_=1"}
    for name in lruns:
        assert rruns[name]["execution"].startswith("Dask: ")
        assert rruns[name]["kernel_weights"] == lruns[name]["kernel_weights"]
        assert rruns[name]["metrics"] == lruns[name]["metrics"]
    for key in ("ACC_honest", "ACC_paper"):
        assert [r[key] for r in local] == [r[key] for r in remote]


def test_compare_killed_mid_grid_resumes(tmp_path):
    """SIGKILL while the grid runs: the finished runs stay, the rerun does only the rest."""
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "lswmkc_dask.cli", "compare", "--dataset", "yale", "--methods", "lf-mvc",
            "--grid", "lf-mvc:lambda_=" + ",".join(str(2.0**e) for e in range(-6, 6)), "--n-init", "5",
            "--output", str(out)]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env())
    try:
        for line in proc.stderr:  # the event: the third run written
            if line.startswith("[3/12]"):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)
    done = {d.name for d in (out / "runs").iterdir() if (d / "report.json").is_file()}
    assert 3 <= len(done) < 12
    again = lswmkc(*args[3:], timeout=600)
    assert f"compare: {len(done)} of 12 runs done" in again.stderr
    assert len([d for d in (out / "runs").iterdir() if not d.name.startswith(".")]) == 12

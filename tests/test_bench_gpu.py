"""benchmarks/bench_gpu.py on NumPy in place of CuPy (``--dry-run``): the script's every
step runs in CI, so the GPU run finds it working (its figures are measured on a GPU)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _helpers import ROOT, env

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def test_bench_gpu_dry_run(tmp_path):
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--dry-run", "--no-parity", "--datasets", "--sizes", "240",
         "--sweep-n", "240", "--workdir", str(tmp_path / "work"), "--json", str(out)],
        capture_output=True, text=True, check=False, timeout=540, env=env(), cwd=ROOT / "benchmarks",
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    results = json.loads(out.read_text())
    steps, records = results["steps"], results["end_to_end"]
    assert [(r["dataset"], r["precision"]) for r in records] == [("synthetic", "float64"), ("synthetic", "mixed")]
    for fit in records:
        assert fit["n"] == 240 and fit["execution"].startswith("resident on cuda")
        assert fit["kernels_s"] > 0 and fit["to_device_s"] == 0  # the kernels built there: no stack copied
        assert 20 <= fit["n_iter"] <= 100 and fit["acc"] > 0.5  # 10 balanced clusters: chance is about 0.1
        assert fit["total_s"] >= fit["kernels_s"] + fit["iterations_s"] + fit["kmeans_s"]
        assert fit["steady_over_eigh"] == pytest.approx(fit["steady_iteration_s"] / fit["eigh_s"])
    assert records[0]["ari_vs_float64"] == 1.0 and records[1]["ari_vs_float64"] >= 0.99
    assert abs(records[1]["acc_vs_float64_points"]) <= 0.5
    sweep = steps["sweep"]
    assert sweep["routes"] == ["resident"] and sweep["alphas"] == 11 and sweep["iterations"] >= 11 * 20
    assert "dry run" in proc.stdout and "no GPU figure" in proc.stdout


def test_bench_gpu_dry_run_float32_stack(tmp_path):
    """--stack-dtype float32 (the n = 40,000 run on one H200): the records say so, and the mixed fit
    of the float32 stack keeps the labels of its float64 fit."""
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--dry-run", "--no-parity", "--datasets", "--sizes", "240",
         "--sweep-n", "0", "--stack-dtype", "float32", "--fit-eigh", "--workdir", str(tmp_path / "work"),
         "--json", str(out)],
        capture_output=True, text=True, check=False, timeout=540, env=env(), cwd=ROOT / "benchmarks",
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    records = json.loads(out.read_text())["end_to_end"]
    assert [(r["precision"], r["stack_dtype"]) for r in records] == [("float64", "float32"), ("mixed", "float32")]
    assert records[1]["ari_vs_float64"] >= 0.99 and all(r["acc"] > 0.5 for r in records)
    f64, mixed = records  # --fit-eigh: eigh_s from the float64 fit's own eigen steps, one per iteration
    assert f64["eigh_from"] == "fit" and f64["float64_eighs"] == f64["n_iter"] and f64["low_iteration_s"] is None
    assert 3 <= mixed["float64_eighs"] < mixed["n_iter"] and mixed["low_iteration_s"] > 0
    assert mixed["eigh_s"] == f64["eigh_s"] > 0

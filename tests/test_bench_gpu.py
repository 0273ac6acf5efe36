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
         "--sweep-n", "240", "--workspace-query", "30000", "46341", "--workdir", str(tmp_path / "work"),
         "--json", str(out)],
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
        # the plan that ran (issue 51): the stack built on the "device" at this n, syevd; one pass moves the m
        # weights there and m + 5 numbers back (more in a mixed iteration: its rank); the allocator's live bytes
        assert (fit["stack"], fit["eigen"], fit["stack_bytes_per_pass"]) == ("device", "syevd", 0)
        assert 0 < fit["bytes_per_pass"] < 8 * 240
        assert fit["peak_device_bytes"] == 0 and fit["peak_device_from"] == "memory pool used_bytes"
        assert fit["stop_rule"]["n_iter"] == fit["n_iter"]
        assert fit["stop_rule"]["stop_precisions"] == [["float64", "float64"]] * 2
    assert records[1]["stop_rule"]["first_float64"] == 20 and records[0]["stop_rule"]["first_float64"] == 1
    assert results["workspace"] == [{"n": n, "measured": False, "why": "dry run: no GPU"} for n in (30000, 46341)]
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


def test_gpu_device_script_syntax_and_dry_run(tmp_path):
    """benchmarks/gpu_device_script.sh (issue 51's device checks in one run): its syntax, its first
    command the GPU machine's setup, and a dry run (NumPy for CuPy, small sizes) that writes every
    record to $OUT within its budget."""
    script = ROOT / "benchmarks" / "gpu_device_script.sh"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=60).returncode == 0
    commands = [line for line in script.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert commands[0].startswith('source "${SETUP:-.whl/setup.sh}"')
    setup = tmp_path / "setup.sh"
    setup.write_text(f"export PYTHONPATH={ROOT}\n")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=env(SETUP=str(setup), OUT=str(out), DRY_RUN="1", BUDGET="800", PYTHON=sys.executable))
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    summary = (out / "summary.txt").read_text()
    for name in ("workspace", "plans", "pytest_gpu", "n240", "n260"):
        assert f"{name}: exit 0 " in summary, summary
    assert [r["n"] for r in json.loads((out / "workspace.json").read_text())["workspace"]] == [30000, 46341, 60000]
    plans = json.loads((out / "plans.json").read_text())
    assert {(r["n"], r["stack_dtype"]) for r in plans} == {(240, "float32"), (240, "float64"), (260, "float32"),
                                                           (260, "float64")}
    assert all(not r["measured"] and r["plan"]["stack"] == "device" for r in plans)
    n240 = json.loads((out / "n240.json").read_text())["end_to_end"]
    assert [(r["precision"], r["eigen"]) for r in n240] == [("float64", "syevd"), ("mixed", "syevd")]
    assert json.loads((out / "n260.json").read_text())["end_to_end"][0]["stack_dtype"] == "float32"
    assert "skipped" in (out / "pytest_gpu.log").read_text()

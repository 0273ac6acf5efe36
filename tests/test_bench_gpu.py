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
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--dry-run", "--no-parity", "--sizes", "240",
         "--sweep-n", "240", "--workdir", str(tmp_path / "work"), "--json", str(out)],
        capture_output=True, text=True, check=False, timeout=540, env=env(), cwd=ROOT / "benchmarks",
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    steps = json.loads(out.read_text())["steps"]
    fit = steps["n240"]
    assert fit["route"] == ["resident"] and fit["execution"].startswith("resident on cuda")
    assert 20 <= fit["n_iter"] <= 100 and fit["ACC"] > 0.5  # 10 balanced clusters: chance is about 0.1
    assert fit["steady_over_eigh"] == pytest.approx(fit["steady_iteration"] / fit["isolated_eigh"])
    sweep = steps["sweep"]
    assert sweep["routes"] == ["resident"] and sweep["alphas"] == 11 and sweep["iterations"] >= 11 * 20
    assert "dry run" in proc.stdout and "no GPU figure" in proc.stdout

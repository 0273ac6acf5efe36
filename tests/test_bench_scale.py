"""Smoke test of benchmarks/bench_scale.py (the scale benchmark itself is run by hand)."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import pytest

from _helpers import ROOT, env

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

# The smallest sizes that still fit both modes of the script: a full fit (n = 200, up to
# --full-fit-max) and a fixed number of iterations beyond it (n = 300); one isolated eigh
# each. The time is the processes' (Python, Dask and two spawned workers per size), not the fit.
SIZES = (200, 300)
FLAGS = ("--full-fit-max", "200", "--iterations", "3", "--repeats", "1")


def test_bench_scale_smoke(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--sizes", *map(str, SIZES), *FLAGS,
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, check=False, timeout=540, env=env(),
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{proc.stderr[-4000:]}"
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| n | prepare s |"))
    columns = [c.strip() for c in lines[head].strip("|").split("|")]
    rows = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[int(cells[0])] = dict(zip(columns, cells))
    assert sorted(rows) == list(SIZES), out
    for n, row in rows.items():
        for col in ("prepare s", "iterations", "first s/it", "steady s/it", "subset eigh s", "steady / eigh",
                    "steady / in-fit eig", "fit wall s"):
            value = float(row[col])
            assert math.isfinite(value) and value > 0, (n, col, row)
        assert math.isfinite(float(row["outside eig s/it"])), row
        assert row["kernel read / iteration"] == "0 (stack once)", row  # a few MB: cached
        rss = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", row["peak RSS client / workers MiB (limit)"].split("(")[0])]
        assert len(rss) == 3 and all(x > 0 for x in rss), row  # client and 2 workers
        assert row["restarted"] == "no", row
    for name in ("steady seconds per iteration", "isolated subset eigh seconds"):
        m = re.search(rf"^power law: {name} ~ (\S+) \* n\^(\S+) ", out, re.MULTILINE)
        assert m, out
        assert all(math.isfinite(float(x)) for x in m.groups()), m.group(0)
    for n in SIZES:
        assert re.search(rf"^n = {n}: every worker under its limit \(2GB\) and none restarted: yes; "
                         rf"client < 1 GiB: yes$", out, re.MULTILINE), out
    assert re.search(r"^== n = 200: .*, full fit$", out, re.MULTILINE), out
    assert re.search(r"^== n = 300: .*, 3 iterations$", out, re.MULTILINE), out
    assert float(rows[300]["iterations"]) == 3, rows[300]  # exactly --iterations beyond --full-fit-max
    assert not (tmp_path / "work" / "n300").exists()  # stores and data removed without --keep


def test_bench_scale_reports_a_refused_size_and_goes_on(tmp_path):
    """A size the package's memory plan refuses (worker limit below the gathered step's
    n^2 x 8 bytes with headroom) is a row with the reason; the other sizes still run (here: none)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--sizes", "300", "400",
         "--worker-memory", "500kB", "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, check=False, timeout=120, env=env(),
    )
    out = proc.stdout
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{out}\nstderr:\n{proc.stderr[-4000:]}"
    for n in (300, 400):
        assert re.search(rf"^\| {n} \| n/a \| failed: refused up front by the package's memory plan.*MemoryError: "
                         rf"the gathered eigendecomposition needs", out, re.MULTILINE), out
        assert re.search(rf"^n = {n}: did not run: refused up front", out, re.MULTILINE), out
    assert "power law: steady seconds per iteration: not enough sizes" in out

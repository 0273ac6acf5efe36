"""`lswmkc compare --dataset yale`: wall seconds of the whole command, and of its resume.

Prints the machine, then for each of ``--repeats`` runs (a fresh output directory
each time) the wall seconds of the command as a user runs it (a new interpreter:
imports, preprocessing, 11 LSWMKC alphas, Avg-KKM, MKKM, 9 KNN taus, both protocols,
every file written) and of the same command rerun on the finished directory (which
computes nothing: "22 of 22 runs done"), and the medians.

Run: ``python benchmarks/bench_compare.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def machine():
    from bench_iteration import machine as base

    return f"{base()} | load average {os.getloadavg()[0]:.2f} at start"


def run(output):
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lswmkc_dask.cli", "compare", "--dataset", "yale", "--output", output],
        capture_output=True, text=True, check=True,
    )
    return time.perf_counter() - t, proc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(machine(), flush=True)
    firsts, resumes = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.repeats):
            out = os.path.join(d, f"cmp{i}")
            first, proc = run(out)
            again, proc2 = run(out)
            done = next((line for line in proc2.stderr.splitlines() if "runs done" in line), "?")
            firsts.append(first)
            resumes.append(again)
            print(f"run {i + 1}: {first:.2f} s, resume {again:.2f} s ({done.strip()})", flush=True)
        print("\n".join(proc.stderr.strip().splitlines()[-5:]))  # the table of the last run
    print(f"lswmkc compare --dataset yale: median {statistics.median(firsts):.2f} s "
          f"(runs {' '.join(f'{x:.2f}' for x in firsts)}); resume median {statistics.median(resumes):.2f} s")


if __name__ == "__main__":
    main()

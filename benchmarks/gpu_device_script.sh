#!/usr/bin/env bash
# The device checks of issue 51 in one run on one GPU (at most about 10 minutes on an H200),
# from the project's root, records to $OUT:
#   1. cuSOLVER's workspace at n = 30,000, 46,341 and 60,000 (xsyevdx's and the split
#      route's sytrd/ormtr, 32-bit API), and the plan each n of the issue gets on this
#      device (stack, eigen route, bytes, or the refusal with its figures);
#   2. pytest -m gpu;
#   3. the sizes of the issue features -> labels (bench_gpu.py): n = 20,000 float64 and
#      mixed, then n = 50,000 mixed, 70,000 and 100,000 mixed, each bounded by what is left
#      of the budget (a run cut by its timeout leaves its log, per iteration, in $OUT).
# BUDGET (seconds, default 570) bounds the whole run. DRY_RUN=1: NumPy stands in for CuPy and
# the sizes are small (a check of this script in CI; no GPU figure). SETUP names the setup
# file to source (default .whl/setup.sh, which the GPU machine needs: shared/gpu/fetch-wheels.sh).
source "${SETUP:-.whl/setup.sh}" || { echo "gpu_device_script: cannot source ${SETUP:-.whl/setup.sh}" >&2; exit 3; }
set -u
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
BUDGET="${BUDGET:-570}"
START=$SECONDS
PY="${PYTHON:-python3}"
DRY=()
SIZES=(20000 50000 70000 100000)
QUERY=(30000 46341 60000)
if [ "${DRY_RUN:-0}" = 1 ]; then
  DRY=(--dry-run)
  SIZES=(240 260)
fi

left() { echo $(( BUDGET - (SECONDS - START) )); }
# step NAME CAP COMMAND...: run COMMAND under timeout min(CAP, what is left), log to $OUT/NAME.log
step() {
  local name=$1 cap=$2; shift 2
  local t; t=$(left)
  [ "$cap" -lt "$t" ] && t=$cap
  if [ "$t" -lt 10 ]; then
    echo "$name: skipped ($(left) s of the budget left)" | tee -a "$OUT/summary.txt"
    return 0
  fi
  local t0=$SECONDS
  timeout --signal=INT --kill-after=15 "$t" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $(( SECONDS - t0 )) s (limit $t s)" | tee -a "$OUT/summary.txt"
}

cd "$(dirname "$0")" || exit 3  # benchmarks/: bench_gpu.py imports bench_scale
step workspace 90 "$PY" bench_gpu.py "${DRY[@]}" --workspace-query "${QUERY[@]}" --no-parity --datasets --sizes \
  --sweep-n 0 --json "$OUT/workspace.json"
step plans 60 "$PY" - "${DRY_RUN:-0}" "$OUT/plans.json" "${SIZES[@]}" <<'PY'
import json, sys
from lswmkc_dask.engine import gpu
from lswmkc_dask.engine.device_route import plan_for
dry, path, sizes = sys.argv[1] == "1", sys.argv[2], [int(n) for n in sys.argv[3:]]
if dry:
    gpu._TEST_NAMESPACE = "numpy"
xp = gpu.namespace("cuda")
info = gpu.device_info(xp)
rows = []
for n in sizes:
    for stack_dtype, itemsize in (("float32", 4), ("float64", 8)):
        plan, why = plan_for(6, n, itemsize, xp, info, off_device="features", feature_columns=650)
        rows.append({"n": n, "m": 6, "stack_dtype": stack_dtype, "device_info": info, "measured": not dry,
                     "plan": None if plan is None else {"stack": plan.stack, "eigen": plan.eigen, "bytes": plan.need},
                     "refusal": why})
        print(rows[-1], flush=True)
json.dump(rows, open(path, "w"), indent=1)
PY
cd .. || exit 3
if [ "${DRY_RUN:-0}" = 1 ]; then
  step pytest_gpu 120 "$PY" -m pytest -m gpu -q -p no:cacheprovider tests/test_split_eigen.py
else
  step pytest_gpu 180 "$PY" -m pytest -m gpu -q -p no:cacheprovider tests
fi
cd benchmarks || exit 3
step "n${SIZES[0]}" 240 "$PY" bench_gpu.py "${DRY[@]}" --no-parity --datasets --sizes "${SIZES[0]}" \
  --precisions float64 mixed --sweep-n 0 --fit-eigh --verbose --budget 100000 --json "$OUT/n${SIZES[0]}.json"
for n in "${SIZES[@]:1}"; do
  step "n$n" 100000 "$PY" bench_gpu.py "${DRY[@]}" --no-parity --datasets --sizes "$n" --precisions mixed \
    --stack-dtype float32 --sweep-n 0 --fit-eigh --verbose --budget 100000 --json "$OUT/n$n.json"
done
echo "done in $(( SECONDS - START )) s; records in $OUT" | tee -a "$OUT/summary.txt"

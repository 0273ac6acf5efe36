#!/usr/bin/env bash
# Start a real multi-process Dask cluster on this machine, loopback only, for trying
# lswmkc-dask against an external scheduler: one `dask scheduler` and N `dask worker`
# processes (one thread each), each in its own process group, in the background.
#
#   cluster/start-local.sh [-n N] [-d DIR] [--memory-limit LIMIT] [--timeout SECONDS]
#                          [--tls-ca-file CA --tls-cert CERT --tls-key KEY]
#
# Writes DIR/scheduler.json (the scheduler file), DIR/pids (scheduler first, then the
# workers), DIR/address and DIR/logs/*.log; waits until the N workers are connected and
# prints the scheduler address (tcp://127.0.0.1:PORT, or tls://... with the TLS flags)
# as the last line of stdout, so that
#
#   ADDR=$(cluster/start-local.sh -n 2 -d /tmp/dask-local | tail -n 1)
#   lswmkc sweep --dataset yale --alphas 1 8 128 --output sweep --scheduler "$ADDR"
#   lswmkc sweep ... --scheduler-file /tmp/dask-local/scheduler.json
#   cluster/stop-local.sh -d /tmp/dask-local
#
# Every server binds to 127.0.0.1: the scheduler and workers with --host, and their
# HTTP endpoints (health, metrics, dashboard) with --dashboard-address 127.0.0.1:0 —
# `--no-dashboard` alone still serves those on 0.0.0.0. The `dask` command used is
# $DASK (default: `dask` on PATH).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

n=2
dir=./dask-local
memory_limit=auto
timeout=90
tls_ca="" tls_cert="" tls_key=""
DASK=${DASK:-dask}

while [ $# -gt 0 ]; do
    case "$1" in
        -n|--workers) n=${2:?}; shift 2 ;;
        -d|--dir) dir=${2:?}; shift 2 ;;
        --memory-limit) memory_limit=${2:?}; shift 2 ;;
        --timeout) timeout=${2:?}; shift 2 ;;
        --tls-ca-file) tls_ca=${2:?}; shift 2 ;;
        --tls-cert) tls_cert=${2:?}; shift 2 ;;
        --tls-key) tls_key=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "start-local.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

case "$n" in ''|*[!0-9]*|0) echo "start-local.sh: -n needs a positive integer, got '$n'" >&2; exit 2 ;; esac
case "$timeout" in ''|*[!0-9]*|0) echo "start-local.sh: --timeout needs a positive integer, got '$timeout'" >&2; exit 2 ;; esac
if ! command -v "$DASK" >/dev/null 2>&1; then
    echo "start-local.sh: '$DASK' not found (install the checkout, which brings it: pip install /path/to/lswmkc-dask; or set DASK=/path/to/dask)" >&2
    exit 2
fi

tls_args=()
protocol_args=()
if [ -n "$tls_ca$tls_cert$tls_key" ]; then
    if [ -z "$tls_ca" ] || [ -z "$tls_cert" ] || [ -z "$tls_key" ]; then
        echo "start-local.sh: TLS needs --tls-ca-file, --tls-cert and --tls-key together" >&2
        exit 2
    fi
    for f in "$tls_ca" "$tls_cert" "$tls_key"; do
        [ -r "$f" ] || { echo "start-local.sh: cannot read TLS file $f" >&2; exit 2; }
    done
    abspath() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
    tls_args=(--tls-ca-file "$(abspath "$tls_ca")" --tls-cert "$(abspath "$tls_cert")" --tls-key "$(abspath "$tls_key")")
    protocol_args=(--protocol tls)
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pids_file="$dir/pids"
sched_file="$dir/scheduler.json"

alive() { kill -0 "$1" 2>/dev/null; }

if [ -f "$pids_file" ]; then
    while read -r pid; do
        if [ -n "$pid" ] && alive "$pid"; then
            echo "start-local.sh: a cluster started from $dir is still running (pid $pid); stop it with cluster/stop-local.sh -d $dir" >&2
            exit 1
        fi
    done < "$pids_file"
fi
rm -f "$pids_file" "$sched_file" "$dir/address"
mkdir -p "$dir/logs" "$dir/work"

stop_all() {
    "$(dirname "$0")/stop-local.sh" -d "$dir" >&2 || true
}

fail() {
    echo "start-local.sh: $1" >&2
    for log in "$dir"/logs/*.log; do
        [ -f "$log" ] || continue
        echo "--- last lines of $log:" >&2
        tail -n 15 "$log" >&2
    done
    stop_all
    exit 1
}

# Job control: every background process gets its own process group (pgid = its pid),
# so that stop-local.sh can signal a worker together with the process its nanny spawned.
set -m

"$DASK" scheduler --host 127.0.0.1 --port 0 --scheduler-file "$sched_file" \
    --no-dashboard --dashboard-address 127.0.0.1:0 \
    ${protocol_args[@]+"${protocol_args[@]}"} ${tls_args[@]+"${tls_args[@]}"} \
    </dev/null >"$dir/logs/scheduler.log" 2>&1 &
scheduler_pid=$!
echo "$scheduler_pid" >> "$pids_file"

deadline=$((SECONDS + timeout))
address=""
while [ -z "$address" ]; do
    alive "$scheduler_pid" || fail "the scheduler exited"
    [ "$SECONDS" -lt "$deadline" ] || fail "no scheduler file after ${timeout} s"
    if [ -s "$sched_file" ]; then
        address=$(sed -n 's/^ *"address": *"\([^"]*\)".*/\1/p' "$sched_file" | head -n 1)
    fi
    [ -n "$address" ] || sleep 0.2
done
echo "start-local.sh: scheduler at $address (pid $scheduler_pid)" >&2

worker_pids=()
for ((i = 0; i < n; i++)); do
    "$DASK" worker --scheduler-file "$sched_file" --host 127.0.0.1 --nthreads 1 \
        --memory-limit "$memory_limit" --name "local-$i" --local-directory "$dir/work" \
        --no-dashboard --dashboard-address 127.0.0.1:0 --death-timeout 60 \
        ${tls_args[@]+"${tls_args[@]}"} \
        </dev/null >"$dir/logs/worker-$i.log" 2>&1 &
    worker_pids+=("$!")
    echo "$!" >> "$pids_file"
done

while :; do
    connected=0
    for ((i = 0; i < n; i++)); do
        alive "${worker_pids[$i]}" || fail "worker $i exited"
        if grep -q "Registered to:" "$dir/logs/worker-$i.log" 2>/dev/null; then
            connected=$((connected + 1))
        fi
    done
    [ "$connected" -lt "$n" ] || break
    [ "$SECONDS" -lt "$deadline" ] || fail "only $connected of $n workers connected after ${timeout} s"
    sleep 0.2
done

echo "$address" > "$dir/address"
echo "start-local.sh: $n workers connected; stop with: $(dirname "$0")/stop-local.sh -d $dir" >&2
echo "$address"

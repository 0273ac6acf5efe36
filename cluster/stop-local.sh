#!/usr/bin/env bash
# Stop a cluster started by cluster/start-local.sh.
#
#   cluster/stop-local.sh [-d DIR] [--timeout SECONDS]
#
# Sends SIGTERM to the process group of every PID in DIR/pids (workers first, then the
# scheduler), waits up to --timeout seconds (default 20) for them to exit, then sends
# SIGKILL to whatever is left. Only PIDs whose command line is still a `dask` process
# are signalled (a PID reused by something else is left alone). Removes DIR/pids,
# DIR/scheduler.json and DIR/address; keeps DIR/logs. Exits 0 when nothing is left.
set -euo pipefail

dir=./dask-local
timeout=20
while [ $# -gt 0 ]; do
    case "$1" in
        -d|--dir) dir=${2:?}; shift 2 ;;
        --timeout) timeout=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "stop-local.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$timeout" in ''|*[!0-9]*) echo "stop-local.sh: --timeout needs an integer" >&2; exit 2 ;; esac

pids_file="$dir/pids"
if [ ! -f "$pids_file" ]; then
    echo "stop-local.sh: no $pids_file; nothing to stop" >&2
    exit 0
fi

is_ours() {
    # Alive (or its process group is) and still a dask process (not a reused PID).
    group_alive "$1" || return 1
    local args
    args=$(ps -o args= -p "$1" 2>/dev/null) || return 0  # leader gone, group left
    case "$args" in *dask*) return 0 ;; *) return 1 ;; esac
}

signal() {
    # Signal the process group when the PID leads one (start-local.sh makes it so),
    # else the process alone. A leader already gone leaves its group to signal.
    local sig=$1 pid=$2 pgid
    pgid=$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') || pgid=""
    if [ -z "$pgid" ] || [ "$pgid" = "$pid" ]; then
        kill "-$sig" -- "-$pid" 2>/dev/null || true
    fi
    if [ -n "$pgid" ] && [ "$pgid" != "$pid" ]; then
        kill "-$sig" "$pid" 2>/dev/null || true
    fi
}

group_alive() {
    # True while the process or any member of its process group is alive (zombies,
    # waiting to be reaped by their parent, do not count).
    ps -e -o pid=,pgid=,stat= 2>/dev/null | awk -v id="$1" '
        ($1 == id || $2 == id) && $3 !~ /^Z/ { found = 1 } END { exit !found }'
}

mapfile -t pids < <(grep -E '^[0-9]+$' "$pids_file" || true)
targets=()
# Workers first (reverse order: the scheduler is the first line), then the scheduler.
for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[$i]}
    if is_ours "$pid"; then
        targets+=("$pid")
    fi
done

for pid in ${targets[@]+"${targets[@]}"}; do
    signal TERM "$pid"
done

deadline=$((SECONDS + timeout))
while :; do
    left=()
    for pid in ${targets[@]+"${targets[@]}"}; do
        if group_alive "$pid"; then left+=("$pid"); fi
    done
    [ ${#left[@]} -gt 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
        echo "stop-local.sh: still running after ${timeout} s, sending SIGKILL: ${left[*]}" >&2
        for pid in "${left[@]}"; do signal KILL "$pid"; done
        sleep 1
        break
    fi
    sleep 0.2
done

status=0
for pid in ${targets[@]+"${targets[@]}"}; do
    if group_alive "$pid"; then
        echo "stop-local.sh: process (group) $pid is still running" >&2
        status=1
    fi
done
if [ "$status" -eq 0 ]; then
    rm -f "$pids_file" "$dir/scheduler.json" "$dir/address"
    echo "stop-local.sh: stopped ${#targets[@]} processes" >&2
fi
exit "$status"

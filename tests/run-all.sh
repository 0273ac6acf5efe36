#!/usr/bin/env bash
# Install what the tests need and run all of them: lint (ruff), types (mypy), the
# documentation site (built with every warning an error; its examples run), then the
# fast tier (-m "not integration") and the integration tier (-m integration).
# .ci/run calls this script; the README's set-up gives it as the second command.
#
#   tests/run-all.sh [--no-install] [--fast] [PYTEST ARGS ...]
#
#   --no-install   use the environment as it is (skip pip install -e ".[test,lint,docs]")
#   --fast         the fast tier only (no subprocesses, no clusters, no documentation build)
#   PYTEST ARGS    passed to both pytest runs (e.g. -x, --durations=15)
#
# Exit status: the first failing step's (ruff, mypy, sphinx, pytest). A tier that collects no
# tests (pytest's exit 5, e.g. a -k that matches nothing) is a failure, never a pass.
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
docs=1
tiers=("not integration" "integration")
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) install=0; shift ;;
        --fast) tiers=("not integration"); docs=0; shift ;;
        --help|-h) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done

if [ "$install" = 1 ]; then
    python -m pip install -e ".[test,lint,docs]"
fi
echo "== ruff" >&2
ruff check lswmkc_dask tests benchmarks cluster examples docs
echo "== mypy" >&2
mypy
if [ "$docs" = 1 ]; then
    echo "== sphinx (the documentation site and its examples)" >&2
    site=$(mktemp -d)
    rc=0
    python -m sphinx -W --keep-going -q -b html docs "$site" || rc=$?
    rm -rf "$site"
    if [ "$rc" != 0 ]; then
        exit "$rc"
    fi
fi
for tier in "${tiers[@]}"; do
    echo "== pytest -m \"$tier\"" >&2
    rc=0
    python -m pytest -m "$tier" "$@" || rc=$?
    if [ "$rc" = 5 ]; then
        echo "run-all: the tier -m \"$tier\" collected no tests (pytest exit 5): nothing was tested" >&2
    fi
    if [ "$rc" != 0 ]; then
        exit "$rc"
    fi
done
echo "run-all: lint, types and ${#tiers[@]} test tier(s) passed" >&2

#!/usr/bin/env bash
# How perfgate compare takes its files when a user names them as a shell or a CI definition does: a quoted pattern,
# a pattern that matches nothing, a folder, and an unquoted pattern the shell expanded. Three process runs a side of
# probe.cpp (../2026-12-01_nan-counter-and-aggregates-only), BM_Env changed on the after side (SLOW set).
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work/runs" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
for i in 1 2 3; do
  taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Env \
    --benchmark_out=runs/before-$i.json > /dev/null 2>&1
  SLOW=1 taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Env \
    --benchmark_out=runs/after-$i.json > /dev/null 2>&1
done
step() { echo; echo "\$ $*"; "$@" 2>&1 | head -3; echo "(exit ${PIPESTATUS[0]})"; }
step "$perfgate" compare 'runs/before-*.json' 'runs/after-*.json'
step "$perfgate" compare 'runs/befor-*.json' 'runs/after-*.json'
step "$perfgate" compare runs runs/after-1.json
echo; echo "\$ $perfgate compare runs/before-*.json runs/after-*.json    # unquoted: the shell expands it"
"$perfgate" compare runs/before-*.json runs/after-*.json 2>&1 | head -3; echo "(exit ${PIPESTATUS[0]})"

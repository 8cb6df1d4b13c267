#!/usr/bin/env bash
# The first screen's advice for benchmarks with no baseline: perfgate run of a plain binary with none stored, and
# perfgate compare where the current side has a benchmark the baseline lacks. probe.cpp is
# ../2026-12-01_nan-counter-and-aggregates-only's.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
echo "\$ $perfgate run --bench ./probe --filter BM_Sum --rounds 2 --repetitions 3 --min-time 0.02 --pin-cpus 0 -q"
"$perfgate" run --bench ./probe --filter BM_Sum --rounds 2 --repetitions 3 --min-time 0.02 --pin-cpus 0 -q 2>&1 |
  grep -A1 '^not judged'
for i in 1 2 3; do
  taskset -c 0 ./probe --benchmark_min_time=0.02 --benchmark_repetitions=5 --benchmark_filter='BM_Sum/1024$' \
    --benchmark_out=before-$i.json > /dev/null 2>&1
  taskset -c 0 ./probe --benchmark_min_time=0.02 --benchmark_repetitions=5 --benchmark_filter='BM_Sum/(1024|4096)$' \
    --benchmark_out=after-$i.json > /dev/null 2>&1
done
echo; echo "\$ $perfgate compare 'before-*.json' 'after-*.json'"
"$perfgate" compare 'before-*.json' 'after-*.json' 2>&1 | grep ' new '

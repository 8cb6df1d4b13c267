#!/usr/bin/env bash
# Two first-contact probes of perfgate compare with a plain Google Benchmark binary (probe.cpp):
#   1. a user counter written NaN (Google Benchmark writes the word unquoted) in the current run;
#   2. files written with --benchmark_report_aggregates_only, one process run a side, then nine a side (the advice followed) with a
#      planted change of BM_Env (with SLOW set, its getenv finds the variable early instead of scanning the
#      whole environment: faster).
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about a minute)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/probe.cpp" -o probe -lbenchmark -lpthread
step() { echo; echo "\$ $*"; "$@" 2>&1; echo "(exit $?)"; }
bm() { taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_out_format=json "$@" > /dev/null 2>&1; }

echo "== 1. a NaN counter in the current run"
bm --benchmark_repetitions=5 --benchmark_filter=BM_Sum --benchmark_out=base.json
NANC=1 bm --benchmark_repetitions=5 --benchmark_filter=BM_Sum --benchmark_out=nan.json
grep -m1 '"hit_rate"' nan.json
step "$perfgate" compare base.json nan.json -v

echo; echo "== 2. aggregates only: one process run a side of 3 repetitions"
bm --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out=agg-b0.json
bm --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out=agg-c0.json
step "$perfgate" compare agg-b0.json agg-c0.json
echo; echo "== 2b. followed: nine process runs a side, the current side with SLOW=1 (BM_Env changed)"
for i in $(seq 1 9); do
  bm --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out=agg-b$i.json
  SLOW=1 bm --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out=agg-c$i.json
done
step "$perfgate" compare "$(ls agg-b[1-9].json | paste -sd,)" "$(ls agg-c[1-9].json | paste -sd,)"

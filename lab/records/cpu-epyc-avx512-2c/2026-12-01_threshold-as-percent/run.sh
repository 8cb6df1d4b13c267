#!/usr/bin/env bash
# "--threshold 5" meant as 5%: what perfgate compare does with it, with "5%", and with the same slip in thresholds.json,
# on two process runs a side of probe.cpp (../2026-12-01_nan-counter-and-aggregates-only), BM_Env changed on the
# current side (SLOW set).
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work/cls" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
for i in 1 2 3; do
  taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Env \
    --benchmark_out=cls/b$i.json > /dev/null 2>&1
  SLOW=1 taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Env \
    --benchmark_out=c$i.json > /dev/null 2>&1
done
step() { echo; echo "\$ $*"; "$@" 2>&1 | head -4; echo "(exit ${PIPESTATUS[0]})"; }
B=cls/b1.json,cls/b2.json,cls/b3.json C=c1.json,c2.json,c3.json
step "$perfgate" compare $B $C --threshold 0.05
step "$perfgate" compare $B $C --threshold 5
step "$perfgate" compare $B $C --threshold 5%
echo '{"default": 5}' > cls/thresholds.json
step "$perfgate" compare $B $C

#!/usr/bin/env bash
# A plain Google Benchmark binary's own --benchmark_out files, with no perfgate run in between, met by the two
# commands that file benchmarks by suite: `perfgate baseline update --suite <binary>`, and `perfgate history` over
# sessions in which every benchmark got slower alike halfway (SLOW=1.15 for sessions 9-16, as a machine change would).
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 2 minutes)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/../2026-12-01_plain-binary-knobs/knobs.cpp" -o knobs -lbenchmark -lpthread
step() { echo; echo "\$ $*"; "$@" 2>&1; echo "(exit $?)"; }
measure() {  # measure OUT [SLOW]
  SLOW="${2:-1.00}" taskset -c 0 ./knobs --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out="$1" \
    --benchmark_out_format=json > /dev/null 2>&1
}

echo "== 1. the binary's own files stored as its baseline"
measure b1.json; measure b2.json
step "$perfgate" baseline update --suite knobs --from b1.json,b2.json --baseline-dir bl --machine-class probe-2c

echo; echo "== 2. sixteen sessions recorded into a history; sessions 9-16 ran with SLOW=1.15, every benchmark alike"
for i in $(seq 1 16); do
  measure s$i.json "$([ "$i" -gt 8 ] && echo 1.15 || echo 1.00)"
  "$perfgate" history record --db h.sqlite --machine-class probe-2c --commit c$i \
    --time "$(printf '2026-12-01T00:%02d:00Z' "$i")" s$i.json > /dev/null || echo "record $i failed"
done
step "$perfgate" history changes --db h.sqlite --min-change 0.05

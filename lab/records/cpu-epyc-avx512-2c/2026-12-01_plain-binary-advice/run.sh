#!/usr/bin/env bash
# First contact with a plain Google Benchmark binary: the advice a run prints, followed; a benchmark that errors;
# a binary that is no Google Benchmark binary; one benchmark that crashes among ten; a history of six sessions.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 s)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/plain_features.cpp" -o b -lbenchmark -lpthread
g++ -O2 "$here/one_crash.cpp" -o crash2 -lbenchmark -lpthread
printf '#!/bin/sh\necho hello\n' > notgb && chmod +x notgb
F='^BM_(Sum|Manual|Threads|Cx)'
step() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^\[perfgate\] measure .* process [0-9]*/[0-9]*, ETA'; echo "(exit ${PIPESTATUS[0]})"; }

echo "== 1. no baseline: the run's advice, then that advice followed"
step "$perfgate" run --bench ./b --filter "$F" --rounds 3 --repetitions 4 --min-time 0.02 --pin-cpus 0 --against none \
  --report-dir first
grep -o 'no baseline for suite[^"]*' first/perf-report.json
step "$perfgate" baseline update --suite b --from first/runs/b.current.json
step env SLOW=2 "$perfgate" run --bench ./b --filter "$F" --rounds 3 --repetitions 4 --min-time 0.02 --pin-cpus 0 \
  --against none --report-dir second

echo; echo "== 2. a benchmark that stops with SkipWithError: listed as failed"
step "$perfgate" run --bench ./b --filter 'BM_(Err|Sum/1024)' --rounds 2 --repetitions 3 --min-time 0.01 --pin-cpus 0 \
  --against none --report-dir err

echo; echo "== 3. not a Google Benchmark binary"
step "$perfgate" run --bench ./notgb --rounds 1 --against none --report-dir notgb-out

echo; echo "== 4. one benchmark of ten aborts"
step "$perfgate" run --bench ./crash2 --env CRASH_AT=6 --rounds 2 --repetitions 2 --min-time 0.01 --against none \
  --report-dir crash

echo; echo "== 5. a history of six sessions, three before the planted 2x and three after"
for i in 1 2 3; do "$perfgate" history record --db h.sqlite --commit a$i first/runs/b.current.json > /dev/null; done
for i in 1 2 3; do "$perfgate" history record --db h.sqlite --commit b$i second/runs/b.current.json > /dev/null; done
step "$perfgate" history changes --db h.sqlite

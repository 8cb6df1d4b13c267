#!/usr/bin/env bash
# A plain Google Benchmark binary with user counters (an iteration-invariant rate, a plain count, an inverted rate,
# SetItemsProcessed), three process runs a side, the current side slowed (SLOW=1.3): what the reports show of them.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; under a minute)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/counters.cpp" -o c -lbenchmark -lpthread
for i in 1 2 3; do
  taskset -c 0 ./c --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_out=b$i.json \
    --benchmark_out_format=json > /dev/null 2>&1
  SLOW=1.3 taskset -c 0 ./c --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_out=a$i.json \
    --benchmark_out_format=json > /dev/null 2>&1
done
"$perfgate" compare b1.json,b2.json,b3.json a1.json,a2.json,a3.json -v --markdown r.md
echo "(exit $?)"
echo "-- the Markdown report's sections, and its counters section if any:"
grep '^## ' r.md
sed -n '/^## Counters/,/^<\/details>/p' r.md

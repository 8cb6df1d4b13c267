#!/usr/bin/env bash
# A user's thresholds.json for their own binary: a benchmarks entry with a typo, and a suites entry by the suite name
# the report shows (the binary's file name). Which thresholds apply, and what does compare say? probe.cpp is
# ../2026-12-01_nan-counter-and-aggregates-only's.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
for i in 1 2 3 4; do
  taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Sum \
    --benchmark_out=run-$i.json > /dev/null 2>&1
done
echo '{"benchmarks": {"BM_Sumx/.*": "10%", "BM_Sum/1024": "8%"}, "suites": {"probe": "6%"}}' > my-thresholds.json
echo "\$ cat my-thresholds.json"; cat my-thresholds.json
echo; echo "\$ $perfgate compare run-1.json,run-2.json run-3.json,run-4.json --config my-thresholds.json --json r.json"
"$perfgate" compare run-1.json,run-2.json run-3.json,run-4.json --config my-thresholds.json --json r.json 2>&1 | head -12
echo "(exit ${PIPESTATUS[0]})"
echo; echo "thresholds applied (r.json):"
python3 -c "import json; [print(' ', b['name'], b['threshold']) for b in json.load(open('r.json'))['benchmarks']]"

#!/usr/bin/env bash
# A plain Google Benchmark binary with the registration knobs users set (own Repetitions, ReportAggregatesOnly,
# Iterations, MinTime, UseRealTime, MeasureProcessCPUTime, ArgNames, templates, ComputeStatistics, Unit), met the
# three ways the README offers: perfgate compare of its JSON, perfgate ab of two builds, perfgate run.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 1 minute)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/knobs.cpp" -o knobs -lbenchmark -lpthread
# knobs2: BM_Sec renamed BM_Sec2, BM_Tmpl<1000> now BM_Tmpl<2000>
sed 's/BM_Tmpl, 1000/BM_Tmpl, 2000/; s/BENCHMARK(BM_Sec)/BENCHMARK(BM_Sec2)/; s/static void BM_Sec(/static void BM_Sec2(/' \
  "$here/knobs.cpp" > knobs2.cpp && g++ -O2 knobs2.cpp -o knobs2 -lbenchmark -lpthread
step() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^\[perfgate\]'; echo "(exit ${PIPESTATUS[0]})"; }

echo "== 1. compare: three process runs a side, the current side with SLOW=1.2 (a planted slowdown)"
for i in 1 2 3; do
  taskset -c 0 ./knobs --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out=b$i.json \
    --benchmark_out_format=json > /dev/null 2>&1
  SLOW=1.2 taskset -c 0 ./knobs --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out=a$i.json \
    --benchmark_out_format=json > /dev/null 2>&1
done
step "$perfgate" compare b1.json,b2.json,b3.json a1.json,a2.json,a3.json --markdown compare.md
echo "-- the Markdown report's headings and per-suite table:"
grep '^##' compare.md; sed -n '/^### Per suite/,/^## Run notes/p' compare.md | grep '^|'

echo; echo "== 2. ab of two builds (no extra rounds)"
step "$perfgate" ab --before ./knobs --after ./knobs2 --rounds 3 --repetitions 3 --min-time 0.01 --pin-cpus 0 \
  --max-extra-rounds 0 --report-dir ab
echo "-- the report's headings and its notes about aggregates:"
grep '^##' ab/ab-report.md; grep -c 'aggregates only' ab/ab-report.md

echo; echo "== 3. run with no baseline"
step "$perfgate" run --bench ./knobs --rounds 3 --repetitions 3 --min-time 0.01 --pin-cpus 0 --against none \
  --report-dir first

echo; echo "== 4. learned noise from a history of six sessions, a baseline pooled from three of them, a seventh session"
for i in 1 2 3 4 5 6; do
  "$perfgate" run --bench ./knobs --filter 'BM_(Iters|Named)' --rounds 2 --repetitions 3 --min-time 0.01 --pin-cpus 0 \
    --against none --report-dir s$i > /dev/null 2>&1
  "$perfgate" history record --db h.sqlite --commit c$i s$i/runs/knobs.current.json > /dev/null
done
step "$perfgate" baseline update --suite knobs --from s1/runs/knobs.current.json,s2/runs/knobs.current.json,s3/runs/knobs.current.json
step "$perfgate" run --bench ./knobs --filter 'BM_(Iters|Named)' --rounds 2 --repetitions 3 --min-time 0.01 --pin-cpus 0 \
  --against none --report-dir seventh --history h.sqlite
echo "-- each benchmark's method and smallest detectable slowdown:"
python3 -c "
import json
for b in json.load(open('seventh/perf-report.json'))['benchmarks']:
    m = b['metrics'][0]
    print(b['name'], '|', m.get('method'), '| detectable', m.get('detectable_change'))"

#!/bin/bash
# perfgate compare of a user's plain Google Benchmark JSON (bm.cpp of ../2026-12-02_plain-binary-bisect) where
# nothing could be judged, for two different reasons: files of aggregates only (one sample a process run), and an
# after side measured while another process shared its CPU (a spread within each run).
#   bash run.sh PERFGATE_BIN WORK_DIR
set -u
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W"
g++ -O2 -std=c++17 -DSCALE=1 "$here/../2026-12-02_plain-binary-bisect/bm.cpp" -lbenchmark -lpthread -o bm
run() { taskset -c 0 ./bm --benchmark_filter=BM_Accumulate --benchmark_min_time=0.02 --benchmark_out_format=json "$@" > /dev/null 2>&1; }
for i in 1 2 3; do
  run --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_out=agg-before-$i.json
  run --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_out=agg-after-$i.json
  run --benchmark_repetitions=10 --benchmark_out=quiet-$i.json
done
for i in 1 2 3; do
  taskset -c 0 sh -c 'while :; do :; done' & hog=$!
  for r in 1 2 3 4 5 6 7 8 9 10; do  # the hog comes and goes: some repetitions share the CPU, some do not
    if [ $((r % 2)) = 0 ]; then kill -STOP $hog; else kill -CONT $hog; fi
    run --benchmark_repetitions=1 --benchmark_out=shared-$i-$r.json
  done
  kill -9 $hog; wait $hog 2>/dev/null
  python3 - "$i" <<'PY'
import json, sys
i = sys.argv[1]
parts = [json.load(open(f"shared-{i}-{r}.json")) for r in range(1, 11)]
out = parts[0]
out["benchmarks"] = [dict(b, repetition_index=r, repetitions=10) for r, p in enumerate(parts) for b in p["benchmarks"]]
json.dump(out, open(f"shared-{i}.json", "w"))
PY
done
echo "\$ perfgate compare 'agg-before-*.json' 'agg-after-*.json'   # --benchmark_report_aggregates_only=true"
"$P" compare 'agg-before-*.json' 'agg-after-*.json' 2>&1 | grep -E "^(NOT|PASS|FAIL)|too noisy"
echo "\$ perfgate compare 'quiet-*.json' 'shared-*.json'   # after: half its repetitions shared CPU 0 with a busy loop"
"$P" compare 'quiet-*.json' 'shared-*.json' 2>&1 | grep -E "^(NOT|PASS|FAIL)|too noisy"

#!/usr/bin/env bash
# perfgate baseline update of a plain Google Benchmark binary's own JSON (--benchmark_out, no perfgate in between),
# then perfgate run of the same binary: does the run find the baseline? And the same JSON as if written on another
# host, and the run pinned to one CPU and to two. probe.cpp is ../2026-12-01_nan-counter-and-aggregates-only's.
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 30 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
for i in 1 2 3; do
  taskset -c 0 ./probe --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_filter=BM_Sum \
    --benchmark_out=raw-$i.json > /dev/null 2>&1
done
python3 -c "import json; j=json.load(open('raw-1.json')); j['context']['host_name']='gpu-7'; json.dump(j, open('other-host.json','w'))"
step() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^perfgate run: \(round\|process\)' | head -12; echo "(exit ${PIPESTATUS[0]})"; }
step "$perfgate" baseline update --suite probe --from raw-1.json,raw-2.json,raw-3.json --baseline-dir bl
find bl -name '*.json' | sort
step "$perfgate" run --bench ./probe --filter BM_Sum --rounds 3 --repetitions 5 --min-time 0.05 --pin-cpus 0 \
  --baseline-dir bl --against none -q --report-dir report
step "$perfgate" run --bench ./probe --filter BM_Sum --rounds 3 --repetitions 5 --min-time 0.05 --pin-cpus 0,1 \
  --baseline-dir bl --against none -q --report-dir report
step "$perfgate" baseline update --suite probe --from other-host.json --baseline-dir bl-other
find bl-other -name '*.json' 2>/dev/null | sort

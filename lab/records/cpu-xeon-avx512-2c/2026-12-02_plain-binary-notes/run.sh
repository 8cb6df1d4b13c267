#!/bin/bash
# Three first-screen slips with a plain Google Benchmark binary (bm.cpp of ../2026-12-02_plain-binary-bisect):
# a filter that matches nothing, a --history not created yet, and files of two hosts compared.
#   bash run.sh PERFGATE_BIN WORK_DIR
set -u
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W"
g++ -O2 -std=c++17 -DSCALE=1 "$here/../2026-12-02_plain-binary-bisect/bm.cpp" -lbenchmark -lpthread -o bm
echo '$ perfgate run --bench ./bm --rounds 2 --min-time 0.02 --filter BM_Nope'
"$P" run --bench ./bm --rounds 2 --min-time 0.02 --filter BM_Nope 2>&1 | grep -v '^\[perfgate\]'; echo "exit ${PIPESTATUS[0]}"
echo '$ perfgate ab --before ./bm --after ./bm --rounds 2 --filter Sortt'
"$P" ab --before ./bm --after ./bm --rounds 2 --filter Sortt 2>&1 | grep -v '^\[perfgate\]'; echo "exit ${PIPESTATUS[0]}"
"$P" run --bench ./bm --rounds 3 --min-time 0.02 --pin-cpus 0 --against none -q --update-baseline > /dev/null 2>&1
echo '$ perfgate run --bench ./bm --rounds 3 --min-time 0.02 --pin-cpus 0 --against none --history hist.db   # (after --update-baseline)'
"$P" run --bench ./bm --rounds 3 --min-time 0.02 --pin-cpus 0 --against none --history hist.db 2>&1 | grep -E "^[A-Z ]+:"
echo '$ grep -i "history hist.db" build/reports/perf-report.md'
grep -i "history hist.db" build/reports/perf-report.md || echo "(the report names no history)"
for i in 1 2 3; do taskset -c 0 ./bm --benchmark_min_time=0.02 --benchmark_format=json > before-$i.json 2>/dev/null
  python3 -c "import json,sys; d=json.load(open('before-$i.json')); d['context'].update(host_name='other-box', num_cpus=64); json.dump(d, open('after-$i.json','w'))"; done
echo "\$ perfgate compare 'before-*.json' 'after-*.json'   # after-*: host_name and num_cpus of a 64-CPU host"
"$P" compare 'before-*.json' 'after-*.json' 2>&1; echo "exit $?"

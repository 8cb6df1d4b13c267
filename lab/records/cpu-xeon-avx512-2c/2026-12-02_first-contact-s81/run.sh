#!/bin/bash
# First contact, third round: the slips of the 2026-12-02 15:03 stop, each shown by one command, with the plain
# Google Benchmark binary bm.cpp of ../2026-12-02_first-contact-s80 and the docs' own example data.
#   bash run.sh PERFGATE_BIN WORK_DIR      (from the repository root)
set -u
P=$(realpath "$1"); W=$2; root=$(pwd); bm=$root/lab/records/cpu-xeon-avx512-2c/2026-12-02_first-contact-s80/bm.cpp
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 2
b() { g++ -O2 -std=c++17 -DSCALE=$1 -DUNIT=benchmark::kMicrosecond -DSKIPERR=0 -DCRASH=0 "$bm" -lbenchmark -lpthread -o $2; }
b 1 fast; b 2 slow
show() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^\[perfgate\]'; echo "exit ${PIPESTATUS[0]}"; }
# 1. Google Benchmark's own flags typed to perfgate's runner
show "$P" run --bench ./fast --rounds 2 --benchmark_repetitions=3 --benchmark_min_time=0.5s --benchmark_out=x.json \
  --benchmark_counters_tabular=true
show "$P" ab --before ./slow --after ./fast --benchmark_min_time=100x
# 2. a change that made things faster: is it named?
for i in 1 2 3 4 5; do
  taskset -c 0 ./slow --benchmark_filter=BM_Sum --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out=s$i.json >/dev/null 2>&1
  taskset -c 0 ./fast --benchmark_filter=BM_Sum --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out=f$i.json >/dev/null 2>&1
done
show "$P" compare 's?.json' 'f?.json' --summary faster.md
grep -A4 '### Improvements' faster.md || echo '(no Improvements section in the summary)'
# 3. the docs' CPU example: the suite's common drift taken out, the amx_matmul calibration's line
d=$root/docs/examples-data/cpu
"$P" compare --baseline "$d/baseline/lora_backward.json,$d/baseline/synthetic.json" \
  --current "$d/planted-p10/lora_backward.current.json,$d/planted-p10/synthetic.current.json" -q --summary drift.md >/dev/null 2>&1
echo; echo "\$ perfgate compare (docs/examples-data/cpu: baseline, planted-p10) --summary drift.md; grep amx_matmul drift.md"
grep -n 'amx\\_matmul' drift.md || echo "(amx_matmul not in the summary)"
# 4. the fast build's own JSON filed as this host's baseline, then the same binary's JSON written here since
"$P" baseline update --suite fast --from 'f?.json' --baseline-dir stored >/dev/null 2>&1
for i in 1 2 3; do
  taskset -c 0 ./fast --benchmark_filter=BM_Sum --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out=g$i.json >/dev/null 2>&1
done
show "$P" compare stored/*/fast.json 'g?.json' -q
"$P" compare stored/*/fast.json 'g?.json' -v 2>&1 | grep 'this host' | sed 's/^/  /'
# 5. perfgate run's own baseline of the fast build, recorded twice, then the gate against it
mkdir -p own && cp fast own/bench && cd own
"$P" run --bench ./bench --rounds 3 --min-time 0.01 --filter BM_Sum --pin-cpus 0 --update-baseline -q >/dev/null 2>&1
show "$P" run --bench ./bench --rounds 2 --min-time 0.01 --filter BM_Sum --pin-cpus 0 --update-baseline -q
show "$P" run --bench ./bench --rounds 3 --min-time 0.01 --filter BM_Sum --pin-cpus 0 --against none -q
cd ..
# 6. a script that is no Google Benchmark binary
printf '#!/bin/sh\necho hello\n' > notgb.sh && chmod +x notgb.sh
show "$P" run --bench ./notgb.sh --rounds 1 -q

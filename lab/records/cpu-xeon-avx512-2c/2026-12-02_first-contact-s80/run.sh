#!/bin/bash
# First contact with a plain Google Benchmark binary (bm.cpp beside this script), as a user would type it: the slips
# of the 2026-12-02 12:00 stop, each shown by one command.
#   bash run.sh PERFGATE_BIN WORK_DIR
set -u
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 2
b() { g++ -O2 -std=c++17 -DSCALE=$1 -DUNIT=$2 -DSKIPERR=$3 -DCRASH=$4 "$here/bm.cpp" -lbenchmark -lpthread -o $5; }
b 1 benchmark::kMicrosecond 0 0 before; b 2 benchmark::kMillisecond 1 0 after; b 1 benchmark::kMicrosecond 0 1 crash
show() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^\[perfgate\]'; echo "exit ${PIPESTATUS[0]}"; }
F='--benchmark_filter=BM_Sum|BM_Fill'
for i in 1 2 3; do ./before $F --benchmark_min_time=0.01 --benchmark_out=b$i.json >/dev/null 2>&1
  ./after $F --benchmark_min_time=0.01 --benchmark_out=a$i.json >/dev/null 2>&1; done
echo '{"context": {"num_cpus": 2}, "benchmarks": []}' > empty-side.json
# 1a. the current side's glob caught a run of the same binary from another machine: which files does the error name?
sed 's/"num_cpus": [0-9]*/"num_cpus": 64/' a1.json > a-other-host.json
show "$P" compare 'b*.json' 'a*.json' -q
rm a-other-host.json
# 1b. both globs caught runs of another binary (other benchmarks), the current side's from another machine
o='s#"executable": "[^"]*"#"executable": "./other"#; s/BM_/OT_/g'
sed "$o" b1.json > bz-other.json
sed "$o"'; s/"num_cpus": [0-9]*/"num_cpus": 64/' a1.json > az-other.json
show "$P" compare 'b*.json' 'a*.json' -q
rm bz-other.json az-other.json
# 2. three process runs of one repetition a side: the next step's reason
show "$P" compare b1.json,b2.json,b3.json a1.json,a2.json,a3.json -q
# 3. an empty side; perfgate's own JSON report given as results
show "$P" compare empty-side.json a1.json -q
show "$P" ab --before ./before --after ./after --rounds 3 --min-time 0.02 --pin-cpus 0 --filter 'BM_Sum/4096' \
  --explain --report-dir ab-explain -q
show "$P" compare ab-explain/ab-report.json a1.json -q
# 4. a threads:2 benchmark pinned to one CPU, and a pinned spread within runs
show "$P" ab --before ./before --after ./after --rounds 3 --min-time 0.02 --pin-cpus 0 --filter 'BM_Threads|BM_Fill' \
  --max-extra-rounds 0 --report-dir ab-threads -q
# 5. the after build crashes in one benchmark
show "$P" ab --before ./before --after ./crash --rounds 2 --min-time 0.02 --pin-cpus 0 --filter 'BM_Sum' \
  --max-extra-rounds 0 --report-dir ab-crash -q
grep 'FAILED' ab-crash/ab-report.md
# 6. a stored baseline of the before build, then the after build pinned: a spread within runs (if this VM shows one)
mkdir -p stored && cp before stored/bm && cd stored
"$P" run --bench ./bm --rounds 3 --min-time 0.02 --pin-cpus 0 --filter 'BM_Fill' --update-baseline -q >/dev/null 2>&1
cp ../after bm
show "$P" run --bench ./bm --rounds 3 --min-time 0.02 --pin-cpus 0 --filter 'BM_Fill' -q
# 7. a filtered re-record over that stored baseline (it holds every BM_Fill case; the filter names one)
cp ../before bm
show "$P" run --bench ./bm --rounds 2 --min-time 0.01 --pin-cpus 0 --filter 'BM_Fill<int>/1024' --update-baseline -q
"$P" compare baselines/*/bm.json baselines/*/bm.json -q 2>&1 | head -1   # what the stored baseline holds now
cd ..
# 8. the history by the name perfgate run gives it, and its listing
"$P" history record --db h.db --commit abc --machine-class cpu-xeon-avx512-1c.intel-family6-model207 b1.json >/dev/null 2>&1
show "$P" history list --history h.db
show "$P" history list --db h.db
# 9. a build folder of plain binaries, and a suite the build does not have
mkdir -p old new && cp before old/mybench && cp after new/mybench && cp before old/helper
show "$P" ab --before old --after new -q
mkdir -p build/bin && cp before build/bin/bench_mine
show "$P" run --suite expert_gemm --build-dir build -q
# 10. the version; CPU frequency scaling on in the current side's context
show "$P" --version
sed 's/"cpu_scaling_enabled": false/"cpu_scaling_enabled": true/' a1.json > scaled.json
"$P" compare b1.json scaled.json -v 2>&1 | grep -i 'frequency scaling' || echo "(no line on CPU frequency scaling)"

#!/usr/bin/env bash
# A plain Google Benchmark binary (no perfgate bench main) under `perfgate run`: the class and CPU generation its runs
# get, a baseline recorded on another generation (its signature edited), and one filed under the bare class.
# Usage: run.sh PERFGATE_BINARY WORK_DIR   (needs libbenchmark-dev)
set -euo pipefail
P="$1"; W="$2"; here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$W" && cd "$W"
g++ -O2 "$here/plain_bench.cpp" -o b -lbenchmark -lpthread
f='BM_(Sum|Manual)'; m='--rounds 3 --repetitions 3 --min-time 0.02 -q'
echo "== 1. first run, pinned to CPU 0: the plan note, the class"
$P run --bench ./b $m --pin-cpus 0 --report-dir r1 --filter "$f" --baseline-dir bl --update-baseline 2>&1 | tail -3
grep -h '"perfgate.cpu_signature"\|"perfgate.machine_class"\|"perfgate.run.host_facts"' bl/*/b.json | head -3
echo "== 2. the same baseline with another generation's signature: measured, not compared"
sed -i 's/"AuthenticAMD family [0-9]* model [0-9]*"/"AuthenticAMD family 25 model 17"/' bl/*/b.json
$P run --bench ./b $m --pin-cpus 0 --report-dir r2 --filter "$f" --baseline-dir bl 2>&1 | tail -4 || true
echo "== 3. a baseline filed under the bare class (cpu-unknown-2c), none under the host's"
mkdir -p bl2/cpu-unknown-2c && cp bl/*/b.json bl2/cpu-unknown-2c/b.json
$P run --bench ./b $m --report-dir r3 --filter "$f" --baseline-dir bl2 2>&1 | tail -3 || true

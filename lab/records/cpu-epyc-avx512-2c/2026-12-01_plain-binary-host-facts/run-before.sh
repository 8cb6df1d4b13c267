#!/usr/bin/env bash
# The same plain binary under the perfgate of ad8a2ac (before its runs got host facts): the class is cpu-unknown-1c
# with no CPU generation, so a baseline edited to another generation is still compared.
# Usage: run-before.sh PERFGATE_BINARY_OF_ad8a2ac WORK_DIR
set -euo pipefail
P="$1"; W="$2"; here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$W" && cd "$W"
g++ -O2 "$here/plain_bench.cpp" -o b -lbenchmark -lpthread
f='BM_(Sum|Manual)'; m='--rounds 3 --repetitions 3 --min-time 0.02 -q'
$P run --bench ./b $m --pin-cpus 0 --report-dir r1 --filter "$f" --baseline-dir bl --update-baseline 2>&1 | tail -2
grep -o '"perfgate.machine_class": "[^"]*"\|"perfgate.cpu_signature": "[^"]*"' bl/*/b.json | sort -u
echo "== another generation's signature written into the baseline: compared all the same"
sed -i 's/"perfgate.machine_class": "cpu-unknown-1c",/"perfgate.machine_class": "cpu-unknown-1c", "perfgate.cpu_signature": "AuthenticAMD family 25 model 17",/' bl/*/b.json
$P run --bench ./b $m --pin-cpus 0 --report-dir r2 --filter "$f" --baseline-dir bl 2>&1 | tail -6 || true

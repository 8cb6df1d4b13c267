#!/bin/bash
# A user's first perfgate runs of a plain Google Benchmark binary (bm.cpp of ../2026-12-02_plain-binary-bisect), not in
# a git checkout: no baseline yet, a baseline recorded, then a build that measures BM_Sort at 32768 in place of 65536
# and doubles BM_Accumulate's work. Shows the gate note and the advice for a benchmark the baseline has and the run
# does not.
#   bash run.sh PERFGATE_BIN WORK_DIR
set -u
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W"
bash "$here/../2026-12-02_ab-side-names/build-two.sh"
flags=(--rounds 3 --min-time 0.02 --pin-cpus 0)
echo '$ perfgate run --bench before/bm --rounds 3 --min-time 0.02 --pin-cpus 0   # no baseline yet'
"$P" run --bench before/bm "${flags[@]}" 2>&1 | grep -E "gate for|^(SKIPPED|PASS|FAIL|NOT)"
"$P" run --bench before/bm "${flags[@]}" --update-baseline -q > /dev/null 2>&1
echo '$ perfgate run --bench after/bm --rounds 3 --min-time 0.02 --pin-cpus 0   # after --update-baseline of before/bm'
"$P" run --bench after/bm "${flags[@]}" 2>&1 | grep -E "gate for|^(SKIPPED|PASS|FAIL|NOT)|missing|new"

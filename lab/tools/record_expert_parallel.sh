#!/usr/bin/env bash
# Measures every expert_parallel case (benches/expert_parallel/cases/all.txt) on a lent multi-GPU machine, in
# one device-tool call: build perfgate and bench_expert_parallel only, then run the cases through the
# perfgate harness (`perfgate run --record-only`: process rounds, one report, no gate) under a time cap.
# Results and logs are copied into OUT as they come, so a run cut short by the cap keeps what finished.
# Run from the repository root with `.carry` in the device tool's carry list (ci/device-env.sh).
#
#   lab/tools/record_expert_parallel.sh OUT
#
# Environment: EP_TIME_CAP seconds for the measurement (default 270), EP_ROUNDS / EP_REPETITIONS /
# EP_MIN_TIME the measurement (default 1 round, 3 repetitions, 0.05 s), EP_FILTER another Google Benchmark
# regex instead of the all list.
# Exit status: 1 when the build fails, else the harness's (124 when the cap cut it short).
set -uo pipefail

out="${1:?usage: lab/tools/record_expert_parallel.sh OUT}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$out"
# shellcheck source=ci/device-env.sh
source "$root/ci/device-env.sh"
source "$root/ci/common.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "== $(date -u +%T) $*" | tee -a "$out/steps.txt"; }

log machine
{ echo "commit $(perfgate_commit)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,power.limit,memory.total,driver_version --format=csv
  nvidia-smi topo -m; } > "$out/machine.txt" 2>&1
head -6 "$out/machine.txt"

build="${PERFGATE_BUILD_DIR:-/tmp/perfgate-ep-build}"
log "configure -> $build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPERFGATE_WITH_ONEDNN=OFF -DPERFGATE_BUILD_TESTS=OFF ${PERFGATE_DEPS_PREFIX:+-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX} \
  > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
log "build perfgate bench_expert_parallel"
cmake --build "$build" --target perfgate bench_expert_parallel -j"$(nproc)" >> "$out/build.log" 2>&1 \
  || { grep -E "error" -A3 "$out/build.log" | head -40; exit 1; }

# The all list, joined as CMake joins a case file: ^expert_parallel/(line|line|...)(/|$).
cases="$(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$root/benches/expert_parallel/cases/all.txt" \
  | grep -v '^$' | paste -sd'|')"
filter="${EP_FILTER:-^expert_parallel/($cases)(/|\$)}"
log "measure: $filter (cap ${EP_TIME_CAP:-270} s)"
report="$out/report"
mkdir -p "$report"
# Copies what the harness has written so far (runs/*.json, the report) into OUT, every 15 s while it runs.
keep() { cp -r "$build/ep-reports/." "$report/" 2>/dev/null || true; }
( while sleep 15; do keep; done ) &
keeper=$!
timeout "${EP_TIME_CAP:-270}" "$build/bin/perfgate" run --bench "$build/bin/bench_expert_parallel" \
  --filter "$filter" --record-only --rounds "${EP_ROUNDS:-1}" --repetitions "${EP_REPETITIONS:-3}" \
  --min-time "${EP_MIN_TIME:-0.05}" --report-dir "$build/ep-reports" --report-name expert-parallel-report \
  > "$out/perfgate.log" 2>&1
rc=$?
kill "$keeper" 2>/dev/null
wait "$keeper" 2>/dev/null
keep
tail -5 "$out/perfgate.log"
log "done: perfgate run exit $rc"
exit "$rc"

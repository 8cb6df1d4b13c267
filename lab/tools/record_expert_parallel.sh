#!/usr/bin/env bash
# Measures the expert_parallel cases on a lent multi-GPU machine, in one device-tool call: build perfgate and
# bench_expert_parallel only, then for each GPU configuration (all visible GPUs; then 2 of them,
# CUDA_VISIBLE_DEVICES=0,1, when at least 4 are present), into OUT/gpus<N>/:
#   direct.json   the bench run directly over the CI list (cases/gate.txt), Google Benchmark JSON;
#   report.md, report.json, runs-*.json   the cases (cases/all.txt) through the perfgate harness
#                 (`perfgate run --record-only`: process rounds, one report, no gate), copied flat: the
#                 harness's report folder has deep raw/ folders that do not come back from the device tool.
# Each step runs under a time cap; results are copied into OUT as they come, so a run cut short keeps what
# finished. Run from the repository root with `.carry` in the device tool's carry list (ci/device-env.sh).
#
#   lab/tools/record_expert_parallel.sh OUT
#
# Environment: EP_DIRECT_CAP and EP_TIME_CAP seconds for the direct run and the harness run of each
# configuration (default 60 and 120; 0 leaves that step out), EP_ROUNDS / EP_REPETITIONS / EP_MIN_TIME the
# harness measurement (default 1 round, 3 repetitions, 0.05 s), EP_FILTER another Google Benchmark regex for
# the harness instead of the all list, EP_DIRECT_FILTER another for the direct run instead of the gate list.
# Exit status: 1 when the build fails, else the last failing step's (124 when a cap cut it short), else 0.
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

# A case file joined as CMake joins it: ^expert_parallel/(line|line|...)(/|$).
case_filter() {
  local cases
  cases="$(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' "$root/benches/expert_parallel/cases/$1" \
    | grep -v '^$' | paste -sd'|')"
  echo "^expert_parallel/($cases)(/|\$)"
}
all_filter="${EP_FILTER:-$(case_filter all.txt)}"
gate_filter="${EP_DIRECT_FILTER:-$(case_filter gate.txt)}"
status=0

# The bench alone over the gate list, Google Benchmark JSON into $1.
direct_run() {
  local dir="$1"
  [ "${EP_DIRECT_CAP:-60}" -gt 0 ] || return 0
  log "direct: $gate_filter (cap ${EP_DIRECT_CAP:-60} s)"
  timeout "${EP_DIRECT_CAP:-60}" "$build/bin/bench_expert_parallel" --benchmark_filter="$gate_filter" \
    --benchmark_out="$dir/direct.json" --benchmark_out_format=json > "$dir/direct.log" 2>&1
  local rc=$?
  tail -3 "$dir/direct.log"
  log "direct done: exit $rc"
  [ "$rc" -eq 0 ] || status=$rc
}

# Copies the report and the run files of harness folder $1 flat into $2.
copy_flat() {
  cp "$1"/*.md "$1"/*.json "$2/" 2>/dev/null || true
  for f in "$1"/runs/*.json; do [ -e "$f" ] && cp "$f" "$2/runs-$(basename "$f")"; done
}

# The all list through perfgate run, reports in $1.
harness_run() {
  local dir="$1" reports
  reports="$build/ep-reports-$(basename "$1")"
  [ "${EP_TIME_CAP:-120}" -gt 0 ] || return 0
  log "harness: $all_filter (cap ${EP_TIME_CAP:-120} s)"
  rm -rf "$reports"
  mkdir -p "$reports"
  ( while sleep 15; do copy_flat "$reports" "$dir"; done ) &
  local keeper=$!
  timeout "${EP_TIME_CAP:-120}" "$build/bin/perfgate" run --bench "$build/bin/bench_expert_parallel" \
    --filter "$all_filter" --record-only --rounds "${EP_ROUNDS:-1}" --repetitions "${EP_REPETITIONS:-3}" \
    --min-time "${EP_MIN_TIME:-0.05}" --report-dir "$reports" --report-name report > "$dir/perfgate.log" 2>&1
  local rc=$?
  kill "$keeper" 2>/dev/null
  wait "$keeper" 2>/dev/null
  copy_flat "$reports" "$dir"
  tail -5 "$dir/perfgate.log"
  log "harness done: exit $rc"
  [ "$rc" -eq 0 ] || status=$rc
}

# One configuration: the GPUs CUDA_VISIBLE_DEVICES leaves (all when unset), into OUT/gpus<N>.
measure() {
  local gpus="$1" dir="$out/gpus$1"
  mkdir -p "$dir"
  log "configuration: $gpus GPUs (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-all})"
  direct_run "$dir"
  harness_run "$dir"
}

# The GPUs the bench will see: CUDA_VISIBLE_DEVICES's list when set, else every GPU nvidia-smi lists.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  visible="$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)"
else
  visible="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
fi
measure "$visible"
if [ "$visible" -ge 4 ]; then
  CUDA_VISIBLE_DEVICES=0,1 measure 2
fi
log "done: exit $status"
exit "$status"

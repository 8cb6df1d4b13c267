#!/usr/bin/env bash
# Planted regressions explained by `perfgate ab --explain` on a lent GPU machine (issue 41): three that change
# no kernel (lost overlap, a host sync gap, CUDA graphs off) and two that do (a launch-configuration change, a
# planted extra GEMM). Builds perfgate and bench_expert_gemm, checks that libcupti is on the image, runs each
# plant and keeps its report and explain/ files. Run from the repository root with `.carry` in the device
# tool's carry list:
#
#   tools/explain_timeline_evidence.sh OUT [PLANT...]     (default: every plant)
#
# ncu's replay is most of the cost (docs/example-explain-timeline.md gives the stored call's): PERFGATE_NCU_LAUNCHES
# (default 80) bounds it.
#
# The device tool sends the checkout the session started in, not a helper's worktree: copy the tree into an
# ignored folder of that checkout and carry it, e.g.
#   git archive HEAD CMakeLists.txt CMakePresets.json cmake harness/include harness/src harness/cli \
#     harness/CMakeLists.txt harness/fuzz harness/bench benches examples ci tools | tar -x -C <checkout>/build-timeline-src
#   cp -a .carry <checkout>/build-timeline-src/     # then run: cd build-timeline-src && tools/explain_timeline_evidence.sh "$OUT"
#
# Each plant's report, log and explain/ files go to OUT/<plant>.tgz, one line per plant to OUT/summary.txt.
# A plant is skipped when fewer than 60 s of PERFGATE_EVIDENCE_BUDGET_S (default 430) are left, and stopped
# when the budget runs out, so that a device call ends with what it finished. docs/examples-data/timeline/README.md says how the stored copy is used.
set -uo pipefail
out="${1:?usage: $0 OUT [PLANT...]}"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PERFGATE_BUILD_DIR:-$root/build/device}"
work="$(mktemp -d)"
mkdir -p "$out"
# shellcheck source=ci/device-env.sh
source "$root/ci/device-env.sh"
started=$SECONDS
budget="${PERFGATE_EVIDENCE_BUDGET_S:-430}"
log() { echo "== $(date -u +%T) $*" | tee -a "$out/summary.txt"; }

overlap='expert_gemm/ffn/overlap/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold'
small_per_expert='expert_gemm/ffn/per_expert/shape:small/tokens:128/routing:uniform/mode:hot'
small_bucketed='expert_gemm/ffn/bucketed/shape:small/tokens:128/routing:uniform/mode:hot'
# plant -> "filter|after-env"
declare -A plants=(
  [lost_overlap]="$overlap|PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL=1"
  [host_sync]="$overlap|PERFGATE_EXPERT_GEMM_HOST_SYNC_US=2000"
  [graphs_off]="$small_per_expert|PERFGATE_EXPERT_GEMM_GRAPHS=0"
  [light_ctas]="$overlap|PERFGATE_EXPERT_GEMM_LIGHT_CTAS=8"
  [extra_gemm]="$small_bucketed|PERFGATE_GPU_SLOWDOWN=0.5"
)
order=(lost_overlap host_sync graphs_off light_ctas extra_gemm)
[ $# -gt 0 ] && order=("$@")

log "machine"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  ls -l /usr/local/cuda/lib64/libcupti* /usr/local/cuda/extras/CUPTI/lib64/libcupti* 2>&1
  ldconfig -p | grep -i cupti; command -v ncu && ncu --version | tail -1; nproc; } > "$out/machine.txt" 2>&1
head -12 "$out/machine.txt"

if [ ! -x "$build/bin/perfgate" ] || [ ! -x "$build/bin/bench_expert_gemm" ] || [ -n "${PERFGATE_REBUILD:-}" ]; then
  log "build -> $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${PERFGATE_DEPS_PREFIX:+-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX} \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPERFGATE_WITH_ONEDNN=OFF -DPERFGATE_WARNINGS_AS_ERRORS=OFF \
    -DPERFGATE_BUILD_TESTS=OFF > "$out/build.log" 2>&1 \
    && cmake --build "$build" --target perfgate bench_expert_gemm -j"$(nproc)" >> "$out/build.log" 2>&1 \
    || { grep -E "error|Error" -A3 "$out/build.log" | head -40; exit 1; }
fi
log "build ready"

for p in "${order[@]}"; do
  spec="${plants[$p]:?unknown plant $p}"
  filter="${spec%%|*}" env="${spec#*|}"
  left=$((budget - (SECONDS - started)))
  if [ "$left" -lt 60 ]; then log "$p: skipped, out of time"; continue; fi
  log "$p: $filter after-env $env"
  dir="$work/$p"
  start=$SECONDS
  mkdir -p "$dir"
  timeout $((left - 8)) "$build/bin/perfgate" ab --before "$build/bin/bench_expert_gemm" --after "$build/bin/bench_expert_gemm" \
    --after-env "$env" --filter "$filter" --rounds 3 --repetitions 3 --min-time 0.05 --max-extra-rounds 0 \
    --explain --explain-ncu-launches "${PERFGATE_NCU_LAUNCHES:-80}" --report-dir "$dir" > "$dir.log" 2>&1
  rc=$?
  took=$((SECONDS - start))
  cp "$dir.log" "$dir/ab.log"
  rm -rf "$dir/raw"
  tar -C "$work" -czf "$out/$p.tgz" "$p"
  lead=$(grep -m1 -o 'likeliest cause of [^|]*' "$dir"/*.md 2>/dev/null | head -1)
  cost=$(grep -m1 'Cost of this explanation' "$dir"/*.md 2>/dev/null)
  log "$p: exit $rc, ${took}s; $lead; $cost"
  awk '/^\*\*GPU timeline/{n=20} n>0{print; n--}' "$dir"/*.md >> "$out/summary.txt" 2>/dev/null
  grep -h "no GPU timeline\|^> " "$dir"/*.md 2>/dev/null | head -5 >> "$out/summary.txt"
done
rm -rf "$work"
log "done"

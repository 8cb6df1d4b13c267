#!/usr/bin/env bash
# One device call on a fresh nvidia-h200-x4 (or -x2): expert_parallel's push_sum combine, the layers over it and
# pull (serial, pipelined and pipelined_ce in 2 and 3 chunks) on every GPU (3 repetitions; the bench checks each
# case against the CPU reference first), push_sum's receiver share at 12% and 50% where time allows, then on 4 GPUs
# the 4-GPU class's A/A main job (lab/tools/record_gpu4_call.sh with LEVELS= : no planted session) in the rest of
# the call's 600 s.
#
#   export PERFGATE_GIT_COMMIT=<tree>; source ci/device-env.sh
#   bash lab/records/device/2026-11-30_h200-x4_push-sum/run.sh $OUT TAG
set -uo pipefail
out="${1:?output folder}"; tag="${2:?tag}"
source ci/common.sh
start=$SECONDS
left() { echo $((590 - (SECONDS - start))); }
mkdir -p "$out"
nvidia-smi -L > "$out/$tag-gpus.txt"; cat "$out/$tag-gpus.txt"
gpus="$(grep -c '^GPU' "$out/$tag-gpus.txt")"
{ perfgate_configure build/perf -DPERFGATE_BUILD_TESTS=OFF && perfgate_build build/perf; } > "$out/$tag-build.log" 2>&1 \
  || { tail -40 "$out/$tag-build.log"; exit 1; }
echo "== built at $((SECONDS - start)) s"
bench=build/perf/bin/bench_expert_parallel
cases="expert_parallel/(combine/(kernel|pull|push_sum)/gpus:$gpus/tokens:4096/routing:(uniform|zipf)"
cases+="|layer/(serial/exchange:(pull|push_sum)|pipelined(_ce)?/exchange:(pull|push_sum)/chunks:(2|3))"
cases+="/gpus:$gpus/tokens:4096/routing:uniform)/"
timeout 90 taskset -c 0-47 "$bench" --benchmark_filter="$cases" --benchmark_repetitions=3 \
  --benchmark_min_time=0.1s --benchmark_out="$out/$tag-ps.json" --benchmark_out_format=json > "$out/$tag-ps.log" 2>&1
echo "== push_sum cases rc=$? at $((SECONDS - start)) s"
grep -E "_median|ERROR|error|skip" "$out/$tag-ps.log" | cut -c1-220
aa_needs=$([ "$gpus" = 4 ] && echo 400 || echo 0)
for r in 12 50; do
  [ $(( $(left) - aa_needs )) -gt 12 ] || break
  PERFGATE_EP_PUSH_SUM_RECEIVERS=$r timeout 10 taskset -c 0-47 "$bench" \
    --benchmark_filter="expert_parallel/combine/push_sum/gpus:$gpus/tokens:4096/routing:uniform/" --benchmark_repetitions=3 \
    --benchmark_min_time=0.1s --benchmark_out="$out/$tag-r$r.json" --benchmark_out_format=json > "$out/$tag-r$r.log" 2>&1
  echo "== receivers $r%: rc=$? at $((SECONDS - start)) s"
  grep -E "_median" "$out/$tag-r$r.log" | cut -c1-220
done
[ "$gpus" = 4 ] || exit 0
if [ "$(left)" -lt 380 ]; then echo "== $(left) s left: no A/A main job"; exit 0; fi
CALL_BUDGET=$(left) LEVELS= lab/tools/record_gpu4_call.sh "$out" "$tag"

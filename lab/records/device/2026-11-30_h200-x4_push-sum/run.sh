#!/usr/bin/env bash
# One device call on a fresh nvidia-h200-x4 (or -x2): expert_parallel's push_sum and pull combines, then the layers
# over push_sum and pull that may hide the exchange best (pipelined in 3 chunks, pipelined_ce in 2 and 3) on every GPU
# (3 repetitions; the bench checks each case against the CPU reference first), then on 4 GPUs the 4-GPU class's
# A/A main job (lab/tools/record_gpu4_call.sh with LEVELS= : no planted session) in the rest of the call's 600 s.
# (x4f, before the measurements went into one archive, lost its A/A archive to the tool's eight-file limit;
# x2a-x2c ran its earlier versions: the same measurements with more layers and push_sum's receiver share at 12%
# and 50%, and no A/A job.)
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
# Two processes, so that a cut second one still leaves the first's JSON (Google Benchmark writes it at the end).
measure() {  # NAME TIMEOUT FILTER
  timeout "$2" taskset -c 0-47 "$bench" --benchmark_filter="$3" --benchmark_repetitions=3 --benchmark_min_time=0.1s \
    --benchmark_out="$out/$tag-$1.json" --benchmark_out_format=json > "$out/$tag-$1.log" 2>&1
  echo "== $1: rc=$? at $((SECONDS - start)) s"
  grep -E "_median|ERROR|error|skip" "$out/$tag-$1.log" | cut -c1-200
}
measure combine 30 "expert_parallel/combine/(pull|push_sum)/gpus:$gpus/tokens:4096/routing:(uniform|zipf)/"
measure layers 60 "expert_parallel/layer/(serial/exchange:push_sum|pipelined/exchange:pull/chunks:3|pipelined_ce/exchange:(pull|push_sum)/chunks:(2|3))/gpus:$gpus/tokens:4096/routing:uniform/"
# The device tool returns at most eight files: these six go back as one, so that the A/A job's four all return.
(cd "$out" && tar czf "$tag-ep.tgz" "$tag"-{gpus.txt,build.log,combine.json,combine.log,layers.json,layers.log} && \
  rm "$tag"-{gpus.txt,build.log,combine.json,combine.log,layers.json,layers.log})
[ "$gpus" = 4 ] || exit 0
if [ "$(left)" -lt 395 ]; then echo "== $(left) s left: no A/A main job"; exit 0; fi
CALL_BUDGET=$(left) LEVELS= lab/tools/record_gpu4_call.sh "$out" "$tag"

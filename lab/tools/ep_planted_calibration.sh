#!/usr/bin/env bash
# How much slower the planted slowdown makes the stable expert_parallel benchmarks: on a 4-GPU machine, after a
# build, runs the bench alternately without PERFGATE_GPU_SLOWDOWN and with it at EP_FRACTION (default 0.02), one
# process per side per round (each process pays its start and correctness checks once, for every benchmark),
# Google Benchmark JSON into OUT_DIR, then prints per benchmark the median planted/unplanted time ratio - 1
# (lab/tools/ep_planted_calibration.py). A planted fraction f is meant to read about +f.
#
#   lab/tools/ep_planted_calibration.sh BENCH_BINARY OUT_DIR
#
# Environment: EP_ROUNDS (default 3) rounds of (unplanted, planted); EP_FRACTION; EP_BUDGET_S (default 150):
# no further round starts when the last one would not fit in it any more (at least one round always runs);
# EP_FILTER another Google Benchmark regex instead of the stable benchmarks'.
# Exit status: 2 on bad arguments, else the summary's (1 when a benchmark has no pair to compare).
set -euo pipefail

usage="usage: lab/tools/ep_planted_calibration.sh BENCH_BINARY OUT_DIR"
bench="${1:?$usage}"
out="${2:?$usage}"
[ -x "$bench" ] || { echo "error: $bench is not an executable" >&2; exit 2; }
rounds="${EP_ROUNDS:-3}"
fraction="${EP_FRACTION:-0.02}"
budget="${EP_BUDGET_S:-150}"
filter="${EP_FILTER:-^expert_parallel/((dispatch|combine)/(nccl|kernel|pull)|layer/serial/exchange:(kernel|pull))/gpus:4/tokens:4096/routing:uniform(/|\$)}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on a shared host

# One process: $1 the JSON name; PERFGATE_GPU_SLOWDOWN as the caller's environment sets it. min_time as a bare
# number of seconds: Google Benchmark 1.7 rejects the "s" suffix that 1.8 accepts.
measure() {
  local name="$1"
  echo "== $(date -u +%T) $name"
  "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_min_time=0.1 \
    --benchmark_enable_random_interleaving=true --benchmark_format=json --benchmark_out_format=json \
    --benchmark_out="$out/$name.json" > "$out/$name.stdout" 2> "$out/$name.stderr" \
    || { echo "warning: $name exited $?; its tail:" >&2; tail -5 "$out/$name.stderr" >&2; }
}

start=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  began=$SECONDS
  # The planted side plants in every benchmark the process runs (no name filter of its own).
  (unset PERFGATE_GPU_SLOWDOWN PERFGATE_GPU_SLOWDOWN_FILTER; measure "round$round-unplanted")
  (export PERFGATE_GPU_SLOWDOWN="$fraction"; unset PERFGATE_GPU_SLOWDOWN_FILTER; measure "round$round-planted")
  took=$((SECONDS - began))
  if ((round < rounds && SECONDS - start + took > budget)); then
    echo "== stopping after $round of $rounds rounds: another ${took} s would pass the ${budget} s budget"
    break
  fi
done
echo "== $((SECONDS - start)) s"
python3 "$here/ep_planted_calibration.py" "$out" --fraction "$fraction"

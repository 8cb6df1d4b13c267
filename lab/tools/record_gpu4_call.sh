#!/usr/bin/env bash
# One device-tool call on a fresh 4-GPU machine (nvidia-h100-x4 / nvidia-h200-x4): the 4-GPU class's sessions, and
# on the host's spare CPUs the AMX runner's main job for lora_backward, both at once so that one lease serves both.
#
#   lab/tools/record_gpu4_call.sh OUT TAG
#
# GPU side (CPUs 0 .. 3/4 of them): lab/tools/record_gpu_groups.sh OUT TAG 0,1,2,3 with the 4-GPU class's suites and
# stable benchmarks (perfgate_gpu4_suites, perfgate_gpu4_stable): one A/A main job (`ci/perf.sh --against none`),
# then, while the call's budget allows, one planted session per LEVELS (default 0.02; TAG-p) and a second A/A main
# job (TAG-b), on the same build. Sessions of one call are one host to lab/tools/judge_gpu_sessions.py.
#
# CPU side (the last quarter of the CPUs), with AMX_JOB=aa or AMX_JOB=planted: `ci/perf.sh` for lora_backward, built
# without CUDA in build/amx, pinned to one CPU (PERFGATE_PIN_CPUS, PERFGATE_AB_PIN_CPUS), against HEAD as committed
# (PERFGATE_AGAINST=HEAD), 15 repetitions a process as on a CPU runner, within what is left of the call
# (PERFGATE_TIME_BUDGET); "planted" adds a 10% LoRA slowdown to the current side (PERFGATE_LORA_SLOWDOWN=0.10).
# Its log, report and summary go to OUT/TAG-amx.tgz. The lent machines' hosts are Xeons with AMX.
#
# Environment: CALL_BUDGET (seconds the whole call may take, default 560), LEVELS, AMX_JOB.
set -uo pipefail
out="${1:?output folder}"; tag="${2:?tag}"
# shellcheck source=lab/tools/lab_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lab_common.sh"
cd "$perfgate_root" || exit 2
# shellcheck source=ci/device-env.sh
source ci/device-env.sh
mkdir -p "$out"
start=$SECONDS
budget="${CALL_BUDGET:-560}"
left() { echo $((budget - (SECONDS - start))); }
cpus="$(nproc)"
gpu_cpus="0-$((cpus * 3 / 4 - 1))"
amx_cpus="$((cpus * 3 / 4))-$((cpus - 1))"
amx_pin="$((cpus - 2))"
echo "== $(date -u +%T) $cpus CPUs: GPU side on $gpu_cpus, AMX side on $amx_cpus (bench CPU $amx_pin)"

amx_job() {
  local kind="$1" work="/tmp/perfgate-amx-$tag"
  local extra=()
  [ "$kind" = planted ] && extra=(--env PERFGATE_LORA_SLOWDOWN=0.10)
  rm -rf "$work"; mkdir -p "$work"
  (
    cd "$perfgate_root" || exit 2
    PERFGATE_SUITES=lora_backward PERFGATE_CMAKE_ARGS=-DPERFGATE_WITH_CUDA=OFF PERFGATE_BUILD_DIR="$perfgate_root/build/amx" \
      PERFGATE_TIME_BUDGET="$(( $(left) - 25 ))" PERFGATE_AB_REPETITIONS=15 \
      PERFGATE_REPORT_DIR="$work" PERFGATE_AGAINST=HEAD PERFGATE_PIN_CPUS="$amx_pin" PERFGATE_AB_PIN_CPUS="$amx_pin" \
      /usr/bin/time -f 'amx main job wall %e s' timeout "$(( $(left) - 15 ))" taskset -c "$amx_cpus" ci/perf.sh "${extra[@]}"
    echo "amx main job ($kind) exit $?"
  ) > "$work/log.txt" 2>&1
  tail -3 "$work/log.txt"
  tar czf "$out/$tag-amx.tgz" -C "$work" .
}

amx_pid=""
if [ -n "${AMX_JOB:-}" ]; then
  amx_job "$AMX_JOB" &
  amx_pid=$!
fi

# The A/A main job first, with all the time the call can give it (a main job cut by its timeout leaves no session);
# then the planted sessions and a second A/A main job, each only where the budget still holds it.
plant_timeout=150
reserve=$((plant_timeout + 10)); [ -n "${LEVELS-0.02}" ] || reserve=20
GROUP_SUITES="$perfgate_gpu4_suites" LEVELS="" AA_TIMEOUT="$(( $(left) - reserve ))" \
  taskset -c "$gpu_cpus" lab/tools/record_gpu_groups.sh "$out" "$tag" 0,1,2,3
if [ -n "${LEVELS-0.02}" ] && [ "$(left)" -gt $((plant_timeout + 10)) ]; then
  echo "== $(date -u +%T) planted sessions (${LEVELS-0.02}), $(left) s left"
  GROUP_SUITES="$perfgate_gpu4_suites" GROUP_STABLE="$perfgate_gpu4_stable" LEVELS="${LEVELS-0.02}" AA_SKIP=1 \
    PLANT_TIMEOUT="$(( $(left) - 10 < plant_timeout ? $(left) - 10 : plant_timeout ))" \
    taskset -c "$gpu_cpus" lab/tools/record_gpu_groups.sh "$out" "$tag-p" 0,1,2,3
fi
if [ "$(left)" -gt 330 ]; then
  echo "== $(date -u +%T) second A/A main job, $(left) s left"
  GROUP_SUITES="$perfgate_gpu4_suites" LEVELS="" AA_TIMEOUT="$(( $(left) - 20 ))" \
    taskset -c "$gpu_cpus" lab/tools/record_gpu_groups.sh "$out" "$tag-b" 0,1,2,3
fi
if [ -n "$amx_pid" ]; then wait "$amx_pid"; fi
echo "== $(date -u +%T) call done in $((SECONDS - start)) s"

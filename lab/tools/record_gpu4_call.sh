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
# CPU side (the last quarter of the CPUs), with AMX_JOB=aa or AMX_JOB=planted: lab/tools/record_amx_job.sh, the AMX
# runner's lora_backward main job within what is left of the call, into OUT/TAG-amx.tgz. The lent machines' hosts
# are Xeons with AMX.
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

amx_pid=""
if [ -n "${AMX_JOB:-}" ]; then
  lab/tools/record_amx_job.sh "$AMX_JOB" "$out" "$tag" "$(( $(left) - 10 ))" "$amx_cpus" "$amx_pin" &
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

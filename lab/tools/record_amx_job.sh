#!/usr/bin/env bash
# The AMX runner's main job for lora_backward on a lent machine's Xeon host: `ci/perf.sh` for lora_backward, built
# without CUDA in build/amx, pinned to one CPU (PERFGATE_PIN_CPUS, PERFGATE_AB_PIN_CPUS), against HEAD as committed
# (PERFGATE_AGAINST=HEAD), 15 repetitions a process as on a CPU runner, within BUDGET seconds build included
# (PERFGATE_TIME_BUDGET a little inside the job's own timeout, so that the job ends with its report).
#
#   lab/tools/record_amx_job.sh aa|planted OUT TAG BUDGET CPUS PIN
#
# "planted" adds a 10% LoRA slowdown to the current side (PERFGATE_LORA_SLOWDOWN=0.10). CPUS is the taskset list
# the job runs in, PIN the CPU its bench processes are pinned to (the machine class is then cpu-xeon-amx-1c, which
# has no stored baseline, so the reference gate runs at once), or "none": unpinned, the class of the CPUS count,
# whose stored baseline is measured and checked against this host first. LANES (default: ci/common.sh
# perfgate_default_lanes within CPUS, one lane per physical core; "" for none) measures the reference gate's rounds
# several at a time. Log, report, summary and raw runs go to OUT/TAG-amx.tgz.
set -uo pipefail
kind="${1:?aa or planted}"; out="${2:?output folder}"; tag="${3:?tag}"; budget="${4:?seconds}"
cpus="${5:?taskset CPU list}"; pin="${6:?bench CPU}"
# shellcheck source=lab/tools/lab_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lab_common.sh"
cd "$perfgate_root" || exit 2
# shellcheck source=ci/device-env.sh
source ci/device-env.sh
extra=()
[ "$kind" = planted ] && extra=(--env PERFGATE_LORA_SLOWDOWN=0.10)
pins=(PERFGATE_PIN_CPUS="$pin" PERFGATE_AB_PIN_CPUS="$pin")
[ "$pin" = none ] && pins=()
# shellcheck disable=SC2016
lanes="${LANES-$(taskset -c "$cpus" bash -c 'source ci/common.sh; perfgate_default_lanes')}"
echo "amx job: CPUs $cpus, bench pin $pin, lanes '${lanes}'"
work="/tmp/perfgate-amx-$tag"
rm -rf "$work"; mkdir -p "$work" "$out"
(
  PERFGATE_SUITES=lora_backward PERFGATE_CMAKE_ARGS=-DPERFGATE_WITH_CUDA=OFF PERFGATE_BUILD_DIR="$perfgate_root/build/amx" \
    PERFGATE_TIME_BUDGET="$((budget - 25))" PERFGATE_AB_REPETITIONS=15 \
    PERFGATE_REPORT_DIR="$work" PERFGATE_AGAINST=HEAD PERFGATE_AB_LANES="$lanes" \
    /usr/bin/time -f 'amx main job wall %e s' timeout "$((budget - 5))" env ${pins[@]+"${pins[@]}"} \
    taskset -c "$cpus" ci/perf.sh "${extra[@]}"
  echo "amx main job ($kind) exit $?"
) > "$work/log.txt" 2>&1
tail -3 "$work/log.txt"
tar czf "$out/$tag-amx.tgz" -C "$work" .

#!/usr/bin/env bash
# One device call on a 2-GPU, 32-core AMX host: the cpu-xeon-amx-32c lora_backward baseline over exactly the
# gate (ci/perf.sh --update-baseline, build included), then, in what time is left (END seconds after the
# start), the GPU suites' main job on unchanged code as the 2-GPU class's A/A session.
#   devcalls/amx32-call.sh TAG      env: END (default 540)
set -uo pipefail
tag="$1"; t0=$(date +%s); end=${END:-540}
source ci/device-env.sh; source ci/common.sh
export PERFGATE_BUILD_DIR=$PWD/build/perf PERFGATE_BASELINE_DIR=$PWD/build/newbase
mkdir -p build/newbase
{ date -u; echo "commit $(perfgate_commit)"; nvidia-smi -L; grep -m1 "model name" /proc/cpuinfo; nproc; } > "$OUT/$tag-machine.txt"
PERFGATE_SUITES=lora_backward timeout $(( end - 60 )) ci/perf.sh --update-baseline 2>&1 \
  | while IFS= read -r l; do printf '%s %s\n' "$(date +%T)" "$l"; done > "$OUT/$tag-baseline.log"
echo "baseline rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - t0 ))s" | tee -a "$OUT/$tag-baseline.log"
cp build/perf/perf-report.md "$OUT/$tag-baseline-report.md" 2>/dev/null
tar czf "$OUT/$tag-newbase.tgz" -C build/newbase . 2>/dev/null
left=$(( end - ($(date +%s) - t0) ))
if [ "$left" -gt 60 ]; then
  unset PERFGATE_BASELINE_DIR
  start_iso="$(date -u +%Y-%m-%dT%H:%M:%SZ)"; s=$(date +%s)
  PERFGATE_SUITES="expert_gemm transfers streaming_prefetch" timeout "$left" ci/perf.sh --against none > "$OUT/$tag-aa.log" 2>&1
  echo "A/A rc=$? wall=$(( $(date +%s) - s ))s (limit ${left}s)" | tee -a "$OUT/$tag-aa.log"
  cp build/perf/perf-report.md "$OUT/$tag-aa-report.md" 2>/dev/null
  d=/tmp/sessions/aa-$tag; mkdir -p "$d/runs"; cp build/perf/runs/*.current.json "$d/runs/" 2>/dev/null
  rm -f "$d/runs/lora_backward.current.json"
  perfgate_session_txt aa "$start_iso" "$(( $(date +%s) - s ))" "" > "$d/session.txt"
  tar czf "$OUT/$tag-sessions.tgz" -C /tmp/sessions .
fi
ls -la "$OUT"

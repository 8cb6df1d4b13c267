#!/usr/bin/env bash
# One device call: the AMX runner's main job (ci/perf.sh --against none, every suite this host runs, build
# included, timed from nothing), then its GPU suites' runs archived as the A/A session aa-TAG.
#   devcalls/amx-call.sh TAG      env: LIMIT (seconds, default 585)
set -uo pipefail
tag="$1"
source ci/device-env.sh; source ci/common.sh
export PERFGATE_BUILD_DIR=$PWD/build/perf
{ date -u; echo "commit $(perfgate_commit)"; nvidia-smi -L; grep -m1 "model name" /proc/cpuinfo; nproc; } > "$OUT/$tag-machine.txt"
start_iso="$(date -u +%Y-%m-%dT%H:%M:%SZ)"; start=$(date +%s)
timeout "${LIMIT:-585}" ci/perf.sh --against none 2>&1 \
  | while IFS= read -r l; do printf '%s %s\n' "$(date +%T)" "$l"; done > "$OUT/$tag-main-job.log"
rc=${PIPESTATUS[0]}; wall=$(( $(date +%s) - start ))
echo "main job rc=$rc wall=${wall}s" | tee -a "$OUT/$tag-main-job.log"
grep -E "perf.sh: steps|^PASS|^FAIL" "$OUT/$tag-main-job.log" | tail -3
cp build/perf/perf-report.md "$OUT/$tag-report.md" 2>/dev/null
s=/tmp/sessions; mkdir -p "$s/aa-$tag/runs" "$s/lora-$tag/runs"
for suite in expert_gemm transfers streaming_prefetch; do cp build/perf/runs/$suite.current.json "$s/aa-$tag/runs/" 2>/dev/null; done
cp build/perf/runs/lora_backward.current.json build/perf/runs/synthetic.current.json "$s/lora-$tag/runs/" 2>/dev/null
perfgate_session_txt aa "$start_iso" "$wall" "" > "$s/aa-$tag/session.txt"
perfgate_session_txt amx "$start_iso" "$wall" "" > "$s/lora-$tag/session.txt"
tar czf "$OUT/$tag-sessions.tgz" -C "$s" .
ls -la "$OUT"

#!/usr/bin/env bash
# One device-tool call's worth of work on a lent GPU machine: build, then record this machine class's
# baselines for the GPU suites (3 process rounds each) into OUT/baselines/<class>/<suite>.json, and
# keep the combined report. Usage (repository root, carry [".carry"]):
#   source ci/device-env.sh && ci/device-baselines.sh "$OUT"
set -uo pipefail
out="${1:?output folder}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PERFGATE_BUILD_DIR="${PERFGATE_BUILD_DIR:-/tmp/perfgate-build}"
export PERFGATE_BASELINE_DIR="$out/baselines"
export PERFGATE_SUITES="${PERFGATE_SUITES:-expert_gemm transfers streaming_prefetch}"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.limit,driver_version --format=csv
nvidia-smi topo -m 2>/dev/null | head -5
date -u
"$root/ci/perf.sh" --update-baseline --quiet
rc=$?
cp "$PERFGATE_BUILD_DIR/perf-report.md" "$out/" 2>/dev/null
# The lent machines' CPUs (AMX Xeons) also hold the large-runner baseline of lora_backward: the
# deepseek-v3 config (22.5 GB of weights) that a 2-core runner skips. Its machine class is a CPU one.
if [ -n "${PERFGATE_RECORD_LORA_DEEPSEEK:-}" ]; then
  timeout "${PERFGATE_LORA_TIMEOUT:-300}" "$PERFGATE_BUILD_DIR/bin/perfgate" run \
    --bench "$PERFGATE_BUILD_DIR/bin/bench_lora_backward" \
    --filter '^lora_backward/backward/(onednn|fused)/cfg:deepseek-v3/qlen:128/' \
    --rounds 3 --repetitions 3 --min-time 0.05 --update-baseline --quiet \
    --baseline-dir "$PERFGATE_BASELINE_DIR" --report-dir /tmp/perfgate-lora --report-name lora-report
  echo "device-baselines: lora_backward deepseek-v3 exit $?"
  cp /tmp/perfgate-lora/lora-report.md "$out/" 2>/dev/null
fi
date -u
echo "device-baselines: perf.sh exit $rc"
exit $rc

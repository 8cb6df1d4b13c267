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
date -u
echo "device-baselines: perf.sh exit $rc"
exit $rc

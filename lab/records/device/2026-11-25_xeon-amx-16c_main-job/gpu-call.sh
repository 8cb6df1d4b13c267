#!/usr/bin/env bash
# One device call: GPU evidence session (tools/record_gpu_evidence.sh), then optionally one lora_backward gate
# process with the set-up profile (LORA_PROFILE=1). Everything but the evidence files goes into OUT/extra.tgz.
#   devcalls/gpu-call.sh TAG [LEVEL...]     env: TESTS, AB_LEVEL, LORA_PROFILE, EVIDENCE_TIMEOUT
set -uo pipefail
tag="$1"; shift
extra=/tmp/extra; mkdir -p "$extra"
timeout "${EVIDENCE_TIMEOUT:-430}" tools/record_gpu_evidence.sh "$OUT" "$tag" "$@"
echo "evidence exit $?"
if [ "${LORA_PROFILE:-0}" = 1 ]; then
  source ci/device-env.sh
  b=build/evidence
  filter="$(cat $b/suites/lora_backward.gate_filter)"
  s=$(date +%s)
  PERFGATE_SETUP_PROFILE=1 timeout "${LORA_TIMEOUT:-150}" $b/bin/bench_lora_backward --benchmark_filter="$filter" \
    --benchmark_repetitions=5 --benchmark_min_time=0.1 --benchmark_enable_random_interleaving=true \
    --benchmark_out=$extra/lora-gate.json --benchmark_out_format=json 2>&1 >/dev/null \
    | while IFS= read -r l; do printf '%s %s\n' "$(( $(date +%s) - s ))" "$l"; done > $extra/lora-profile.log
  echo "lora process wall $(( $(date +%s) - s ))s"; grep -E "setup profile" $extra/lora-profile.log
fi
if [ "${LORA_LOOK:-0}" = 1 ]; then
  # the lora_backward gate's first look against the stored AMX baseline, no confirm step: which benchmarks would
  # the confirm step re-measure, and why
  source ci/device-env.sh
  s=$(date +%s)
  PERFGATE_BUILD_DIR=build/evidence PERFGATE_SUITES=lora_backward timeout "${LORA_TIMEOUT:-300}" \
    ci/perf.sh --against none --confirm-rounds 0 > $extra/lora-look.log 2>&1
  echo "lora look rc=$? $(( $(date +%s) - s ))s"; grep -E "^(PASS|FAIL)" $extra/lora-look.log
  cp build/evidence/perf-report.md "$OUT/lora-look-report.md"; cp build/evidence/perf-report.json $extra/ 2>/dev/null
  cp build/evidence/runs/lora_backward.current.json $extra/ 2>/dev/null
fi
mv "$OUT"/*-build.log "$extra"/ 2>/dev/null
tar czf "$OUT/extra.tgz" -C "$extra" .
ls -la "$OUT"

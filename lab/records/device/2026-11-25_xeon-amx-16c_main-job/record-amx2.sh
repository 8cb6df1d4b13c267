# Records the AMX host's lora_backward baseline over exactly the gate (3 process rounds) into build/newbase.
source ci/device-env.sh
export PERFGATE_BUILD_DIR=$PWD/build/perf PERFGATE_HISTORY_RECORD=0
rm -rf build/newbase && cp -r baselines build/newbase
start=$(date +%s)
PERFGATE_BASELINE_DIR=$PWD/build/newbase PERFGATE_SUITES=lora_backward timeout 430 ci/perf.sh --update-baseline 2>&1 \
  | while IFS= read -r l; do printf '%s %s\n' "$(date +%T)" "$l"; done > $OUT/amx-baseline.log
echo "baseline rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - start ))s"
cp build/newbase/cpu-xeon-amx-16c/lora_backward.json $OUT/ 2>/dev/null; cp build/perf/perf-report.md $OUT/amx-baseline-report.md; ls -la $OUT

# One timed main job (ci/perf.sh, every suite this host runs) on a lent GPU host; log, report, runs and the
# history (build/gpu-history.db, kept on a warm machine) come back in OUT. $1: tag.
tag=${1:-main}
source ci/device-env.sh
export PERFGATE_BUILD_DIR=$PWD/build/perf PERFGATE_HISTORY=$PWD/build/gpu-history.db
[ -d build/newbase ] && export PERFGATE_BASELINE_DIR=$PWD/build/newbase
echo "baselines: ${PERFGATE_BASELINE_DIR:-baselines}"; nvidia-smi -L; grep -m1 "model name" /proc/cpuinfo; nproc
start=$(date +%s)
timeout ${LIMIT:-570} ci/perf.sh --against none 2>&1 | while IFS= read -r l; do printf '%s %s\n' "$(date +%T)" "$l"; done > $OUT/$tag.log
echo "rc=${PIPESTATUS[0]} wall=$(( $(date +%s) - start ))s"
grep -E "perf.sh: steps|PASS|FAIL|exit" $OUT/$tag.log | tail -5
cp build/perf/perf-report.md $OUT/$tag-report.md 2>/dev/null
tar czf $OUT/$tag-runs.tgz -C build/perf runs 2>/dev/null
cp build/gpu-history.db $OUT/gpu-history.db 2>/dev/null; ls -la $OUT

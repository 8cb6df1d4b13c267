#!/usr/bin/env bash
# Issue 28's evidence from one fresh GPU machine (one device-tool call; a fresh machine is one session of
# the results history): the GPU suites' tests, the main job on unchanged code, and planted slowdowns.
#
#   lab/tools/record_gpu_evidence.sh OUT TAG [LEVEL ...]
#
#   1. builds everything with tests (build/evidence) and, with TESTS=1, runs the GPU suites' unit and smoke
#      tests (OUT/TAG-tests.log);
#   2. the main job on unchanged code, the GPU suites only, against the stored baselines:
#      PERFGATE_SUITES="expert_gemm transfers streaming_prefetch" ci/perf.sh --against none
#      (its exit code and wall time in OUT/TAG-aa.log, its report in OUT/TAG-aa-report.md); its runs are the
#      A/A session aa-TAG (runs/*.current.json and session.txt, as lab/tools/record_sessions.sh writes them);
#   3. for each LEVEL (a fraction, e.g. 0.03): one session of the stable benchmarks with
#      PERFGATE_GPU_SLOWDOWN=LEVEL planted in every one of them, pNN-TAG (NN = the percent), recorded by
#      lab/tools/record_sessions.sh;
#   4. with AB_LEVEL (e.g. 0.03): `perfgate ab` of the expert GEMM's four gated DeepSeek-V3 cases, 5 rounds, that
#      slowdown planted in the after side (step "ab" of lab/tools/device-process-cost.sh: OUT/ab-TAG.md, OUT/cost-TAG.log).
#
# The stable benchmarks are issue 28's list (perfgate_gpu_stable in ci/common.sh).
# The sessions come back as one archive, OUT/TAG-sessions.tgz (without the raw per-process files);
# lab/tools/judge_gpu_sessions.py judges them afterwards, on any machine.
# Environment: AA_TIMEOUT (seconds, default 330), PLANT_TIMEOUT (default 90), TESTS=1, AB_LEVEL.
set -uo pipefail
out="${1:?output folder}"; tag="${2:?tag}"; shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
# shellcheck source=ci/device-env.sh
source ci/device-env.sh
source lab/tools/lab_common.sh
build="$root/build/evidence"
gpu_suites="$perfgate_gpu_suites"
log() { echo "== $(date -u +%T) $*"; }
sessions="${TMPDIR:-/tmp}/perfgate-evidence-$tag"  # outside OUT: only the archive travels
rm -rf "$sessions"; mkdir -p "$out" "$sessions"

# The device tool brings back a limited number of files, a few folders deep: the sessions travel as one archive,
# rewritten after each session so that a call cut short (device time spent) still brings back what it measured.
archive_sessions() {
  tar czf "$out/$tag-sessions.tgz.part" --exclude=raw -C "$sessions" . \
    && mv "$out/$tag-sessions.tgz.part" "$out/$tag-sessions.tgz"
}

log "machine"
{ date -u; echo "commit $(perfgate_commit)"; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv
  grep -m1 'model name' /proc/cpuinfo; nproc; } | tee "$out/$tag-machine.txt"

log "build"
t0=$SECONDS
perfgate_configure "$build" -DPERFGATE_BUILD_TESTS=ON -DPERFGATE_WARNINGS_AS_ERRORS=OFF > "$out/$tag-build.log" 2>&1 \
  && perfgate_build "$build" >> "$out/$tag-build.log" 2>&1 || { tail -30 "$out/$tag-build.log"; exit 1; }
log "built in $((SECONDS - t0)) s"

if [ "${TESTS:-0}" = 1 ]; then
  log "GPU suites' unit and smoke tests"
  ctest --test-dir "$build" -LE perf -R 'expert_gemm|ExpertGemm|MoeFfn|transfers|Transfers|streaming|Streaming' \
    -j4 --output-on-failure > "$out/$tag-tests.log" 2>&1
  echo "tests exit $?"; tail -4 "$out/$tag-tests.log"
fi

log "main job on unchanged code: $gpu_suites"
start="$(date -u +%Y-%m-%dT%H:%M:%SZ)"; t0=$SECONDS
PERFGATE_BUILD_DIR="$build" PERFGATE_SUITES="$gpu_suites" timeout "${AA_TIMEOUT:-330}" ci/perf.sh --against none \
  > "$out/$tag-aa.log" 2>&1
rc=$?
echo "main job exit $rc, $((SECONDS - t0)) s" | tee -a "$out/$tag-aa.log"
grep -E '^(PASS|FAIL)|perf.sh: steps' "$out/$tag-aa.log" | tail -3
cp "$build/perf-report.md" "$out/$tag-aa-report.md" 2>/dev/null
if ls "$build"/runs/*.current.json > /dev/null 2>&1; then
  mkdir -p "$sessions/aa-$tag/runs"
  cp "$build"/runs/*.current.json "$sessions/aa-$tag/runs/"
  perfgate_session_txt aa "$start" "$((SECONDS - t0))" "" > "$sessions/aa-$tag/session.txt"
  archive_sessions
fi

for level in "$@"; do
  pct="$(python3 -c "print(round(float('$level') * 100))")"
  log "planted +$pct%: p$pct-$tag"
  RECORD_SUITES="$gpu_suites" RECORD_FILTER="$perfgate_gpu_stable" RECORD_ENV="PERFGATE_GPU_SLOWDOWN=$level" \
    RECORD_NAME="p$pct-$tag" RECORD_TIMEOUT="${PLANT_TIMEOUT:-90}" lab/tools/record_sessions.sh "$build" "$sessions" 1 "p$pct"
  archive_sessions
done
if [ -n "${AB_LEVEL:-}" ]; then
  log "perfgate ab, +$AB_LEVEL planted in the after side"
  STEPS=ab BUILD_DIR="$build" AB_AFTER_ENV="PERFGATE_GPU_SLOWDOWN=$AB_LEVEL" lab/tools/device-process-cost.sh "$out" "$tag"
fi
log "done"

#!/usr/bin/env bash
# Sessions of the results history from one fresh multi-GPU machine (one device-tool call): the GPU suites'
# main job on unchanged code once per GPU group, all groups at the same time on one build. A 4-GPU host
# gives two sessions of the class gpu-<model>-x2-of4 ("0,1 2,3") or four of gpu-<model>-x1-of4 ("0 1 2 3").
#
#   lab/tools/record_gpu_groups.sh OUT TAG GROUP ...
#
# Each group's main job sees only its GPUs (CUDA_VISIBLE_DEVICES), so its runs name the class of that many GPUs
# on a host of this size (the -of<host> suffix: one GPU of a 2-GPU host is not a 1-GPU VM, docs/baselines.md),
# and writes its own report and runs (PERFGATE_REPORT_DIR). Groups run concurrently on purpose: the lent machines
# are slices of shared hosts whose other GPUs may run someone else's work at the same time, so a session measured
# beside a neighbour is a normal case, not an exception. lab/results/ records which sessions came from one host.
#
# With LEVELS="0.02 0.03", each group then records one planted session per level, the groups at once again:
# the stable benchmarks (perfgate_gpu_stable) with PERFGATE_GPU_SLOWDOWN=LEVEL, as lab/tools/record_gpu_evidence.sh does.
#
# Back in OUT: TAG-machine.txt (GPUs, topology, CPU), TAG-summary.txt (each group's exit code and wall time),
# TAG-sessions.tgz (aa-TAG-gK/ and pNN-TAG-gK/, runs/*.current.json and session.txt each, for
# lab/tools/judge_gpu_sessions.py and lab/tools/import_records.py) and TAG-logs.tgz (build log, each group's log and report).
# Environment: AA_TIMEOUT (seconds per main job, default 330), LEVELS, PLANT_TIMEOUT (seconds per planted session,
# default 90), AA_SKIP, PERFGATE_BUILD_DIR (default build/perf), GROUP_SUITES and GROUP_STABLE (the suites of the main jobs
# and the planted benchmarks; default the GPU suites and their stable benchmarks; a 4-GPU group uses
# perfgate_gpu4_suites and perfgate_gpu4_stable, lab/tools/record_gpu4_call.sh).
set -uo pipefail
out="${1:?output folder}"; tag="${2:?tag}"; shift 2
[ $# -gt 0 ] || { echo "record_gpu_groups.sh: name at least one GPU group, e.g. 0,1 2,3" >&2; exit 2; }
# shellcheck source=lab/tools/lab_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lab_common.sh"  # perfgate_root, perfgate_gpu_suites, the build steps
cd "$perfgate_root" || exit 2
# shellcheck source=ci/device-env.sh
source ci/device-env.sh
build="${PERFGATE_BUILD_DIR:-$perfgate_root/build/perf}"
work="${TMPDIR:-/tmp}/perfgate-groups-$tag"  # outside OUT: only the archives travel
rm -rf "$work"; mkdir -p "$out" "$work/logs" "$work/sessions"
log() { echo "== $(date -u +%T) $*"; }

log "machine"
{ date -u; echo "commit $(perfgate_commit)"; echo "groups: $*"
  nvidia-smi --query-gpu=index,name,serial,pci.bus_id,clocks.max.sm,power.limit,driver_version --format=csv
  nvidia-smi topo -m; grep -m1 'model name' /proc/cpuinfo; nproc; } > "$out/$tag-machine.txt" 2>&1
cat "$out/$tag-machine.txt"

# Built once here, as ci/perf.sh configures it; each main job's own configure and build then find nothing to do.
log "build"
t0=$SECONDS
{ perfgate_configure "$build" -DPERFGATE_BUILD_TESTS=OFF && perfgate_build "$build"; } > "$work/logs/build.log" 2>&1 \
  || { tail -30 "$work/logs/build.log"; tar czf "$out/$tag-logs.tgz" -C "$work/logs" .; exit 1; }
log "built in $((SECONDS - t0)) s"

# The next group starts once this one's job has passed its configure and build (its hardware line), so that no
# two jobs regenerate the build folder at once.
wait_past_build() {
  local file="$1" pid="$2" waited=0
  while ! grep -q '^perf.sh: .* GPU(s)$' "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || return 1
    [ "$waited" -lt 120 ] || return 1
    sleep 1; waited=$((waited + 1))
  done
}

# The A/A main jobs, every group at once; then each one's verdict, report and session. AA_SKIP=1 skips them (a call
# that records only planted sessions on a build whose A/A session it already has).
main_jobs() {
  pids=(); starts=(); k=0
  for group in "$@"; do
    log "group $k: GPUs $group"
    starts+=("$(date -u +%Y-%m-%dT%H:%M:%SZ) $SECONDS")
    CUDA_VISIBLE_DEVICES="$group" PERFGATE_BUILD_DIR="$build" PERFGATE_REPORT_DIR="$work/g$k" \
      PERFGATE_SUITES="${GROUP_SUITES:-$perfgate_gpu_suites}" timeout "${AA_TIMEOUT:-330}" ci/perf.sh --against none > "$work/logs/g$k.log" 2>&1 &
    pids+=("$!")
    wait_past_build "$work/logs/g$k.log" "$!" || log "group $k: no hardware line yet, starting the next anyway"
    k=$((k + 1))
  done

  k=0
  for group in "$@"; do
    wait "${pids[$k]}"; rc=$?
    read -r start_iso start_s <<< "${starts[$k]}"
    seconds=$((SECONDS - start_s))
    echo "group $k GPUs $group: main job exit $rc, $seconds s" | tee -a "$out/$tag-summary.txt"
    grep -E '^(PASS|FAIL|SKIPPED)' "$work/logs/g$k.log" | tail -1 | tee -a "$out/$tag-summary.txt"
    cp "$work/g$k/perf-report.md" "$work/logs/g$k-report.md" 2>/dev/null
    if ls "$work/g$k"/runs/*.current.json > /dev/null 2>&1; then
      session="$work/sessions/aa-$tag-g$k"
      mkdir -p "$session/runs"
      cp "$work/g$k"/runs/*.current.json "$session/runs/"
      CUDA_VISIBLE_DEVICES="$group" perfgate_session_txt aa "$start_iso" "$seconds" "CUDA_VISIBLE_DEVICES=$group" \
        > "$session/session.txt"
    fi
    k=$((k + 1))
  done
}
[ -n "${AA_SKIP:-}" ] || main_jobs "$@"

# Planted sessions: every group at once for each level, after all main jobs, so that a group's A/A session is never
# measured beside its neighbour's planted one.
for level in ${LEVELS:-}; do
  pct="$(python3 -c "print(round(float('$level') * 100))")"
  log "planted +$pct%, every group at once"
  k=0; pids=()
  for group in "$@"; do
    CUDA_VISIBLE_DEVICES="$group" RECORD_SUITES="${GROUP_SUITES:-$perfgate_gpu_suites}" RECORD_FILTER="${GROUP_STABLE:-$perfgate_gpu_stable}" \
      RECORD_ENV="PERFGATE_GPU_SLOWDOWN=$level" RECORD_NAME="p$pct-$tag-g$k" RECORD_TIMEOUT="${PLANT_TIMEOUT:-90}" \
      lab/tools/record_sessions.sh "$build" "$work/sessions" 1 "p$pct" 2>> "$out/$tag-summary.txt" &
    pids+=("$!"); k=$((k + 1))
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
done
tar czf "$out/$tag-sessions.tgz" --exclude=raw -C "$work/sessions" .
tar czf "$out/$tag-logs.tgz" -C "$work/logs" .
log "done"

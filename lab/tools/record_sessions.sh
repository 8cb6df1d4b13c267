#!/usr/bin/env bash
# Measures N sessions of the CPU gate (the suites and filters ci/perf.sh gates with, the same rounds and
# repetitions), each one `perfgate run --record-only` in its own folder, for a results history:
#
#   lab/tools/record_sessions.sh BUILD OUT N [LABEL]    -> OUT/LABEL-01 ... OUT/LABEL-N, each with runs/*.current.json
#
# A session whose `perfgate run` fails (or passes RECORD_TIMEOUT) keeps its folder and session.txt; the next one
# still runs, and the script exits with the first failure's status.
#
# Environment: RECORD_SUITES="synthetic lora_backward" (default), RECORD_ENV="KEY=VALUE ..." passed to the bench
# processes (a planted slowdown, e.g. PERFGATE_SYNTHETIC_SLOWDOWN=0.10), RECORD_FILTER a regex that replaces the
# suites' gate filters (a subset of them), RECORD_NAME the folder's name instead of LABEL-NN (then
# RECORD_NAME-NN past the first session), RECORD_TIMEOUT seconds a session may take, RECORD_ARGS extra `perfgate run`
# flags. As in ci/perf.sh, the bench
# processes run SCHED_FIFO (--realtime) only on a machine without a GPU: it would starve a GPU driver's threads.
# Each session's start time, commit, CPU and load average go to OUT/LABEL-NN/session.txt, so that
# `perfgate history record` can be given the time it was measured at (lab/tools/prove_history_gate.py does).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lab_common.sh"
build="${1:?build folder}"; out="${2:?output folder}"; count="${3:?number of sessions}"; label="${4:-s}"
suites="${RECORD_SUITES:-synthetic lora_backward}"
benches=(); filters=()
for suite in $suites; do
  benches+=(--bench "$build/bin/bench_$suite")
  filters+=("$(cat "$build/suites/$suite.gate_filter")")
done
joined="${RECORD_FILTER:-$(IFS='|'; echo "${filters[*]}")}"
realtime=(--realtime)
if [ "$(perfgate_gpu_count)" -gt 0 ]; then realtime=(); fi
limit=()
if [ -n "${RECORD_TIMEOUT:-}" ]; then limit=(timeout "$RECORD_TIMEOUT"); fi
env_args=()
for kv in ${RECORD_ENV:-}; do env_args+=(--env "$kv"); done
status=0
for i in $(seq 1 "$count"); do
  name="$(printf '%s-%02d' "${RECORD_NAME:-$label}" "$i")"
  if [ -n "${RECORD_NAME:-}" ] && [ "$i" = 1 ]; then name="$RECORD_NAME"; fi
  dir="$out/$name"
  rm -rf "$dir"; mkdir -p "$dir"
  start="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  t0=$SECONDS
  rc=0
  "${limit[@]}" "$build/bin/perfgate" run --record-only "${benches[@]}" --filter "($joined)" \
    --rounds "${PERFGATE_ROUNDS:-3}" --repetitions "${PERFGATE_REPETITIONS:-5}" --min-time "${PERFGATE_MIN_TIME:-0.1}" \
    "${realtime[@]}" --quiet "${env_args[@]}" --report-dir "$dir" ${RECORD_ARGS:-} > "$dir/run.log" 2>&1 || rc=$?
  perfgate_session_txt "$label" "$start" "$((SECONDS - t0))" "${RECORD_ENV:-}" > "$dir/session.txt"
  echo "[record $(date -u +%H:%M:%S)] $dir: exit $rc, $((SECONDS - t0)) s, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  if [ "$rc" != 0 ] && [ "$status" = 0 ]; then status=$rc; fi
done
exit "$status"

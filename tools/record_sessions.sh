#!/usr/bin/env bash
# Measures N sessions of the CPU gate (the suites and filters ci/perf.sh gates with, the same rounds and
# repetitions), each one `perfgate run --record-only` in its own folder, for a results history:
#
#   tools/record_sessions.sh BUILD OUT N [LABEL]    -> OUT/LABEL-01 ... OUT/LABEL-N, each with runs/*.current.json
#
# Environment: RECORD_SUITES="synthetic lora_backward" (default), RECORD_ENV="KEY=VALUE ..." passed to the bench
# processes (a planted slowdown, e.g. PERFGATE_SYNTHETIC_SLOWDOWN=0.10), RECORD_FILTER a regex that replaces the
# suites' gate filters (a subset of them), RECORD_ARGS extra `perfgate run` flags. As in ci/perf.sh, the bench
# processes run SCHED_FIFO (--realtime) only on a machine without a GPU: it would starve a GPU driver's threads.
# Each session's start time, commit, CPU and load average go to OUT/LABEL-NN/session.txt, so that
# `perfgate history record` can be given the time it was measured at (tools/prove_history_gate.py does).
set -euo pipefail
build="${1:?build folder}"; out="${2:?output folder}"; count="${3:?number of sessions}"; label="${4:-s}"
suites="${RECORD_SUITES:-synthetic lora_backward}"
benches=(); filters=()
for suite in $suites; do
  benches+=(--bench "$build/bin/bench_$suite")
  filters+=("$(cat "$build/suites/$suite.gate_filter")")
done
joined="${RECORD_FILTER:-$(IFS='|'; echo "${filters[*]}")}"
realtime=(--realtime)
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then realtime=(); fi
env_args=()
for kv in ${RECORD_ENV:-}; do env_args+=(--env "$kv"); done
commit="$(git -C "$(dirname "$0")/.." rev-parse HEAD)"
for i in $(seq 1 "$count"); do
  dir="$out/$(printf '%s-%02d' "$label" "$i")"
  rm -rf "$dir"; mkdir -p "$dir"
  start="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  t0=$SECONDS
  "$build/bin/perfgate" run --record-only "${benches[@]}" --filter "($joined)" \
    --rounds "${PERFGATE_ROUNDS:-3}" --repetitions "${PERFGATE_REPETITIONS:-5}" --min-time "${PERFGATE_MIN_TIME:-0.1}" \
    "${realtime[@]}" --quiet "${env_args[@]}" --report-dir "$dir" ${RECORD_ARGS:-} > "$dir/run.log" 2>&1
  printf 'time=%s\ncommit=%s\nlabel=%s\nenv=%s\nseconds=%s\nload=%s\n' "$start" "$commit" "$label" "${RECORD_ENV:-}" \
    "$((SECONDS - t0))" "$(cut -d' ' -f1-3 /proc/loadavg)" > "$dir/session.txt"
  echo "[record $(date -u +%H:%M:%S)] $dir: $((SECONDS - t0)) s, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done

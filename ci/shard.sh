# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154  # reads and sets ci/perf.sh's variables (build_dir, report_dir, benches, joined, ...)
# Sharding of the main job, sourced by ci/perf.sh (docs/ci.md, docs/history.md "Sharding"):
#
#   ci/perf.sh --shard I/N     runs shard I of N and records it for `ci/merge.sh N`
#
# The shards split the gated benchmarks of every suite this machine runs, balanced by each benchmark's
# measured cost in PERFGATE_HISTORY (perfgate history shard; without a history, or before any cost is
# recorded, by name). Every shard plans from the costs recorded up to the commit's time, so all N shards of
# one commit compute the same plan, wherever and whenever they run. Each shard records its measurements,
# exit code and JSON report into PERFGATE_SHARD_DB (default PERFGATE_HISTORY, unless PERFGATE_HISTORY_RECORD=0):
# one database for the fleet. It replaces ci/perf.sh's record_history for a shard.
# Environment: PERFGATE_COMMIT / PERFGATE_BRANCH override git's commit and branch (a CI checkout may be
# detached).

perfgate_shard=""
perfgate_shard_args=()

# Takes --shard I/N (or --shard=I/N) out of the arguments; the others stay in perfgate_shard_args.
shard_take_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --shard) perfgate_shard="${2:?ci/perf.sh: --shard needs I/N}"; shift 2 ;;
      --shard=*) perfgate_shard="${1#--shard=}"; shift ;;
      *) perfgate_shard_args+=("$1"); shift ;;
    esac
  done
}

# Narrows ci/perf.sh's benches, joined and joined_relative to this shard's benchmarks: each bench binary
# lists its gated benchmarks, perfgate plans the shards, and binaries with nothing in this shard are left out.
shard_select() {
  local dir="$build_dir/shard" bin suite relative_file
  rm -rf "$dir" "$report_dir/runs" "$report_dir/perf-report.json"
  mkdir -p "$dir"
  : > "$dir/all.txt"
  : > "$dir/relative.txt"
  for bin in "${benches[@]}"; do
    [ "$bin" = --bench ] && continue
    suite="${bin##*/bench_}"
    relative_file="$build_dir/suites/$suite.relative_filter"
    [ -f "$relative_file" ] || relative_file="$build_dir/suites/$suite.gate_filter"
    "$bin" --benchmark_list_tests=true --benchmark_filter="$(cat "$build_dir/suites/$suite.gate_filter")" \
      > "$dir/$suite.list" 2> /dev/null || true
    "$bin" --benchmark_list_tests=true --benchmark_filter="$(cat "$relative_file")" >> "$dir/relative.txt" 2> /dev/null || true
    cat "$dir/$suite.list" >> "$dir/all.txt"
  done
  local db_args=()
  if [ -n "${PERFGATE_HISTORY:-}" ]; then db_args=(--db "$PERFGATE_HISTORY"); fi
  "$build_dir/bin/perfgate" history shard "${db_args[@]}" --shard "$perfgate_shard" --list "$dir/all.txt" \
    --costs-until "$(git -C "$perfgate_root" log -1 --format=%cI HEAD)" \
    --relative-list "$dir/relative.txt" --relative-filter-out "$dir/relative_filter" \
    --filter-out "$dir/filter" --names-out "$dir/names" --plan-json "$dir/plan.json"
  local kept=()
  for bin in "${benches[@]}"; do
    [ "$bin" = --bench ] && continue
    suite="${bin##*/bench_}"
    if grep -Fxq -f "$dir/names" "$dir/$suite.list"; then kept+=(--bench "$bin"); fi
  done
  benches=("${kept[@]}")
  joined="$(cat "$dir/filter")"
  joined_relative="$(cat "$dir/relative_filter")"
}

# Records this shard (measurements, exit code, JSON report) for the merge job. A shard that cannot record
# is reported by the merge as missing (exit 3), so a failure here is only a warning.
shard_record() {
  local rc="$1" db="${PERFGATE_SHARD_DB:-}"
  if [ -z "$db" ] && [ "${PERFGATE_HISTORY_RECORD:-1}" != 0 ]; then db="${PERFGATE_HISTORY:-}"; fi
  if [ -z "$db" ]; then
    echo "perf.sh: --shard without PERFGATE_SHARD_DB (or a recorded PERFGATE_HISTORY): shard $perfgate_shard is not recorded" >&2
    return 0
  fi
  local runs=("$report_dir"/runs/*.current.json)
  if [ ! -e "${runs[0]}" ]; then
    echo "perf.sh: shard $perfgate_shard measured nothing to record (exit $rc)" >&2
    return 0
  fi
  local report=()
  # A gated run writes a perfgate.report/1 (a record-only run writes measurements, which the merge cannot use).
  if grep -qs '"perfgate.report/1"' "$report_dir/perf-report.json"; then report=(--report "$report_dir/perf-report.json"); fi
  "$build_dir/bin/perfgate" history record --db "$db" --shard "$perfgate_shard" --exit-code "$rc" "${report[@]}" \
    --commit "${PERFGATE_COMMIT:-$(git -C "$perfgate_root" rev-parse HEAD)}" \
    --branch "${PERFGATE_BRANCH:-$(git -C "$perfgate_root" rev-parse --abbrev-ref HEAD)}" "${runs[@]}" \
    || echo "perf.sh: WARNING: shard $perfgate_shard could not be recorded; the merge will report it missing" >&2
}

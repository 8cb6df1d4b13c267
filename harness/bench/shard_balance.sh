#!/usr/bin/env bash
# Balance of the shards' wall times, before and after cost balancing (docs/history.md, "Sharding"):
# bench_synthetic split into 3 shards, each run by `perfgate run --record-only` and recorded with
# `perfgate history record --shard`. Round 1 plans with an empty history (split by name); round 2 plans from
# the costs round 1 recorded. Prints each shard's benchmarks, planned cost and wall time, per round.
#
#   taskset -c 1 harness/bench/shard_balance.sh [BUILD_DIR]      (default build/release; needs bin/perfgate and
#                                                                 bin/bench_synthetic)
#
# Environment: PERFGATE_BALANCE_ARGS (default "--rounds 3 --repetitions 3 --min-time 0.05"): the measurement.
# shellcheck source=harness/bench/common.sh
source "$(dirname "$0")/common.sh"
build="${1:-$bench_root/build/release}"
perfgate="$build/bin/perfgate"
bench="$build/bin/bench_synthetic"
require_tools "$build" perfgate bench_synthetic
read -r -a measure <<< "${PERFGATE_BALANCE_ARGS:---rounds 3 --repetitions 3 --min-time 0.05}"
work="$(mktemp -d /tmp/perfgate_shard_balance_XXXXXX)"
trap 'rm -rf "$work"' EXIT
db="$work/history.db"
export PERFGATE_MACHINE_CLASS=cpu-balance
"$bench" --benchmark_list_tests=true > "$work/list.txt" || true
echo "machine: $(nproc) CPUs usable, $(machine_facts); measurement: ${measure[*]}"
echo "benchmarks: $(wc -l < "$work/list.txt")"

for round in 1 2; do
  walls=()
  # Every shard of a round plans from the sessions recorded before the round, as the shards of one commit do.
  until="$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)"
  for i in 1 2 3; do
    "$perfgate" history shard --db "$db" --shard "$i/3" --list "$work/list.txt" --filter-out "$work/filter" --costs-until "$until" \
      --names-out "$work/names" --plan-json "$work/plan.json" -q 2> /dev/null
    start=$(date +%s%N)
    "$perfgate" run --bench "$bench" --filter "$(cat "$work/filter")" --record-only "${measure[@]}" \
      --report-dir "$work/r$round-$i" > "$work/r$round-$i.log" 2>&1
    wall=$(python3 -c "print(($(date +%s%N) - $start) / 1e9)")
    walls+=("$wall")
    "$perfgate" history record --db "$db" --commit "round$round" --shard "$i/3" "$work/r$round-$i"/runs/*.current.json > /dev/null
    planned=$(python3 -c "import json; print('%.3f' % json.load(open('$work/plan.json'))['shards'][$i-1]['cost_seconds'])")
    echo "round $round shard $i/3: wall $(printf %.2f "$wall") s, planned cost $planned, $(paste -sd' ' "$work/names")"
  done
  by=$(python3 -c "import json; print('cost' if json.load(open('$work/plan.json'))['balanced_by_cost'] else 'name')")
  python3 - "$round" "$by" "${walls[@]}" <<'PY'
import sys
r, by, walls = sys.argv[1], sys.argv[2], [float(w) for w in sys.argv[3:]]
mean = sum(walls) / len(walls)
print(f"round {r} (split by {by}): walls {' / '.join(f'{w:.2f}' for w in walls)} s; max/min {max(walls)/min(walls):.3f}, "
      f"slowest shard {100*(max(walls)/mean-1):+.1f}% over the mean (the fleet waits for it)")
PY
done

#!/usr/bin/env bash
# The results history at scale (docs/history.md, "Scale"): 1,000 sessions x 1,000 benchmarks x 3 gated
# metrics (x 3 process runs) on SQLite and on a throwaway PostgreSQL server, measured by
# perfgate_history_scale at the checkpoints, then the CLI end to end on the full histories:
# `perfgate history record` of three 1,000-benchmark result files and `perfgate history changes`.
#
#   harness/bench/history_scale.sh [BUILD_DIR]        (default build/release; needs bin/perfgate and
#                                                      bin/perfgate_history_scale)
#
# Environment: PERFGATE_SCALE_SESSIONS (1000), PERFGATE_SCALE_BENCHMARKS (1000),
# PERFGATE_SCALE_CHECKPOINTS (250,500,1000), PERFGATE_SCALE_DIR (/tmp/perfgate_history_scale),
# PERFGATE_SCALE_BACKENDS ("sqlite postgresql"). Pin it yourself: taskset -c 1 harness/bench/history_scale.sh.
# shellcheck source=harness/bench/common.sh
source "$(dirname "$0")/common.sh"
build="${1:-$bench_root/build/release}"
sessions="${PERFGATE_SCALE_SESSIONS:-1000}"
benchmarks="${PERFGATE_SCALE_BENCHMARKS:-1000}"
checkpoints="${PERFGATE_SCALE_CHECKPOINTS:-250,500,1000}"
backends="${PERFGATE_SCALE_BACKENDS:-sqlite postgresql}"
work="${PERFGATE_SCALE_DIR:-/tmp/perfgate_history_scale}"

require_tools "$build" perfgate perfgate_history_scale
rm -rf "$work"
mkdir -p "$work"
chmod 777 "$work"

# A private PostgreSQL server on a Unix socket in $work (as the `postgres` user when run as root).
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
as_pg=()
[[ "$(id -u)" -eq 0 ]] && as_pg=(runuser -u postgres --)
pg_port=$((20000 + $$ % 20000))
stop_pg() { [[ -f "$work/pg/postmaster.pid" ]] && "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -m fast -w stop > /dev/null 2>&1 || true; }
trap stop_pg EXIT
start_pg() {
  [[ -x "$pg_bin/initdb" ]] || { echo "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin" >&2; return 1; }
  "${as_pg[@]}" "$pg_bin/initdb" -D "$work/pg" -A trust -U postgres -E UTF8 --no-sync > "$work/initdb.log" 2>&1
  # Durable settings left at their defaults (fsync on): the figures are those of a real server.
  "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -o "-c listen_addresses='' -k $work -p $pg_port -c shared_buffers=512MB" \
    -w -l "$work/server.log" start > /dev/null
  "$pg_bin/psql" -X -q -h "$work" -p "$pg_port" -U postgres -d postgres -c "CREATE DATABASE scale"
}

# Three process runs of 1,000 benchmarks (time, bytes/s, phase.compute gated; pct.peak not), 3 repetitions.
for seed in 1 2 3; do
  python3 "$bench_dir/make_large_json.py" "$work/run$seed.json" --benchmarks "$benchmarks" --repetitions 3 --seed "$seed" --no-aggregates
done

echo "machine: $(grep -c ^processor /proc/cpuinfo) CPUs (this run may use $(nproc)), $(machine_facts)"
for backend in $backends; do
  case "$backend" in
    sqlite) url="$work/history.db" ;;
    postgresql) start_pg || continue; url="postgresql:///scale?host=$work&port=$pg_port&user=postgres" ;;
    *) echo "unknown backend $backend" >&2; exit 2 ;;
  esac
  echo "== $backend: $sessions sessions x $benchmarks benchmarks x 3 metrics x 3 process runs"
  "$build/bin/perfgate_history_scale" --db "$url" --sessions "$sessions" --benchmarks "$benchmarks" --checkpoints "$checkpoints"
  echo "-- CLI on the full history (wall s, max RSS KiB):"
  /usr/bin/time -f "record %e s %M KiB" "$build/bin/perfgate" history record --db "$url" --commit cli --machine-class cpu-scale-2c \
    "$work/run1.json" "$work/run2.json" "$work/run3.json" > /dev/null
  /usr/bin/time -f "changes %e s %M KiB" "$build/bin/perfgate" history changes --db "$url" --machine-class cpu-scale-2c --quiet \
    --json "$work/changes-$backend.json"
  [[ "$backend" == sqlite ]] && echo "database size: $(du -h "$url" | cut -f1)"
  [[ "$backend" == postgresql ]] && echo "database size: $("$pg_bin/psql" -X -t -A -h "$work" -p "$pg_port" -U postgres -d scale \
    -c "SELECT pg_size_pretty(pg_database_size('scale'))")"
done

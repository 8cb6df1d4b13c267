#!/usr/bin/env bash
# The dashboard at scale (docs/history.md, "Dashboard"): `perfgate history report` on a synthetic SQLite
# history of 1,000 sessions x 1,000 benchmarks x 3 gated metrics (x 3 process runs), filled by
# perfgate_history_scale. Prints the wall time and maximum RSS of the report, and the size of what it wrote.
#
#   taskset -c 1 harness/bench/dashboard_scale.sh [BUILD_DIR]     (default build/release; needs bin/perfgate
#                                                                  and bin/perfgate_history_scale)
#
# Environment: PERFGATE_SCALE_SESSIONS (1000), PERFGATE_SCALE_BENCHMARKS (1000), PERFGATE_SCALE_DIR
# (/tmp/perfgate_dashboard_scale; the history is reused when it exists, so that repeated reports are timed
# on one history).
# shellcheck source=harness/bench/common.sh
source "$(dirname "$0")/common.sh"
build="${1:-$bench_root/build/release}"
sessions="${PERFGATE_SCALE_SESSIONS:-1000}"
benchmarks="${PERFGATE_SCALE_BENCHMARKS:-1000}"
work="${PERFGATE_SCALE_DIR:-/tmp/perfgate_dashboard_scale}"
require_tools "$build" perfgate perfgate_history_scale
mkdir -p "$work"
echo "machine: $(nproc) CPUs usable, $(machine_facts)"
if [[ ! -f "$work/history.db" ]]; then
  echo "filling $work/history.db: $sessions sessions x $benchmarks benchmarks x 3 metrics x 3 process runs"
  /usr/bin/time -f "fill %e s" "$build/bin/perfgate_history_scale" --db "$work/history.db" --sessions "$sessions" \
    --benchmarks "$benchmarks" --checkpoints "$sessions" > "$work/fill.log"
fi
rm -rf "$work/site"
/usr/bin/time -f "report %e s wall, %U s user, %M KiB max RSS" "$build/bin/perfgate" history report --db "$work/history.db" \
  --out "$work/site" --commit-url 'https://git.example/repo/commit/{commit}'
echo "written: $(du -sh "$work/site" | cut -f1) in $(find "$work/site" -type f | wc -l) files; index $(du -h "$work/site/data/index.js" | cut -f1), largest data file $(ls -S "$work/site/data" | head -1 | xargs -I{} du -h "$work/site/data/{}" | cut -f1)"

#!/usr/bin/env bash
# The merge job of a sharded main job (ci/perf.sh --shard I/N on N runners): builds perfgate alone, merges
# the shards of this commit from the shared history into one report and one exit code.
#
#   ci/merge.sh N [--machine-class C]
#
# Writes <build>/perf-report.md (also the job summary and the pull-request comment body in the CI
# definitions under ci/github/ and ci/gitlab/), perf-junit.xml and perf-report.json. Exit: 0 no regression,
# 1 regression, 2 bad input, 3 a shard missing or crashed (the report names it), 77 nothing judged.
# Environment: PERFGATE_SHARD_DB (default PERFGATE_HISTORY), the database the shards recorded into;
# PERFGATE_COMMIT (default: git rev-parse HEAD), the commit the shards measured; PERFGATE_BUILD_DIR
# (default build/merge).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ $# -lt 1 ]; then
  echo "usage: ci/merge.sh N [perfgate history merge flags]" >&2
  exit 2
fi
shards="$1"; shift
"$perfgate_root/ci/setup.sh"
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/merge}"
perfgate_configure "$build_dir" -DPERFGATE_BUILD_TESTS=OFF
cmake --build "$build_dir" --parallel "$perfgate_jobs" --target perfgate

db="${PERFGATE_SHARD_DB:-${PERFGATE_HISTORY:-}}"
if [ -z "$db" ]; then
  echo "ci/merge.sh: set PERFGATE_SHARD_DB or PERFGATE_HISTORY to the database the shards recorded into" >&2
  exit 2
fi
commit="${PERFGATE_COMMIT:-$(git -C "$perfgate_root" rev-parse HEAD)}"
set +e
"$build_dir/bin/perfgate" history merge --db "$db" --commit "$commit" --shards "$shards" \
  --markdown "$build_dir/perf-report.md" --junit "$build_dir/perf-junit.xml" --json "$build_dir/perf-report.json" "$@"
rc=$?
set -e
echo "ci/merge.sh: report: $build_dir/perf-report.md (exit $rc)"
exit $rc

#!/usr/bin/env bash
# Writes the history dashboard (perfgate history report) of PERFGATE_HISTORY to <build>/site: a static
# site that opens from disk (docs/history.md, "Dashboard").
#
#   ci/dashboard.sh [COMMIT_URL_TEMPLATE]     e.g. https://github.com/ORG/REPO/commit/{commit}
#
# Environment: PERFGATE_HISTORY (required), PERFGATE_BUILD_DIR (default build/dashboard).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ -z "${PERFGATE_HISTORY:-}" ]; then
  echo "ci/dashboard.sh: set PERFGATE_HISTORY to the history URL" >&2
  exit 2
fi
"$perfgate_root/ci/setup.sh"
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/dashboard}"
perfgate_configure "$build_dir" -DPERFGATE_BUILD_TESTS=OFF
cmake --build "$build_dir" --parallel "$perfgate_jobs" --target perfgate
url_args=()
if [ $# -ge 1 ]; then url_args=(--commit-url "$1"); fi
"$build_dir/bin/perfgate" history report --db "$PERFGATE_HISTORY" --out "$build_dir/site" \
  --baseline-dir "$perfgate_root/baselines" "${url_args[@]}"

#!/usr/bin/env bash
# README test command: installs missing dependencies, builds, runs unit + integration + smoke tests.
#   ci/test.sh [CTEST ARGS...]   e.g. -R Loader to run some tests only; -h, --help: this text
# Never runs the baseline-gated `perf` tests: on a shared machine those are the main job's business.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
perfgate_help_if_asked "${BASH_SOURCE[0]}" "$@"

"$perfgate_root/ci/setup.sh"
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/ci}"
# Tests on explicitly: a build dir that ci/perf.sh configured has them off in its cache.
perfgate_configure "$build_dir" -DPERFGATE_WARNINGS_AS_ERRORS=ON -DPERFGATE_BUILD_TESTS=ON
perfgate_build "$build_dir"
cd "$build_dir"
ctest --output-on-failure --label-exclude perf --timeout 900 -j "$perfgate_jobs" \
      --output-junit "$build_dir/ctest-junit.xml" "$@"

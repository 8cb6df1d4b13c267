#!/usr/bin/env bash
# README main job: installs missing dependencies, builds, runs every suite this machine's hardware
# allows, compares with baselines/<machine-class>/, writes a Markdown report, exits with the
# harness's exit code (0 none, 1 regression, 2 bad input, 3 bench failed, 77 nothing ran).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$perfgate_root/ci/setup.sh"
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/perf}"
perfgate_configure "$build_dir"
perfgate_build "$build_dir"
cd "$build_dir"
set +e
ctest --output-on-failure --label-regex perf "$@"
rc=$?
set -e
echo "perf.sh: reports in $build_dir/reports"
exit $rc

#!/usr/bin/env bash
# CI's sanitizer stage (run by .ci/run after ci/test.sh): builds libperfgate, the CLI and the harness
# unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json, preset debug-asan:
# Debug, no CUDA, no oneDNN) and runs the tests of harness/tests under them. Any sanitizer report
# fails the test that triggered it (-fno-sanitize-recover, halt_on_error, abort_on_error). Only the harness is built:
# the suites are measured code, and their own tests run in ci/test.sh.
# The preset compiles at -O1 (at -O0 the statistics simulations outlast their test timeouts) and without
# -Wmaybe-uninitialized, which GCC 12 reports falsely inside std::regex and std::function once the
# sanitizers instrument optimised code; ci/test.sh's build keeps every warning an error.
# Debug info is -g1: line tables are what a sanitizer's stack trace needs, and the full -g of a Debug build costs
# compile time in the stage that takes most of CI's.
# PERFGATE_ASAN_JOBS sets the build and test parallelism (default: the number of CPUs).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$perfgate_root/ci/setup.sh"
jobs="${PERFGATE_ASAN_JOBS:-$perfgate_jobs}"
prefix_args=()
if [ -n "${PERFGATE_DEPS_PREFIX:-}" ]; then prefix_args+=("-DCMAKE_PREFIX_PATH=${PERFGATE_DEPS_PREFIX}"); fi
cd "$perfgate_root"
start=$SECONDS
# shellcheck disable=SC2046
cmake --preset debug-asan "${prefix_args[@]}" $(perfgate_ccache_args) > /dev/null
cmake --build --preset debug-asan --parallel "$jobs"
build_seconds=$((SECONDS - start))
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The folder, not a label: gtest_discover_tests cannot give its tests a second label. Left out:
# Compare.CostPerMetricIsMicroseconds, which asserts a speed that instrumented code cannot meet.
ctest --test-dir "$perfgate_root/build/asan/harness/tests" --parallel "$jobs" --output-on-failure \
      --exclude-regex '^Compare\.CostPerMetricIsMicroseconds$' \
      --output-junit "$perfgate_root/build/asan/ctest-junit.xml" "$@"
echo "sanitize.sh: configure and build ${build_seconds} s, tests $((SECONDS - start - build_seconds)) s"

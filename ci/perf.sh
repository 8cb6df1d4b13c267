#!/usr/bin/env bash
# README main job: installs missing dependencies, builds, detects the hardware, runs every suite this
# machine can run in ONE `perfgate run` (one combined report), compares with
# baselines/<machine-class>/, writes <build>/perf-report.md and exits with the harness's exit code
# (0 none, 1 regression, 2 bad input, 3 a bench failed, 77 nothing could be judged).
#
#   ci/perf.sh                      gate against the stored baselines
#   ci/perf.sh --update-baseline    record this machine's baselines instead (see docs/baselines.md)
#   ci/perf.sh --filter REGEX ...   any further flag goes to `perfgate run`
# Environment: PERFGATE_SUITES="a b" runs only those suites; PERFGATE_ROUNDS / PERFGATE_REPETITIONS /
# PERFGATE_MIN_TIME set the measurement; PERFGATE_PIN_CPUS pins the bench processes (below);
# PERFGATE_BUILD_DIR, PERFGATE_BASELINE_DIR the folders.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$perfgate_root/ci/setup.sh"
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/perf}"
perfgate_configure "$build_dir" -DPERFGATE_BUILD_TESTS=OFF
perfgate_build "$build_dir"

# ---- hardware ----------------------------------------------------------------------------------
gpus=0
if command -v nvidia-smi > /dev/null 2>&1; then
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
fi
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
amx="no"; grep -qw amx_bf16 /proc/cpuinfo && amx="yes"
echo "perf.sh: $(nproc) CPU cores ($cpu_model, AMX: $amx), $gpus GPU(s)"

# ---- suites ------------------------------------------------------------------------------------
# Every built suite runs; a suite whose hardware is missing skips with its reason (GPU suites on a
# CPU machine), and the report lists it. The gate filters come from each suite's GATE_FILTER.
benches=()
filters=()
for bin in "$build_dir"/bin/bench_*; do
  [ -x "$bin" ] || continue
  suite="${bin##*/bench_}"
  if [ -n "${PERFGATE_SUITES:-}" ] && ! [[ " $PERFGATE_SUITES " == *" $suite "* ]]; then
    continue
  fi
  benches+=(--bench "$bin")
  filters+=("$(cat "$build_dir/suites/$suite.gate_filter")")
done
if [ ${#benches[@]} -eq 0 ]; then
  echo "perf.sh: no suite can run on this machine" >&2
  exit 77
fi
joined="$(IFS='|'; echo "${filters[*]}")"

run_args=(--rounds "${PERFGATE_ROUNDS:-3}" --repetitions "${PERFGATE_REPETITIONS:-5}" --min-time "${PERFGATE_MIN_TIME:-0.1}")
# SCHED_FIFO steadies CPU suites on a shared runner; it would starve a GPU driver's helper threads.
if [ "$gpus" -eq 0 ]; then run_args+=(--realtime); fi
# PERFGATE_PIN_CPUS=0 runs every bench process on CPU 0 (perfgate --pin-cpus): on a VM whose vCPUs differ
# in speed (the 2-vCPU runner: 20-25%, docs/running.md) it takes the vCPU lottery out of the comparison.
# Only for suites whose gated benchmarks use no more threads than CPUs pinned; record baselines the same way.
if [ -n "${PERFGATE_PIN_CPUS:-}" ]; then run_args+=(--pin-cpus "$PERFGATE_PIN_CPUS"); fi

set +e
"$build_dir/bin/perfgate" run "${benches[@]}" --filter "($joined)" "${run_args[@]}" \
  --baseline-dir "${PERFGATE_BASELINE_DIR:-$perfgate_root/baselines}" \
  --report-dir "$build_dir" --report-name perf-report "$@"
rc=$?
set -e
echo "perf.sh: report: $build_dir/perf-report.md (exit $rc)"
exit $rc

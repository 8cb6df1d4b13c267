#!/usr/bin/env bash
# One device-tool call's worth of work on a lent GPU machine, for any suite: print the machine, build the
# chosen suites and their unit tests, run the tests, then measure (or record baselines). Everything it
# writes goes to OUT. Run from the repository root with `.carry` in the device tool's carry list
# (ci/carry-deps.sh fetched the .debs the lent machines lack; ci/device-env.sh unpacks them).
#
#   lab/tools/device-run.sh OUT [options]
#
#   --suite S          a suite to build, test and measure (repeatable; default: expert_gemm transfers
#                      streaming_prefetch, the GPU suites)
#   --isolated         configure a copy of the tree holding only benches/support and the chosen suites, so
#                      that work in progress elsewhere (harness, other suites) cannot break the build
#   --cases WHAT       what to measure: gate (default: the suite's cases/gate.txt), all (every case), none
#                      (build and test only), or a Google Benchmark filter regex
#   --repetitions N    repetitions per case (default 3)
#   --min-time S       Google Benchmark min time per repetition, seconds (default 0.3)
#   --env VAR=VALUE    environment of the bench processes, e.g. one setting of a sweep (repeatable)
#   --tag NAME         names the output: OUT/<suite>[-NAME].json (default: no tag)
#   --ncu RANGE        also profile the kernels inside an NVTX range (ncu --nvtx-include RANGE, 12 kernels,
#                      one quick pass of the measured cases) into OUT/<suite>[-NAME]-ncu.txt
#   --no-tests         skip the unit tests
#   --baselines        record this machine class's baselines of the chosen suites instead (ci/perf.sh
#                      --update-baseline, 3 process rounds) into OUT/baselines/<class>/<suite>.json, and keep
#                      the combined report; PERFGATE_RECORD_LORA_DEEPSEEK=1 also records lora_backward's
#                      deepseek-v3 config on the host CPU (22.5 GB of weights, which a 2-core runner skips)
#   --cuda-arch A      CMAKE_CUDA_ARCHITECTURES (default 90: the lent H100/H200)
#
# Examples:
#   source ci/device-env.sh && lab/tools/device-run.sh "$OUT" --baselines
#   lab/tools/device-run.sh "$OUT" --suite expert_gemm --env PERFGATE_EXPERT_GEMM_HEAVY_SMS=88 --tag hs88 \
#     --cases 'bucketed_streams/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold'
#   lab/tools/device-run.sh "$OUT" --suite transfers --isolated --cases all --repetitions 1 --min-time 0.05
#   lab/tools/device-run.sh "$OUT" --suite lora_backward --cases gate --env PERFGATE_LORA_CONFIGS=ci
# Exit status: the first failure of build (1), unit tests or measurement, else 0.
set -uo pipefail

usage() { sed -n '2,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

out="${1:-}"
[ -n "$out" ] && [ "${out#-}" = "$out" ] || usage
shift
suites=() envs=() cases=gate repetitions=3 min_time=0.3 tag="" ncu_range="" tests=1 baselines=0 isolated=0 arch=90
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suites+=("${2:?}"); shift 2 ;;
    --isolated) isolated=1; shift ;;
    --cases) cases="${2:?}"; shift 2 ;;
    --repetitions) repetitions="${2:?}"; shift 2 ;;
    --min-time) min_time="${2:?}"; shift 2 ;;
    --env) envs+=("${2:?}"); shift 2 ;;
    --tag) tag="-${2:?}"; shift 2 ;;
    --ncu) ncu_range="${2:?}"; shift 2 ;;
    --no-tests) tests=0; shift ;;
    --baselines) baselines=1; shift ;;
    --cuda-arch) arch="${2:?}"; shift 2 ;;
    *) echo "device-run: unknown option '$1'" >&2; usage ;;
  esac
done
[ ${#suites[@]} -gt 0 ] || suites=(expert_gemm transfers streaming_prefetch)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for s in "${suites[@]}"; do
  [ -f "$root/benches/$s/CMakeLists.txt" ] || { echo "device-run: no suite '$s' under benches/" >&2; exit 2; }
done
mkdir -p "$out"
# shellcheck source=ci/device-env.sh
source "$root/ci/device-env.sh"
source "$root/ci/common.sh"
# No NVLink multicast on shared hosts (device notes), for NCCL and the libraries beside it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "== $(date -u +%T) $*"; }

log machine
{ date -u; echo "commit $(perfgate_commit)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,power.limit,memory.total,driver_version --format=csv
  nvidia-smi topo -m; lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | cut -c1-300; free -g; } > "$out/machine.txt" 2>&1
head -8 "$out/machine.txt"

if [ "$baselines" = 1 ]; then
  export PERFGATE_BUILD_DIR="${PERFGATE_BUILD_DIR:-/tmp/perfgate-build}"
  export PERFGATE_BASELINE_DIR="$out/baselines"
  export PERFGATE_SUITES="${suites[*]}"
  "$root/ci/perf.sh" --update-baseline --quiet
  rc=$?
  cp "$PERFGATE_BUILD_DIR/perf-report.md" "$out/" 2>/dev/null
  if [ -n "${PERFGATE_RECORD_LORA_DEEPSEEK:-}" ]; then
    timeout "${PERFGATE_LORA_TIMEOUT:-300}" "$PERFGATE_BUILD_DIR/bin/perfgate" run \
      --bench "$PERFGATE_BUILD_DIR/bin/bench_lora_backward" \
      --filter '^lora_backward/backward/(onednn|fused)/cfg:deepseek-v3/qlen:128/' \
      --rounds 3 --repetitions 3 --min-time 0.05 --update-baseline --quiet \
      --baseline-dir "$PERFGATE_BASELINE_DIR" --report-dir /tmp/perfgate-lora --report-name lora-report
    echo "device-run: lora_backward deepseek-v3 exit $?"
    cp /tmp/perfgate-lora/lora-report.md "$out/" 2>/dev/null
  fi
  log "done: perf.sh exit $rc"
  exit $rc
fi

# ---- build ----------------------------------------------------------------------------------------
src="$root"
build="${PERFGATE_BUILD_DIR:-/tmp/perfgate-device-build}"
if [ "$isolated" = 1 ]; then
  # Only what the suites need: the top-level CMake, cmake/, benches/support, the suites, and the harness's
  # contract headers (the context keys every bench writes), as an interface library. The rest of the
  # harness and the install rules are left out; the suites' tests do not use them.
  src=/tmp/perfgate-device-src
  rm -rf "$src" "$build" && mkdir -p "$src/harness" "$src/benches"
  sed '/PerfgateInstall/d' "$root/CMakeLists.txt" > "$src/CMakeLists.txt"
  cp -r "$root/cmake" "$src/cmake"
  cp -r "$root/benches/CMakeLists.txt" "$root/benches/support" "$src/benches/"
  cp -r "$root/harness/contract" "$src/harness/contract"
  sed -n '/^add_library(perfgate_contract INTERFACE)/,/^set_target_properties(perfgate_contract/p' \
    "$root/harness/CMakeLists.txt" > "$src/harness/CMakeLists.txt"
  for s in "${suites[@]}"; do cp -r "$root/benches/$s" "$src/benches/$s"; done
fi
log "configure $src -> $build"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release ${PERFGATE_DEPS_PREFIX:+-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX} \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DPERFGATE_WITH_ONEDNN="${PERFGATE_WITH_ONEDNN:-AUTO}" \
  -DPERFGATE_WARNINGS_AS_ERRORS=OFF -DPERFGATE_BUILD_TESTS=ON > "$out/build.log" 2>&1 \
  || { tail -40 "$out/build.log"; exit 1; }
for s in "${suites[@]}"; do
  log "build $s"
  # The bench, then everything else in the suite's folder (its libraries and unit tests).
  cmake --build "$build" --target "bench_$s" -j"$(nproc)" >> "$out/build.log" 2>&1 \
    && make -C "$build/benches/$s" -j"$(nproc)" >> "$out/build.log" 2>&1 \
    || { grep -E "error" -A3 "$out/build.log" | head -40; exit 1; }
done

# ---- unit tests and measurement --------------------------------------------------------------------
rc=0
for s in "${suites[@]}"; do
  if [ "$tests" = 1 ]; then
    log "unit tests $s"
    ctest --test-dir "$build/benches/$s" -L unit --output-on-failure > "$out/$s-unit.txt" 2>&1
    t=$?; tail -3 "$out/$s-unit.txt"; echo "unit tests $s exit $t"; [ "$rc" = 0 ] && rc=$t
  fi
  case "$cases" in
    none) continue ;;
    gate) filter="$(cat "$build/suites/$s.gate_filter")" ;;
    all) filter="^$s/" ;;
    *) filter="$cases" ;;
  esac
  log "measure $s: $filter (${repetitions} x ${min_time} s${envs[*]:+, ${envs[*]}})"
  json="$out/$s$tag.json"
  env "${envs[@]}" "$build/bin/bench_$s" --benchmark_filter="$filter" --benchmark_repetitions="$repetitions" \
    --benchmark_min_time="$min_time" --benchmark_out="$json" --benchmark_out_format=json \
    > "$out/$s$tag-console.txt" 2> "$out/$s$tag-stderr.txt"
  m=$?; echo "measure $s exit $m"; tail -3 "$out/$s$tag-stderr.txt"; [ "$rc" = 0 ] && rc=$m
  if [ -f "$root/benches/$s/tools/summarize.py" ] && [ -s "$json" ]; then
    python3 "$root/benches/$s/tools/summarize.py" "$json" | tee "$out/$s$tag-summary.txt"
  fi
  if [ -n "$ncu_range" ]; then
    log "ncu $s: kernels inside NVTX range $ncu_range"
    env "${envs[@]}" timeout 150 ncu --nvtx --nvtx-include "$ncu_range" --clock-control none -c 12 \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      "$build/bin/bench_$s" --benchmark_filter="$filter" --benchmark_min_time=0.01 --benchmark_repetitions=1 \
      > "$out/$s$tag-ncu.txt" 2>&1
    echo "ncu exit $?"; grep -E "==PROF==|==ERROR==|gpu__time_duration|dram__" "$out/$s$tag-ncu.txt" | head -30
  fi
done
log "done (exit $rc)"
exit "$rc"

#!/usr/bin/env bash
# One batched run on a lent GPU machine (device tool): build, unit tests, the tiny smoke pass, the
# balanced + compute-bound sweep (3 repetitions, JSON), and the NVTX range checks (injection log + ncu).
# Usage, from the repository root on the GPU machine:  OUT=<dir> bash benches/streaming_prefetch/tools/device_run.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
: "${OUT:?set OUT to a folder for the results}"
MIN_TIME="${MIN_TIME:-0.3}"
B=build/dev-streaming
BENCH=$B/bin/bench_streaming_prefetch
T=$B/benches/streaming_prefetch
log() { echo "== $(date -u +%T) $*"; }

source ci/device-env.sh
log gpu
nvidia-smi --query-gpu=name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max,clocks.sm,clocks.max.sm,driver_version --format=csv
git log -1 --format='commit %H %cd' 2>/dev/null || true

log configure
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="${PERFGATE_DEPS_PREFIX:-}" \
  -DPERFGATE_WITH_ONEDNN=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 \
  || { tail -40 "$OUT/configure.log"; exit 1; }
log build
cmake --build $B -j16 --target bench_streaming_prefetch streaming_prefetch_engine_test \
  streaming_prefetch_config_test perfgate_nvtx_log 2>&1 | grep -E "error|warning|Built target" | head -40
[ -x "$BENCH" ] || { echo "build failed"; exit 1; }

log unit tests
$T/streaming_prefetch_config_test --gtest_brief=1; echo "config_test rc=$?"
$T/streaming_prefetch_engine_test; echo "engine_test rc=$?"

log smoke tiny
$BENCH --benchmark_filter='model:tiny' --benchmark_min_time=0.01 --benchmark_repetitions=1 \
  --benchmark_format=json > "$OUT/tiny.json"; echo "tiny rc=$?"

log sweep balanced + compute_bound, min_time $MIN_TIME x3
$BENCH --benchmark_filter='model:(balanced|compute_bound)' --benchmark_min_time="$MIN_TIME" \
  --benchmark_repetitions=3 --benchmark_format=json > "$OUT/sweep.json"; echo "sweep rc=$?"
python3 - "$OUT/sweep.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    c = lambda k: b.get(k, float("nan"))
    print(f'{b["run_name"]:70s} {b["real_time"]:8.3f} ms ovl {c("pct.overlap_efficiency"):6.1f} '
          f'wait {c("pct.sync_wait"):5.1f} vsfloor {c("step_vs_floor"):.3f} bal {c("balance_ratio"):.3f} '
          f'h2d {c("h2d_GBps"):5.1f} hit {c("cache_hit_rate"):.2f} ready {c("ready_rate"):.2f}')
PY

log nvtx ranges via injection
NVTX_INJECTION64_PATH="$PWD/$T/libperfgate_nvtx_log.so" PERFGATE_NVTX_LOG="$OUT/nvtx_raw.log" \
  $BENCH --benchmark_filter='model:tiny/distance:(0/slots:2|2/slots:4)' --benchmark_min_time=0.01 \
  --benchmark_repetitions=1 > /dev/null; echo "nvtx rc=$?"
{ echo "# first pushes (depth name)"; head -40 "$OUT/nvtx_raw.log";
  echo "# counts by depth and name (layer numbers kept)"; sort "$OUT/nvtx_raw.log" | uniq -c | sort -k2n -k3; } \
  > "$OUT/nvtx_ranges.txt"
rm -f "$OUT/nvtx_raw.log"

log ncu kernels inside layer_1_attention / layer_1_ffn
timeout 120 ncu --nvtx --nvtx-include "layer_1_attention/" --nvtx-include "layer_1_ffn/" --clock-control none \
  --metrics gpu__time_duration.sum -c 6 $BENCH --benchmark_filter='model:tiny/distance:2/slots:4' \
  --benchmark_min_time=0.01 --benchmark_repetitions=1 > "$OUT/ncu_layer1.txt" 2>&1; echo "ncu rc=$?"
grep -E "layer_1|ensure|prefetch|h2d|==PROF==|==WARNING==|==ERROR==|gpu__time_duration|Stream" \
  "$OUT/ncu_layer1.txt" | head -40
log ncu range replay of ensure_layer_1 / prefetch range
timeout 120 ncu --nvtx --nvtx-include "ensure_layer_1/" --replay-mode range --clock-control none \
  --metrics gpu__time_duration.sum -c 2 $BENCH --benchmark_filter='model:tiny/distance:0/slots:2' \
  --benchmark_min_time=0.01 --benchmark_repetitions=1 > "$OUT/ncu_ensure.txt" 2>&1; echo "ncu range rc=$?"
grep -vE "^\s*$" "$OUT/ncu_ensure.txt" | grep -E "ensure|==PROF==|==WARNING==|==ERROR==|gpu__time|Range" | head -30
log done

#!/usr/bin/env bash
# Builds and measures the lora_backward suite on a lent device machine (its host CPU has AMX; oneDNN
# comes from the carried .debs: name `.carry` in the device tool's carry list). Results go to $OUT.
# usage (on the device, from the repo root): bash benches/lora_backward/tools/device_run.sh [deepseek]
set -uo pipefail
OUT=${OUT:-/tmp/lora_out}
mkdir -p "$OUT"
source ci/device-env.sh
{ lscpu; free -g; nproc; } >"$OUT/machine.txt" 2>&1
grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort | uniq -c >>"$OUT/machine.txt"
build=build/lora-device
cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release ${PERFGATE_DEPS_PREFIX:+-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX} \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
cmake --build $build --target bench_lora_backward lora_backward_test -j"$(nproc)" >"$OUT/build.log" 2>&1 \
  || { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
bench=$build/bin/bench_lora_backward
$build/benches/lora_backward/lora_backward_test >"$OUT/unit.txt" 2>&1; echo "unit test exit $?" | tee -a "$OUT/unit.txt"
if [ "${1:-}" = ab ]; then  # A/B of the fused kernel's streaming stores, interleaved
  for i in 1 2 3; do
    python3 benches/lora_backward/tools/measure_targets.py $bench --runs 2 --threads 2 --json-dir /tmp/ab_on$i | grep -E 'median' | sed 's/^/stream on : /'
    PERFGATE_LORA_FUSED_STREAM=0 python3 benches/lora_backward/tools/measure_targets.py $bench --runs 2 --threads 2 --json-dir /tmp/ab_off$i | grep -E 'median' | sed 's/^/stream off: /'
  done 2>&1 | tee "$OUT/ab_stream.md"
  PERFGATE_LORA_CONFIGS=ci PERFGATE_LORA_QLENS=128 PERFGATE_LORA_THREADS=2 $bench --benchmark_filter='calibration|backward/(onednn|fused)' \
    --benchmark_repetitions=3 --benchmark_min_time=0.3 --benchmark_out="$OUT/final_ci_t2.json" --benchmark_out_format=json >/dev/null 2>&1
  exit 0
fi
# the targets, 2 threads (like the 2-core CI machine) and all cores
python3 benches/lora_backward/tools/measure_targets.py $bench --runs 5 --threads 2 --json-dir /tmp/lt2 >"$OUT/targets_t2.md" 2>&1
cat "$OUT/targets_t2.md"
 python3 benches/lora_backward/tools/measure_targets.py $bench --runs 3 --threads "$(nproc)" --json-dir /tmp/ltn >"$OUT/targets_tn.md" 2>&1
cat "$OUT/targets_tn.md"
# the whole ci sweep once (JSON), 2 threads and all cores
PERFGATE_LORA_CONFIGS=ci PERFGATE_LORA_QLENS=1,16,128 PERFGATE_LORA_THREADS="2,$(nproc)" timeout 200 $bench --benchmark_min_time=0.2 \
  --benchmark_out="$OUT/ci_sweep.json" --benchmark_out_format=json >"$OUT/ci_sweep.txt" 2>&1
echo "ci sweep exit $?"
if [ "${1:-}" = deepseek ]; then
  PERFGATE_LORA_CONFIGS=deepseek-v3 PERFGATE_LORA_QLENS=128 timeout 300 $bench \
    --benchmark_filter='^lora_backward/backward/(onednn|fused)' --benchmark_min_time=0.5 \
    --benchmark_out="$OUT/deepseek.json" --benchmark_out_format=json >"$OUT/deepseek.txt" 2>&1
  echo "deepseek exit $?"; tail -5 "$OUT/deepseek.txt"
fi

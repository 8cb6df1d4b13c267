#!/usr/bin/env bash
# One device-tool call: expert_gemm built and unit-tested, then `bucketed` and `pipelined` at DeepSeek-V3 x 4096
# tokens, cold, uniform and Zipf routing, one process per side MODE:ROWS (PERFGATE_EXPERT_GEMM_PIPELINE_MODE,
# PERFGATE_EXPERT_GEMM_PIPELINE_ROWS), the sides in turn, ROUNDS rounds.
#   export PERFGATE_GIT_COMMIT=<commit>; source ci/device-env.sh
#   bash lab/records/expert_gemm/h200_2026-11-29_pipelined/run2.sh $OUT ROUNDS "MODE:ROWS ..."
set -uo pipefail
out="${1:?OUT}" rounds="${2:-2}" sides="${3:-0:8192 1:8192 2:8192 2:4096 2:16384 1:4096}"
export PERFGATE_BUILD_DIR=/tmp/pg-build
mkdir -p "$out"
nvidia-smi --query-gpu=name,serial,power.limit,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
lab/tools/device-run.sh "$out/t" --suite expert_gemm --cases none
echo "build+tests exit $?"
bench="$PERFGATE_BUILD_DIR/bin/bench_expert_gemm"
filter='^expert_gemm/(calibration|ffn/(bucketed|pipelined)/shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold/)'
for r in $(seq 1 "$rounds"); do
  for side in $sides; do
    mode="${side%%:*}" rows="${side#*:}" name="m${side%%:*}-p${side#*:}"
    echo "== $(date -u +%T) round $r $name"
    PERFGATE_EXPERT_GEMM_PIPELINE_MODE=$mode PERFGATE_EXPERT_GEMM_PIPELINE_ROWS=$rows "$bench" \
      --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_min_time=0.3 \
      --benchmark_out="$out/r$r-$name.json" --benchmark_out_format=json > /dev/null 2>&1 || echo "round $r $name failed"
    python3 lab/tools/ceiling_rows.py "$out/r$r-$name.json" | tail -n +3 | sed "s/^/$name r$r /"
  done
done 2>&1 | tee "$out/rows.txt"
tar czf "$out/raw.tgz" -C "$out" $(cd "$out" && ls r*.json) 2>/dev/null
rm -f "$out"/r*.json

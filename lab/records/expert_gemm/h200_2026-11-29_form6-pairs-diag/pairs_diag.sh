#!/usr/bin/env bash
# One device call for form 6's CTA pairs (branch wip/form6-pairs2): GPU tests, the pair cap, one alternating
# A/B round of single CTAs against pairs (every expert on form 6, uniform), then ncu on one gate_up launch of each.
#   lab/tools/pairs_diag.sh OUT
set -uo pipefail
out="${1:?usage: pairs_diag.sh OUT}"
mkdir -p "$out"
B=/tmp/perfgate-device-build/bin/bench_expert_gemm
T=/tmp/perfgate-device-build/benches/expert_gemm/expert_gemm_tests
lab/tools/device-run.sh "$out/v" --suite expert_gemm --cases none > "$out/build-and-tests.log" 2>&1
echo "device-run: $?"; grep -E 'tests passed|FAILED|PASSED|pairs fit' "$out/build-and-tests.log" | head
f='^expert_gemm/ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold/'
PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192 PERFGATE_EXPERT_GEMM_LIGHT_CLUSTER=1 $B --benchmark_filter="$f" \
  --benchmark_min_time=0.05 --benchmark_repetitions=1 2>&1 | grep -E 'pairs fit|ffn/' | tee "$out/cap.txt"
F='^expert_gemm/(calibration|ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold/)'
R=PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192
lab/tools/env_ab.sh "$out/u" "${AB_ROUNDS:-1}" "$F" one:$R pair:$R,PERFGATE_EXPERT_GEMM_LIGHT_CLUSTER=1
sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section WarpStateStats"
for side in one pair; do
  c=0; [ "$side" = pair ] && c=1
  PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192 PERFGATE_EXPERT_GEMM_LIGHT_CLUSTER=$c PERFGATE_EXPERT_GEMM_GRAPHS=0 \
    timeout 150 ncu --clock-control none -k regex:light_gemm_tma --launch-skip 24 -c 2 $sec $B --benchmark_filter="$f" \
    --benchmark_min_time=0.15 --benchmark_repetitions=1 > "$out/ncu-$side.txt" 2>&1
  echo "ncu $side: $?"
  grep -E 'Duration|DRAM Throughput|Grid Size|Cluster Size|Max Active Clusters|Registers Per|Stall|Warp Cycles Per Issued' \
    "$out/ncu-$side.txt" | head -40
done

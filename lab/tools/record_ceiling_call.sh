#!/usr/bin/env bash
# One device-tool call for issue #42's evidence: the expert_gemm suite built and unit-tested (every variant
# against the CPU reference), DeepSeek-V3 x 4096 cold rows of every variant measured with the same-run
# roofline and SM clock, then lora_backward built with oneDNN and its LoRA targets measured on the host CPU.
# Run from the repository root with `.carry` in the carry list.
#
#   lab/tools/record_ceiling_call.sh OUT [REPETITIONS] [LORA_CPUS...]
#
# REPETITIONS: expert_gemm repetitions per case (default 5). LORA_CPUS: comma lists of two CPUs, one
# measure_targets.py pass each (default 2,3 and 4,5; none: no lora_backward).
set -uo pipefail
out="${1:?usage: record_ceiling_call.sh OUT [REPETITIONS] [LORA_CPUS...]}"
reps="${2:-5}"
shift $(( $# >= 2 ? 2 : 1 ))
lora_cpus=("$@")
[ ${#lora_cpus[@]} -gt 0 ] || lora_cpus=("2,3" "4,5")
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PERFGATE_BUILD_DIR=/tmp/perfgate-ceiling-build
mkdir -p "$out"
rows='^expert_gemm/(calibration|ffn/[a-z_]+/shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold/)'

"$root/lab/tools/device-run.sh" "$out" --suite expert_gemm --cases "$rows" --repetitions "$reps" --min-time 0.3
echo "expert_gemm call exit $?"
python3 "$root/lab/tools/ceiling_rows.py" "$out/expert_gemm.json" | tee "$out/ceiling-rows.md"

[ "${lora_cpus[0]}" = none ] && exit 0
"$root/lab/tools/device-run.sh" "$out/lora-build" --suite lora_backward --cases none --no-tests
echo "lora_backward build exit $?"
for cpus in "${lora_cpus[@]}"; do
  echo "== $(date -u +%T) lora_backward targets on CPUs $cpus"
  python3 "$root/benches/lora_backward/tools/measure_targets.py" "$PERFGATE_BUILD_DIR/bin/bench_lora_backward" \
    --runs 5 --threads 2 --qlen 128 --min-time 1 --cpus "$cpus" --json-dir "$out/lora-${cpus/,/-}" \
    2>&1 | tee "$out/lora-targets-${cpus/,/-}.txt"
done
echo "== $(date -u +%T) done"

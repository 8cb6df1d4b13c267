#!/usr/bin/env bash
# Two configs' benchmarks, repetitions randomly interleaved as perfgate runs them: each (config, variant,
# qlen, threads) must be checked against the reference exactly once per process. A process that dropped
# one config's state when the other ran checked (and rebuilt) it again at every switch; with deepseek-v3
# that cost ~30 s a switch on the AMX runner (docs/lora_backward.md, "Process cost and interleaving"). The third
# config is the first with bf16 LoRA gradients (grads=bf16): its own benchmarks, checked by the bench like the others.
# Usage: config_switch_test.sh path/to/bench_lora_backward
set -uo pipefail
bench="${1:?bench_lora_backward path}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
PERFGATE_LORA_CONFIGS=tiny,ci,tiny+grads=bf16 PERFGATE_LORA_QLENS=16 PERFGATE_LORA_THREADS=1 "$bench" \
  --benchmark_filter='/backward/(loop|fused)/' --benchmark_repetitions=3 --benchmark_min_time=0.01 \
  --benchmark_enable_random_interleaving=true > /dev/null 2> "$log"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
  cat "$log"; echo "FAIL: bench exited $rc"; exit 1
fi
lines="$(grep 'matches the fp64 reference' "$log" | sed 's/ matches.*//')"
checks="$(printf '%s\n' "$lines" | grep -c .)"
distinct="$(printf '%s\n' "$lines" | grep . | sort -u | wc -l)"
echo "reference checks: $checks, distinct: $distinct"
# loop runs everywhere; fused only where oneDNN has bf16 (it skips elsewhere): 3 or 6 distinct checks.
for cfg in tiny ci tiny+grads=bf16; do
  printf '%s\n' "$lines" | grep -qF "loop cfg $cfg qlen 16" || { echo "FAIL: loop cfg $cfg was never checked"; exit 1; }
done
[ "$checks" -eq "$distinct" ] || { printf '%s\n' "$lines"; echo "FAIL: a check ran more than once"; exit 1; }
[ "$distinct" -eq 3 ] || [ "$distinct" -eq 6 ] || { printf '%s\n' "$lines"; echo "FAIL: unexpected checks"; exit 1; }
echo PASS

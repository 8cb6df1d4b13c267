#!/bin/bash
# A/A of one build: 8 processes pinned to CPU 0, 15 repetitions each, the lora relative-gate benchmarks
f="$(cat build/aal/suites/lora_backward.relative_filter)"
mkdir -p OUT
for k in 1 2 3 4 5 6 7 8; do
  taskset -c 0 build/aal/bin/bench_lora_backward --benchmark_filter="$f" --benchmark_repetitions=15 \
    --benchmark_min_time=0.1s --benchmark_enable_random_interleaving=true --benchmark_out=OUT/p$k.json --benchmark_out_format=json > /dev/null 2>&1
  echo "p$k $(date -u +%T) rc $?"
done

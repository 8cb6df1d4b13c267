#!/bin/bash
# usage: lora_ab.sh OUT ROUNDS  -- alternating processes, backward cfg ci qlen 128 threads 2, pinned to CPUs 0,1
out=$1; rounds=${2:-2}; mkdir -p $out
export PERFGATE_LORA_CONFIGS=ci PERFGATE_LORA_QLENS=128 PERFGATE_LORA_THREADS=2
cd /work/wt-lora
for r in $(seq 1 $rounds); do
  for cfg in fused fused2 fused2:XDX1=1 fused2:PERFGATE_LORA_FUSED2_SPLIT=1; do
    v=${cfg%%:*}; e=""; [ "$cfg" != "$v" ] && e=${cfg#*:}
    env $e taskset -c 0,1 build/l/bin/bench_lora_backward --benchmark_filter="^lora_backward/backward/$v/cfg:ci/qlen:128/threads:2" \
      --benchmark_repetitions=3 --benchmark_min_time=0.5s --benchmark_out=$out/r$r.${cfg//[:=]/_}.json --benchmark_out_format=json > /dev/null 2>&1
  done
done

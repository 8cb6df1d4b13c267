#!/usr/bin/env bash
# Alternating processes: THP madvise (default) vs always, lora_marginal ci+grads=bf16, 2 threads, CPUs 0,1.
set -u
B=${B:-build/l/bin/lora_marginal}
for i in 1 2 3 4 5; do
  for mode in always madvise; do
    echo $mode > /sys/kernel/mm/transparent_hugepage/enabled
    taskset -c 0,1 $B --config ci+grads=bf16 --threads 2 --seconds 25 --out $mode-$i.json > $mode-$i.log 2>&1
  done
done
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled

#!/usr/bin/env bash
# THP always vs madvise, 8 pairs in ABBA order, lora_marginal ci+grads=bf16, 2 threads, CPUs 0,1, 20 s a process.
set -u
B=${B:-build/l/bin/lora_marginal}
one() { echo $1 > /sys/kernel/mm/transparent_hugepage/enabled
        taskset -c 0,1 $B --config ci+grads=bf16 --threads 2 --seconds 20 --out $1-$2.json > $1-$2.log 2>&1; }
for i in 1 2 3 4 5 6 7 8; do
  if [ $((i % 2)) = 1 ]; then one always $i; one madvise $i; else one madvise $i; one always $i; fi
done
echo madvise > /sys/kernel/mm/transparent_hugepage/enabled

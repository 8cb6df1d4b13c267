#!/usr/bin/env bash
# Alternating processes: prepared base weights in 4 KiB pages (before) or huge pages (after); THP madvise.
# /tmp/lm_before: lora_marginal built at the tree; /tmp/lm_after: the same with prepared-huge.patch applied.
set -u
for i in 1 2 3 4 5; do
  for side in before after; do
    taskset -c 0,1 /tmp/lm_$side --config ci+grads=bf16 --threads 2 --seconds 25 --out $side-$i.json > $side-$i.log 2>&1
  done
done

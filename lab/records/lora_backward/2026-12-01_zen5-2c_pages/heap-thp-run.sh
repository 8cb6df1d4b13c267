#!/usr/bin/env bash
# Alternating processes: glibc malloc asking THP for its heap (GLIBC_TUNABLES=glibc.malloc.hugetlb=1) or not; THP madvise.
set -u
B=${B:-build/l/bin/lora_marginal}
for i in 1 2 3 4 5; do
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 taskset -c 0,1 $B --config ci+grads=bf16 --threads 2 --seconds 25 --out heap-thp-$i.json > heap-thp-$i.log 2>&1
  taskset -c 0,1 $B --config ci+grads=bf16 --threads 2 --seconds 25 --out default-$i.json > default-$i.log 2>&1
done

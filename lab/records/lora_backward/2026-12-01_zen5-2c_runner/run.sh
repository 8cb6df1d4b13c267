#!/usr/bin/env bash
# Alternating processes of the two lora_marginal builds (before: HEAD; after: whole-line bf16 stores), CPUs 0,1.
#   bash run.sh PAIRS SECONDS CONFIG TAG
set -eu
pairs=$1; secs=$2; cfg=$3; tag=$4
for i in $(seq 1 "$pairs"); do
  for side in before after; do
    taskset -c 0,1 ./$side --config "$cfg" --threads 2 --seconds "$secs" --seed $i --out $tag-$side-$i.json > $tag-$side-$i.log 2>&1
  done
done

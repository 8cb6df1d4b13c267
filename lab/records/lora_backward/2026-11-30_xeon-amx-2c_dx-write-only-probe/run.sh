#!/usr/bin/env bash
# The probe as it ran (tree 768fb2a with dx-write-only-probe.patch applied to build/l, lora_marginal rebuilt):
# four alternating pairs of processes, 25 s each, on CPUs 0,1; the probe side sets PROBE_DX_WRITE_ONLY=1.
set -eu
for i in 1 2 3 4; do
  for side in base probe; do
    if [ "$side" = probe ]; then export PROBE_DX_WRITE_ONLY=1; else unset PROBE_DX_WRITE_ONLY; fi
    taskset -c 0,1 build/l/bin/lora_marginal --config ci+grads=bf16 --threads 2 --seconds 25 --out "$side-$i.json"
  done
done
unset PROBE_DX_WRITE_ONLY
for s in base probe; do python3 benches/lora_backward/tools/marginal_cost.py --summarize $s-*.json; done

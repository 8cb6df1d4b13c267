#!/bin/bash
# alternating single-process marginal costs: the binary before (4 KiB pages) and after (huge pages for the LoRA's grads and weights)
cd /work/main
for i in 1 2 3 4 5 6; do
  for side in before after; do
    if [ $side = before ]; then bin=/tmp/lora-before/lora_marginal; else bin=build/l/bin/lora_marginal; fi
    python3 benches/lora_backward/tools/marginal_cost.py $bin --processes 1 --seconds 30 --cpus 0,1 --json-dir /tmp/mh/$side$i > /tmp/mh/$side$i.txt 2>&1
  done
done
echo done > /tmp/mh/finished

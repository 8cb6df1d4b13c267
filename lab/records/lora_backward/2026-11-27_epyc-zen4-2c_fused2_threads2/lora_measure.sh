#!/bin/bash
# usage: lora_measure.sh OUTDIR  -- 5 process runs, backward of every variant, cfg ci qlen 128, 2 threads pinned to CPUs 0,1
set -e
out=$1; mkdir -p $out
cd /work/wt-lora
uptime > $out/uptime_before.txt
python3 benches/lora_backward/tools/measure_targets.py build/l/bin/bench_lora_backward --runs 5 --threads 2 --qlen 128 --min-time 1s --cpus 0,1 --json-dir $out > $out/targets.md 2>&1
uptime > $out/uptime_after.txt

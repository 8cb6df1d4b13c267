#!/usr/bin/env bash
# A/A perfgate ab of the synthetic suite: 20 rounds of 5 repetitions of 0.05 s (the same measured time as 10 x 5 x 0.1 s), lanes 0;1
set -u
cd /work/main
B=build/v/bin/bench_synthetic; P=build/v/bin/perfgate
F='^synthetic/(chain|walk|phased)/'
common=(--before $B --after $B --rounds 20 --repetitions 5 --min-time 0.05 --lanes '0;1' --filter "$F" -q)
for i in 1 2 3; do s=$SECONDS; $P ab "${common[@]}" --report-dir DIR/short$i > DIR/short$i.txt 2>&1; echo "short$i rc=$? $((SECONDS-s)) s"; done

#!/usr/bin/env bash
# A/A and planted perfgate ab of the synthetic suite at the main job's relative-gate settings (10 rounds, 5 reps, 0.1 s, lanes 0;1)
set -u
cd /work/main
B=build/v/bin/bench_synthetic; P=build/v/bin/perfgate
F='^synthetic/(chain|walk|phased)/'
common=(--before $B --after $B --rounds 10 --repetitions 5 --min-time 0.1 --lanes '0;1' --filter "$F" -q)
for i in 1 2 3; do $P ab "${common[@]}" --report-dir DIR/aa$i > DIR/aa$i.txt 2>&1; echo "aa$i rc=$?"; done
for s in 0.03 0.05; do $P ab "${common[@]}" --after-env PERFGATE_SYNTHETIC_SLOWDOWN=$s --report-dir DIR/p$s > DIR/p$s.txt 2>&1; echo "p$s rc=$?"; done

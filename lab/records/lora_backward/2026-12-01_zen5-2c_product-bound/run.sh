#!/usr/bin/env bash
# Builds the two probes against build/l's lora_backward core (cmake -DPERFGATE_WITH_CUDA=OFF, Release) and runs
# them on CPU 0 (and CPU 1 at once for the two-core rows). From the repository root:
#   bash lab/records/lora_backward/2026-12-01_zen5-2c_product-bound/run.sh
set -euo pipefail
here=$(dirname "$0"); out=${TMPDIR:-/tmp}/lora-probe; mkdir -p "$out"
g++ -O2 -std=c++20 "$here/vdpbf16ps_peak.cpp" -o "$out/peak"
g++ -O3 -march=x86-64-v3 -std=c++20 -Ibenches/lora_backward/src -Ibenches/lora_backward/include \
  -Ibenches/support/include "$here/expert_probe.cpp" build/l/benches/lora_backward/libperfgate_lora_backward_core.a \
  build/l/benches/support/*.a -lfmt -fopenmp -ldnnl -o "$out/expert"
taskset -c 0 "$out/peak"
for r in 1 2 3; do for b in 0 1; do
  taskset -c 0 "$out/expert" 8 $b 1 20000                    # hot: one expert, in cache
  taskset -c 0 "$out/expert" 8 $b 64 4000                    # cold: 64 experts' own buffers in turn
  ONLY_PASS1=1 taskset -c 0 "$out/expert" 8 $b 1 20000       # pass 1 alone (grad_B, G_B), hot
done; done
for b in 0 1; do  # both cores at once, cold
  taskset -c 0 "$out/expert" 8 $b 64 4000 & taskset -c 1 "$out/expert" 8 $b 64 4000; wait
done
# DRAM-cold: 512 experts' buffers in turn (about 180 MB, beyond the 32 MiB L3), one core, then both cores at once
for b in 0 1; do taskset -c 0 "$out/expert" 8 $b 512 4000; done
for b in 0 1; do taskset -c 0 "$out/expert" 8 $b 512 4000 & taskset -c 1 "$out/expert" 8 $b 512 4000; wait; done
# per-expert cost against its rows, hot
for m in 1 2 3 4 5 6 7 8 10 12 14 16; do taskset -c 0 "$out/expert" $m 1 1 10000; done
# the layer's schedule: 64 (or 512) experts a round, largest-first order aside, dynamically over OpenMP threads
g++ -O3 -march=x86-64-v3 -std=c++20 -fopenmp -Ibenches/lora_backward/src -Ibenches/lora_backward/include \
  -Ibenches/support/include "$here/expert_probe.cpp" build/l/benches/lora_backward/libperfgate_lora_backward_core.a \
  build/l/benches/support/*.a -lfmt -ldnnl -o "$out/expert"
for t in 1 2; do
  ROUNDS=200 OMP_NUM_THREADS=$t taskset -c 0,1 "$out/expert" 8 1 64 0
  ROUNDS=100 OMP_NUM_THREADS=$t taskset -c 0,1 "$out/expert" 8 1 512 0
done
# one projection group alone (ONLY_DOWN: D4's kernel; ONLY_GU: GU3's), DRAM-cold, the layer's schedule
for t in 1 2; do for k in ONLY_DOWN ONLY_GU; do env $k=1 ROUNDS=60 OMP_NUM_THREADS=$t taskset -c 0,1 "$out/expert" 8 1 512 0; done; done
# D4's kernel alone, DRAM-cold, experts in a shuffled order each round, and with the layer's rows per expert
for v in X=1 SHUFFLE=1 LAYER_ROWS=1; do env $v ONLY_DOWN=1 ROUNDS=60 OMP_NUM_THREADS=1 taskset -c 0 "$out/expert" 8 1 512 0; done

#!/usr/bin/env bash
# A plain Google Benchmark binary under perfgate run on a GPU host: run from the tree root of 8ba18dd with
# ../plain_bench.cpp copied there as plain_bench_tmp.cpp (device tool, kind nvidia-h200, carry [".carry"]).
set -uo pipefail
source ci/device-env.sh
ls /proc/driver/nvidia/gpus; nvidia-smi -L
cmake -S . -B /tmp/pg -G Ninja -DCMAKE_BUILD_TYPE=Release -DPERFGATE_BUILD_TESTS=OFF -DPERFGATE_WITH_CUDA=OFF \
  ${PERFGATE_DEPS_PREFIX:+-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX} > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
ninja -C /tmp/pg perfgate > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
g++ -O2 plain_bench_tmp.cpp -o /tmp/b -lbenchmark -lpthread
cd /tmp && /tmp/pg/bin/perfgate run --bench ./b --filter 'BM_(Sum|Manual)' --rounds 3 --repetitions 3 --min-time 0.02 \
  -q --report-dir "$OUT/r" --baseline-dir /tmp/none 2>&1 | head -8
grep -o '"perfgate\.[a-z_.]*": "[^"]*"' "$OUT/r/runs/b.current.json" | sort -u

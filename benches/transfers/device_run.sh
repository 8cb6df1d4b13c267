#!/usr/bin/env bash
# One call on a lent GPU machine (device tool, kind nvidia-h200-x2): builds the transfer suite in an
# isolated copy of the tree (only benches/support + benches/transfers, so other suites mid-edit
# cannot break the configure), runs the unit tests, the 256 MiB cases with 3 repetitions, and a
# quick sweep of every case. Logs and JSON go to $OUT. Usage (repo root):
#   source ci/device-env.sh && bash benches/transfers/device_run.sh [main-filter-override]
set -uo pipefail
OUT="${OUT:-/tmp/transfers_out}"
mkdir -p "$OUT"
ROOT="$(pwd)"
SRC=/tmp/transfers_src
BUILD=/tmp/transfers_build
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{ date -u; nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s | head -24;
  nvidia-smi -q | grep -iE -A2 "PCIe Generation|Link Width" | head -24; } > "$OUT/topo.txt" 2>&1

rm -rf "$SRC" "$BUILD" "$OUT/build.txt" && mkdir -p "$SRC"
tar --exclude=./build --exclude=./.git --exclude=./.carry -cf - . | tar -C "$SRC" -xf -
for d in "$SRC"/benches/*/; do case "$(basename "$d")" in support|transfers) ;; *) rm -rf "$d" ;; esac; done
NCCL_ARGS=()
if [ ! -f /usr/local/cuda/include/nccl.h ]; then
  NCCL_DIR="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
  if [ -n "$NCCL_DIR" ] && [ -f "$NCCL_DIR/include/nccl.h" ]; then
    NCCL_LIB="$(ls "$NCCL_DIR"/lib/libnccl.so* | head -1)"
    NCCL_ARGS=(-DPERFGATE_NCCL_INCLUDE="$NCCL_DIR/include" -DPERFGATE_NCCL_LIBRARY="$NCCL_LIB")
    export LD_LIBRARY_PATH="$NCCL_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
echo "NCCL args: ${NCCL_ARGS[*]:-(toolkit)}"

configure() {
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_PREFIX_PATH="${PERFGATE_DEPS_PREFIX:-}" -DPERFGATE_WITH_ONEDNN=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPERFGATE_WARNINGS_AS_ERRORS=OFF "${NCCL_ARGS[@]}" >> "$OUT/build.txt" 2>&1
}
if ! configure; then
  # Another part of the tree is mid-edit: the fixture needs neither the harness nor the install rules.
  echo "configure failed with the harness; retrying without it" | tee -a "$OUT/build.txt"
  rm -rf "$BUILD" "$SRC/examples"
  : > "$SRC/harness/CMakeLists.txt"
  : > "$SRC/cmake/PerfgateInstall.cmake"
  configure
fi && cmake --build "$BUILD" --target bench_transfers perfgate_transfers_tests -j16 >> "$OUT/build.txt" 2>&1
rc=$?; tail -5 "$OUT/build.txt"; [ $rc -ne 0 ] && { grep -E "error|Error" "$OUT/build.txt" | head -30; exit $rc; }

BIN="$BUILD/bin/bench_transfers"
timeout 120 "$BUILD/bin/perfgate_transfers_tests" > "$OUT/unit.txt" 2>&1; echo "unit rc=$?"; tail -4 "$OUT/unit.txt"

if [ "${TRANSFERS_NCCL_VARIANTS:-0}" = 1 ]; then
  # NCCL point-to-point settings beyond the defaults. Studied 2026-11-22 (records/transfers/h200x2_2026-11-22_nccl_variants.txt):
  # 32 p2p channels, 1-2 MiB NVLink chunks: no change. Here: the copy engine for p2p, more threads per
  # channel, and both; the registered-buffer cases (sendrecv_registered) run in every variant.
  for v in "NCCL_PERFGATE_DEFAULTS=1" "NCCL_P2P_USE_CUDA_MEMCPY=1" "NCCL_NTHREADS=512" \
           "NCCL_P2P_USE_CUDA_MEMCPY=1 NCCL_P2P_NVL_CHUNKSIZE=2097152"; do
    echo "== variant: $v" >> "$OUT/variants.txt"
    env $v NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,REG timeout 90 "$BIN" \
      --benchmark_filter='transfers/nccl/(sendrecv|sendrecv_registered)/src:0/dst:1/bytes:268435456/' \
      --benchmark_repetitions=3 --benchmark_min_time=0.2 --benchmark_out=/tmp/variant.json \
      --benchmark_out_format=json > /tmp/variant.log 2>&1
    echo "rc=$?" >> "$OUT/variants.txt"
    grep -E "NCCL INFO (Channel 00|.*[Pp]2p|.*[Rr]egist|NCCL_)" /tmp/variant.log | sort -u | head -12 >> "$OUT/variants.txt"
    python3 "$ROOT/benches/transfers/tools/summarize.py" /tmp/variant.json | tail -2 >> "$OUT/variants.txt"
  done
  cat "$OUT/variants.txt" | grep -vE "NCCL INFO"
fi
MAIN="${1:-transfers/(h2d|d2h)/pinned/bytes:268435456/|transfers/d2d/gpu:0/bytes:268435456/|transfers/peer/(on|off)/(src:0/dst:1|src:1/dst:0|bidir/pair:0-1)/bytes:268435456/|transfers/(all_to_one|one_to_all)/.*/bytes:268435456/|transfers/nccl/}"
timeout 240 "$BIN" --benchmark_filter="$MAIN" --benchmark_repetitions=3 --benchmark_min_time=0.3 \
  --benchmark_out="$OUT/transfers_256MiB.json" --benchmark_out_format=json > "$OUT/console.txt" 2>&1
echo "main rc=$?"
if [ "${TRANSFERS_SWEEP:-1}" = 1 ]; then
  timeout 200 "$BIN" --benchmark_min_time=0.05 \
    --benchmark_out="$OUT/transfers_sweep.json" --benchmark_out_format=json >> "$OUT/console.txt" 2>&1
  echo "sweep rc=$?"
fi
python3 "$ROOT/benches/transfers/tools/summarize.py" "$OUT"/transfers_*.json | tee "$OUT/summary.txt"

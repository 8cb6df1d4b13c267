#!/usr/bin/env bash
# Builds and runs cudnn_moe_probe.cu against the cuDNN the machine has (the toolkit's, or a Python wheel's).
set -u
out=${1:-/tmp}
nvidia-smi --query-gpu=name,serial,clocks.max.sm --format=csv,noheader
# The newest cuDNN on the machine: the MoE grouped matmul needs 9.18 or later.
hdr=$(for h in $(find / -name cudnn_version.h -not -path "/proc/*" 2>/dev/null); do
  echo "$(awk '/define CUDNN_MINOR /{print $3}' "$h") $h"; done | sort -n | tail -1 | cut -d' ' -f2)
lib=$(ls "$(dirname "$hdr")/../lib"/libcudnn.so.9* /usr/lib/x86_64-linux-gnu/libcudnn.so.9* 2>/dev/null | head -1)
echo "cudnn header: $hdr"; echo "cudnn lib: $lib"
[ -n "$hdr" ] && grep -E "define CUDNN_(MAJOR|MINOR|PATCHLEVEL) " "$hdr"
[ -n "$lib" ] && ls "$(dirname "$lib")" | grep cudnn
inc=$(dirname "$hdr"); libdir=$(dirname "$lib")
[ -e "$libdir/libcudnn.so" ] || ln -sf "$lib" "$out/libcudnn.so"
nvcc -O2 -std=c++17 -arch=sm_90 -I"$inc" -o "$out/probe" "$(dirname "$0")/cudnn_moe_probe.cu" -L"$libdir" -L"$out" -lcudnn \
  -Xlinker -rpath="$libdir" || exit 1
export LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}"
# tokens experts problem (0 gate_up gather, 1 gate_up on permuted rows, 2 down), small first: each in its own process,
# so one engine's fault does not hide the others.
IFS=, ; for args in ${PROBE_CASES:-512 16 0,512 16 1,4096 256 1,4096 256 2}; do IFS=" "
  echo "== probe $args"; timeout 120 "$out/probe" $args 2>&1 | grep -v "NOT_SUPPORTED"
  echo "== probe $args, N-contiguous weights"; PROBE_N_MAJOR=1 timeout 120 "$out/probe" $args 2>&1 | grep -v "NOT_SUPPORTED"
done

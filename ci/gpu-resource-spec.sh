#!/usr/bin/env bash
# Writes a ctest resource specification (JSON, version 1.0) for this machine's GPUs to stdout or $1:
#   {"version":{"major":1,"minor":0},"local":[{"gpus":[{"id":"0","slots":1},{"id":"1","slots":1}]}]}
# GPU ids are CUDA device ordinals as the tests see them. Source, in order:
#   1. CUDA_VISIBLE_DEVICES when set (its entries are renumbered 0..n-1, as CUDA does; "" or -1 -> none)
#   2. `nvidia-smi -L` (one line per GPU)
#   3. none: an empty "gpus" list (ctest then reports GPU tests as not runnable: exclude -L gpu, or skip)
# Use:  ci/gpu-resource-spec.sh build/gpus.json && ctest --resource-spec-file build/gpus.json -L perf
# PERFGATE_GPU_SLOTS (default 1) sets slots per GPU: how many GPU tests may share one GPU at a time.
set -euo pipefail

slots="${PERFGATE_GPU_SLOTS:-1}"
case "$slots" in ''|*[!0-9]*|0) echo "gpu-resource-spec: PERFGATE_GPU_SLOTS must be a positive integer" >&2; exit 2;; esac

count=0
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ]; then
  devices="${CUDA_VISIBLE_DEVICES// /}"
  if [ -n "$devices" ] && [ "$devices" != "-1" ]; then
    IFS=',' read -r -a entries <<<"$devices"
    for e in "${entries[@]}"; do
      # CUDA stops at the first invalid entry (e.g. -1); mirror that.
      [ -z "$e" ] && break
      [ "$e" = "-1" ] && break
      count=$((count + 1))
    done
  fi
elif command -v nvidia-smi >/dev/null 2>&1; then
  count="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)"
fi

json='{"version":{"major":1,"minor":0},"local":[{"gpus":['
for ((i = 0; i < count; i++)); do
  [ "$i" -gt 0 ] && json+=','
  json+="{\"id\":\"$i\",\"slots\":$slots}"
done
json+=']}]}'

if [ $# -ge 1 ] && [ -n "$1" ]; then
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "$json" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
  echo "gpu-resource-spec: $count GPU(s) -> $1" >&2
else
  printf '%s\n' "$json"
fi

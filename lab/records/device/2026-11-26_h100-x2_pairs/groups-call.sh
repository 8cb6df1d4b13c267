#!/usr/bin/env bash
# One device call on a multi-GPU machine: one A/A session of the GPU suites' main job per GPU group, the groups
# at once (tools/record_gpu_groups.sh). 4 H200s: four one-GPU sessions; 4 H100s: two 2-GPU sessions; 2 GPUs: one.
#   devcalls/groups-call.sh TAG      env: AA_TIMEOUT (default 330)
set -uo pipefail
tag="$1"
n=$(nvidia-smi -L | grep -c '^GPU'); model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$n:$model" in
  4:*H200*) groups="0 1 2 3" ;;
  4:*) groups="0,1 2,3" ;;
  2:*) groups="0,1" ;;
  *) groups="0" ;;
esac
echo "$n x $model: groups $groups"
# shellcheck disable=SC2086
AA_TIMEOUT="${AA_TIMEOUT:-330}" bash tools/record_gpu_groups.sh "$OUT" "$tag" $groups
ls -la "$OUT"

# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are read by the scripts that source this file
# The lab's recorders' shared part (record_sessions.sh, record_gpu_evidence.sh, record_gpu_groups.sh): the
# product's build steps from ci/common.sh, plus the GPU suites, the stable benchmarks and session.txt.
# shellcheck source=ci/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../ci/common.sh"

# The suites that need a GPU: the GPU runners' main job (record_gpu_evidence.sh, record_gpu_groups.sh).
perfgate_gpu_suites="expert_gemm transfers streaming_prefetch"
# Issue 28's stable GPU benchmarks, where the device recorders plant slowdowns: the expert GEMM at DeepSeek-V3
# (uniform and Zipf routing), the pinned host copies, the device copy and the streaming steps.
perfgate_gpu_stable='^(expert_gemm/ffn/(per_expert|bucketed|overlap)/shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold'
perfgate_gpu_stable+='|transfers/((h2d|d2h)/pinned|d2d/gpu:0)/bytes:268435456'
perfgate_gpu_stable+='|streaming_prefetch/step/(serial|streamed/model:(balanced|compute_bound)/distance:1/slots:4)'
perfgate_gpu_stable+=')(/|$)'
# The 4-GPU class's main job: the multi-GPU suites, and the benchmarks of theirs where the recorders plant: the
# pinned host copies, the device copy, every unidirectional peer copy, and expert_parallel's dispatch and combine
# over NCCL and both kernels, at 4096 tokens per GPU with uniform routing (their planted work: docs/transfers.md,
# docs/expert_parallel.md). The serial layers are left out: their level differs by 2-3% between hosts, more than
# the +2% planted, and their planted work did not come out at its nominal size (lab/results/h200-x4_class.md).
perfgate_gpu4_suites="transfers expert_parallel"
perfgate_gpu4_stable='^(transfers/((h2d|d2h)/pinned|d2d/gpu:0|peer/on/src:[0-9]+/dst:[0-9]+)/bytes:268435456'
perfgate_gpu4_stable+='|expert_parallel/(dispatch|combine)/(nccl|kernel|pull)/gpus:[0-9]+'
perfgate_gpu4_stable+='/tokens:4096/routing:uniform)(/|$)'

# session.txt of one recorded session (record_sessions.sh, record_gpu_evidence.sh), which
# import_records.py reads: when it started, the commit, its label and environment, its length, the load;
# on a GPU machine also the GPU's name and serial. Arguments: LABEL START SECONDS ENV.
perfgate_session_txt() {
  printf 'time=%s\ncommit=%s\nlabel=%s\nenv=%s\nseconds=%s\nload=%s\n' "$2" "$(perfgate_commit)" "$1" "$4" "$3" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  if [ "$(perfgate_gpu_count)" -gt 0 ]; then
    # the session's first GPU: CUDA's device 0, which CUDA_VISIBLE_DEVICES may map to another card
    local first="${CUDA_VISIBLE_DEVICES:-0}"
    printf 'gpu=%s\n' "$(nvidia-smi --query-gpu=name,serial --format=csv,noheader -i "${first%%,*}" | head -1)"
  fi
}

#!/usr/bin/env bash
# One device-tool call: the `overlap` variant (and `bucketed`, for the same GPU's reference) at DeepSeek-V3 x
# 4096 tokens, cold, uniform and Zipf, once per light-kernel setting, then one table of every setting. Run from
# the repository root with `.carry` in the carry list.
#
#   lab/tools/light_form_sweep.sh OUT REPETITIONS SETTING [SETTING ...]
#
# SETTING: CTAS:ROWS:FORM[:SERIAL], e.g. 52:64:0 (the defaults: 52 light CTAs, experts of <= 64 rows, the
# default form) or 66:128:6:0 (form 6, concurrent). SERIAL 1 runs the light kernel and cuBLAS one after the
# other (each part timed alone) with no cuBLAS SM target. The raw JSON and console files end up in OUT/sweep.tgz,
# the tables in OUT/sweep-rows.md and OUT/reference-rows.md (the first setting's rows, `bucketed` included).
set -uo pipefail
out="${1:?usage: light_form_sweep.sh OUT REPETITIONS SETTING...}"
reps="${2:?usage: light_form_sweep.sh OUT REPETITIONS SETTING...}"
shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$out"
variants='overlap|bucketed'
jsons=()
for setting in "$@"; do
  IFS=: read -r ctas rows form serial <<< "$setting"
  serial="${serial:-0}"
  tag="c${ctas}-r${rows}-f${form}-s${serial}"
  envs=(--env "PERFGATE_EXPERT_GEMM_LIGHT_CTAS=$ctas" --env "PERFGATE_EXPERT_GEMM_LIGHT_ROWS=$rows"
        --env "PERFGATE_EXPERT_GEMM_LIGHT_FORM=$form" --env "PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL=$serial")
  [ "$serial" = 1 ] && envs+=(--env PERFGATE_EXPERT_GEMM_HEAVY_SMS=-1)
  "$root/lab/tools/device-run.sh" "$out" --suite expert_gemm --no-tests --repetitions "$reps" --min-time 0.3 \
    --cases "^expert_gemm/(calibration|ffn/($variants)/shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold/)" \
    "${envs[@]}" --tag "$tag" 2>&1 | grep -E "measure expert_gemm exit|rror"
  jsons+=("$out/expert_gemm-$tag.json")
  variants='overlap'  # bucketed once, with the first setting
done
python3 "$root/lab/tools/light_probe_rows.py" "${jsons[@]}" | sed "s|$out/||" | tee "$out/sweep-rows.md"
python3 "$root/lab/tools/ceiling_rows.py" "${jsons[0]}" > "$out/reference-rows.md" 2>&1 || true
# One archive for the raw files: the device tool brings back only a few files per call.
(cd "$out" && tar czf sweep.tgz expert_gemm-*.json expert_gemm-*-console.txt expert_gemm-*-stderr.txt \
  && rm -f expert_gemm-*.json expert_gemm-*-console.txt expert_gemm-*-stderr.txt)

#!/usr/bin/env bash
# One device-tool call: two sides of an expert_gemm A/B in alternating processes (A, B, A, B, ...), each with its
# own calibrations and 3 repetitions of 0.3 s; then one row per process and case (medians) and, per FFN case, the
# median difference B - A over the rounds of the GEMM-stage and of the whole-FFN % of roofline. Run from the
# repository root with `.carry` in the carry list.
#
#   lab/tools/env_ab.sh OUT ROUNDS FILTER NAME_A[:VAR=VALUE,...] NAME_B[:VAR=VALUE,...]
#
# A side is its environment; `{side}` in FILTER becomes the side's NAME, so that the sides can be variants. E.g.
#   lab/tools/env_ab.sh $OUT/sw 3 '^expert_gemm/(calibration|ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold/)' \
#     off:PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192 on:PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192,PERFGATE_EXPERT_GEMM_LIGHT_SWIGLU=1
#   lab/tools/env_ab.sh $OUT/ab 6 '^expert_gemm/(calibration|ffn/{side}/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold/)' \
#     overlap overlap_tma
# Writes OUT/ab-rows.md and OUT/raw.tgz (every process's JSON and stderr).
set -uo pipefail
out="${1:?usage: env_ab.sh OUT ROUNDS FILTER SIDE_A SIDE_B}"
rounds="${2:?usage}" filter="${3:?usage}" side_a="${4:?usage}" side_b="${5:?usage}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PERFGATE_BUILD_DIR:-/tmp/perfgate-device-build}"
mkdir -p "$out"
"$root/lab/tools/device-run.sh" "$out" --suite expert_gemm --no-tests --cases none > /dev/null 2>&1 \
  || { echo "env_ab: build failed (see $out/build.log)"; exit 1; }
for r in $(seq 1 "$rounds"); do
  for side in "$side_a" "$side_b"; do
    name="${side%%:*}" vars=()
    [ "$name" != "$side" ] && IFS=, read -ra vars <<< "${side#*:}"
    env "${vars[@]}" "$build/bin/bench_expert_gemm" --benchmark_filter="${filter//\{side\}/$name}" --benchmark_repetitions=3 \
      --benchmark_min_time=0.3 --benchmark_out="$out/r$r-$name.json" --benchmark_out_format=json > /dev/null 2> "$out/r$r-$name.stderr" \
      || echo "env_ab: round $r $name failed"
  done
done
python3 - "$out" "$rounds" "${side_a%%:*}" "${side_b%%:*}" <<'PY' | tee "$out/ab-rows.md"
import json, statistics, sys
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print("| process | variant | routing | ms | % FFN roofline | % GEMM-stage roofline | permute | gate_up | activation "
      "| down | SM MHz | light.swiglu |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
pct = {}  # (metric, side, round) -> that % of each FFN case, in the file's order
for r in range(1, rounds + 1):
    for side in (a, b):
        cases = [m for m in json.load(open(f"{out}/r{r}-{side}.json", encoding="utf-8"))["benchmarks"]
                 if m.get("aggregate_name") == "median" and "/ffn/" in m["name"]]
        for metric in ("pct.gemm_roofline", "pct.roofline"):
            pct[metric, side, r] = [m[metric] for m in cases]
        for m in cases:
            parts = m["name"].split("/")
            print(f"| r{r}-{side} | {parts[2]} | {parts[5].split(':')[1]} | {m['real_time']:.3f} | "
                  f"{m['pct.roofline']:.1f} | {m['pct.gemm_roofline']:.1f} | {m['phase.permute']:.3f} | "
                  f"{m['phase.gate_up']:.3f} | {m['phase.activation']:.3f} | {m['phase.down']:.3f} | "
                  f"{m['sm_clock_mhz']:.0f} | {m.get('light.swiglu', 0):.0f} |")
for metric, label in (("pct.gemm_roofline", "GEMM-stage"), ("pct.roofline", "whole-FFN")):
    for i in range(len(pct[metric, a, 1])):
        diffs = [pct[metric, b, r][i] - pct[metric, a, r][i] for r in range(1, rounds + 1)]
        print(f"\nFFN case {i + 1}, {label} difference ({b} - {a}), points: median {statistics.median(diffs):.2f}, "
              f"min {min(diffs):.2f}, max {max(diffs):.2f}, higher in {sum(d > 0 for d in diffs)} of {rounds} rounds")
PY
(cd "$out" && tar czf raw.tgz --remove-files r*-*.json r*-*.stderr build.log)

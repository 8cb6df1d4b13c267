#!/usr/bin/env bash
# One device-tool call: the same expert_gemm cases under two environments, in alternating processes (A, B, A, B,
# ...), each with its own calibrations and 3 repetitions of 0.3 s; then one row per process and case (medians).
# Run from the repository root with `.carry` in the carry list.
#
#   lab/tools/env_ab.sh OUT ROUNDS FILTER NAME_A[:VAR=VALUE,...] NAME_B[:VAR=VALUE,...]
#
# e.g. lab/tools/env_ab.sh $OUT/sw 3 '^expert_gemm/(calibration|ffn/overlap_tma/shape:deepseek-v3/tokens:4096/routing:uniform/mode:cold/)' \
#        off:PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192 on:PERFGATE_EXPERT_GEMM_LIGHT_ROWS=192,PERFGATE_EXPERT_GEMM_LIGHT_SWIGLU=1
# Writes OUT/ab-rows.md and OUT/raw.tgz (every process's JSON).
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
    env "${vars[@]}" "$build/bin/bench_expert_gemm" --benchmark_filter="$filter" --benchmark_repetitions=3 \
      --benchmark_min_time=0.3 --benchmark_out="$out/r$r-$name.json" --benchmark_out_format=json > /dev/null 2>&1 \
      || echo "env_ab: round $r $name failed"
  done
done
python3 - "$out" <<'PY' | tee "$out/ab-rows.md"
import glob, json, os, sys
out = sys.argv[1]
print("| process | variant | routing | ms | % FFN roofline | % GEMM-stage roofline | gate_up | activation | down | light.swiglu |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for path in sorted(glob.glob(f"{out}/r*-*.json")):
    for b in json.load(open(path, encoding="utf-8"))["benchmarks"]:
        if b.get("aggregate_name") != "median" or "/ffn/" not in b["name"]:
            continue
        parts = b["name"].split("/")
        print(f"| {os.path.basename(path)[:-5]} | {parts[2]} | {parts[5].split(':')[1]} | {b['real_time']:.3f} | "
              f"{b['pct.roofline']:.1f} | {b['pct.gemm_roofline']:.1f} | {b['phase.gate_up']:.3f} | "
              f"{b['phase.activation']:.3f} | {b['phase.down']:.3f} | {b.get('light.swiglu', 0):.0f} |")
PY
(cd "$out" && tar czf raw.tgz --remove-files r*-*.json build.log)

#!/usr/bin/env bash
# One device-tool call: two expert_gemm variants at DeepSeek-V3 x 4096 tokens, cold, in alternating processes
# (A, B, A, B, ...), each process with its own calibrations and 3 repetitions of 0.3 s; then the per-round table
# and the difference of the GEMM-stage % of roofline. Run from the repository root with `.carry` in the carry list.
#
#   lab/tools/variant_ab.sh OUT ROUNDS VARIANT_A VARIANT_B [ROUTING]
#
# ROUTING: zipf (default) or uniform. Writes OUT/ab-rows.md and OUT/raw.tgz (every process's JSON).
set -uo pipefail
out="${1:?usage: variant_ab.sh OUT ROUNDS VARIANT_A VARIANT_B [ROUTING]}"
rounds="${2:?usage}" a="${3:?usage}" b="${4:?usage}" routing="${5:-zipf}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PERFGATE_BUILD_DIR:-/tmp/perfgate-device-build}"
mkdir -p "$out"
"$root/lab/tools/device-run.sh" "$out" --suite expert_gemm --no-tests --cases none > /dev/null 2>&1 \
  || { echo "variant_ab: build failed (see $out/build.log)"; exit 1; }
for r in $(seq 1 "$rounds"); do
  for v in "$a" "$b"; do
    "$build/bin/bench_expert_gemm" \
      --benchmark_filter="^expert_gemm/(calibration|ffn/$v/shape:deepseek-v3/tokens:4096/routing:$routing/mode:cold/)" \
      --benchmark_repetitions=3 --benchmark_min_time=0.3 --benchmark_out="$out/r$r-$v.json" \
      --benchmark_out_format=json > /dev/null 2>&1 || echo "variant_ab: round $r $v failed"
  done
done
python3 - "$out" "$rounds" "$a" "$b" <<'PY' | tee "$out/ab-rows.md"
import json, statistics, sys
out, rounds, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"| round | {a} GEMM % | {b} GEMM % | {a} FFN % | {b} FFN % | {a} MHz | {b} MHz |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
diffs = []
for r in range(1, rounds + 1):
    row = []
    for v in (a, b):
        doc = json.load(open(f"{out}/r{r}-{v}.json", encoding="utf-8"))
        m = next(x for x in doc["benchmarks"] if x.get("aggregate_name") == "median" and "/ffn/" in x["name"])
        row.append((m["pct.gemm_roofline"], m["pct.roofline"], m["sm_clock_mhz"]))
    diffs.append(row[1][0] - row[0][0])
    print(f"| {r} | {row[0][0]:.1f} | {row[1][0]:.1f} | {row[0][1]:.1f} | {row[1][1]:.1f} | {row[0][2]:.0f} | {row[1][2]:.0f} |")
print(f"\nGEMM-stage difference ({b} - {a}), points: median {statistics.median(diffs):.2f}, min {min(diffs):.2f}, "
      f"max {max(diffs):.2f}, higher in {sum(d > 0 for d in diffs)} of {len(diffs)} rounds")
PY
(cd "$out" && tar czf raw.tgz --remove-files r*-*.json build.log)

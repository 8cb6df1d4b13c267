#!/usr/bin/env bash
# Builds and measures the expert_gemm suite on a lent GPU machine in one go (see docs/expert_gemm.md).
# Usage (repository root, after `source ci/device-env.sh`): benches/expert_gemm/run_on_device.sh OUTDIR
# Builds from a minimal source tree (top-level CMake + benches/support + this suite) so that work in
# progress elsewhere in the checkout cannot break this build.
set -uo pipefail
out="${1:?output directory}"
root="$(pwd)"
tree=/tmp/expert_gemm_tree
rm -rf "$tree" && mkdir -p "$tree/harness" "$tree/benches"
sed '/PerfgateInstall/d' "$root/CMakeLists.txt" > "$tree/CMakeLists.txt"
ln -s "$root/cmake" "$tree/cmake"
: > "$tree/harness/CMakeLists.txt"
cp "$root/benches/CMakeLists.txt" "$tree/benches/"
ln -s "$root/benches/support" "$tree/benches/support"
ln -s "$root/benches/expert_gemm" "$tree/benches/expert_gemm"
build=/tmp/expert_gemm_build
cmake -S "$tree" -B "$build" -DCMAKE_PREFIX_PATH="${PERFGATE_DEPS_PREFIX:-}" -DPERFGATE_WITH_ONEDNN=OFF \
      -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
cmake --build "$build" --target bench_expert_gemm expert_gemm_tests -j16 >> "$out/build.log" 2>&1 \
  || { grep -E "error|Error" "$out/build.log" | head -30; exit 1; }
echo "== build ok"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total,driver_version --format=csv
bench="$build/bin/bench_expert_gemm"

if [ "${MODE:-main}" = overlap ]; then
  # The overlap variant beside bucketed / bucketed_streams (DeepSeek-V3, 4096 tokens, cold, 3 repetitions),
  # then a sweep of its light-kernel CTA count and light-row threshold (zipf, 1 repetition each), and
  # the light kernel alone (serial) for its bandwidth.
  echo "== unit tests (overlap)"
  "$build/benches/expert_gemm/expert_gemm_tests" --gtest_filter="${UNIT_FILTER:-*overlap*:*bucketed*}" > "$out/unit.log" 2>&1
  rc=$?; echo "unit rc=$rc"; tail -4 "$out/unit.log"; [ $rc = 0 ] || exit 1
  summarize() {  # json files...
    python3 - "$@" <<'PY'
import json, sys, os
for path in sys.argv[1:]:
    tag = os.path.basename(path)[:-5]
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "median": continue
        elif b.get("repetitions", 1) > 1: continue
        c = lambda k: b.get(k, float("nan"))
        n = b["run_name"].replace("expert_gemm/", "").replace("shape:deepseek-v3/tokens:4096/", "")
        print(f"{tag[:22]:22s} {n[:44]:44s} {c('real_time'):7.3f}ms roof {c('pct.roofline'):5.1f} gemm {c('pct.gemm_roofline'):5.1f} "
              f"gu {c('phase.gate_up'):6.3f} dn {c('phase.down'):6.3f} L {c('light.gate_up_ms'):5.2f}/{c('light.down_ms'):5.2f} "
              f"H {c('heavy.gate_up_ms'):5.2f}/{c('heavy.down_ms'):5.2f} LGB {c('light.weight_gbps'):6.0f} form {c('light.form'):.0f} hs {c('heavy_sms'):.0f} clk {c('sm_clock_mhz'):.0f}")
PY
  }
  echo "== sweep (zipf, overlap)"
  mkdir -p /tmp/ov; rm -f /tmp/ov/*.json
  # OVERLAP_SWEEP: space-separated ctas,light_rows,serial[,light kernel form[,heavy SM target[,async]]]
  # tuples (form 0 = the default for the GPU; heavy SM target 0 = SMs - light CTAs, -1 = none; async 1 =
  # the wgmma forms leave one k-step of MMAs in flight, the default; 0 = they wait every k-step).
  for cfg in ${OVERLAP_SWEEP:-48,96,0 64,96,0 80,96,0 64,64,0 64,128,0 64,96,1 132,96,1}; do
    IFS=, read -r s_ctas s_rows s_serial s_form s_heavy s_async <<< "$cfg"
    set -- "$s_ctas" "$s_rows" "$s_serial" "${s_form:-0}" "${s_heavy:-0}" "${s_async:-1}"
    PERFGATE_EXPERT_GEMM_LIGHT_CTAS=$1 PERFGATE_EXPERT_GEMM_LIGHT_ROWS=$2 PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL=$3 \
      PERFGATE_EXPERT_GEMM_LIGHT_FORM=$4 PERFGATE_EXPERT_GEMM_HEAVY_SMS=$5 PERFGATE_EXPERT_GEMM_LIGHT_ASYNC=$6 \
      "$bench" --benchmark_filter="overlap/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold" \
      --benchmark_min_time=${SWEEP_MIN_TIME:-0.2}s --benchmark_format=json --benchmark_out="/tmp/ov/c$1_r$2_s$3_f$4_h$5_a$6.json" \
      --benchmark_out_format=json > /dev/null 2>> "$out/bench.err" || echo "cfg $cfg failed"
  done
  summarize /tmp/ov/*.json
  python3 -c "import json,glob,os; json.dump({os.path.basename(p)[:-5]: json.load(open(p)) for p in glob.glob('/tmp/ov/*.json')}, open('$out/sweep.json','w'), indent=1)"
  # BEST=auto: the main measurement runs overlap with the fastest concurrent configuration of the sweep.
  if [ "${BEST:-}" = auto ]; then
    BEST=$(python3 -c "
import json,glob,os
best=None
for p in glob.glob('/tmp/ov/*_s0_*.json'):
    for b in json.load(open(p))['benchmarks']:
        if 'error_occurred' in b: continue
        if best is None or b['real_time'] < best[0]: best=(b['real_time'], os.path.basename(p))
n=best[1][:-5].split('_'); print(','.join([n[0][1:], n[1][1:], n[3][1:], n[4][1:], n[5][1:]]))")
    echo "best sweep configuration: $BEST"
  fi
  if [ "${MAIN:-1}" = 1 ]; then
  echo "== main measurement"
  f='shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold'
  # Two processes, each with its own calibrations: the overlap settings (PERFGATE_EXPERT_GEMM_HEAVY_SMS
  # included) must not reach bucketed_streams, which reads the same variable differently.
  "$bench" --benchmark_filter="expert_gemm/calibration/|(bucketed|bucketed_streams)/$f" --benchmark_repetitions=3 \
     --benchmark_min_time=0.3s --benchmark_format=json --benchmark_out="$out/main.json" --benchmark_out_format=json \
     > /dev/null 2>> "$out/bench.err"; echo "bench rc=$?"; tail -3 "$out/bench.err"
  # BEST: ctas,light_rows[,form[,heavy SM target[,async]]]
  [ -n "${BEST:-}" ] && { IFS=, read -r b_ctas b_rows b_form b_heavy b_async <<< "$BEST"
    export PERFGATE_EXPERT_GEMM_LIGHT_CTAS=$b_ctas PERFGATE_EXPERT_GEMM_LIGHT_ROWS=$b_rows PERFGATE_EXPERT_GEMM_LIGHT_FORM=${b_form:-0} \
      PERFGATE_EXPERT_GEMM_HEAVY_SMS=${b_heavy:-0} PERFGATE_EXPERT_GEMM_LIGHT_ASYNC=${b_async:-1}
    echo "overlap with light CTAs $b_ctas, light rows <= $b_rows, form ${b_form:-0} (0 = default), heavy SM target ${b_heavy:-0} (0 = SMs - light CTAs, -1 = none), async ${b_async:-1}"; }
  "$bench" --benchmark_filter="expert_gemm/calibration/|overlap/$f" --benchmark_repetitions=3 \
     --benchmark_min_time=0.3s --benchmark_format=json --benchmark_out="$out/main_overlap.json" --benchmark_out_format=json \
     > /dev/null 2>> "$out/bench.err"; echo "bench rc=$?"; tail -3 "$out/bench.err"
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
  summarize "$out/main.json" "$out/main_overlap.json"
  fi
  if [ "${NCU:-0}" = 1 ]; then
    echo "== ncu of the light kernel (serial, 64 CTAs, light rows 96)"
    PERFGATE_EXPERT_GEMM_LIGHT_CTAS=64 PERFGATE_EXPERT_GEMM_OVERLAP_SERIAL=1 timeout 150 ncu --clock-control none \
      -k regex:light_gemm --launch-skip 30 -c 2 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy "$bench" --benchmark_filter="overlap/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold" \
      --benchmark_min_time=0.05s > "$out/ncu.txt" 2>&1; echo "ncu rc=$?"
    grep -E "light_gemm|Duration|Throughput|Stall|Issued|Eligible|Registers|Warp Cycles|Active Warps|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" "$out/ncu.txt" | head -60
  fi
  exit 0
fi

if [ "${MODE:-main}" = sweep ]; then
  # Bucket / stream settings on DeepSeek-V3, 4096 tokens, cold; one process per setting.
  echo "== unit tests"
  "$build/benches/expert_gemm/expert_gemm_tests" > "$out/unit.log" 2>&1; echo "unit rc=$?"; tail -3 "$out/unit.log"
  f='shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold'
  run() {  # tag, filter, env...
    local tag=$1 flt=$2; shift 2
    env "$@" "$bench" --benchmark_filter="$flt" --benchmark_repetitions=3 --benchmark_min_time=0.2s \
      --benchmark_format=json --benchmark_out="/tmp/sweep_$tag.json" --benchmark_out_format=json >/dev/null 2>>"$out/bench.err"
    echo "$tag rc=$?"
  }
  run g8 "bucketed/$f" PERFGATE_EXPERT_GEMM_GRANULE=8
  run g16 "bucketed/$f" PERFGATE_EXPERT_GEMM_GRANULE=16
  run g64 "bucketed/$f" PERFGATE_EXPERT_GEMM_GRANULE=64
  run c256 "bucketed.*/${f/uniform|/}" PERFGATE_EXPERT_GEMM_CHUNK_ROWS=256
  run c512 "bucketed/${f/uniform|/}" PERFGATE_EXPERT_GEMM_CHUNK_ROWS=512
  run hsnone "bucketed_streams/${f/uniform|/}" PERFGATE_EXPERT_GEMM_HEAVY_SMS=-1
  run hs110 "bucketed_streams/${f/uniform|/}" PERFGATE_EXPERT_GEMM_HEAVY_SMS=110
  python3 - "$out/sweep.json" /tmp/sweep_*.json <<'PY'
import json, sys, os
merged = {}
for path in sys.argv[2:]:
    tag = os.path.basename(path)[6:-5]
    d = json.load(open(path))
    merged[tag] = d
    for b in d["benchmarks"]:
        if b.get("aggregate_name") != "median": continue
        c = lambda k: b.get(k, float("nan"))
        print(f"{tag:7s} {b['run_name'][15:80]:65s} {c('real_time'):7.3f}ms roof {c('pct.roofline'):5.1f} gemm {c('pct.gemm_roofline'):5.1f} "
              f"gu {c('phase.gate_up'):6.3f} dn {c('phase.down'):6.3f} pad {c('rows.padding_factor'):5.3f} hs {c('heavy_sms'):.0f} clk {c('sm_clock_mhz'):.0f}")
json.dump(merged, open(sys.argv[1], "w"), indent=1)
PY
  exit 0
fi

echo "== unit tests"
"$build/benches/expert_gemm/expert_gemm_tests" > "$out/unit.log" 2>&1; echo "unit rc=$?"; tail -4 "$out/unit.log"

echo "== main measurement"
filter='expert_gemm/calibration/|shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold|shape:small/tokens:32/routing:zipf/mode:cold|shape:deepseek-v3/tokens:32/routing:uniform/mode:hot'
"$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_min_time=0.3s \
         --benchmark_format=json --benchmark_out="$out/expert_gemm_h200.json" --benchmark_out_format=json \
         > /dev/null 2> "$out/bench.err"; echo "bench rc=$?"; tail -5 "$out/bench.err"
python3 - "$out/expert_gemm_h200.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    n = b["run_name"].replace("expert_gemm/", "")
    c = lambda k: b.get(k, float("nan"))
    print(f"{n[:78]:78s} {c('real_time'):8.3f}ms roof {c('pct.roofline'):5.1f}% gemm {c('pct.gemm_roofline'):5.1f}% "
          f"gu {c('phase.gate_up'):6.3f} dn {c('phase.down'):6.3f} mm {c('tokens_per_expert.max_over_mean'):5.1f} "
          f"TF {c('TFLOP/s'):6.1f} GB {c('GB/s'):7.1f} hs {c('heavy_sms'):.0f} thr {c('throttled'):.0f}")
PY

echo "== heavy-SM sweep (bucketed_streams, zipf)"
for sms in ${HEAVY_SMS_SWEEP:-44 88}; do
  PERFGATE_EXPERT_GEMM_HEAVY_SMS=$sms "$bench" --benchmark_filter='bucketed_streams/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold' \
     --benchmark_min_time=0.3s --benchmark_format=json 2>/dev/null \
   | python3 -c "import json,sys; b=json.load(sys.stdin)['benchmarks'][0]; print('heavy_sms', $sms, round(b['real_time'],3), 'ms gemm', round(b['pct.gemm_roofline'],1), 'roof', round(b['pct.roofline'],1))"
done

echo "== ncu NVTX check"
PERFGATE_EXPERT_GEMM_GRAPHS=0 timeout 120 ncu --nvtx --nvtx-include "Expert_Forward/" --clock-control none -c 12 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    "$bench" --benchmark_filter='bucketed/shape:small/tokens:512/routing:zipf/mode:hot' --benchmark_min_time=0.01s \
    > "$out/ncu.txt" 2>&1; echo "ncu rc=$?"
grep -E "^  [a-zA-Z_].*\(|NVTX|Expert_Forward|Linear|gpu__time|dram__" "$out/ncu.txt" | head -40

#!/usr/bin/env bash
# One device-tool call: build perfgate and bench_expert_gemm, then measure where a GPU bench process's
# time goes (lab/results/expert_gemm-notebook.md, "Process cost") and what the GPU ran at during the gated cases
# (clock, power, throttle reasons; lab/results/expert_gemm-notebook.md, "Clocks and power").
# Usage (repository root, carry [".carry"]): source ci/device-env.sh && lab/tools/device-process-cost.sh "$OUT" [TAG]
# STEPS (default "profile clocks ab") picks the parts ("unit": expert_gemm_tests; "gate": a filtered
# `perfgate run` of expert_gemm and transfers against baselines/; "baseline": record this machine class's
# expert_gemm baseline over the suite's GATE_FILTER into OUT/baselines/); TARGETS adds build targets;
# BUILD_DIR reuses a build; AB_AFTER_ENV=KEY=VALUE goes to the after side of step "ab" (default: A/A).
set -uo pipefail
out="${1:?output folder}"
tag="${2:-now}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-/tmp/perfgate-cost-$tag}"
log="$out/cost-$tag.log"
stamp() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(stamp)"; }
# report_step NAME TITLE SECONDS PATTERN LINES ARGS...: `perfgate ARGS` (at most SECONDS) with its Markdown
# report as /tmp/NAME-TAG/NAME.md, kept as OUT/NAME-TAG.md; logs TITLE with the exit status and wall time,
# and the report's first LINES lines that match PATTERN.
report_step() {
  local name="$1" title="$2" seconds="$3" pattern="$4" lines="$5"
  shift 5
  local t rc
  t=$(stamp)
  timeout "$seconds" "$build/bin/perfgate" "$@" --report-dir "/tmp/$name-$tag" --report-name "$name" --quiet \
    > "/tmp/$name-$tag.out" 2>&1
  rc=$?
  echo "[$tag] $title: exit $rc, $(since "$t") s wall" | tee -a "$log"
  grep -E "$pattern" "/tmp/$name-$tag/$name.md" | head -"$lines" | tee -a "$log"
  cp "/tmp/$name-$tag/$name.md" "$out/$name-$tag.md" 2> /dev/null
}

t0=$(stamp)
if [ ! -x "$build/bin/bench_expert_gemm" ]; then
  tests=OFF; [[ " ${TARGETS:-} " == *" expert_gemm_tests "* ]] && tests=ON
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPERFGATE_BUILD_TESTS=$tests -DPERFGATE_WITH_ONEDNN=OFF \
        -DCMAKE_PREFIX_PATH="${PERFGATE_DEPS_PREFIX:-}" -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build-$tag.log" 2>&1 \
    || { tail -30 "$out/build-$tag.log"; exit 1; }
  cmake --build "$build" --target perfgate bench_expert_gemm ${TARGETS:-} -j"${JOBS:-16}" >> "$out/build-$tag.log" 2>&1 \
    || { grep -E "error" "$out/build-$tag.log" | head -30; exit 1; }
fi
echo "[$tag] build: $(since "$t0") s" | tee -a "$log"
bench="$build/bin/bench_expert_gemm"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,driver_version --format=csv,noheader | tee -a "$log"
f='shape:deepseek-v3/tokens:4096/routing:(uniform|zipf)/mode:cold'
four="^expert_gemm/ffn/(bucketed|per_expert)/$f(/|\$)"
one='^expert_gemm/ffn/bucketed/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold(/|$)'
steps=" ${STEPS:-profile clocks ab} "

if [[ $steps == *" unit "* ]]; then
  t=$(stamp)
  "$build/benches/expert_gemm/expert_gemm_tests" > /tmp/unit-$tag.log 2>&1
  rc=$?
  echo "[$tag] expert_gemm_tests: exit $rc, $(since "$t") s; $(grep -E "PASSED|FAILED" /tmp/unit-$tag.log | tr '\n' ' ')" | tee -a "$log"
fi

if [[ $steps == *" profile "* ]]; then
  for what in context list; do
    t=$(stamp)
    if [ $what = context ]; then "$bench" --perfgate_context_only > /dev/null; else "$bench" --benchmark_list_tests --benchmark_filter="$four" > /dev/null; fi
    echo "[$tag] process --$what: $(since "$t") s wall" | tee -a "$log"
  done
  # As perfgate runs a bench: repetitions interleaved, 5 x 0.1 s, JSON out.
  for filter in "$one" "$one" "$four"; do
    t=$(stamp)
    PERFGATE_SETUP_PROFILE=1 "$bench" --benchmark_filter="$filter" --benchmark_repetitions=5 --benchmark_min_time=0.1 \
      --benchmark_enable_random_interleaving=true --benchmark_format=json --benchmark_out=/tmp/cost.json \
      --benchmark_out_format=json > /dev/null 2> /tmp/cost.err
    rc=$?
    echo "[$tag] process $filter: $(since "$t") s wall, exit $rc" | tee -a "$log"
    grep "setup profile" /tmp/cost.err | tee -a "$log"
    python3 - /tmp/cost.json <<'PY' | tee -a "$log"
import json, sys
b = [x for x in json.load(open(sys.argv[1]))["benchmarks"] if x.get("run_type") == "iteration"]
t = sum(x["real_time"] * x["iterations"] for x in b) / 1e3
print(f"  {len(b)} repetitions, timed GPU work {t:.2f} s")
PY
  done
fi

if [[ $steps == *" clocks "* ]]; then
  # Clock, power and throttle reasons during the gated DeepSeek-V3 cases and the calibrations.
  "$bench" --benchmark_filter="^expert_gemm/(calibration/|ffn/(per_expert|bucketed|bucketed_streams|overlap)/$f(/|\$))" \
    --benchmark_repetitions=3 --benchmark_min_time=0.3 --benchmark_format=json --benchmark_out="$out/clocks-$tag.json" \
    --benchmark_out_format=json > /dev/null 2>> "$log"
  python3 - "$out/clocks-$tag.json" <<'PY' | tee -a "$log"
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    c = lambda k: b.get(k, float("nan"))
    n = b["run_name"].replace("expert_gemm/", "").replace("shape:deepseek-v3/tokens:4096/", "").replace("/manual_time", "")
    print(f"{n[:48]:48s} {c('real_time'):8.3f} ms gemm% {c('pct.gemm_roofline'):5.1f} roof% {c('pct.roofline'):5.1f} "
          f"clk {c('sm_clock_mhz'):6.0f} min {c('sm_clock_mhz_min'):5.0f} W {c('power_w'):5.0f}/{c('power_limit_w'):4.0f} "
          f"max {c('power_w_max'):4.0f} thr {c('throttled_share'):4.2f} cap {c('power_capped_share'):4.2f} "
          f"therm {c('thermal_share'):4.2f} n {c('nvml_samples'):4.0f}")
PY
fi

if [[ $steps == *" ab "* ]]; then
  # AB_AFTER_ENV=KEY=VALUE sets the after side apart, e.g. a planted PERFGATE_GPU_SLOWDOWN; without it, A/A.
  after=(); what="A/A"
  if [ -n "${AB_AFTER_ENV:-}" ]; then after=(--after-env "$AB_AFTER_ENV"); what="$AB_AFTER_ENV in the after side"; fi
  report_step ab "perfgate ab, 4 benchmarks x 5 rounds ($what)" 400 "^\*\*perfgate|ab: |adaptive|measured" 8 \
    ab --before "$build" --after "$build" --suite expert_gemm --filter "$four" --rounds 5 "${after[@]}"
fi
if [[ $steps == *" gate "* ]]; then
  # A filtered run against the stored baselines: one expert_gemm case (the rest of its baseline is "not
  # selected"), and the host copies of transfers (pageable ones are host-dependent: informational).
  report_step gate "filtered perfgate run vs stored baselines" 300 \
    "^## perfgate|not selected|host-dependent benchmark|^\| [0-9]+ \|" 20 \
    run --bench "$build/bin/bench_expert_gemm" --bench "$build/bin/bench_transfers" \
    --filter "$one|^transfers/(h2d|d2h)/(pageable|pinned|mapped)/" --rounds 3 --repetitions 5 --min-time 0.1 \
    --baseline-dir "$root/baselines"
fi
if [[ $steps == *" baseline "* ]]; then
  t=$(stamp)
  timeout 400 "$build/bin/perfgate" run --bench "$bench" --filter "$(cat "$build/suites/expert_gemm.gate_filter")" \
    --rounds 3 --repetitions 5 --min-time 0.1 --update-baseline --baseline-dir "$out/baselines" \
    --report-dir /tmp/rec-$tag --report-name record --quiet > /tmp/rec-$tag.out 2>&1
  rc=$?
  echo "[$tag] expert_gemm baseline recorded: exit $rc, $(since "$t") s; $(ls "$out"/baselines/*/)" | tee -a "$log"
  tail -3 /tmp/rec-$tag.out | tee -a "$log"
fi
echo "[$tag] total: $(since "$t0") s" | tee -a "$log"

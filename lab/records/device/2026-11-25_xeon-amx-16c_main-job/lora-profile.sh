# One lora_backward gate process on the AMX host, with PERFGATE_SETUP_PROFILE=1 and time-stamped stderr.
source ci/device-env.sh; source ci/common.sh
perfgate_configure build/lb -DPERFGATE_BUILD_TESTS=OFF > $OUT/configure.log 2>&1
s=$(date +%s); cmake --build build/lb --target bench_lora_backward --parallel 16 > $OUT/build.log 2>&1; echo "build rc=$? $(( $(date +%s) - s ))s"
filter="$(cat build/lb/suites/lora_backward.gate_filter)"
s=$(date +%s)
PERFGATE_SETUP_PROFILE=1 build/lb/bin/bench_lora_backward --benchmark_filter="$filter" --benchmark_repetitions=5 --benchmark_min_time=0.1 \
  --benchmark_enable_random_interleaving=true --benchmark_out=$OUT/lora-gate.json --benchmark_out_format=json 2>&1 >/dev/null \
  | while IFS= read -r l; do printf '%s %s\n' "$(( $(date +%s) - s ))" "$l"; done > $OUT/lora-profile.log
echo "process wall $(( $(date +%s) - s ))s"; grep -E "setup profile" $OUT/lora-profile.log; free -g | head -2

source ci/device-env.sh
MODE=overlap UNIT_FILTER='-*' OVERLAP_SWEEP="52,64,0,0,0,0 52,64,0,0,0,1 52,64,0,0,0,0 52,64,0,0,0,1 48,64,0 56,64,0 52,56,0" BEST=52,64,0,0,1 SWEEP_MIN_TIME=0.3 bash benches/expert_gemm/run_on_device.sh $OUT 2>&1 | grep -E "^c5|^c4|overlap|best|rc=" 
b=/tmp/expert_gemm_build/bin/bench_expert_gemm
for tag in sync:0 async:1 sync2:0; do
  PERFGATE_EXPERT_GEMM_LIGHT_CTAS=52 PERFGATE_EXPERT_GEMM_LIGHT_ROWS=64 PERFGATE_EXPERT_GEMM_LIGHT_ASYNC=${tag#*:} $b --benchmark_filter='expert_gemm/calibration/|overlap/shape:deepseek-v3/tokens:4096/routing:zipf/mode:cold' --benchmark_repetitions=3 --benchmark_min_time=0.3s --benchmark_format=json --benchmark_out=$OUT/main_overlap_${tag%:*}.json --benchmark_out_format=json >/dev/null 2>>$OUT/bench.err; echo "$tag rc=$?"
done
python3 - $OUT/main_overlap*.json <<'PY'
import json,sys,os
for f in sys.argv[1:]:
    for b in json.load(open(f))['benchmarks']:
        if b.get('aggregate_name')=='median' and 'ffn' in b['name']:
            g=lambda k: b.get(k,float('nan'))
            print(os.path.basename(f)[:24].ljust(24), b['name'].split('routing:')[1][:12], f"{g('real_time'):.3f} gemm {g('pct.gemm_roofline'):.1f} ffn {g('pct.roofline'):.1f} L {g('light.gate_up_ms'):.2f}/{g('light.down_ms'):.2f} H {g('heavy.gate_up_ms'):.2f}/{g('heavy.down_ms'):.2f} clk {g('sm_clock_mhz'):.0f}")
PY

# One device call: build lora_marginal and the unit test, check the kernels (bf16 gradients included), then the
# LoRA's marginal cost of the default fused2 with fp32 gradients (cfg ci) and with bf16 ones (ci+grads=bf16), on
# CPUs 2,3 and 4,5 at once, in crossed order (2,3: fp32 then bf16; 4,5: bf16 then fp32), so that a drift of the host
# over the call falls on both configs. Usage: bash run.sh PROCESSES SECONDS
set -e
P=${1:-3}; S=${2:-30}
source ci/device-env.sh
source ci/common.sh
(date -u; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)|Model:"; cat /proc/loadavg) > $OUT/machine.txt 2>&1
perfgate_configure /tmp/b -DPERFGATE_WITH_CUDA=OFF > $OUT/build.log 2>&1
cmake --build /tmp/b --target lora_marginal lora_backward_test -j16 >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
/tmp/b/benches/lora_backward/lora_backward_test --gtest_filter='*Fused*:*Bf16*' > $OUT/unit.txt 2>&1 || { tail -40 $OUT/unit.txt; exit 1; }
tail -3 $OUT/unit.txt
T=benches/lora_backward/tools/marginal_cost.py
A="--processes $P --seconds $S --side default"
pair() {  # CPUS FIRST SECOND
  for c in "$2" "$3"; do
    local name="c${1/,/}-${c//[+=]/_}"  # the files under $OUT come back only with plain names
    python3 $T /tmp/b/bin/lora_marginal $A --cpus "$1" --config "$c" --json-dir "/tmp/m/$name" > "$OUT/sum-$name.txt" 2>&1
  done
}
pair 2,3 ci ci+grads=bf16 &
pair 4,5 ci+grads=bf16 ci &
wait
(date -u; cat /proc/loadavg) >> $OUT/machine.txt
tar czf $OUT/json.tgz -C /tmp/m .
grep -v "^process" $OUT/sum-*.txt

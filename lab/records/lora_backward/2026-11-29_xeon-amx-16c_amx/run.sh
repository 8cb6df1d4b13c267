# One device call: build lora_marginal and the unit test, check the AMX kernel, then the LoRA's marginal cost of
# the sides in SIDES on CPUs 2,3 and 4,5 at once. Usage: SIDES="--side default --side ..." bash run.sh PROCESSES SECONDS
set -e
P=${1:-3}; S=${2:-50}
source ci/device-env.sh
source ci/common.sh
(date -u; nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)|Model:"; cat /proc/loadavg) > $OUT/machine.txt 2>&1
perfgate_configure /tmp/b -DPERFGATE_WITH_CUDA=OFF > $OUT/build.log 2>&1
cmake --build /tmp/b --target lora_marginal lora_backward_test -j16 >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
/tmp/b/benches/lora_backward/lora_backward_test --gtest_filter='*Fused2*:*Fused*' > $OUT/unit.txt 2>&1 || { tail -40 $OUT/unit.txt; exit 1; }
tail -3 $OUT/unit.txt
T=benches/lora_backward/tools/marginal_cost.py
A="--processes $P --seconds $S ${SIDES:---side default --side vdpbf16:PERFGATE_LORA_FUSED2_VDPBF16}"
python3 $T /tmp/b/bin/lora_marginal $A --cpus 2,3 --json-dir /tmp/m/c23 > $OUT/sum-c23.txt 2>&1 &
python3 $T /tmp/b/bin/lora_marginal $A --cpus 4,5 --json-dir /tmp/m/c45 > $OUT/sum-c45.txt 2>&1 &
wait
(date -u; cat /proc/loadavg) >> $OUT/machine.txt
tar czf $OUT/json.tgz -C /tmp/m .
grep -v "^process" $OUT/sum-c23.txt $OUT/sum-c45.txt

set -e
export PERFGATE_GIT_COMMIT=c306492+cached-stores-knob
source ci/device-env.sh
source ci/common.sh
R=lab/records/lora_backward/2026-11-29_xeon-amx-16c_stores
(date -u; nvidia-smi -L; lscpu | head -25; cat /proc/loadavg) > $OUT/machine.txt 2>&1
perfgate_configure /tmp/b -DPERFGATE_BUILD_TESTS=OFF -DPERFGATE_WITH_CUDA=OFF > $OUT/build.log 2>&1
cmake --build /tmp/b --target lora_marginal -j16 >> $OUT/build.log 2>&1
gcc -O2 -mavx512f -fopenmp $R/write_bandwidth.c -o /tmp/wb
for c in 2,3 4,5; do for t in 1 2; do echo "CPUs $c, $t threads"; OMP_NUM_THREADS=$t taskset -c $c /tmp/wb 19; done; done > $OUT/write_bandwidth.txt 2>&1
cat $OUT/write_bandwidth.txt
T=benches/lora_backward/tools/marginal_cost.py
S="--processes 3 --seconds 50 --side default --side cached:PERFGATE_LORA_FUSED2_CACHED_STORES"
python3 $T /tmp/b/bin/lora_marginal $S --cpus 2,3 --json-dir /tmp/m/c23 > $OUT/sum-c23.txt 2>&1 &
python3 $T /tmp/b/bin/lora_marginal $S --cpus 4,5 --json-dir /tmp/m/c45 > $OUT/sum-c45.txt 2>&1 &
wait
(date -u; cat /proc/loadavg) >> $OUT/machine.txt
tar czf $OUT/json.tgz -C /tmp/m .
tail -8 $OUT/sum-c23.txt $OUT/sum-c45.txt

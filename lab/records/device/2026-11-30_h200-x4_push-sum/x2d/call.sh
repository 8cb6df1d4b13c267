# nvidia-h200-x2, fresh host x2d, 2026-11-30 19:02-19:04 UTC, tree 768fb2a (lab/records and baselines/ moved out of the tree)
export PERFGATE_GIT_COMMIT=768fb2a; source ci/device-env.sh; source ci/common.sh; nvidia-smi -L
perfgate_configure build/ep -DPERFGATE_BUILD_TESTS=ON && cmake --build build/ep --parallel 16 --target expert_parallel_tests bench_expert_parallel
$(find build/ep -name expert_parallel_tests -type f | head -1)
$(find build/ep -name bench_expert_parallel -type f | head -1) --benchmark_filter='expert_parallel/combine/(pull|push_sum)/gpus:2/tokens:4096/routing:(uniform|zipf)/' \
  --benchmark_repetitions=3 --benchmark_min_time=0.1s --benchmark_out=$OUT/combine.json --benchmark_out_format=json

#!/usr/bin/env bash
# expert_gemm's GPU tests, then the H200 class's main job (h200sN) at this tree.
#   export PERFGATE_GIT_COMMIT=<tree>; source ci/device-env.sh; bash call.sh $OUT h200s32
set -uo pipefail
out="$1"; tag="$2"
source ci/common.sh
mkdir -p "$out"
{ perfgate_configure build/eg -DPERFGATE_BUILD_TESTS=ON && cmake --build build/eg --parallel 16 --target expert_gemm_tests; } > "$out/tests-build.log" 2>&1 || { tail -30 "$out/tests-build.log"; exit 1; }
t=$(find build/eg -name expert_gemm_tests -type f | head -1)
timeout 120 "$t" > "$out/tests.txt" 2>&1; echo "== tests rc=$?"; tail -3 "$out/tests.txt"; grep -E "FAILED|SKIPPED" "$out/tests.txt" | head
AA_TIMEOUT=330 lab/tools/record_gpu_groups.sh "$out" "$tag" 0

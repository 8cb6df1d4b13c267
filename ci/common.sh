# Shared by ci/test.sh and ci/perf.sh: where to build and how to configure.
# PERFGATE_BUILD_DIR   build folder (default: build/ci for tests, build/perf for the main job)
# PERFGATE_CMAKE_ARGS  extra configure arguments, e.g. -DPERFGATE_WITH_ONEDNN=OFF on the GPU machines
# PERFGATE_DEPS_PREFIX a prefix with carried dependencies (simdjson, oneDNN) for machines without network
perfgate_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
perfgate_jobs="$(nproc 2>/dev/null || echo 2)"

# Compiler launchers for ccache when it is installed (PERFGATE_CCACHE=0 turns it off): a reference build
# of another revision (perf.sh --against) then recompiles only what differs.
perfgate_ccache_args() {
  if [ "${PERFGATE_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null 2>&1; then
    echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
  fi
}

perfgate_configure() {
  local build_dir="$1"; shift
  local prefix_args=()
  if [ -n "${PERFGATE_DEPS_PREFIX:-}" ]; then
    prefix_args+=("-DCMAKE_PREFIX_PATH=${PERFGATE_DEPS_PREFIX}")
  fi
  # shellcheck disable=SC2086
  cmake -S "$perfgate_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${prefix_args[@]}" $(perfgate_ccache_args) \
        "$@" ${PERFGATE_CMAKE_ARGS:-}
}

perfgate_build() {
  cmake --build "$1" --parallel "$perfgate_jobs"
}

# The commit a run is of: PERFGATE_GIT_COMMIT first, since a copied tree (a lent device machine's) may carry a
# stale .git.
perfgate_commit() {
  echo "${PERFGATE_GIT_COMMIT:-$(git -C "$perfgate_root" rev-parse HEAD 2>/dev/null || echo unknown)}"
}

perfgate_gpu_count() {
  if command -v nvidia-smi > /dev/null 2>&1; then nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true; else echo 0; fi
}

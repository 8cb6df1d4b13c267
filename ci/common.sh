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

# The CPUs this process may run on, one per line (sched affinity, e.g. under taskset).
perfgate_allowed_cpus() {
  local list range
  list="$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
  for range in ${list//,/ }; do
    if [[ "$range" == *-* ]]; then seq "${range%-*}" "${range#*-}"; else echo "$range"; fi
  done
}

# Default lanes for the relative gate's rounds (perfgate run --against-lanes, docs/running.md "Lanes"): two CPUs
# give two lanes of one CPU each; more give one lane per physical core, on its first allowed CPU with its
# siblings left idle, leaving out the first core for perfgate itself and the system, at most
# PERFGATE_MAX_LANES (default 8), since the lanes share the memory bandwidth. Prints nothing where fewer than two
# lanes would result. Arguments for tests: the sysfs cpu folder and the allowed CPUs (one per line).
perfgate_default_lanes() {
  local sys="${1:-/sys/devices/system/cpu}" allowed="${2:-$(perfgate_allowed_cpus)}"
  local max="${PERFGATE_MAX_LANES:-8}" cpu core lane_cpus=() first_core="" allowed_cpus=()
  local -A seen=()
  mapfile -t allowed_cpus <<< "$allowed"
  if [ "${#allowed_cpus[@]}" -eq 2 ]; then echo "${allowed_cpus[0]};${allowed_cpus[1]}"; return; fi
  for cpu in "${allowed_cpus[@]}"; do
    [ -n "$cpu" ] || continue
    core="$(cat "$sys/cpu$cpu/topology/physical_package_id" 2>/dev/null):$(cat "$sys/cpu$cpu/topology/core_id" 2>/dev/null)"
    [ -z "${seen[$core]:-}" ] || continue
    seen[$core]=1
    if [ -z "$first_core" ]; then first_core="$core"; continue; fi
    [ "${#lane_cpus[@]}" -lt "$max" ] && lane_cpus+=("$cpu")
  done
  [ "${#lane_cpus[@]}" -ge 2 ] || return 0
  (IFS=';'; echo "${lane_cpus[*]}")
}

# `-h` or `--help` among the arguments: prints the calling script's header comment (its usage) and exits 0, before
# any set-up or build.
perfgate_help_if_asked() {
  local script="$1"
  shift
  local a
  for a in "$@"; do
    if [ "$a" = -h ] || [ "$a" = --help ]; then
      sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$script"
      exit 0
    fi
  done
}

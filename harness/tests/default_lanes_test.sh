#!/usr/bin/env bash
# ci/common.sh perfgate_default_lanes against made-up CPU topologies (a fake sysfs folder): one lane per physical
# core, siblings idle, the first core left out, at most PERFGATE_MAX_LANES lanes; two CPUs give two lanes.
set -euo pipefail
source "${1:?repository root}/ci/common.sh"
sys="$(mktemp -d)"; trap 'rm -rf "$sys"' EXIT
fail=0
# make_topology N SIBLING_STRIDE: N CPUs on one package; CPU c is on core c % STRIDE (STRIDE = N/2: the Linux
# numbering of hyperthreads, CPU i and i+N/2 share a core) or c / 2 when STRIDE is 0 (siblings adjacent).
make_topology() {
  rm -rf "${sys:?}"/*; local n="$1" stride="$2" c
  for ((c = 0; c < n; c++)); do
    mkdir -p "$sys/cpu$c/topology"; echo 0 > "$sys/cpu$c/topology/physical_package_id"
    if [ "$stride" -eq 0 ]; then echo $((c / 2)); else echo $((c % stride)); fi > "$sys/cpu$c/topology/core_id"
  done
}
expect() {
  local what="$1" want="$2" got="$3"
  if [ "$got" != "$want" ]; then echo "FAIL: $what: want '$want', got '$got'"; fail=1; else echo "ok: $what: '$got'"; fi
}
make_topology 2 0
expect "two vCPUs of one core" "0;1" "$(perfgate_default_lanes "$sys" "$(seq 0 1)")"
make_topology 16 8
expect "16 CPUs, siblings i and i+8" "1;2;3;4;5;6;7" "$(perfgate_default_lanes "$sys" "$(seq 0 15)")"
make_topology 16 0
expect "16 CPUs, siblings adjacent" "2;4;6;8;10;12;14" "$(perfgate_default_lanes "$sys" "$(seq 0 15)")"
make_topology 64 32
expect "64 CPUs, capped at 8 lanes" "33;34;35;36;37;38;39;40" "$(perfgate_default_lanes "$sys" "$(seq 32 63)")"
expect "PERFGATE_MAX_LANES=3" "1;2;3" "$(PERFGATE_MAX_LANES=3 perfgate_default_lanes "$sys" "$(seq 0 63)")"
make_topology 4 0
expect "two cores: one lane is no lanes" "" "$(perfgate_default_lanes "$sys" "$(seq 0 3)")"
make_topology 1 0
expect "one CPU" "" "$(perfgate_default_lanes "$sys" "0")"
exit "$fail"

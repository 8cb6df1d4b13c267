# shellcheck shell=bash
# Sourced by the harness's scale scripts, first: strict mode, this folder and the repository root, the check
# for the tools they run, and the facts about the machine each prints before its figures (the docs quote
# them beside the numbers).
set -euo pipefail
bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench_root="$(cd "$bench_dir/../.." && pwd)"

# require_tools BUILD TOOL...: exits 2, naming the targets to build, when BUILD/bin/TOOL is missing for a TOOL.
require_tools() {
  local build="$1"
  shift
  local targets tool
  targets="$(printf ' and %s' "$@")"
  targets="${targets# and }"
  for tool in "$@"; do
    [[ -x "$build/bin/$tool" ]] || { echo "missing $build/bin/$tool: build targets $targets in $build" >&2; exit 2; }
  done
}

# The CPU model, the time (UTC) and the commit measured: "MODEL; 2026-11-25T16:30Z; commit abc1234".
machine_facts() {
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git -C "$bench_root" rev-parse --short HEAD)"
}

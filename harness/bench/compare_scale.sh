#!/usr/bin/env bash
# Harness performance benchmark (issue 2): `perfgate compare` on 10,000 benchmarks x 20 repetitions x
# 3 counters, both ~150 MB files loaded, must take < 2 s wall with peak RSS < 1 GiB on the 2-core
# project machine. Reproducible: the inputs come from make_large_json.py with fixed seeds.
#
#   harness/bench/compare_scale.sh [BUILD_DIR] [-- extra perfgate compare flags]
#
# BUILD_DIR defaults to build/release (it needs bin/perfgate and bin/perfgate_load_bench).
# Inputs are cached in ${PERFGATE_SCALE_DIR:-/tmp/perfgate_scale}. Runs the loader alone and the whole
# compare ${PERFGATE_SCALE_REPEAT:-3} times each with /usr/bin/time -v and prints wall + max RSS.
# Exit status: 0 when the median compare wall time and every max RSS meet the target, 1 otherwise.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/release}"
[[ $# -gt 0 ]] && shift
[[ "${1:-}" == "--" ]] && shift
extra=("$@")
work="${PERFGATE_SCALE_DIR:-/tmp/perfgate_scale}"
repeat="${PERFGATE_SCALE_REPEAT:-3}"
mkdir -p "$work"

for tool in "$build/bin/perfgate" "$build/bin/perfgate_load_bench"; do
  [[ -x "$tool" ]] || { echo "missing $tool: build targets perfgate and perfgate_load_bench in $build" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }

a="$work/big_a.json"
b="$work/big_b.json"
[[ -s "$a" ]] || python3 "$here/make_large_json.py" "$a" --seed 1
[[ -s "$b" ]] || python3 "$here/make_large_json.py" "$b" --seed 2 --slow-fraction 0.01 --slow-factor 1.10
echo "inputs: $(( $(stat -c %s "$a") / 1000000 )) MB + $(( $(stat -c %s "$b") / 1000000 )) MB (10,000 benchmarks x 20 repetitions x 3 counters each)"
# Warm the page cache: the target is about perfgate, not the disk.
cat "$a" "$b" > /dev/null

measure() {  # command... -> prints "wall_s max_rss_kb exit cpu_s"
  local log="$work/time.log"
  set +e
  /usr/bin/time -v "$@" > "$work/stdout.log" 2> "$log"
  local rc=$?
  set -e
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  cpu=$(awk -F': ' '/User time \(seconds\)/ {u=$2} /System time \(seconds\)/ {s=$2} END {printf "%.2f", u+s}' "$log")
  echo "$wall $rss $rc $cpu"
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

walls=()
ok=1
for i in $(seq 1 "$repeat"); do
  read -r wall rss rc cpu < <(measure "$build/bin/perfgate_load_bench" "$a" "$b")
  echo "loader only  (load both files)  run $i: wall ${wall} s, cpu ${cpu} s, max RSS $((rss / 1024)) MiB, exit $rc"
done
for i in $(seq 1 "$repeat"); do
  read -r wall rss rc cpu < <(measure "$build/bin/perfgate" compare "$a" "$b" --quiet --no-config \
                                       --json "$work/verdicts.json" --markdown "$work/report.md" "${extra[@]}")
  echo "perfgate compare               run $i: wall ${wall} s, cpu ${cpu} s, max RSS $((rss / 1024)) MiB, exit $rc"
  if [[ "$rc" != 0 && "$rc" != 1 ]]; then
    echo "compare failed (exit $rc):" >&2
    tail -5 "$work/time.log" >&2
    ok=0
  fi
  (( rss < 1048576 )) || ok=0
  walls+=("$wall")
done
echo "compare verdicts: $(grep -o '"summary": *"[^"]*"' "$work/verdicts.json" | head -1)"
median=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "median compare wall time: ${median} s (target < 2 s); peak RSS target < 1024 MiB"
awk -v m="$median" 'BEGIN { exit !(m < 2.0) }' || ok=0
if (( ok )); then echo "RESULT: target met"; exit 0; else echo "RESULT: target missed"; exit 1; fi

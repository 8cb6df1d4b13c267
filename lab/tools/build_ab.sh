#!/usr/bin/env bash
# One device-tool call: a code change of one suite judged by perfgate's own before/after comparison. Builds
# the working tree (the "after" side) with the suite's unit tests, then the "before" side by swapping in the
# files kept under BEFORE_DIR (repository paths: BEFORE_DIR/benches/<suite>/src/x.cu replaces
# benches/<suite>/src/x.cu) and rebuilding only the bench; then `perfgate ab` alternates the two binaries.
# Run from the repository root with `.carry` in the carry list.
#
#   lab/tools/build_ab.sh OUT SUITE BEFORE_DIR FILTER ROUNDS [perfgate ab options...]
#
# E.g. the files of the last commit as they were before it:
#   for f in $(git diff --name-only HEAD~1 -- benches/expert_gemm); do
#     mkdir -p "ab-before/$(dirname "$f")"; git show "HEAD~1:$f" > "ab-before/$f"; done
#   lab/tools/build_ab.sh $OUT expert_gemm ab-before '^expert_gemm/(calibration|ffn/bucketed/...)' 3 --threshold 0.01
# Writes OUT/after (build log, unit tests), OUT/ab (the report, its run files), OUT/ab-raw.tgz (every process's
# JSON) and OUT/steps.txt.
set -uo pipefail
out="${1:?usage: build_ab.sh OUT SUITE BEFORE_DIR FILTER ROUNDS [ab options]}"
suite="${2:?usage}" before_dir="${3:?usage}" filter="${4:?usage}" rounds="${5:?usage}"
shift 5
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${PERFGATE_BUILD_DIR:-/tmp/perfgate-device-build}"
bins=/tmp/perfgate-build-ab
mkdir -p "$out" "$bins/before" "$bins/after"
step() { echo "== $(date -u +%T) $*" | tee -a "$out/steps.txt"; }
[ -d "$before_dir" ] || { echo "build_ab: no folder '$before_dir'" >&2; exit 2; }
mapfile -t files < <(cd "$before_dir" && find . -type f | sed 's|^\./||')
[ ${#files[@]} -gt 0 ] || { echo "build_ab: '$before_dir' holds no files" >&2; exit 2; }

step "after: build and unit tests of $suite"
"$root/lab/tools/device-run.sh" "$out/after" --suite "$suite" --cases none || { step "after side failed"; exit 1; }
cp "$build/bin/bench_$suite" "$bins/after/"
step "perfgate"
cmake --build "$build" --target perfgate -j"$(nproc)" >> "$out/after/build.log" 2>&1 || { step "perfgate build failed"; exit 1; }

step "before: ${files[*]}"
for f in "${files[@]}"; do cp "$root/$f" "$bins/after-$(echo "$f" | tr / _)" && cp "$before_dir/$f" "$root/$f"; done
cmake --build "$build" --target "bench_$suite" -j"$(nproc)" > "$out/before-build.log" 2>&1
built=$?
for f in "${files[@]}"; do cp "$bins/after-$(echo "$f" | tr / _)" "$root/$f"; done
[ "$built" = 0 ] || { step "before side failed to build"; tail -20 "$out/before-build.log"; exit 1; }
cp "$build/bin/bench_$suite" "$bins/before/"

step "perfgate ab: $rounds rounds, $filter"
"$build/bin/perfgate" ab --before "$bins/before/bench_$suite" --after "$bins/after/bench_$suite" --filter "$filter" \
  --rounds "$rounds" --report-dir "$out/ab" --report-name ab-report "$@" 2> "$out/ab-stderr.txt"
rc=$?
step "perfgate ab exit $rc"
tar -czf "$out/ab-raw.tgz" -C "$out/ab" . 2> /dev/null
exit "$rc"

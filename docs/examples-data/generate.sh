#!/usr/bin/env bash
# Writes every generated example report in docs/ from the stored inputs beside this script, so that no example
# can go stale: ctest docs.examples runs it with --check and fails when a page differs from what it writes.
#
#   docs/examples-data/generate.sh PERFGATE           rewrite the pages (after a change to the reports)
#   docs/examples-data/generate.sh PERFGATE --check   exit 1 naming each page that differs, 0 when all match
#
# Each example is one `perfgate compare` of stored run files: docs/example-NAME.md is NAME.intro.md, a rule, and
# the full report; docs/example-NAME-summary.md is the summary of the same comparison (what a pull-request
# comment shows). Inputs: cpu/ (the cpu-epyc-avx512-2c baselines and two main-job sessions of that machine,
# one unchanged and one with a planted 10% slowdown; session.txt says when and at which commit) and gpu/ (the
# expert_gemm baselines of an H100 and an H200 machine as they were at commit b96ce18).
set -euo pipefail
perfgate="$(realpath "${1:?usage: generate.sh PERFGATE [--check]}")"
mode="${2:-write}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
data=docs/examples-data
out="$(mktemp -d /tmp/perfgate_examples_XXXXXX)"
trap 'rm -rf "$out"' EXIT

# example NAME EXPECTED_EXIT COMPARE_ARGS...
example() {
  local name="$1" expected="$2"
  shift 2
  local rc=0
  # Paths relative to the repository root, so that the pages do not depend on where the checkout lies.
  "$perfgate" compare "$@" -q --markdown "$out/report.md" --summary "$out/example-$name-summary.md" \
    --report-link "example-$name.md" --docs-link . || rc=$?
  if [ "$rc" != "$expected" ]; then
    echo "generate.sh: example $name: perfgate compare exited $rc, expected $expected" >&2
    exit 1
  fi
  { cat "$data/$name.intro.md"; printf '\n---\n\n'; cat "$out/report.md"; } > "$out/example-$name.md"
  rm "$out/report.md"
}

cpu=$data/cpu
cpu_baseline="$cpu/baseline/lora_backward.json,$cpu/baseline/synthetic.json"
example perf-report 0 --baseline "$cpu_baseline" --current "$cpu/aa01/lora_backward.current.json,$cpu/aa01/synthetic.current.json"
example report 1 --baseline "$cpu_baseline" \
  --current "$cpu/planted-p10/lora_backward.current.json,$cpu/planted-p10/synthetic.current.json"
example report-gpu 1 "$data/gpu/h100.expert_gemm.json" "$data/gpu/h200.expert_gemm.json" --allow-machine-mismatch

status=0
for page in "$out"/example-*.md; do
  target="docs/$(basename "$page")"
  if [ "$mode" = --check ]; then
    if ! cmp -s "$page" "$target"; then
      echo "generate.sh: $target differs from what docs/examples-data/generate.sh writes (run it to update):" >&2
      diff -u "$target" "$page" 2>&1 | head -20 >&2 || true
      status=1
    fi
  else
    cp "$page" "$target"
    echo "wrote $target"
  fi
done
exit $status

#!/usr/bin/env bash
# The lab's own tests, without a build: each lab/tools/test_*.py. .ci/run calls it after the product's CI
# has passed on a tree without lab/.
set -euo pipefail
lab="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
status=0
for t in "$lab"/tools/test_*.py; do
  echo "== $(basename "$t")"
  python3 "$t" || status=1
done
exit "$status"

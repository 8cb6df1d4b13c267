#!/bin/bash
# perfgate ab of a user's plain Google Benchmark binary (bm.cpp of ../2026-12-02_plain-binary-bisect): the after
# build doubles BM_Accumulate's work and measures BM_Sort at 32768 in place of 65536. Shows what the reports call
# the two sides, and where their glossary links lead (report in reports/ab/, summary in comment/).
#   bash run.sh PERFGATE_BIN WORK_DIR
set -u
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W"
bash "$here/build-two.sh"
echo '$ perfgate ab --before before/bm --after after/bm --rounds 3 --min-time 0.02 --pin-cpus 0 --max-extra-rounds 0 -v --report-dir reports/ab --summary comment/summary.md'
"$P" ab --before before/bm --after after/bm --rounds 3 --min-time 0.02 --pin-cpus 0 --max-extra-rounds 0 -v \
  --report-dir reports/ab --summary comment/summary.md 2>&1 | grep -v '^\[perfgate\]'
echo "exit ${PIPESTATUS[0]}"
echo '$ grep -E "^\| (\||#|metric|benchmark) |Change of the median|only .* has it" reports/ab/ab-report.md'
grep -E "^\| (\||#|metric|benchmark) |Change of the median|only .* has it" reports/ab/ab-report.md | cut -c1-160
for f in reports/ab/ab-report.md comment/summary.md; do
  link=$(grep -o -m1 -E '\[(glossary|Words used)\]\([^)]*\)' "$f" | sed -E 's/.*\(([^)#]*).*/\1/')
  if [ -f "$(dirname "$f")/$link" ]; then found="a file"; else found="no such file"; fi
  echo "$f: glossary link $link -> $found"
done

#!/usr/bin/env bash
# Gating a plain Google Benchmark program with perfgate, as docs/running.md walks through it.
#   walkthrough.sh PERFGATE BM_SORT WORK_DIR [check|full]
# check (ctest integration.own_gbench): one process run per side, compared: never judged (exit 77), with the
#   next step printed. Deterministic: one run per side can never be judged, whatever the machine does.
# full: also follows the printed advice with perfgate ab, unchanged (exit 0, judged) and with a planted +10%
#   (BM_SORT_SLOWDOWN=0.10: exit 1). Timed, so not a ctest: run it by hand on a quiet machine.
set -euo pipefail
perfgate="$1" bm="$2" work="$3" mode="${4:-check}"
rm -rf "$work" && mkdir -p "$work"
cd "$work"

"$bm" --benchmark_repetitions=5 --benchmark_out=before.json --benchmark_out_format=json > /dev/null
"$bm" --benchmark_repetitions=5 --benchmark_out=after.json --benchmark_out_format=json > /dev/null
set +e
"$perfgate" compare before.json after.json > compare.txt 2>&1
code=$?
set -e
cat compare.txt
[ "$code" = 77 ] || { echo "walkthrough: expected exit 77 from one run per side, got $code" >&2; exit 1; }
grep -q '^next step: ' compare.txt ||
  { echo "walkthrough: no next step printed" >&2; exit 1; }
[ "$mode" = full ] || exit 0

rounds="$(sed -n 's/.*perfgate ab --rounds \([0-9]*\).*/\1/p' compare.txt | head -1)"
rounds="${rounds:-10}"  # the advice may be to quiet the machine first; 10 rounds is the relative gate's default
echo "walkthrough: following the advice: perfgate ab --rounds $rounds"
set +e
"$perfgate" ab --before "$bm" --after "$bm" --rounds "$rounds" --repetitions 5 --pin-cpus 0 \
  --report-dir ab-unchanged > ab-unchanged.txt 2>&1
unchanged=$?
"$perfgate" ab --before "$bm" --after "$bm" --after-env BM_SORT_SLOWDOWN=0.10 --rounds "$rounds" --repetitions 5 \
  --pin-cpus 0 --report-dir ab-planted > ab-planted.txt 2>&1
planted=$?
set -e
tail -n 12 ab-unchanged.txt ab-planted.txt
echo "walkthrough: unchanged exit $unchanged (want 0), planted +10% exit $planted (want 1)"
[ "$unchanged" = 0 ] && [ "$planted" = 1 ]

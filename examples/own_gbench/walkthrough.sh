#!/usr/bin/env bash
# Gating a plain Google Benchmark program with perfgate, as docs/running.md walks through it.
#   walkthrough.sh PERFGATE BM_SORT WORK_DIR [check|full|baseline]
# check (ctest integration.own_gbench): one process run per side of a plain Google Benchmark binary loads and is
#   compared; a verdict comes out (0, 1 or 77), and when nothing could be judged (77, the usual case) the next step
#   is printed. Only an extreme difference between the two processes is judged from one run per side. Then a
#   perfgate run without a baseline names the command that stores its runs as one; the walk-through runs that
#   command as printed, and the next run is compared with the stored baseline.
# full: also follows the printed advice with perfgate ab, unchanged (exit 0, judged) and with a planted +10%
#   (BM_SORT_SLOWDOWN=0.10: exit 1). Timed, so not a ctest: run it by hand on a quiet machine.
# baseline: a stored baseline of the binary's own suites instead: perfgate run --update-baseline records 9 process
#   runs into WORK_DIR/baselines, then an unchanged perfgate run is gated against it (exit 0, judged unchanged)
#   and one with the planted +10% (exit 1). Timed as well.
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
case "$code" in
  0 | 1) ;;
  77) grep -q '^next step: ' compare.txt || { echo "walkthrough: exit 77 without a next step" >&2; exit 1; } ;;
  *) echo "walkthrough: compare exited $code" >&2; exit 1 ;;
esac

# A plain binary run without a baseline names the command that stores this run as one; following it word for word,
# the next run is compared with that baseline (untimed: any verdict will do, only "no baseline" again is wrong).
follow_record_advice() {
  local run=("$perfgate" run --bench "$bm" --rounds 2 --repetitions 3 --min-time 0.01 --against none
    --baseline-dir stored)
  set +e
  "${run[@]}" --report-dir advice-first > advice-first.txt 2>&1
  local first=$?
  set -e
  [ "$first" = 77 ] || { cat advice-first.txt; echo "walkthrough: no baseline yet, exit $first (want 77)" >&2; return 1; }
  local advice
  advice="$(grep -o 'record one from this run with `perfgate baseline update [^`]*`' advice-first/perf-report.json |
    head -1 | sed 's/.*`perfgate \(.*\)`/\1/')"
  [ -n "$advice" ] || { echo "walkthrough: no record command in the report's notes" >&2; return 1; }
  echo "walkthrough: following the advice: perfgate $advice"
  eval "\"\$perfgate\" $advice"
  set +e
  "${run[@]}" --report-dir advice-second > advice-second.txt 2>&1
  local second=$?
  set -e
  if grep -q 'no baseline for suite' advice-second/perf-report.json || [ "$second" -gt 1 ] && [ "$second" != 77 ]; then
    cat advice-second.txt
    echo "walkthrough: the stored baseline was not used (exit $second)" >&2
    return 1
  fi
  grep -q 'stored/.*/bm_sort.json' advice-second/perf-report.json ||
    { echo "walkthrough: the second run does not name the stored baseline" >&2; return 1; }
}
follow_record_advice

[ "$mode" = full ] || [ "$mode" = baseline ] || exit 0

stored_gate() {  # a stored baseline of the binary's suites (BM_Sort, BM_Accumulate), then two gated runs
  set +e
  "$perfgate" run --bench "$bm" --rounds 9 --repetitions 5 --pin-cpus 0 --update-baseline --baseline-dir baselines \
    --report-dir stored-record > stored-record.txt 2>&1 || { cat stored-record.txt; return 1; }
  ls baselines/*/
  "$perfgate" run --bench "$bm" --rounds 9 --repetitions 5 --pin-cpus 0 --baseline-dir baselines --against none \
    --report-dir stored-unchanged > stored-unchanged.txt 2>&1
  local unchanged=$?
  "$perfgate" run --bench "$bm" --rounds 9 --repetitions 5 --pin-cpus 0 --baseline-dir baselines --against none \
    --env BM_SORT_SLOWDOWN=0.10 --report-dir stored-planted > stored-planted.txt 2>&1
  local planted=$?
  set -e
  tail -n 8 stored-unchanged.txt stored-planted.txt
  echo "walkthrough: stored baseline: unchanged exit $unchanged (want 0), planted +10% exit $planted (want 1)"
  [ "$unchanged" = 0 ] && [ "$planted" = 1 ]
}
if [ "$mode" = baseline ]; then
  stored_gate
  exit $?
fi

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

#!/bin/bash
# perfgate run of the synthetic suite with no stored baseline, gated against a reference build (--against-build, the
# same binary; the current side 2x slower in one benchmark): what the report calls the reference side.
#   bash run.sh PERFGATE_BIN BENCH_SYNTHETIC WORK_DIR
set -u
P=$(realpath "$1"); B=$(realpath "$2"); W=$3
rm -rf "$W" && mkdir -p "$W" && cd "$W"
echo "\$ perfgate run --bench bench_synthetic --baseline-dir none --against-build bench_synthetic --filter chain/lcg --against-rounds 4 --env PERFGATE_SYNTHETIC_SLOWDOWN=1.0 --env PERFGATE_SYNTHETIC_SLOWDOWN_FILTER='units:10000\$' --pin-cpus 0 --report-dir rep -q"
"$P" run --bench "$B" --baseline-dir none --against-build "$B" --filter chain/lcg --against-rounds 4 \
  --env PERFGATE_SYNTHETIC_SLOWDOWN=1.0 --env 'PERFGATE_SYNTHETIC_SLOWDOWN_FILTER=units:10000$' --pin-cpus 0 \
  --report-dir rep -q > /dev/null 2>&1
echo "exit $?"
grep -E "^## |^\| (\||#) |Change of the median" rep/perf-report.md | cut -c1-160
python3 -c "import json; print('options.side_names:', json.load(open('rep/perf-report.json'))['options'].get('side_names'))"

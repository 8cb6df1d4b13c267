#!/usr/bin/env bash
# Planted regressions at fleet scale: N benchmarks x 5 repetitions at 0.3% spread, 1% of them (every 100th) 30%
# slower, compared with a 0.5% between-run prior. Prints how many of the planted and of the others were called
# regressions, and the headline. Evidence for docs/running.md ("perfgate compare").
#   harness/bench/planted_scale.sh PERFGATE WORK_DIR [N]
set -euo pipefail
perfgate="$1" work="$2" n="${3:-100000}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$work"
python3 "$here/make_large_json.py" "$work/a.json" --benchmarks "$n" --repetitions 5 --counters 0 --noise 0.003 --seed 1
python3 "$here/make_large_json.py" "$work/b.json" --benchmarks "$n" --repetitions 5 --counters 0 --noise 0.003 --seed 2 \
  --slow-fraction 0.01 --slow-factor 1.30
set +e
"$perfgate" compare "$work/a.json" "$work/b.json" --run-noise 0.005 --no-config -q --json "$work/r.json" --timing
echo "exit $?"
set -e
python3 - "$work/r.json" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
planted = {b["name"] for b in r["benchmarks"] if int(re.search(r"case(\d+)", b["name"]).group(1)) % 100 == 0}
reg = [b for b in r["benchmarks"] if b["verdict"] == "regression"]
print("summary:", r["summary"])
print("planted found:", sum(b["name"] in planted for b in reg), "of", len(planted))
print("other regressions:", sum(b["name"] not in planted for b in reg))
PY

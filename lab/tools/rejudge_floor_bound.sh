#!/usr/bin/env bash
# Re-judges the interleaved rounds of a relative gate (the raw/<run>/relative/ folder of a main job's report
# folder) as the main job judged them, with the run files' contexts given a floor-bound mark (docs/statistics.md):
#
#   lab/tools/rejudge_floor_bound.sh PERFGATE RELATIVE_DIR [MARK]
#
# MARK is the perfgate.floor_bound regex to add (none: the files as they are). Prints the verdict and one line per
# benchmark. The rule is the first look's: paired rounds, alpha 0.0125 (0.05 over 4 planned looks), threshold 5%;
# REJUDGE_ARGS="--phase-impact 0.01" adds compare flags.
set -euo pipefail
perfgate="${1:?perfgate binary}"; dir="${2:?raw relative folder}"; mark="${3:-}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
for f in "$dir"/*.json; do
  python3 - "$f" "$tmp/$(basename "$f")" "$mark" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if sys.argv[3]:
    d["context"]["perfgate.floor_bound"] = sys.argv[3]
json.dump(d, open(sys.argv[2], "w"))
PY
done
base="$(find "$tmp" -name 'relative.reference*.json' | sort -V | paste -sd,)"
current="$(find "$tmp" -name 'relative.current.*.json' | sort -V | paste -sd,)"
# shellcheck disable=SC2086  # REJUDGE_ARGS is a list of flags
"$perfgate" compare --paired --alpha 0.0125 --threshold 0.05 --no-config ${REJUDGE_ARGS:-} -v "$base" "$current" 2>&1 \
  | grep -E '^(PASS|FAIL|NOT JUDGED|SKIPPED)|^(regression|improvement|noisy|unchanged) '

#!/usr/bin/env bash
# Evidence for the relative gate (docs/running.md, "The relative gate"): ci/perf.sh on fresh clones of
# this repository, on a machine whose CPU generation has no stored baseline.
#
#   lab/tools/prove_relative_gate.sh OUT cold            fresh clone, empty compiler cache: ci/perf.sh (auto reference)
#   lab/tools/prove_relative_gate.sh OUT warm            fresh clone, the compiler cache the cold run filled
#   lab/tools/prove_relative_gate.sh OUT before REV      fresh clone of REV (the main job before the relative gate)
#   lab/tools/prove_relative_gate.sh OUT aa N            N runs of ci/perf.sh --against HEAD (same code: A/A);
#                                                    PROVE_PERF_ARGS adds perf.sh flags (e.g. --max-extra-rounds 0)
#   lab/tools/prove_relative_gate.sh OUT planted         a commit planting +10% in the synthetic suite, then one
#                                                    slowing lora_backward's loop kernel; ci/perf.sh --against HEAD~1
#
# Every run appends one line to OUT/summary.md: what ran, the exit code, the wall time and its steps, and
# the verdicts (regressions, noisy) from the run's perf-report.json. Runs on the checkout's HEAD
# (PROVE_REV=REV for another commit). PERFGATE_BASELINE_DIR is pointed at an empty folder unless
# PROVE_KEEP_BASELINES=1, so the relative gate is what is measured on any runner.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
mode="$2"
rev="${PROVE_REV:-$(git -C "$repo" rev-parse HEAD)}"
summary="$out/summary.md"
[ -f "$summary" ] || printf '| run | commit | exit | wall | steps | regressions | noisy | benchmarks |\n| --- | --- | ---: | ---: | --- | --- | ---: | ---: |\n' > "$summary"
empty_baselines="$out/no-baselines"
mkdir -p "$empty_baselines"

fresh_clone() {  # fresh_clone DIR REV
  rm -rf "$1"
  git clone -q "$repo" "$1"
  git -C "$1" checkout -q "$2"
}

reused_clone() {  # reused_clone DIR REV: a clone from an earlier run of this mode, moved to REV (its build is kept)
  if [ -d "$1/.git" ]; then
    git -C "$1" fetch -q origin && git -C "$1" checkout -q "$2"
  else
    fresh_clone "$1" "$2"
  fi
}

verdicts() {  # verdicts REPORT_JSON -> "regressions|noisy|benchmarks"
  python3 - "$1" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    print("-|-|-"); sys.exit()
reg = [b["name"] for b in r["benchmarks"] if b["verdict"] == "regression"]
noisy = sum(1 for b in r["benchmarks"] if b["verdict"] == "noisy")
judged = sum(1 for b in r["benchmarks"] if b["verdict"] not in ("skipped",))
print("%s|%d|%d" % (", ".join("`%s`" % n for n in reg) or "none", noisy, judged))
EOF
}

perf_run() {  # perf_run LABEL CLONE [perf.sh args...]
  local label="$1" clone="$2"; shift 2
  local log="$out/$label.log" start=$SECONDS rc=0
  local baselines="$empty_baselines"
  [ -n "${PROVE_KEEP_BASELINES:-}" ] && baselines="$clone/baselines"
  (cd "$clone" && PERFGATE_BASELINE_DIR="$baselines" ci/perf.sh "$@") > "$log" 2>&1 || rc=$?
  local wall=$((SECONDS - start))
  local steps; steps="$(grep -m1 '^perf.sh: steps:' "$log" | sed 's/^perf.sh: steps: //' || true)"
  local report="$clone/build/perf/perf-report.json"
  [ -f "$report" ] && cp "$report" "$out/$label.perf-report.json"
  [ -f "$clone/build/perf/perf-report.md" ] && cp "$clone/build/perf/perf-report.md" "$out/$label.perf-report.md"
  IFS='|' read -r reg noisy judged <<< "$(verdicts "$out/$label.perf-report.json")"
  printf '| %s | `%s` | %s | %s s | %s | %s | %s | %s |\n' "$label" "$(git -C "$clone" rev-parse --short HEAD)" \
    "$rc" "$wall" "${steps:--}" "$reg" "$noisy" "$judged" >> "$summary"
  echo "prove_relative_gate: $label: exit $rc in $wall s ($steps); regressions: $reg" >&2
}

plant_commit() {  # plant_commit CLONE MESSAGE FILE PYTHON_EDIT
  python3 - "$1/$3" "$4" <<'EOF'
import sys
path, edit = sys.argv[1], sys.argv[2]
text = open(path).read()
old, new = edit.split("\n=>\n")
assert old in text, "plant: pattern not found in " + path
open(path, "w").write(text.replace(old, new, 1))
EOF
  git -C "$1" -c user.name=prove -c user.email=prove@perfgate.invalid commit -qam "$2"
}

case "$mode" in
  cold)
    rm -rf "$out/ccache"
    fresh_clone "$out/cold" "$rev"
    CCACHE_DIR="$out/ccache" perf_run cold "$out/cold"
    ;;
  warm)
    fresh_clone "$out/warm" "$rev"
    CCACHE_DIR="$out/ccache" perf_run warm "$out/warm"
    ;;
  before)
    fresh_clone "$out/before" "$3"
    CCACHE_DIR="$out/ccache-before" perf_run "before-$3" "$out/before"
    ;;
  aa)
    reused_clone "$out/aa" "$rev"
    first=$(( $(ls "$out"/aa-*.log 2>/dev/null | wc -l) + 1 ))
    # shellcheck disable=SC2086
    for i in $(seq "$first" $((first + $3 - 1))); do perf_run "aa-$i" "$out/aa" --against HEAD ${PROVE_PERF_ARGS:-}; done
    ;;
  planted)
    fresh_clone "$out/planted" "$rev"
    plant_commit "$out/planted" "plant: synthetic chain/lcg/units:10000 +10%" benches/synthetic/src/synthetic.cpp \
      $'  c.validate();\n  return c;\n=>\n  if (c.slowdown == 0) {\n    c.slowdown = 0.10;\n    c.slowdown_filter = "chain/lcg/units:10000$";\n  }\n  c.validate();\n  return c;\n'
    perf_run planted-synthetic "$out/planted" --against HEAD~1
    plant_commit "$out/planted" "plant: lora loop backward recomputes the gate/up base pass of every 3rd expert" \
      benches/lora_backward/src/loop_layer.cpp \
      $'    gemm_nt(m, H_, I_, dpre_[kGate].data() + off, I_, wt(wgT_, kGate, e), I_, gx, H_, false);  // base_pass(gate)\n    gemm_nt(m, H_, I_, dpre_[kUp].data() + off, I_, wt(wuT_, kUp, e), I_, gx, H_, true);       // base_pass(up)\n=>\n    for (int pass = 0; pass < (e % 3 == 0 ? 2 : 1); ++pass) {\n    gemm_nt(m, H_, I_, dpre_[kGate].data() + off, I_, wt(wgT_, kGate, e), I_, gx, H_, false);  // base_pass(gate)\n    gemm_nt(m, H_, I_, dpre_[kUp].data() + off, I_, wt(wuT_, kUp, e), I_, gx, H_, true);       // base_pass(up)\n    }\n'
    perf_run planted-lora "$out/planted" --against HEAD~1
    ;;
  *)
    echo "usage: $0 OUT cold|warm|before REV|aa N|planted" >&2
    exit 2
    ;;
esac

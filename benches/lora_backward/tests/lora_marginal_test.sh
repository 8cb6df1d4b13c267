#!/usr/bin/env bash
# lora_marginal end to end on the tiny config (two sides, their layers checked against the fp64 reference before
# any pass is timed), its JSON through marginal_cost.py, and its errors on bad sides and a bad config.
# Usage: lora_marginal_test.sh path/to/lora_marginal path/to/marginal_cost.py
set -uo pipefail
tool="${1:?lora_marginal path}"; summary="${2:?marginal_cost.py path}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$tool" --side ':PERFGATE_LORA_FUSED2_INTERLEAVE' --out "$dir/x.json" 2> "$dir/err"
rc=$?
[ $rc -eq 1 ] && grep -q "side ':PERFGATE_LORA_FUSED2_INTERLEAVE'" "$dir/err" || { cat "$dir/err"; fail "bad side: exit $rc"; }
"$tool" --side 'a"b' --out "$dir/x.json" 2> "$dir/err"
rc=$?
[ $rc -eq 1 ] && grep -q "letters, digits" "$dir/err" || { cat "$dir/err"; fail "side name with a quote: exit $rc"; }
"$tool" --side a --side a:PERFGATE_LORA_FUSED2_INTERLEAVE --out "$dir/x.json" 2> "$dir/err"
rc=$?
[ $rc -eq 1 ] && grep -q "two sides named 'a'" "$dir/err" || { cat "$dir/err"; fail "two sides of one name: exit $rc"; }
"$tool" --config nosuch --out "$dir/x.json" 2> "$dir/err"
rc=$?
[ $rc -eq 1 ] && grep -q "config nosuch" "$dir/err" || { cat "$dir/err"; fail "bad config: exit $rc"; }

"$tool" --config tiny --qlen 16 --threads 1 --seconds 0.3 --passes 2 --loop-passes 1 --side default \
  --side il:PERFGATE_LORA_FUSED2_INTERLEAVE --out "$dir/m.json" 2> "$dir/log"
rc=$?
[ $rc -eq 77 ] && { cat "$dir/log"; exit 77; }  # no bf16 matmul in oneDNN on this CPU
[ $rc -eq 0 ] || { cat "$dir/log"; fail "lora_marginal exited $rc"; }
python3 "$summary" --summarize "$dir/m.json" > "$dir/table" || { cat "$dir/table"; fail "marginal_cost.py"; }
cat "$dir/table"
grep -q '^| default | [1-9]' "$dir/table" && grep -q '^| il | [1-9]' "$dir/table" || fail "a side has no rounds"
grep -q '^il - default, [1-9][0-9]* rounds' "$dir/table" || fail "no comparison of the sides"
grep -Eq "the default fused2's products: (amx|vdpbf16ps|generic)\)" "$dir/table" || fail "no fused2 products named"
echo PASS

#!/usr/bin/env bash
# ctest dashboard.chromium: `perfgate history report` on a small synthetic history (40 sessions x 20
# benchmarks x 3 metrics, one benchmark with a +5% step), rendered from disk in headless Chromium. The page
# marks <body> with data-state="ready", data-charts (plots created) and data-painted (canvases with pixels
# drawn) once a view has drawn; the test reads them from --dump-dom, and takes a screenshot of each view.
#
#   dashboard_chromium_test.sh PERFGATE PERFGATE_HISTORY_SCALE
#
# Exit 77 (skipped) without chromium, Debian's libjs-chart.js or the two tools built;
# PERFGATE_DASHBOARD_KEEP=DIR keeps the site and the screenshots there.
set -euo pipefail
perfgate="$1"
fill="$2"
chromium="$(command -v chromium || command -v chromium-browser || true)"
chartjs=/usr/share/javascript/chart.js/chart.min.js
for tool in "$perfgate" "$fill"; do
  # A build that makes only some targets (ci/sanitize.sh) has no history filler.
  if [ ! -x "$tool" ]; then echo "SKIP: $tool is not built"; exit 77; fi
done
if [ -z "$chromium" ]; then echo "SKIP: no chromium (apt-get install chromium; ci/setup.sh installs it)"; exit 77; fi
if [ ! -f "$chartjs" ]; then echo "SKIP: no $chartjs (apt-get install libjs-chart.js; ci/setup.sh installs it)"; exit 77; fi

work="$(mktemp -d /tmp/perfgate_dashboard_XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$fill" --db "$work/history.db" --sessions 40 --benchmarks 20 --checkpoints 40 > "$work/fill.log" 2>&1
"$perfgate" history report --db "$work/history.db" --out "$work/site" --commit-url 'https://git.example/repo/commit/{commit}'

# Nothing may come from the network: every script and style the page loads is a relative path.
if grep -Eq '(src|href)="(https?:)?//' "$work/site/index.html"; then fail "index.html loads something from the network"; fi

# Renders the page at #FRAGMENT from disk; prints the DOM after the scripts ran.
render() {
  local fragment="$1" shot="$2"
  # Root (CI) needs --no-sandbox; a fresh profile per call keeps runs independent.
  local flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run
               --user-data-dir="$work/profile-$shot" --window-size=1400,1000 --virtual-time-budget=15000)
  timeout 120 "$chromium" "${flags[@]}" --screenshot="$work/$shot.png" "file://$work/site/index.html#$fragment" \
    > "$work/$shot.log" 2>&1 || fail "chromium could not take the screenshot of #$fragment (see below)"$'\n'"$(tail -5 "$work/$shot.log")"
  timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$work/site/index.html#$fragment" 2>> "$work/$shot.log"
}

# The value of a data-* attribute of <body> in a dumped DOM.
body_attribute() { grep -o "<body[^>]*>" | grep -o "data-$1=\"[^\"]*\"" | cut -d'"' -f2; }

check_png() {
  local png="$work/$1.png"
  [ -f "$png" ] || fail "no screenshot $1.png"
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$1.png is not a PNG"
  # A blank page compresses to a few KB; 20 plots do not.
  [ "$(stat -c %s "$png")" -gt 30000 ] || fail "$1.png is only $(stat -c %s "$png") bytes: nothing drawn?"
}

# The overview: 12 plots on the first page, every one painted; the stepping benchmark leads.
dom="$(render "/" overview)"
state="$(body_attribute state <<< "$dom")"
[ "$state" = ready ] || fail "overview: data-state='$state', not ready"
charts="$(body_attribute charts <<< "$dom")"
painted="$(body_attribute painted <<< "$dom")"
[ "$charts" = 12 ] || fail "overview: $charts plots, expected 12"
[ "$painted" = 12 ] || fail "overview: $painted of $charts plots painted"
first_card="$(grep -o 'href="#/series/[0-9]*">[^<]*' <<< "$dom" | head -1)"
[[ "$first_card" == *scale/bench0007 ]] || fail "overview: the benchmark with change points does not lead: $first_card"
check_png overview

# One benchmark: its 3 metrics, each plot painted, the change point listed with a link to its commit.
id="$(grep -o 'href="#/series/[0-9]*">scale/bench0007' <<< "$dom" | head -1 | grep -o '[0-9]*' | head -1)"
dom="$(render "/series/$id" series)"
[ "$(body_attribute state <<< "$dom")" = ready ] || fail "series view not ready"
[ "$(body_attribute charts <<< "$dom")" = 3 ] || fail "series view: $(body_attribute charts <<< "$dom") plots, expected 3"
[ "$(body_attribute painted <<< "$dom")" = 3 ] || fail "series view: not every plot painted"
grep -q 'href="https://git.example/repo/commit/' <<< "$dom" || fail "series view: no link to a commit"
grep -q '<th>commits (bisect range)</th>' <<< "$dom" || fail "series view: no change-point table"
check_png series

# The class filter: an unknown suite index leaves no plot, and the page still says ready.
dom="$(render "/?suite=99" empty)"
[ "$(body_attribute state <<< "$dom")" = ready ] || fail "filtered view not ready"
[ "$(body_attribute charts <<< "$dom")" = 0 ] || fail "a filter that matches nothing still drew plots"

if [ -n "${PERFGATE_DASHBOARD_KEEP:-}" ]; then
  mkdir -p "$PERFGATE_DASHBOARD_KEEP"
  cp -r "$work/site" "$work/overview.png" "$work/series.png" "$PERFGATE_DASHBOARD_KEEP/"
fi
echo "PASS: overview 12/12 plots painted, series view 3/3, screenshots $(stat -c %s "$work/overview.png") and $(stat -c %s "$work/series.png") bytes"

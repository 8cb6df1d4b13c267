#!/usr/bin/env bash
# ctest report.chromium: the summary and the full report rendered as GitHub-flavoured Markdown (cmark-gfm, with
# GitHub's table, autolink, strikethrough and tagfilter extensions) in headless Chromium at 1400x900, the first
# screen a reader of a pull request sees. A script in the page measures where the verdict, the list of
# regressions and the first "not judged" line end, and marks <body> with data-first-screen="yes" when all of them end
# within the viewport (a 1400x900 window shows 1400x757 of the page below the browser's bars); the test reads it
# from --dump-dom and takes a screenshot of each page.
#
#   report_chromium_test.sh REPOSITORY_ROOT
#
# The pages are docs/example-*.md (ctest docs.examples keeps them equal to what perfgate writes). Exit 77
# (skipped) without chromium or cmark-gfm; PERFGATE_REPORT_SHOTS=DIR keeps the screenshots there.
set -euo pipefail
root="$1"
chromium="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$chromium" ]; then echo "SKIP: no chromium (apt-get install chromium; ci/setup.sh installs it)"; exit 77; fi
if ! command -v cmark-gfm > /dev/null; then echo "SKIP: no cmark-gfm (apt-get install cmark-gfm; ci/setup.sh installs it)"; exit 77; fi
work="$(mktemp -d /tmp/perfgate_report_render_XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# GitHub's look, roughly: its font, width and table borders decide how much fits on the first screen.
style='body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:14px;line-height:1.5;
margin:0 auto;max-width:1012px;padding:24px;color:#1f2328}table{border-collapse:collapse;display:block;overflow:auto}
td,th{border:1px solid #d1d9e0;padding:6px 13px}code{font-size:85%;background:#eff1f3;padding:.2em .4em;border-radius:6px}
h2{border-bottom:1px solid #d1d9e0;padding-bottom:.3em;font-size:1.5em}h3{font-size:1.25em}'
# Where each part of the first screen ends (px from the top); "-" when the report has no such part.
measure='<script>
function bottomOf(el) { return el ? Math.ceil(el.getBoundingClientRect().bottom) : "-"; }
function after(heading, tag) {
  var h = Array.from(document.querySelectorAll("h3")).find(function (x) { return x.textContent === heading; });
  for (var el = h && h.nextElementSibling; el; el = el.nextElementSibling) if (el.tagName === tag) return el;
  return null;
}
var verdict = document.querySelector("h2"), regressions = after("Regressions", "UL"), list = after("Not judged", "UL");
var parts = [bottomOf(verdict), bottomOf(regressions), bottomOf(list && list.querySelector("li"))];
document.body.dataset.bottoms = parts.join(",") + " of " + innerHeight;
document.body.dataset.firstScreen = parts.every(function (b) { return b === "-" || b <= innerHeight; }) ? "yes" : "no";
</script>'

# render NAME MARKDOWN: NAME.html and NAME.png; prints the body's opening tag after the script ran.
render() {
  local name="$1" md="$2"
  { printf '<!doctype html><meta charset="utf-8"><style>%s</style><body>\n' "$style"
    cmark-gfm --unsafe --extension table --extension autolink --extension strikethrough --extension tagfilter "$md"
    printf '%s</body>\n' "$measure"; } > "$work/$name.html"
  local flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --no-first-run
               --user-data-dir="$work/profile-$name" --window-size=1400,900 --virtual-time-budget=5000)
  timeout 120 "$chromium" "${flags[@]}" --screenshot="$work/$name.png" "file://$work/$name.html" > "$work/$name.log" 2>&1 ||
    fail "chromium could not take the screenshot of $name"$'\n'"$(tail -5 "$work/$name.log")"
  [ "$(head -c 8 "$work/$name.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$name.png is not a PNG"
  timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$work/$name.html" 2>> "$work/$name.log" | grep -o '<body[^>]*>'
}

# check NAME MARKDOWN: the verdict, the regressions and the first "not judged" line are on the first screen.
check() {
  local body
  body="$(render "$1" "$2")"
  [[ "$body" == *'data-first-screen="yes"'* ]] ||
    fail "$1: not all on the first screen of a 1400x900 window (verdict, regressions, not judged end at: $(grep -o 'data-bottoms="[^"]*"' <<< "$body"))"
  echo "ok: $1 ($(grep -o 'data-bottoms="[^"]*"' <<< "$body"))"
}

check summary-pass "$root/docs/example-perf-report-summary.md"
check summary-fail "$root/docs/example-report-gpu-summary.md"
# The full reports as perfgate wrote them: the example pages without their introduction (above the first rule).
for page in report-gpu:full-fail perf-report:full-pass; do
  sed '1,/^---$/d' "$root/docs/example-${page%%:*}.md" > "$work/${page##*:}.md"
  check "${page##*:}" "$work/${page##*:}.md"
done

# The check itself can fail: a report whose "not judged" line lies below 60 more regressions is not on the first
# screen.
{ sed -n '1,/^### Regressions$/p' "$root/docs/example-report-gpu-summary.md"; echo
  for i in $(seq 1 60); do echo "- <code>expert_gemm/row$i</code>: time 1.0% slower; smallest detectable 2.0% slower"; done
  sed '1,/^### Regressions$/d' "$root/docs/example-report-gpu-summary.md"; } > "$work/long.md"
body="$(render long "$work/long.md")"
[[ "$body" == *'data-first-screen="no"'* ]] || fail "a summary with 60 more regressions was said to fit the first screen: $body"

if [ -n "${PERFGATE_REPORT_SHOTS:-}" ]; then
  mkdir -p "$PERFGATE_REPORT_SHOTS"
  cp "$work"/summary-*.png "$work"/full-*.png "$PERFGATE_REPORT_SHOTS/"
fi

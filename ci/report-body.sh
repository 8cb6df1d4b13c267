#!/usr/bin/env bash
# Picks what a CI job posts, within the host's limits, so that posting can never fail on a big report:
#
#   ci/report-body.sh comment      FULL.md SUMMARY.md OUT.md   the summary (the full report when there is none),
#                                                              at most 65,000 bytes: a pull-request comment or
#                                                              merge-request note holds 65,536 characters
#   ci/report-body.sh step-summary FULL.md SUMMARY.md OUT.md   the full report when it fits GitHub's 1 MiB job
#                                                              summary, else the summary
#
# A body still over the limit (a full report with no summary beside it: the shard merge) is cut at a line end
# and says where the rest is (PERFGATE_REPORT_LINK, else "the job's artifacts"). Either input may be missing;
# with neither, OUT says that no report was written. Exit 0 always, unless the arguments are wrong.
set -euo pipefail
usage() { echo "usage: ci/report-body.sh comment|step-summary FULL.md SUMMARY.md OUT.md" >&2; exit 2; }
[ $# -eq 4 ] || usage
kind="$1" full="$2" summary="$3" out="$4"
case "$kind" in
  comment) limit=65000; first="$summary"; second="$full" ;;
  step-summary) limit=1048000; first="$full"; second="$summary" ;;
  *) usage ;;
esac

size() { wc -c < "$1" | tr -d ' '; }

# The first input that exists and fits, else the smaller one that exists, cut.
pick() {
  local f
  for f in "$first" "$second"; do
    if [ -f "$f" ] && [ "$(size "$f")" -le "$limit" ]; then echo "$f"; return; fi
  done
  for f in "$second" "$first"; do
    if [ -f "$f" ]; then echo "$f"; return; fi
  done
}

mkdir -p "$(dirname "$out")"
chosen="$(pick)"
if [ -z "$chosen" ]; then
  printf '## perfgate: no report was written\n\nThe main job stopped before writing its report; see the job log.\n' > "$out"
  exit 0
fi
if [ "$(size "$chosen")" -le "$limit" ]; then
  cp "$chosen" "$out"
  exit 0
fi
default_where="the job's artifacts"
where="${PERFGATE_REPORT_LINK:-$default_where}"
note="$(printf '\n**Cut at %s bytes to fit.** The whole report is in %s.\n' "$limit" "$where")"
room=$((limit - ${#note} - 1))
# Whole lines only, so that no table row or link is cut in half.
head -c "$room" "$chosen" | sed '$d' > "$out"
printf '%s\n' "$note" >> "$out"

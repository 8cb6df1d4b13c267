#!/usr/bin/env bash
# Posts a report as the body of a merge-request note (GitLab CI; on GitHub Actions the workflow in ci/github/
# uses the job summary and a pull-request comment action instead).
#
#   ci/post-report.sh FULL.md [SUMMARY.md]
#
# The note is the summary when there is one, else the full report, cut to fit a note's 65,536 characters
# (ci/report-body.sh). Needs CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID (set by GitLab in merge-request
# pipelines) and PERFGATE_GITLAB_TOKEN (a project access token with the api scope). Outside a merge request,
# without the token or the report, or when the post is refused, it says so and exits 0: a comment is a courtesy,
# the job's exit code is the gate.
set -euo pipefail
full="${1:?usage: ci/post-report.sh FULL.md [SUMMARY.md]}"
summary="${2:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -f "$full" ] && [ ! -f "$summary" ]; then echo "post-report: no $full${summary:+ or $summary}"; exit 0; fi
if [ -z "${CI_MERGE_REQUEST_IID:-}" ]; then echo "post-report: not a merge request pipeline; not posting"; exit 0; fi
if [ -z "${PERFGATE_GITLAB_TOKEN:-}" ]; then echo "post-report: PERFGATE_GITLAB_TOKEN is not set; not posting"; exit 0; fi
body="$(mktemp)"
trap 'rm -f "$body"' EXIT
"$here/report-body.sh" comment "$full" "$summary" "$body"
if ! curl --silent --show-error --fail --request POST --header "PRIVATE-TOKEN: $PERFGATE_GITLAB_TOKEN" \
  --data-urlencode "body@$body" \
  "$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes" > /dev/null; then
  echo "post-report: WARNING: the note was refused (see above); the report is in the job's artifacts"
  exit 0
fi
echo "post-report: posted $(wc -c < "$body" | tr -d ' ') bytes to merge request !$CI_MERGE_REQUEST_IID"

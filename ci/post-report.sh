#!/usr/bin/env bash
# Posts a Markdown report as the body of a merge-request note (GitLab CI; on GitHub Actions the workflow in
# ci/github/ uses the job summary and a pull-request comment action instead).
#
#   ci/post-report.sh REPORT.md
#
# Needs CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID (set by GitLab in merge-request pipelines) and
# PERFGATE_GITLAB_TOKEN (a project access token with the api scope). Outside a merge request, or without
# the token or the report, it says so and exits 0: a comment is a courtesy, the job's exit code is the gate.
set -euo pipefail
report="${1:?usage: ci/post-report.sh REPORT.md}"
if [ ! -f "$report" ]; then echo "post-report: no $report"; exit 0; fi
if [ -z "${CI_MERGE_REQUEST_IID:-}" ]; then echo "post-report: not a merge request pipeline; not posting"; exit 0; fi
if [ -z "${PERFGATE_GITLAB_TOKEN:-}" ]; then echo "post-report: PERFGATE_GITLAB_TOKEN is not set; not posting"; exit 0; fi
curl --silent --show-error --fail --request POST --header "PRIVATE-TOKEN: $PERFGATE_GITLAB_TOKEN" \
  --data-urlencode "body@$report" \
  "$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes" > /dev/null
echo "post-report: posted $report to merge request !$CI_MERGE_REQUEST_IID"

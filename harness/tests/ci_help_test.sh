#!/usr/bin/env bash
# ci/perf.sh --help and ci/test.sh -h print their usage and exit 0 before any set-up or build: the build folder
# they are given stays absent.
#   ci_help_test.sh REPO_ROOT
set -euo pipefail
root="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for call in "perf.sh --help" "perf.sh --filter x -h" "test.sh --help" "test.sh -R Loader -h"; do
  read -r script args <<<"$call"
  # shellcheck disable=SC2086 # the arguments are meant to split
  out="$(PERFGATE_BUILD_DIR="$work/build" "$root/ci/$script" $args)" ||
    { echo "ci/$call: exit $?" >&2; exit 1; }
  grep -q "README" <<<"$out" || { echo "ci/$call: no usage text: $out" >&2; exit 1; }
  grep -q -- "--help" <<<"$out" || { echo "ci/$call: the usage does not name --help" >&2; exit 1; }
  [ ! -e "$work/build" ] || { echo "ci/$call: made a build folder" >&2; exit 1; }
done
echo "ci help: ok"

#!/usr/bin/env bash
# Installs the Debian packages perfgate builds with, when missing. Idempotent: a machine that has
# them all is left untouched and no package index is fetched. Without network (the lent GPU machines)
# it reports what is missing and carries on; the build then says what it could not find.
set -euo pipefail
if [ -n "${PERFGATE_SKIP_SETUP:-}" ]; then
  echo "ci/setup.sh: PERFGATE_SKIP_SETUP set, not checking packages"
  exit 0
fi

packages=(
  cmake g++ make pkg-config
  libbenchmark-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libsimdjson-dev
  libdnnl-dev            # oneDNN: the AMX variants of lora_backward
  ocl-icd-opencl-dev opencl-c-headers  # Debian's dnnl-config.cmake requires OpenCL (only recommended by apt)
  python3-scipy          # regenerates statistics test vectors (optional at build time)
  libbenchmark-tools     # Google Benchmark's compare.py, for the side-by-side rule comparison
  clang                  # libFuzzer target for the loader
  clang-format clang-tidy  # the format and lint targets (.clang-format, .clang-tidy)
  ccache                 # compiler cache: the reference build of perf.sh --against recompiles only what differs
  libsqlite3-dev libpq-dev  # the results history backends (harness/src/history)
  postgresql             # a throwaway server for the PostgreSQL history tests
  libjs-chart.js         # Chart.js, vendored into the history dashboard (perfgate history report)
  chromium               # headless: the dashboard's rendering test (ctest dashboard.chromium)
  cmark-gfm              # GitHub-flavoured Markdown to HTML: the reports' rendering test (ctest report.chromium)
  nodejs                 # runs the dashboard's name escaping on hostile names (ctest dashboard.names)
  python3-yaml           # parses the CI definitions in ci/github/ and ci/gitlab/ (ctest ci.definitions)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "ci/setup.sh: all ${#packages[@]} packages present"
  exit 0
fi

echo "ci/setup.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  echo "ci/setup.sh: done"
else
  echo "ci/setup.sh: WARNING: could not install ${missing[*]} (no network?); continuing with what is here" >&2
fi

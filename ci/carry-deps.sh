#!/usr/bin/env bash
# Run here (with network): downloads the Debian packages the lent GPU machines lack (simdjson for the
# harness, oneDNN for the AMX variants) into .carry/debs. Name `.carry` in the device tool's `carry`
# list and `source ci/device-env.sh` there. The folder is git-ignored.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$root/.carry/debs"
cd "$root/.carry/debs"
apt-get download libsimdjson-dev libsimdjson14 libdnnl-dev libdnnl2 \
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
ls -la "$root/.carry/debs"

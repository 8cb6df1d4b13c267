#!/usr/bin/env bash
# perfgate compare on a plain Google Benchmark binary's JSON (plain_bench.cpp, 5 repetitions, this runner):
# l2-512k.json is zen5.json with its context's L2 edited to 512 KiB (a Zen 3 runner's), console.txt the binary's
# console output. Usage: run.sh PERFGATE_BINARY
P="${1:?perfgate binary}"; cd "$(dirname "$0")"
echo "== two CPUs by Google Benchmark's caches"; "$P" compare l2-512k.json zen5.json; echo "exit $?"
echo "== the same, --allow-machine-mismatch"; "$P" compare l2-512k.json zen5.json --allow-machine-mismatch | head -1; echo "exit ${PIPESTATUS[0]}"
echo "== console output where JSON was meant"; "$P" compare console.txt zen5.json; echo "exit $?"

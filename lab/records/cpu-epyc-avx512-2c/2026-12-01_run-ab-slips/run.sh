#!/usr/bin/env bash
# Three slips a user makes on first contact with perfgate run / ab, with probe.cpp of
# ../2026-12-01_nan-counter-and-aggregates-only: a program that is not a Google Benchmark binary (/bin/true), a Google
# Benchmark binary that registers nothing, and ab of one build against a copy of itself (an --after not rebuilt).
#   run.sh PERFGATE WORK_DIR     (needs libbenchmark-dev; about 20 seconds)
set -uo pipefail
perfgate="$(realpath "$1")" here="$(cd "$(dirname "$0")" && pwd)" work="$2"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
g++ -O2 "$here/../2026-12-01_nan-counter-and-aggregates-only/probe.cpp" -o probe -lbenchmark -lpthread
printf '#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n' > empty.cpp && g++ -O2 empty.cpp -o empty -lbenchmark -lpthread
mkdir -p after && cp probe after/probe
step() { echo; echo "\$ $*"; "$@" 2>&1 | grep -v '^\[perfgate\]'; echo "(exit ${PIPESTATUS[0]})"; }

echo "== 1. a program that is not a Google Benchmark binary"
step "$perfgate" run --bench /bin/true --rounds 2 --against none --report-dir r1
echo; echo "== 2. a Google Benchmark binary that registers nothing"
step "$perfgate" run --bench ./empty --rounds 2 --against none --report-dir r2
echo; echo "== 3. ab of one build against a copy of itself"
step "$perfgate" ab --before ./probe --after after/probe --rounds 3 --repetitions 3 --min-time 0.01 --pin-cpus 0 \
  --max-extra-rounds 0 --report-dir ab

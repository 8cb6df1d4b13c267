#!/bin/bash
# Builds the two versions of bm.cpp (../2026-12-02_plain-binary-bisect) in the current folder: before/bm, and
# after/bm, which doubles BM_Accumulate's work and measures BM_Sort at 32768 in place of 65536.
set -eu
src="$(dirname "$(realpath "$0")")/../2026-12-02_plain-binary-bisect/bm.cpp"
mkdir -p before after
g++ -O2 -std=c++17 -DSCALE=1 "$src" -lbenchmark -lpthread -o before/bm
sed 's/Arg(1<<16)/Arg(1<<15)/' "$src" > bm_after.cpp
g++ -O2 -std=c++17 -DSCALE=2 bm_after.cpp -lbenchmark -lpthread -o after/bm

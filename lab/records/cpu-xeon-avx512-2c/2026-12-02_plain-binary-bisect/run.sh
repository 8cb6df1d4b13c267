#!/bin/bash
# A Makefile project with a plain Google Benchmark binary (bm.cpp beside this script): six commits, the fourth
# doubles BM_Accumulate's work. Then perfgate bisect and perfgate run --against, as a user would type them.
#   bash run.sh PERFGATE_BIN WORK_DIR
set -eu
P=$(realpath "$1"); W=$2; here=$(dirname "$(realpath "$0")")
rm -rf "$W" && mkdir -p "$W" && cd "$W"
git init -q && git config user.email u@example.invalid && git config user.name u
cp "$here/bm.cpp" .
printf 'BUILD ?= build\n$(BUILD)/bm: bm.cpp\n\tmkdir -p $(BUILD)\n\tg++ -O2 -std=c++17 -DSCALE=$(shell cat scale.txt) bm.cpp -lbenchmark -lpthread -o $(BUILD)/bm\n' > Makefile
echo 1 > scale.txt; git add -A; git commit -qm c1
for i in 2 3 4 5 6; do echo "// $i" >> bm.cpp; [ $i = 4 ] && echo 2 > scale.txt; git commit -qam c$i; done
git log --oneline
echo '$ perfgate bisect --good HEAD~5 --bad HEAD --bench bm --build-command "make BUILD=$PERFGATE_BUILD_DIR" --rounds 3 --pin-cpus 0 --min-time 0.05 -q'
"$P" bisect --good HEAD~5 --bad HEAD --bench bm --build-command 'make BUILD=$PERFGATE_BUILD_DIR' --rounds 3 --pin-cpus 0 --min-time 0.05 -q 2>&1 | grep -v "reference "
echo "exit ${PIPESTATUS[0]}"; cat build/bisect/bisect.md || true
make -s BUILD=build
echo '$ perfgate run --bench build/bm --rounds 3 --min-time 0.05 --pin-cpus 0 --against HEAD~3 -q'
"$P" run --bench build/bm --rounds 3 --min-time 0.05 --pin-cpus 0 --against HEAD~3 -q 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"
echo '$ perfgate run ... --against HEAD~3 --reference-build-command "make BUILD=$PERFGATE_BUILD_DIR" -q'
"$P" run --bench build/bm --rounds 3 --min-time 0.05 --pin-cpus 0 --against HEAD~3 --reference-build-command 'make BUILD=$PERFGATE_BUILD_DIR' -q 2>&1 | tail -8; echo "exit ${PIPESTATUS[0]}"

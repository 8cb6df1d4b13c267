#!/usr/bin/env bash
# README main job: installs missing dependencies, builds, detects the hardware, runs every suite this
# machine can run in ONE `perfgate run` (one combined report), gates each suite and writes
# <build>/perf-report.md (the full report) and <build>/perf-summary.md (the summary for comments), exiting with the harness's exit code (0 none, 1 regression, 2 bad input or a
# reference that does not build, 3 a bench failed, 77 nothing could be judged).
#
# Each suite is gated by the first of these that exists (docs/running.md, "Which gate a run uses"):
#   1. baselines/<machine-class>/<suite>.json recorded on this CPU generation: the stored-baseline gate;
#   2. a reference revision built here in <build>/reference and measured interleaved with this build:
#      --against REV, else PERFGATE_AGAINST, else the merge base of HEAD with the default branch
#      (HEAD~1 when HEAD is on it);
#   3. nothing: exit 77 with one line saying what to pass.
#
#   ci/perf.sh                      as above
#   ci/perf.sh --against REV        gate suites without a fitting baseline against REV
#   ci/perf.sh --against none       stored baselines only
#   ci/perf.sh --update-baseline    record this machine's baselines instead (see docs/baselines.md)
#   ci/perf.sh --shard I/N          shard I of N of the gated benchmarks, recorded for ci/merge.sh (ci/shard.sh)
#   ci/perf.sh --filter REGEX ...   any further flag goes to `perfgate run`
#   ci/perf.sh -h, --help           this text
# Environment: PERFGATE_SUITES="a b" runs only those suites; PERFGATE_ROUNDS / PERFGATE_REPETITIONS /
# PERFGATE_MIN_TIME set the measurement, PERFGATE_AB_ROUNDS / PERFGATE_AB_REPETITIONS / PERFGATE_AB_PIN_CPUS /
# PERFGATE_AB_LANES / PERFGATE_AB_EXTRA_TIME_FACTOR the interleaved rounds against a reference, their repetitions,
# their CPUs, their lanes (rounds measured several at a time) and the time budget of their adaptive extra rounds;
# PERFGATE_PIN_CPUS pins the bench processes (below); PERFGATE_AGAINST the reference revision;
# PERFGATE_BUILD_DIR, PERFGATE_BASELINE_DIR the folders; PERFGATE_CCACHE=0 builds without ccache.
# PERFGATE_REPORT_DIR (default: the build folder) takes the report and runs/: several main jobs of one build
# can then run at once, each on its own GPUs (CUDA_VISIBLE_DEVICES), e.g. one per GPU pair of a 4-GPU host.
# PERFGATE_HISTORY=URL (a SQLite path or a postgresql:// URL, docs/history.md): the stored-baseline gate judges
# with the between-session noise learned from that history, and the run is then recorded into it as one
# session per machine class (PERFGATE_HISTORY_RECORD=0 gates with it without recording, e.g. on pull requests).
# PERFGATE_TIME_BUDGET=SECONDS: the whole job's time budget, set-up and build included; what is left of it when the
# gate starts goes to `perfgate run --time-budget` (the confirm step re-measures only the suites that still fit, and
# adaptive extra rounds stop before a look that would not; default 900 on a runner without GPUs, the AMX runner's
# main job uses 600, docs/running.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$perfgate_root/ci/shard.sh"
perfgate_help_if_asked "${BASH_SOURCE[0]}" "$@"
shard_take_args "$@"
set -- ${perfgate_shard_args[@]+"${perfgate_shard_args[@]}"}

job_start=$SECONDS
"$perfgate_root/ci/setup.sh"
setup_seconds=$((SECONDS - job_start))
build_dir="${PERFGATE_BUILD_DIR:-$perfgate_root/build/perf}"
perfgate_configure "$build_dir" -DPERFGATE_BUILD_TESTS=OFF
perfgate_build "$build_dir"
build_seconds=$((SECONDS - job_start - setup_seconds))
report_dir="${PERFGATE_REPORT_DIR:-$build_dir}"

# Records this run's measurements (<build>/runs/*.current.json) into PERFGATE_HISTORY, after the gate so that
# the gate never learns from the run it judges. A run that measured nothing (exit 2) is not recorded. A failed
# recording is reported in the log and the report; the gate's exit code stands.
record_history() {
  local gate_rc="$1"
  [ -n "${PERFGATE_HISTORY:-}" ] && [ "${PERFGATE_HISTORY_RECORD:-1}" != 0 ] || return 0
  [ "$gate_rc" != 2 ] || return 0
  local files=("$report_dir"/runs/*.current.json)
  [ -e "${files[0]}" ] || return 0
  local commit branch
  commit="$(perfgate_commit)"
  branch="$(git -C "$perfgate_root" branch --show-current 2>/dev/null || true)"
  if ! "$build_dir/bin/perfgate" history record --commit "$commit" --branch "${branch:-detached}" "${files[@]}"; then
    echo "perf.sh: WARNING: could not record this run into the history $PERFGATE_HISTORY" >&2
    local report
    for report in "$report_dir/perf-report.md" "$report_dir/perf-summary.md"; do
      [ -f "$report" ] && printf '\n> **Warning:** this run was not recorded into the results history.\n' >> "$report"
    done
  fi
  return 0
}

# ---- hardware ----------------------------------------------------------------------------------
gpus="$(perfgate_gpu_count)"
cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
amx="no"; grep -qw amx_bf16 /proc/cpuinfo && amx="yes"
echo "perf.sh: $(nproc) CPU cores ($cpu_model, AMX: $amx), $gpus GPU(s)"

# ---- suites ------------------------------------------------------------------------------------
# Every built suite runs; a suite whose hardware is missing skips with its reason (GPU suites on a
# CPU machine), and the report lists it. Multi-GPU suites say how many GPUs they need (perfgate_add_suite GPUS,
# written to <build>/suites/<suite>.gpus): expert_parallel needs 2, so on a runner with one GPU it is measured
# only for its skips and gated nowhere, while a 2-, 4- or 8-GPU runner (class gpu-<model>-x<n>) gates it beside
# transfers' multi-GPU cases, both sized by the GPU count found at run time. The gate filters come from each
# suite's cases/gate.txt (and
# cases/relative.txt), which CMake joins into <build>/suites/<suite>.gate_filter (.relative_filter).
benches=()
filters=()
relative_filters=()
for bin in "$build_dir"/bin/bench_*; do
  [ -x "$bin" ] || continue
  suite="${bin##*/bench_}"
  if [ -n "${PERFGATE_SUITES:-}" ] && ! [[ " $PERFGATE_SUITES " == *" $suite "* ]]; then
    continue
  fi
  benches+=(--bench "$bin")
  filters+=("$(cat "$build_dir/suites/$suite.gate_filter")")
  relative_file="$build_dir/suites/$suite.relative_filter"
  [ -f "$relative_file" ] || relative_file="$build_dir/suites/$suite.gate_filter"
  relative_filters+=("$(cat "$relative_file")")
done
if [ ${#benches[@]} -eq 0 ]; then
  echo "perf.sh: no suite can run on this machine" >&2
  exit 77
fi
joined="$(IFS='|'; echo "${filters[*]}")"
joined_relative="$(IFS='|'; echo "${relative_filters[*]}")"
if [ -n "$perfgate_shard" ]; then shard_select; fi

run_args=(--rounds "${PERFGATE_ROUNDS:-3}" --repetitions "${PERFGATE_REPETITIONS:-5}" --min-time "${PERFGATE_MIN_TIME:-0.1}")
# SCHED_FIFO steadies CPU suites on a shared runner; it would starve a GPU driver's helper threads.
if [ "$gpus" -eq 0 ]; then run_args+=(--realtime); fi
# PERFGATE_PIN_CPUS=0 runs every bench process on CPU 0 (perfgate --pin-cpus): on a VM whose vCPUs differ
# in speed (the 2-vCPU runner: 20-25%, docs/running.md) it takes the vCPU lottery out of the comparison.
# Only for suites whose gated benchmarks use no more threads than CPUs pinned; record baselines the same way.
if [ -n "${PERFGATE_PIN_CPUS:-}" ]; then run_args+=(--pin-cpus "$PERFGATE_PIN_CPUS"); fi
# Against a reference build: 10 interleaved rounds (lora_backward's +10% detection needed 10, not 5;
# docs/statistics.md), on CPU 0 alone on a CPU runner, whose two vCPUs differ in speed by 20-25%
# (docs/running.md, --pin-cpus). PERFGATE_AB_PIN_CPUS="" leaves them unpinned.
# On a CPU runner lora_backward's processes take 15 repetitions: its set-up costs more than its repetitions, and its
# single-thread (floor-bound) benchmarks' fastest of 15 reaches the floor far more often than the fastest of 5 on a
# busy VM (docs/running.md, --against-repetitions). PERFGATE_AB_REPETITIONS="N or SUITE=N ..." sets it on any
# runner ("" = --repetitions for every suite).
ab_repetitions_default=""
if [ "$gpus" -eq 0 ]; then ab_repetitions_default="lora_backward=15"; fi
for r in ${PERFGATE_AB_REPETITIONS-$ab_repetitions_default}; do run_args+=(--against-repetitions "$r"); done
ab_pin_default=""
if [ "$gpus" -eq 0 ]; then ab_pin_default=0; fi
ab_pin="${PERFGATE_AB_PIN_CPUS-$ab_pin_default}"
if [ -n "$ab_pin" ]; then run_args+=(--against-pin-cpus "$ab_pin"); fi
# PERFGATE_AB_LANES="56;58;60;62" measures the rounds against the reference several at a time, one lane per CPU
# set, each round's two builds back to back on one lane (perfgate run --against-lanes; docs/running.md, "Lanes"):
# for single-threaded CPU suites. A runner without GPUs gets them by default (perfgate_default_lanes): "0;1" on 2
# CPUs, twice the rounds within its budget, each round's difference still taken on one CPU; on more, one lane per
# physical core but the first, at most 8. GPU suites keep one process at a time. Empty: no lanes.
ab_lanes_default=""
if [ "$gpus" -eq 0 ]; then ab_lanes_default="$(perfgate_default_lanes)"; fi
ab_lanes="${PERFGATE_AB_LANES-$ab_lanes_default}"
if [ -n "$ab_lanes" ]; then run_args+=(--against-lanes "$ab_lanes"); fi
# On lanes the rounds run in waves of one round per lane, so the default 10 is rounded up to fill the last wave
# (8 lanes: 16 rounds in the two waves that 10 would take).
ab_rounds="${PERFGATE_AB_ROUNDS:-10}"
if [ -z "${PERFGATE_AB_ROUNDS:-}" ] && [ -n "$ab_lanes" ]; then
  lane_count=$(( $(tr -cd ';' <<< "$ab_lanes" | wc -c) + 1 ))
  ab_rounds=$(( (ab_rounds + lane_count - 1) / lane_count * lane_count ))
fi
run_args+=(--against-rounds "$ab_rounds")
# The reference build is configured as this one was.
if [ -n "${PERFGATE_DEPS_PREFIX:-}" ]; then run_args+=("--reference-cmake-arg=-DCMAKE_PREFIX_PATH=$PERFGATE_DEPS_PREFIX"); fi
for arg in ${PERFGATE_CMAKE_ARGS:-}; do run_args+=("--reference-cmake-arg=$arg"); done

# A 2-core CPU runner's main job has 15 minutes: by default the confirm step and the adaptive extra rounds stop
# where they would pass them (PERFGATE_TIME_BUDGET="" turns that off).
time_budget_default=""
if [ "$gpus" -eq 0 ]; then time_budget_default=900; fi
time_budget="${PERFGATE_TIME_BUDGET-$time_budget_default}"
if [ -n "$time_budget" ]; then
  run_args+=(--time-budget "$(( time_budget > SECONDS - job_start ? time_budget - (SECONDS - job_start) : 1 ))")
fi
# Adaptive extra rounds may take at most F x the interleaved measurement (perfgate's default is 3x). Without a
# time budget F is 1.5, so that a cold reference build still leaves the CPU main job within 15 minutes; with one,
# the budget is the bound, and F = 5 lets the looks go on while undecided benchmarks and time remain (many lanes
# make a look cheap; docs/running.md, "Cost").
extra_time_factor_default=1.5
if [ -n "$time_budget" ]; then extra_time_factor_default=5; fi
run_args+=(--max-extra-time-factor "${PERFGATE_AB_EXTRA_TIME_FACTOR:-$extra_time_factor_default}")
# The case lists are the suites' gated sets: --update-baseline writes each whole, dropping what a list no longer names.
run_args+=(--replace-baseline)
# The summary (perf-summary.md) is what a pull-request comment and a job summary show; it links the full report
# (PERFGATE_REPORT_LINK, e.g. the artifact's URL; default: perf-report.md beside it), the dashboard
# (PERFGATE_DASHBOARD_LINK) and, as the full report does, the glossary under PERFGATE_DOCS_LINK (the repository's
# docs/ folder on the web; unset: the path from each file to perfgate's docs on this machine).
summary_args=(--summary "$report_dir/perf-summary.md")
if [ -n "${PERFGATE_REPORT_LINK:-}" ]; then summary_args+=(--report-link "$PERFGATE_REPORT_LINK"); fi
if [ -n "${PERFGATE_DASHBOARD_LINK:-}" ]; then summary_args+=(--dashboard-link "$PERFGATE_DASHBOARD_LINK"); fi
if [ -n "${PERFGATE_DOCS_LINK:-}" ]; then summary_args+=(--docs-link "$PERFGATE_DOCS_LINK"); fi
rm -f "$report_dir/perf-report.md" "$report_dir/perf-summary.md" "$report_dir"/runs/*.current.json
set +e
"$build_dir/bin/perfgate" run "${benches[@]}" --filter "($joined)" --relative-filter "($joined_relative)" "${run_args[@]}" \
  --baseline-dir "${PERFGATE_BASELINE_DIR:-$perfgate_root/baselines}" \
  --report-dir "$report_dir" --report-name perf-report "${summary_args[@]}" "$@"
rc=$?
set -e
gate_seconds=$((SECONDS - job_start - setup_seconds - build_seconds))
# A shard is recorded with its shard number, exit code and report, for the merge (ci/shard.sh).
if [ -n "$perfgate_shard" ]; then shard_record "$rc"; else record_history "$rc"; fi
steps="setup ${setup_seconds} s, configure and build ${build_seconds} s, gate ${gate_seconds} s (reference build included), total $((SECONDS - job_start)) s"
if [ -f "$report_dir/perf-report.md" ]; then
  printf '\n## Main job steps\n\nci/perf.sh wall time: %s.\n' "$steps" >> "$report_dir/perf-report.md"
fi
echo "perf.sh: steps: $steps"
echo "perf.sh: report: $report_dir/perf-report.md, summary: $report_dir/perf-summary.md (exit $rc)"
exit $rc

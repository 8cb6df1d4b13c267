#pragma once
// Differential profiles: why a confirmed regression happened (docs/profiling.md, "perfgate ab --explain").
// Each side's bench process is re-run alone under a profiler (profile_run.hpp), and the two profiles are
// compared here:
//   GPU suites: Nsight Compute (`ncu --csv --page raw`), per kernel, matched by name and launch order;
//   CPU suites: oneDNN's verbose log (ONEDNN_VERBOSE=1), per primitive and problem, which implementation
//               ran and for how long.
//   GPU suites also: the GPU timeline (timeline.hpp), recorded in a pass of its own with PERFGATE_TIMELINE, which
//               sees what a per-kernel profile cannot: lost overlap, idle gaps, launches, the critical path.
// The first finding of a diff is the likeliest cause, one line; the table of what changed is plain data, which
// report/ renders (render_profile_diff, report.hpp).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perfgate/timeline.hpp"

namespace perfgate {

// ---- oneDNN verbose -------------------------------------------------------------------------------

struct OnednnCall {
  std::string primitive;       // "matmul", "reorder", ...
  std::string implementation;  // "brg:avx512_core_amx_bf16", "jit:uni", "gemm:jit", ...
  std::string problem;         // "7x512:512x1024:7x1024"
  double ms = 0;
};

// The `onednn_verbose,exec,...` lines of a log (other output is ignored; oneDNN 2.x and 3.x layouts,
// with or without a timestamp field). An empty result means no primitive ran.
std::vector<OnednnCall> parse_onednn_verbose(std::string_view text);

// ---- Nsight Compute -------------------------------------------------------------------------------

struct KernelLaunch {
  std::string name;
  std::string block, grid;    // "(256, 1, 1)"
  double duration_ns = 0;     // gpu__time_duration.sum
  double sm_pct = -1;         // sm__throughput.avg.pct_of_peak_sustained_elapsed (-1: not measured)
  double dram_pct = -1;       // dram__throughput.avg.pct_of_peak_sustained_elapsed
  double occupancy_pct = -1;  // sm__warps_active.avg.pct_of_peak_sustained_active (achieved occupancy)
  double l2_hit_pct = -1;     // lts__t_sector_hit_rate.pct
  double registers = -1;      // launch__registers_per_thread
  double shared_bytes = -1;   // launch__shared_mem_per_block_static + _dynamic
};

// The metrics `ncu` is asked for (--metrics), so that parse_ncu_csv finds them.
std::string ncu_metrics();

// One row per kernel launch of `ncu --csv --page raw` output (the profiled program's own output may be
// interleaved). Throws std::invalid_argument when no ncu header is found, naming `source`.
std::vector<KernelLaunch> parse_ncu_csv(std::string_view text, const std::string& source);

// ---- differences ------------------------------------------------------------------------------------

// One oneDNN primitive and problem: the implementation that ran most on each side and the time of its calls.
struct OnednnRow {
  std::string primitive, problem;
  std::string before_impl, after_impl;  // before_impl "-": the problem did not run before
  int calls = 0;                        // after
  double before_ms = 0, after_ms = 0;
};

// One kernel's launches on one side: counts and sums, and the throughputs as duration-weighted means.
struct KernelSide {
  int launches = 0;
  double ns = 0;
  double sm_pct = 0, dram_pct = 0, occupancy_pct = 0, l2_hit_pct = 0;
  double registers = -1;
  std::string grid, block;
};
struct KernelRow {
  std::string name;
  std::optional<KernelSide> before, after;  // unset: the kernel did not run on that side
};

// One measured quantity on both sides (perf stat's counters, the process's own account).
struct QuantityRow {
  std::string what;
  double before = 0, after = 0;
};

struct ProfileDiff {
  std::vector<std::string> findings;  // likeliest cause first; empty when the profiles do not differ
  // What changed, as data: which table the diff has and its rows, largest time change first.
  enum class Table { none, onednn, kernels, counters, process_usage };
  Table table = Table::none;
  std::size_t calls_before = 0, calls_after = 0;  // oneDNN calls or kernel launches profiled per side
  std::vector<OnednnRow> onednn_rows;
  std::vector<KernelRow> kernel_rows;
  std::vector<QuantityRow> quantity_rows;  // counters, process_usage
  // The profiled work's summed time per side (kernels, oneDNN primitives), to check against the benchmark's
  // own change; negative when the profile had none.
  double before_total = -1, after_total = -1;
  bool has_table() const { return table != Table::none; }
};

ProfileDiff diff_onednn(const std::vector<OnednnCall>& before, const std::vector<OnednnCall>& after);
ProfileDiff diff_kernels(const std::vector<KernelLaunch>& before, const std::vector<KernelLaunch>& after);

// ---- hardware counters (perf stat) -----------------------------------------------------------------

struct CounterReading {
  std::string event;            // "cycles", "instructions", ...
  std::optional<double> value;  // nullopt: <not supported> / <not counted>
};
// `perf stat -x,` output (CSV: value,unit,event,...).
std::vector<CounterReading> parse_perf_stat(std::string_view text);
// IPC, cycles, cache misses before/after; empty findings when the counters were not permitted.
ProfileDiff diff_counters(const std::vector<CounterReading>& before, const std::vector<CounterReading>& after);

// ---- the lead line -------------------------------------------------------------------------------------

// Whether a profile's summed time explains the benchmark's wall-time change: `wall_change` and the profile's
// relative change have the same direction and the profile's is at least half of it. NaN wall change: yes.
bool profile_accounts_for(const ProfileDiff& profile, double wall_change);

// The findings of a GPU explanation, likeliest cause first. When the kernels' summed change accounts for the
// wall-time change (by the timeline where it was recorded, else by the kernel profile against `wall_change`),
// the kernel profile leads as before; otherwise the lead says that the per-kernel diff does not explain the
// wall-time change and names the timeline's largest cause (or, without a timeline, `timeline_missing`).
struct TimelineEvidence {
  bool recorded = false;
  bool kernels_explain = true;
  double span_before_ns = 0, span_after_ns = 0, kernels_before_ns = 0, kernels_after_ns = 0;
  std::vector<std::string> causes;  // the timeline's, largest first
};
// What the lead line needs of a timeline diff: both sides' span and kernel time, and its causes.
TimelineEvidence evidence_of_timeline(const timeline::TimelineDiff& diff);
std::vector<std::string> gpu_findings(const ProfileDiff& kernels, const TimelineEvidence& timeline,
                                      const std::string& timeline_missing, double wall_change);

// The same check on a CPU suite: oneDNN's primitives and the process's own account (CPU time, context
// switches, page faults) against the wall-time change.
struct ProcessUsage {
  double wall_s = -1, user_s = 0, system_s = 0;
  double voluntary_switches = 0, involuntary_switches = 0, minor_faults = 0, major_faults = 0, migrations = -1;
};
// The JSON a bench process writes with PERFGATE_RUSAGE=<file>. Throws std::invalid_argument naming `source`.
ProcessUsage parse_process_usage(std::string_view json, const std::string& source);
ProfileDiff diff_process_usage(const ProcessUsage& before, const ProcessUsage& after);
// The findings of a CPU explanation, likeliest cause first: oneDNN's (absent: nullopt), then perf stat's where
// it counted (`counters` with a table), else the process's own account. When oneDNN's primitives do not
// account for `wall_change`, the lead says so and names perf stat's (or getrusage's) first finding.
std::vector<std::string> cpu_findings(const std::optional<ProfileDiff>& onednn, const ProfileDiff& counters,
                                      const ProfileDiff& usage, double wall_change);

}  // namespace perfgate

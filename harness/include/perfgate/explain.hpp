#pragma once
// Differential profiles: why a confirmed regression happened (docs/profiling.md, "perfgate ab --explain").
// Each side's bench process is re-run alone under a profiler (profile_run.hpp), and the two profiles are
// compared here:
//   GPU suites: Nsight Compute (`ncu --csv --page raw`), per kernel, matched by name and launch order;
//   CPU suites: oneDNN's verbose log (ONEDNN_VERBOSE=1), per primitive and problem, which implementation
//               ran and for how long.
// The first finding of a diff is the likeliest cause, one line; the Markdown holds the whole table.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

struct ProfileDiff {
  std::vector<std::string> findings;  // likeliest cause first; empty when the profiles do not differ
  std::string markdown;               // a table of what changed
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

}  // namespace perfgate

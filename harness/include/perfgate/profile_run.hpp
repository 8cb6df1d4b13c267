#pragma once
// Re-running a confirmed regression under the profilers (docs/profiling.md, "perfgate ab --explain"): each
// side's bench process alone, once under each tool that fits, the raw profiles saved beside the report and
// diffed by explain.hpp.
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "perfgate/bench_binary.hpp"
#include "perfgate/explain.hpp"

namespace perfgate {

// ---- re-running a regression under the profilers ------------------------------------------------------

struct ExplainSide {
  std::string label;  // "before", "after"
  BenchBinary bench;
  std::vector<std::pair<std::string, std::string>> env;
};

struct ExplainOptions {
  std::filesystem::path out_dir;         // the profiles go here, next to the report
  bool gpu = false;                      // a GPU suite: Nsight Compute; else oneDNN verbose and perf stat
  std::string ncu;                       // path of ncu (empty: not found)
  std::string perf;                      // path of perf (empty: not found)
  std::vector<std::string> nvtx_ranges;  // the fixture's ranges: ncu profiles only kernels inside them
  std::vector<int> cpus;                 // pin the processes as the measurement was
  double timeout_seconds = 600;
  int ncu_launches = 2000;                                        // ncu --launch-count
  bool timeline = true;                                           // GPU suites: record and diff the GPU timeline
  double wall_change = std::numeric_limits<double>::quiet_NaN();  // the benchmark's time change (gate, relative)
};

struct Explanation {
  std::string benchmark;
  std::vector<std::string> findings;  // likeliest cause first
  std::string markdown;               // one section per tool
  std::vector<std::string> files;     // the raw profiles written
  std::vector<std::string> notes;     // tools missing, counters not permitted, a profile that failed
  std::vector<std::pair<std::string, std::string>> images;  // (side, file): a repetition of each side's timeline
  std::vector<std::pair<std::string, double>> seconds;      // (tool, wall seconds of its runs): the cost
  // Only the process's own account (getrusage) found anything: the measurement's own breakdown (the metric that
  // moved) is a better lead than it.
  bool process_account_only = false;
  // Why no tool could look inside the benchmark at all (a plain binary on a VM: no counters, no oneDNN, no process
  // account); empty when one did. The lead then says so instead of "no profile difference".
  std::string nothing_profiled;
};

// Re-runs one benchmark (raw name) alone, once per side, under the tools that fit, and diffs the profiles.
Explanation explain_benchmark(const std::string& raw_name, const std::string& name, const ExplainSide& before,
                              const ExplainSide& after, const ExplainOptions& options);

// The path of `tool` in a folder of `search_path` (PATH) or in /usr/local/cuda/bin; empty when absent.
std::string find_tool(const std::string& tool, const std::string& search_path);

}  // namespace perfgate

#pragma once
// The planted GPU slowdown every GPU suite shares: real extra work of a known size, to prove that the
// gate finds a change of that size (docs/running.md, "Planted slowdowns").
//
//   PERFGATE_GPU_SLOWDOWN=0.03            each selected benchmark does 3% more real work of its own kind
//   PERFGATE_GPU_SLOWDOWN_FILTER=REGEX    only benchmarks whose full name matches (std::regex_search)
//
// What "3% more work" means is the suite's business (docs/expert_gemm.md, transfers.md,
// streaming_prefetch.md); this file only reads, checks and reports the knob. Unset or 0: no extra work
// and no extra context key, so an unplanted result file is the same as before the knob existed.
#include <optional>
#include <regex>
#include <string>

namespace perfgate::bench {

inline constexpr const char* kGpuSlowdownVar = "PERFGATE_GPU_SLOWDOWN";
inline constexpr const char* kGpuSlowdownFilterVar = "PERFGATE_GPU_SLOWDOWN_FILTER";
// Largest fraction accepted: a planted change is meant to be small; 1.0 doubles the work.
inline constexpr double kGpuSlowdownMax = 1.0;

class GpuSlowdown {
 public:
  GpuSlowdown() = default;
  // Throws std::invalid_argument, naming the variable, when `fraction_text` is not a number in
  // [0, kGpuSlowdownMax] or `filter_text` is not a valid regex. nullptr / "" mean unset.
  static GpuSlowdown parse(const char* fraction_text, const char* filter_text);

  double fraction() const { return fraction_; }
  const std::string& filter() const { return filter_text_; }
  bool active() const { return fraction_ > 0.0; }
  // The fraction planted in `benchmark_name`: fraction() when active and the filter (if any) matches, else 0.
  double fraction_for(const std::string& benchmark_name) const;

 private:
  double fraction_ = 0.0;
  std::string filter_text_;
  std::optional<std::regex> filter_;
};

// The process's knob, read from the environment once. A bad value prints an error naming the variable
// and exits 2 (bad input); every GPU suite reads it from its context hook, before any benchmark runs.
const GpuSlowdown& gpu_slowdown();

// Context hook: when the knob is active, "perfgate.gpu_slowdown" (the fraction) and
// "perfgate.gpu_slowdown_filter" (the regex, or "all") go into the JSON context.
void add_gpu_slowdown_context();

}  // namespace perfgate::bench
